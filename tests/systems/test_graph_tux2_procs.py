"""TuX2 on real worker processes: exact BSP, the SSP bound across processes, clean shutdown."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hwcosim.models.systems.graph.tux2 import Bipartite, TuX2Engine
from hwcosim.models.systems.graph.tux2_algos import (
    LDA,
    LR,
    MF,
    bars_corpus,
    digits_lr,
    plain_lr,
    plain_mf,
    synthetic_ratings,
)

ROOT = Path(__file__).resolve().parents[2]
# BSP tolerance: the processes' BSP differs from the serial reference only in the order in which
# the two workers' float64 deltas are added to a shared master row (x + d0 + d1 vs x + d1 + d0, plus
# the (new - read) rounding the simulated engine has too): a few ulp (~1e-16 of values of order 1)
# per clock, over <= 12 clocks of a contracting gradient descent. 1e-9 leaves 10^6 of margin for
# that and is still far below a single lost or doubled delta (lr * gradient, >= 1e-4 here).
BSP_ATOL = 1e-9


@pytest.fixture(scope="module")
def ratings():
    return synthetic_ratings(120, 80, seed=1)


def _segment_exists(name: str) -> bool:
    """POSIX shared memory segments are files under /dev/shm on Linux."""
    return os.path.exists(f"/dev/shm/{name.lstrip('/')}")


needs_dev_shm = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="POSIX shared memory listed in /dev/shm")


def test_bsp_processes_equal_serial_lr():
    g = digits_lr()
    w, losses = plain_lr(g, lr=0.5, epochs=6, batches=1)
    r = TuX2Engine(g, 2).run(LR(lr=0.5), staleness=0, epochs=6, executor="processes")
    np.testing.assert_allclose(r.state["b"]["w"], w, rtol=0, atol=BSP_ATOL)
    assert abs(r.history[-1]["loss"] - losses[-1]) < BSP_ATOL
    assert r.staleness_reads == {0: 2 * 6} and r.history[-1]["clock"] == 6
    assert abs(losses[-1] - losses[-2]) > 1e3 * BSP_ATOL   # one clock less would fail the check


def test_bsp_processes_equal_serial_mf(ratings):
    P, Q, losses = plain_mf(ratings, lr=0.05, epochs=8, batches=1, seed=5)
    r = TuX2Engine(ratings, 2, seed=5).run(MF(lr=0.05), staleness=0, epochs=8, executor="processes")
    np.testing.assert_allclose(r.state["a"]["p"], P, rtol=0, atol=BSP_ATOL)
    np.testing.assert_allclose(r.state["b"]["q"], Q, rtol=0, atol=BSP_ATOL)
    assert abs(r.history[-1]["loss"] - losses[-1]) < BSP_ATOL


def test_bsp_processes_equal_simulated_minibatch(ratings):
    """With several mini-batches per epoch BSP processes = the simulated BSP engine (same clocks)."""
    eng = TuX2Engine(ratings, 2, seed=2)
    sim = eng.run(MF(lr=0.05), staleness=0, epochs=3, batches=4)
    pr = eng.run(MF(lr=0.05), staleness=0, epochs=3, batches=4, executor="processes")
    for side, n in (("a", "p"), ("b", "q")):
        np.testing.assert_allclose(pr.state[side][n], sim.state[side][n], rtol=0, atol=BSP_ATOL)
    assert pr.trace["start_method"] in mp.get_all_start_methods()


def test_bsp_processes_vertex_cut(ratings):
    """Mirrors on both sides (vertex-cut splits users too): every worker's deltas land exactly once."""
    P, Q, _ = plain_mf(ratings, lr=0.05, epochs=4, batches=1)
    eng = TuX2Engine(ratings, 2, partitioner="vertex-cut")
    r = eng.run(MF(lr=0.05), staleness=0, epochs=4, executor="processes")
    assert eng.a_split > 0
    np.testing.assert_allclose(r.state["a"]["p"], P, rtol=0, atol=BSP_ATOL)
    np.testing.assert_allclose(r.state["b"]["q"], Q, rtol=0, atol=BSP_ATOL)


def test_lda_processes():
    """LDA: edge state (topics) in shared memory, GlobalSync totals; BSP = simulated BSP token for token."""
    g = bars_corpus(60, 20, seed=0)
    eng = TuX2Engine(g, 2)
    sim = eng.run(LDA(), staleness=0, epochs=3, batches=2)
    pr = eng.run(LDA(), staleness=0, epochs=3, batches=2, executor="processes")
    np.testing.assert_array_equal(pr.state["e"]["z"], sim.state["e"]["z"])        # same samples (counts exact)
    np.testing.assert_array_equal(pr.state["b"]["nwk"], sim.state["b"]["nwk"])
    ssp = eng.run(LDA(), staleness=2, epochs=3, batches=2, executor="processes").state
    assert ssp["a"]["ndk"].sum() == g.m and (ssp["b"]["nwk"] >= 0).all()
    np.testing.assert_array_equal(ssp["g"]["nk"], ssp["b"]["nwk"].sum(0))          # GlobalSync keeps totals exact
    np.testing.assert_array_equal(ssp["a"]["ndk"].sum(1), np.bincount(g.a, minlength=g.n_a))


@pytest.mark.parametrize("s", [0, 1, 2])
def test_staleness_bound_across_processes(ratings, s):
    """Every worker logs min(clocks) when it starts each clock: c - min_clock <= s for all records."""
    C = 5 * 4
    r = TuX2Engine(ratings, 2).run(MF(lr=0.2), staleness=s, epochs=5, batches=4, executor="processes")
    mins = r.trace["min_clock"]
    assert mins.shape == (2, C) and (mins >= 0).all()                  # every clock of every worker logged
    lag = np.arange(C)[None, :] - mins
    assert (lag <= s).all(), f"staleness bound {s} violated: {lag.max()}"
    assert (lag >= 0).all()
    assert r.max_staleness == lag.max() and sum(r.staleness_reads.values()) == 2 * C
    # start/end times: each worker's clocks run in order, each ends after it starts
    st, en = r.trace["start"], r.trace["end"]
    assert (en > st).all() and (np.diff(st, axis=1) > 0).all()
    assert (r.trace["cpu_s"] > 0).all() and r.trace["cpu_s"].sum() < 2 * en.max() + 0.5  # real work, each <= wall
    # whether a worker gets ahead at all depends on the host's scheduling; the held straggler below
    # makes the bound reached for certain
    # real updates: the run converges about as far as serial mini-batch GD (RMSE 1.01 -> 0.33)
    loss = [h["loss"] for h in r.history]
    plain = plain_mf(ratings, lr=0.2, epochs=5, batches=4)[2]
    assert loss[-1] < 0.5 * loss[0] and loss[-1] < 1.1 * plain[-1]


@pytest.mark.parametrize("s", [0, 1, 2])
def test_held_straggler_reaches_the_bound_exactly(ratings, s):
    """Worker 1 held at every clock until worker 0 is done or blocked: worker 0 runs exactly s clocks
    ahead (lag s on every clock from s on, never s + 1), whatever the host's scheduling."""
    C = 3 * 4
    r = TuX2Engine(ratings, 2).run(MF(lr=0.2), staleness=s, epochs=3, batches=4, executor="processes",
                                   straggler=1)
    lag = np.arange(C)[None, :] - r.trace["min_clock"]
    assert lag.max() == s and r.max_staleness == s
    # worker 0 starts clock c once worker 1 has pushed clock c - s - 1 (it was blocked until then)
    np.testing.assert_array_equal(lag[0, s:], s)
    np.testing.assert_array_equal(lag[0, :s], np.arange(s))
    assert (lag[1] == 0).all()                                         # the straggler is always the slowest
    loss = [h["loss"] for h in r.history]                             # real updates: as far as serial GD
    plain = plain_mf(ratings, lr=0.2, epochs=3, batches=4)[2]
    assert loss[-1] < 1.1 * plain[-1] and plain[-1] < 0.75 * loss[0]


def test_straggler_bad_input(ratings):
    with pytest.raises(ValueError, match="worker index in 0..1"):
        TuX2Engine(ratings, 2).run(MF(), staleness=1, epochs=1, executor="processes", straggler=2)
    with pytest.raises(ValueError, match="option of the processes and dask executors"):
        TuX2Engine(ratings, 2).run(MF(), staleness=1, epochs=1, executor="threads", straggler=0)


@needs_dev_shm
def test_worker_error_cleans_up(monkeypatch):
    """A worker that raises: the error (with its traceback) surfaces, no process or segment remains."""
    import hwcosim.models.systems.graph.tux2_procs as tp

    created = []

    def shared_memory(*args, **kw):
        seg = tp.SharedMemory.__wrapped__(*args, **kw)
        created.append(seg.name)
        return seg

    shared_memory.__wrapped__ = tp.SharedMemory
    monkeypatch.setattr(tp, "SharedMemory", shared_memory)
    g = Bipartite(20, 10, np.arange(20), np.arange(20) % 10)          # no "r" ratings: MF fails in the worker
    with pytest.raises(RuntimeError, match="KeyError"):
        TuX2Engine(g, 2).run(MF(), staleness=1, epochs=3, executor="processes")
    assert [p for p in mp.active_children() if p.name.startswith("tux2-worker")] == []
    assert len(created) == 2 and not any(_segment_exists(n) for n in created)   # masters and graph blocks


def test_unpicklable_program(ratings):
    class Inner(MF):
        pass

    with pytest.raises(ValueError, match="pickled"):
        TuX2Engine(ratings, 2).run(Inner(), executor="processes")
    with pytest.raises(ValueError, match="start method"):
        TuX2Engine(ratings, 2).run(MF(), executor="processes", start_method="teleport")


@needs_dev_shm
def _hang_report(p, psutil) -> str:
    """What a process tree that did not exit is doing: each process's state, and the parent's Python stacks."""
    lines = []
    with contextlib.suppress(psutil.Error):
        for c in [psutil.Process(p.pid)] + psutil.Process(p.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                lines.append(f"pid {c.pid} {c.status()} {' '.join(c.cmdline())[:160]}")
    if p.poll() is None:
        p.send_signal(signal.SIGUSR1)                   # faulthandler in the script dumps every thread
        time.sleep(1.0)
        p.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
        _, err = p.communicate(timeout=10)
        lines.append(err or "")
    return "\n".join(lines)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupt_leaves_no_orphans(tmp_path, sig):
    """SIGINT (Ctrl-C) or SIGKILL to the parent mid-run: every worker (and helper) process ends, shm unlinked.

    On SIGINT the parent shuts the workers down itself; on SIGKILL it cannot: the workers see
    their parent's sentinel and exit, and the resource tracker unlinks the segment. (The tracker would
    also unlink a segment the parent forgot; that the executor unlinks it itself is checked
    in-process by :func:`test_worker_error_cleans_up`.)
    """
    psutil = pytest.importorskip("psutil")
    script = tmp_path / "long_run.py"
    script.write_text(textwrap.dedent("""
        import faulthandler
        import signal
        import sys

        from hwcosim.models.systems.graph.tux2 import TuX2Engine
        from hwcosim.models.systems.graph.tux2_algos import MF, synthetic_ratings

        if __name__ == "__main__":
            print(f"SIGINT handler at start: {signal.getsignal(signal.SIGINT)!r}", file=sys.stderr, flush=True)
            faulthandler.register(signal.SIGUSR1, all_threads=True)   # the test asks for a stack dump on a hang
            g = synthetic_ratings(200, 100, seed=1)
            TuX2Engine(g, 2).run(MF(), staleness=1, epochs=10 ** 6, batches=4, executor="processes",
                                 record=False)
    """))
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    # Ctrl-C as in a terminal: SIGINT at its default disposition in the child (a pytest-xdist worker
    # can have it ignored, and a child inherits that: the run then rightly ignores the signal)
    p = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, env=env, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        proc = psutil.Process(p.pid)
        deadline = time.monotonic() + 60
        family: list = []
        while time.monotonic() < deadline and len(family) < 4:  # resource tracker, forkserver, 2 workers
            family = proc.children(recursive=True)
            time.sleep(0.1)
        assert len(family) >= 4, "the worker processes did not start"
        time.sleep(1.0)                                            # let them compute a while
        family = proc.children(recursive=True)
        segments = {Path(m.path).name for c in family for m in c.memory_maps(grouped=False)
                    if "/psm_" in m.path}
        assert len(segments) == 2, segments                         # the masters and the graph blocks
        p.send_signal(sig)
        try:
            _, err = p.communicate(timeout=60)  # stderr closes once every worker has exited
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 60 s after signal {sig!r}:\n{_hang_report(p, psutil)}")
    finally:
        if p.poll() is None:
            p.kill()
    assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT)
    end = time.monotonic() + 10
    alive = family
    while alive and time.monotonic() < end:
        alive = [c for c in family if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    assert alive == []
    assert not any(_segment_exists(n) for n in segments)


def test_cli_tux2_executor(tmp_path):
    import json

    from hwcosim.cosim.cli.graph import main

    assert main(["tux2", "--algo", "mf", "--staleness", "1", "--workers", "2", "--epochs", "2", "--executor",
                 "processes", "-o", str(tmp_path)]) == 0
    a = json.loads((tmp_path / "tux2_mf_s1_w2.json").read_text())["algos"]["mf"]
    assert a["executor"] == "processes" and set(a["processes_runs"]) == {"0", "1"}
    assert a["processes_runs"]["1"]["max_staleness"] <= 1 and "threads_runs" not in a
    assert main(["tux2", "--algo", "mf", "--epochs", "1", "--executor", "simulated", "-o", str(tmp_path)]) == 0
    assert main(["tux2", "--executor", "mpi", "-o", str(tmp_path)]) == 2
    assert main(["tux2-procs", "--workers", "0", "-o", str(tmp_path)]) == 2
    assert main(["tux2-procs", "--repeats", "x", "-o", str(tmp_path)]) == 2


def test_bench_tux2_procs_tiny(tmp_path, monkeypatch):
    """The measured bench on tiny problems: JSON + PNG, per-staleness medians, BSP = simulated BSP."""
    import json

    import hwcosim.models.systems.graph.tux2_procs as tp
    from hwcosim.cosim.flow.bench import BENCHES
    from hwcosim.models.systems.graph.bench import bench_tux2_procs

    assert "tux2_procs" in BENCHES
    tiny = {"mf": (synthetic_ratings(60, 40, seed=0), MF(lr=0.2), 3, 2), "lr": (digits_lr(), LR(lr=0.5), 2, 2)}
    monkeypatch.setattr(tp, "_proc_setup", lambda algo, quick, seed: tiny[algo])
    res = bench_tux2_procs(tmp_path, True, repeats=1, sharing_scales=(8,))
    on_disk = json.loads((tmp_path / "tux2_procs.json").read_text())
    assert (tmp_path / "tux2_procs.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "tux2_graph_sharing.png").read_bytes()[:4] == b"\x89PNG"
    assert [r["scale"] for r in on_disk["graph_sharing"]["scales"]] == [8]
    assert set(on_disk["algos"]) == {"mf", "lr"} and len(on_disk["host"]["loadavg_start"]) == 3
    for a in res["algos"].values():
        assert set(a["summary"]) == {"0", "1", "2", "4"} and all(len(v) == 1 for v in a["runs"].values())
        assert a["bsp_max_abs_diff_vs_simulated"] < BSP_ATOL
        assert a["summary"]["0"]["speedup_vs_bsp_to_target"] == 1.0
        for s, v in a["runs"].items():
            assert all(r["max_staleness"] <= int(s) and r["wall_s_to_target"] is not None for r in v)


class _WritesGraph(MF):
    """An MF whose exchange tries to modify the graph's ratings (module level: picklable)."""

    def gradients(self, bt, view):
        bt.g.edata["r"][bt.e[:1]] = 0.0
        return super().gradients(bt, view)


def test_graph_shared_read_only_views(ratings):
    """With the graph shared, a worker's graph is the read-only shared block: a write fails there;
    with the pickled copy (share_graph=False) the same write goes to the worker's private copy."""
    from hwcosim.models.systems.graph.tux2_procs import run_processes

    eng = TuX2Engine(ratings, 2)
    prog = _WritesGraph(lr=0.05)

    def go(share):
        master = prog.init(ratings, np.random.default_rng(0))
        return run_processes(eng, prog, master | {"g": {}, "e": {}}, 0, 2, 1, False, share_graph=share)

    with pytest.raises(RuntimeError, match="read-only"):
        go(True)
    r = go(False)
    assert r.trace["share_graph"] is False and r.trace["setup"]["graph_block_bytes"] == 0
    assert (ratings.edata["r"] != 0).all()          # the parent's graph is untouched either way


def test_graph_shared_equals_pickled(ratings):
    """The shared and the pickled graph give the same BSP run (float addition order aside)."""
    from hwcosim.models.systems.graph.tux2_procs import run_processes

    eng = TuX2Engine(ratings, 2, seed=3)
    out = {}
    for share in (True, False):
        master = MF(lr=0.05).init(ratings, np.random.default_rng(3))
        out[share] = run_processes(eng, MF(lr=0.05), master | {"g": {}, "e": {}}, 0, 6, 3, True,
                                   share_graph=share, probe_memory=True)
    for side, n in (("a", "p"), ("b", "q")):
        np.testing.assert_allclose(out[True].state[side][n], out[False].state[side][n], rtol=0, atol=BSP_ATOL)
    assert out[True].trace["setup"]["graph_block_bytes"] >= ratings.m * 3 * 8     # a, b, r and the edge lists
    for r in out.values():
        mem = r.trace["worker_memory"]
        assert len(mem) == 2 and all(0 < m["uss"] <= m["rss"] for m in mem)
        st = r.trace["setup"]                          # every worker stamped its start-up steps, in order
        for a, b, c in zip(st["worker_entered_s"], st["worker_engine_ready_s"], st["worker_batches_built_s"]):
            assert 0 < a <= b <= c


def test_graph_sharing_study_tiny():
    from hwcosim.models.systems.graph.tux2_procs import graph_sharing_study

    res = graph_sharing_study((8,), workers=2, batches=2)
    (row,) = res["scales"]
    assert row["edges"] == 16 * 256 and set(row["runs"]) == {"pickled", "shared"}
    assert row["engine_shell_pickle_bytes"] < row["graph_bytes"] < row["engine_pickle_bytes"]
    assert row["max_abs_diff_shared_vs_pickled"] < BSP_ATOL
    assert len(res["host"]["loadavg_start"]) == 3
    for r in row["runs"].values():
        assert r["startup_s"] > 0 and len(r["worker_memory"]) == 2 and r["final_rmse"] > 0


def test_bench_tux2_measures_processes(tmp_path, monkeypatch):
    """hwcosim graph tux2-bench: every staleness also runs on real worker processes (loss vs wall s)."""
    import json

    import hwcosim.models.systems.graph.tux2_algos as ta
    from hwcosim.models.systems.graph.bench import bench_tux2

    real_setup = ta._setup

    def tiny(algo, quick, seed):
        g, prog, plain, _, _ = real_setup(algo, quick, seed)
        if algo == "mf":
            g = synthetic_ratings(60, 40, seed=seed)
        elif algo == "lda":
            g = bars_corpus(30, 10, seed=seed)
        return g, prog, plain, 2, 1          # 1 batch per epoch: BSP is full-batch, whatever the worker count

    monkeypatch.setattr(ta, "_setup", tiny)
    bench_tux2(tmp_path, True, real_workers=2)
    res = json.loads((tmp_path / "tux2.json").read_text())
    assert (tmp_path / "tux2.png").read_bytes()[:4] == b"\x89PNG"
    assert res["real_executor"] == "processes" and res["real_is_measured"] and res["real_workers"] == 2
    for algo, a in res["algos"].items():
        pr = a["processes_runs"]
        assert set(pr) == set(a["runs"]) == {"0", "1", "2", "4"} and "threads_runs" not in a
        assert a["processes_partitioning"]["k"] == 2 and a["partitioning"]["k"] == 4
        for s, r in pr.items():
            assert r["max_staleness"] <= int(s) and len(r["loadavg_1min"]) == 2
            assert [h["clock"] for h in r["history"]][-1] == 2 and r["wall_time"] > 0
        if algo != "lda":   # LDA samples with per-(worker, clock) generators: worker count changes the draws
            assert abs(pr["0"]["final_loss"] - a["runs"]["0"]["final_loss"]) < BSP_ATOL

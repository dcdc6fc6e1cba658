"""``hwcosim sweep``: spec validation, Pareto fronts, caching/resume on a Dask LocalCluster, and a
real 2-point BBS sweep whose rerun is served from the cache."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.flow import sweep
from hwcosim.cosim.flow.runner import SimFailure

SPECS = sorted((Path(sweep.__file__).parent / "sweeps").glob("*.toml"))
SMALL = {"rows": 16, "cols": 32, "banks": 4, "sparsity": 0.5}


def _spec(**grid):
    return sweep.SweepSpec(design="bbs-spmxv", params=dict(SMALL), grid=grid or {"pes": [2, 4]}, name="t")


# ---- Pareto front ------------------------------------------------------------------------------------
def test_pareto_front_min_max():
    pts = [{"m": {"cost": c, "perf": p}} for c, p in [(1, 1.0), (2, 3.0), (3, 2.0), (4, 5.0), (4, 4.0), (5, 5.0)]]
    front = sweep.pareto_front(pts, [("m.cost", "min"), ("m.perf", "max")])
    # (3, 2) is beaten by (2, 3); (4, 4) by (4, 5); (5, 5) by (4, 5)
    assert front == [0, 1, 3]


def test_pareto_front_both_min_ties_and_missing():
    pts = [{"x": 1, "y": 5}, {"x": 1, "y": 5}, {"x": 2, "y": 2}, {"x": 3, "y": 2}, {"x": 5, "y": 1},
           {"x": 0}, {"x": "a", "y": 0}]
    front = sweep.pareto_front(pts, [("x", "min"), ("y", "min")])
    assert front == [0, 1, 2, 4]  # equal points both kept; incomplete/non-numeric points left out
    with pytest.raises(ValueError, match="min' or 'max"):
        sweep.pareto_front(pts, [("x", "up")])


def test_pareto_front_three_objectives():
    pts = [{"a": 1, "b": 1, "c": 1}, {"a": 0, "b": 2, "c": 1}, {"a": 2, "b": 2, "c": 0}, {"a": 2, "b": 2, "c": 2}]
    assert sweep.pareto_front(pts, [("a", "min"), ("b", "min"), ("c", "min")]) == [0, 1, 2]


# ---- spec validation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_specs_are_valid(path):
    ad, points = sweep.expand(sweep.load_spec(path))
    assert len(points) >= 2 and ad.design in sweep.ADAPTERS


def test_bbs_k_follows_sparsity():
    _, pts = sweep.expand(sweep.SweepSpec(design="bbs-spmxv", params={"rows": 16, "cols": 32},
                                          grid={"banks": [4, 8], "sparsity": [0.5, 0.75]}))
    assert [(p.params.banks, p.params.k) for p in pts] == [(4, 4), (4, 2), (8, 2), (8, 1)]


@pytest.mark.parametrize("argv,msg", [
    (["nosuch"], "unknown design 'nosuch'"),
    (["fss-gemm"], "has no sweep workload"),
    (["bbs-spmxv", "--grid", "pez=2,4"], "no parameter 'pez'"),
    (["bbs-spmxv", "--grid", "pes=2,x"], "pes='x': expected an int"),
    (["bbs-spmxv", "--set", "rows=16", "--set", "cols=32", "--grid", "pes=3"], "16 rows do not split over 3 PEs"),
    (["bbs-spmxv", "--grid", "sparsity=0.5,0.99"], "sparsity 0.99 is impossible"),
    (["bbs-spmxv", "--grid", "pes=2,2"], "repeats a value"),
    (["melo-engine", "--grid", "loss=0.1,1.5"], "loss=1.5: a probability"),
    (["kvdirect-pipeline", "--set", "dist=normal"], "choose one of uniform, zipf"),
    (["bbs-spmxv", "--synth", "asic"], "unknown synthesis target 'asic'"),
    (["bbs-spmxv", "--workers", "0"], "--workers 0: out of range"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, msg):
    assert main(["sweep", *argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and msg in err and "\n" not in err, err
    assert not (tmp_path / "out" / "sweep.json").exists()


@pytest.mark.parametrize("text,msg", [
    ("design = 'bbs-spmxv'\n[grid]\npes = 4\n", "grid.pes must be a non-empty list"),
    ("design = 'bbs-spmxv'\ncolour = 1\n", "unknown key(s) colour"),
    ("[grid]\npes = [2]\n", "needs design ="),
    ("design = 'bbs-spmxv'\n[grid\n", "not valid TOML"),
    ("design = 'bbs-spmxv'\nclock_mhz = -5\n", "clock_mhz must be a positive number"),
])
def test_bad_spec_file_exits_2(tmp_path, capsys, text, msg):
    f = tmp_path / "s.toml"
    f.write_text(text)
    assert main(["sweep", str(f), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert msg in err, err


# ---- Dask plumbing, cache and resume, with a stand-in simulation (no simulator needed) ---------------------
def _fake_adapter(monkeypatch, calls: list, fail_pes=()):
    ad = sweep.ADAPTERS["bbs-spmxv"]

    def simulate(p, w, sim, test_dir):
        calls.append(p.pes)
        if p.pes in fail_pes:
            raise SimFailure(f"bbs_spmxv: 1 of 1 cocotb tests failed (stand-in mismatch at P={p.pes})")
        cycles = p.row_groups * p.k * int(w["vectors"]) + 7 * p.pes  # a made-up but parameter-dependent count
        ideal = p.row_groups * p.k * int(w["vectors"])
        return {"cycles": cycles, "ideal": ideal, "utilisation": ideal / cycles, "mismatches": 0}

    monkeypatch.setitem(sweep.ADAPTERS, "bbs-spmxv", dataclasses.replace(ad, simulate=simulate))


def test_cache_resume_and_failed_points(tmp_path, monkeypatch):
    calls = []
    _fake_adapter(monkeypatch, calls, fail_pes=(4,))
    spec = _spec(pes=[2, 4, 8])
    rep = sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False)
    assert sorted(calls) == [2, 4, 8]
    by = {r["point"]["pes"]: r for r in rep["points"]}
    assert by[4]["status"] == "failed" and "stand-in mismatch" in by[4]["error"]
    assert by[2]["status"] == by[8]["status"] == "ok"
    assert by[8]["metrics"]["cycles"] == 16 // 8 * 4 * 4 + 56
    assert rep["counts"] == {"ok": 2, "failed": 1, "pending": 0}
    on_disk = json.loads((tmp_path / "sweep.json").read_text())
    assert on_disk["counts"] == rep["counts"] and len(on_disk["points"]) == 3
    assert sorted(p.name for p in (tmp_path / "cache").glob("sim-*.json")).__len__() == 2  # failures not cached
    assert all((tmp_path / name).exists() for name in rep["plots"]) and rep["plots"]

    # rerun after "fixing" the failing point: only that point runs again, the rest comes from the cache
    calls.clear()
    _fake_adapter(monkeypatch, calls)
    rep2 = sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False, plots=False)
    assert calls == [4]
    assert rep2["counts"]["ok"] == 3 and rep2["cached_points"] == 2
    by2 = {r["point"]["pes"]: r for r in rep2["points"]}
    assert by2[2]["cached"]["sim"] and by2[8]["cached"]["sim"] and not by2[4]["cached"]["sim"]
    assert by2[8]["metrics"] == by[8]["metrics"]

    # a third run simulates nothing; --force runs everything again
    calls.clear()
    sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False, plots=False)
    assert calls == []
    sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False, plots=False, force=True)
    assert sorted(calls) == [2, 4, 8]


def test_cache_key_changes_with_workload_and_params(tmp_path, monkeypatch):
    calls = []
    _fake_adapter(monkeypatch, calls)
    kw = {"workers": 1, "processes": False, "progress": False, "plots": False}
    sweep.run_sweep(_spec(pes=[2]), tmp_path, **kw)
    spec = _spec(pes=[2])
    spec.workload = {"vectors": 3}
    sweep.run_sweep(spec, tmp_path, **kw)
    spec = _spec(pes=[2])
    spec.params["rows"] = 32
    sweep.run_sweep(spec, tmp_path, **kw)
    sweep.run_sweep(_spec(pes=[2]), tmp_path, **kw)  # the first point again: cached
    assert calls == [2, 2, 2]
    assert len(list((tmp_path / "cache").glob("sim-*.json"))) == 3


# ---- a real sweep: 2 BBS points on a LocalCluster, rerun from the cache -----------------------------------
@pytest.mark.sim
def test_bbs_two_point_sweep_then_cached(tmp_path, monkeypatch, capsys):
    sim = "icarus" if shutil.which("iverilog") else "verilator"  # Icarus compiles instantly
    spec = _spec(pes=[2, 4])
    spec.sim = sim
    rep = sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False)
    assert rep["counts"] == {"ok": 2, "failed": 0, "pending": 0}, [r.get("error") for r in rep["points"]]
    assert rep["complete"] and rep["sim"] == sim
    by = {r["point"]["pes"]: r for r in rep["points"]}
    for pes, r in by.items():
        m = r["metrics"]
        assert m["mismatches"] == 0 and m["k"] == 4 and m["multipliers"] == pes * 4
        assert m["ideal_cycles"] == 16 // pes * 4 * 4  # row groups x k x vectors
        assert m["ideal_cycles"] <= m["cycles"] < m["ideal_cycles"] + 40
        assert m["gops"] == pytest.approx(2 * 16 * 4 * 4 * 4 / (m["cycles"] / 200e6) / 1e9)
        assert not r["cached"]["sim"]
    assert by[4]["metrics"]["cycles"] < by[2]["metrics"]["cycles"]  # more PEs, fewer cycles
    assert json.loads((tmp_path / "sweep.json").read_text())["counts"]["ok"] == 2
    assert (tmp_path / "pareto_cycles_vs_multipliers.png").stat().st_size > 1000
    from hwcosim.cosim.cli import main

    for run in (tmp_path / "runs").iterdir():  # every point's run folder re-verifies without simulating
        assert main(["check", str(run)]) == 0, capsys.readouterr().err

    # the rerun takes both points from the cache: any simulation attempt would fail the test
    def boom(*a, **k):
        raise AssertionError("simulated a cached point")

    monkeypatch.setitem(sweep.ADAPTERS, "bbs-spmxv", dataclasses.replace(sweep.ADAPTERS["bbs-spmxv"], simulate=boom))
    runs_before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    rep2 = sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False, plots=False)
    assert rep2["cached_points"] == 2 and rep2["counts"]["ok"] == 2
    assert all(r["cached"]["sim"] for r in rep2["points"])
    assert [r["metrics"] for r in rep2["points"]] == [r["metrics"] for r in rep["points"]]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == runs_before


# ---- interrupt and resume; the bench; a LocalCluster of processes ------------------------------------------
def test_interrupt_writes_a_partial_sweep_and_a_rerun_resumes(tmp_path, monkeypatch):
    calls = []
    _fake_adapter(monkeypatch, calls)
    spec = _spec(pes=[2, 4, 8])
    seen = []

    def advance(self, msg):  # Ctrl-C right after the first point has finished (and been cached)
        seen.append(msg)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep._progress, "_advance", advance)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False)
    part = json.loads((tmp_path / "sweep.json").read_text())
    assert not part["complete"] and part["counts"]["ok"] == 1 and part["counts"]["pending"] == 2
    assert len(seen) == 1 and len(list((tmp_path / "cache").glob("sim-*.json"))) == 1
    done = next(r["point"]["pes"] for r in part["points"] if r["status"] == "ok")

    monkeypatch.undo()
    calls2 = []
    _fake_adapter(monkeypatch, calls2)
    rep = sweep.run_sweep(spec, tmp_path, workers=1, processes=False, progress=False, plots=False)
    assert rep["complete"] and rep["counts"]["ok"] == 3 and rep["cached_points"] == 1
    assert sorted(calls2) == sorted({2, 4, 8} - {done})


def test_bench_sweeps_writes_every_sweep_and_a_summary(tmp_path, monkeypatch):
    calls = []
    _fake_adapter(monkeypatch, calls)
    monkeypatch.setattr(sweep, "rtl_digest", lambda design, params: sweep._key(repr(params)))  # no RTLIL: fast
    s = sweep.bench_sweeps(tmp_path, quick=True, workers=1, processes=False, specs=("bbs_small",), synth=None)
    shipped = sweep.load_spec(Path(sweep.__file__).parent / "sweeps" / "bbs_small.toml")
    n_full = len(shipped.grid["pes"]) * len(shipped.grid["banks"]) * len(shipped.grid["sparsity"])
    b = s["sweeps"]["bbs_small"]
    assert len(b["rows"]) == len(calls) == 8 < n_full  # quick: first and last value of every axis
    assert {r["pes"] for r in b["rows"]} == {shipped.grid["pes"][0], shipped.grid["pes"][-1]}
    assert b["counts"] == {"ok": 8, "failed": 0, "pending": 0} and all(r["cycles"] for r in b["rows"])
    assert json.loads((tmp_path / "sweeps.json").read_text())["sweeps"]["bbs_small"]["counts"] == b["counts"]
    assert b["plots"] and all((tmp_path / p).stat().st_size > 1000 for p in b["plots"])
    assert (tmp_path / "sweeps" / "bbs_small" / "sweep.json").exists()


def test_process_cluster_runs_a_point_task():
    # the task (parameter object included) pickles to a worker process and evaluate_point imports there
    _, pts = sweep.expand(_spec(pes=[2]))
    client, cluster = sweep._client(None, 1, True)
    try:
        task = {"design": "bbs-spmxv", "params": pts[0].params, "workload": pts[0].workload, "sim": "icarus",
                "test_dir": "/nonexistent", "do_sim": False, "synth": None}
        assert client.submit(sweep.evaluate_point, task, pure=False).result(timeout=120) == {"sim": None,
                                                                                             "synth": None}
    finally:
        client.close()
        cluster.close()

"""TuX2 on Dask workers: exact BSP, the SSP bound enforced by the actor across worker processes."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.graph.tux2 import TuX2Engine
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

distributed = pytest.importorskip("distributed")

# as in test_graph_tux2_procs: BSP differs from the serial reference only in the order of the float
# additions of the two workers' deltas (a few ulp per clock), far below one lost or doubled delta
BSP_ATOL = 1e-9


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=40) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def ratings():
    return synthetic_ratings(120, 80, seed=1)


def test_bsp_dask_equals_serial(client, ratings):
    P, Q, losses = plain_mf(ratings, lr=0.05, epochs=6, batches=1, seed=5)
    r = TuX2Engine(ratings, 2, seed=5).run(MF(lr=0.05), staleness=0, epochs=6, executor="dask", client=client)
    np.testing.assert_allclose(r.state["a"]["p"], P, rtol=0, atol=BSP_ATOL)
    np.testing.assert_allclose(r.state["b"]["q"], Q, rtol=0, atol=BSP_ATOL)
    assert abs(r.history[-1]["loss"] - losses[-1]) < BSP_ATOL and r.history[-1]["clock"] == 6
    assert abs(losses[-1] - losses[-2]) > 1e3 * BSP_ATOL     # one clock less would fail the check
    assert r.staleness_reads == {0: 12} and r.trace["executor"] == "dask"
    g = digits_lr()
    w, _ = plain_lr(g, lr=0.5, epochs=3, batches=1)
    r = TuX2Engine(g, 2).run(LR(lr=0.5), staleness=0, epochs=3, executor="dask", client=client)
    np.testing.assert_allclose(r.state["b"]["w"], w, rtol=0, atol=BSP_ATOL)


def test_bsp_dask_equals_simulated(client, ratings):
    """Several mini-batches per epoch (MF), and LDA's edge state and GlobalSync: token for token."""
    eng = TuX2Engine(ratings, 2, seed=2)
    sim = eng.run(MF(lr=0.05), staleness=0, epochs=3, batches=4)
    r = eng.run(MF(lr=0.05), staleness=0, epochs=3, batches=4, executor="dask", client=client)
    np.testing.assert_allclose(r.state["a"]["p"], sim.state["a"]["p"], rtol=0, atol=BSP_ATOL)
    g = bars_corpus(60, 20, seed=0)
    eng = TuX2Engine(g, 2)
    sim = eng.run(LDA(), staleness=0, epochs=2, batches=2)
    r = eng.run(LDA(), staleness=0, epochs=2, batches=2, executor="dask", client=client)
    np.testing.assert_array_equal(r.state["e"]["z"], sim.state["e"]["z"])
    np.testing.assert_array_equal(r.state["b"]["nwk"], sim.state["b"]["nwk"])
    np.testing.assert_array_equal(r.state["g"]["nk"], sim.state["g"]["nk"])


@pytest.mark.parametrize("s", [1, 2])
def test_staleness_bound_dask(client, ratings, s):
    """Worker 1 held (the straggler): worker 0 runs ahead until the actor's gate holds it at exactly s clocks."""
    C = 4 * 3
    r = TuX2Engine(ratings, 2).run(MF(lr=0.2), staleness=s, epochs=4, batches=3, executor="dask",
                                   client=client, straggler=1)
    lag = np.arange(C)[None, :] - r.trace["min_clock"]
    assert (r.trace["min_clock"] >= 0).all() and (lag >= 0).all()
    assert lag.max() == s, f"staleness bound {s}: largest lag {lag.max()}"   # reached, never exceeded
    assert r.max_staleness == s and sum(r.staleness_reads.values()) == 2 * C
    np.testing.assert_array_equal(lag[0, s:], s)                             # exactly s ahead, every clock
    assert (lag[1] == 0).all()
    loss = [h["loss"] for h in r.history]
    assert loss[-1] < 0.6 * loss[0]                                          # real updates


def test_dask_cluster_too_small(client, ratings):
    with pytest.raises(ValueError, match="fewer than"):
        TuX2Engine(ratings, 3).run(MF(), staleness=1, epochs=1, executor="dask", client=client)


def test_cli_tux2_executor_dask(tmp_path):
    import json

    from hwcosim.cosim.cli.graph import main

    assert main(["tux2", "--algo", "mf", "--staleness", "1", "--workers", "2", "--epochs", "2", "--executor", "dask",
                 "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "tux2_mf_s1_w2.json").read_text())
    a = res["algos"]["mf"]
    assert res["real_is_measured"] and a["executor"] == "dask" and set(a["dask_runs"]) == {"0", "1"}
    assert a["dask_runs"]["1"]["max_staleness"] <= 1 and a["dask_runs"]["0"]["max_staleness"] == 0
    assert abs(a["dask_runs"]["0"]["final_loss"] - a["runs"]["0"]["final_loss"]) < BSP_ATOL   # BSP = simulated BSP
    assert (tmp_path / "tux2_mf_s1_w2.png").read_bytes()[:4] == b"\x89PNG"


class FailsOnWorker1(MF):
    """MF whose worker 1 raises at clock 1: worker 0 would otherwise wait at the SSP gate for ever."""

    def gradients(self, bt, view):
        if bt.worker == 1 and bt.clock == 1:
            raise ArithmeticError("worker 1 fails at clock 1")
        return super().gradients(bt, view)


def test_dask_worker_error_aborts_the_run(client, ratings):
    """A worker that raises: the other stops waiting at the gate and the error reaches the caller."""
    with pytest.raises((ArithmeticError, RuntimeError), match="worker 1 fails"):
        TuX2Engine(ratings, 2).run(FailsOnWorker1(), staleness=1, epochs=6, executor="dask", client=client)
    r = TuX2Engine(synthetic_ratings(40, 30, seed=0), 2).run(MF(), staleness=1, epochs=2, executor="dask",
                                                               client=client)
    assert r.history[-1]["clock"] == 2                                  # the cluster is still usable

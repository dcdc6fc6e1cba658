"""The GAS (PowerGraph-model) baseline of TuX2: MF and LR as gather-apply-scatter programs, PAI stragglers,
and the GAS-vs-TuX2 study (models/systems/graph/gas.py)."""

import json

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.graph.gas import GASEngine, GasLR, GasMF, PaiWorkerModel, gas_line_counts, pai_slowdown
from hwcosim.models.systems.graph.tux2 import TuX2Engine, WorkerModel
from hwcosim.models.systems.graph.tux2_algos import MF, digits_lr, plain_lr, plain_mf, synthetic_ratings


@pytest.fixture(scope="module")
def ratings():
    return synthetic_ratings(120, 80, seed=1)


def test_gas_mf_is_full_batch_gradient_descent(ratings):
    """One GAS superstep = one full-batch step: equal to plain MF and to TuX2 MF under BSP with one batch."""
    r = GASEngine(ratings, 3).run(GasMF(lr=0.05), steps=4)
    P, Q, losses = plain_mf(ratings, lr=0.05, epochs=4, batches=1, seed=0)
    np.testing.assert_allclose(r.state["a"]["p"], P, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.state["b"]["q"], Q, rtol=0, atol=1e-12)
    np.testing.assert_allclose([h["loss"] for h in r.history], losses, rtol=1e-12)
    t = TuX2Engine(ratings, 3).run(MF(lr=0.05), staleness=0, epochs=4, batches=1)
    np.testing.assert_allclose(t.state["a"]["p"], P, rtol=0, atol=1e-12)
    assert r.partitioning["method"] == "vertex-cut" and r.partitioning["replication_factor"] > 1


def test_gas_lr_two_supersteps_per_step():
    d = digits_lr()
    r = GASEngine(d, 4).run(GasLR(lr=0.5), steps=6)
    w, losses = plain_lr(d, lr=0.5, epochs=3, batches=1)
    np.testing.assert_allclose(r.state["b"]["w"], w, rtol=0, atol=1e-12)
    np.testing.assert_allclose([h["loss"] for h in r.history][::2], losses, rtol=1e-12)


def test_threads_executor_same_numbers_and_sleeps(ratings):
    m = WorkerModel(edge_cost=1e-5, sync_latency=1e-3)
    sim = GASEngine(ratings, 2, model=m).run(GasMF(lr=0.05), steps=3)
    thr = GASEngine(ratings, 2, model=m).run(GasMF(lr=0.05), steps=3, executor="threads", time_scale=1.0)
    np.testing.assert_array_equal(sim.state["a"]["p"], thr.state["a"]["p"])
    assert thr.sim_time == pytest.approx(sim.sim_time)
    assert thr.wall_time >= sim.sim_time          # every superstep slept its slowest worker's modelled time


def test_stops_at_target(ratings):
    full = GASEngine(ratings, 2).run(GasMF(lr=0.05), steps=20)
    target = full.history[7]["loss"]
    r = GASEngine(ratings, 2).run(GasMF(lr=0.05), steps=20, target=target)
    assert r.reached and r.steps == 7 and r.history[-1]["loss"] <= target
    r = GASEngine(ratings, 2).run(GasMF(lr=0.05), steps=3, target=0.0)
    assert r.reached is False and r.steps == 3


def test_pai_slowdown_is_the_trace(shared_data):
    from hwcosim.models.systems.reliability.pai import load_job

    v = load_job(4, shared_data).v
    s = pai_slowdown(4, 10, 5, offset=3)
    np.testing.assert_allclose(s, (v[3:8] / np.median(v)).T)
    long = pai_slowdown(1, 3, 700)                # wraps around the trace's iterations
    np.testing.assert_array_equal(long[:, :300], long[:, 300:600])
    m = PaiWorkerModel(job=4, offset=3)
    np.testing.assert_array_equal(m.slowdown(10, 5), s)
    with pytest.raises(UsageError, match="10 workers"):
        pai_slowdown(1, 11, 5)
    with pytest.raises(UsageError, match="PAI job"):
        PaiWorkerModel(job=5)


def test_bsp_superstep_waits_for_the_slowest_trace_worker(ratings, shared_data):
    """A BSP superstep lasts as long as its slowest worker under the PAI job's slowdowns."""
    m = PaiWorkerModel(job=4, sync_latency=0.0, byte_cost=0.0)
    eng = GASEngine(ratings, 10, model=m)
    r = eng.run(GasMF(lr=0.05), steps=5)
    work = np.array([2 * p["e"].size for p in eng.parts])[:, None]      # both sides gather every edge
    assert r.sim_time == pytest.approx((work * m.edge_cost * pai_slowdown(4, 10, 5)).max(axis=0).sum())


def test_line_counts_same_rule():
    lc = gas_line_counts()
    for algo in ("mf", "lr"):
        v = lc[algo]
        assert 0 < v["gas_functions"] < v["gas_class"] and 0 < v["tux2_functions"] < v["tux2_class"]
        assert v["tux2_over_gas_functions"] == pytest.approx(v["tux2_functions"] / v["gas_functions"])


@pytest.mark.parametrize("kw,msg", [({"steps": 0}, "steps"), ({"executor": "mpi"}, "executor"),
                                    ({"time_scale": 0}, "time_scale")])
def test_bad_run_args(ratings, kw, msg):
    with pytest.raises(UsageError, match=msg):
        GASEngine(ratings, 2).run(GasMF(), **kw)


def test_bad_program_and_engine(ratings):
    with pytest.raises(UsageError, match="GASProgram"):
        GASEngine(ratings, 2).run(MF())
    with pytest.raises(UsageError, match="workers"):
        GASEngine(ratings, 0)
    with pytest.raises(UsageError, match="lr"):
        GasMF(lr=-1.0)
    with pytest.raises(UsageError, match="gas baseline has mf and lr|GAS baseline"):
        from hwcosim.models.systems.graph.gas import gas_vs_tux2

        gas_vs_tux2(algos=("lda",), band_jobs=())


def test_bench_quick(tmp_path, shared_data, capsys):
    """``hwcosim graph tux2-gas --quick``: JSON + PNG; every run reaches the common target loss."""
    from hwcosim.models.systems.graph.bench import bench_tux2_gas

    res = bench_tux2_gas(tmp_path, quick=True)
    assert (tmp_path / "tux2_gas.png").stat().st_size > 0
    on_disk = json.loads((tmp_path / "tux2_gas.json").read_text())
    assert on_disk["stragglers"]["job"] == 1 and on_disk["stragglers"]["dataset"] == "alibaba-pai-2020"
    for algo in ("mf", "lr"):
        r = res["algos"][algo]["runs"]
        assert r["gas"]["reached"]
        for v in r["tux2"].values():
            assert v["time_to_target"] is not None and v["final_loss"] <= r["target_loss"]
        assert res["algos"][algo]["band_speedup_vs_gas"] is not None
    # LR: MEGA's mini-batches reach the loss in fewer passes than GAS's full-batch supersteps
    assert res["algos"]["lr"]["runs"]["best_speedup_vs_gas"] > 1
    out = capsys.readouterr().out
    assert "sensitive to: straggler job (PAI 1)" in out and "paper: TuX2" in out


def test_long_superstep_averages_its_trace_rows(ratings):
    eng = GASEngine(ratings, 3)
    tab = eng.model.slowdown(3, 8)
    np.testing.assert_allclose(eng.slowdown(4, 2.0), tab.reshape(3, 4, 2).mean(axis=2))
    np.testing.assert_allclose(eng.slowdown(3, 0.5), eng.model.slowdown(3, 2)[:, [0, 0, 1]])
    np.testing.assert_array_equal(eng.slowdown(5), eng.model.slowdown(3, 5))


def test_bench_registered():
    from hwcosim.cosim.flow.bench import BENCHES

    assert "tux2_gas" in BENCHES

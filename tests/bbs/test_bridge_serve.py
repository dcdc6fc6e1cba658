"""Bridge (b): BBS / FSS RTL as serving devices, service times from RTL cycles vs the cycle model."""

import numpy as np
import pytest
from hwcosim.cosim.designs.fss.bridge import (
    ServeScenarioParams,
    make_engine,
    model_cycles,
    run_bridge,
    run_model,
    run_rtl,
)


def test_batching_grows_with_load_and_latency_follows():
    lo = run_model(ServeScenarioParams(device="bbs", n_requests=80, load=0.3))
    hi = run_model(ServeScenarioParams(device="bbs", n_requests=80, load=2.0))
    assert hi["mean_batch"] > lo["mean_batch"] >= 1
    assert hi["mean_latency_us"] > lo["mean_latency_us"]
    assert hi["throughput_req_per_s"] > lo["throughput_req_per_s"]


def test_plan_respects_the_slo_share():
    sp = ServeScenarioParams(device="fss", slo_us=2.0, slo_fraction=0.5)
    p, _, _ = make_engine(sp)
    r = run_model(sp)
    for s, b in r["plan"].items():
        from hwcosim.cosim.designs.fss.bridge import batch_shape

        if b > 1:  # a planned batch > 1 fits in half the SLO at 200 MHz
            assert model_cycles(sp, p, batch_shape(sp, p, b, int(s))) / 200e6 <= 1e-6


@pytest.mark.parametrize("kw,match", [({"device": "gpu"}, "device"), ({"n_requests": 0}, "n_requests"),
                                      ({"buckets": (4, 2)}, "buckets"), ({"load": 9}, "load")])
def test_wrong_params_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ServeScenarioParams(**kw)


@pytest.mark.sim
@pytest.mark.parametrize("device", ["bbs", "fss"])
def test_rtl_service_times_equal_the_cycle_model(tmp_path, device, run_folder_checks):
    sp = ServeScenarioParams(device=device, n_requests=16, seed=4)
    cmp = run_bridge(sp, test_dir=tmp_path)
    m, r = cmp.model, cmp.rtl
    wc = cmp.checks["word_for_word"]
    assert wc["mismatches"] == 0 and wc["words_compared"] > 0
    assert 0 < r["shapes_simulated"] <= r["batches"]
    # free-flowing streams: the cycle model is exact, so every batch and every latency agree
    assert all(b[4] == b[5] for b in r["batch_cycles"])
    np.testing.assert_allclose(r["latencies_us"], m["latencies_us"], rtol=1e-9)
    # the run folder keeps every simulated batch: inputs, RTL words, golden words
    assert np.load(tmp_path / "outputs.npz")["rtl"].size == wc["words_compared"]
    run_folder_checks(tmp_path, "bbs-spmxv" if device == "bbs" else "fss-gemm", "rtl", index=5)


@pytest.mark.sim
def test_cache_per_shape_gives_the_same_times_as_simulating_every_batch(tmp_path):
    sp = ServeScenarioParams(device="bbs", n_requests=12, seed=5)
    cached = run_rtl(sp, test_dir=tmp_path / "c")
    full = run_rtl(ServeScenarioParams(**{**sp.to_dict(), "buckets": sp.buckets, "batches": sp.batches,
                                          "cache": False}), test_dir=tmp_path / "f")
    assert full["shapes_simulated"] == full["batches"] > cached["shapes_simulated"]
    assert [b[4] for b in full["batch_cycles"]] == [b[4] for b in cached["batch_cycles"]]
    assert full["checks"]["word_for_word"]["words_compared"] > cached["checks"]["word_for_word"]["words_compared"]


@pytest.mark.sim
def test_output_stalls_make_the_rtl_slower_than_the_model(tmp_path):
    sp = ServeScenarioParams(device="bbs", n_requests=10, p_stall=0.3, cache=False, seed=6)
    cmp = run_bridge(sp, test_dir=tmp_path)
    r = cmp.rtl
    assert cmp.checks["word_for_word"]["mismatches"] == 0
    assert all(b[4] >= b[5] for b in r["batch_cycles"]) and any(b[4] > b[5] for b in r["batch_cycles"])


def test_model_only_cli(tmp_path, capsys):
    import json

    from hwcosim.cosim.cli import main

    assert main(["cosim", "serve", "--model-only", "--device", "both", "--requests", "12", "-o", str(tmp_path)]) == 0
    for dev in ("bbs", "fss"):
        d = json.loads((tmp_path / f"bridge_serve_{dev}.json").read_text())
        assert d["rtl"] is None and d["table"] and d["slowdown"] is None
    assert main(["cosim", "serve", "--model-only", "--p-stall", "0.99", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--p-stall 0.99: out of range; allowed [0, 0.95)" in err and "\n" not in err, err


def test_the_bridge_plans_with_the_elasticbatch_planner():
    from hwcosim.cosim.designs.fss.bridge import ServeScenario
    from hwcosim.models.systems.elastic.elasticbatch import ServingConfig, plan_device

    sp = ServeScenarioParams(device="bbs")
    p, _, _ = make_engine(sp)
    sc = ServeScenario(sp, p)
    assert sc.predictor.n_points == 9  # 3 batches x 3 buckets profiled from the cycle model
    cfg = ServingConfig(rate=sc.rate, slo_s=2 * sp.slo_fraction * sp.slo_us * 1e-6, buckets=sp.buckets,
                        size_median=sp.size_median, size_sigma=sp.size_sigma, batches=sp.batches, seed=sp.seed)
    assert sc.plan == plan_device(sc.planner_device, cfg, sc.predictor)
    # a tighter SLO shrinks the batches the planner allows
    tight = ServeScenario(ServeScenarioParams(device="bbs", slo_us=4.0), p)
    assert all(tight.plan[s] <= sc.plan[s] for s in sp.buckets) and tight.plan != sc.plan


@pytest.mark.sim
def test_rtl_in_the_loop_from_the_cluster_scenario_file(tmp_path):
    # the file hwcosim cluster run reads: its seed and [cosim.serve] (BBS only here: one RTL run)
    from pathlib import Path

    from hwcosim.cosim.designs.fss.bridge import params_from_scenario
    from hwcosim.models.systems.cluster.scenario import load_scenario

    f = Path(__file__).resolve().parents[2] / "models/systems/cluster/scenarios/cosim_small.toml"
    (sp,) = params_from_scenario(load_scenario(f), "bbs")
    assert (sp.n_requests, sp.seed) == (24, 1)
    cmp = run_bridge(sp, test_dir=tmp_path)
    m, r = cmp.model, cmp.rtl
    wc = cmp.checks["word_for_word"]
    assert wc["mismatches"] == 0 and wc["words_compared"] > 0
    assert all(b[4] == b[5] for b in r["batch_cycles"])
    np.testing.assert_allclose(r["latencies_us"], m["latencies_us"], rtol=1e-9)

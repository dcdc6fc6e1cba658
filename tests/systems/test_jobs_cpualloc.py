"""CPU allocation: throughput model fit, allocators, cluster simulation, real loader profile."""

import numpy as np
import pytest
from hwcosim.cosim.cli.jobs import main as cli_main
from hwcosim.models.systems.cluster.engine import Simulator
from hwcosim.models.systems.jobs.cpualloc import (
    POLICIES,
    CPUClusterSim,
    CPUJob,
    NodeType,
    ThroughputModel,
    allocate,
    fit_profile,
    heterogeneous_cluster,
    job_stream,
    offered_load,
    profile_loader,
    simulate,
    simulate_loop,
)


def test_wrong_params():
    with pytest.raises(ValueError):
        ThroughputModel(0, 0.5, 1)
    with pytest.raises(ValueError):
        NodeType("x", 8, 4, 1)
    with pytest.raises(ValueError, match="policy"):
        allocate("random", [], heterogeneous_cluster()[0])


def test_fit_recovers_curve():
    true = ThroughputModel(100.0, 0.8, 1e9)
    c = np.array([1, 2, 4, 8])
    m = ThroughputModel.fit(c, true(c), gpu_rate=500.0)
    assert m.r == pytest.approx(100.0) and m.alpha == pytest.approx(0.8)
    assert m(100) == 500.0 and m.cores_to_saturate() == pytest.approx(5 ** 1.25)


def _job(jid, kind, gpus, need):
    return CPUJob(jid, kind, gpus, "V100", 0.0, 100.0, 1.0, 100.0 * need, 1e6)


def test_allocators():
    node = NodeType("V100", 8, 32, 1)
    jobs = [_job(0, "nlp", 4, 1.0), _job(1, "cv", 4, 7.0)]
    assert allocate("even", jobs, node) == [16, 16]
    assert allocate("static", jobs, node) == [8, 16]
    a = allocate("adaptive", jobs, node)
    assert sum(a) <= 32 and a[0] >= 4 and a[1] == 28   # nlp saturates at 4 cores, cv gets the rest
    assert a == [4, 28]


def test_fit_with_prior_and_single_point():
    """With 3 noisy points over a factor of 4 in cores, the MAP fit (alpha prior) recovers the
    exponent better than least squares; one point below the ceiling takes the prior exponent."""
    rng = np.random.default_rng(0)
    c = np.array([1.0, 2.0, 4.0])
    err_ls, err_map = [], []
    for _ in range(200):
        a = rng.uniform(0.7, 1.0)
        t = 100 * c ** a * rng.lognormal(0, 0.1, 3)
        err_ls.append(abs(ThroughputModel.fit(c, t, 1e9).alpha - a))
        err_map.append(abs(ThroughputModel.fit(c, t, 1e9, alpha_prior=0.85, prior_sd=0.15).alpha - a))
    assert np.mean(err_map) < 0.85 * np.mean(err_ls)  # measured 0.057 vs 0.079
    m = ThroughputModel.fit([1, 4, 8], [100.0, 380.0, 390.0], 390.0, alpha_prior=0.8)
    assert m.alpha == 0.8 and m.r == pytest.approx(100.0)
    with pytest.raises(ValueError, match="alpha_prior"):
        ThroughputModel.fit([1, 4], [100.0, 390.0], 390.0)


def test_fit_profile_warns_and_holds_out():
    flat = fit_profile([1, 2, 3], [1000.0, 900.0, 800.0])
    assert flat["alpha_raw"] < 0 and flat["alpha"] == 0.05
    assert flat["warnings"] and "does not grow" in flat["warnings"][0]
    good = fit_profile([1, 2, 4], [100.0, 190.0, 400.0 ** 1.0], holdout=1)
    assert not good["warnings"] and good["fit_points"] == [1, 4]
    assert good["alpha"] == pytest.approx(np.log(4) / np.log(4))
    assert good["holdout"]["predicted"] == pytest.approx(200.0)
    assert good["holdout"]["rel_error"] == pytest.approx(200 / 190 - 1)


def test_allocate_floor():
    node = NodeType("V100", 8, 32, 1)
    jobs = [_job(0, "nlp", 4, 1.0), _job(1, "rl", 4, 40.0)]
    assert allocate("adaptive", jobs, node) == [4, 28]
    a = allocate("adaptive", jobs, node, floor=1.0)   # floor min(16, saturation 1*4=4) for job 0
    assert a == [4, 28]
    starved = [_job(0, "cv", 4, 5.0), _job(1, "rl", 4, 40.0)]  # rl: 100*c per 4000 -> low marginal gain
    free = allocate("adaptive", starved, node)
    fl = allocate("adaptive", starved, node, floor=1.0)
    assert fl[1] >= 16 and fl[1] > free[1] - 1 and sum(fl) <= 32
    with pytest.raises(ValueError, match="floor"):
        allocate("adaptive", jobs, node, floor=2.0)


def test_job_stream_is_not_overloaded():
    """A GPU type with offered load >= 1 makes queueing (and JCTs) grow with the stream's length."""
    nodes = heterogeneous_cluster()
    load = offered_load(job_stream(600, nodes, seed=0), nodes)
    assert set(load) == {"V100", "A100", "T4"} and all(0.2 < v < 0.85 for v in load.values())


def test_simulation_adaptive_beats_static_rules():
    nodes = heterogeneous_cluster()
    jobs = job_stream(80, nodes, seed=3)
    r = {p: simulate(jobs, nodes, p) for p in POLICIES}
    for v in r.values():
        assert 0 < v["cluster_gpu_utilisation"] < v["gpu_utilisation"] <= 1
        assert v["events"] >= 2 * len(jobs)  # an arrival and a completion per job at least
    u = {p: r[p]["gpu_utilisation"] for p in POLICIES}
    assert u["oracle"] > u["adaptive"] > u["even"] > u["static"]
    fe = r["adaptive"]["fit_error"]
    assert fe["jobs"] == len(jobs) and 0.01 < fe["curve_mean_abs_err"] < 0.2
    assert r["even"]["fit_error"] is None and r["oracle"]["fit_error"] is None
    assert r["adaptive"]["events"] >= 3 * len(jobs)  # + one end-of-profiling event per job
    assert simulate(jobs, nodes, "adaptive") == r["adaptive"]  # deterministic
    # learning costs: profiling 10x longer, or noisier points, give less
    assert simulate(jobs, nodes, "adaptive", profile_s=1200.0)["gpu_utilisation"] < u["adaptive"]
    assert simulate(jobs, nodes, "adaptive", profile_noise=0.0, profile_s=0.0)["gpu_utilisation"] > u["adaptive"]


def test_learned_allocation_closed_form():
    """One 1-GPU job alone on a node: profiled at 1, 2, 4 cores (its even share is 4) for 3 x 100 s
    at the mean of those rates, then given the 8 cores its fitted curve needs to saturate."""
    node = NodeType("V100", 8, 32, 1)
    job = CPUJob(0, "cv", 1, "V100", 0.0, 100.0, 1.0, 800.0, 1e6)
    sim = CPUClusterSim([node], "adaptive", profile_s=100.0, profile_noise=0.0, prior_sd=None)
    sim.submit([job])
    sim.run()
    prog = 300 * (100 + 200 + 400) / 3
    assert sim.jct[0] == pytest.approx(300 + (1e6 - prog) / 800)
    assert sim.fits[0]["curve_mean_abs_err"] == pytest.approx(0, abs=1e-9)
    oracle = CPUClusterSim([node], "oracle")
    oracle.submit([job])
    oracle.run()
    assert oracle.jct[0] == pytest.approx(1e6 / 800)


@pytest.mark.parametrize("policy,floor", [("even", 0.0), ("static", 0.0), ("oracle", 0.0), ("oracle", 0.5)])
def test_engine_simulation_matches_plain_loop(policy, floor):
    """The cluster-engine run (events on models.systems.cluster's Simulator) and the independent plain loop
    give the same utilisation, JCT and makespan."""
    nodes = heterogeneous_cluster()
    jobs = job_stream(60, nodes, seed=5)
    a, b = simulate(jobs, nodes, policy, floor=floor), simulate_loop(jobs, nodes, policy, floor=floor)
    for k in ("gpu_utilisation", "mean_jct_h", "p90_jct_h", "makespan_h"):
        assert a[k] == pytest.approx(b[k], rel=1e-9), k
    for t, u in a["utilisation_by_type"].items():
        assert u == pytest.approx(b["utilisation_by_type"][t], rel=1e-9)
    with pytest.raises(ValueError, match="simulate_loop"):
        simulate_loop(jobs, nodes, "adaptive")


def test_engine_events_placement_and_closed_form():
    """Two 4-GPU jobs on one 8-GPU node and a third that must queue: arrivals, placement and
    completions are events on the engine; JCTs follow from thr(cores) in closed form."""
    node = NodeType("V100", 8, 32, 1)
    mk = lambda jid, t, need, work: CPUJob(jid, "cv", 4, "V100", t, 100.0, 1.0, 100.0 * need, work)  # noqa: E731
    jobs = [mk(0, 0.0, 4.0, 4 * 400.0 * 100), mk(1, 0.0, 4.0, 4 * 400.0 * 100), mk(2, 10.0, 4.0, 4 * 400.0 * 100)]
    sim = CPUClusterSim([node], "even")
    assert isinstance(sim, Simulator) and sim.topo.n_hosts == 1
    sim.submit(jobs)
    sim.run()
    # even: 16 cores per job -> thr = min(1600, 100 * 16) = 1600 samples/s = the GPU ceiling; work 160k -> 100 s
    assert sim.jct[0] == pytest.approx(100.0) and sim.jct[1] == pytest.approx(100.0)
    assert sim.wait[2] == pytest.approx(90.0) and sim.jct[2] == pytest.approx(190.0)
    assert sim.placements == {0: 0, 1: 0, 2: 0}
    res = sim.results()
    assert res["gpu_utilisation"] == pytest.approx(1.0)
    assert res["cluster_gpu_utilisation"] == pytest.approx(300 * 4 / (8 * 200.0))
    with pytest.raises(ValueError, match="no 'A100'"):
        CPUClusterSim([node], "even").submit([CPUJob(9, "cv", 1, "A100", 0.0, 1.0, 1.0, 1.0, 1.0)])
    with pytest.raises(ValueError, match="policy"):
        CPUClusterSim([node], "fair")


def test_profile_loader_real():
    p = profile_loader((1, 2), images=200, chunk=50)
    assert p["cores"] == [1, 2] and all(t > 0 for t in p["samples_per_s"])


def test_cli_cpualloc(tmp_path):
    import json

    # the synthetic study here; the trace study (also in the default "both") in test_trace_study_quick
    assert cli_main(["cpualloc", "--quick", "--workload", "synthetic", "-o", str(tmp_path)]) == 0
    for f in ("cpualloc.json", "cpualloc.png", "cpualloc_jct.png", "cpualloc_loader.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    res = json.loads((tmp_path / "cpualloc.json").read_text())
    assert isinstance(res["warnings"], list) and "alpha_raw" in res["loader_fit"]
    assert any("20.8%" in n for n in res["notes"]) and set(res["oracle_gain_over"]) == {"even", "static"}
    code = cli_main(["cpualloc", "--quick", "--seed", "-1", "-o", str(tmp_path)])
    assert code == 2


def test_amdahl_truth_is_not_the_learner_family():
    from hwcosim.models.systems.jobs.cpualloc import AmdahlCurve

    m = AmdahlCurve(100.0, 0.05, 800.0)
    n = m.cores_to_saturate()
    assert m(n) == pytest.approx(800.0) and m(n / 2) < 800.0
    # its log-log slope falls with cores: a power law cannot match it at three points
    c = np.array([1.0, 2.0, 4.0])
    slope = np.diff(np.log(m(c))) / np.diff(np.log(c))
    assert slope[1] < slope[0] < 1
    fit = ThroughputModel.fit(c, m(c), 800.0)
    assert abs(fit.cores_to_saturate() / n - 1) > 0.05


def test_static_trace_request_is_a_reservation():
    from hwcosim.models.systems.jobs.cpualloc import CPUJob as Job

    nodes = [NodeType("n", 2, 16, 1)]
    # two 1-GPU jobs requesting 10 cores each: the second must wait for the first under static
    jobs = [Job(k, "trace", 1, "n", float(k), 100.0, 1.0, 1000.0, 1000.0 * 3600, serial=0.0, request_cores=10.0)
            for k in range(2)]
    st = simulate(jobs, nodes, "static")
    ev = simulate(jobs, nodes, "even")
    assert st["mean_wait_h"] > 0.4 and ev["mean_wait_h"] == 0.0


def test_trace_study_quick(shared_data, tmp_path):
    import json

    assert cli_main(["cpualloc", "--quick", "--workload", "trace", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "cpualloc_trace.png").stat().st_size > 0
    r = json.loads((tmp_path / "cpualloc_trace.json").read_text())
    assert r["jobs"] == 120 and len(r["nodes"]) >= 10
    assert 5 < r["request_cores_per_gpu_percentiles"]["50"] < 20
    res = r["results"]
    assert res["oracle"]["gpu_utilisation"] >= max(res[p]["gpu_utilisation"] for p in ("even", "static")) - 1e-9
    lo, hi = r["sensitive_to"]["band"]
    assert lo <= r["adaptive_gain_over"]["static"] <= hi and r["paper"]["gpu_utilisation_gain"] == 0.208

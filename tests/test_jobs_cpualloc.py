"""CPU allocation: throughput model fit, allocators, cluster simulation, real loader profile."""

import numpy as np
import pytest

from models.cluster.engine import Simulator
from models.jobs.cli import main as cli_main
from models.jobs.cpualloc import (
    POLICIES,
    CPUClusterSim,
    CPUJob,
    NodeType,
    ThroughputModel,
    allocate,
    heterogeneous_cluster,
    job_stream,
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


def test_simulation_adaptive_beats_static_rules():
    nodes = heterogeneous_cluster()
    jobs = job_stream(80, nodes, seed=3)
    r = {p: simulate(jobs, nodes, p) for p in POLICIES}
    for v in r.values():
        assert 0 < v["cluster_gpu_utilisation"] < v["gpu_utilisation"] <= 1
        assert v["events"] >= 2 * len(jobs)  # an arrival and a completion per job at least
    assert r["adaptive"]["gpu_utilisation"] > r["even"]["gpu_utilisation"] > r["static"]["gpu_utilisation"]
    assert simulate(jobs, nodes, "adaptive") == r["adaptive"]  # deterministic


@pytest.mark.parametrize("policy", POLICIES)
def test_engine_simulation_matches_plain_loop(policy):
    """The cluster-engine run (events on models.cluster's Simulator) and the independent plain loop
    give the same utilisation, JCT and makespan."""
    nodes = heterogeneous_cluster()
    jobs = job_stream(60, nodes, seed=5)
    a, b = simulate(jobs, nodes, policy), simulate_loop(jobs, nodes, policy)
    for k in ("gpu_utilisation", "mean_jct_h", "p90_jct_h", "makespan_h"):
        assert a[k] == pytest.approx(b[k], rel=1e-9), k
    for t, u in a["utilisation_by_type"].items():
        assert u == pytest.approx(b["utilisation_by_type"][t], rel=1e-9)


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
    assert cli_main(["cpualloc", "--quick", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "cpualloc.json").exists() and (tmp_path / "cpualloc.png").exists()
    with pytest.raises(SystemExit) as e:
        cli_main(["cpualloc", "--quick", "--seed", "-1", "-o", str(tmp_path)])
    assert e.value.code == 2

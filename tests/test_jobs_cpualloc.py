"""CPU allocation: throughput model fit, allocators, cluster simulation, real loader profile."""

import numpy as np
import pytest

from models.jobs.cli import main as cli_main
from models.jobs.cpualloc import (
    POLICIES,
    CPUJob,
    NodeType,
    ThroughputModel,
    allocate,
    heterogeneous_cluster,
    job_stream,
    profile_loader,
    simulate,
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
        assert 0 < v["gpu_utilisation"] <= 1
    assert r["adaptive"]["gpu_utilisation"] > r["even"]["gpu_utilisation"] > r["static"]["gpu_utilisation"]
    assert simulate(jobs, nodes, "adaptive") == r["adaptive"]  # deterministic


def test_profile_loader_real():
    p = profile_loader((1, 2), images=200, chunk=50)
    assert p["cores"] == [1, 2] and all(t > 0 for t in p["samples_per_s"])


def test_cli_cpualloc(tmp_path):
    assert cli_main(["cpualloc", "--quick", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "cpualloc.json").exists() and (tmp_path / "cpualloc.png").exists()
    with pytest.raises(SystemExit) as e:
        cli_main(["cpualloc", "--quick", "--seed", "-1", "-o", str(tmp_path)])
    assert e.value.code == 2

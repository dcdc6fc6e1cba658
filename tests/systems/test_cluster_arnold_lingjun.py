"""Arnold and its baselines on the real Lingjun 2023 topology (minipods = the topology's pods)."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.cluster.arnold import (
    LINGJUN_JOBS,
    POLICIES,
    _place_gpus,
    lingjun_free_hosts,
    run_lingjun_study,
)
from hwcosim.models.systems.cluster.topology import lingjun_2023


def test_free_hosts_fragmentation_is_seeded_and_fits():
    topo = lingjun_2023()
    need = LINGJUN_JOBS["large"].nodes
    a = lingjun_free_hosts(topo, need, 7)
    assert np.array_equal(a, lingjun_free_hosts(topo, need, 7))
    assert not np.array_equal(a, lingjun_free_hosts(topo, need, 8))
    assert need <= a.size <= topo.n_hosts and np.unique(a).size == a.size
    assert np.all(np.bincount(topo.host_pod[a], minlength=3) <= np.bincount(topo.host_pod))
    with pytest.raises(ValueError, match="does not fit"):
        lingjun_free_hosts(topo, topo.n_hosts + 1, 0)


def test_place_gpus_uses_only_the_pods_free_hosts():
    topo = lingjun_2023()
    job = LINGJUN_JOBS["small"]  # DP12 TP4 PP2: 6 x 2 nodes
    free = lingjun_free_hosts(topo, job.nodes, 3)
    hb = [free[topo.host_pod[free] == j] for j in range(3)]
    pod = np.repeat(np.arange(3), 4).reshape(6, 2) % 3
    caps = np.array([h.size for h in hb])
    if np.any(np.bincount(pod.ravel(), minlength=3) > caps):
        pod = POLICIES["best-fit"](job, caps)
    place = _place_gpus(job, pod, hb, 8)
    hosts = np.unique(place // 8)
    assert hosts.size == job.nodes and np.isin(hosts, free).all()
    node_gpu = place[:, ::2, 0].T
    assert np.array_equal(topo.gpu_pod[node_gpu], pod)


def test_arnold_on_real_topology_small_job():
    """The small job (96 GPUs) on the 847-host topology: every policy's realised spreads come from
    the topology's pods; Arnold's weighted max spread is never above a baseline's; the flow
    simulation on the same topology runs when the job must span pods."""
    r = run_lingjun_study(("small",), draws=6, sim_draws=1, seed=2, iterations=1, time_limit=10.0)
    assert r["topology"]["hosts"] == 847 and r["pod_hosts"] == [179, 362, 306]
    v = r["jobs"]["small"]
    assert v["arnold_never_worse"]
    for d in v["draws"]:
        for p in POLICIES:
            assert 1 <= d[p]["dp_spread"] <= 3 and 1 <= d[p]["pp_spread"] <= 2
            assert d[p]["weighted"] >= d["arnold"]["weighted"] - 1e-9
        if d["fits_one"]:
            assert (d["arnold"]["dp_spread"], d["arnold"]["pp_spread"]) == (1, 1)
    assert min(v["ratio_max"].values()) >= 1.0
    sim = [d for d in v["draws"] if "iter_s" in d["arnold"]]
    assert len(sim) == (0 if v["fits_one_fraction"] == 1 else 1)
    for d in sim:
        assert not d["fits_one"]
        for p in POLICIES:
            assert 0.5 < d[p]["iter_s"] < 5.0  # compute 0.5 s + communication
    with pytest.raises(ValueError, match="unknown job"):
        run_lingjun_study(("huge",))

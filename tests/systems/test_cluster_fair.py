"""Fair baselines of the network studies (issue 43, requirement 3): NCCL's channel-to-port binding
(C4P), the production-like job mix, Crux's baselines on Crux's own planned paths, and Arnold's
background congestion calibrated to the paper's spread slowdowns. Tiny topologies: the full
studies run in ``make bench``."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.cluster import ECMPRouter, JobSpec, Simulator, clos, placement
from hwcosim.models.systems.cluster.c4p import C4PRouter, mix_jobs
from hwcosim.models.systems.cluster.routing import NCCLPortECMPRouter
from hwcosim.models.systems.cluster.topology import LinkKind


# ---- C4P: NCCL's deterministic channel-to-port binding --------------------------------------------
def test_nccl_binding_puts_channel_c_on_port_c_mod_p():
    t = clos(2, 2, 2, gpus_per_host=4, nic_ports=2, nic_gbps=100, aggs_per_pod=2, tor_lanes=2, cores_per_plane=2)
    r = NCCLPortECMPRouter(t, 0)
    src, dst = np.arange(4), np.arange(4) + 12  # host 0 -> host 3 (other pod)
    pu, pd = t.link_block(LinkKind.PORT_UP).start, t.link_block(LinkKind.PORT_DN).start
    for c in range(4):
        p = r.route(0, (5, 0, c), src, dst)
        assert np.array_equal(p[:, 0], pu + src * 2 + c % 2)
        assert np.array_equal(p[:, 5], pd + dst * 2 + c % 2)
    # the switch hops are still hashed: the same as plain ECMP's for that key
    e = ECMPRouter(t, 0).route(0, (5, 0, 1), src, dst)
    assert np.array_equal(r.route(0, (5, 0, 1), src, dst)[:, 1:5], e[:, 1:5])


def _one_tor_ring(router, channels=2):
    t = clos(1, 1, 4, gpus_per_host=4, nic_ports=2, nic_gbps=100)
    spec = JobSpec("j", dp=4, tp=4, compute_s=0.0, grad_bytes=40e6, iterations=2, channels=channels)
    sim = Simulator(t, router(t))
    sim.add_job(spec, placement(spec, np.arange(16)))
    sim.run()
    return sim.jobs[0].iteration_times.mean()


def test_nccl_binding_matches_c4p_where_only_ports_are_chosen():
    """Under one ToR the only path choice is the bond port: NCCL's binding (2 channels on 2 ports)
    is already C4P's balanced plan, while hashing the port collides somewhere and is slower."""
    nccl = _one_tor_ring(lambda t: NCCLPortECMPRouter(t, 0))
    c4p = _one_tor_ring(lambda t: C4PRouter(t, 0))
    ecmp = _one_tor_ring(lambda t: ECMPRouter(t, 0))
    assert nccl == pytest.approx(c4p, rel=1e-9)
    assert ecmp > c4p * 1.2


def test_production_mix_is_a_valid_tp_pp_dp_fill():
    from hwcosim.models.systems.cluster.c4p import MIX, c4_topology

    t = c4_topology(True)
    used = {}
    for sc in (0.0, 1.0):
        jobs = mix_jobs(t, 3, scatter=sc)
        gpus = np.concatenate([p.ravel() for _, p in jobs])
        assert np.unique(gpus).size == gpus.size and t.n_hosts * 8 - gpus.size < 8 * 2  # full, no overlap
        shapes = {(s.tp, s.pp, s.dp) for s, _ in jobs}
        assert all(tp == 8 for tp, _, _ in shapes) and any(pp > 1 for _, pp, _ in shapes)
        for s, _ in jobs:
            n_par, h, layers, pp, dp = MIX[s.name.split(" ", 1)[1]]
            assert (s.pp, s.dp) == (pp, dp) and s.grad_bytes == pytest.approx(2 * n_par / (8 * pp))
        # ToRs touched per job: packing keeps jobs on fewer ToRs than scattering
        used[sc] = sum(np.unique(t.leaf_of(p.ravel())).size for _, p in jobs)
    assert used[0.0] < used[1.0]


# ---- Crux: the baselines on Crux's planned paths --------------------------------------------------
def _pair_on_one_uplink():
    from hwcosim.models.systems.cluster.crux import CruxRouter

    t = clos(1, 2, 2, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=1, tor_lanes=1,
             cores_per_plane=1, tor_oversub=8.0)
    jobs = []
    for k in range(2):
        spec = JobSpec(f"j{k}", dp=2, tp=8, compute_s=0.01, grad_bytes=0.5e9, iterations=10**6)
        hosts = np.array([k, 2 + k])
        jobs.append((spec, placement(spec, (hosts[:, None] * 8 + np.arange(8)).reshape(-1))))
    return t, jobs, CruxRouter(t, jobs, [0, 1])


def test_priority_alone_reorders_completions_on_equal_paths():
    """Two identical jobs whose planned paths share the ToR uplink (one aggregation switch): with
    the same router (same paths) and equal levels they finish iterations together; giving one the
    higher level makes its iterations shorter and the other's longer, whichever it is."""
    from hwcosim.models.systems.cluster.crux import _simulate

    t, jobs, router = _pair_on_one_uplink()
    plans = {k: v.copy() for k, v in router.plans.items()}
    it = {}
    for name, lv in (("fair", {}), ("0 first", {0: 0, 1: 1}), ("1 first", {0: 1, 1: 0})):
        router.levels = lv
        _, sim = _simulate(t, router, jobs, 0.5)
        it[name] = [sim.jobs[j].iteration_times[:3].mean() for j in (0, 1)]
    assert all(np.array_equal(router.plans[k], v) for k, v in plans.items())  # every run on the same paths
    assert it["fair"][0] == pytest.approx(it["fair"][1], rel=1e-9)
    assert it["0 first"][0] < it["fair"][0] < it["0 first"][1]
    assert it["1 first"][1] < it["fair"][1] < it["1 first"][0]


def test_cassini_shifts_follow_the_paths_they_are_given():
    """Two jobs that ECMP (seed 0) collides on one plane and Crux's planning separates: on ECMP paths
    CASSINI shifts one of them; on the planned paths they share no link, so nobody waits."""
    from hwcosim.models.systems.cluster.crux import CruxRouter, cassini_shifts

    t = clos(1, 2, 2, gpus_per_host=1, nic_ports=1, nic_gbps=100, aggs_per_pod=2, cores_per_plane=1)
    jobs = []
    for k, hosts in enumerate(([0, 2], [1, 3])):
        spec = JobSpec(f"j{k}", dp=2, compute_s=0.004, grad_bytes=50e6, iterations=10**6, alpha_s=0.0)
        jobs.append((spec, placement(spec, hosts)))
    assert np.any(cassini_shifts(t, jobs, seed=0) > 0)
    assert np.all(cassini_shifts(t, jobs, seed=0, router=CruxRouter(t, jobs, [0, 1])) == 0)


def test_study_rows_report_priority_and_path_effects_separately():
    from hwcosim.models.systems.cluster.crux import PLANNED, SCHEMES, _study_rows, _summary

    t = clos(2, 2, 2, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=2, tor_lanes=1, cores_per_plane=2,
             tor_oversub=2.0, core_oversub=2.0)
    rows = _study_rows(t, 3, 0.3, [0], K=4)
    sm = _summary(rows)
    assert set(SCHEMES) <= set(rows[0]) and all(0 < rows[0][sc] <= 1 for sc in SCHEMES)
    r = rows[0]
    assert sm["path_effect"] == pytest.approx(r["crux-paths"] / r["ecmp"] - 1)
    assert sm["priority_effect"] == {sc: pytest.approx(r["crux"] / r[sc] - 1) for sc in PLANNED}
    # excluding the start shift never lowers CASSINI's utilisation
    assert r["cassini-planned_after_start"] >= r["cassini-planned"] - 1e-12


# ---- Arnold: background congestion calibrated to the paper's slowdowns -----------------------------
def _pods_topo():
    return clos(2, 2, 8, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=2, tor_lanes=1,
                cores_per_plane=1, core_oversub=4.0)


def test_background_pairs_cross_pods_without_overlap():
    from hwcosim.models.systems.cluster.arnold import _background

    t = _pods_topo()
    bg = _background(t, [0, 1], 4, seed=3)
    hosts = np.concatenate([np.unique(p // 8) for _, p in bg])
    assert len(bg) == 4 and np.unique(hosts).size == 8 and not np.isin([0, 1], hosts).any()
    for _, p in bg:
        assert np.unique(t.host_pod[np.unique(p // 8)]).size == 2
    with pytest.raises(ValueError, match="background"):
        _background(t, [], 100, seed=0)


def test_calibration_spread_costs_nothing_on_an_idle_fabric_and_grows_with_background():
    from hwcosim.models.systems.cluster.arnold import calibrate_background

    c = calibrate_background(_pods_topo(), pairs=(0, 4, 8), group_hosts=4, grad_bytes=0.2e9, act_bytes=64e6)
    s = [(r["collective_slowdown"], r["p2p_slowdown"]) for r in c["rows"]]
    assert s[0] == pytest.approx((0.0, 0.0), abs=1e-9)
    assert s[2][1] > s[1][1] > 0 and s[2][0] > 0 and s[2][0] >= s[1][0] >= 0
    # P2P (one cross-pod hop, no slack) feels the background before the ring does, as in the paper
    assert s[1][1] > s[1][0]
    for v in c["calibrated"].values():
        assert v["reached"] and 0 < v["bg_pairs"] < 8
    assert c["calibrated"]["p2p"]["bg_pairs"] <= c["calibrated"]["collective"]["bg_pairs"]

"""Cluster core: topology, max-min network, collectives, jobs, engine (closed forms, brute force)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hwcosim.models.systems.cluster import (
    ECMPRouter,
    FlowNetwork,
    JobSpec,
    Simulator,
    clos,
    fat_tree,
    lingjun_2023,
    maxmin_rates,
    placement,
    ring_allgather,
    ring_allreduce,
    tree_allreduce,
)
from hwcosim.models.systems.cluster.topology import GBPS, LinkKind, hash_choices
from hypothesis import given, settings
from hypothesis import strategies as st

B = 100 * GBPS  # 100 Gb/s in bytes/s


def star(n_hosts: int, gbps: float = 100.0, latency: float = 0.0):
    """n single-GPU, single-port hosts on one non-blocking ToR."""
    return clos(1, 1, n_hosts, gpus_per_host=1, nic_ports=1, nic_gbps=gbps, hop_latency_s=latency)


# ---- topology ---------------------------------------------------------------------------------
def test_lingjun_counts():
    t = lingjun_2023()
    assert t.n_hosts == 847 and t.n_tors == 119 and t.n_pods == 3
    assert sorted(np.bincount(t.host_pod).tolist()) == [179, 306, 362]
    assert np.bincount(t.host_tor).max() == 8
    assert t.n_gpus == 847 * 8


def test_fat_tree_sizes():
    t = fat_tree(4)
    assert (t.n_hosts, t.n_tors, t.n_pods) == (16, 8, 4)
    # non-blocking: ToR up capacity = ToR down capacity
    up = t.capacity[t.link_block(LinkKind.TOR_UP)].reshape(8, -1).sum(1)
    assert np.allclose(up, 2 * 100 * GBPS)


def test_wrong_params():
    with pytest.raises(ValueError, match="nic_ports"):
        clos(1, 1, 2, nic_ports=0)
    with pytest.raises(ValueError, match="even"):
        fat_tree(3)
    with pytest.raises(ValueError, match="oversub"):
        clos(1, 1, 2, tor_oversub=0.5)


def _hop_ok(t, path, s, d):
    """Brute-force check that consecutive hops of a path connect s to d."""
    kinds = [int(t.kind[x]) for x in path if x >= 0]
    hs, hd = s // t.gpus_per_host, d // t.gpus_per_host
    if hs == hd:
        return kinds == [LinkKind.NVL_UP, LinkKind.NVL_DN]
    ts, td = t.host_tor[hs], t.host_tor[hd]
    if ts == td:
        return kinds == [LinkKind.PORT_UP, LinkKind.PORT_DN]
    if t.tor_pod[ts] == t.tor_pod[td]:
        return kinds == [LinkKind.PORT_UP, LinkKind.TOR_UP, LinkKind.TOR_DN, LinkKind.PORT_DN]
    return kinds == [LinkKind.PORT_UP, LinkKind.TOR_UP, LinkKind.AGG_UP, LinkKind.AGG_DN, LinkKind.TOR_DN,
                     LinkKind.PORT_DN]


def test_paths_structure():
    t = clos(2, 2, 2, gpus_per_host=2, nic_ports=2, aggs_per_pod=2, tor_lanes=2, cores_per_plane=2, core_lanes=2)
    rng = np.random.default_rng(0)
    s = rng.integers(0, t.n_gpus, 300)
    d = (s + rng.integers(1, t.n_gpus, 300)) % t.n_gpus
    p = t.paths(s, d, hash_choices(np.column_stack([s, d]), 1))
    for i in range(300):
        assert _hop_ok(t, p[i], s[i], d[i])
    # the source port belongs to the source GPU, the destination port to the destination GPU
    pu = t.link_block(LinkKind.PORT_UP)
    assert np.all((p[:, 0] - pu.start) // 2 == np.where(s // 2 == d // 2, (p[:, 0] - pu.start) // 2, s))
    # agg index a of up and down paths agree: agg-up and agg-down link share plane a
    x = p[:, 2] >= 0
    au, ad = t.link_block(LinkKind.AGG_UP), t.link_block(LinkKind.AGG_DN)
    a_up = ((p[x, 2] - au.start) // 4) % 2
    a_dn = ((p[x, 3] - ad.start) // 4) % 2
    assert np.array_equal(a_up, a_dn)


def test_hash_is_seeded():
    k = np.arange(20).reshape(10, 2)
    assert np.array_equal(hash_choices(k, 3), hash_choices(k, 3))
    assert not np.array_equal(hash_choices(k, 3), hash_choices(k, 4))


# ---- max-min network --------------------------------------------------------------------------
def test_one_flow_line_rate():
    net = FlowNetwork(np.array([B]))
    net.add([[0]], 1e9)
    assert net.rate(0) == pytest.approx(B)
    assert net.time_to_next() == pytest.approx(1e9 / B)


def test_two_flows_half_each():
    net = FlowNetwork(np.array([B, B]))
    a = net.add([[0, 1]], 1e9)
    b = net.add([[1]], 2e9)
    r = net.rates()
    assert r[a] == pytest.approx(B / 2) and r[b] == pytest.approx(B / 2)
    # after a finishes, b takes the whole link: b's finish = 1e9/(B/2) + 1e9/B
    t1 = net.time_to_next()
    assert net.advance(t1) == [a]
    assert net.rate(b) == pytest.approx(B)
    assert t1 + net.time_to_next() == pytest.approx(2e9 / (B / 2) - 1e9 / B)


def test_maxmin_textbook():
    # Bertsekas-Gallager style: links cap (1, 2); flow0 on L0, flow1 on L0+L1, flow2 on L1, flow3 on L1
    inc = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 1]], dtype=float))
    r = maxmin_rates(inc, np.array([1.0, 2.0]))
    assert np.allclose(r, [0.5, 0.5, 0.75, 0.75])


def test_coupled_stream_multiplicity():
    # one stream crossing link 0 twice gets half its capacity
    net = FlowNetwork(np.array([B, B]))
    net.add([[0, -1], [0, 1]], 1e9)
    assert net.rate(0) == pytest.approx(B / 2)


def test_strict_priority():
    net = FlowNetwork(np.array([B, B]))
    hi = net.add([[0]], 1e9, priority=0)
    lo = net.add([[0, 1]], 1e9, priority=1)
    lo2 = net.add([[1]], 1e9, priority=1)
    r = net.rates()
    assert r[hi] == pytest.approx(B) and r[lo] == pytest.approx(0.0) and r[lo2] == pytest.approx(B)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 10_000))
def test_maxmin_is_maxmin(n_links, n_streams, seed):
    """Feasible, and every stream has a bottleneck: a saturated link where no stream is faster."""
    rng = np.random.default_rng(seed)
    inc = (rng.random((n_links, n_streams)) < 0.5).astype(float) * rng.integers(1, 3, (n_links, n_streams))
    inc[rng.integers(0, n_links, n_streams), np.arange(n_streams)] += 1  # every stream crosses >= 1 link
    cap = rng.uniform(0.5, 3.0, n_links)
    r = maxmin_rates(sp.csr_matrix(inc), cap)
    load = inc @ r
    assert np.all(load <= cap * (1 + 1e-9))
    for s in range(n_streams):
        on = inc[:, s] > 0
        sat = on & np.isclose(load, cap)
        ok = [(inc[l] > 0) & (r > r[s] * (1 + 1e-9)) for l in np.flatnonzero(sat)]
        assert any(not m.any() for m in ok), f"stream {s} has no bottleneck"


# ---- collectives through the engine -----------------------------------------------------------
def _run_collective(topo, coll):
    """Time of one collective alone on the topology."""
    net = FlowNetwork(topo.capacity)
    router = ECMPRouter(topo, 0)
    for s in coll.streams:
        net.add(router.route(0, (s.key,), s.src, s.dst), s.nbytes)
    t = 0.0
    while len(net):
        dt = net.time_to_next()
        net.advance(dt)
        t += dt
    return t + coll.latency_s


@pytest.mark.parametrize("n", [2, 3, 8, 16])
@pytest.mark.parametrize("channels", [1, 4])
def test_ring_allreduce_closed_form(n, channels):
    t = star(n)
    S, alpha = 64e6, 7e-6
    got = _run_collective(t, ring_allreduce(np.arange(n), S, channels, alpha))
    assert got == pytest.approx(2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha, rel=1e-9)


@pytest.mark.parametrize("n", [4, 7, 16])
def test_allgather_and_tree_closed_forms(n):
    t = star(n)
    S = 32e6
    assert _run_collective(t, ring_allgather(np.arange(n), S)) == pytest.approx((n - 1) / n * S / B)
    # pipelined tree: the busiest NIC carries S per tree neighbour (children + parent)
    deg = max(sum(1 for c in (2 * i + 1, 2 * i + 2) if c < n) + (i > 0) for i in range(n))
    assert deg == (3 if n >= 5 else 2)
    assert _run_collective(t, tree_allreduce(np.arange(n), S, alpha_s=1e-6)) == pytest.approx(
        deg * S / B + 2 * int(np.log2(n)) * 1e-6)


def test_single_rank_collective_is_empty():
    assert ring_allreduce([5], 1e6).empty


# ---- jobs and engine --------------------------------------------------------------------------
def test_job_iteration_closed_form():
    # DP=4 across 4 hosts on one ToR, TP=2 inside a host: two DP rings, each GPU has its own NIC port
    t = clos(1, 1, 4, gpus_per_host=2, nic_ports=1, nic_gbps=100)
    j = JobSpec("j", dp=4, tp=2, compute_s=0.05, grad_bytes=100e6, iterations=5, alpha_s=2e-6)
    sim = Simulator(t, seed=1)
    sim.add_job(j, placement(j, np.arange(8)))
    sim.run()
    it = sim.jobs[0].iteration_times
    expect = 0.05 + 1.5 * 100e6 / B + 6 * 2e-6
    assert it.size == 5 and np.allclose(it, expect)
    assert sim.gpu_utilisation() == pytest.approx(0.05 / expect)


def test_pp_job_and_validation():
    t = clos(1, 2, 2, gpus_per_host=4, nic_ports=1)
    j = JobSpec("p", dp=2, tp=2, pp=2, compute_s=0.01, grad_bytes=10e6, act_bytes=5e6, iterations=2)
    sim = Simulator(t)
    sim.add_job(j, placement(j, np.arange(8)))
    sim.run()
    rec = sim.jobs[0]
    assert set(rec.comm_s) == {"pp", "dp"} and rec.finished is not None
    with pytest.raises(ValueError, match="overlaps"):
        sim2 = Simulator(t)
        sim2.add_job(j, placement(j, np.arange(8)))
        sim2.add_job(j, placement(j, np.arange(8)))
    with pytest.raises(ValueError, match="dp"):
        JobSpec("x", dp=0)
    with pytest.raises(ValueError, match="needs 8 GPUs"):
        placement(j, np.arange(7))


def test_two_jobs_share_link_fairly():
    """Two DP=2 jobs whose rings both cross ToR 0's single 2:1 uplink (100 Gb/s): max-min gives each
    half. Job a moves S, job b 2 S: a ends at 2 S / B; b then has S left at full rate: 3 S / B."""
    t = clos(1, 2, 1, gpus_per_host=2, nic_ports=1, nic_gbps=100, aggs_per_pod=1, cores_per_plane=1,
             tor_oversub=2.0, hop_latency_s=0.0)
    up = t.capacity[t.link_block(LinkKind.TOR_UP)]
    assert np.allclose(up, B)  # 2 GPUs x 100G down, 2:1 -> one 100G uplink per ToR
    S = 50e6
    ja = JobSpec("a", dp=2, compute_s=0.0, grad_bytes=S, iterations=1, alpha_s=0)
    jb = JobSpec("b", dp=2, compute_s=0.0, grad_bytes=2 * S, iterations=1, alpha_s=0)
    sim = Simulator(t)
    sim.add_job(ja, placement(ja, [0, 2]))  # host 0 (ToR 0) <-> host 1 (ToR 1)
    sim.add_job(jb, placement(jb, [1, 3]))
    sim.run()
    assert sim.jobs[0].iteration_times[0] == pytest.approx(2 * S / B, rel=1e-9)
    assert sim.jobs[1].iteration_times[0] == pytest.approx(3 * S / B, rel=1e-9)
    # alone, job b runs at the full uplink rate
    solo = Simulator(t)
    solo.add_job(jb, placement(jb, [1, 3]))
    solo.run()
    assert solo.jobs[0].iteration_times[0] == pytest.approx(2 * S / B, rel=1e-9)


@pytest.mark.parametrize("n", [2, 5, 8])
@pytest.mark.parametrize("channels", [1, 3])
def test_reducescatter_and_p2p_closed_forms(n, channels):
    from hwcosim.models.systems.cluster import p2p, ring_reducescatter

    t = star(n)
    S, alpha = 48e6, 4e-6
    got = _run_collective(t, ring_reducescatter(np.arange(n), S, channels, alpha))
    assert got == pytest.approx((n - 1) / n * S / B + (n - 1) * alpha, rel=1e-9)
    # PP send/recv: S over one NIC, one latency step; forward and backward concurrently do not interfere
    assert _run_collective(t, p2p(0, n - 1, S, channels, alpha)) == pytest.approx(S / B + alpha, rel=1e-9)


def test_pp_job_closed_form():
    """PP=2 x DP=1 on two single-GPU hosts: compute, then activations forward and gradients backward
    at the same time on opposite link directions: c + A / B + alpha per iteration."""
    t = star(2)
    j = JobSpec("pp", dp=1, pp=2, compute_s=0.01, act_bytes=20e6, iterations=3, alpha_s=3e-6)
    sim = Simulator(t)
    sim.add_job(j, placement(j, [0, 1]))
    sim.run()
    assert np.allclose(sim.jobs[0].iteration_times, 0.01 + 20e6 / B + 3e-6, rtol=1e-9)


def test_same_seed_same_result_and_failure_reroute():
    t = clos(2, 2, 2, gpus_per_host=2, nic_ports=2, aggs_per_pod=2, tor_lanes=2, cores_per_plane=2, core_lanes=2,
             nic_gbps=100, core_oversub=2.0)

    def run(seed, fail=False):
        sim = Simulator(t, seed=seed)
        j = JobSpec("j", dp=8, tp=2, compute_s=0.001, grad_bytes=20e6, iterations=4)
        sim.add_job(j, placement(j, np.arange(16)))
        if fail:
            sim.fail_links(0.0015, np.arange(t.link_block(LinkKind.AGG_UP).start,
                                             t.link_block(LinkKind.AGG_UP).start + 4))
        sim.run()
        return sim.jobs[0].iteration_times

    assert np.array_equal(run(3), run(3))
    f = run(3, fail=True)
    assert f.size == 4 and np.all(np.isfinite(f))
    assert f.sum() >= run(3).sum() * (1 - 1e-9)

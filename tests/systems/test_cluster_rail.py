"""Rail-optimised multi-tier Clos: structure, paths, closed forms, ECMP vs C4P, scenario files."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.cluster import (
    ECMPRouter,
    FlowNetwork,
    JobSpec,
    Simulator,
    clos,
    placement,
    rail_clos,
    ring_allreduce,
)
from hwcosim.models.systems.cluster.c4p import C4PRouter
from hwcosim.models.systems.cluster.topology import GBPS, LinkKind, hash_choices

B = 100 * GBPS


def _small(**kw):
    kw = {"gpus_per_host": 4, "nic_ports": 2, "nic_gbps": 100.0, "aggs_per_pod": 2, "tor_lanes": 2,
          "cores_per_plane": 2, "core_lanes": 2, **kw}
    return rail_clos(2, 2, 3, **kw)  # 2 pods x 2 rail groups x 3 hosts x 4 GPUs = 48 GPUs


def test_rail_counts_and_capacities():
    t = _small()
    assert (t.n_hosts, t.n_gpus, t.n_tors, t.n_leaves, t.n_pods) == (12, 48, 4, 16, 2)
    # GPU i of every host of a group shares rail switch (group, i); groups own disjoint switches
    leaf = t.gpu_leaf.reshape(t.n_hosts, 4)
    assert np.array_equal(leaf[0], [0, 1, 2, 3]) and np.array_equal(leaf[2], [0, 1, 2, 3])
    assert np.array_equal(leaf[3], [4, 5, 6, 7]) and np.array_equal(leaf[11], [12, 13, 14, 15])
    assert np.array_equal(t.leaf_pod, np.repeat([0, 1], 8))
    # link blocks: ToR-up/-down per rail switch x agg x lane
    tu = t.link_block(LinkKind.TOR_UP)
    assert tu.stop - tu.start == 16 * 2 * 2
    # non-blocking: a rail switch serves 3 hosts x 1 GPU x 2 ports x 100G = 600G, up the same
    up = t.capacity[tu].reshape(16, -1).sum(1)
    assert np.allclose(up, 600 * GBPS)
    # the same numbers with a normal ToR would be 4x the downlink (every GPU of a host on one ToR)
    c = clos(2, 2, 3, gpus_per_host=4, nic_ports=2, nic_gbps=100.0, aggs_per_pod=2, tor_lanes=2,
             cores_per_plane=2, core_lanes=2)
    assert c.n_leaves == 4 and np.allclose(c.capacity[c.link_block(LinkKind.TOR_UP)].reshape(4, -1).sum(1),
                                           4 * 600 * GBPS)
    with pytest.raises(ValueError, match="rail"):
        clos(1, 1, 2, rail="yes")


def _kinds(t, p):
    return [int(t.kind[x]) for x in p if x >= 0]


def test_rail_paths():
    t = _small()
    K = LinkKind
    rng = np.random.default_rng(0)
    s = rng.integers(0, t.n_gpus, 400)
    d = (s + rng.integers(1, t.n_gpus, 400)) % t.n_gpus
    p = t.paths(s, d, hash_choices(np.column_stack([s, d]), 3))
    tu, td = t.link_block(K.TOR_UP), t.link_block(K.TOR_DN)
    pu = t.link_block(K.PORT_UP)
    for i in range(s.size):
        hs, hd = s[i] // 4, d[i] // 4
        ls, ld = t.gpu_leaf[s[i]], t.gpu_leaf[d[i]]
        k = _kinds(t, p[i])
        if hs == hd:
            assert k == [K.NVL_UP, K.NVL_DN]
        elif ls == ld:  # same rail, same group: one switch hop
            assert k == [K.PORT_UP, K.PORT_DN]
            assert s[i] % 4 == d[i] % 4 and t.host_tor[hs] == t.host_tor[hd]
        elif t.leaf_pod[ls] == t.leaf_pod[ld]:  # cross-rail or cross-group in a pod: via a spine
            assert k == [K.PORT_UP, K.TOR_UP, K.TOR_DN, K.PORT_DN]
        else:
            assert k == [K.PORT_UP, K.TOR_UP, K.AGG_UP, K.AGG_DN, K.TOR_DN, K.PORT_DN]
        if hs != hd:
            assert (p[i, 0] - pu.start) // 2 == s[i]
        if p[i, 1] >= 0:  # the up link leaves the source's rail switch, the down link enters the destination's
            assert (p[i, 1] - tu.start) // 4 == ls and (p[i, 4] - td.start) // 4 == ld
    # a cross-rail pair in one group never stays inside a switch
    assert _kinds(t, t.paths([0], [5], np.zeros((1, 8)))[0]) == [K.PORT_UP, K.TOR_UP, K.TOR_DN, K.PORT_DN]
    # hop latency: 1 switch for same rail, 3 via a spine
    assert t.base_latency([0, 0], [4, 5]).tolist() == [1e-6, 3e-6]


def _alone(topo, coll, router):
    net = FlowNetwork(topo.capacity)
    for s in coll.streams:
        net.add(router.route(0, (s.key,), s.src, s.dst), s.nbytes)
    t = 0.0
    while len(net):
        dt = net.time_to_next()
        net.advance(dt)
        t += dt
    return t + coll.latency_s


@pytest.mark.parametrize("n", [2, 3, 6])
def test_rail_ring_allreduce_closed_form(n):
    """A DP ring over GPU 1 of n hosts of one rail group stays on rail switch 1: 2(n-1)/n S / B."""
    t = rail_clos(1, 1, 6, gpus_per_host=4, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, cores_per_plane=1)
    ranks = np.arange(n) * 4 + 1
    S, alpha = 64e6, 3e-6
    for router in (ECMPRouter(t, 0), C4PRouter(t, 0)):
        got = _alone(t, ring_allreduce(ranks, S, 2, alpha), router)
        assert got == pytest.approx(2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha, rel=1e-9)


def test_rail_cross_rail_ring_needs_the_spine():
    """A ring over GPUs of different rails crosses the spine; with 2:1 oversubscribed rail uplinks
    and every flow on its own uplink (C4P), each hop gets half the NIC rate: 2 (n-1)/n S / (B/2)."""
    t = rail_clos(1, 1, 4, gpus_per_host=4, nic_ports=1, nic_gbps=100.0, aggs_per_pod=4, tor_lanes=1,
                  cores_per_plane=1, tor_oversub=2.0)  # rail switch: 400G down, 4 x 50G up
    ranks = np.array([0, 5, 10, 15])  # host h, rail h: every hop changes rail
    S = 40e6
    got = _alone(t, ring_allreduce(ranks, S), C4PRouter(t, 0))
    assert got == pytest.approx(1.5 * S / (B / 2), rel=1e-9)


def _rail_jobs(t, n_jobs, hosts_per_job, seed):
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(t.n_hosts)
    out = []
    for k in range(n_jobs):
        h = np.sort(hosts[k * hosts_per_job:(k + 1) * hosts_per_job])
        spec = JobSpec(f"j{k}", dp=hosts_per_job, tp=4, compute_s=0.001, grad_bytes=40e6, iterations=3, channels=2)
        out.append((spec, placement(spec, (h[:, None] * 4 + np.arange(4)).reshape(-1))))
    return out


def test_rail_c4p_vs_ecmp():
    """Jobs spread over groups and pods of a rail fabric: C4P's planned paths are never slower than
    ECMP's hashed ones, and strictly faster for at least one seed (hash collisions on the spine)."""
    t = _small()
    gains = []
    for seed in range(3):
        jobs = _rail_jobs(t, 2, 6, seed)
        it = {}
        for name, router in (("ecmp", ECMPRouter(t, seed)), ("c4p", C4PRouter(t, seed))):
            sim = Simulator(t, router)
            for spec, place in jobs:
                sim.add_job(spec, place)
            sim.run()
            it[name] = np.mean([r.iteration_times.mean() for r in sim.jobs.values()])
        assert it["c4p"] <= it["ecmp"] * (1 + 1e-9)
        gains.append(1 - it["c4p"] / it["ecmp"])
    assert max(gains) > 0.05


def test_rail_scenario_file(tmp_path):
    from hwcosim.models.systems.cluster.scenario import ScenarioError, load_scenario, prepare

    f = tmp_path / "r.toml"
    f.write_text('name = "r"\n[topology]\ngenerator = "rail-clos"\npods = 1\ntors_per_pod = 2\nhosts_per_tor = 2\n'
                 'gpus_per_host = 4\n[[jobs]]\ndp = 4\ntp = 4\ngrad_bytes = 1e7\niterations = 2\n')
    sc = load_scenario(f)
    topo = prepare(sc)[0]
    assert topo.rail and topo.n_leaves == 8
    f.write_text('name = "r"\n[topology]\ngenerator = "rail-clos"\npods = 1\ntors_per_pod = 2\n'
                 '[[jobs]]\ndp = 4\n')
    with pytest.raises(ScenarioError, match="topology.hosts_per_tor"):
        load_scenario(f)

"""Scale: the ECMP route cache and incremental max-min give the same results as without them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hwcosim.models.systems.cluster import JobSpec, Simulator, clos, placement
from hwcosim.models.systems.cluster.bench import scale_run
from hwcosim.models.systems.cluster.network import FlowNetwork, maxmin_rates
from hwcosim.models.systems.cluster.routing import ECMPRouter
from hwcosim.models.systems.cluster.topology import LinkKind


class _NoCache(ECMPRouter):
    def route(self, job_id, route_key, src, dst):
        self._cache.clear()
        return super().route(job_id, route_key, src, dst)


def _sim(router_cls, incremental, placements="random", fail=True):
    t = clos(2, 2, 4, gpus_per_host=2, nic_ports=2, aggs_per_pod=2, cores_per_plane=2, tor_oversub=2.0)
    sim = Simulator(t, router_cls(t, 3))
    sim.net.incremental = incremental
    rng = np.random.default_rng(1)
    order = rng.permutation(t.n_hosts) if placements == "random" else np.arange(t.n_hosts)
    for k in range(4):
        h = np.sort(order[4 * k:4 * k + 4])
        spec = JobSpec(f"j{k}", dp=4, tp=2, compute_s=float(rng.uniform(0.01, 0.03)), grad_bytes=5e7,
                       iterations=6, channels=2, a2a_bytes=1e7 if k == 1 else 0.0, overlap=0.3 if k == 2 else 0.0)
        sim.add_job(spec, placement(spec, (h[:, None] * 2 + np.arange(2)).ravel()), start=0.001 * k)
    if fail:
        blk = t.link_block(LinkKind.TOR_UP)
        sim.fail_links(0.02, np.arange(blk.start, blk.start + 3), restore_at=0.06)
    sim.run()
    return sim


def test_route_cache_gives_identical_runs():
    a, b = _sim(ECMPRouter, False), _sim(_NoCache, False)
    for ra, rb in zip(a.jobs.values(), b.jobs.values()):
        assert ra.iter_end == rb.iter_end
    assert a.events == b.events


@pytest.mark.parametrize("placements", ["random", "packed"])
def test_incremental_maxmin_matches_full(placements):
    full, inc = _sim(ECMPRouter, False, placements), _sim(ECMPRouter, True, placements)
    for ra, rb in zip(full.jobs.values(), inc.jobs.values()):
        assert len(ra.iter_end) == len(rb.iter_end) == 6
        assert np.allclose(ra.iter_end, rb.iter_end, rtol=1e-9, atol=0)
    assert full.events == inc.events and full.net.recomputes == inc.net.recomputes
    assert np.allclose(full.net.bytes_on_link, inc.net.bytes_on_link, rtol=1e-9, atol=1e-3)
    assert inc.net.streams_recomputed <= full.net.streams_recomputed
    if placements == "packed":  # jobs on separate ToRs: components are per job, fewer streams solved
        assert inc.net.streams_recomputed < full.net.streams_recomputed


def test_incremental_solves_only_the_touched_component():
    """Two disjoint groups of links: a change in one group re-solves only that group's streams,
    and a stream bridging both merges them into one component."""
    net = FlowNetwork(np.ones(20))
    a = [net.add([[i % 5, (i + 1) % 5]], 1.0) for i in range(8)]  # links 0-4
    b = [net.add([[10 + i % 5, 10 + (i + 1) % 5]], 1.0) for i in range(8)]  # links 10-14
    net.rates()
    n0 = net.streams_recomputed
    net.add([[2]], 1.0)  # small change in group a: 9 streams solved, not 17
    net.rates()
    assert net.streams_recomputed - n0 == 9
    n0 = net.streams_recomputed
    net.remove(b[0])
    net.rates()
    assert net.streams_recomputed - n0 == 7
    n0 = net.streams_recomputed
    net.add([[4, 11]], 1.0)  # bridges a and b
    net.rates()
    assert net.streams_recomputed - n0 == len(net) == 17
    n0 = net.streams_recomputed
    net.remove(a[0])
    net.rates()
    assert net.streams_recomputed - n0 == len(net)


def test_incremental_rates_equal_full_on_random_changes():
    rng = np.random.default_rng(0)
    cap = rng.uniform(1, 10, 40)
    a, b = FlowNetwork(cap, incremental=False), FlowNetwork(cap)  # incremental is the default
    live = []
    for _ in range(200):
        op = rng.integers(4)
        if op < 2 or not live:
            paths = rng.integers(0, 40, size=(int(rng.integers(1, 3)), 2))
            nb, pr = float(rng.uniform(1, 5)), int(rng.integers(2))
            assert a.add(paths, nb, pr) == b.add(paths, nb, pr)
            live.append(a._next_id - 1)  # noqa: SLF001
        elif op == 2:
            sid = live.pop(int(rng.integers(len(live))))
            assert a.remove(sid) == pytest.approx(b.remove(sid))
        else:
            links, v = rng.integers(0, 40, 2), float(rng.uniform(0, 10))
            a.set_capacity(links, v)
            b.set_capacity(links, v)
        ra, rb = a.rates(), b.rates()
        assert ra.keys() == rb.keys()
        assert np.allclose(list(ra.values()), list(rb.values()), rtol=1e-9, atol=1e-12)
        dt = min(a.time_to_next(), 0.05)
        assert a.advance(dt) == b.advance(dt)
        live = [s for s in live if s in a]
    assert b.streams_recomputed < a.streams_recomputed


def _reference_rates(net: FlowNetwork) -> dict[int, float]:
    """Full recompute with the independent sparse-matrix progressive filling (maxmin_rates)."""
    ids = list(net._slot)  # noqa: SLF001
    if not ids:
        return {}
    rows = np.concatenate([net.paths_of(s) for s in ids])
    cols = np.repeat(np.arange(len(ids)), [net.paths_of(s).size for s in ids])
    inc = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(net.capacity.size, len(ids)))
    prio = np.array([net._v_prio[net._slot[s]] for s in ids])  # noqa: SLF001
    return dict(zip(ids, maxmin_rates(inc, net.capacity, prio)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_equals_reference_full_recompute(seed):
    """Random starts, ends (completions and removals), reroutes, priority and capacity changes on a
    clustered link set (several components that merge and split): after every change the
    incremental rates equal a full recompute by the reference maxmin_rates within 1e-9 relative,
    and so do the per-link loads and the bytes carried."""
    rng = np.random.default_rng(seed)
    n_links = 60
    cap = rng.uniform(1, 10, n_links)
    net = FlowNetwork(cap)
    full = FlowNetwork(cap, incremental=False)
    assert net.incremental and not full.incremental
    for step in range(300):
        op = rng.integers(10)
        live = list(net._slot)  # noqa: SLF001
        if op < 4 or not live:
            g = int(rng.integers(6))  # links of one of 6 clusters, sometimes across two
            lo = 10 * g
            hi = lo + (20 if rng.random() < 0.15 else 10)
            paths = rng.integers(lo, min(hi, n_links), size=(int(rng.integers(1, 4)), 3))
            paths[rng.random(paths.shape) < 0.2] = -1
            paths[:, 0] = np.abs(paths[:, 0])
            nb, pr = float(rng.uniform(1, 5)), int(rng.integers(3))
            assert net.add(paths, nb, pr) == full.add(paths, nb, pr)
        elif op == 4:
            sid = live[int(rng.integers(len(live)))]
            assert net.remove(sid) == pytest.approx(full.remove(sid), rel=1e-9)
        elif op == 5:
            sid = live[int(rng.integers(len(live)))]
            p = rng.integers(0, n_links, size=(2, 2))
            net.reroute(sid, p)
            full.reroute(sid, p)
        elif op == 6:
            sid, pr = live[int(rng.integers(len(live)))], int(rng.integers(3))
            net.set_priority(sid, pr)
            full.set_priority(sid, pr)
        elif op == 7:
            links, v = rng.integers(0, n_links, 2), float(rng.choice([0.0, rng.uniform(1, 10)]))
            net.set_capacity(links, v)
            full.set_capacity(links, v)
        ref = _reference_rates(net)
        got, fr = net.rates(), full.rates()
        assert list(got) == list(ref) == list(fr)
        for s, r in ref.items():
            assert got[s] == pytest.approx(r, rel=1e-9, abs=1e-12), (step, s)
            assert fr[s] == pytest.approx(r, rel=1e-9, abs=1e-12), (step, s)
        assert np.allclose(net.link_load(), full.link_load(), rtol=1e-9, atol=1e-12)
        dt = min(net.time_to_next(), float(rng.uniform(0.01, 0.3)))
        assert net.advance(dt) == full.advance(dt)
    assert np.allclose(net.bytes_on_link, full.bytes_on_link, rtol=1e-9, atol=1e-9)
    assert net.bytes_on_link.sum() > 0
    assert net.streams_recomputed < full.streams_recomputed


def test_scale_run_reports_events():
    r = scale_run(256, 2, 3)
    assert r["gpus"] == 256 and r["events"] > r["streams"] > 0 and r["events_per_wall_s"] > 0
    assert [len(x) for x in r["iter_end"]] == [3, 3]
    with pytest.raises(ValueError, match="GPUs"):
        scale_run(1000, 3, 1)


@pytest.mark.slow
def test_scale_8192_gpus_100_iterations():
    r = scale_run(8192, 1, 100)
    assert r["gpus"] == 8192 and r["links"] == 51200 and [len(x) for x in r["iter_end"]] == [100]

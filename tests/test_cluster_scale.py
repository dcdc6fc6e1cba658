"""Scale: the ECMP route cache and incremental max-min give the same results as without them."""

from __future__ import annotations

import numpy as np
import pytest

from models.cluster import JobSpec, Simulator, clos, placement
from models.cluster.cli import scale_run
from models.cluster.network import FlowNetwork
from models.cluster.routing import ECMPRouter
from models.cluster.topology import LinkKind


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
    if placements == "packed":  # jobs on separate ToRs: components are per job, far fewer streams solved
        assert inc.net.streams_recomputed < 0.7 * full.net.streams_recomputed


def test_incremental_rates_equal_full_on_random_changes():
    rng = np.random.default_rng(0)
    cap = rng.uniform(1, 10, 40)
    a, b = FlowNetwork(cap), FlowNetwork(cap, incremental=True)
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

"""All-to-all (closed form, flow decomposition) and compute/communication overlap in jobs."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.cluster import JobSpec, Simulator, alltoall, bus_bw_factor, clos, placement
from hwcosim.models.systems.cluster.job import Comm, Compute
from hwcosim.models.systems.cluster.topology import GBPS

B = 100 * GBPS


def star(n_hosts: int, gbps: float = 100.0):
    return clos(1, 1, n_hosts, gpus_per_host=1, nic_ports=1, nic_gbps=gbps, hop_latency_s=0.0)


def _time_of(topo, coll):
    from hwcosim.models.systems.cluster.routing import ECMPRouter

    sim = Simulator(topo, ECMPRouter(topo, 0))
    r = sim.router
    for s in coll.streams:
        sim.net.add(r.route(0, (s.key,), s.src, s.dst), s.nbytes)
    t = 0.0
    while len(sim.net):
        dt = sim.net.time_to_next()
        sim.net.advance(dt)
        t += dt
    return t + coll.latency_s


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("channels", [1, 2])
def test_alltoall_closed_form(n, channels):
    S, alpha = 48e6, 3e-6
    c = alltoall(np.arange(n), S, channels, alpha)
    # every ordered pair (i, j), i != j, appears exactly `channels` times, S / n / channels bytes each
    pairs = [(a, b) for s in c.streams for a, b in zip(s.src.tolist(), s.dst.tolist())]
    assert len(pairs) == channels * n * (n - 1) and len(set(pairs)) == n * (n - 1)
    assert all(s.nbytes == pytest.approx(S / n / channels) for s in c.streams)
    assert _time_of(star(n), c) == pytest.approx((n - 1) / n * S / B + alpha, rel=1e-9)
    assert bus_bw_factor("alltoall", n) == pytest.approx((n - 1) / n)
    assert alltoall([3], S).empty


def test_alltoall_in_job_closed_form():
    t = clos(1, 1, 4, gpus_per_host=1, nic_ports=1, nic_gbps=100, hop_latency_s=0.0)
    j = JobSpec("moe", dp=4, compute_s=0.02, a2a_bytes=40e6, iterations=3, alpha_s=0.0)
    sim = Simulator(t)
    sim.add_job(j, placement(j, np.arange(4)))
    sim.run()
    assert np.allclose(sim.jobs[0].iteration_times, 0.02 + 0.75 * 40e6 / B)
    assert set(sim.jobs[0].comm_s) == {"ep"}


def _dp_job(overlap, compute_s=0.05):
    t = clos(1, 1, 4, gpus_per_host=2, nic_ports=1, nic_gbps=100)
    j = JobSpec("j", dp=4, tp=2, compute_s=compute_s, grad_bytes=100e6, iterations=4, alpha_s=2e-6,
                overlap=overlap)
    sim = Simulator(t, seed=1)
    sim.add_job(j, placement(j, np.arange(8)))
    sim.run()
    return sim


@pytest.mark.parametrize("overlap", [0.0, 0.1, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("compute_s", [0.002, 0.05])
def test_overlap_closed_form(overlap, compute_s):
    """Iteration = (1 - f) c + max(f c, T_dp); the exposed DP time is max(0, T_dp - f c)."""
    t_dp = 1.5 * 100e6 / B + 6 * 2e-6
    sim = _dp_job(overlap, compute_s)
    expect = (1 - overlap) * compute_s + max(overlap * compute_s, t_dp)
    rec = sim.jobs[0]
    assert np.allclose(rec.iteration_times, expect, rtol=1e-9)
    assert rec.comm_s["dp"] == pytest.approx(4 * max(t_dp - overlap * compute_s, 0.0), abs=1e-12)
    assert rec.compute_s == pytest.approx(4 * compute_s)
    assert sim.gpu_utilisation() == pytest.approx(compute_s / expect)


def test_overlap_steps_and_validation():
    j = JobSpec("j", dp=2, tp=1, compute_s=0.1, grad_bytes=1e6, tp_bytes=0, overlap=0.3)
    steps = j.steps(placement(j, [0, 1]))
    assert isinstance(steps[0], Compute) and steps[0].seconds == pytest.approx(0.07)
    assert isinstance(steps[1], Comm) and steps[1].label == "dp" and steps[1].compute_s == pytest.approx(0.03)
    # no DP all-reduce: nothing to hide, compute stays whole
    j1 = JobSpec("k", dp=1, compute_s=0.1, overlap=0.5)
    st1 = j1.steps(placement(j1, [0]))
    assert [type(s) for s in st1] == [Compute] and st1[0].seconds == 0.1
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="overlap must be in"):
            JobSpec("x", dp=2, overlap=bad)

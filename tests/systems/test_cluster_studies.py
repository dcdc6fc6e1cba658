"""Arnold (MIP vs brute force), C4P (planner balance), Crux (DP vs brute force), CLI."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hwcosim.models.systems.cluster import ECMPRouter, JobSpec, Simulator, clos, placement
from hwcosim.models.systems.cluster.arnold import (
    POLICIES,
    SETTINGS,
    PlacementJob,
    arnold_mip,
    best_fit,
    split_capacity,
    spreads,
    weighted_spread,
)
from hwcosim.models.systems.cluster.c4p import C4PRouter
from hwcosim.models.systems.cluster.crux import compress_levels, sincronia_order
from hwcosim.models.systems.cluster.topology import LinkKind


# ---- Arnold -----------------------------------------------------------------------------------
def _brute(job: PlacementJob, caps, alpha, beta):
    """Exhaustive minima over all assignments (tiny jobs only): the MIP's objective (alpha * minipods
    used + beta * max PP spread) and the true weighted max spread."""
    mip = true = np.inf
    M = len(caps)
    for assign in itertools.product(range(M), repeat=job.nodes):
        a = np.array(assign)
        if np.any(np.bincount(a, minlength=M) > caps):
            continue
        pod = a.reshape(job.rows, job.pp)
        mip = min(mip, alpha * np.unique(a).size + beta * spreads(pod)[1])
        true = min(true, weighted_spread(pod, alpha, beta))
    return mip, true


@pytest.mark.parametrize("caps", [[3, 3, 2], [3, 1, 4], [1, 1, 6], [5, 3, 0]])
@pytest.mark.parametrize("alpha", [0.5, 0.8, 0.2])
def test_arnold_mip_matches_brute_force(caps, alpha):
    job = PlacementJob(dp=4, tp=8, pp=2)  # 4 x 2 nodes
    caps = np.array(caps)
    info = {}
    pod = arnold_mip(job, caps, alpha, 1 - alpha, info=info)
    assert np.all(np.bincount(pod.ravel(), minlength=3) <= caps)
    mip, true = _brute(job, caps, alpha, 1 - alpha)
    assert info["objective"] == pytest.approx(mip)
    # the realised placement is at least as good as the MIP's bound, and never below the true optimum
    assert true - 1e-9 <= weighted_spread(pod, alpha, 1 - alpha) <= mip + 1e-9


def test_arnold_never_worse_than_baselines():
    M, total, job = SETTINGS["medium"]
    for d in range(3):
        caps = split_capacity(M, total, job.nodes, d)
        ws = {p: weighted_spread(f(job, caps, 0.5, 0.5, d), 0.5, 0.5) for p, f in POLICIES.items()}
        assert all(ws["arnold"] <= v + 1e-9 for v in ws.values())


def test_spreads_and_megatron_order():
    job = PlacementJob(dp=4, tp=8, pp=2)
    pod = best_fit(job, np.array([2, 9]))  # fits in minipod 1
    assert spreads(pod) == (1, 1)
    assert spreads(np.array([[0, 1], [0, 1]])) == (1, 2)
    assert spreads(np.array([[0, 0], [1, 1]])) == (2, 1)
    with pytest.raises(ValueError, match="divide"):
        PlacementJob(dp=4, tp=3, pp=1)
    with pytest.raises(ValueError, match="cannot hold"):
        best_fit(job, np.array([2, 2]))


def test_split_capacity_seeded():
    a = split_capacity(5, 438, 96, 3)
    assert a.sum() == 438 and np.array_equal(a, split_capacity(5, 438, 96, 3))


# ---- C4P --------------------------------------------------------------------------------------
def _topo():
    return clos(2, 2, 2, gpus_per_host=4, nic_ports=2, nic_gbps=100, aggs_per_pod=2, tor_lanes=2,
                cores_per_plane=2, core_lanes=2)


def test_c4p_balances_bond_ports_and_links():
    t = _topo()
    r = C4PRouter(t, 0)
    # every GPU of host 0 sends to the same-index GPU of every other host: 4 x 7 flows
    src = np.repeat(np.arange(4), 7)
    dst = np.tile(np.arange(1, 8) * 4, 4) + src
    r.route(0, ("k",), src, dst)
    pu = r.count[t.link_block(LinkKind.PORT_UP)].reshape(t.n_gpus, 2)[:4]
    assert np.all(np.abs(pu[:, 0] - pu[:, 1]) <= 1)  # 7 flows per GPU: 4/3 split
    tu = r.count[t.link_block(LinkKind.TOR_UP)].reshape(t.n_tors, -1)[0]
    assert tu.max() - tu.min() <= 1  # 24 flows leave ToR 0 over 4 lanes: 6 each


def test_c4p_beats_ecmp_and_replans_on_failure():
    t = _topo()
    hosts = np.array([0, 3, 5, 6])
    spec = JobSpec("j", dp=4, tp=4, compute_s=0.001, grad_bytes=50e6, iterations=3, channels=2)
    place = placement(spec, (hosts[:, None] * 4 + np.arange(4)).reshape(-1))

    def run(router, fail=False):
        sim = Simulator(t, router)
        sim.add_job(spec, place)
        if fail:
            au = t.link_block(LinkKind.AGG_UP).start
            sim.fail_links(0.002, [au, au + 1])
        sim.run()
        return sim.jobs[0].iteration_times.mean()

    line = 0.001 + 1.5 * 50e6 / 2 / (100e9 / 8) + 6 * 5e-6  # 2 channels, one port each, no collision
    c4 = run(C4PRouter(t, 0))
    assert c4 == pytest.approx(line, rel=1e-6)
    assert run(ECMPRouter(t, 0)) >= c4 - 1e-12
    assert np.isfinite(run(C4PRouter(t, 0), fail=True))


# ---- Crux -------------------------------------------------------------------------------------
def _cut(levels, prio, inten, share):
    n = len(prio)
    return sum(inten[i] for i in range(n) for j in range(n)
               if share[i, j] and prio[i] > prio[j] and levels[i] < levels[j])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("K", [2, 3])
def test_crux_compression_optimal_on_total_order(seed, K):
    """When every pair shares a link the DAG is a total order: the DP must find the best cut."""
    rng = np.random.default_rng(seed)
    n = 6
    inten = rng.uniform(1, 10, n)
    prio = inten.copy()
    share = np.ones((n, n), dtype=bool)
    lv = compress_levels(prio, inten, share, K, m=10, seed=seed)
    assert lv.max() < K
    # levels respect priorities
    order = np.argsort(-prio)
    assert np.all(np.diff(lv[order]) >= 0)
    best = max(_cut(np.searchsorted(np.array(c), np.arange(n), side="right")[np.argsort(order)], prio, inten, share)
               for c in itertools.combinations(range(1, n), K - 1))
    assert _cut(lv, prio, inten, share) == pytest.approx(best)


def test_sincronia_order_puts_heaviest_last():
    loads = np.array([[1.0, 0.0], [5.0, 0.0], [0.0, 2.0]])
    # link 0 is the bottleneck (6): job 1 goes last; then link 1 (2): job 2; then job 0
    assert sincronia_order(loads).tolist() == [0, 2, 1]


# ---- CLI --------------------------------------------------------------------------------------
def test_cli_bad_input_and_quick_crux(tmp_path, capsys):
    from hwcosim.cosim.cli.cluster import main

    code = main(["crux", "--quick", "--levels", "0", "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.slow
@pytest.mark.parametrize("study", ["arnold", "c4p", "crux"])
def test_cli_quick_studies(tmp_path, study):
    from hwcosim.cosim.cli.cluster import main

    assert main([study, "--quick", "-o", str(tmp_path)]) == 0
    assert json.loads((tmp_path / f"{study}.json").read_text())
    assert (tmp_path / f"{study}.png").stat().st_size > 0


# ---- CASSINI-like time shifts ---------------------------------------------------------------------
def test_cassini_shifts_interleave_two_jobs():
    """Two identical DP=2 jobs whose rings share both ToR uplinks, compute = solo comm time c:
    unshifted they communicate together at half rate (iteration 3c); shifted by c they interleave
    (iteration 2c), so utilisation rises from 1/3 to 1/2."""
    from hwcosim.models.systems.cluster.crux import _simulate, cassini_shifts
    from hwcosim.models.systems.cluster.topology import GBPS

    t = clos(1, 2, 2, gpus_per_host=1, nic_ports=1, nic_gbps=100, aggs_per_pod=1, cores_per_plane=1,
             tor_oversub=2.0, hop_latency_s=0.0)
    S = 50e6
    c = S / (100 * GBPS)
    jobs = []
    for k, hosts in enumerate(([0, 2], [1, 3])):
        spec = JobSpec(f"j{k}", dp=2, compute_s=c, grad_bytes=S, iterations=10**6, alpha_s=0.0)
        jobs.append((spec, placement(spec, hosts)))
    sh = cassini_shifts(t, jobs, seed=0)
    assert abs(abs(sh[1] - sh[0]) - c) < 2 * c / 64 + 1e-12
    horizon = 40 * c
    u_ecmp, _ = _simulate(t, ECMPRouter(t, 0), jobs, horizon)
    u_cas, sim = _simulate(t, ECMPRouter(t, 0), jobs, horizon, sh)
    assert u_ecmp == pytest.approx(1 / 3, rel=0.05)
    assert u_cas == pytest.approx(0.5, rel=0.06)
    it = sim.jobs[1].iteration_times[2:]
    assert np.allclose(it, 2 * c, rtol=1e-6)

"""Crux: GPU-intensity-driven communication scheduling (Cao et al., Alibaba Cloud, "Crux:
GPU-Efficient Communication Scheduling for Deep Learning Training", SIGCOMM 2024).

- **GPU intensity** ``I_j = W_j / t_j``: compute per iteration (GPU-seconds, ``gpus * compute_s``)
  over the transfer time of the job's most loaded link (its bytes per iteration on that link over
  the link capacity, on the job's paths).
- **Path selection**: jobs in descending intensity take, flow by flow, the least-congested
  equal-cost path, congestion = bytes already assigned to the link per unit capacity.
- **Priority** ``P_j = k_j * I_j``. The correction factor comes from a pairwise comparison with a
  reference job (the most intense): our reading, stated because the paper's exact procedure is
  not in SPECS.md, is that j and the reference run alone on their planned paths twice (j first,
  reference first) and, when the measured GPU utilisation prefers the opposite of the intensity
  order, ``k_j`` is set so that ``P_j`` crosses the reference's priority by the measured ratio;
  otherwise ``k_j = 1``.
- **Compression to K levels**: the contention DAG has an edge j1 -> j2 when the jobs share a link
  and P_j1 > P_j2, weighted I_j1. For m = 10 topological orders (the priority order and 9 seeded
  random ones) the DP ``f(i, k) = max_j f(j, k-1) + C(j, i)`` cuts the order into K contiguous
  levels maximising the weight of edges between levels (C(j, i): weight of edges from positions
  < j into positions j..i-1); the best order wins.

Baselines: ECMP with no priorities (max-min fair), and a **Sincronia-like** order (Agarwal et al.,
SIGCOMM 2018, BSSI with unit weights): repeatedly take the most loaded link over the remaining
jobs' per-iteration bytes, put last the job with the most bytes on it, remove it; the order is
cut into K equal groups of hardware priorities, on ECMP paths. (Sincronia schedules coflows
without knowing compute; that is the point of comparison.)

A **CASSINI-like** baseline (Rajasekaran et al., "CASSINI: Network-Aware Job Scheduling in
Machine Learning Clusters", NSDI 2024): jobs keep ECMP paths and equal priority, but jobs that
share links are *time-shifted* so their communication phases interleave. Our simplification of
its geometric abstraction: every job is a periodic on/off pattern (compute ``c_j``, then
communication ``t_j`` = its most loaded link's bytes over capacity, period ``T_j = c_j + t_j``);
jobs are visited in descending ``t_j`` and each takes, of ``grid`` candidate shifts in
``[0, T_j)``, the one with the least sampled overlap (over ``4 max T``) of its communication with
that of the already-shifted jobs it shares a link with (CASSINI's affinity graph traversal,
greedily, pairwise instead of per link circle). The shift delays the job's start once; there is no
periodic re-alignment (CASSINI's agent re-shifts when iterations drift). Allocated GPU time counts
from 0, so the waiting is paid for. On our trace the periods are drawn at random, so they are
rarely commensurate: in steady state a one-shot shift changes little (measured: utilisation
within 1% of ECMP's once the wait is excluded), and the wait makes it lose on short horizons. The
test ``test_cassini_shifts_interleave_two_jobs`` shows the case CASSINI targets (equal periods):
utilisation 1/3 -> 1/2.

Trace (synthetic, documented, seeded): jobs of 2-8 hosts (TP = 8 inside a host, DP across hosts,
ring all-reduce, 2 channels), compute 20-200 ms per iteration, gradients 0.25-2 GB per rank,
hosts drawn at random (a fragmented cluster), all running for the horizon on a Clos with 2:1
oversubscription at the ToR and core layers. GPU utilisation = compute GPU-time / allocated GPU-time.

The study also runs on the **real Lingjun 2023 topology** (:func:`lingjun_topology`: the data
set's 847 hosts / 119 ToRs / 3 pods, one 400 Gb/s port per GPU, 2:1 at the ToR and aggregation
layers, our choice since the data set gives no port counts) with the same trace generator and 60
jobs (about 2,500 GPUs) on random hosts, over a 2 s horizon (quick: 20 jobs, 1 s). Hosts drawn at random over 847 hosts
rarely crowd one ToR, so less traffic contends than on the small synthetic Clos and all gains are
smaller there.

**Fair comparison.** Crux plans paths *and* sets priorities; its hashed-path baselines lose to the
planning alone. So every baseline also runs on Crux's planned paths (``crux-paths``: fair sharing;
``sincronia-planned``: Sincronia's order from the planned link loads; ``cassini-planned``: CASSINI's
shifts computed on the planned paths) and the study reports the **priority effect** (Crux over
those, same paths) apart from the **path-planning effect** (``crux-paths`` over ``ecmp``, both
fair). The horizon (20 s; quick 3 s) is long against CASSINI's shift (at most one period, a few
hundred ms), and its utilisation with the wait excluded is reported too. The band re-runs the
study over the parameters the effects depend on most: ToR/core oversubscription (1, 2, 4:1) and
the gradient bytes (x0.5, x2: the communication share).
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

from .c4p import C4PRouter
from .engine import Simulator
from .job import Comm, JobSpec, placement
from .routing import ECMPRouter
from .topology import Topology, clos

__all__ = ["job_link_bytes", "intensity", "compress_levels", "sincronia_order", "CruxRouter", "make_trace",
           "cassini_shifts", "run_study", "SCHEMES", "PLANNED", "run_intensity_study", "trace_contention"]


def _iter_streams(spec: JobSpec, place):
    for k, step in enumerate(spec.steps(place)):
        if isinstance(step, Comm):
            for ci, coll in enumerate(c for c in step.collectives if not c.empty):
                for s in coll.streams:
                    yield (k, ci, s.key), s


def job_link_bytes(topo: Topology, spec: JobSpec, place, route) -> np.ndarray:
    """Bytes per iteration the job puts on every link with router function ``route(key, src, dst)``."""
    b = np.zeros(topo.n_links)
    for key, s in _iter_streams(spec, place):
        p = route(key, s.src, s.dst)
        np.add.at(b, p[p >= 0], s.nbytes)
    return b


def intensity(topo: Topology, spec: JobSpec, link_bytes: np.ndarray) -> float:
    """I = W / t: GPU-seconds of compute per iteration over the worst link's transfer time."""
    t = float(np.max(link_bytes / topo.capacity))
    return spec.n_gpus * spec.compute_s / t if t > 0 else np.inf


def compress_levels(prio: np.ndarray, inten: np.ndarray, share: np.ndarray, K: int, m: int = 10,
                    seed: int = 0) -> np.ndarray:
    """Crux's compression of job priorities to ``K`` levels (0 = highest); see the module docstring.

    Parameters
    ----------
    prio, inten : ndarray, shape (n,)
        Priorities P_j and intensities I_j.
    share : ndarray of bool, shape (n, n)
        Jobs share a link.
    """
    n = prio.size
    if K < 1:
        raise UsageError(f"K must be >= 1, not {K}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    W = np.where(share & (prio[:, None] > prio[None, :]), inten[:, None], 0.0)
    np.fill_diagonal(W, 0.0)
    rng = np.random.default_rng(seed)
    orders = [np.argsort(-prio, kind="stable")]
    indeg0 = (W > 0).sum(0)
    for _ in range(m - 1):  # random topological orders (Kahn with random choice)
        indeg = indeg0.copy()
        avail = list(np.flatnonzero(indeg == 0))
        order = []
        while avail:
            u = avail.pop(rng.integers(len(avail)))
            order.append(u)
            for v in np.flatnonzero(W[u] > 0):
                indeg[v] -= 1
                if indeg[v] == 0:
                    avail.append(v)
        orders.append(np.array(order))
    best, best_val = None, -1.0
    for order in orders:
        Wo = W[np.ix_(order, order)]
        # cross[j, v] = sum_{u < j} Wo[u, v]; C(j, i) = sum_{v=j}^{i-1} cross[j, v]
        cross = np.vstack([np.zeros(n), np.cumsum(Wo, axis=0)])  # (n+1, n)
        pre = np.concatenate([np.zeros((n + 1, 1)), np.cumsum(cross, axis=1)], axis=1)  # (n+1, n+1)
        kk = min(K, n)
        f = np.full((kk + 1, n + 1), -np.inf)
        arg = np.zeros((kk + 1, n + 1), dtype=np.int64)
        f[0, 0] = 0.0
        for k in range(1, kk + 1):
            for i in range(1, n + 1):
                j = np.arange(0, i)
                vals = f[k - 1, j] + (pre[j, i] - pre[j, j])
                b = int(np.argmax(vals))
                f[k, i], arg[k, i] = vals[b], j[b]
        kbest = int(np.argmax(f[1:, n])) + 1
        if f[kbest, n] > best_val:
            lv = np.empty(n, dtype=np.int64)
            i = n
            for k in range(kbest, 0, -1):
                j = arg[k, i]
                lv[order[j:i]] = k - 1
                i = j
            best, best_val = lv, f[kbest, n]
    return best


def sincronia_order(loads: np.ndarray) -> np.ndarray:
    """BSSI with unit weights: ``loads`` (jobs, links) bytes; returns job ids, first = highest."""
    rem = list(range(loads.shape[0]))
    last = []
    while rem:
        tot = loads[rem].sum(0)
        b = int(np.argmax(tot))
        j = rem[int(np.argmax(loads[rem, b]))]
        last.append(j)
        rem.remove(j)
    return np.array(last[::-1])


def cassini_shifts(topo: Topology, jobs, seed: int = 0, grid: int = 64, samples: int = 4096,
                   router: C4PRouter | None = None) -> np.ndarray:
    """CASSINI-like start shifts (seconds) of ``jobs`` [(spec, place)] on ECMP paths, or on the
    planned paths of ``router`` (a :class:`CruxRouter`) when given (module docstring)."""
    n = len(jobs)
    if router is None:
        lb = np.stack([job_link_bytes(topo, s, p, _ecmp_fn(topo, seed, j)) for j, (s, p) in enumerate(jobs)])
    else:
        lb = _planned_bytes(topo, jobs, router)
    comm = np.max(lb / topo.capacity, axis=1)
    comp = np.array([s.compute_s for s, _ in jobs])
    period = comp + comm
    share = (lb > 0).astype(float) @ (lb > 0).T.astype(float) > 0
    ts = np.linspace(0.0, 4 * float(period.max()), samples, endpoint=False)

    def busy(j, d):  # communicating at times ts when shifted by d (steady state, periodic)
        return np.mod(ts[None, :] - np.atleast_1d(d)[:, None], period[j]) >= comp[j]

    shift = np.zeros(n)
    done: list[int] = []
    for j in np.argsort(-comm, kind="stable").tolist():
        nb = [i for i in done if share[i, j] and i != j]
        if nb and comm[j] > 0:
            cands = np.arange(grid) / grid * period[j]
            other = np.zeros(ts.size)
            for i in nb:
                other += busy(i, shift[i])[0]
            cost = busy(j, cands) @ other
            shift[j] = cands[int(np.argmin(cost))]
        done.append(j)
    return shift


class CruxRouter(C4PRouter):
    """Planned paths (descending intensity, byte-weighted least congestion) and per-job levels."""

    def __init__(self, topo: Topology, jobs, order, levels=None, seed: int = 0):
        super().__init__(topo, seed)
        self.levels = {} if levels is None else dict(levels)
        for j in order:
            spec, place = jobs[j]
            for key, s in _iter_streams(spec, place):
                self.plans[(int(j), key)] = np.stack(
                    [self._plan_flow(int(a), int(b), s.nbytes) for a, b in zip(s.src.tolist(), s.dst.tolist())])

    def priority(self, job_id):
        return int(self.levels.get(job_id, 0))


class _PrioECMP(ECMPRouter):
    def __init__(self, topo, seed, levels):
        super().__init__(topo, seed)
        self.levels = levels

    def priority(self, job_id):
        return int(self.levels.get(job_id, 0))


def make_trace(topo: Topology, n_jobs: int, seed: int, grad_scale: float = 1.0):
    """The synthetic multi-job trace (module docstring); ``grad_scale`` multiplies every job's
    gradient bytes (the communication / compute balance, a sensitivity parameter)."""
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(topo.n_hosts)
    jobs, used = [], 0
    for k in range(n_jobs):
        nh = int(rng.choice([2, 4, 8]))
        if used + nh > topo.n_hosts:
            break
        h = np.sort(hosts[used:used + nh])
        used += nh
        spec = JobSpec(f"job{k}", dp=nh, tp=8, compute_s=float(rng.uniform(0.02, 0.2)),
                       grad_bytes=grad_scale * float(rng.choice([0.25e9, 0.5e9, 1e9, 2e9])), iterations=10**6,
                       channels=2)
        gpus = (h[:, None] * topo.gpus_per_host + np.arange(8)[None, :]).reshape(-1)
        jobs.append((spec, placement(spec, gpus)))
    return jobs


def _simulate(topo, router, jobs, horizon, starts=None):
    sim = Simulator(topo, router)
    for j, (spec, place) in enumerate(jobs):
        sim.add_job(spec, place, start=0.0 if starts is None else float(starts[j]))
    sim.run(until=horizon)
    sim.utilisation_after_start = sim.gpu_utilisation(horizon)  # the wait of a shifted start excluded
    for r in sim.jobs.values():
        r.start = 0.0  # a shifted job holds its GPUs from time 0: the wait counts as idle
    return sim.gpu_utilisation(horizon), sim


def _planned_bytes(topo, jobs, router) -> np.ndarray:
    return np.stack([job_link_bytes(topo, s, p, lambda key, a, b, j=j: router.plans[(j, key)])
                     for j, (s, p) in enumerate(jobs)])


def _ecmp_fn(topo, seed, jid):
    r = ECMPRouter(topo, seed)
    return lambda key, s, d: r.route(jid, key, s, d)


def correction_factors(topo, jobs, inten, share, ref: int, horizon: float, seed: int) -> np.ndarray:
    """k_j from pairwise runs against the reference job (see the module docstring)."""
    k = np.ones(len(jobs))
    for j in range(len(jobs)):
        if j == ref or not share[j, ref]:
            continue
        pair = [jobs[j], jobs[ref]]
        u_j, _ = _simulate(topo, CruxRouter(topo, pair, [1, 0], {0: 0, 1: 1}, seed), pair, horizon)
        u_r, _ = _simulate(topo, CruxRouter(topo, pair, [1, 0], {0: 1, 1: 0}, seed), pair, horizon)
        if (u_j > u_r) != (inten[j] > inten[ref]):
            k[j] = inten[ref] / inten[j] * (u_j / u_r)
    return k


def crux_plan(topo: Topology, jobs, K: int, seed: int, horizon: float, correct: bool = True):
    lb = np.stack([job_link_bytes(topo, s, p, _ecmp_fn(topo, seed, j)) for j, (s, p) in enumerate(jobs)])
    inten = np.array([intensity(topo, s, lb[j]) for j, (s, _) in enumerate(jobs)])
    order = np.argsort(-inten, kind="stable")
    router = CruxRouter(topo, jobs, order, None, seed)
    lb = _planned_bytes(topo, jobs, router)
    inten = np.array([intensity(topo, s, lb[j]) for j, (s, _) in enumerate(jobs)])
    share = (lb > 0).astype(float) @ (lb > 0).T.astype(float) > 0
    ref = int(np.argmax(inten))
    k = correction_factors(topo, jobs, inten, share, ref, horizon / 4, seed) if correct else np.ones(len(jobs))
    prio = k * inten
    levels = compress_levels(prio, inten, share, K, 10, seed)
    router.levels = {j: int(levels[j]) for j in range(len(jobs))}
    return router, {"intensity": inten.tolist(), "k": k.tolist(), "levels": levels.tolist()}


#: hashed-path schemes (ECMP paths), then the same baselines on Crux's planned paths, then Crux
SCHEMES = ("ecmp", "sincronia", "cassini", "crux-paths", "sincronia-planned", "cassini-planned", "crux")
#: the schemes that share Crux's planned paths: Crux against these isolates its priority mechanism
PLANNED = ("crux-paths", "sincronia-planned", "cassini-planned")


def _study_rows(topo: Topology, n_jobs: int, horizon: float, seeds, K: int, progress=None, tag: str = "",
                grad_scale: float = 1.0) -> list:
    rows = []
    for s in seeds:
        jobs = make_trace(topo, n_jobs, s, grad_scale)
        res = {"seed": s, "jobs": len(jobs), "gpus": int(sum(j[0].n_gpus for j in jobs))}
        u, _ = _simulate(topo, ECMPRouter(topo, s), jobs, horizon)
        res["ecmp"] = u
        lb = np.stack([job_link_bytes(topo, sp, p, _ecmp_fn(topo, s, j)) for j, (sp, p) in enumerate(jobs)])
        order = sincronia_order(lb)
        lv = {int(j): int(i * K // len(order)) for i, j in enumerate(order)}
        res["sincronia"], _ = _simulate(topo, _PrioECMP(topo, s, lv), jobs, horizon)
        sh = cassini_shifts(topo, jobs, s)
        res["cassini"], sim = _simulate(topo, ECMPRouter(topo, s), jobs, horizon, sh)
        res["cassini_after_start"] = sim.utilisation_after_start
        router, info = crux_plan(topo, jobs, K, s, horizon)
        crux_levels = router.levels
        res["crux"], _ = _simulate(topo, router, jobs, horizon)
        # every baseline on the same planned paths: fair sharing, Sincronia's order, CASSINI's shifts
        router.levels = {}
        res["crux-paths"], _ = _simulate(topo, router, jobs, horizon)
        order = sincronia_order(_planned_bytes(topo, jobs, router))
        router.levels = {int(j): int(i * K // len(order)) for i, j in enumerate(order)}
        res["sincronia-planned"], _ = _simulate(topo, router, jobs, horizon)
        router.levels = {}
        sh_p = cassini_shifts(topo, jobs, s, router=router)
        res["cassini-planned"], sim = _simulate(topo, router, jobs, horizon, sh_p)
        res["cassini-planned_after_start"] = sim.utilisation_after_start
        res["cassini_shift_s"] = {"mean": float(np.mean(sh_p)), "max": float(np.max(sh_p))}
        router.levels = crux_levels
        res["crux_info"] = info
        rows.append(res)
        if progress:
            progress(f"{tag}{s}" if tag else s)
    return rows


def _summary(rows: list) -> dict:
    gain = {sc: float(np.mean([r["crux"] / r[sc] - 1 for r in rows])) for sc in SCHEMES if sc != "crux"}
    return {"mean_utilisation": {sc: float(np.mean([r[sc] for r in rows])) for sc in SCHEMES},
            "crux_gain_over": gain,
            # Crux against baselines on its own planned paths: the priority mechanism alone
            "priority_effect": {sc: gain[sc] for sc in PLANNED},
            # planned paths vs hashed ones, both with fair sharing: the path-planning effect alone
            "path_effect": float(np.mean([r["crux-paths"] / r["ecmp"] - 1 for r in rows])),
            "cassini_after_start": {k: float(np.mean([r[f"{k}_after_start"] for r in rows]))
                                    for k in ("cassini", "cassini-planned")},
            "cassini_shift_max_s": float(np.max([r["cassini_shift_s"]["max"] for r in rows]))}


def _crux_clos(oversub: float = 2.0, quick: bool = False) -> Topology:
    return clos(2, 4, 4 if quick else 8, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=4,
                tor_lanes=2, cores_per_plane=4, core_lanes=2, tor_oversub=oversub, core_oversub=oversub,
                name=f"crux-clos ({oversub:g}:1)")


def lingjun_topology() -> Topology:
    """The real Lingjun 2023 host -> ToR -> pod map with the Crux study's link model: one 400 Gb/s
    port per GPU and 2:1 oversubscription at the ToR and aggregation layers (the data set gives no
    port counts; the oversubscription is our choice, the same as the synthetic Crux Clos)."""
    from .topology import lingjun_2023

    return lingjun_2023(nic_ports=1, nic_gbps=400.0, tor_oversub=2.0, core_oversub=2.0,
                        name="lingjun-2023 (1x400G, 2:1)")


def run_study(quick: bool = False, seed: int = 0, K: int = 8, progress=None, lingjun: bool = True) -> dict:
    """GPU utilisation of ECMP / Sincronia-like / CASSINI-like / Crux path selection only / full Crux
    on the synthetic 2:1 Clos (top-level keys) and on the real Lingjun 2023 topology (``lingjun``:
    the same trace generator, enough jobs to occupy about a third (quick: a tenth) of its hosts)."""
    if K < 1:
        raise UsageError(f"K must be >= 1, not {K}")
    topo = _crux_clos(2.0, quick)
    horizon = 3.0 if quick else 20.0
    n_jobs = 8 if quick else 14
    seeds = range(seed, seed + (2 if quick else 5))
    rows = _study_rows(topo, n_jobs, horizon, seeds, K, progress)
    out = {"topology": topo.summary(), "horizon_s": horizon, "K": K, "runs": rows, **_summary(rows),
           "paper": {"testbed_gain": [0.083, 0.148], "simulation_gain_over_baselines": [0.13, 0.23],
                     "source": "Crux, SIGCOMM 2024: +8.3-14.8% GPU utilisation on a 96-GPU testbed, 13-23% "
                               "over baselines in simulation (SPECS.md, Cluster systems)"}}
    # the band: the priority and path effects over the parameters they depend on most
    b_seeds = range(seed, seed + (1 if quick else 3))
    b_h = 1.5 if quick else 10.0
    cfg = ([(4.0, 1.0), (2.0, 2.0)] if quick else [(1.0, 1.0), (4.0, 1.0), (2.0, 0.5), (2.0, 2.0)])
    band = [{"oversub": 2.0, "grad_scale": 1.0, "priority_effect": out["priority_effect"],
             "path_effect": out["path_effect"]}]
    for ov, gs in cfg:
        sm = _summary(_study_rows(_crux_clos(ov, quick), n_jobs, b_h, b_seeds, K, progress, f"band {ov:g}:1 x{gs:g} ",
                                  gs))
        band.append({"oversub": ov, "grad_scale": gs, "priority_effect": sm["priority_effect"],
                     "path_effect": sm["path_effect"]})
    pe = [b["priority_effect"]["crux-paths"] for b in band]
    pa = [b["path_effect"] for b in band]
    out["band"] = {"parameters": "ToR/core oversubscription (1-4:1) and gradient bytes per iteration (x0.5-x2, "
                                 "the communication share)",
                   "runs": band, "horizon_s": b_h, "seeds": len(b_seeds),
                   "priority_effect": [float(min(pe)), float(max(pe))], "path_effect": [float(min(pa)), float(max(pa))]}
    if lingjun:
        lt = lingjun_topology()
        lj_h, lj_n = (1.0, 20) if quick else (2.0, 60)
        lj_seeds = range(seed, seed + (1 if quick else 2))
        lrows = _study_rows(lt, lj_n, lj_h, lj_seeds, K, progress, tag="lingjun ")
        out["lingjun"] = {"topology": lt.summary(), "horizon_s": lj_h, "jobs_requested": lj_n, "runs": lrows,
                          **_summary(lrows)}
    return out


# ---- where priorities pay: two jobs on one bottleneck link, intensity ratio swept -------------------
def run_intensity_study(ratios=(1.0, 2.0, 4.0, 8.0), compute_over_comm=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
                        horizon: float = 20.0, seed: int = 0) -> dict:
    """Isolate Crux's priority mechanism: two 16-GPU jobs (DP 2 x TP 8, one host under each of two
    ToRs) whose rings share the single uplink of each ToR; equal gradients; job A's compute is
    ``compute_over_comm`` times the time its all-reduce takes alone on the uplink, job B's compute is
    ``ratio`` times A's (so B is ``ratio`` times as GPU-intense). GPU utilisation (compute GPU-time
    over allocated GPU-time, both jobs) with equal priority (max-min fair sharing), with Crux's
    order (the more intense job first) and with the reverse order; every run has the same paths.
    Returns the rows and the gain of Crux's order over fair sharing (and over the reverse order,
    which isolates the intensity ranking from the desynchronisation any strict order causes) per
    (ratio, compute_over_comm)."""
    from .topology import GBPS, clos

    topo = clos(1, 2, 2, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=1, tor_lanes=1,
                cores_per_plane=1, tor_oversub=8.0, name="crux-pair")
    up_bps = topo.capacity[topo.link_block(4).start]
    grad = 1e9
    # 8 DP rings of 2 ranks (one per TP rank) cross each uplink; each moves 2 (n-1)/n S = S per hop
    t_comm_alone = 8 * grad / up_bps
    rows = []
    for cf in compute_over_comm:
        for r in ratios:
            ca = cf * t_comm_alone
            jobs = []
            for k, c in enumerate((ca, ca * r)):
                spec = JobSpec(f"job{'AB'[k]}", dp=2, tp=8, compute_s=float(c), grad_bytes=grad, iterations=10 ** 6)
                hosts = np.array([k, 2 + k])  # host k under ToR 0, host 2 + k under ToR 1
                jobs.append((spec, placement(spec, (hosts[:, None] * 8 + np.arange(8)).reshape(-1))))
            res = {"compute_over_comm": cf, "ratio": r}
            for name, lv in (("fair", {0: 0, 1: 0}), ("crux", {0: 1, 1: 0}), ("reverse", {0: 0, 1: 1})):
                u, sim = _simulate(topo, _PrioECMP(topo, seed, lv), jobs, horizon)
                res[name] = u
                res[f"{name}_iter_s"] = [float(sim.jobs[j].iteration_times.mean()) if sim.jobs[j].iter_end else None
                                         for j in (0, 1)]
            res["gain_crux_over_fair"] = res["crux"] / res["fair"] - 1
            res["gain_crux_over_reverse"] = res["crux"] / res["reverse"] - 1
            rows.append(res)
    return {"uplink_gbps": up_bps / GBPS, "t_comm_alone_s": t_comm_alone, "horizon_s": horizon, "rows": rows,
            "note": "job B is the more GPU-intense (longer compute, same bytes); Crux gives it the higher priority",
            "paper": {"testbed_gain": [0.083, 0.148]}}


def trace_contention(topo: Topology | None = None, n_jobs: int = 14, seeds=range(5), K: int = 8) -> dict:
    """How much of the study trace the priority mechanism can act on: per seed, the jobs that share
    a link with another job on their planned (Crux) paths, and the intensity ratio of every sharing
    pair (the quantity :func:`run_intensity_study` sweeps)."""
    if topo is None:
        topo = clos(2, 4, 8, gpus_per_host=8, nic_ports=1, nic_gbps=400.0, aggs_per_pod=4, tor_lanes=2,
                    cores_per_plane=4, core_lanes=2, tor_oversub=2.0, core_oversub=2.0, name="crux-clos")
    ratios, shared_frac, busy = [], [], []
    for s in seeds:
        jobs = make_trace(topo, n_jobs, s)
        router, info = crux_plan(topo, jobs, K, s, 1.0, correct=False)
        lb = np.stack([job_link_bytes(topo, sp, p, lambda key, a, b, j=j, rt=router: rt.plans[(j, key)])
                       for j, (sp, p) in enumerate(jobs)])
        inten = np.array(info["intensity"])
        share = ((lb > 0).astype(float) @ (lb > 0).T.astype(float)) > 0
        np.fill_diagonal(share, False)
        shared_frac.append(float(share.any(axis=1).mean()))
        i, j = np.nonzero(np.triu(share))
        ratios += (np.maximum(inten[i], inten[j]) / np.minimum(inten[i], inten[j])).tolist()
        # comm share of an iteration alone: t_j / (c_j + t_j), t_j the worst link's transfer time
        t = np.array([sp.compute_s * sp.n_gpus for sp, _ in jobs]) / inten
        busy += (t / (t + np.array([sp.compute_s for sp, _ in jobs]))).tolist()
    r = np.array(ratios) if ratios else np.zeros(0)
    return {"jobs_sharing_a_link": float(np.mean(shared_frac)), "sharing_pairs": int(r.size),
            "intensity_ratio": {"median": float(np.median(r)) if r.size else None,
                                "p90": float(np.percentile(r, 90)) if r.size else None},
            "comm_fraction_alone": {"median": float(np.median(busy)), "p90": float(np.percentile(busy, 90))}}

"""C4P: global path planning of long-lived collective flows (Dong et al., Alibaba, "Boosting
Large-scale Parallel Training Efficiency with C4: A Communication-Driven Approach", HPCA 2025,
arXiv 2406.04594), against ECMP hashing.

C4P's observation: collective traffic is a few long-lived, high-rate connections (NCCL QPs), so
per-flow ECMP hashing leaves some links with two or three flows and others idle, and the bonded
pair of NIC ports unbalanced; one slow ring hop slows the whole ring. C4P's master knows every
connection and assigns paths globally so links carry equal flow counts and both ports of every
NIC are used equally, and re-plans when a link fails.

:class:`C4PRouter` plans each flow when its connection is first opened, greedily on the planned
load (flows per unit capacity) of all flows planned so far in the cluster: the source and
destination bond ports with the fewest planned flows, then, per aggregation plane and core, the
least-loaded parallel lane of every tier, and the (plane, core) whose most-loaded hop is lightest
(ties: smallest total, then lowest index). Plans persist across iterations. On a link failure,
flows whose plan crosses a dead link are removed from the load and re-planned (dead links
excluded); healthy flows keep their paths, as C4P does to avoid churn.

What we do not model: C4P's path probing (we assume the master knows the topology and failures
exactly) and its congestion-triggered re-planning against foreign traffic.
"""

from __future__ import annotations

import numpy as np

from .collectives import bus_bw_factor
from .engine import Simulator
from .job import JobSpec, placement
from .routing import ECMPRouter, Router
from .topology import LinkKind, Topology, clos

__all__ = ["C4PRouter", "run_study", "c4_topology"]


class C4PRouter(Router):
    """Global least-loaded path planning with bond-port balancing (see the module docstring)."""

    def __init__(self, topo: Topology, seed: int = 0):
        super().__init__(topo, seed)
        self.count = np.zeros(topo.n_links)
        self.plans: dict[tuple, np.ndarray] = {}
        t = topo
        self._blk = {k: t.link_block(k) for k in range(8)}

    def _cost(self, w: float = 1.0) -> np.ndarray:
        c = (self.count + w) / np.maximum(self.topo.capacity, 1e-300)
        c[~self.alive] = np.inf
        return c

    def _plan_flow(self, s: int, d: int, w: float = 1.0) -> np.ndarray:
        t = self.topo
        cost = self._cost(w)
        P, A, L1, C, L2 = t.nic_ports, t.aggs_per_pod, t.tor_lanes, t.cores_per_plane, t.core_lanes
        ch = np.zeros(8, dtype=np.int64)
        hs, hd = s // t.gpus_per_host, d // t.gpus_per_host
        if hs != hd:
            ch[0] = np.argmin(cost[self._blk[LinkKind.PORT_UP]][s * P:(s + 1) * P])
            ch[1] = np.argmin(cost[self._blk[LinkKind.PORT_DN]][d * P:(d + 1) * P])
        ts, td = t.host_tor[hs], t.host_tor[hd]
        if hs != hd and ts != td:
            tu = cost[self._blk[LinkKind.TOR_UP]].reshape(t.n_tors, A, L1)[ts]
            tdn = cost[self._blk[LinkKind.TOR_DN]].reshape(t.n_tors, A, L1)[td]
            l1, l2 = tu.argmin(1), tdn.argmin(1)
            best_a = np.maximum(tu.min(1), tdn.min(1))  # (A,)
            sum_a = tu.min(1) + tdn.min(1)
            ps, pd = t.tor_pod[ts], t.tor_pod[td]
            if ps != pd:
                au = cost[self._blk[LinkKind.AGG_UP]].reshape(t.n_pods, A, C, L2)[ps]
                ad = cost[self._blk[LinkKind.AGG_DN]].reshape(t.n_pods, A, C, L2)[pd]
                l3, l4 = au.argmin(2), ad.argmin(2)
                worst = np.maximum(best_a[:, None], np.maximum(au.min(2), ad.min(2)))  # (A, C)
                total = sum_a[:, None] + au.min(2) + ad.min(2)
                flat = np.lexsort((total.ravel(), worst.ravel()))[0]
                a, c = divmod(int(flat), C)
                ch[2:] = [a, l1[a], l2[a], c, l3[a, c], l4[a, c]]
            else:
                a = int(np.lexsort((sum_a, best_a))[0])
                ch[2:5] = [a, l1[a], l2[a]]
        path = t.paths([s], [d], ch[None])[0]
        self.count[path[path >= 0]] += w
        return path

    def route(self, job_id, route_key, src, dst):
        key = (job_id, route_key)
        plan = self.plans.get(key)
        if plan is None or not self.usable(plan).all():
            if plan is not None:
                self._unplan(plan)
            plan = np.stack([self._plan_flow(int(s), int(d)) for s, d in zip(src.tolist(), dst.tolist())])
            self.plans[key] = plan
        return plan

    def _unplan(self, plan: np.ndarray) -> None:
        x = plan[plan >= 0]
        np.subtract.at(self.count, x, 1)

    def _replan_rows(self, plan, src, dst):
        bad = ~self.usable(plan)
        for i in np.flatnonzero(bad):
            p = plan[i]
            np.subtract.at(self.count, p[p >= 0], 1)
        new = plan.copy()
        for i in np.flatnonzero(bad):
            new[i] = self._plan_flow(int(src[i]), int(dst[i]))
        return new

    def on_link_change(self, sim):
        out = {}
        streams = {(i.job_id, i.route_key): (sid, i) for sid, i in sim.active_streams().items()}
        for key, plan in list(self.plans.items()):
            if self.usable(plan).all():
                continue
            if key in streams:
                sid, info = streams[key]
                new = self._replan_rows(plan, info.src, info.dst)
                out[sid] = new
                self.plans[key] = new
            else:  # re-planned when the connection is next used
                self._unplan(plan)
                del self.plans[key]
        return out


def c4_topology(quick: bool) -> Topology:
    """The C4 setting: 8-GPU hosts, 2 x 200 Gb/s bonded NIC per GPU, 3-tier Clos 1:1, 400 Gb/s
    switch links (``quick``: 2 pods x 4 ToRs x 4 hosts = 256 GPUs; full: 4 pods = 512 GPUs)."""
    pods = 2 if quick else 4
    # ToR: 4 hosts x 8 GPUs x 2 ports x 200G = 12.8T down = 8 aggs x 4 lanes x 400G up
    return clos(pods, 4, 4, gpus_per_host=8, nic_ports=2, nic_gbps=200.0, aggs_per_pod=8, tor_lanes=4,
                cores_per_plane=4, core_lanes=4, name="c4-clos")


def _jobs(topo: Topology, seed: int, n_jobs: int):
    """Jobs of TP=8 in a host and DP across hosts, hosts interleaved over ToRs and pods (a busy
    cluster's fragmented allocation), so DP rings cross the fabric."""
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(topo.n_hosts)
    per = topo.n_hosts // n_jobs
    out = []
    for k in range(n_jobs):
        h = np.sort(hosts[k * per:(k + 1) * per])
        spec = JobSpec(f"job{k}", dp=per, tp=8, compute_s=0.02, grad_bytes=512e6, iterations=4, channels=2,
                       alpha_s=5e-6)
        gpus = (h[None, :, None] * 8 + np.arange(8)[None, None, :]).reshape(-1)  # (pp=1, dp, tp)
        out.append((spec, placement(spec, gpus)))
    return out


def _run(topo, router, jobs, fail=None):
    sim = Simulator(topo, router)
    for spec, place in jobs:
        sim.add_job(spec, place)
    if fail is not None:
        sim.fail_links(*fail)
    sim.run()
    res = []
    for r in sim.jobs.values():
        it = r.spec.iterations
        comm = r.comm_s.get("dp", 0.0) / it
        n = r.spec.dp
        algbw = r.spec.grad_bytes / comm
        res.append({"job": r.spec.name, "iter_s": float(r.iteration_times.mean()), "comm_s": comm,
                    "busbw_GBps": algbw * bus_bw_factor("allreduce", n) / 1e9})
    return res, sim


def run_study(quick: bool = False, seed: int = 0, progress=None) -> dict:
    """ECMP vs C4P: iteration time and all-reduce bus bandwidth, healthy and with failed links."""
    topo = c4_topology(quick)
    seeds = range(seed, seed + (3 if quick else 8))
    n_jobs = 4
    line_busbw = topo.nic_gbps * topo.nic_ports / 8  # GB/s per GPU
    cases = []
    for s in seeds:
        jobs = _jobs(topo, s, n_jobs)
        au = topo.link_block(LinkKind.AGG_UP)
        # failure: 2 random agg->core links fail after the first iteration has started
        rng = np.random.default_rng(s + 7)
        dead = au.start + rng.choice(au.stop - au.start, 2, replace=False)
        for scen, fail in (("healthy", None), ("2 links down", (0.05, dead))):
            row = {"seed": s, "scenario": scen}
            for name, router in (("ecmp", ECMPRouter(topo, s)), ("c4p", C4PRouter(topo, s))):
                res, sim = _run(topo, router, jobs, fail)
                row[name] = {"iter_s": float(np.mean([r["iter_s"] for r in res])),
                             "comm_s": float(np.mean([r["comm_s"] for r in res])),
                             "busbw_GBps": float(np.mean([r["busbw_GBps"] for r in res])),
                             "jobs": res, "sim_s": sim.now, "wall_s": sim.wall_s}
            cases.append(row)
            if progress:
                progress(s, scen)
    summary = {}
    for scen in ("healthy", "2 links down"):
        rs = [c for c in cases if c["scenario"] == scen]
        e = np.array([c["ecmp"]["comm_s"] for c in rs])
        c4 = np.array([c["c4p"]["comm_s"] for c in rs])
        summary[scen] = {
            "comm_reduction_mean": float(np.mean(1 - c4 / e)),
            "iter_reduction_mean": float(np.mean([1 - c["c4p"]["iter_s"] / c["ecmp"]["iter_s"] for c in rs])),
            "busbw_ecmp_GBps": float(np.mean([c["ecmp"]["busbw_GBps"] for c in rs])),
            "busbw_c4p_GBps": float(np.mean([c["c4p"]["busbw_GBps"] for c in rs])),
        }
    return {"topology": topo.summary(), "jobs": n_jobs, "line_busbw_GBps": line_busbw, "cases": cases,
            "summary": summary, "paper": {"communication_cost_reduction": 0.15}}

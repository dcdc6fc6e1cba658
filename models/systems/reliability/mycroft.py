"""Mycroft: trigger rules and dependency-driven root-cause analysis from per-flow counters.

Mycroft (ByteDance et al., SOSP 2025, arXiv 2509.03018) instruments NCCL's proxy with per-flow
counters GPU_ready ``G``, RDMA_transmitted ``T``, RDMA_done ``D`` (see
:func:`~models.systems.reliability.telemetry.flow_counters`), a completion log per collective and a state
log every 100 ms.

**Trigger** (:func:`trigger`): a sample of ranks, at least one per DP group and at most 10, is
watched; a sampled rank with an open collective (state log) but no completion log within
``window_s`` is a failure; a gap between completions of twice the healthy gap (throughput
halved) is a straggler.

**Root cause** (:func:`root_cause`), on the counters collected ``collect_s`` after the trigger,
following the dependencies to the earliest culprit:

1. intra-node: a rank whose state log went silent (process gone) -> that rank, ``gpu``;
2. compute vs communication: ranks that never posted the open collective while the others did
   -> those ranks, ``gpu`` (``host`` when every GPU of a host is late or missing);
3. inter-node (ring neighbours): a rank that received more than it made ready (``D`` of its
   incoming flow > ``G`` of its outgoing flow) stopped producing -> ``gpu``;
4. ``T > D`` on a stuck flow: posted but not done -> ``network`` at the rank common to the stuck
   flows (its NIC / links);
5. ``G > T``: sender RDMA lag -> ``host``;
6. a straggler with every rank in step: the slowest connection and its bottleneck hop ->
   ``network``; with one rank late to post -> that rank, ``gpu`` / ``host``.

Window, sampling and collection delays are ours: ``window_s = 10``, ``collect_s = 2`` (gather
state logs from the ring buffers and analyse), straggler check on completion gaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .faults import FaultKind

__all__ = ["MycroftParams", "trigger", "root_cause", "sample_ranks", "run_study", "COMPONENT"]

#: Ground-truth component of every fault kind (None: outside Mycroft's view).
COMPONENT = {FaultKind.GPU_FAIL: "gpu", FaultKind.HANG: "gpu", FaultKind.GPU_SLOW: "gpu",
             FaultKind.CPU_OVERLOAD: "host",
             FaultKind.NIC_DOWN: "network", FaultKind.NIC_FLAP: "network", FaultKind.LINK_LOSSY: "network",
             FaultKind.SWITCH_FAIL: "network", FaultKind.NAN: None}


@dataclass(frozen=True)
class MycroftParams:
    """Trigger and collection parameters (ours, except the 100 ms state-log period).

    Parameters
    ----------
    window_s : float
        An open collective without a completion log this long = failure.
    straggler_ratio : float
        A completion gap this many times the healthy gap = straggler (2: throughput halved).
    collect_s : float
        Time to collect the logs and run the analysis after a trigger.
    state_log_s : float
        State-log period (100 ms, paper).
    max_sampled : int
        At most this many sampled ranks (10, paper).
    """

    window_s: float = 10.0
    straggler_ratio: float = 2.0
    collect_s: float = 2.0
    state_log_s: float = 0.1
    max_sampled: int = 10

    def __post_init__(self):
        for n in ("window_s", "collect_s", "state_log_s"):
            if not getattr(self, n) > 0:
                raise ValueError(f"{n} must be > 0, not {getattr(self, n)!r}")
        if not self.straggler_ratio > 1:
            raise ValueError(f"straggler_ratio must be > 1, not {self.straggler_ratio!r}")
        if not (isinstance(self.max_sampled, int) and self.max_sampled >= 1):
            raise ValueError(f"max_sampled must be an integer >= 1, not {self.max_sampled!r}")


def sample_ranks(place: np.ndarray, max_sampled: int, seed: int) -> np.ndarray:
    """At least one rank per DP group (one group per (stage, TP rank)), at most ``max_sampled``."""
    rng = np.random.default_rng(seed)
    pp, dp, tp = place.shape
    groups = [place[s, :, t] for s in range(pp) for t in range(tp)]
    picks = [int(rng.choice(g)) for g in groups]
    rest = np.setdiff1d(place.ravel(), picks)
    extra = max(0, max_sampled - len(picks))
    picks += rng.choice(rest, size=min(extra, rest.size), replace=False).tolist()
    return np.array(picks[:max(max_sampled, len(groups))], dtype=np.int64)


def trigger(sim, job: int, p: MycroftParams, sampled: np.ndarray, warmup: int = 2):
    """Earliest trigger time and type (``"failure"``/``"straggler"``) from the sampled ranks' logs.

    Post-hoc on the whole run, but each rule uses only data that existed at its time: the state
    log of an open collective (100 ms granularity) and the completion logs before it.
    """
    recs = [r for r in sim.telemetry.collectives if r.job == job]
    ends = np.array(sorted(r.t_end for r in recs if np.isfinite(r.t_end)))
    gaps = np.diff(np.concatenate([[sim.jobs[job].start], ends]))
    base = float(np.median(gaps[:warmup * 1])) if gaps.size >= warmup else None
    cands = []
    for r in recs:
        if np.isfinite(r.t_end):
            continue
        posted = r.enter[np.isin(r.ranks, sampled)]
        posted = posted[np.isfinite(posted)]
        if posted.size:  # a sampled rank has a state log for it and never a completion log
            t0 = float(posted.min())
            cands.append((np.ceil((t0 + p.window_s) / p.state_log_s) * p.state_log_s, "failure"))
    if base is not None:
        last = np.concatenate([[sim.jobs[job].start], ends])
        for i in range(warmup, last.size - 1):
            if last[i + 1] - last[i] > p.straggler_ratio * base:
                cands.append((last[i] + p.straggler_ratio * base, "straggler"))
                break
        running = sim.jobs[job].finished is None
        if running and not cands and ends.size and sim.now - last[-1] > p.straggler_ratio * base:
            cands.append((last[-1] + p.straggler_ratio * base, "straggler"))
    return min(cands) if cands else None


def root_cause(sim, job: int, kind: str = "failure") -> dict:
    """Mycroft's dependency analysis on ``sim``'s state now (see the module docstring)."""
    from .telemetry import flow_counters

    topo = sim.topo
    recs = [r for r in sim.telemetry.collectives if r.job == job]
    place = sim.jobs[job].place.ravel()
    gph = topo.gpus_per_host
    last = recs[-1] if recs else None

    def host_or_gpu(ranks):
        ranks = np.asarray(ranks)
        hosts = np.unique(ranks // gph)
        whole = all(np.isin(np.arange(h * gph, (h + 1) * gph)[np.isin(np.arange(h * gph, (h + 1) * gph), place)],
                            ranks).all() for h in hosts)
        return "host" if whole and gph > 1 else "gpu"

    # 1. state log silent: the process is gone
    dead = place[sim.stopped[place]]
    if dead.size:
        return {"ranks": dead.tolist(), "component": "gpu", "rule": "state log silent"}
    fc = flow_counters(sim)
    mine = fc.job == job
    stalled = bool(mine.any() and np.all(fc.rate[mine] == 0))
    if last is not None and not np.isfinite(last.t_end) and (kind == "failure" or stalled):
        missing = last.ranks[~(last.enter <= sim.now)]
        if 0 < missing.size < last.ranks.size:  # 2. never posted
            return {"ranks": missing.tolist(), "component": host_or_gpu(missing), "rule": "not posted"}
        if stalled:
            src, dst, G, T, D = fc.src[mine], fc.dst[mine], fc.G[mine], fc.T[mine], fc.D[mine]
            for r in np.unique(src):  # 3. received more than it made ready
                d_in = D[dst == r].max(initial=-1)
                g_out = G[src == r].min(initial=np.inf)
                if d_in > g_out and not (T[dst == r] > D[dst == r]).any():
                    return {"ranks": [int(r)], "component": "gpu", "rule": "D_in > G_out"}
            stuck = T > D  # 4. posted, never done
            if stuck.any():
                ends = np.concatenate([src[stuck], dst[stuck]])
                cnt = np.bincount(ends, minlength=topo.n_gpus)
                # the endpoint(s) common to most stuck flows: one rank, or both ends of one connection
                return {"ranks": np.flatnonzero(cnt == cnt.max()).tolist(), "component": "network", "rule": "T > D"}
            lag = G > T
            if lag.any():  # 5.
                return {"ranks": np.unique(src[lag]).tolist(), "component": "host", "rule": "G > T"}
        return {"ranks": [], "component": None, "rule": "open collective, no counter evidence"}
    # 6. straggler
    done = [r for r in recs if np.isfinite(r.t_end)]
    if not done:
        return {"ranks": [], "component": None, "rule": "no data"}
    r = done[-1]
    first = [x for x in done if x.it == r.it][0]
    lag = first.enter - np.median(first.enter)
    rc = {"ranks": [], "component": None, "rule": "no evidence"}
    ie = [sim.jobs[job].start, *sim.jobs[job].iter_end]
    it_start = ie[r.it] if r.it < len(ie) else ie[-1]
    compute = float(np.median(first.enter)) - it_start
    if lag.max() > 0.1 * max(compute, 1e-9):  # one rank posts >10% of the compute phase late
        late = first.ranks[lag > 0.5 * lag.max()]
        rc = {"ranks": late.tolist(), "component": host_or_gpu(late), "rule": "late to post"}
    else:
        from .c4d import _slowest

        m = sim.telemetry.latency_matrix(job, topo.n_gpus, sim.net.capacity)
        if np.isfinite(m).any():
            conn, link = _slowest(sim, job, m)
            rc = {"ranks": list(conn), "component": "network", "rule": "slowest connection", "link": link}
    return rc


def _correct(rc: dict, fault, topo) -> tuple[bool, bool]:
    from .sim import agg_switch_links

    comp = rc.get("component") == COMPONENT[fault.kind]
    if fault.kind == FaultKind.CPU_OVERLOAD:
        rank = any(r // topo.gpus_per_host == fault.target for r in rc["ranks"])
    elif fault.kind == FaultKind.LINK_LOSSY:
        rank = rc.get("link") == fault.target
    elif fault.kind == FaultKind.SWITCH_FAIL:
        rank = rc.get("link") in set(agg_switch_links(topo, fault.target).tolist())
    else:
        rank = fault.target in rc["ranks"]
    return bool(rank), bool(comp)


def run_study(quick: bool = False, seed: int = 0, params: MycroftParams | None = None) -> dict:
    """Inject one fault per trial; measure time to detect and time to root cause.

    Setup (ours): 2 pods x 2 ToRs x 2 hosts of 2 GPUs (2 x 200 Gb/s ports each), 2:1
    oversubscribed uplinks, ECMP, a DP=16 ring job with 2 channels, ~1 s iterations; fault kinds
    uniform over the eight Mycroft can see (NaN excluded), onset in iteration 3.
    """
    from models.systems.cluster.job import JobSpec, placement
    from models.systems.cluster.topology import LinkKind, clos

    from .faults import KINDS, Fault
    from .sim import FaultySimulator

    p = params or MycroftParams()
    n_trials = 24 if quick else 80
    topo = clos(2, 2, 2, gpus_per_host=2, nic_ports=2, aggs_per_pod=2, cores_per_plane=2, tor_oversub=2.0,
                core_oversub=2.0)
    spec = JobSpec("mycroft", dp=16, compute_s=0.8, grad_bytes=2.5e9, iterations=40, channels=2)
    place = placement(spec, np.arange(16))
    sampled = sample_ranks(place, p.max_sampled, seed)
    rng = np.random.default_rng(seed)
    kinds = [k for k in KINDS if COMPONENT[k] is not None]
    base = FaultySimulator(topo, seed=seed)
    base.add_job(spec, place)
    base.run(until=5.0)
    it_s = float(np.mean(base.jobs[0].iteration_times))
    used = np.flatnonzero(base.net.bytes_on_link > 0)
    fabric = used[(topo.kind[used] == LinkKind.TOR_UP) | (topo.kind[used] == LinkKind.AGG_UP)]
    trials = []
    for i in range(n_trials):
        kind = kinds[i % len(kinds)] if i < len(kinds) else kinds[int(rng.integers(len(kinds)))]
        g = int(rng.integers(16))
        onset = 2 * it_s + float(rng.uniform(0, it_s))
        sev, target, dur = 1.0, g, np.inf
        if kind in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD):
            sev = float(rng.uniform(1.5, 4.0))
            target = g // topo.gpus_per_host if kind == FaultKind.CPU_OVERLOAD else g
        elif kind == FaultKind.LINK_LOSSY:
            sev, target = float(rng.uniform(0.1, 0.5)), int(rng.choice(fabric))
        elif kind == FaultKind.NIC_FLAP:
            sev, dur = 0.05, 40.0
        elif kind == FaultKind.SWITCH_FAIL:
            target = int(rng.integers(topo.n_pods * topo.aggs_per_pod))
        f = Fault(0, kind, onset, target, dur, sev)
        horizon = onset + 30.0

        def fresh(f=f):
            s = FaultySimulator(topo, seed=seed)
            s.add_job(spec, place)
            s.inject(f)
            return s

        sim = fresh().run(until=horizon)
        tr = trigger(sim, 0, p, sampled)
        its = sim.jobs[0].iteration_times
        symptom = bool(0 in sim.stalls or (its.size and its.max() > 1.05 * it_s))
        row = {"trial": i, "kind": kind, "target": target, "severity": sev, "onset": onset, "symptom": symptom}
        if tr is not None and tr[0] <= horizon:
            t_trig, typ = tr
            s2 = fresh().run(until=t_trig + p.collect_s)
            rc = root_cause(s2, 0, typ)
            rank_ok, comp_ok = _correct(rc, f, topo)
            row.update(trigger=typ, detect_s=max(t_trig - onset, 0.0), rc=rc, rank_ok=rank_ok, comp_ok=comp_ok,
                       rca_s=max(t_trig + p.collect_s - onset, 0.0) if (rank_ok and comp_ok) else None)
        trials.append(row)
    n = len(trials)
    det = [t["detect_s"] for t in trials if "detect_s" in t]
    rca = [t["rca_s"] for t in trials if t.get("rca_s") is not None]
    per_kind = {}
    for k in kinds:
        ts = [t for t in trials if t["kind"] == k]
        if ts:
            per_kind[k] = {"n": len(ts), "detected": sum(1 for t in ts if "detect_s" in t),
                           "root_caused": sum(1 for t in ts if t.get("rca_s") is not None)}
    sym = [t for t in trials if t["symptom"]]
    from .telemetry import COSTS

    c = COSTS["flow_state_log"]
    flows = 16 * spec.channels  # one QP per rank per channel on the ring
    cost = {"flows": flows, "bytes_per_s": flows * c["bytes"] / c["period_s"],
            "cpu_us_per_s": flows * c["cpu_us"] / c["period_s"]}
    return {"params": p.__dict__, "iter_s": it_s, "sampled_ranks": sampled.tolist(), "trials": trials,
            "per_kind": per_kind, "symptomatic": len(sym), "telemetry_cost": cost,
            "frac_detect_15s_symptomatic": sum(1 for t in sym if t.get("detect_s", np.inf) <= 15.0) / max(len(sym), 1),
            "frac_rca_20s_symptomatic": sum(1 for t in sym if (t.get("rca_s") or np.inf) <= 20.0) / max(len(sym), 1),
            "frac_detect_15s": sum(1 for d in det if d <= 15.0) / n,
            "frac_rca_20s": sum(1 for d in rca if d <= 20.0) / n,
            "rank_accuracy": sum(1 for t in trials if t.get("rank_ok")) / n,
            "component_accuracy": sum(1 for t in trials if t.get("comp_ok")) / n,
            "detect_median_s": float(np.median(det)) if det else float("nan"),
            "rca_median_s": float(np.median(rca)) if rca else float("nan"),
            "paper": {"detect_15s": 0.9, "rca_20s": 0.6}}

"""C4D: collective-timestamp fault detection, classification and localisation.

Dong et al., "Boosting Large-scale Parallel Training Efficiency with C4: A Communication-Driven
Approach", HPCA 2025 (arXiv 2406.04594). Per-node agents record when every rank posts and
completes each collective; a master compares ranks (iterations are synchronous and homogeneous)
and classifies:

- **non-communication hang**: some ranks never post the collective (the culprits) while the rest
  wait longer than ``hang_s``;
- **communication hang**: every rank posted, nothing completes within ``hang_s``; the culprit is
  localised from the rank x rank connection-latency matrix (dead connections, infinite latency):
  the GPU that is an endpoint of the most dead connections;
- **non-communication slow**: the last rank to post lags the median by more than
  ``(slow_ratio - 1)`` of the healthy compute phase for ``slow_iters`` iterations in a row;
- **communication slow**: a collective takes ``slow_ratio`` times its healthy duration for
  ``slow_iters`` iterations in a row; the slowest connection of the latency matrix and its
  bottleneck hop localise it.

After a diagnosis the culprit is isolated and the job restarts from its last checkpoint
(:func:`overhead`). The master runs on :class:`~models.systems.reliability.sim.FaultySimulator`
telemetry; detection times are when each rule first holds on the data available then (polling
every ``poll_s``). Thresholds are ours (the paper does not give them in SPECS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .faults import FaultKind

__all__ = ["C4DParams", "Diagnosis", "diagnose", "expected_class", "run_study", "overhead"]

NONCOMM_HANG, COMM_HANG, NONCOMM_SLOW, COMM_SLOW = ("non-comm hang", "comm hang", "non-comm slow", "comm slow")
CLASSES = (NONCOMM_HANG, COMM_HANG, NONCOMM_SLOW, COMM_SLOW)


@dataclass(frozen=True)
class C4DParams:
    """Master thresholds (ours).

    Parameters
    ----------
    hang_s : float
        No progress this long = hang.
    slow_ratio : float
        A phase this many times its healthy length = slow.
    slow_iters : int
        Consecutive slow iterations before a slow diagnosis.
    warmup : int
        Healthy iterations that set the baselines.
    poll_s : float
        Master polling period (detection times round up to it).
    """

    hang_s: float = 10.0
    slow_ratio: float = 1.2
    slow_iters: int = 2
    warmup: int = 2
    poll_s: float = 1.0

    def __post_init__(self):
        if not self.hang_s > 0 or not self.poll_s > 0:
            raise ValueError(f"hang_s and poll_s must be > 0, not {self.hang_s!r}, {self.poll_s!r}")
        if not self.slow_ratio > 1:
            raise ValueError(f"slow_ratio must be > 1, not {self.slow_ratio!r}")
        for n in ("slow_iters", "warmup"):
            if not (isinstance(getattr(self, n), int) and getattr(self, n) >= 1):
                raise ValueError(f"{n} must be an integer >= 1, not {getattr(self, n)!r}")


@dataclass(frozen=True)
class Diagnosis:
    """A C4D verdict: class, culprit GPUs, suspect connection ``(src, dst)`` and hop, detection time."""

    cls: str
    t: float
    ranks: tuple
    connection: tuple | None = None
    link: int | None = None


def _poll(t: float, p: C4DParams) -> float:
    return float(np.ceil(t / p.poll_s - 1e-9) * p.poll_s)


def diagnose(sim, job: int, p: C4DParams, now: float | None = None) -> Diagnosis | None:
    """First C4D diagnosis of ``job`` on the telemetry of ``sim`` up to ``now`` (None: healthy)."""
    now = sim.now if now is None else now
    recs = [r for r in sim.telemetry.collectives if r.job == job]
    if not recs:
        return None
    topo = sim.topo
    found: list[Diagnosis] = []
    # ---- slow: per iteration, the first collective after compute and every collective's duration
    first = {}
    for r in recs:
        first.setdefault(r.it, r)
    start = dict(zip(range(len(sim.jobs[job].iter_end) + 1), [sim.jobs[job].start, *sim.jobs[job].iter_end]))
    its = sorted(i for i in first if np.isfinite(first[i].enter).all() and i in start)
    if len(its) > p.warmup:
        comp = {i: float(np.median(first[i].enter)) - start[i] for i in its}
        base_c = float(np.median([comp[i] for i in its[:p.warmup]]))
        run, culprit = 0, []
        for i in its[p.warmup:]:
            lag = float(np.max(first[i].enter) - np.median(first[i].enter))
            if lag > (p.slow_ratio - 1) * base_c:
                run += 1
                culprit.append(int(first[i].ranks[np.argmax(first[i].enter)]))
                if run >= p.slow_iters:
                    t = _poll(float(np.max(first[i].enter)), p)
                    found.append(Diagnosis(NONCOMM_SLOW, t, (max(set(culprit), key=culprit.count),)))
                    break
            else:
                run, culprit = 0, []
    by_step: dict[int, list] = {}
    for r in recs:
        if np.isfinite(r.t_end):
            by_step.setdefault(r.step, []).append(r)
    for _k, rs in by_step.items():
        if len(rs) <= p.warmup:
            continue
        d = np.array([r.t_end - r.t_start for r in rs])
        base = float(np.median(d[:p.warmup]))
        run = 0
        for j in range(p.warmup, d.size):
            run = run + 1 if d[j] > p.slow_ratio * base else 0
            if run >= p.slow_iters:
                m = sim.telemetry.latency_matrix(job, topo.n_gpus, sim.net.capacity)
                conn, link = _slowest(sim, job, m)
                found.append(Diagnosis(COMM_SLOW, _poll(rs[j].t_end, p), tuple(conn), tuple(conn), link))
                break
    # ---- hangs: the last record is open
    last = recs[-1]
    if not np.isfinite(last.t_end):
        if not np.isfinite(last.enter).all():
            fin = last.enter[np.isfinite(last.enter)]
            t0 = float(fin.max()) if fin.size else float(sim.jobs[job].start)
            if now >= t0 + p.hang_s:
                found.append(Diagnosis(NONCOMM_HANG, _poll(t0 + p.hang_s, p),
                                       tuple(last.ranks[~np.isfinite(last.enter)].tolist())))
        elif now >= last.t_start + p.hang_s:
            m = sim.telemetry.latency_matrix(job, topo.n_gpus, sim.net.capacity)
            dead = np.argwhere(np.isinf(m))
            if dead.size:
                cnt = np.bincount(dead.ravel(), minlength=topo.n_gpus)
                g = int(np.argmax(cnt))
                conn = tuple(int(x) for x in dead[0])
                found.append(Diagnosis(COMM_HANG, _poll(last.t_start + p.hang_s, p), (g,), conn))
            else:
                found.append(Diagnosis(COMM_HANG, _poll(last.t_start + p.hang_s, p), ()))
    found = [f for f in found if f.t <= now + p.poll_s]
    return min(found, key=lambda f: f.t) if found else None


def _slowest(sim, job, m):
    """Slowest finite connection of the latency matrix and its bottleneck hop.

    The hop is the one with the least capacity per job path among all channels of that
    connection (what per-hop probing of the slow connection finds).
    """
    mm = np.where(np.isfinite(m), m, -np.inf)
    s, d = np.unravel_index(int(np.argmax(mm)), m.shape)
    cap = sim.net.capacity
    conns = [c for (j, _k), cs in sim.telemetry.connections.items() if j == job for c in cs]
    load = np.zeros(cap.size)
    for _src, _dst, paths in conns:
        np.add.at(load, paths[paths >= 0], 1.0)
    best, link = np.inf, None
    for src, dst, paths in conns:
        for i in np.flatnonzero((src == s) & (dst == d)).tolist():
            hops = paths[i][paths[i] >= 0]
            r = cap[hops] / np.maximum(load[hops], 1.0)
            if r.min() < best:
                best, link = float(r.min()), int(hops[np.argmin(r)])
    return (int(s), int(d)), link


def expected_class(kind: str, in_compute: bool) -> str | None:
    """The class C4D should report for a fault kind (None: outside C4D's view, e.g. NaN)."""
    if kind in (FaultKind.GPU_FAIL, FaultKind.HANG):
        return NONCOMM_HANG if in_compute else COMM_HANG
    return {FaultKind.NIC_DOWN: COMM_HANG, FaultKind.GPU_SLOW: NONCOMM_SLOW, FaultKind.CPU_OVERLOAD: NONCOMM_SLOW,
            FaultKind.NIC_FLAP: COMM_SLOW, FaultKind.LINK_LOSSY: COMM_SLOW, FaultKind.SWITCH_FAIL: COMM_SLOW}.get(kind)


def _localised(diag: Diagnosis, fault, sim) -> bool:
    from .sim import agg_switch_links

    topo = sim.topo
    if fault.kind == FaultKind.CPU_OVERLOAD:
        return any(r // topo.gpus_per_host == fault.target for r in diag.ranks)
    if fault.kind == FaultKind.LINK_LOSSY:
        return diag.link == fault.target
    if fault.kind == FaultKind.SWITCH_FAIL:
        return diag.link is not None and diag.link in set(agg_switch_links(topo, fault.target).tolist())
    return fault.target in diag.ranks or (diag.connection is not None and fault.target in diag.connection)


def overhead(delay_s: float, is_stop: bool, slow: float, duration: float, restart_s: float,
             ckpt_every_s: float, detected: bool, timeout_s: float) -> float:
    """Error-induced overhead (seconds of lost productive time) of one fault.

    Detected: ``delay`` (stalled, or slowed by ``1 - 1/slow``) + restart + half a checkpoint
    interval of redone work (expected). Undetected: a stop fault waits for the timeout, then the
    same restart; a slow fault runs slowed for its whole ``duration``.
    """
    if detected:
        d = delay_s if is_stop else delay_s * (1 - 1 / slow)
        return d + restart_s + ckpt_every_s / 2
    if is_stop:
        return timeout_s + restart_s + ckpt_every_s / 2
    return duration * (1 - 1 / slow)


def run_study(quick: bool = False, seed: int = 0, params: C4DParams | None = None, mix: str = "uniform") -> dict:
    """Inject one fault per trial on a 16-GPU job; score C4D's class and culprit.

    Setup (ours): 2 pods x 2 ToRs x 4 hosts, 1 GPU and 2 x 200 Gb/s ports per host, 2:1
    oversubscribed ToR and aggregation uplinks (so fabric faults can bite), ECMP, a
    DP=16 job with 2 NCCL channels, iterations of 0.8 s compute + ring all-reduce of 2.5 GB
    (about 0.2 s). Kinds are drawn uniformly over all nine kinds (``mix="uniform"``, so the rare
    network faults get enough trials; NaN is outside C4D's view and counts as a miss) or from
    ByteRobust's mix (``mix="byterobust"``); every fifth trial is fault-free (false alarms). The
    fault starts in iteration ``warmup + 1`` and lasts the rest of the run.
    """
    from models.systems.cluster.job import JobSpec, placement
    from models.systems.cluster.topology import LinkKind, clos

    from .faults import BYTEROBUST_MIX, KINDS, Fault
    from .sim import FaultySimulator

    p = params or C4DParams()
    if mix not in ("uniform", "byterobust"):
        raise ValueError(f"mix must be 'uniform' or 'byterobust', not {mix!r}")
    n_trials = 25 if quick else 100
    topo = clos(2, 2, 4, gpus_per_host=1, nic_ports=2, aggs_per_pod=2, cores_per_plane=2, tor_oversub=2.0,
                core_oversub=2.0)
    spec = JobSpec("c4d", dp=16, compute_s=0.8, grad_bytes=2.5e9, iterations=p.warmup + 8, channels=2)
    place = placement(spec, np.arange(16))
    rng = np.random.default_rng(seed)
    probs = np.array([BYTEROBUST_MIX[k] for k in KINDS]) if mix == "byterobust" else np.full(len(KINDS), 1 / len(KINDS))
    base = FaultySimulator(topo, seed=seed)
    base.add_job(spec, place)
    base.run()
    it_s = float(np.mean(base.jobs[0].iteration_times))
    comm_s = it_s - spec.compute_s
    used = np.flatnonzero(base.net.bytes_on_link > 0)
    fabric = used[(topo.kind[used] == LinkKind.TOR_UP) | (topo.kind[used] == LinkKind.AGG_UP)]
    trials = []
    for i in range(n_trials):
        healthy = i % 5 == 4
        kind = KINDS[int(rng.choice(len(KINDS), p=probs))]
        g = int(rng.integers(16))
        phase = float(rng.uniform(0, it_s))
        onset = p.warmup * it_s + phase + 0.01 * it_s
        in_compute = phase < spec.compute_s * 0.99
        sev, target, dur = 1.0, g, np.inf
        if kind in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD):
            sev = float(rng.uniform(1.5, 4.0))
        elif kind == FaultKind.LINK_LOSSY:
            sev, target = float(rng.uniform(0.1, 0.5)), int(rng.choice(fabric))
        elif kind == FaultKind.NIC_FLAP:
            sev, dur = 0.05, 30.0
        elif kind == FaultKind.SWITCH_FAIL:
            target = int(rng.integers(topo.n_pods * topo.aggs_per_pod))
        sim = FaultySimulator(topo, seed=seed)
        sim.add_job(spec, place)
        f = None
        if not healthy:
            f = Fault(0, kind, onset, target, dur, sev, explicit=True)
            sim.inject(f)
        horizon = spec.iterations * it_s * 4 + p.hang_s + 2
        sim.run(until=horizon)
        d = diagnose(sim, 0, p, now=horizon)
        it = sim.jobs[0].iteration_times
        symptom = (len(it) < spec.iterations) or (it.size and it.max() > 1.05 * it_s)
        row = {"trial": i, "kind": None if healthy else kind, "target": None if healthy else target,
               "severity": sev, "onset": onset, "symptom": bool(symptom) and not healthy,
               "expected": None if healthy else expected_class(kind, in_compute)}
        if d is not None:
            row.update(cls=d.cls, t_detect=d.t, ranks=list(d.ranks), link=d.link,
                       delay_s=None if healthy else d.t - onset,
                       correct_class=(not healthy) and d.cls == row["expected"],
                       localised=(not healthy) and _localised(d, f, sim))
        trials.append(row)
    det = [t for t in trials if "cls" in t]
    tp = [t for t in det if t.get("localised")]
    injected = [t for t in trials if t["kind"] is not None]
    symptomatic = [t for t in injected if t["symptom"]]
    prec = len(tp) / len(det) if det else float("nan")
    rec_all = len(tp) / len(injected) if injected else float("nan")
    rec_sym = sum(1 for t in symptomatic if t.get("localised")) / len(symptomatic) if symptomatic else float("nan")
    cls_acc = (sum(1 for t in det if t.get("correct_class")) / sum(1 for t in det if t["kind"] is not None)
               if any(t["kind"] is not None for t in det) else float("nan"))
    # error-induced overhead at production scale (ours: 30 min checkpoints, 10 min restart,
    # NCCL timeout 30 min, slow faults last 1 h); delays scaled from the measured ones
    ov_c4d = ov_to = 0.0
    for t in injected:
        stop = t["expected"] in (NONCOMM_HANG, COMM_HANG)
        slow = max(t["severity"], 1.0) if t["kind"] in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD) else 1.5
        if t["expected"] is None or not t["symptom"]:
            continue
        delay = t["delay_s"] if t.get("localised") else None
        ov_c4d += overhead(delay or 0.0, stop, slow, 3600.0, 600.0, 1800.0, delay is not None, 1800.0)
        ov_to += overhead(0.0, stop, slow, 3600.0, 600.0, 1800.0, False, 1800.0)
    delays = [t["delay_s"] for t in tp if t["delay_s"] is not None]
    from .telemetry import COSTS

    c = COSTS["collective_timestamp"]
    n_coll = len(base.telemetry.collectives) / spec.iterations  # collectives per iteration
    per_it = {"bytes": 16 * c["bytes"] * n_coll, "cpu_us": 16 * c["cpu_us"] * n_coll}
    return {"params": p.__dict__, "mix": mix, "iter_s": it_s, "telemetry_cost_per_iteration": per_it,
            "comm_s": comm_s, "trials": trials,
            "precision": prec, "recall": rec_all, "recall_symptomatic": rec_sym, "class_accuracy": cls_acc,
            "detect_delay_s": {"median": float(np.median(delays)) if delays else None,
                               "p90": float(np.percentile(delays, 90)) if delays else None},
            "overhead_s": {"c4d": ov_c4d, "timeout_only": ov_to,
                           "reduction": 1 - ov_c4d / ov_to if ov_to > 0 else None},
            "paper": {"error_overhead_reduction": 0.30}}

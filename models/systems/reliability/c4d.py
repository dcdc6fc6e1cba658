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
- **non-communication slow**: a rank's compute phase (from the end of the previous iteration to
  its post of the first collective, relative to the iteration's median rank) lies above its own
  median over the trailing ``slow_window`` iterations by more than ``slow_m`` times the job's
  own spread (1.4826 x MAD of every rank's phase over that window, and of the ranks' deviations
  in that iteration, at least ``slow_floor`` of the median) for ``slow_iters`` iterations in a
  row, and that run has cost the job ``slow_cost`` healthy iteration times (per iteration the
  rank's compute beyond its own usual or the iteration's time beyond the median iteration gap,
  whichever is larger, summed over the run) (:func:`slow_rank_events`):
  relative to what the telemetry shows, never a fixed ratio or wall-clock window. The cost test is
  what keeps healthy slow episodes (a few percent to tens of percent for a few iterations) from
  paging: a job whose healthy spread is near zero puts the spread rule's threshold at
  ``slow_m x slow_floor`` (12%) and such episodes clear it for a few iterations in a row;
- **communication slow**: a collective takes ``slow_ratio`` times its healthy duration for
  ``slow_iters`` iterations in a row; the slowest connection of the latency matrix and its
  bottleneck hop localise it.

After a diagnosis the culprit is isolated and the job restarts from its last checkpoint; the
error-induced overhead is measured by playing a production fault stream
(:func:`simulate_overhead`), each fault as one of the study's trials of its kind, against a
timeout-only baseline, and reported as curves over the fault rate and the constants the paper does
not give (:func:`overhead_curves`). The master runs on :class:`~models.systems.reliability.sim.FaultySimulator`
telemetry; detection times are when each rule first holds on the data available then (polling
every ``poll_s``). Thresholds are ours (the paper does not give them in SPECS.md); the PAI replay
(:mod:`~models.systems.reliability.pai`) reports how the slow-rank verdicts move over a range of
``slow_m``, ``slow_iters`` and ``slow_window``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .faults import FaultKind

__all__ = ["C4DParams", "Diagnosis", "diagnose", "expected_class", "run_study", "OverheadParams",
           "simulate_overhead", "stream_length", "overhead_curves", "compute_phases", "slow_rank_events",
           "healthy_period"]

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
        A collective this many times its healthy duration = communication slow.
    slow_m : float
        Non-communication slow: a rank's relative compute phase this many spreads above its own
        trailing median.
    slow_window : int
        Trailing iterations giving each rank's median and the job's spread.
    slow_floor : float
        Smallest spread, as a fraction of the median relative phase (1): a perfectly regular job
        has MAD 0.
    slow_iters : int
        Consecutive slow iterations before a slow diagnosis.
    slow_cost : float
        ... and the run of slow iterations must have cost the job this many healthy iteration times
        (per iteration the rank's compute beyond its own usual, or the iteration's time beyond the
        median gap between iterations if larger, summed over the run): a short or mild healthy
        episode never pays for a restart.
    warmup : int
        Iterations of history before any slow verdict (they set the first baselines).
    poll_s : float
        Master polling period (detection times round up to it).
    """

    hang_s: float = 10.0
    slow_ratio: float = 1.2
    slow_m: float = 6.0
    slow_window: int = 50
    slow_floor: float = 0.02
    slow_iters: int = 2
    slow_cost: float = 2.0
    warmup: int = 2
    poll_s: float = 1.0

    def __post_init__(self):
        if not self.hang_s > 0 or not self.poll_s > 0:
            raise UsageError(f"hang_s and poll_s must be > 0, not {self.hang_s!r}, {self.poll_s!r}")
        if not self.slow_ratio > 1:
            raise UsageError(f"slow_ratio must be > 1, not {self.slow_ratio!r}")
        if not self.slow_m > 0 or not self.slow_floor > 0:
            raise UsageError(f"slow_m and slow_floor must be > 0, not {self.slow_m!r}, {self.slow_floor!r}")
        if not self.slow_cost >= 0:
            raise UsageError(f"slow_cost must be >= 0, not {self.slow_cost!r}")
        for n in ("slow_iters", "warmup", "slow_window"):
            if not (isinstance(getattr(self, n), int) and getattr(self, n) >= 1):
                raise UsageError(f"{n} must be an integer >= 1, not {getattr(self, n)!r}")


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


def diagnose(tel, p: C4DParams, now: float) -> Diagnosis | None:
    """First C4D diagnosis on telemetry ``tel`` (a :class:`~models.systems.cluster.telemetry.Telemetry`)
    with the records stamped up to ``now`` (None: healthy).

    Uses only the completion logs (per-rank collective entry/exit), the per-connection chunk
    latencies of the proxy trace and the connections' paths (for localising a slow link).
    """
    recs = sorted(tel.records(now), key=lambda r: (r.it, r.seq))
    if not recs:
        return None
    found: list[Diagnosis] = []
    # ---- non-communication slow: a rank's compute phase departs from its own history
    ev = slow_rank_events(tel, p, now, recs=recs)
    if ev:
        found.append(Diagnosis(NONCOMM_SLOW, _poll(ev[0]["t"], p), (ev[0]["rank"],)))
    # ---- communication slow: a collective takes slow_ratio x its healthy time once all joined
    by_label: dict[str, list] = {}
    for r in recs:
        if np.isfinite(r.exit).all() and np.isfinite(r.enter).all():
            by_label.setdefault(r.label, []).append(r)
    for rs in by_label.values():
        if len(rs) <= p.warmup:
            continue
        dur = np.array([np.max(r.exit) - np.max(r.enter) for r in rs])
        base = float(np.median(dur[:p.warmup]))
        run = 0
        for j in range(p.warmup, dur.size):
            run = run + 1 if dur[j] > p.slow_ratio * base else 0
            if run >= p.slow_iters:
                t = _poll(float(np.max(rs[j].exit)), p)
                conn, link = _slow_link(tel, rs[j], rs[:p.warmup], t, p)
                found.append(Diagnosis(COMM_SLOW, t, conn, conn, link))
                break
    # ---- hangs: the latest instance is open
    r = recs[-1]
    if not np.isfinite(r.exit).all():
        ent = np.isfinite(r.enter)
        t0 = float(np.max(r.enter[ent]))
        if now >= t0 + p.hang_s:
            t = _poll(t0 + p.hang_s, p)
            if not ent.all():
                found.append(Diagnosis(NONCOMM_HANG, t, tuple(int(x) for x in r.ranks[~ent])))
            elif r.T is not None:
                found.append(_comm_hang(tel, r, t, now))
            else:
                found.append(Diagnosis(COMM_HANG, t, ()))
    found = [f for f in found if f.t <= now + p.poll_s]
    return min(found, key=lambda f: f.t) if found else None


def compute_phases(tel, now: float, recs=None):
    """Per-rank compute phases from the completion logs up to ``now``: ``(iterations, ranks, comp,
    t_post)`` with ``comp[i, j]`` = rank ``j``'s post of iteration ``its[i]``'s first collective
    minus its exit from the previous iteration's last one, and ``t_post[i]`` the last post (when
    the phase of every rank is known). Iterations some rank has not posted yet are left out."""
    if recs is None:
        recs = sorted(tel.records(now), key=lambda r: (r.it, r.seq))
    n_seq = len(tel.conns)
    first = {r.it: r for r in recs if r.seq == 0}
    last = {r.it: r for r in recs if r.seq == n_seq - 1}
    its = sorted(i for i in first if np.isfinite(first[i].enter).all()
                 and (i == 0 or (i - 1 in last and np.isfinite(last[i - 1].exit).all())))
    if not its:
        return [], tel.ranks, np.zeros((0, tel.ranks.size)), np.zeros(0)
    comp = np.stack([first[i].enter - (0.0 if i == 0 else last[i - 1].exit) for i in its])
    t_post = np.array([float(np.max(first[i].enter)) for i in its])
    return its, first[its[0]].ranks, comp, t_post


def slow_rank_events(tel, p: C4DParams, now: float, recs=None, phases=None) -> list[dict]:
    """Every non-communication-slow verdict of the relative rule (module docstring) up to ``now``:
    at most one per run of slow iterations of a rank (the run lasts while the rank stays slow or
    above the threshold of its history before the run), ``{"rank", "it", "start_it", "t", "score",
    "cost_iters"}`` in time order (``it``: the iteration at which the run had lasted ``slow_iters``
    and cost ``slow_cost`` healthy iterations, ``t``: its last post, ``score``: the run's highest
    score so far, ``cost_iters``: the cost then)."""
    from .mycroft import robust_score

    its, ranks, comp, t_post = phases if phases is not None else compute_phases(tel, now, recs)
    if len(its) <= p.warmup:
        return []
    med = np.median(comp, axis=1, keepdims=True)
    rel = comp / np.where(med > 0, med, 1.0)
    score, centre, spread = robust_score(rel, p.slow_window, p.warmup, p.slow_floor, cross=True, with_centre=True)
    with np.errstate(invalid="ignore"):
        slow = score > p.slow_m
    it_s = healthy_period(t_post, p.slow_window)
    gap = np.concatenate([[0.0], np.diff(t_post)])
    out = []
    n = slow.shape[0]
    for c in range(slow.shape[1]):
        e = 0
        for s0 in np.flatnonzero(slow[:, c]):
            if s0 < e:
                continue  # inside a run already followed
            # the run: from the first slow iteration on, while the rank stays slow or above the
            # threshold of its own history before the run (a departure that lasts does not become
            # its own baseline)
            base, lim = centre[s0, c], centre[s0, c] + p.slow_m * spread[s0]
            it0 = it_s[s0]  # the healthy iteration time before the run (the run does not set it)
            persists = bool(slow[s0:s0 + p.slow_iters, c].all())  # slow_iters slow iterations in a row
            acc, top, fired, e = 0.0, 0.0, False, int(s0)
            while e < n and (slow[e, c] or rel[e, c] > lim):
                top = max(top, float(score[e, c]))
                # what the iteration cost the job: the rank's compute beyond its own usual (seconds;
                # every rank waits for it at the collective), or the iteration's time beyond the
                # healthy one if larger (a rank slow in its proxy too, e.g. an overloaded host,
                # delays the collectives as well)
                acc += max(float((rel[e, c] - base) * med[e, 0]), float(gap[e] - it0))
                if not fired and persists and e - s0 + 1 >= p.slow_iters and acc >= p.slow_cost * it0:
                    out.append({"rank": int(ranks[c]), "it": int(its[e]), "start_it": int(its[s0]),
                                "t": float(t_post[e]), "score": top, "cost_iters": float(acc / it0)})
                    fired = True
                e += 1
    return sorted(out, key=lambda x: (x["it"], x["rank"]))


def healthy_period(t_post: np.ndarray, window: int) -> np.ndarray:
    """The job's healthy iteration time as the telemetry shows it at every iteration: the median of
    the trailing ``window`` gaps between the iterations' last posts (the first gap before any)."""
    from numpy.lib.stride_tricks import sliding_window_view

    g = np.diff(np.asarray(t_post, dtype=float))
    n = len(t_post)
    out = np.full(n, np.nan)
    if g.size == 0:
        return np.full(n, np.inf)
    head = min(n, window + 1)
    for i in range(head):  # iteration i: gaps [max(0, i - 1 - window), max(i - 1, 1))
        out[i] = float(np.median(g[max(0, i - 1 - window):max(i - 1, 1)]))
    if n > head:  # every later iteration: the full window of the `window` gaps before its last
        out[head:] = np.median(sliding_window_view(g, window)[:n - head], axis=1)
    return out


def _comm_hang(tel, r, t: float, now: float) -> Diagnosis:
    """Every rank posted and nothing completes: the dead connections (chunks posted and never
    done) name the culprit; with none, the connection whose completions stopped first names its
    sender (it stopped producing)."""
    src, dst = tel.conns[r.label][0], tel.conns[r.label][1]
    lat = tel.conn_latency(r, now)
    dead = np.isinf(lat)
    if dead.any():
        ends = np.concatenate([src[dead], dst[dead]])
        cnt = np.bincount(ends, minlength=tel.n_gpus)
        g = int(np.argmax(cnt))
        i = int(np.flatnonzero(dead)[0])
        return Diagnosis(COMM_HANG, t, (g,), (int(src[i]), int(dst[i])))
    D = np.where(r.D <= now, r.D, -np.inf)
    last = D.max(axis=0)
    i = int(np.argmin(np.where(np.isfinite(last), last, np.inf)))
    return Diagnosis(COMM_HANG, t, (int(src[i]),), (int(src[i]), int(dst[i])))


def _slow_link(tel, rec, base_recs, t: float, p: C4DParams):
    """The connections of ``rec`` slower than ``slow_ratio`` x their own healthy latency (from
    ``base_recs``), the slowest of them, and the link their paths share most (tomography over the
    known paths; ties broken by the switches' drop counters and link events): ``((src, dst),
    link)``."""
    src, dst = tel.conns[rec.label][0], tel.conns[rec.label][1]
    lat = tel.conn_latency(rec, t)
    base = np.nanmedian(np.stack([tel.conn_latency(b, t) for b in base_recs]), axis=0)
    ratio = lat / base
    fin = np.isfinite(ratio)
    if not fin.any():
        return (), None
    i = int(np.argmax(np.where(fin, ratio, -np.inf)))
    conn = (int(src[i]), int(dst[i]))
    paths = tel.paths.get(rec.label)
    if paths is None:
        return conn, None
    slow = fin & (ratio > p.slow_ratio)
    if not slow.any():
        slow = np.zeros(lat.size, dtype=bool)
        slow[i] = True
    hop_s = paths[slow][paths[slow] >= 0]
    hop_h = paths[~slow & fin][paths[~slow & fin] >= 0]
    n_l = int(max(paths.max(), 0)) + 1
    score = np.bincount(hop_s, minlength=n_l) - 0.5 * np.bincount(hop_h, minlength=n_l)
    # ties between the hops of the slow paths: switch port counters (drops) and link up/down
    # events in the slow window break them
    t0 = float(np.nanmin(rec.enter))
    from .noise import drop_suspects

    hot = drop_suspects(tel, [t0, max(t, t0 + 1e-6)], n_l)  # over the slow instance
    score[hot[hot < n_l]] += 0.25
    flapped = [e[2] for e in tel.hw(t, "link") if e[2] < n_l and e[0] >= t0 - 60.0]
    if flapped:
        score[np.array(flapped)] += 0.25
    return conn, int(np.argmax(score))


def expected_class(kind: str, in_compute: bool) -> str | None:
    """The class C4D should report for a fault kind (None: outside C4D's view, e.g. NaN)."""
    if kind in (FaultKind.GPU_FAIL, FaultKind.HANG):
        return NONCOMM_HANG if in_compute else COMM_HANG
    return {FaultKind.NIC_DOWN: COMM_HANG, FaultKind.GPU_SLOW: NONCOMM_SLOW, FaultKind.CPU_OVERLOAD: NONCOMM_SLOW,
            FaultKind.NIC_FLAP: COMM_SLOW, FaultKind.LINK_LOSSY: COMM_SLOW, FaultKind.SWITCH_FAIL: COMM_SLOW}.get(kind)


def _localised(diag: Diagnosis, fault, topo) -> bool:
    from .sim import agg_switch_links, nic_port_links

    if fault.kind == FaultKind.CPU_OVERLOAD:
        return any(r // topo.gpus_per_host == fault.target for r in diag.ranks)
    if fault.kind == FaultKind.LINK_LOSSY:
        return diag.link == fault.target
    if fault.kind == FaultKind.SWITCH_FAIL:
        return diag.link is not None and diag.link in set(agg_switch_links(topo, fault.target).tolist())
    if fault.kind == FaultKind.NIC_FLAP and diag.link is not None:
        return diag.link in set(nic_port_links(topo, fault.target).tolist())
    return fault.target in diag.ranks or (diag.connection is not None and fault.target in diag.connection)


@dataclass(frozen=True)
class OverheadParams:
    """The production fault stream of the error-induced overhead (all ours: the C4 paper gives
    the -30% but not these; the curves sweep each).

    Parameters
    ----------
    n_gpus : int
        Job size (faults per hour scale with ``n_gpus * rate``).
    days : float
        Length of the stream.
    rate_per_gpu_day : float
        Fault rate (default Llama 3's; :mod:`~models.systems.reliability.rates`).
    restart_s : float
        Isolate the culprit and restart the job (both systems).
    ckpt_every_s : float
        Persistent checkpoint interval (work since the last one is redone).
    timeout_s : float
        The baseline's NCCL timeout: a hang is seen after this.
    transient_s : tuple
        Duration range of self-clearing slow faults (the baseline runs slowed for all of it).
    mix : str
        ``uniform`` or ``byterobust`` fault-kind mix.
    """

    n_gpus: int = 2048
    days: float = 30.0
    rate_per_gpu_day: float = 4.7e-4
    restart_s: float = 600.0
    ckpt_every_s: float = 1800.0
    timeout_s: float = 1800.0
    transient_s: tuple = (600.0, 7200.0)
    mix: str = "uniform"

    def __post_init__(self):
        for n in ("days", "ckpt_every_s", "n_gpus"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("rate_per_gpu_day", "restart_s", "timeout_s"):
            if not getattr(self, n) >= 0:
                raise UsageError(f"{n} must be >= 0, not {getattr(self, n)!r}")
        if self.mix not in ("uniform", "byterobust"):
            raise UsageError(f"mix must be 'uniform' or 'byterobust', not {self.mix!r}")


def simulate_overhead(trials: list[dict], op: OverheadParams, system: str, seed: int, faults=None) -> dict:
    """Error-induced overhead of ``system`` (``c4d`` | ``timeout``) over a simulated fault stream.

    Faults arrive as :func:`~models.systems.reliability.faults.sample_faults` draws them (``op``'s
    rate, mix and durations); every fault is played as a trial of its kind drawn from ``trials``
    (what C4D saw on the transport: symptom, localised, detection delay, measured slow-down). The
    job's timeline is followed fault by fault: a fault while the job is down is absorbed; a hang
    stalls the job until C4D localises it (its measured delay) or the baseline's timeout, then
    the restart, and the work since the last checkpoint is redone; a slow fault costs ``1 - 1 /
    slowdown`` of its time until C4D localises it (then isolate + restart from the checkpoint),
    or all of its duration for the baseline. ``faults`` replaces the sampled stream. Returns the
    lost seconds and the counts."""
    from .faults import BYTEROBUST_MIX, KINDS, FaultMix, sample_faults

    if system not in ("c4d", "timeout"):
        raise UsageError(f"system must be 'c4d' or 'timeout', not {system!r}")
    w = dict(BYTEROBUST_MIX) if op.mix == "byterobust" else dict.fromkeys(KINDS, 1.0)
    horizon = op.days * 86400.0
    if faults is None:
        faults = sample_faults(FaultMix(rate_per_gpu_day=op.rate_per_gpu_day, weights=w,
                                        transient_s=op.transient_s), op.n_gpus, horizon, seed)
    pool: dict = {}
    for t in trials:
        if t["kind"] is not None:
            pool.setdefault(t["kind"], []).append(t)
    rng = np.random.default_rng((seed, 4242))
    up_at = seg0 = 0.0
    lost = {"stalled": 0.0, "restart": 0.0, "redo": 0.0, "slow": 0.0}
    n = {"faults": len(faults), "absorbed": 0, "unseen": 0, "localised": 0, "timeout": 0, "slow_ran": 0,
         "no_symptom": 0}
    c4d = system == "c4d"

    def since_ckpt(t):
        return (t - seg0) % op.ckpt_every_s

    for f in faults:
        if f.t < up_at:
            n["absorbed"] += 1
            continue
        cands = pool.get(f.kind)
        if not cands:
            n["unseen"] += 1
            continue
        tr = cands[int(rng.integers(len(cands)))]
        if tr["expected"] is None or not tr["symptom"]:
            n["no_symptom"] += 1
            continue
        found = c4d and bool(tr.get("localised")) and tr.get("delay_s") is not None
        delay = max(float(tr["delay_s"]), 0.0) if found else None
        if tr["expected"] in (NONCOMM_HANG, COMM_HANG) or not np.isfinite(tr["slowdown"]):
            d = delay if found else op.timeout_s
            n["localised" if found else "timeout"] += 1
            lost["stalled"] += min(d, horizon - f.t)
            lost["restart"] += op.restart_s
            lost["redo"] += since_ckpt(f.t)
            up_at = seg0 = f.t + d + op.restart_s
            continue
        s = max(float(tr["slowdown"]), 1.0)
        dur = min(f.duration, horizon - f.t)
        if found and delay < dur:
            n["localised"] += 1
            lost["slow"] += delay * (1 - 1 / s)
            lost["restart"] += op.restart_s
            lost["redo"] += since_ckpt(f.t + delay)
            up_at = seg0 = f.t + delay + op.restart_s
        else:
            n["slow_ran"] += 1
            lost["slow"] += dur * (1 - 1 / s)
    return {"overhead_s": float(sum(lost.values())), "lost_s": lost, "counts": n}


def stream_length(op: OverheadParams, min_faults: float = 400.0, max_faults: float = 5000.0) -> OverheadParams:
    """``op`` with its days lengthened or shortened so that the stream holds ``min_faults`` to
    ``max_faults`` expected faults (a low rate is not judged on a handful of events)."""
    from dataclasses import replace

    per_day = max(op.rate_per_gpu_day * op.n_gpus, 1e-12)
    return replace(op, days=float(np.clip(op.days, min_faults / per_day, max(max_faults / per_day, 1.0))))


def overhead_curves(trials: list[dict], base: OverheadParams, seeds, rates: dict, min_faults: float = 400.0,
                    max_faults: float = 5000.0) -> dict:
    """The overhead reduction ``1 - c4d / timeout`` over the fault rate and over each constant the
    paper does not give (restart, checkpoint interval, timeout, slow-fault duration), every other
    constant at ``base``; ``rates``: named real rates (per GPU-day) whose points are computed too.
    Returns ``{"axes": {name: {"x", "reduction"}}, "points": {name: reduction}, "band"}``; the band
    is the range of the reduction over the four constants' sweeps at the base rate. Every stream
    is lengthened or shortened from ``base.days`` to hold ``min_faults`` to ``max_faults``
    expected faults."""
    from dataclasses import replace

    def red(op):
        op = stream_length(op, min_faults, max_faults)
        r = []
        for s in seeds:
            a = simulate_overhead(trials, op, "c4d", s)["overhead_s"]
            b = simulate_overhead(trials, op, "timeout", s)["overhead_s"]
            r.append(1 - a / b if b > 0 else float("nan"))
        r = [x for x in r if np.isfinite(x)]
        return float(np.mean(r)) if r else float("nan")

    lo_t, hi_t = base.transient_s
    axes = {"rate_per_gpu_day": [float(x) for x in np.geomspace(1e-4, 2.0, 9)],
            "restart_s": [60.0, 300.0, 600.0, 1200.0, 1800.0],
            "ckpt_every_s": [300.0, 900.0, 1800.0, 3600.0, 7200.0],
            "timeout_s": [300.0, 600.0, 1200.0, 1800.0, 3600.0],
            "transient_scale": [0.25, 0.5, 1.0, 2.0, 4.0]}
    out = {}
    for name, xs in axes.items():
        ys = []
        for x in xs:
            if name == "transient_scale":
                op = replace(base, transient_s=(lo_t * x, hi_t * x))
            else:
                op = replace(base, **{name: x})
            ys.append(red(op))
        out[name] = {"x": xs, "reduction": ys}
    pts = {k: red(replace(base, rate_per_gpu_day=v)) for k, v in rates.items()}
    sweep = [y for k, v in out.items() if k != "rate_per_gpu_day" for y in v["reduction"] if np.isfinite(y)]
    return {"axes": out, "points": pts, "base": red(base), "base_params": base.__dict__,
            "band": [float(min(sweep)), float(max(sweep))] if sweep else None}


def run_study(quick: bool = False, seed: int = 0, params: C4DParams | None = None, mix: str = "uniform",
              noise=None, n_trials: int | None = None, overhead_params: OverheadParams | None = None) -> dict:
    """Inject one fault per trial on the study job (:mod:`~models.systems.reliability.study`); C4D sees
    only the telemetry. Kinds uniform over all nine (NaN is outside C4D's view and counts as a
    miss) or ByteRobust's mix; every fifth trial is fault-free (false alarms). The fault starts in
    iteration ``warmup + 1`` and lasts the rest of the run. ``noise``: background events
    (:class:`~models.systems.reliability.noise.NoiseParams`) in every trial. The error-induced
    overhead comes from :func:`simulate_overhead` (a fault stream at ``overhead_params``, each
    fault's outcome drawn from the trials of its kind)."""
    from .faults import BYTEROBUST_MIX, KINDS
    from .study import confusion, draw_fault, run_trial, setup, symptom

    p = params or C4DParams()
    if mix not in ("uniform", "byterobust"):
        raise UsageError(f"mix must be 'uniform' or 'byterobust', not {mix!r}")
    n_trials = n_trials or (30 if quick else 100)
    st = setup(seed, iterations=p.warmup + 40)
    rng = np.random.default_rng(seed)
    probs = np.array([BYTEROBUST_MIX[k] for k in KINDS]) if mix == "byterobust" else np.full(len(KINDS), 1 / len(KINDS))
    trials = []
    for i in range(n_trials):
        healthy = i % 5 == 4
        kind = KINDS[int(rng.choice(len(KINDS), p=probs))]
        f, in_compute = draw_fault(rng, kind, st, p.warmup)
        horizon = f.t + p.hang_s + 8 * st.it_s
        sim = run_trial(st, None if healthy else f, horizon, seed, noise=noise, noise_seed=seed * 100003 + i)
        d = diagnose(sim.tel, p, now=horizon)
        it_end = np.asarray(sim.iter_end)
        after = np.diff(it_end)[it_end[1:] > f.t + st.it_s] if it_end.size > 1 else np.zeros(0)
        stalled = it_end.size == 0 or horizon - it_end[-1] > 3 * st.it_s
        row = {"trial": i, "kind": None if healthy else kind, "target": None if healthy else f.target,
               "severity": f.severity, "onset": f.t, "symptom": (not healthy) and symptom(sim, st, horizon),
               "expected": None if healthy else expected_class(kind, in_compute),
               # measured iteration slow-down after the onset (ground truth, for the overhead stream)
               "slowdown": float("inf") if stalled else (float(np.median(after)) / st.it_s if after.size else 1.0)}
        if d is not None:
            row.update(cls=d.cls, t_detect=d.t, ranks=list(d.ranks), link=d.link,
                       delay_s=None if healthy else d.t - f.t,
                       correct_class=(not healthy) and d.cls == row["expected"],
                       localised=(not healthy) and _localised(d, f, st.topo))
        trials.append(row)
    det = [t for t in trials if "cls" in t]
    tp = [t for t in det if t.get("localised")]
    injected = [t for t in trials if t["kind"] is not None]
    symptomatic = [t for t in injected if t["symptom"]]
    prec = len(tp) / len(det) if det else float("nan")
    rec_all = len(tp) / len(injected) if injected else float("nan")
    rec_sym = sum(1 for t in symptomatic if t.get("localised")) / len(symptomatic) if symptomatic else float("nan")
    det_inj = [t for t in det if t["kind"] is not None]
    cls_acc = sum(1 for t in det_inj if t.get("correct_class")) / len(det_inj) if det_inj else float("nan")
    # error-induced overhead: a fault stream at production scale, each fault played as a trial of its kind
    op = stream_length(overhead_params or OverheadParams(mix=mix))
    ov = {sys_: simulate_overhead(trials, op, sys_, seed) for sys_ in ("c4d", "timeout")}
    ov_c4d, ov_to = ov["c4d"]["overhead_s"], ov["timeout"]["overhead_s"]
    delays = [t["delay_s"] for t in tp if t["delay_s"] is not None]
    kinds = list(KINDS)
    cm_cls = confusion([(t["kind"] or "healthy", t.get("cls")) for t in trials], ["healthy", *kinds],
                       [*CLASSES, "none"])
    per_kind = {k: {"n": sum(1 for t in injected if t["kind"] == k),
                    "symptomatic": sum(1 for t in injected if t["kind"] == k and t["symptom"]),
                    "localised": sum(1 for t in injected if t["kind"] == k and t.get("localised")),
                    "class_right": sum(1 for t in injected if t["kind"] == k and t.get("correct_class"))}
                for k in kinds}
    return {"params": p.__dict__, "mix": mix, "iter_s": st.it_s, "comm_s": st.comm_s, "trials": trials,
            "precision": prec, "recall": rec_all, "recall_symptomatic": rec_sym, "class_accuracy": cls_acc,
            "per_kind": per_kind, "confusion": cm_cls,
            "detect_delay_s": {"median": float(np.median(delays)) if delays else None,
                               "p90": float(np.percentile(delays, 90)) if delays else None},
            "overhead_s": {"c4d": ov_c4d, "timeout_only": ov_to,
                           "reduction": 1 - ov_c4d / ov_to if ov_to > 0 else None,
                           "stream": {k: {x: y for x, y in v.items() if x != "overhead_s"} for k, v in ov.items()},
                           "params": op.__dict__},
            "noise": None if noise is None else noise.__dict__,
            "paper": {"error_overhead_reduction": 0.30}}

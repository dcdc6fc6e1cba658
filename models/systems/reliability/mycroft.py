"""Mycroft: trigger rules and dependency-driven root-cause analysis from the proxies' logs.

Mycroft (ByteDance et al., SOSP 2025, arXiv 2509.03018) instruments NCCL's proxy with per-flow
counters GPU_ready ``G``, RDMA_transmitted ``T``, RDMA_done ``D``, a completion log per
collective and a state log every 100 ms. Here those logs come from the chunk-level transport
(:mod:`hwcosim.models.systems.cluster.transport`) via
:class:`hwcosim.models.systems.cluster.telemetry.Telemetry`: every function
below takes the telemetry and an observation time, never the simulator or the fault list.

**Trigger** (:func:`trigger`): a sample of ranks, at least one per DP group and at most 10, is
watched; a sampled rank with an open collective (state log) but no completion log within
``window_m`` times that collective's healthy duration (the completion logs' own median) is a
failure. A **straggler** is a throughput drop measured against the job's own
recent behaviour, never a fixed wall-clock window: the gap between the sampled ranks' iteration
completions exceeds the median gap of the trailing ``straggler_window`` iterations by more than
``straggler_m`` times their spread (1.4826 x MAD, at least ``straggler_floor`` x the median gap)
for ``straggler_persist`` iterations in a row (:func:`straggler_events`, :func:`robust_score`).

**Root cause** (:func:`root_cause`), on the logs at the first state-log tick after the trigger at
which they name a culprit (:func:`root_cause_at`; the verdict is out when the logs have been
gathered over the network and analysed, :func:`collect_time`),
following the dependencies to the earliest culprit:

1. intra-node: a rank that entered the open collective and whose state log went silent while
   others still log (process gone) -> that rank, ``gpu``;
2. compute vs communication: ranks that never posted the open collective while the others did
   -> those ranks, ``gpu`` (``host`` when every GPU of a host is missing);
3. ``T > D`` on a stalled flow: posted but never done -> ``network`` (the flow, and the rank
   common to the stuck flows);
4. a stalled rank that received more than it made ready (``D`` in > ``G`` out) although its
   outgoing slots are free -> its GPU stopped, ``gpu``;
5. a straggler: one rank late to post the first collective -> that rank, ``gpu`` / ``host``;
   otherwise, over the state-log ticks of the last slow collective, a flow with ``T - D`` near
   its peak -> ``network``; else the flows blocked with ``G > T`` are walked downstream to the
   one whose receiver is not blocked itself: its own proxy lags -> ``host``.

On a replayed trace (completion logs only, :mod:`~models.systems.reliability.pai`) a straggler's
culprit is a rank late to post, relative to its own history and to its peers
(:func:`late_ranks`), in *every* slow iteration of the run that fired the trigger
(:func:`run_late_ranks`): the trigger needs ``straggler_persist`` slow iterations in a row, and a
run made of two different ranks' one-iteration hiccups has no slow rank to name.

Window multiple, sampling and analysis cost are ours: ``window_m = 10`` healthy durations,
``analyse_us_per_row = 1`` (the collection time itself is the state logs' bytes over the rate
the job's own collectives show, :func:`collect_time`); the detection and
root-cause times therefore follow the job's own collective time and the evidence in the logs, and
the study reports their distributions and how they move with ``window_m``. The straggler rule's defaults (``m = 6``,
persistence 2, window 50 iterations, floor 2% of the median gap) are ours too; the PAI replay
(:mod:`~models.systems.reliability.pai`) reports what the verdicts are sensitive to over a range
of each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from hwcosim.models.errors import UsageError

from .faults import FaultKind

__all__ = ["MycroftParams", "trigger", "root_cause", "root_cause_at", "failure_window", "sample_ranks", "run_study",
           "COMPONENT", "collect_time", "robust_score", "runs", "straggler_events", "completion_times", "late_ranks",
           "run_late_ranks", "WINDOW_M_SWEEP"]

#: Window multiples the study re-evaluates the trigger at (sensitivity of the detection time).
WINDOW_M_SWEEP = (3.0, 5.0, 10.0, 20.0, 40.0)

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
    window_m : float
        An open collective without a completion log for this many times its healthy duration
        (from the completion logs) = failure.
    straggler_m : float
        A completion gap above the trailing median by more than this many spreads = slow.
    straggler_persist : int
        Slow gaps in a row before a straggler trigger.
    straggler_window : int
        Trailing iterations whose gaps give the median and the spread (1.4826 x MAD).
    straggler_floor : float
        Smallest spread, as a fraction of the median gap (a perfectly regular job has MAD 0).
    lag_frac : float
        Root cause of a straggler on a replayed trace (:func:`late_ranks`, per iteration of the
        trigger's run, :func:`run_late_ranks`): of the ranks standing out, those whose excess is
        at least this fraction of the largest.
    analyse_us_per_row : float
        CPU time of the root-cause analysis per state-log row read (:func:`collect_time`).
    state_log_s : float
        State-log period (100 ms, paper).
    max_sampled : int
        At most this many sampled ranks (10, paper).
    """

    window_m: float = 10.0
    straggler_m: float = 6.0
    straggler_persist: int = 2
    straggler_window: int = 50
    straggler_floor: float = 0.02
    lag_frac: float = 0.5
    analyse_us_per_row: float = 1.0
    state_log_s: float = 0.1
    max_sampled: int = 10

    def __post_init__(self):
        for n in ("window_m", "analyse_us_per_row", "state_log_s"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("straggler_m", "straggler_floor"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("straggler_persist", "straggler_window"):
            if not (isinstance(getattr(self, n), int) and getattr(self, n) >= 1):
                raise UsageError(f"{n} must be an integer >= 1, not {getattr(self, n)!r}")
        if not 0 < self.lag_frac <= 1:
            raise UsageError(f"lag_frac must lie in (0, 1], not {self.lag_frac!r}")
        if not (isinstance(self.max_sampled, int) and self.max_sampled >= 1):
            raise UsageError(f"max_sampled must be an integer >= 1, not {self.max_sampled!r}")


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


def trigger(tel, p: MycroftParams, sampled: np.ndarray, now: float, warmup: int = 2):
    """Earliest trigger ``(time, "failure" | "straggler")`` on telemetry ``tel`` up to ``now``.

    Failure: a sampled rank has state logs of an instance (it entered) and no completion log
    :func:`failure_window` later (a multiple of that collective's healthy duration). Straggler:
    the first of :func:`straggler_events` on the sampled ranks' iteration completions (relative
    to the job's own trailing gaps; ``warmup`` gaps of history at least).
    """
    recs = sorted(tel.records(now), key=lambda r: (r.it, r.seq))
    if not recs:
        return None
    n_seq = len(tel.conns)
    cands = []
    for r in recs:
        sel = np.isin(r.ranks, sampled)
        posted = sel & np.isfinite(r.enter)
        if not posted.any():
            continue
        open_ = posted & ~np.isfinite(r.exit)
        if open_.any():
            w = failure_window(recs, r.label, p)
            if w is None:
                continue
            t0 = float(np.min(r.enter[open_]))
            t_tr = float(np.ceil((t0 + w) / p.state_log_s - 1e-9) * p.state_log_s)
            if t_tr <= now:
                cands.append((t_tr, "failure"))
    last = _completions(recs, sampled, n_seq)
    running = tel.finished is None or tel.finished > now
    ev = straggler_events(last, p, warmup, now=now if running else None)
    if ev:
        cands.append((ev[0]["t"], "straggler"))
    return min(cands) if cands else None


def failure_window(recs, label: str, p: MycroftParams) -> float | None:
    """The failure trigger's window for an open instance of collective ``label``: ``window_m``
    times its healthy duration (the median, over its completed instances in ``recs``, of last
    exit minus last entry; every collective's when ``label`` has none yet), at least one
    state-log tick. None before any collective has completed (nothing to compare with)."""
    def durs(rs):
        return [float(np.max(r.exit) - np.max(r.enter)) for r in rs
                if np.isfinite(r.exit).all() and np.isfinite(r.enter).all()]

    d = durs([r for r in recs if r.label == label]) or durs(recs)
    if not d:
        return None
    return max(p.window_m * float(np.median(d)), p.state_log_s)


def root_cause_at(tel, t_trig: float, kind: str, p: MycroftParams) -> tuple[float, dict]:
    """Root cause as soon as the logs hold the evidence: :func:`root_cause` on the logs at every
    state-log tick from the trigger on, until it names a culprit or one failure window has passed
    (:func:`failure_window` of the last collective); returns ``(time the verdict is out, verdict)``
    with the time = that tick + :func:`collect_time` of the logs analysed (one failure window
    back from the trigger to that tick; the verdict's ``collect`` entry)."""
    recs = sorted(tel.records(t_trig), key=lambda r: (r.it, r.seq))
    w = failure_window(recs, recs[-1].label, p) if recs else None
    n = int(np.ceil((w or p.state_log_s) / p.state_log_s)) if w else 1
    rc = {"ranks": [], "component": None, "rule": "no data", "flow": None}
    t = t_trig
    for k in range(n + 1):
        t = t_trig + k * p.state_log_s
        rc = root_cause(tel, t, kind, p.lag_frac)
        if rc["ranks"]:
            break
    col = collect_time(tel, t_trig - (w or 0.0), t, p)
    return t + col["total_s"], dict(rc, collect=col)


def collect_time(tel, t0: float, t1: float, p: MycroftParams) -> dict:
    """Time to gather the state logs of ``[t0, t1]`` from every host that wrote some and analyse
    them, from what the telemetry shows (nothing here is a fixed delay):

    - **bytes**: every state-log row in the window, ``COSTS["flow_state_log"]["bytes"]`` each, per
      host of the flow's sender;
    - **transfer**: all hosts send to one analyser, whose link serialises them (incast): total
      bytes over the per-connection rate the job's own completed collectives show (chunk bytes /
      the median chunk service time of the proxy trace, :meth:`conn_latency`), plus one chunk
      service time per host (each host's request and first bytes);
    - **analysis**: ``analyse_us_per_row`` per row read.

    Returns ``{"rows", "hosts", "bytes", "rate_Bps", "transfer_s", "analysis_s", "total_s"}``."""
    from .telemetry import COSTS

    rows = tel.state_log(t0, t1)
    hosts = np.unique(rows.src // max(tel.gpus_per_host, 1)) if rows.size else np.zeros(0, dtype=np.int64)
    nbytes = float(rows.size * COSTS["flow_state_log"]["bytes"])
    svc, chunk = [], []
    for r in tel.records(t0):
        if r.T is None or not np.isfinite(r.exit).all():
            continue
        lat = tel.conn_latency(r, t0)
        lat = lat[np.isfinite(lat) & (lat > 0)]
        if lat.size:
            svc.append(float(np.median(lat)))
            chunk.append(float(tel.conns[r.label][4]))
    if svc:
        s_chunk = float(np.median(svc))
        rate = float(np.median(chunk)) / s_chunk
        transfer = nbytes / rate + hosts.size * s_chunk
    else:  # no healthy collective to measure the network by (nothing logged either, or a job with no trace)
        rate, transfer = float("nan"), 0.0
    analysis = rows.size * p.analyse_us_per_row * 1e-6
    return {"rows": int(rows.size), "hosts": int(hosts.size), "bytes": nbytes, "rate_Bps": rate,
            "transfer_s": float(transfer), "analysis_s": float(analysis), "total_s": float(transfer + analysis)}


# ---- relative straggler rule (shared with C4D's slow-rank rule) -----------------------------------
def robust_score(x: np.ndarray, window: int, min_hist: int, floor: float, cross: bool = False,
                 with_centre: bool = False):
    """How far every row of ``x`` (shape (n,) or (n, k)) lies above its trailing history, in spreads.

    Row ``i`` is compared with rows ``[i - window, i)``: centre = their median (per column), spread
    = 1.4826 x the median absolute deviation from that centre pooled over the window and every
    column (the job's own spread), at least ``floor`` x the median |centre|; with ``cross`` (k
    columns = ranks) also at least 1.4826 x the MAD of row ``i``'s own deviations across the
    columns (a rank must stand out from its peers in that iteration too: a job-wide burst of
    variation is not one slow rank). Returns ``(x[i] - centre) / spread`` of the same shape; NaN
    while fewer than ``min_hist`` rows precede (with ``with_centre``: ``(score, centre, spread)``,
    ``spread`` one per row).
    """
    from numpy.lib.stride_tricks import sliding_window_view

    a = np.asarray(x, dtype=float)
    one = a.ndim == 1
    a2 = a[:, None] if one else a
    n, k = a2.shape
    centre = np.full((n, k), np.nan)
    spread = np.full(n, np.nan)
    if n > window:  # rows i >= window: history rows [i - window, i)
        win = sliding_window_view(a2, window, axis=0)[:n - window]  # (n - window, k, window)
        c = np.median(win, axis=-1)
        centre[window:] = c
        spread[window:] = 1.4826 * np.median(np.abs(win - c[..., None]).reshape(n - window, -1), axis=1)
    m0 = min(window, n)
    if m0 > max(min_hist, 1):  # rows i < window: history rows [0, i) (medians of the first i values)
        pad = np.vstack([np.full((window, k), np.nan), a2[:m0]])
        w0 = sliding_window_view(pad, window, axis=0)[:m0]  # (m0, k, window), NaN-padded on the left
        cnt = np.arange(m0)
        c = _nan_median_sorted(np.sort(w0, axis=-1), cnt[:, None])
        dev = np.sort(np.abs(w0 - c[..., None]).reshape(m0, -1), axis=-1)
        sp = 1.4826 * _nan_median_sorted(dev, cnt * k)
        rows = cnt >= max(min_hist, 1)
        centre[:m0][rows] = c[rows]
        spread[:m0][rows] = sp[rows]
    ok = np.isfinite(spread)
    spread = np.where(ok, np.maximum(spread, floor * np.median(np.abs(np.where(ok[:, None], centre, 0.0)), axis=1)),
                      np.nan)
    if cross and k > 2:
        d = a2 - centre
        now = 1.4826 * np.median(np.abs(d - np.median(d, axis=1, keepdims=True)), axis=1)
        spread = np.where(ok, np.maximum(spread, now), np.nan)
    hist = np.arange(n) >= min_hist
    good = hist & ok & (np.nan_to_num(spread) > 0)
    score = np.where(good[:, None], (a2 - np.nan_to_num(centre)) / np.where(good, spread, 1.0)[:, None], np.nan)
    if with_centre:
        sp = np.where(good, spread, np.nan)
        return (score[:, 0], centre[:, 0], sp) if one else (score, centre, sp)
    return score[:, 0] if one else score


def _nan_median_sorted(srt: np.ndarray, cnt) -> np.ndarray:
    """Median of the first ``cnt`` entries of the last axis of ``srt`` (sorted, NaN after the
    values; ``cnt`` broadcast over the leading axes; NaN where ``cnt`` is 0)."""
    cnt = np.broadcast_to(np.asarray(cnt), srt.shape[:-1])
    lo = np.clip((cnt - 1) // 2, 0, srt.shape[-1] - 1)[..., None]
    hi = np.clip(cnt // 2, 0, srt.shape[-1] - 1)[..., None]
    med = 0.5 * (np.take_along_axis(srt, lo, -1) + np.take_along_axis(srt, hi, -1))[..., 0]
    return np.where(cnt > 0, med, np.nan)


def runs(flag: np.ndarray, persist: int) -> list[tuple[int, int, int]]:
    """Runs of at least ``persist`` consecutive True rows in every column of ``flag`` ((n,) or
    (n, k)): ``(column, first row, row where the run reached persist)``, in row order."""
    f = np.asarray(flag, dtype=bool)
    f = f[:, None] if f.ndim == 1 else f
    out = []
    for c in range(f.shape[1]):
        col = np.concatenate([[False], f[:, c], [False]])
        d = np.diff(col.astype(np.int8))
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        for s0, e0 in zip(starts, ends):
            if e0 - s0 >= persist:
                out.append((c, int(s0), int(s0 + persist - 1)))
    return sorted(out, key=lambda x: (x[2], x[0]))


def _completions(recs, sampled, n_seq) -> np.ndarray:
    """Iteration completion times of the sampled ranks (the earliest of their exits from the
    iteration's last collective), iterations whose sampled ranks all logged their exit."""
    lastc = [r for r in recs if r.seq == n_seq - 1]
    if not lastc:
        return np.zeros(0)
    sel = np.isin(lastc[0].ranks, sampled)
    ex = np.stack([r.exit[sel] for r in lastc])
    done = np.isfinite(ex).all(axis=1)
    return ex[done].min(axis=1) if done.any() else np.zeros(0)


def completion_times(tel, sampled: np.ndarray, now: float, recs=None) -> np.ndarray:
    """Iteration completion times of the sampled ranks in the completion logs as known at ``now``."""
    if recs is None:
        recs = sorted(tel.records(now), key=lambda r: (r.it, r.seq))
    return _completions(recs, sampled, len(tel.conns))


def straggler_events(ends: np.ndarray, p: MycroftParams, warmup: int = 2, now: float | None = None) -> list[dict]:
    """Straggler triggers from iteration completion times ``ends`` (module docstring): every run of
    ``straggler_persist`` slow gaps is one trigger ``{"it", "t", "score", "last"}`` (``it``: index of
    the gap that completed the run; ``t``: when that gap crossed its threshold; ``last``: the run's
    last slow gap so far). With ``now`` (the job
    still running), the open gap counts too once it exceeds its threshold."""
    last = np.concatenate([[0.0], np.asarray(ends, dtype=float)])
    gaps = np.diff(last)
    if now is not None and last.size:
        gaps = np.append(gaps, max(now - last[-1], 0.0))
    if gaps.size <= warmup:
        return []
    score = robust_score(gaps, p.straggler_window, warmup, p.straggler_floor)
    with np.errstate(invalid="ignore"):
        slow = score > p.straggler_m
    out = []
    for _c, _s0, i in runs(slow, p.straggler_persist):
        end = int(i)
        while end + 1 < slow.size and slow[end + 1]:
            end += 1
        out.append({"it": int(i), "t": float(last[i] + _threshold(gaps, i, p)), "score": float(score[i]),
                    "last": end})
    return out


def _threshold(gaps: np.ndarray, i: int, p: MycroftParams) -> float:
    """The gap length above which gap ``i`` is slow (centre + m x spread of :func:`robust_score`)."""
    h = gaps[max(0, i - p.straggler_window):i]
    c = float(np.median(h))
    return c + p.straggler_m * max(1.4826 * float(np.median(np.abs(h - c))), p.straggler_floor * abs(c))


def late_ranks(comp: np.ndarray, i: int, p: MycroftParams, warmup: int = 2) -> list[int]:
    """Mycroft's "late to post" on a compute-phase matrix ``comp`` (iterations x ranks, from the
    completion logs), relative to the job's own history: at iteration ``i``, the ranks whose
    compute phase (relative to the iteration's median rank) exceeds its own trailing median by
    more than ``straggler_m`` spreads (:func:`robust_score` with ``cross``: the rank stands out
    from its peers too) and by more than ``lag_frac`` of the largest such excess (positions in
    the rank axis; empty: the trigger has no culprit, e.g. a job-wide slow-down)."""
    lo = max(0, i - p.straggler_window)
    rel = comp[lo:i + 1] / np.median(comp[lo:i + 1], axis=1, keepdims=True)
    if rel.shape[0] <= warmup:
        return []
    h, x = rel[:-1], rel[-1]
    centre = np.median(h, axis=0)
    spread = max(1.4826 * float(np.median(np.abs(h - centre))), p.straggler_floor * float(np.median(np.abs(centre))))
    ex = x - centre
    if x.size > 2:
        spread = max(spread, 1.4826 * float(np.median(np.abs(ex - np.median(ex)))))
    if not spread > 0 or not ex.max() > 0:
        return []
    return np.flatnonzero((ex / spread > p.straggler_m) & (ex > p.lag_frac * ex.max())).tolist()


def run_late_ranks(comp: np.ndarray, i: int, p: MycroftParams, warmup: int = 2) -> list[int]:
    """Root cause of a straggler trigger on a compute-phase matrix: the ranks :func:`late_ranks`
    names in *every* one of the ``straggler_persist`` slow iterations whose run made the trigger
    (rows ``i - straggler_persist + 1 .. i``). The trigger fires on a run of slow iterations, so
    its culprit must be late across that run: a rank late in one iteration of it while another
    rank made the other slow is not the cause of the slow-down (two unrelated one-iteration
    hiccups, e.g. two different workers each at 2-3x their peers once, make a run of slow
    completion gaps but no slow rank). Empty: the trigger has no culprit."""
    rows = range(max(0, i - p.straggler_persist + 1), i + 1)
    common: set | None = None
    for k in rows:
        late = set(late_ranks(comp, k, p, warmup))
        common = late if common is None else common & late
        if not common:
            return []
    return sorted(common or ())


def _host_or_gpu(tel, ranks) -> str:
    ranks = np.asarray(ranks)
    gph = tel.gpus_per_host
    if gph == 1 or ranks.size == 0:
        return "gpu"
    job = tel.ranks
    for h in np.unique(ranks // gph):
        mine = job[job // gph == h]
        if not np.isin(mine, ranks).all():
            return "gpu"
    return "host"


def root_cause(tel, t: float, kind: str = "failure", lag_frac: float = 0.5) -> dict:
    """Mycroft's dependency analysis on the logs stamped up to ``t`` (module docstring).

    Returns ``{"ranks", "component", "rule", "flow"}``; ``flow`` is ``(src, dst)`` of the flow
    named by a counter rule.
    """
    recs = sorted(tel.records(t), key=lambda r: (r.it, r.seq))
    if not recs:
        return {"ranks": [], "component": None, "rule": "no data", "flow": None}
    now_rows = tel.state_at(t)
    r = recs[-1]
    open_ = not np.isfinite(r.exit).all()
    if open_ and kind == "straggler":  # the collective in flight is not the evidence: the last slow ones are
        done = [x for x in recs if np.isfinite(x.exit).all()]
        if not done:
            return {"ranks": [], "component": None, "rule": "no data", "flow": None}
        r, open_ = done[-1], False
    if open_:
        inst = r.idx
        # 1. intra-node: a rank that entered the open instance and stopped logging (process gone)
        entered = r.ranks[np.isfinite(r.enter) & ~np.isfinite(r.exit)]
        rows = now_rows.select(now_rows.inst == inst)
        logging = np.unique(rows.src)
        silent = entered[~np.isin(entered, logging)] if rows.size else np.zeros(0, dtype=np.int64)
        if 0 < silent.size < entered.size:
            return {"ranks": silent.tolist(), "component": "gpu", "rule": "state log silent", "flow": None}
        # 2. compute vs communication: ranks that never posted the open collective
        missing = r.ranks[~np.isfinite(r.enter)]
        if 0 < missing.size < r.ranks.size:
            return {"ranks": missing.tolist(), "component": _host_or_gpu(tel, missing), "rule": "not posted",
                    "flow": None}
        if rows.size:
            rc = _counter_rules(tel, rows, stalled=True)
            if rc is not None:
                return rc
        return {"ranks": [], "component": None, "rule": "open collective, no counter evidence", "flow": None}
    # straggler: every instance completes, but slowly
    first = [x for x in recs if x.it == r.it and x.seq == 0][0]
    it_start = np.zeros(first.enter.size)
    prev = [x for x in recs if x.it == r.it - 1 and x.seq == len(tel.conns) - 1]
    if prev:
        it_start = prev[0].exit
    comp = first.enter - it_start
    lag = comp - np.median(comp)
    if np.isfinite(lag).all() and lag.max() > 0.1 * max(float(np.median(comp)), 1e-9):
        late = first.ranks[lag > lag_frac * lag.max()]
        return {"ranks": late.tolist(), "component": _host_or_gpu(tel, late), "rule": "late to post", "flow": None}
    # the flows of the last slow instance, over its state-log ticks
    inst = r.idx
    hist = tel.state_log(-np.inf, t)
    rows = hist.select(hist.inst == inst)
    if rows.size:
        rc = _counter_rules(tel, rows, stalled=False)
        if rc is not None:
            return rc
    return {"ranks": [], "component": None, "rule": "no evidence", "flow": None}


def _counter_rules(tel, rows, stalled: bool) -> dict | None:
    """G/T/D rules with the dependency walk along the ring (module docstring).

    For every flow, ``G - T`` (made ready, not posted) and ``T - D`` (posted, not done) are
    averaged over the rows given (one tick when stalled, every tick of a slow instance). A flow
    with ``T - D`` near the window is network-bound; a flow with ``G - T`` high is waiting for
    its proxy or for credits from its receiver: walking downstream, the flow whose receiver's
    outgoing flow is *not* blocked is where the proxy itself lags (host). A stalled rank that
    received more than it made ready (``D`` in > ``G`` out) stopped producing (gpu).
    """
    key = rows.conn
    conns = np.unique(key)
    src = np.array([rows.src[key == c][0] for c in conns])
    dst = np.array([rows.dst[key == c][0] for c in conns])
    gt = np.array([np.mean((rows.G - rows.T)[key == c]) for c in conns])
    td = np.array([np.mean((rows.T - rows.D)[key == c]) for c in conns])
    G = np.array([rows.G[key == c][-1] for c in conns])
    D = np.array([rows.D[key == c][-1] for c in conns])
    W = tel.window
    if stalled:
        stuck = td >= 1
        if stuck.any():  # posted, never done: the network between sender and receiver
            ends = np.concatenate([src[stuck], dst[stuck]])
            cnt = np.bincount(ends, minlength=tel.n_gpus)
            i = int(np.argmax(np.where(stuck, td, -np.inf)))
            return {"ranks": np.flatnonzero(cnt == cnt.max()).tolist(), "component": "network", "rule": "T > D",
                    "flow": (int(src[i]), int(dst[i]))}
        for rk in np.unique(src):
            d_in = D[dst == rk].max(initial=-1)
            out = src == rk
            g_out = G[out].min(initial=np.iinfo(np.int64).max)
            free = (G[out] - D[out] < W).all()  # slots free, data there, nothing made ready: the GPU stopped
            if d_in > g_out and free:
                return {"ranks": [int(rk)], "component": "gpu", "rule": "D_in > G_out", "flow": None}
    hi = max(float(np.max(td)), float(np.max(gt)), 0.0)
    if hi <= 0:
        return None
    net = td >= 0.5 * hi
    if net.any() and float(np.max(td)) >= float(np.max(gt)) * 0.5:
        i = int(np.argmax(np.where(net, td, -np.inf)))
        ends = np.concatenate([src[net], dst[net]])
        cnt = np.bincount(ends, minlength=tel.n_gpus)
        return {"ranks": np.flatnonzero(cnt == cnt.max()).tolist(), "component": "network", "rule": "T > D",
                "flow": (int(src[i]), int(dst[i]))}
    blocked = gt >= 0.5 * hi
    for i in np.flatnonzero(blocked):
        nxt = np.flatnonzero(src == dst[i])
        if nxt.size == 0 or not blocked[nxt].any():
            return {"ranks": [int(src[i])], "component": "host", "rule": "G > T (own proxy)",
                    "flow": (int(src[i]), int(dst[i]))}
    return None


def _correct(rc: dict, fault, topo, paths: dict) -> tuple[bool, bool]:
    """(culprit right, component right); ground truth used here only. A network verdict is
    right in place when the flow it names crosses the faulty link, switch or NIC (``paths``:
    the job's connection paths, from the simulator)."""
    from .sim import agg_switch_links, nic_port_links

    comp = rc.get("component") == COMPONENT[fault.kind]
    flow = rc.get("flow")
    links: set = set()
    if fault.kind == FaultKind.LINK_LOSSY:
        links = {int(fault.target)}
    elif fault.kind == FaultKind.SWITCH_FAIL:
        links = set(agg_switch_links(topo, fault.target).tolist())
    elif fault.kind in (FaultKind.NIC_DOWN, FaultKind.NIC_FLAP):
        links = set(nic_port_links(topo, fault.target).tolist())
    if fault.kind == FaultKind.CPU_OVERLOAD:
        rank = any(r // topo.gpus_per_host == fault.target for r in rc["ranks"])
    elif links:
        rank = fault.kind in (FaultKind.NIC_DOWN, FaultKind.NIC_FLAP) and fault.target in rc["ranks"]
        if flow is not None:
            for src, dst, pth in paths.values():
                sel = (src == flow[0]) & (dst == flow[1])
                if np.isin(pth[sel], list(links)).any():
                    rank = True
    else:
        rank = fault.target in rc["ranks"]
    return bool(rank), bool(comp)


def run_study(quick: bool = False, seed: int = 0, params: MycroftParams | None = None, noise=None,
              n_trials: int | None = None) -> dict:
    """Inject one fault per trial on the study job (:mod:`~models.systems.reliability.study`); Mycroft's
    trigger and root-cause analysis read only the telemetry. Kinds cycle over the eight Mycroft can
    see (NaN excluded), onset in iteration 3; root cause runs on the logs from the trigger on, and
    its verdict is out when they have been gathered and analysed (:func:`collect_time`).
    ``noise``: background events (:class:`~models.systems.reliability.noise.NoiseParams`) in every
    trial."""
    from .faults import KINDS
    from .study import confusion, draw_fault, run_trial, setup, symptom

    p = params or MycroftParams()
    n_trials = n_trials or (24 if quick else 96)
    st = setup(seed, iterations=60)
    sampled = sample_ranks(st.place, p.max_sampled, seed)
    rng = np.random.default_rng(seed)
    kinds = [k for k in KINDS if COMPONENT[k] is not None]
    trials = []
    for i in range(n_trials):
        kind = kinds[i % len(kinds)]
        f, _ = draw_fault(rng, kind, st, 2)
        horizon = f.t + 40.0
        sim = run_trial(st, f, horizon, seed, noise=noise, noise_seed=seed * 100003 + i)
        tel = sim.tel
        tr = trigger(tel, p, sampled, horizon)
        row = {"trial": i, "kind": kind, "target": f.target, "severity": f.severity, "onset": f.t,
               "symptom": symptom(sim, st, horizon)}
        if tr is not None:
            t_trig, typ = tr
            t_rc, rc = root_cause_at(tel, t_trig, typ, p)
            paths = {c.label: (c.src, c.dst, c.paths[0]) for c in sim.colls}
            rank_ok, comp_ok = _correct(rc, f, st.topo, paths)
            row.update(trigger=typ, detect_s=max(t_trig - f.t, 0.0), rc=rc, rank_ok=rank_ok, comp_ok=comp_ok,
                       rca_s=max(t_rc - f.t, 0.0) if (rank_ok and comp_ok) else None)
        # the trigger under other window multiples, on the same telemetry (sensitivity)
        row["detect_s_by_window_m"] = {}
        for wm in WINDOW_M_SWEEP:
            tw = trigger(tel, replace(p, window_m=wm), sampled, horizon)
            row["detect_s_by_window_m"][str(wm)] = None if tw is None else max(tw[0] - f.t, 0.0)
        trials.append(row)
    n = len(trials)
    det = [t for t in trials if "detect_s" in t]
    per_kind = {}
    for k in kinds:
        ts = [t for t in trials if t["kind"] == k]
        per_kind[k] = {"n": len(ts), "symptomatic": sum(1 for t in ts if t["symptom"]),
                       "detect_15s": sum(1 for t in ts if t.get("detect_s", np.inf) <= 15.0) / max(len(ts), 1),
                       "rca_20s": sum(1 for t in ts if (t.get("rca_s") or np.inf) <= 20.0) / max(len(ts), 1),
                       "component_right": sum(1 for t in ts if t.get("comp_ok")) / max(len(ts), 1)}
    sym = [t for t in trials if t["symptom"]]
    from .telemetry import COSTS

    c = COSTS["flow_state_log"]
    flows = int(sum(len(v[0]) for v in sim.tel.conns.values()))
    cost = {"flows": flows, "bytes_per_s": flows * c["bytes"] / c["period_s"],
            "cpu_us_per_s": flows * c["cpu_us"] / c["period_s"]}
    cm = confusion([(t["kind"], (t.get("rc") or {}).get("component")) for t in trials], kinds,
                   ["gpu", "host", "network", "none"])
    return {"params": p.__dict__, "iter_s": st.it_s, "comm_s": st.comm_s, "sampled_ranks": sampled.tolist(),
            "trials": trials, "per_kind": per_kind, "symptomatic": len(sym), "telemetry_cost": cost,
            "confusion": cm,
            "frac_detect_15s_symptomatic": sum(1 for t in sym if t.get("detect_s", np.inf) <= 15.0) / max(len(sym), 1),
            "frac_rca_20s_symptomatic": sum(1 for t in sym if (t.get("rca_s") or np.inf) <= 20.0) / max(len(sym), 1),
            "frac_detect_15s": sum(1 for t in det if t["detect_s"] <= 15.0) / n,
            "frac_rca_20s": sum(1 for t in trials if (t.get("rca_s") or np.inf) <= 20.0) / n,
            "rank_accuracy": sum(1 for t in trials if t.get("rank_ok")) / n,
            "precision": sum(1 for t in det if t.get("rank_ok")) / len(det) if det else float("nan"),
            "noise": None if noise is None else noise.__dict__,
            "component_accuracy": sum(1 for t in trials if t.get("comp_ok")) / n,
            "detect_median_s": float(np.median([t["detect_s"] for t in det])) if det else float("nan"),
            "rca_median_s": float(np.median([t["rca_s"] for t in trials if t.get("rca_s") is not None]))
            if any(t.get("rca_s") is not None for t in trials) else float("nan"),
            "detect_s": _quantiles([t["detect_s"] for t in det]),
            "rca_s": _quantiles([t["rca_s"] for t in trials if t.get("rca_s") is not None]),
            "collect_s": _quantiles([t["rc"]["collect"]["total_s"] for t in det if "collect" in t["rc"]]),
            "collect_rows": _quantiles([t["rc"]["collect"]["rows"] for t in det if "collect" in t["rc"]]),
            "sensitivity_window_m": {str(wm): sum(1 for t in trials if (t["detect_s_by_window_m"][str(wm)] is not None
                                                                       and t["detect_s_by_window_m"][str(wm)] <= 15.0))
                                     / n for wm in WINDOW_M_SWEEP},
            "paper": {"detect_15s": 0.9, "rca_20s": 0.6}}


def _quantiles(v) -> dict:
    """p10 / p50 / p90 / max of a sample (None when empty)."""
    if not v:
        return {"n": 0, "p10": None, "p50": None, "p90": None, "max": None}
    a = np.asarray(v, dtype=float)
    return {"n": int(a.size), "p10": float(np.percentile(a, 10)), "p50": float(np.median(a)),
            "p90": float(np.percentile(a, 90)), "max": float(a.max())}

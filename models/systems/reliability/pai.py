"""Stragglers on real traces: Mycroft's and C4D's slow-rank rules replayed on Alibaba PAI jobs.

Data (read from the data directory, :func:`hwcosim.models.data.dataset`, never copied here):
``alibaba-pai-2020`` from alibaba/clusterdata, cluster-trace-gpu-v2020 (CC BY 4.0). Cite Weng et
al., "MLaaS in the Wild", NSDI 2022, and for the mini-batch data Xiao et al., "AntMan", OSDI 2020.

- ``job_1_norm.csv`` .. ``job_4_norm.csv``: per-worker mini-batch time (normalised 0-1000) of four
  real 10-worker training jobs, logged every 10th iteration (the ``time`` column). Upstream labels
  (:data:`LABELS`): job 1 - a straggler, worker 6, emerges mid-training; job 2 - stable, workers
  differ; job 3 - several stragglers; job 4 - several stragglers, fluctuating.
- ``coefficient_variation.csv``: per-iteration coefficient of variation of the workers' times of
  100 real 10-worker jobs (healthy variation: must not page).

**What is replayed and what is modelled.** The modelled job is a DP = 10 ring all-reduce job
(:func:`modelled_job`: one rank per trace worker, so no mapping is needed), ``grad_bytes`` = 1 GB
on a 10-host Clos with 100 Gb/s NICs. Worker ``w``'s compute phase in replayed iteration ``i`` is
``compute_s * v[i, w] / median(v)`` (``v``: the trace's normalised value, ``median`` over the whole
job; ``compute_s`` = 0.5 s by default: **the scale**). Each logged trace row is one replayed
iteration (the trace logs every 10th iteration; detection delays are given in both units).

- :func:`replay_transport` runs the modelled job on the chunk-level transport
  (:class:`~models.systems.cluster.transport.TransportSim`) with each rank's compute phase taken
  from the trace; the detectors read the telemetry it writes.
- :func:`replay_logs` writes the completion logs the telemetry would hold without running the
  transport (fast; used for the 100 healthy jobs and for the sweeps): every rank enters the
  all-reduce when its compute ends and all leave ``comm_s`` after the last one joined, where
  ``comm_s`` is the all-reduce duration measured once on the transport for the modelled job.
  :func:`run_pai_study` checks that both give the same verdicts on job 1.

Both write a :class:`~models.systems.cluster.telemetry.Telemetry`; the detectors
(:func:`~models.systems.reliability.c4d.slow_rank_events`,
:func:`~models.systems.reliability.mycroft.straggler_events` with
:func:`~models.systems.reliability.mycroft.late_ranks`) read only that, never the trace or labels.

**Where a straggler departs** (the reference the detection delay is measured from, from the data
and not from a detector): :func:`departure` fits one segment of different mean (least squares,
two change points) to a worker's time relative to the iteration's median worker; a worker
"departs" when that segment is slower than the rest of its series by at least ``DEPART_SHIFT``
(10%) of the median (ours). Workers slower than the median by that much over the whole trace
are "slow throughout" (static heterogeneity: no healthy baseline to depart from).

**Healthy variation.** The CV file gives one number per iteration, not which worker was slow.
Worker times are reconstructed as ``1 + cv * z`` with ``z`` drawn independently per worker and
iteration and standardised per iteration (mean 0, population std 1, so the row's CV is met
exactly): ``normal`` (z Gaussian) and ``lognormal`` (z a standardised lognormal of the same CV:
right-skewed, stragglers more likely). Values are clipped at 0.05 (counted). Independence across
iterations is an assumption (the file cannot tell); it is the least persistent case. An alarm on
these jobs is **forced** when the reconstructed data holds a slow worker (:func:`forced_by`: an
iteration of CV >= 1 just before it, or a named worker at >= 2x the iteration's median worker in
every iteration of the run that raised it); every other alarm is a false page and is listed.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["DATASET", "LABELS", "PaiJob", "load_job", "load_cv", "modelled_job", "replay_logs", "replay_transport",
           "departure", "detect", "healthy_times", "run_pai_study", "pai_png"]

DATASET = "alibaba-pai-2020"

#: Upstream observations (UPSTREAM-README-mini-batch-time.md of the dataset).
LABELS = {1: {"stragglers": [6], "note": "a straggler (worker 6) emerges in the middle of training"},
          2: {"stragglers": [], "note": "stable variation; different workers have different mini-batch times"},
          3: {"stragglers": None, "note": "there could be multiple stragglers"},
          4: {"stragglers": None, "note": "multiple stragglers; the mini-batch time may fluctuate"}}

#: A departure / slow-throughout worker is at least this much slower (fraction of the median) (ours).
DEPART_SHIFT = 0.10


@dataclass
class PaiJob:
    """One PAI job: ``v[i, w]`` normalised mini-batch time of worker ``workers[w]`` at trace
    iteration ``iters[i]``; rows with a worker missing are dropped (``dropped``)."""

    job: int
    iters: np.ndarray
    workers: np.ndarray
    v: np.ndarray
    dropped: int


def _folder(data_dir=None) -> Path:
    from hwcosim.models.data import DatasetMissing, dataset

    if data_dir is None:
        return dataset(DATASET)
    p = Path(data_dir) / DATASET
    if not p.is_dir():
        raise DatasetMissing(f"dataset {DATASET!r} not found (no {DATASET}/ in {data_dir}): Alibaba PAI per-worker "
                             "mini-batch times, from https://github.com/alibaba/clusterdata; put it in DIR/"
                             f"{DATASET}/ and pass DIR")
    return p


def load_job(job: int, data_dir=None) -> PaiJob:
    """Job ``job`` (1-4) of the dataset as a :class:`PaiJob`."""
    if job not in LABELS:
        raise UsageError(f"PAI job must be one of 1, 2, 3, 4, not {job!r}")
    path = _folder(data_dir) / f"job_{job}_norm.csv"
    a = np.genfromtxt(path, delimiter=",", skip_header=1)
    if a.ndim != 2 or a.shape[1] < 5:
        raise UsageError(f"{path}: expected columns ',worker,gpu,time,batch_time_norm'")
    w, t, v = a[:, 1].astype(np.int64), a[:, 3].astype(np.int64), a[:, 4]
    ws, ts = np.unique(w), np.unique(t)
    m = np.full((ts.size, ws.size), np.nan)
    m[np.searchsorted(ts, t), np.searchsorted(ws, w)] = v
    ok = np.isfinite(m).all(axis=1)
    return PaiJob(job, ts[ok], ws, m[ok], int((~ok).sum()))


def load_cv(data_dir=None) -> dict:
    """``{job name: per-iteration CV array}`` of ``coefficient_variation.csv`` (trailing blanks cut)."""
    out = {}
    with open(_folder(data_dir) / "coefficient_variation.csv", newline="") as fh:
        rows = csv.reader(fh)
        next(rows)
        for row in rows:
            vals = np.array([float(x) if x else np.nan for x in row[1:]])
            out[row[0]] = vals[np.isfinite(vals)]
    return out


# ---- the modelled job and the two replays -------------------------------------------------------------
def modelled_job(n: int = 10, compute_s: float = 0.5, iterations: int = 10):
    """``(topo, spec, place)``: DP = ``n`` ring all-reduce of 1 GB on ``n`` hosts of one GPU (ours)."""
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import clos

    if n % 2:
        raise UsageError(f"the modelled job needs an even number of ranks, not {n}")
    topo = clos(1, 2, n // 2, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    spec = JobSpec("pai", dp=n, compute_s=compute_s, grad_bytes=1e9, iterations=iterations, alpha_s=0.0)
    return topo, spec, placement(spec, np.arange(n))


def _scaled(v: np.ndarray, compute_s: float) -> np.ndarray:
    if not compute_s > 0:
        raise UsageError(f"compute_s must be > 0, not {compute_s!r}")
    return compute_s * v / float(np.median(v))


def replay_transport(v: np.ndarray, compute_s: float = 0.5, seed: int = 0):
    """Run the modelled job on the transport with rank ``w``'s compute phase of iteration ``i``
    taken from ``v[i, w]`` (scaled, module docstring). Returns the simulator (``.tel``)."""
    from hwcosim.models.systems.cluster.routing import ECMPRouter
    from hwcosim.models.systems.cluster.transport import TransportSim

    c = _scaled(np.asarray(v, dtype=float), compute_s)
    topo, spec, place = modelled_job(c.shape[1], compute_s, c.shape[0])

    class _TraceSim(TransportSim):
        """Compute phases from the trace (the only change; no effects, no faults)."""

        _k = 0

        def _compute(self, start, ranks):
            end = start + c[self._k, ranks]
            self._k += 1
            return end

    sim = _TraceSim(topo, spec, place, seed=seed, router=ECMPRouter(topo, seed), record=False)
    return sim.run()


_COMM: dict = {}


def comm_time(n: int = 10) -> float:
    """Duration of the modelled job's all-reduce once every rank joined, measured on the transport."""
    if n not in _COMM:
        sim = replay_transport(np.ones((3, n)), 0.5)
        r = sim.tel.records(np.inf)[-1]
        _COMM[n] = float(np.max(r.exit) - np.max(r.enter))
    return _COMM[n]


def replay_logs(v: np.ndarray, compute_s: float = 0.5, comm_s: float | None = None):
    """The completion logs of the replay, without the transport (module docstring): a
    :class:`~models.systems.cluster.telemetry.Telemetry` holding, per iteration, every rank's entry
    (its compute end) into and exit from the all-reduce."""
    from hwcosim.models.systems.cluster.telemetry import CollLog, Telemetry

    c = _scaled(np.asarray(v, dtype=float), compute_s)
    n_it, n = c.shape
    comm = comm_time(n) if comm_s is None else float(comm_s)
    ranks = np.arange(n)
    src = ranks
    tel = Telemetry(n_gpus=n, gpus_per_host=1, place=ranks.reshape(1, n, 1), state_log_s=0.1,
                    conns={"dp": (src, np.roll(src, -1), np.zeros(n, dtype=np.int64), 1, 1.0)})
    # what Telemetry.log_collective records for a job whose processes all live (no per-chunk trace)
    enter = np.cumsum(np.concatenate([[0.0], c.max(axis=1)[:-1] + comm]))[:, None] + c
    exit_ = enter.max(axis=1) + comm
    for i in range(n_it):
        tel.colls.append(CollLog(i, 0, "dp", ranks, enter[i], np.full(n, exit_[i]), idx=i))
    tel.losses = [(i, float(exit_[i]), False) for i in range(n_it)]
    tel.finished = float(exit_[-1]) if n_it else 0.0
    return tel


# ---- detectors on a telemetry ------------------------------------------------------------------------
def detect(tel, c4d_params=None, mycroft_params=None) -> dict:
    """Both detectors' slow-rank verdicts on telemetry ``tel`` (nothing else is read):
    ``{"c4d": [{"rank", "it", "start_it", ...}], "mycroft": [{"it", "start_it", "trigger_it", "t", "score",
    "ranks"}]}``,
    iteration indices of the replay. A Mycroft trigger (at ``trigger_it``) names as ``ranks`` the
    ranks late in every one of the last ``straggler_persist`` iterations of its slow run
    (:func:`~models.systems.reliability.mycroft.run_late_ranks`), at the first iteration ``it`` of
    the run at which some rank is (``start_it``: the first of those iterations); empty when none
    is while the run lasts."""
    from . import c4d, mycroft

    pc = c4d_params or c4d.C4DParams()
    pm = mycroft_params or mycroft.MycroftParams()
    now = tel.finished if tel.finished is not None else np.inf
    recs = sorted(tel.records(now), key=lambda r: (r.it, r.seq))
    phases = c4d.compute_phases(tel, now, recs)
    ev_c = c4d.slow_rank_events(tel, pc, now, phases=phases)
    sampled = mycroft.sample_ranks(tel.place, pm.max_sampled, 0)
    ends = mycroft.completion_times(tel, sampled, now, recs)
    its, ranks, comp, _ = phases
    pos = {it: k for k, it in enumerate(its)}
    ev_m = []
    for e in mycroft.straggler_events(ends, pm, now=None if tel.finished is not None else now):
        # the root cause runs on the trigger's run and, while the run lasts, on each further slow
        # iteration (its last straggler_persist iterations) until it names a rank late in all of them
        it, late = e["it"], []
        for g in range(e["it"], e["last"] + 1):
            k = pos.get(g)
            late = [] if k is None else [int(ranks[j]) for j in mycroft.run_late_ranks(comp, k, pm)]
            it = g
            if late:
                break
        k = pos.get(it)
        start = it if k is None else int(its[max(0, k - pm.straggler_persist + 1)])
        ev_m.append({"it": it, "start_it": start, "trigger_it": e["it"], "t": e["t"],
                     "score": e["score"], "ranks": late})
    return {"c4d": ev_c, "mycroft": ev_m}


def _first_flags(ev: dict) -> dict:
    """``{detector: {rank: first iteration flagged}}`` from :func:`detect`'s events."""
    out = {"c4d": {}, "mycroft": {}}
    for e in ev["c4d"]:
        out["c4d"].setdefault(e["rank"], e["it"])
    for e in ev["mycroft"]:
        for r in e["ranks"]:
            out["mycroft"].setdefault(r, e["it"])
    return out


def _flag_iters(ev: dict) -> dict:
    """``{detector: {rank: [iterations flagged]}}``."""
    out = {"c4d": {}, "mycroft": {}}
    for e in ev["c4d"]:
        out["c4d"].setdefault(e["rank"], []).append(e["it"])
    for e in ev["mycroft"]:
        for r in e["ranks"]:
            out["mycroft"].setdefault(r, []).append(e["it"])
    return out


# ---- reference: where a worker departs -----------------------------------------------------------------
def departure(x: np.ndarray, min_len: int = 5) -> tuple[int, int, float]:
    """The segment ``[a, b)`` of ``x`` slower than the rest with the largest least-squares gain
    ``n_in * n_out / n * (mean_in - mean_out)^2``, at least ``min_len`` long and preceded by at
    least ``min_len`` rows (a healthy history to depart from), and ``mean_in - mean_out``."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n > 600:  # search on block means, then refine both ends within a block at full resolution
        blk = int(np.ceil(n / 300))
        nb = n // blk
        a0, b0, _ = departure(x[:nb * blk].reshape(nb, blk).mean(axis=1), max(1, int(np.ceil(min_len / blk))))
        best = (-np.inf, 0, 0, 0.0)
        tot, cs = float(x.sum()), np.concatenate([[0.0], np.cumsum(x)])
        for a in range(max(min_len, (a0 - 1) * blk), min(n, (a0 + 1) * blk + 1)):
            bs = np.arange(max(a + min_len, (b0 - 1) * blk), min(n, (b0 + 1) * blk) + 1)
            if not bs.size:
                continue
            n_in = (bs - a).astype(float)
            ok = n - n_in >= min_len
            m_in = (cs[bs] - cs[a]) / n_in
            m_out = (tot - (cs[bs] - cs[a])) / np.maximum(n - n_in, 1)
            g = np.where(ok & (m_in > m_out), n_in * (n - n_in) / n * (m_in - m_out) ** 2, -np.inf)
            k = int(np.argmax(g))
            if g[k] > best[0]:
                best = (float(g[k]), a, int(bs[k]), float(m_in[k] - m_out[k]))
        if np.isfinite(best[0]):
            return best[1], best[2], best[3]
    cs = np.concatenate([[0.0], np.cumsum(x)])
    tot = cs[-1]
    a = np.arange(n + 1)[:, None]
    b = np.arange(n + 1)[None, :]
    n_in = (b - a).astype(float)
    valid = (n_in >= min_len) & (n - n_in >= min_len) & (a >= min_len)
    s_in = cs[None, :] - cs[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        m_in = s_in / n_in
        m_out = (tot - s_in) / (n - n_in)
        gain = np.where(valid & (m_in > m_out), n_in * (n - n_in) / n * (m_in - m_out) ** 2, -np.inf)
    i, j = np.unravel_index(int(np.argmax(gain)), gain.shape)
    return int(i), int(j), float(m_in[i, j] - m_out[i, j])


def reference(job: PaiJob) -> dict:
    """Per worker: the departure segment of its relative time, whether it departs (slower by at
    least :data:`DEPART_SHIFT`) and whether it is slow throughout."""
    rel = job.v / np.median(job.v, axis=1, keepdims=True)
    out = {}
    for k, w in enumerate(job.workers.tolist()):
        a, b, shift = departure(rel[:, k])
        last = int(job.iters[min(b, len(job.iters) - 1)])
        out[int(w)] = {"segment": [a, b], "segment_iters": [int(job.iters[a]), last],
                       "shift": shift, "departs": bool(shift >= DEPART_SHIFT),
                       "median_rel": float(np.median(rel[:, k])),
                       "slow_throughout": bool(np.median(rel[:, k]) >= 1 + DEPART_SHIFT)}
    return out


# ---- healthy variation --------------------------------------------------------------------------------
def healthy_times(cv: np.ndarray, n: int = 10, gen: str = "normal", seed: int = 0) -> tuple[np.ndarray, int]:
    """Worker times (iterations x ``n``) whose per-iteration CV is ``cv`` (module docstring);
    returns them and how many values were clipped at 0.05."""
    rng = np.random.default_rng(seed)
    cv = np.asarray(cv, dtype=float)
    if gen == "normal":
        z = rng.standard_normal((cv.size, n))
    elif gen == "lognormal":
        sig = np.sqrt(np.log1p(np.maximum(cv, 1e-6) ** 2))[:, None]
        z = np.exp(sig * rng.standard_normal((cv.size, n)))
    else:
        raise UsageError(f"gen must be 'normal' or 'lognormal', not {gen!r}")
    z = (z - z.mean(axis=1, keepdims=True)) / np.maximum(z.std(axis=1, keepdims=True), 1e-12)
    x = 1.0 + cv[:, None] * z
    clipped = int((x < 0.05).sum())
    return np.maximum(x, 0.05), clipped


def _count_runs(score: np.ndarray, m: float, r: int) -> int:
    from .mycroft import runs

    with np.errstate(invalid="ignore"):
        return len(runs(score > m, r))


def _scores(tel, window: int, pc, pm):
    """The two rules' score series on ``tel`` (the detectors' own helpers), for sweeps of m and r."""
    from . import c4d, mycroft

    now = tel.finished
    its, ranks, comp, _ = c4d.compute_phases(tel, now)
    rel = comp / np.median(comp, axis=1, keepdims=True)
    sc = mycroft.robust_score(rel, window, pc.warmup, pc.slow_floor, cross=True)
    ends = mycroft.completion_times(tel, mycroft.sample_ranks(tel.place, pm.max_sampled, 0), now)
    gaps = np.diff(np.concatenate([[0.0], ends]))
    sm = mycroft.robust_score(gaps, window, 2, pm.straggler_floor)
    return sc, sm


def _band(vals) -> dict:
    v = np.asarray([x for x in vals if x is not None and np.isfinite(x)], dtype=float)
    if not v.size:
        return {"n": 0}
    return {"n": int(v.size), "min": float(v.min()), "p10": float(np.percentile(v, 10)),
            "median": float(np.median(v)), "p90": float(np.percentile(v, 90)), "max": float(v.max())}


# ---- the study ----------------------------------------------------------------------------------------
#: An alarm this many iterations after an iteration of CV >= FORCED_CV is "forced" (false_alarms note).
FORCED_ROWS, FORCED_CV = 3, 1.0
#: An alarm naming a worker at least this many times the iteration's median worker in every
#: iteration of the run that raised it is "forced" too: a worker twice as slow as its peers in
#: consecutive iterations is in the reconstructed data (the 2x of Mycroft's straggler trigger,
#: throughput halved, applied to the worker's own time; :func:`forced_by`).
FORCED_SLOW = 2.0
#: The unforced count is also reported at these values of FORCED_SLOW (how the split moves with it).
FORCED_SLOW_BAND = (1.5, 2.0, 3.0, 4.0, 6.0)


def forced_by(x: np.ndarray, cv: np.ndarray, it: int, start_it: int, ranks) -> str | None:
    """Why an alarm on a reconstructed healthy job is forced by the data, from the data only
    (``x``: the reconstructed worker times, ``cv``: the job's CV per iteration): ``"cv"`` when an
    iteration of CV >= :data:`FORCED_CV` lies within :data:`FORCED_ROWS` before ``it`` (some worker
    is then at >= 2x the mean whatever the reconstruction); ``"slow worker"`` when one of the named
    ``ranks`` is at >= :data:`FORCED_SLOW` x the iteration's median worker in every iteration
    ``start_it .. it`` of the run that raised the alarm; None: the alarm is unforced."""
    if (cv[max(0, it - FORCED_ROWS):it + 1] >= FORCED_CV).any():
        return "cv"
    if slow_ratio(x, it, start_it, ranks) >= FORCED_SLOW:
        return "slow worker"
    return None


def slow_ratio(x: np.ndarray, it: int, start_it: int, ranks) -> float:
    """How slow the slowest named rank stays over the run ``start_it .. it`` of ``x``: the largest,
    over ``ranks``, of the smallest ratio to the iteration's median worker along the run (0 when
    no rank is named)."""
    rows = x[start_it:it + 1]
    if not len(ranks) or not rows.size:
        return 0.0
    rel = rows / np.median(rows, axis=1, keepdims=True)
    return float(rel[:, list(ranks)].min(axis=0).max())

M_GRID = (3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
R_GRID = (1, 2, 3, 5)
W_GRID = (20, 50, 100)


def _job_report(job: PaiJob, ev: dict, ref: dict) -> dict:
    first = _first_flags(ev)
    flags = _flag_iters(ev)
    it = job.iters
    rep = {"flags": {}, "delays": {}}
    for det in ("c4d", "mycroft"):
        rep["flags"][det] = {str(w): {"first_it": int(it[i]), "first_row": int(i), "n_events": len(flags[det][w]),
                                      "iters": [int(it[k]) for k in flags[det][w][:20]]}
                             for w, i in sorted(first[det].items())}
        d = {}
        for w, r in ref.items():
            if not r["departs"]:
                continue
            a, b = r["segment"]
            after = [k for k in flags[det].get(w, []) if a <= k < max(b, a + 1)]
            before = [k for k in flags[det].get(w, []) if k < a]
            d[str(w)] = {"departure_it": int(it[a]), "departure_row": a,
                         "flag_it": int(it[after[0]]) if after else None,
                         "delay_rows": int(after[0] - a) if after else None,
                         "delay_iters": int(it[after[0]] - it[a]) if after else None,
                         "flags_before_departure": len(before)}
        rep["delays"][det] = d
    return rep


def run_pai_study(data_dir=None, quick: bool = False, out_dir=None, compute_s: float = 0.5, seed: int = 0) -> dict:
    """Everything of the module docstring as a JSON-serialisable dict; a PNG in ``out_dir`` if given.

    ``quick``: the transport replay of job 1 only, healthy jobs (both generators) at the default
    parameters; otherwise every job on the transport, the sweeps over
    (m, persistence, window) and the injected slow-downs. ``seed`` seeds the healthy-job
    reconstruction (job ``k`` uses ``1000 * seed + k``).
    """
    import time

    from . import c4d, mycroft

    t0 = time.perf_counter()
    pc, pm = c4d.C4DParams(), mycroft.MycroftParams()
    jobs = {j: load_job(j, data_dir) for j in LABELS}
    comm = comm_time(10)
    res: dict = {"dataset": DATASET,
                 "sources": ["Weng et al., MLaaS in the Wild, NSDI 2022", "Xiao et al., AntMan, OSDI 2020",
                             "alibaba/clusterdata cluster-trace-gpu-v2020 (CC BY 4.0)"],
                 "model": {"ranks": 10, "compute_s": compute_s, "comm_s": comm, "grad_bytes": 1e9,
                           "scale": "compute phase = compute_s * v / median(v of the job); one trace row = one "
                                    "replayed iteration (the trace logs every 10th iteration)"},
                 "params": {"c4d": dict(pc.__dict__), "mycroft": dict(pm.__dict__), "depart_shift": DEPART_SHIFT,
                            "seed": seed},
                 "labels": {str(j): LABELS[j] for j in LABELS}, "jobs": {}}
    evs = {}
    for j, job in jobs.items():
        tel = replay_logs(job.v, compute_s, comm)
        ev = detect(tel, pc, pm)
        evs[j] = ev
        ref = reference(job)
        rep = _job_report(job, ev, ref)
        rep["why_missed"] = why_missed(job, ev, pc)
        rep.update(rows=int(job.v.shape[0]), dropped_rows=job.dropped, iters=[int(job.iters[0]), int(job.iters[-1])],
                   reference={str(w): r for w, r in ref.items()},
                   departing=[w for w, r in ref.items() if r["departs"]],
                   slow_throughout=[w for w, r in ref.items() if r["slow_throughout"]])
        # scale: the verdicts at other compute_s (thresholds are relative)
        if not quick or j == 1:
            scale, share = {}, {}
            for cs in (0.125, 2.0, 8.0):
                # the whole job k times slower (collective too): every threshold is relative, so the
                # verdicts must not move; and the compute phase alone rescaled (the all-reduce stays)
                scale[str(cs)] = _first_flags(detect(replay_logs(job.v, cs, comm * cs / compute_s), pc, pm)) \
                    == _first_flags(ev)
                share[str(cs)] = {d: {str(k): v for k, v in f.items()}
                                  for d, f in _first_flags(detect(replay_logs(job.v, cs, comm), pc, pm)).items()}
            rep["same_flags_at_scale"] = scale
            rep["flags_rows_compute_share"] = share
        res["jobs"][str(j)] = rep
    # transport replay: the same verdicts from the chunk-level transport's telemetry
    tr = {}
    for j in ((1,) if quick else tuple(jobs)):
        t1 = time.perf_counter()
        sim = replay_transport(jobs[j].v, compute_s)
        ev_t = detect(sim.tel, pc, pm)
        tr[str(j)] = {"same_first_flags": _first_flags(ev_t) == _first_flags(evs[j]),
                      "flags": {d: {str(k): v for k, v in f.items()} for d, f in _first_flags(ev_t).items()},
                      "seconds": time.perf_counter() - t1}
    res["transport_replay"] = tr
    # sensitivity of the job verdicts to m, r, window
    if not quick:
        sens = []
        delays = {"c4d": [], "mycroft": []}
        for m in M_GRID:
            for r in R_GRID:
                for w in W_GRID:
                    pc2 = c4d.C4DParams(slow_m=m, slow_iters=r, slow_window=w)
                    pm2 = mycroft.MycroftParams(straggler_m=m, straggler_persist=r, straggler_window=w)
                    row = {"m": m, "r": r, "window": w}
                    for j, job in jobs.items():
                        ev = detect(replay_logs(job.v, compute_s, comm), pc2, pm2)
                        rep = _job_report(job, ev, reference(job))
                        row[str(j)] = {d: sorted(int(k) for k in rep["flags"][d]) for d in ("c4d", "mycroft")}
                        for d in ("c4d", "mycroft"):
                            for x in rep["delays"][d].values():
                                delays[d].append(x["delay_rows"])
                    sens.append(row)
        res["sensitivity_jobs"] = sens
        res["detection_delay_rows_over_grid"] = {d: _band(v) for d, v in delays.items()}
        res["detection_delay_rows_over_grid"]["note"] = ("rows from the departure to the first flag of every "
                                                         "departing worker, over every (m, r, window) of the grid; "
                                                         "one row = 10 trace iterations")
    dl = {d: [x["delay_rows"] for j in res["jobs"].values() for x in j["delays"][d].values()]
          for d in ("c4d", "mycroft")}
    res["detection_delay_rows_default"] = {d: {"values": v, **_band(v)} for d, v in dl.items()}
    # healthy variation
    cvs = load_cv(data_dir)
    gens = ("normal", "lognormal")
    fa: dict = {}
    for gen in gens:
        n_it = 0
        hours = 0.0
        alarms = {"c4d": 0, "mycroft": 0}
        jobs_alarmed = {"c4d": [], "mycroft": []}
        clipped = triggers = 0
        forced = {"c4d": 0, "mycroft": 0}
        why = {"c4d": {"cv": 0, "slow worker": 0}, "mycroft": {"cv": 0, "slow worker": 0}}
        ratios = {"c4d": [], "mycroft": []}  # slow_ratio of every alarm not forced by the CV
        unforced_pages = {"c4d": [], "mycroft": []}
        sweep = {"c4d": {}, "mycroft_triggers": {}, "mycroft": {}, "mycroft_unforced": {}}
        for k, (name, cv) in enumerate(sorted(cvs.items())):
            x, cl = healthy_times(cv, 10, gen, seed=1000 * seed + k)
            clipped += cl
            tel = replay_logs(x, compute_s, comm)
            ev = detect(tel, pc, pm)
            n_it += x.shape[0]
            hours += tel.finished / 3600.0
            triggers += len(ev["mycroft"])
            for d in ("c4d", "mycroft"):
                pages = [e for e in ev[d] if d == "c4d" or e["ranks"]]
                alarms[d] += len(pages)
                for e in pages:
                    rk = [e["rank"]] if d == "c4d" else e["ranks"]
                    f = forced_by(x, cv, e["it"], e["start_it"], rk)
                    if f != "cv":
                        ratios[d].append(slow_ratio(x, e["it"], e["start_it"], rk))
                    if f is None:
                        unforced_pages[d].append({"job": name, "it": e["it"], "start_it": e["start_it"], "ranks": rk})
                    else:
                        forced[d] += 1
                        why[d][f] += 1
                if pages:
                    jobs_alarmed[d].append(name)
            if not quick:
                for w in W_GRID:
                    sc, sm = _scores(tel, w, pc, pm)
                    for m in M_GRID:
                        for r in R_GRID:
                            key = f"{m}/{r}/{w}"
                            sweep["c4d"][key] = sweep["c4d"].get(key, 0) + _count_runs(sc, m, r)
                            trg = sweep["mycroft_triggers"]
                            trg[key] = trg.get(key, 0) + _count_runs(sm, m, r)
                for m in M_GRID:
                    e2 = detect(tel, pc, mycroft.MycroftParams(straggler_m=m))
                    key = f"{m}/{pm.straggler_persist}/{pm.straggler_window}"
                    pages = [e for e in e2["mycroft"] if e["ranks"]]
                    sweep["mycroft"][key] = sweep["mycroft"].get(key, 0) + len(pages)
                    sweep["mycroft_unforced"][key] = sweep["mycroft_unforced"].get(key, 0) + sum(
                        forced_by(x, cv, e["it"], e["start_it"], e["ranks"]) is None for e in pages)
        g = {"jobs": len(cvs), "iterations": n_it, "job_hours": hours, "clipped_values": clipped,
             "alarms": alarms, "jobs_alarmed": jobs_alarmed, "mycroft_triggers": triggers,
             "note": "an alarm pages: C4D's slow-rank verdict, or a Mycroft trigger whose root cause names a rank "
                     "(mycroft_triggers counts every throughput trigger, culprit or not)",
             "forced_alarms": forced, "forced_by": why,
             "unforced_alarms": {d: alarms[d] - forced[d] for d in alarms}, "unforced_pages": unforced_pages,
             "slow_worker_ratios": ratios,
             "unforced_by_forced_slow": {d: {str(k): sum(1 for r in ratios[d] if r < k) for k in FORCED_SLOW_BAND}
                                         for d in ratios},
             "forced_note": f"forced by 'cv': alarms within {FORCED_ROWS} iterations after an iteration with CV >= "
                            f"{FORCED_CV}: among 10 non-negative times with mean 1 and CV c, sum (x-1)^2 <= max(x) * "
                            "sum(x) - n, so some worker is at >= (1 + c^2) x the mean (>= 2x at CV 1): a slow worker "
                            "is in the data whatever the reconstruction; by 'slow worker': a named worker is at >= "
                            f"{FORCED_SLOW} x the iteration's median worker in every iteration of the run that "
                            "raised the alarm (read from the reconstructed times, never by a detector)",
             "per_1000_iterations": {d: 1000.0 * a / n_it for d, a in alarms.items()},
             "unforced_per_1000_iterations": {d: 1000.0 * (alarms[d] - forced[d]) / n_it for d in alarms},
             "per_job_hour": {d: a / hours for d, a in alarms.items()}}
        if not quick:
            g["sweep_per_1000_iterations"] = {d: {k: 1000.0 * v / n_it for k, v in sw.items()}
                                              for d, sw in sweep.items()}
            g["band_per_1000_iterations"] = {d: _band(list(g["sweep_per_1000_iterations"][d].values()))
                                             for d in sweep}
        fa[gen] = g
    res["false_alarms"] = fa
    if not quick:
        res["injected"] = injected_delays(cvs, compute_s, comm, pc, pm, seed=seed)
    res["seconds"] = time.perf_counter() - t0
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        res["png"] = str(pai_png(Path(out_dir) / "reliability_pai.png", jobs, evs, res))
    return res


def why_missed(job: PaiJob, ev: dict, pc) -> dict:
    """For every worker that departs (:func:`reference`) and that a detector never flags while
    departed (from three rows before the estimated change point), the numbers the slow-rank
    rule compared, all from the trace and relative to the iteration's median worker as the rule
    sees it: the worker's shift over the departure segment; the job's healthy spread before it
    (1.4826 x MAD pooled over workers, the rule's ``slow_window`` rows); the cross-worker spread
    inside the segment (1.4826 x MAD of the workers' deviations from their own pre-departure
    medians, per row, median over the segment: the rule's "stands out from its peers" term); the
    threshold ``slow_m`` x the larger; the highest score reached in the segment; the share of
    workers departing together; and the worker's and the others' own times against before."""
    from .mycroft import robust_score

    rel = job.v / np.median(job.v, axis=1, keepdims=True)
    ref = reference(job)
    score = robust_score(rel, pc.slow_window, pc.warmup, pc.slow_floor, cross=True)
    flags = _flag_iters(ev)
    dep = [w for w, r in ref.items() if r["departs"]]
    out = {}
    for w in dep:
        a, b = ref[w]["segment"]
        b = max(b, a + 1)
        # flagged from a few rows before the change point found in the data (its estimate) to the end
        missed = {d: not any(a - 3 <= i < b for i in flags[d].get(w, [])) for d in ("c4d", "mycroft")}
        if not any(missed.values()):
            continue
        lo = max(0, a - pc.slow_window)
        hist = rel[lo:a]
        centre = np.median(hist, axis=0)
        healthy = 1.4826 * float(np.median(np.abs(hist - centre)))
        dev = rel[a:b] - centre
        cross = 1.4826 * np.median(np.abs(dev - np.median(dev, axis=1, keepdims=True)), axis=1)
        spread = max(healthy, float(np.median(cross)), pc.slow_floor * float(np.median(np.abs(centre))))
        out[str(w)] = {"missed_by": [d for d, m in missed.items() if m], "segment_rows": [int(a), int(b)],
                       "shift": float(np.median(rel[a:b, w]) - centre[w]),
                       "healthy_spread": healthy, "cross_spread_in_segment": float(np.median(cross)),
                       "threshold": pc.slow_m * spread, "max_score": float(np.nanmax(score[a:b, w])),
                       "departing_together": len(dep) / rel.shape[1],
                       "absolute_shift": float(np.median(job.v[a:b, w]) / np.median(job.v[lo:a, w]) - 1.0),
                       "others_absolute_shift": float(np.median(np.delete(job.v[a:b], dep, axis=1))
                                                      / np.median(np.delete(job.v[lo:a], dep, axis=1)) - 1.0)}
    return out


def injected_delays(cvs: dict, compute_s: float, comm: float, pc, pm, severities=(1.2, 1.5, 2.0),
                    length: int = 14, seed: int = 0) -> dict:
    """Detection-time distribution on the healthy jobs: one worker of each reconstructed job
    (normal) is slowed by ``severity`` x for ``length`` rows (job 1's worker 6: about 1.7x for 14
    logged rows) from a random row after the first 60; per detector and severity, the share
    flagged while slowed and the rows from the onset to the flag."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    for sev in severities:
        rows = {"c4d": [], "mycroft": []}
        n = 0
        for k, (_name, cv) in enumerate(sorted(cvs.items())):
            if cv.size < 60 + 2 * length:
                continue
            x, _ = healthy_times(cv, 10, "normal", seed=1000 * seed + k)
            a = int(rng.integers(60, cv.size - length))
            w = int(rng.integers(10))
            x[a:a + length, w] *= sev
            first = _first_after(detect(replay_logs(x, compute_s, comm), pc, pm), w, a, a + length)
            n += 1
            for d in rows:
                rows[d].append(first[d])
        out[str(sev)] = {"jobs": n, **{d: {"recall": sum(v is not None for v in rows[d]) / max(n, 1),
                                           "delay_rows": _band([v for v in rows[d] if v is not None])}
                                       for d in rows}}
    out["note"] = (f"one worker x severity for {length} rows at a random row of every healthy job (normal "
                   "reconstruction); delay = rows from the onset to that worker's first flag while slowed")
    return out


def _first_after(ev: dict, w: int, a: int, b: int) -> dict:
    fl = _flag_iters(ev)
    return {d: next((i - a for i in fl[d].get(w, []) if a <= i < b), None) for d in ("c4d", "mycroft")}


def pai_png(path, jobs: dict, evs: dict, res: dict):
    """Worker time series of each job (relative to the iteration's median) with the flags marked,
    and the false-alarm rate vs m."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, axes = plt.subplots(5, 1, figsize=(10, 16))
    for ax, (j, job) in zip(axes, jobs.items()):
        rel = job.v / np.median(job.v, axis=1, keepdims=True)
        for k, w in enumerate(job.workers.tolist()):
            ax.plot(job.iters, rel[:, k], lw=0.6, label=f"w{w}")
        fl = _flag_iters(evs[j])
        for det, mk in (("c4d", "v"), ("mycroft", "^")):
            for w, its in fl[det].items():
                k = int(np.flatnonzero(job.workers == w)[0])
                ax.plot(job.iters[its], rel[its, k], mk, ms=6, mfc="none",
                        color="red" if det == "c4d" else "black")
        ax.set_ylabel("time / median worker")
        ax.set_title(f"PAI job {j}: {LABELS[j]['note']} (v C4D, ^ Mycroft)", fontsize=9)
        ax.legend(fontsize=6, ncol=10, loc="upper left")
    ax = axes[-1]
    for gen, g in res["false_alarms"].items():
        sw = g.get("sweep_per_1000_iterations")
        for det, ls in (("c4d", "-"), ("mycroft", "--")):
            if sw:
                pc, pm = res["params"]["c4d"], res["params"]["mycroft"]
                r = pc["slow_iters"] if det == "c4d" else pm["straggler_persist"]
                w = pc["slow_window"] if det == "c4d" else pm["straggler_window"]
                ys = [sw[det][f"{m}/{r}/{w}"] for m in M_GRID]
                ax.plot(M_GRID, ys, ls, marker="o", label=f"{det} pages, {gen}")
                if det == "mycroft":
                    ys = [sw["mycroft_triggers"][f"{m}/{r}/{w}"] for m in M_GRID]
                    ax.plot(M_GRID, ys, ":", marker=".", label=f"mycroft triggers, {gen}")
            else:
                m = res["params"]["c4d"]["slow_m"] if det == "c4d" else res["params"]["mycroft"]["straggler_m"]
                ax.plot([m], [g["per_1000_iterations"][det]], "o", label=f"{det}, {gen}")
    ax.set_xlabel("m (spreads above the trailing median)")
    ax.set_ylabel("alarms per 1,000 iterations")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_title("healthy variation: 100 PAI jobs (coefficient_variation.csv)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_png(fig, path)


def summary_rows(res: dict) -> list[list[str]]:
    """One row per job: upstream label, our reference departures, and each detector's flags
    (worker @ first trace iteration)."""
    rows = []
    for j, rep in res["jobs"].items():
        dep = ", ".join(f"w{w}@{rep['reference'][str(w)]['segment_iters'][0]}" for w in rep["departing"]) or "-"
        fl = {d: ", ".join(f"w{w}@{f['first_it']}" for w, f in rep["flags"][d].items()) or "-"
              for d in ("c4d", "mycroft")}
        rows.append([j, res["labels"][j]["note"], dep, fl["c4d"], fl["mycroft"]])
    return rows


def bench_pai(out_dir, quick: bool, seed: int = 0, data_dir=None) -> dict:
    """``hwcosim reliability pai``: :func:`run_pai_study` into ``out_dir`` (JSON + PNG), and the
    flags printed beside the upstream labels and the false-alarm rates."""
    from hwcosim.models.benchio import print_table, write_json

    out_dir = Path(out_dir)
    res = run_pai_study(data_dir, quick=quick, out_dir=out_dir, seed=seed)
    write_json(out_dir / "reliability_pai.json", res)
    print_table("PAI jobs: upstream label vs flags (worker@trace iteration)",
                ["PAI job (#)", "upstream label", "departs (our rule)", "C4D", "Mycroft"], summary_rows(res),
                justify=None)
    rows = []
    for gen, g in res["false_alarms"].items():
        for d in ("c4d", "mycroft"):
            rows.append([gen, d, g["alarms"][d], g["forced_by"][d]["cv"], g["forced_by"][d]["slow worker"],
                         g["unforced_alarms"][d], f"{g['per_1000_iterations'][d]:.3f}",
                         f"{g['unforced_per_1000_iterations'][d]:.3f}", f"{g['per_job_hour'][d]:.2f}"])
    print_table("healthy variation (100 jobs): alarms, forced by the data or not", [
        "reconstruction", "detector", "alarms (#)", "forced: CV >= 1 (#)", "forced: slow worker (#)",
        "unforced (#)", "alarms (per 1,000 iterations)", "unforced alarms (per 1,000 iterations)",
        "alarms (per job-hour)"], rows)
    print(f"forced: within {FORCED_ROWS} iterations of an iteration with CV >= {FORCED_CV} (some worker at >= 2x the "
          f"mean), or a named worker at >= {FORCED_SLOW:g}x the iteration's median worker in every iteration of the "
          "run that raised the alarm (both read from the reconstructed times)")
    for gen, g in res["false_alarms"].items():
        band = "; ".join(f"{d} " + ", ".join(f"{k}x {n}" for k, n in g["unforced_by_forced_slow"][d].items())
                         for d in ("c4d", "mycroft"))
        print(f"sensitive to the slow-worker multiple ({gen}): unforced alarms at {band}")
        sw = g.get("sweep_per_1000_iterations")
        if sw:
            print(f"Mycroft pages per 1,000 iterations over straggler_m ({gen}), all / unforced: " + ", ".join(
                f"m {k.split('/')[0]} {v:.3f} / {sw['mycroft_unforced'][k]:.3f}" for k, v in sw["mycroft"].items()))
        for d, pages in g["unforced_pages"].items():
            for e in pages:
                print(f"unforced page: {gen} {d} {e['job']} iterations {e['start_it']}-{e['it']} ranks {e['ranks']}")
    miss = [(j, w, x) for j, r in res["jobs"].items() for w, x in r.get("why_missed", {}).items()]
    if miss:
        print_table("departing workers not flagged: what the slow-rank rule compared (relative to the iteration's "
                    "median worker)", ["PAI job (#)", "worker (#)", "missed by", "shift (fraction)",
                                       "healthy spread (fraction)", "cross-worker spread (fraction)",
                                       "threshold (fraction)", "max score (spreads)", "departing together (fraction)",
                                       "own time vs before (fraction)", "others vs before (fraction)"],
                    [[j, w, "+".join(x["missed_by"]), f"{x['shift']:.3f}", f"{x['healthy_spread']:.3f}",
                      f"{x['cross_spread_in_segment']:.3f}", f"{x['threshold']:.3f}", f"{x['max_score']:.1f}",
                      f"{x['departing_together']:.2f}", f"{x['absolute_shift']:+.3f}",
                      f"{x['others_absolute_shift']:+.3f}"] for j, w, x in miss])
        sens = res.get("sensitivity_jobs")
        if sens:
            for j in sorted({j for j, _w, _x in miss}):
                ws = sorted({int(w) for jj, w, _x in miss if jj == j})
                hit = [f"m {r['m']:g} r {r['r']} window {r['window']}" for r in sens
                       if set(ws) & set(r[j]["c4d"]) or set(ws) & set(r[j]["mycroft"])]
                print(f"job {j}: workers {ws} flagged at {len(hit)} of {len(sens)} (m, persistence, window) "
                      f"settings of the grid" + (f" ({', '.join(hit[:4])})" if hit else ""))
        print("why: a worker is flagged when its shift exceeds slow_m x the larger of the job's healthy spread and "
              "the cross-worker spread; when several workers depart together the row median moves with them and "
              "the cross-worker spread grows with their share, so each stands out from the job's history but not "
              "from its peers")
    return res


__all__ += ["bench_pai", "summary_rows", "injected_delays", "why_missed", "forced_by", "slow_ratio"]

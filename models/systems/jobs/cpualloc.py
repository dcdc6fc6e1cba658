"""CPU allocation for DL jobs on a heterogeneous GPU cluster (CODA, ICDCS 2020), against static rules.

A training job's GPU is fed by CPU work (decoding, augmentation, batching). With too few cores
the GPU starves; beyond the point where the GPU is the bottleneck, more cores are wasted. CODA
(Zhao et al., "CODA: Improving Resource Utilization by Slimming and Co-locating DNN and CPU
Jobs", ICDCS 2020) profiles each job's throughput against its core count and allocates cores
adaptively, reporting +20.8% GPU utilisation over static allocation. Static rules in practice:
an even split of a node's cores over its GPUs, or per-task-type constants (Kubeflow-style
templates: so many cores per GPU for vision, for NLP...).

- :class:`ThroughputModel`: ``thr(c) = min(gpu_rate, r * c**alpha)`` fitted in log space to a few
  profiled (cores, samples/s) points (least squares, or MAP with a prior on ``alpha`` when the
  points are few and noisy). :func:`profile_loader` measures such points for real: a
  multiprocessing pipeline that decodes and augments scikit-learn digits images (upsampling,
  rotation, noise) with 1..k worker processes; :func:`fit_profile` fits them, validates on a
  held-out point and warns when throughput does not grow with cores (a loaded or small host).
- :func:`allocate`: per node, ``even``, ``static`` (cores per GPU by job type) or ``adaptive``
  (greedy on the marginal gain of GPU-weighted utilisation, optimal for concave curves, with an
  optional fairness ``floor``; cores move when jobs arrive or leave).
- :func:`simulate` / :class:`CPUClusterSim`: the cluster simulation on the discrete-event core of
  :mod:`hwcosim.models.systems.cluster` (:class:`~models.systems.cluster.engine.Simulator`): hosts of several GPU types
  (a :class:`~models.systems.cluster.topology.Topology`, one ToR per type), job arrivals, placements,
  end-of-profiling and completions as events; between events each job progresses at ``thr(c)``;
  GPU utilisation (busy fraction of the allocated GPUs, and of the whole cluster) and JCT.
  Policies: ``even``, ``static``, ``adaptive`` (each job's curve *learned* from 3 noisy profiled
  points taken during its first minutes, which it pays for) and ``oracle`` (adaptive on the true
  curves, free): oracle - adaptive is the price of learning. :func:`simulate_loop` is the same
  model as a plain loop (even/static/oracle), a cross-check for the tests.

On the Alibaba GPU trace 2023 (:func:`run_trace_study`, ``hwcosim cpualloc --workload trace``):
the real node types (:func:`trace_cluster`), the whole-GPU tasks' GPUs, requested cores, arrival
order and durations (:func:`trace_jobs`); ``static`` gives each job its requested cores and
places it only where they are free (a request is a reservation); the true curves are
:class:`AmdahlCurve` (not the learner's power law), each saturating at its request times a
log-normal factor (the trace records requests, not needs), whose median and spread set the
printed ``sensitive to:`` band. CODA's +20.8% is printed beside ours.

Findings of the synthetic study (``--workload synthetic``; figures in ``build/bench/jobs/cpualloc.json``):

- Tail JCT. An earlier version drew GPU types uniformly, loading the 16 A100 GPUs beyond 1:
  their queue grew without bound, and adaptive's p90 JCT (16.6 h vs 5.3 h even) came from
  queue reshuffling on that type (8-GPU jobs starved by backfilling under even, smaller ones
  behind them under adaptive), not from CPU starvation (p90 *run* time was lower under
  adaptive). Types are now drawn in proportion to their GPUs (:func:`offered_load` < 1 per type);
  a fairness floor per job is available (``floor``) and reported as a variant.
- Gap to CODA's +20.8% GPU utilisation. The gain over an even split is bounded by how much the
  even share mis-serves jobs that share a node: with our needs (0.5-10 cores/GPU by type) and
  nodes of 3-8 cores/GPU, many jobs are close to their need already, and the learned curves
  lose part of the oracle's gain (profiling time, noisy fits). CODA's baseline was a production
  cluster's static allocation, with measured job curves, and it also co-locates CPU jobs; we
  reproduce the mechanism, not its workload, and report our figure.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.cluster.engine import Simulator

__all__ = ["ThroughputModel", "profile_loader", "fit_profile", "offered_load", "ALLOC_POLICIES", "NodeType",
           "CPUJob", "allocate", "simulate", "POLICIES",
           "heterogeneous_cluster", "job_stream", "run_study", "CPUClusterSim", "simulate_loop", "AmdahlCurve",
           "trace_cluster", "trace_jobs", "run_trace_study"]

#: Cluster-simulation policies: ``adaptive`` allocates on curves fitted from a few noisy profiled
#: points per job (and pays the profiling time); ``oracle`` allocates on the true curves, free.
POLICIES = ("even", "static", "adaptive", "oracle")
ALLOC_POLICIES = ("even", "static", "adaptive")
#: Kubeflow-style template: cores per GPU by job type.
STATIC_CORES_PER_GPU = {"cv": 4, "nlp": 2, "speech": 3, "rl": 4}


@dataclass(frozen=True)
class ThroughputModel:
    """Samples/s of one job against its cores: ``min(gpu_rate, r * cores**alpha)``.

    Parameters
    ----------
    r : float
        Samples/s with one core.
    alpha : float
        Scaling exponent in (0, 1] (1 = linear).
    gpu_rate : float
        Samples/s the job's GPUs can consume (the ceiling).
    """

    r: float
    alpha: float
    gpu_rate: float

    def __post_init__(self):
        if not (self.r > 0 and 0 < self.alpha <= 1.2 and self.gpu_rate > 0):
            raise UsageError(f"need r > 0, alpha in (0, 1.2], gpu_rate > 0; got {self.r}, {self.alpha}, "
                             f"{self.gpu_rate}")

    def __call__(self, cores) -> np.ndarray:
        c = np.asarray(cores, dtype=np.float64)
        return np.minimum(self.gpu_rate, self.r * np.power(np.maximum(c, 0), self.alpha))

    @classmethod
    def fit(cls, cores, rates, gpu_rate: float, alpha_prior: float | None = None,
            prior_sd: float | None = None, noise_sd: float = 0.1) -> ThroughputModel:
        """Fit ``log rate = log r + alpha log cores`` to the profiled points below the ceiling.

        Points at or above ``0.95 * gpu_rate`` say only that the job saturates there and are left
        out. Without ``prior_sd``: least squares, which needs two points below the ceiling (else
        the exponent is ``alpha_prior`` and ``r`` comes from the lowest point). With ``prior_sd``:
        the maximum a posteriori fit under a Gaussian prior ``alpha ~ N(alpha_prior, prior_sd)``
        and log-rate noise ``noise_sd`` (ridge regression of alpha towards the prior): two or
        three noisy points over a factor of 2-4 in cores leave alpha poorly determined, and an
        exponent fitted low makes the cores-to-saturate explode. A result outside (0.05, 1.2] is
        clipped; :func:`fit_profile` reports that instead of hiding it.
        """
        c, t = np.asarray(cores, float), np.asarray(rates, float)
        if c.size < 1 or c.size != t.size or np.any(c <= 0) or np.any(t <= 0):
            raise UsageError("need profiled points with cores > 0 and rate > 0")
        keep = t < 0.95 * gpu_rate
        if prior_sd is not None:
            if alpha_prior is None or not prior_sd > 0 or not noise_sd > 0:
                raise UsageError("a prior fit needs alpha_prior, prior_sd > 0 and noise_sd > 0")
            if not keep.any():
                keep = c == c.min()
            x, y = np.log(c[keep]), np.log(t[keep])
            a = np.vstack([np.column_stack([np.ones_like(x), x]) / noise_sd, [[0.0, 1.0 / prior_sd]]])
            b = np.concatenate([y / noise_sd, [alpha_prior / prior_sd]])
            (logr, alpha), *_ = np.linalg.lstsq(a, b, rcond=None)
            return cls(float(np.exp(logr)), float(np.clip(alpha, 0.05, 1.2)), float(gpu_rate))
        if keep.sum() >= 2 and np.unique(c[keep]).size >= 2:
            alpha, logr = np.polyfit(np.log(c[keep]), np.log(t[keep]), 1)
            return cls(float(np.exp(logr)), float(np.clip(alpha, 0.05, 1.2)), float(gpu_rate))
        if alpha_prior is None:
            raise UsageError("fewer than 2 profiled points below the GPU ceiling: give alpha_prior")
        i = int(np.argmin(np.where(keep, c, np.inf))) if keep.any() else int(np.argmin(c))
        return cls(float(t[i] / c[i] ** alpha_prior), float(alpha_prior), float(gpu_rate))

    def cores_to_saturate(self) -> float:
        return (self.gpu_rate / self.r) ** (1 / self.alpha)


# ---- a real CPU-bound loader ---------------------------------------------------------------------
def _augment(args):
    from scipy import ndimage

    imgs, seed = args
    rng = np.random.default_rng(seed)
    out = np.empty((len(imgs), 32, 32), np.float32)
    for i, im in enumerate(imgs):
        big = ndimage.zoom(im.reshape(8, 8).astype(np.float32) / 16, 4, order=3)   # "decode" to 32x32
        big = ndimage.rotate(big, rng.uniform(-15, 15), reshape=False, order=1)
        out[i] = big + rng.normal(0, 0.05, big.shape).astype(np.float32)
    return out


def profile_loader(workers=(1, 2), images: int = 1200, chunk: int = 50, seed: int = 0) -> dict:
    """Measure samples/s of a digits decode + augment pipeline with ``w`` worker processes each.

    Returns ``{"cores": [...], "samples_per_s": [...]}``. Wall-clock measurement: numbers depend
    on the machine and its load.
    """
    from sklearn.datasets import load_digits

    x = load_digits().data[:images]
    tasks = [(x[i:i + chunk], seed + i) for i in range(0, len(x), chunk)]
    out = {"cores": [], "samples_per_s": []}
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    for w in workers:
        with ctx.Pool(w) as pool:
            pool.map(_augment, tasks[:w])  # warm-up
            t0 = time.perf_counter()
            n = sum(len(b) for b in pool.map(_augment, tasks))
            dt = time.perf_counter() - t0
        out["cores"].append(int(w))
        out["samples_per_s"].append(n / dt)
    return out


def fit_profile(cores, rates, holdout: int | None = None) -> dict:
    """Fit a measured loader profile (no GPU ceiling) and say how far to trust it.

    ``holdout``: index of a point left out of the fit and predicted from it (relative error
    reported). ``warnings`` flags a profile whose throughput does not grow with cores (a loaded
    or small host: the exponent is then meaningless and :meth:`ThroughputModel.fit` would clip it).
    """
    c, t = np.asarray(cores, float), np.asarray(rates, float)
    idx = [k for k in range(c.size) if k != holdout]
    if len(idx) < 2:
        raise UsageError("need >= 2 profiled points besides the held-out one")
    alpha_raw, logr = np.polyfit(np.log(c[idx]), np.log(t[idx]), 1)
    model = ThroughputModel(float(np.exp(logr)), float(np.clip(alpha_raw, 0.05, 1.2)), 1e12)
    warnings = []
    if alpha_raw < 0.1 or t[np.argmax(c)] <= 1.05 * t[np.argmin(c)]:
        warnings.append(f"throughput does not grow with cores ({t[np.argmin(c)]:.0f} -> {t[np.argmax(c)]:.0f} "
                        f"samples/s from {c.min():.0f} to {c.max():.0f} workers; fitted exponent {alpha_raw:.2f}, "
                        f"used {model.alpha:.2f}): the host is loaded or has too few free cores, so the curve is "
                        "not this job's; only r (one-worker rate) is used downstream")
    if alpha_raw > 1.2:
        warnings.append(f"fitted exponent {alpha_raw:.2f} > 1.2 (super-linear): measurement noise; clipped to 1.2")
    out = {"r": model.r, "alpha": model.alpha, "alpha_raw": float(alpha_raw), "fit_points": [int(c[k]) for k in idx],
           "warnings": warnings, "holdout": None}
    if holdout is not None:
        pred = float(model(c[holdout]))
        out["holdout"] = {"cores": int(c[holdout]), "measured": float(t[holdout]), "predicted": pred,
                          "rel_error": pred / float(t[holdout]) - 1}
    out["model"] = model
    return out


# ---- cluster ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeType:
    """A server type: GPUs and CPU cores per node, and how many such nodes."""

    name: str
    gpus: int
    cores: int
    count: int
    speed: float = 1.0   # GPU speed relative to the reference (scales gpu_rate)

    def __post_init__(self):
        if self.gpus < 1 or self.cores < self.gpus or self.count < 1 or not self.speed > 0:
            raise UsageError(f"node type {self.name!r}: need gpus >= 1, cores >= gpus, count >= 1, speed > 0")


@dataclass(frozen=True)
class CPUJob:
    """A job: type, GPUs, GPU type, per-GPU throughput curve (reference GPU), work in samples."""

    jid: int
    kind: str
    gpus: int
    gpu_type: str
    arrival: float
    r_per_core: float
    alpha: float
    gpu_rate_per_gpu: float
    work: float
    serial: float | None = None          # set: the true curve is :class:`AmdahlCurve` (trace study)
    request_cores: float | None = None   # the cores the job requested (trace: cpu_milli / 1000)

    def model(self, speed: float):
        if self.serial is not None:
            return AmdahlCurve(self.r_per_core, self.serial, self.gpu_rate_per_gpu * self.gpus * speed)
        return ThroughputModel(self.r_per_core, self.alpha, self.gpu_rate_per_gpu * self.gpus * speed)


@dataclass(frozen=True)
class AmdahlCurve:
    """A true job curve of another family than the learner's: ``min(gpu_rate, r * c / (1 + serial * (c - 1)))``.

    A loader whose per-batch work has a ``serial`` fraction that does not parallelise (Amdahl's
    law); its log-log slope falls with ``c``, unlike :class:`ThroughputModel`'s constant ``alpha``.
    ``alpha`` here is the mean log-log slope from 1 core to saturation (for the fit-error report).
    """

    r: float
    serial: float
    gpu_rate: float

    def __post_init__(self):
        if not (self.r > 0 and 0 <= self.serial < 1 and self.gpu_rate > 0):
            raise UsageError(f"need r > 0, serial in [0, 1), gpu_rate > 0; got {self.r}, {self.serial}, "
                             f"{self.gpu_rate}")

    def __call__(self, cores) -> np.ndarray:
        c = np.maximum(np.asarray(cores, dtype=np.float64), 0)
        return np.minimum(self.gpu_rate, self.r * c / (1 + self.serial * np.maximum(c - 1, 0)))

    def cores_to_saturate(self) -> float:
        if self.r >= self.gpu_rate:
            return 1.0
        if self.gpu_rate * self.serial >= self.r:
            return float("inf")
        return (self.gpu_rate * (1 - self.serial)) / (self.r - self.gpu_rate * self.serial)

    @property
    def alpha(self) -> float:
        n = self.cores_to_saturate()
        return float(np.log(self.gpu_rate / self.r) / np.log(n)) if 1 < n < float("inf") else 1.0


def allocate(policy: str, jobs, node: NodeType, models=None, floor: float = 0.0) -> list[int]:
    """Cores for each job on one node (``jobs`` = the CPUJob objects running there).

    ``adaptive``: greedy on the marginal gain of GPU-weighted utilisation under ``models`` (one
    :class:`ThroughputModel` per job, e.g. fitted from profiled points; default: the jobs' true
    curves, the oracle). ``floor`` in [0, 1]: each job is first given
    ``min(ceil(floor * even share), cores it needs to saturate)`` so that no job is starved to one
    core while another gains a little; 0 = pure utilisation greedy.
    """
    if policy not in ALLOC_POLICIES:
        raise UsageError(f"policy must be one of {ALLOC_POLICIES}, not {policy!r}")
    if not 0 <= floor <= 1:
        raise UsageError(f"floor must be in [0, 1], not {floor}")
    if not jobs:
        return []
    per_gpu = node.cores // node.gpus
    if policy == "even":
        return [per_gpu * j.gpus for j in jobs]
    if policy == "static":
        want = [int(np.ceil(j.request_cores)) if j.request_cores is not None else STATIC_CORES_PER_GPU[j.kind] * j.gpus
                for j in jobs]
        if sum(want) <= node.cores:
            return want
        f = node.cores / sum(want)
        return [max(1, int(w * f)) for w in want]
    models = [j.model(node.speed) for j in jobs] if models is None else list(models)
    if len(models) != len(jobs):
        raise UsageError("one model per job")
    return _greedy([j.gpus for j in jobs], models, node.cores,
                   [per_gpu * j.gpus for j in jobs] if floor > 0 else None, floor)


def _greedy(gpus, models, cores: int, share=None, floor: float = 0.0) -> list[int]:
    """Greedy core allocation on GPU-weighted marginal utilisation, with an optional floor per job."""
    n = len(models)
    alloc = [1] * n
    if share is not None:
        for k, m in enumerate(models):
            alloc[k] = max(1, min(int(np.ceil(floor * share[k])), int(np.ceil(m.cores_to_saturate()))))
    if sum(alloc) > cores:  # floors do not fit: scale them down (>= 1 core each)
        f = (cores - n) / max(sum(alloc) - n, 1)
        alloc = [1 + int((a - 1) * f) for a in alloc]
    free = cores - sum(alloc)
    while free > 0:
        gain = [g * (m(a + 1) - m(a)) / m.gpu_rate for g, m, a in zip(gpus, models, alloc)]
        k = int(np.argmax(gain))
        if gain[k] <= 0:
            break
        alloc[k] += 1
        free -= 1
    return alloc


def heterogeneous_cluster() -> list[NodeType]:
    """Three GPU types with different CPU:GPU ratios (and GPU speeds)."""
    return [NodeType("V100", 8, 32, 4, 1.0), NodeType("A100", 8, 64, 2, 2.0), NodeType("T4", 4, 24, 4, 0.5)]


#: Cores per (reference) GPU a job type needs to keep its GPU busy: uniform ranges.
CORE_NEED = {"cv": (3.0, 8.0), "speech": (2.0, 6.0), "nlp": (0.5, 2.0), "rl": (4.0, 10.0)}


def job_stream(n: int, nodes, seed: int = 0, rate_per_h: float = 8.0, loader: ThroughputModel | None = None):
    """Random jobs: type cv/nlp/speech/rl, 1/2/4/8 GPUs of a GPU type drawn in proportion to the
    cluster's GPUs of that type, Poisson arrivals (8 an hour: an offered load of 0.4-0.6 per type at full GPU
    speed, about 0.7 with the CPU-bound slowdown, see :func:`offered_load`; a type loaded over 1
    has an unbounded queue, and JCTs then measure the
    length of the stream, not the allocator).

    A job's one-core rate ``r`` is the measured loader's (``loader.r``, else 1,000 samples/s) times
    U(0.7, 1.3); its exponent is U(0.7, 1.0) (near-linear scaling of a multi-process loader on a
    dedicated server); its GPU ceiling per reference GPU is ``r * need**alpha`` with ``need`` cores
    drawn from :data:`CORE_NEED` for its type. Work: 0.5 to 2 hours at full speed.
    """
    rng = np.random.default_rng(seed)
    cap = np.array([nt.gpus * nt.count for nt in nodes], dtype=float)
    base_r = loader.r if loader is not None else 1000.0
    kinds = list(CORE_NEED)
    out, t = [], 0.0
    for k in range(n):
        kind = kinds[rng.integers(len(kinds))]
        nt = nodes[rng.choice(len(nodes), p=cap / cap.sum())]
        g = int(rng.choice([x for x in (1, 2, 4, 8) if x <= nt.gpus]))
        r = base_r * rng.uniform(0.7, 1.3)
        alpha = float(rng.uniform(0.7, 1.0))
        gpu_rate = r * rng.uniform(*CORE_NEED[kind]) ** alpha
        t += rng.exponential(3600 / rate_per_h)
        work = gpu_rate * g * nt.speed * rng.uniform(1800, 7200)
        out.append(CPUJob(k, kind, g, nt.name, t, r, alpha, gpu_rate, work))
    return out


def offered_load(jobs, nodes) -> dict:
    """GPU-time demanded at full speed (GPU-bound) per GPU type over the arrival span / its GPUs."""
    span = max(j.arrival for j in jobs) - min(j.arrival for j in jobs)
    out = {}
    for nt in nodes:
        d = sum(j.work / (j.gpu_rate_per_gpu * nt.speed) for j in jobs if j.gpu_type == nt.name)
        out[nt.name] = d / (span * nt.gpus * nt.count)
    return out


class CPUClusterSim(Simulator):
    """The allocation study on :class:`hwcosim.models.systems.cluster.engine.Simulator`, the cluster's
    discrete-event core.

    The cluster is a :class:`~models.systems.cluster.topology.Topology` with one ToR per node type (hosts of
    a type share a ToR); host ``h`` has ``gpus`` GPUs and ``cores`` CPU cores of its type. Job
    arrivals, placements and completions are events on the engine's heap (same time: insertion
    order; same inputs: same result). Between events every running job trains at
    ``thr(cores)`` samples/s (:class:`ThroughputModel`); a host's cores are (re)allocated by
    ``policy`` when a job starts or ends there, and the completion events of that host's jobs are
    rescheduled (stale ones are ignored by version).

    Placement: FIFO per GPU type (a job waits only for its own type), first host of the type with
    enough free GPUs. Static and even allocations are fixed when a job starts (from the cores its
    host has left); adaptive and oracle re-allocate the host's cores at every arrival and departure.

    ``adaptive`` learns each job's curve: for its first ``profile_points x profile_s`` seconds the
    job keeps its even share of cores and is profiled at about 1/4, 1/2 and all of that share
    (it trains meanwhile, at the mean of the true rates there); every measured rate and the GPU
    ceiling (a synthetic-data run) carry multiplicative log-normal noise ``profile_noise``; then
    :meth:`ThroughputModel.fit` (``alpha_prior`` when fewer than two points lie below the
    ceiling) and the host is re-allocated on the fitted curves. ``oracle`` allocates on the true
    curves from the start, without profiling. ``floor``: see :func:`allocate`.
    """

    def __init__(self, nodes, policy: str, seed: int = 0, floor: float = 0.0, profile_s: float = 120.0,
                 profile_noise: float = 0.1, alpha_prior: float = 0.85, prior_sd: float | None = 0.15,
                 profile_span: str = "share"):
        from hwcosim.models.systems.cluster.topology import Topology

        if policy not in POLICIES:
            raise UsageError(f"policy must be one of {POLICIES}, not {policy!r}")
        self.types = list(nodes)
        self.host_type = np.repeat(np.arange(len(self.types)), [nt.count for nt in self.types])
        topo = Topology(self.host_type.copy(), np.zeros(len(self.types), dtype=np.int64),
                        gpus_per_host=max(nt.gpus for nt in self.types), nic_ports=1, aggs_per_pod=1,
                        cores_per_plane=1, name="cpualloc-" + "-".join(nt.name for nt in self.types))
        super().__init__(topo, seed=seed)
        if not (0 <= floor <= 1 and profile_s >= 0 and profile_noise >= 0 and 0 < alpha_prior <= 1.2):
            raise UsageError("need floor in [0, 1], profile_s >= 0, profile_noise >= 0, alpha_prior in (0, 1.2]")
        self.policy, self.floor, self.seed = policy, floor, seed
        self.profile_s, self.profile_noise, self.alpha_prior = profile_s, profile_noise, alpha_prior
        self.prior_sd, self.profile_span = prior_sd, profile_span
        self.fits: dict[int, dict] = {}  # jid -> fitted model's error against the true curve
        self.free = np.array([self.types[t].gpus for t in self.host_type], dtype=np.int64)
        self.queue: list[CPUJob] = []
        self.run_state: dict[int, dict] = {}  # jid -> job, host, cores, left, rate, t, version
        self.jct: dict[int, float] = {}
        self.wait: dict[int, float] = {}
        self.busy = np.zeros(len(self.types))  # GPU-seconds busy, per type
        self.alloc = np.zeros(len(self.types))  # GPU-seconds allocated, per type
        self.placements: dict[int, int] = {}
        self.last_done = 0.0

    def submit(self, jobs) -> None:
        """Schedule the arrivals of ``jobs`` (events at their arrival times)."""
        names = {nt.name for nt in self.types}
        for j in sorted(jobs, key=lambda j: j.arrival):
            if j.gpu_type not in names:
                raise UsageError(f"job {j.jid}: no {j.gpu_type!r} nodes in the cluster")
            if j.gpus > max(nt.gpus for nt in self.types if nt.name == j.gpu_type):
                raise UsageError(f"job {j.jid}: {j.gpus} GPUs do not fit one {j.gpu_type} node")
            self._push(j.arrival, self._arrive, j)

    # ---- events ------------------------------------------------------------------------------
    def _arrive(self, job: CPUJob) -> None:
        self.queue.append(job)
        self._try_start()

    def _try_start(self) -> None:
        rest, touched = [], []
        for j in self.queue:
            hosts = np.flatnonzero((self.host_type == self._type_index(j.gpu_type)) & (self.free >= j.gpus))
            if self.policy == "static" and j.request_cores is not None:
                # a request is a reservation (Kubernetes): place only where the requested cores are free
                nt = self.types[self._type_index(j.gpu_type)]
                want = int(np.ceil(j.request_cores))
                hosts = np.array([h for h in hosts if nt.cores - sum(st["cores"] or 0 for st in self._on(h)) >= want],
                                 dtype=np.int64)
            if not hosts.size:
                rest.append(j)
                continue
            h = int(hosts[0])
            self._settle(h)
            self.free[h] -= j.gpus
            self.run_state[j.jid] = {"job": j, "host": h, "cores": None, "left": j.work, "rate": 0.0,
                                     "t": self.now, "version": 0, "profiling": self.policy == "adaptive",
                                     "est": None}
            if self.policy == "adaptive":
                self._push(self.now + len(self._profile_points(j)) * self.profile_s, self._profiled, j.jid)
            self.placements[j.jid] = h
            self.wait[j.jid] = self.now - j.arrival
            touched.append(h)
        self.queue = rest
        for h in dict.fromkeys(touched):
            self._reallocate(h)

    def _complete(self, jid: int, version: int) -> None:
        st = self.run_state.get(jid)
        if st is None or st["version"] != version:
            return  # rescheduled since
        h = st["host"]
        self._settle(h)
        del self.run_state[jid]
        self.free[h] += st["job"].gpus
        self.jct[jid] = self.now - st["job"].arrival
        self.last_done = self.now  # (stale completion events may still move the engine's clock)
        self._reallocate(h)
        self._try_start()

    def _profiled(self, jid: int) -> None:
        """End of a job's profiling: noisy measurements -> fitted curve -> re-allocate its host."""
        st = self.run_state.get(jid)
        if st is None:
            return  # finished while profiling
        j, nt = st["job"], self.types[self.host_type[st["host"]]]
        true = j.model(nt.speed)
        pts = np.array(self._profile_points(j), dtype=float)
        rng = np.random.default_rng([self.seed, j.jid])
        meas = true(pts) * rng.lognormal(0.0, self.profile_noise, pts.size)
        ceiling = true.gpu_rate * float(rng.lognormal(0.0, self.profile_noise))
        est = ThroughputModel.fit(pts, meas, ceiling, alpha_prior=self.alpha_prior, prior_sd=self.prior_sd,
                                  noise_sd=max(self.profile_noise, 0.02))
        c = np.arange(1, nt.cores + 1)
        self.fits[jid] = {"curve_mean_abs_err": float(np.mean(np.abs(est(c) / true(c) - 1))),
                          "saturation_cores_err": float(est.cores_to_saturate() / true.cores_to_saturate() - 1),
                          "alpha_err": est.alpha - true.alpha}
        self._settle(st["host"])
        st["est"], st["profiling"] = est, False
        self._reallocate(st["host"])

    # ---- helpers -----------------------------------------------------------------------------
    def _even_share(self, j: CPUJob) -> int:
        nt = self.types[self._type_index(j.gpu_type)]
        return nt.cores // nt.gpus * j.gpus

    def _profile_points(self, j: CPUJob) -> list[int]:
        s = self._even_share(j)
        if self.profile_span == "wide":
            return sorted({1, max(1, s // 2), s})
        return sorted({max(1, s // 4), max(1, s // 2), s})

    def _type_index(self, name: str) -> int:
        return next(i for i, nt in enumerate(self.types) if nt.name == name)

    def _on(self, h: int) -> list[dict]:
        return [st for st in self.run_state.values() if st["host"] == h]

    def _settle(self, h: int) -> None:
        """Progress and utilisation integrals of host ``h``'s jobs up to now."""
        t = self.host_type[h]
        for st in self._on(h):
            dt = self.now - st["t"]
            if dt > 0:
                g = st["job"].gpus
                st["left"] = max(st["left"] - st["rate"] * dt, 0.0)
                self.busy[t] += g * st["rate"] / st["gpu_rate"] * dt
                self.alloc[t] += g * dt
            st["t"] = self.now

    def _reallocate(self, h: int) -> None:
        nt = self.types[self.host_type[h]]
        here = self._on(h)
        if not here:
            return
        self._settle(h)
        if self.policy in ("adaptive", "oracle"):
            prof = [st for st in here if st["profiling"]]
            rest = [st for st in here if not st["profiling"]]
            for st in prof:   # profiling jobs hold their even share
                st["cores"] = self._even_share(st["job"])
            if rest:
                models = [st["est"] if self.policy == "adaptive" else st["job"].model(nt.speed) for st in rest]
                cores = nt.cores - sum(st["cores"] for st in prof)
                share = [self._even_share(st["job"]) for st in rest]
                for st, c in zip(rest, _greedy([st["job"].gpus for st in rest], models, cores,
                                               share if self.floor > 0 else None, self.floor)):
                    st["cores"] = c
        else:
            used = sum(st["cores"] for st in here if st["cores"] is not None)
            for st in here:
                if st["cores"] is None:
                    want = allocate(self.policy, [st["job"]], nt)[0]
                    st["cores"] = max(1, min(want, nt.cores - used))
                    used += st["cores"]
        for st in here:
            m = st["job"].model(nt.speed)
            if st["profiling"]:  # trains at the profiled core counts in turn
                rate = float(np.mean(m(np.array(self._profile_points(st["job"]), dtype=float))))
            else:
                rate = float(m(st["cores"]))
            if rate != st["rate"] or st["version"] == 0:
                st["rate"], st["gpu_rate"] = rate, m.gpu_rate
                st["version"] += 1
                self._push(self.now + st["left"] / rate, self._complete, st["job"].jid, st["version"])

    def results(self) -> dict:
        if self.run_state or self.queue:
            raise RuntimeError("jobs wait for GPUs that do not exist or the run was cut short")
        j = np.array([self.jct[k] for k in sorted(self.jct)])
        w = np.array([self.wait[k] for k in sorted(self.wait)])
        total_gpus = float(self.free.sum())
        run = j - w
        fits = None
        if self.fits:
            fe = {k: np.array([f[k] for f in self.fits.values()]) for k in next(iter(self.fits.values()))}
            fits = {"jobs": len(self.fits),
                    "curve_mean_abs_err": float(fe["curve_mean_abs_err"].mean()),
                    "curve_p90_abs_err": float(np.quantile(fe["curve_mean_abs_err"], 0.9)),
                    "saturation_cores_mean_abs_err": float(np.abs(fe["saturation_cores_err"]).mean()),
                    "saturation_cores_bias": float(fe["saturation_cores_err"].mean()),
                    "alpha_mean_abs_err": float(np.abs(fe["alpha_err"]).mean())}
        return {"policy": self.policy, "floor": self.floor, "fit_error": fits,
                "mean_run_h": float(run.mean() / 3600), "p90_run_h": float(np.quantile(run, 0.9) / 3600),
                "max_run_h": float(run.max() / 3600), "p90_wait_h": float(np.quantile(w, 0.9) / 3600),
                "gpu_utilisation": float(self.busy.sum() / self.alloc.sum()),
                "cluster_gpu_utilisation": float(self.busy.sum() / (total_gpus * self.last_done)),
                "mean_jct_h": float(j.mean() / 3600), "p90_jct_h": float(np.quantile(j, 0.9) / 3600),
                "mean_wait_h": float(w.mean() / 3600), "makespan_h": self.last_done / 3600, "events": self.events,
                "utilisation_by_type": {nt.name: (float(self.busy[i] / self.alloc[i]) if self.alloc[i] else None)
                                        for i, nt in enumerate(self.types)}}


def simulate(jobs, nodes, policy: str, seed: int = 0, **kw) -> dict:
    """Run the jobs on the cluster engine (:class:`CPUClusterSim`) with one allocation policy.

    Returns GPU utilisation (busy fraction of the allocated GPU-time, overall and per GPU type,
    and of the whole cluster over the makespan), mean and p90 JCT, mean queueing wait, makespan.
    """
    sim = CPUClusterSim(nodes, policy, seed, **kw)
    sim.submit(jobs)
    sim.run()
    return sim.results()


def simulate_loop(jobs, nodes, policy: str, floor: float = 0.0) -> dict:
    """Reference: the same model as a plain time-stepping loop (no engine), kept to cross-check
    :func:`simulate` in the tests. Policies even, static and oracle (no profiling phase)."""
    if policy not in ("even", "static", "oracle"):
        raise UsageError(f"simulate_loop runs even, static or oracle, not {policy!r}")
    inst = [(nt, i) for nt in nodes for i in range(nt.count)]
    free = {k: nt.gpus for k, (nt, _) in enumerate(inst)}
    running: dict[int, dict] = {}   # jid -> {"job", "node", "cores", "left"}
    queue: list = []
    ts = sorted(jobs, key=lambda j: j.arrival)
    now, i = 0.0, 0
    busy_gpu_s = alloc_gpu_s = 0.0
    jct, util_by_type = {}, {nt.name: [0.0, 0.0] for nt in nodes}

    def rates():
        return {jid: st["job"].model(inst[st["node"]][0].speed)(st["cores"]) for jid, st in running.items()}

    def reallocate(k):
        here = [st for st in running.values() if st["node"] == k]
        if not here:
            return
        if policy == "oracle":
            for st, c in zip(here, allocate("adaptive", [st["job"] for st in here], inst[k][0], floor=floor)):
                st["cores"] = c
        else:
            used = sum(st["cores"] for st in here if st["cores"] is not None)
            for st in here:
                if st["cores"] is None:
                    want = allocate(policy, [st["job"]], inst[k][0])[0]
                    st["cores"] = max(1, min(want, inst[k][0].cores - used))
                    used += st["cores"]

    def try_start():
        nonlocal queue
        rest = []
        for j in queue:
            k = next((k for k, (nt, _) in enumerate(inst) if nt.name == j.gpu_type and free[k] >= j.gpus), None)
            if k is None:
                rest.append(j)
                continue
            free[k] -= j.gpus
            running[j.jid] = {"job": j, "node": k, "cores": None, "left": j.work}
            reallocate(k)
        queue = rest

    while i < len(ts) or running or queue:
        r = rates()
        t_fin = min((now + st["left"] / r[jid] for jid, st in running.items()), default=np.inf)
        t_arr = ts[i].arrival if i < len(ts) else np.inf
        t = min(t_fin, t_arr)
        if not np.isfinite(t):
            raise RuntimeError("jobs wait for GPUs that do not exist")
        dt = t - now
        for jid, st in running.items():
            m = st["job"].model(inst[st["node"]][0].speed)
            st["left"] -= r[jid] * dt
            g = st["job"].gpus
            busy = g * r[jid] / m.gpu_rate * dt
            busy_gpu_s += busy
            alloc_gpu_s += g * dt
            u = util_by_type[inst[st["node"]][0].name]
            u[0] += busy
            u[1] += g * dt
        now = t
        done = [jid for jid, st in running.items() if st["left"] <= 1e-9 * st["job"].work]
        for jid in done:
            st = running.pop(jid)
            free[st["node"]] += st["job"].gpus
            jct[jid] = now - st["job"].arrival
            reallocate(st["node"])
        while i < len(ts) and ts[i].arrival <= now:
            queue.append(ts[i])
            i += 1
        try_start()
    j = np.array(list(jct.values()))
    return {"policy": policy, "gpu_utilisation": busy_gpu_s / alloc_gpu_s, "mean_jct_h": float(j.mean() / 3600),
            "p90_jct_h": float(np.quantile(j, 0.9) / 3600), "makespan_h": now / 3600,
            "utilisation_by_type": {k: v[0] / v[1] if v[1] else None for k, v in util_by_type.items()}}




def run_study(quick: bool = True, seed: int = 0, profile: bool = True) -> dict:
    """Profile the real loader (1 and 2 workers; 1, 2, 3 with the 2-worker point held out when not
    quick), then the cluster comparison on the engine (:func:`simulate`) for every policy over the
    same job stream, a fairness-floor variant, and the learned allocator's sensitivity to the
    profiling noise and the exponent prior."""
    prof = fitp = None
    if profile:
        prof = profile_loader((1, 2) if quick else (1, 2, 3), images=600 if quick else 1797)
        prof["host_cpus"] = os.cpu_count()
        prof["load_avg_1min"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        fitp = fit_profile(prof["cores"], prof["samples_per_s"], holdout=None if quick else 1)
    loader = fitp.pop("model") if fitp else None
    nodes = heterogeneous_cluster()
    jobs = job_stream(150 if quick else 600, nodes, seed, loader=loader)
    res = {p: simulate(jobs, nodes, p, seed) for p in POLICIES}
    for p in ("adaptive", "oracle"):
        res[f"{p}+floor0.5"] = simulate(jobs, nodes, p, seed, floor=0.5)
    even = res["even"]["gpu_utilisation"]
    sens = []
    for kw in ({"profile_noise": 0.0}, {"profile_noise": 0.05}, {}, {"profile_noise": 0.2},
               {"alpha_prior": 0.6}, {"prior_sd": None}, {"profile_s": 600.0}):
        r = simulate(jobs, nodes, "adaptive", seed, **kw)
        sens.append({"setting": kw or {"default": True}, "gpu_utilisation": r["gpu_utilisation"],
                     "gain_over_even": r["gpu_utilisation"] / even - 1, "mean_jct_h": r["mean_jct_h"],
                     "fit_curve_mean_abs_err": r["fit_error"]["curve_mean_abs_err"]})
    gain = {q: {p: res[q]["gpu_utilisation"] / res[p]["gpu_utilisation"] - 1 for p in ("even", "static")}
            for q in ("adaptive", "oracle")}
    notes = [
        "adaptive = allocation on curves fitted (MAP, alpha prior N(0.85, 0.15)) from 3 noisy (10% log-normal) "
        "profiled points per job, after 3 x 120 s of profiling at its even share; oracle = the true curves, "
        "no profiling. The gap oracle - adaptive is the price of learning.",
        "The earlier p90 JCT of adaptive (16.6 h vs 5.3 h for even) was not CPU starvation: run times (JCT - "
        "wait) had a lower p90 under adaptive. GPU types were drawn uniformly, so the 16 A100 GPUs got a third "
        "of the jobs at an offered load > 1; their queue grew without bound and 8-GPU jobs, passed by smaller "
        "ones (backfilling), waited 46 h under even (only 6.5% of jobs, above the p90) but 28 h under "
        "adaptive, which pushed the smaller A100 jobs' waits above the p90. JCTs of an overloaded type "
        "measure the stream's length, not the allocator; the stream now draws types in proportion to "
        "their GPUs (offered load 0.4-0.6 at full GPU speed, see offered_load), and a fairness floor is "
        "offered as a variant.",
        f"CODA (ICDCS 2020) reports +20.8% GPU utilisation; ours: adaptive {100 * gain['adaptive']['even']:+.1f}% "
        f"and oracle {100 * gain['oracle']['even']:+.1f}% over even split, "
        f"{100 * gain['adaptive']['static']:+.1f}% / {100 * gain['oracle']['static']:+.1f}% over static rules. "
        "The gain over an even split is bounded by how many jobs the even share starves while others on the "
        "same node leave cores idle: with our core needs (0.5-10 cores/GPU by type) and 3-8 cores/GPU nodes "
        "many jobs are near their need already. CODA's baseline was the production static allocation of a "
        "real cluster, its jobs' curves measured, and it also co-locates CPU jobs; we reproduce the "
        "mechanism, not its workload, and report our figure.",
    ]
    return {"profile": prof, "loader_fit": fitp, "warnings": list(fitp["warnings"]) if fitp else [],
            "nodes": [nt.__dict__ for nt in nodes], "jobs": len(jobs),
            "engine": "hwcosim.models.systems.cluster.engine.Simulator",
            "offered_load": offered_load(jobs, nodes), "results": res, "adaptive_sensitivity": sens,
            "adaptive_gain_over": gain["adaptive"], "oracle_gain_over": gain["oracle"],
            "adaptive_cluster_gain_over": {p: res["adaptive"]["cluster_gpu_utilisation"]
                                           / res[p]["cluster_gpu_utilisation"] - 1 for p in ("even", "static")},
            "jct_ratio_over_adaptive": {p: res[p]["mean_jct_h"] / res["adaptive"]["mean_jct_h"]
                                        for p in ("even", "static", "oracle")},
            "notes": notes}


# ---- the Alibaba GPU trace 2023 ------------------------------------------------------------------
def _trace_rows(name: str, path=None) -> list[dict]:
    import csv

    if path is None:
        from hwcosim.models.data import dataset
        path = dataset("alibaba-gpu-2023", name)
    return list(csv.DictReader(open(path, newline="")))


def trace_cluster(fraction: float = 0.02, path=None) -> list[NodeType]:
    """The trace's GPU nodes (``openb_node_list_gpu_node.csv``) grouped by (GPU model, GPUs, cores),
    each group's count scaled by ``fraction`` (at least one node). GPU speed 1 for every model:
    the study is about CPU, and the trace's task durations are on whatever GPU ran them."""
    if not 0 < fraction <= 1:
        raise UsageError(f"fraction must be in (0, 1], not {fraction}")
    groups: dict = {}
    for r in _trace_rows("openb_node_list_gpu_node.csv", path):
        key = (r["model"], int(r["gpu"]), int(r["cpu_milli"]) // 1000)
        groups[key] = groups.get(key, 0) + 1
    return [NodeType(f"{m}-{g}g-{c}c", g, c, max(1, round(n * fraction)))
            for (m, g, c), n in sorted(groups.items())]


def trace_jobs(nodes, n: int | None = 200, seed: int = 0, need_median: float = 1.0, need_sigma: float = 0.5,
               load: float = 0.6, gpu_rate: float = 1000.0, max_hours: float = 24.0,
               path=None) -> tuple[list[CPUJob], dict]:
    """Jobs from the trace's whole-GPU tasks (``num_gpu >= 1``, ``gpu_milli = 1000``): GPUs, requested
    cores (``cpu_milli / 1000``), arrival order and duration (deletion - creation) are the trace's.

    What the trace does not record is each job's true CPU need: here the cores per GPU at which its
    GPU saturates = requested cores per GPU x lognormal(log ``need_median``, ``need_sigma``), so the
    request is right on average when ``need_median`` = 1 but not job by job. The true curve is an
    :class:`AmdahlCurve` (serial fraction U(0, 0.1)) reaching ``gpu_rate`` per GPU there. A job
    goes to a node type with enough GPUs and cores for its request, drawn in proportion to GPUs.
    Arrivals keep the trace's order and gaps, compressed so that the offered GPU load of the
    (scaled) cluster is ``load`` (the trace's own load on 6,212 GPUs is ~0.2%). Durations are capped
    at ``max_hours``: the 58 tasks (1.5%) longer than a day hold 87% of the trace's whole-GPU
    GPU-hours (most are still running at the trace's end) and would alone set the makespan and
    the compression. Returns the jobs and
    ``{"time_compression", "tasks_in_trace"}``.
    """
    rows = [r for r in _trace_rows("openb_pod_list_default.csv", path)
            if int(r["num_gpu"] or 0) >= 1 and int(r["gpu_milli"] or 0) in (0, 1000)]
    rng = np.random.default_rng(seed)
    if n is not None and n < len(rows):
        rows = [rows[i] for i in np.sort(rng.choice(len(rows), n, replace=False))]
    rows.sort(key=lambda r: float(r["creation_time"]))
    gcap = np.array([nt.gpus * nt.count for nt in nodes], float)
    t0 = float(rows[0]["creation_time"])
    dur = np.array([min(max(float(r["deletion_time"]) - float(r["creation_time"]), 60.0), max_hours * 3600)
                    for r in rows])
    g = np.array([int(r["num_gpu"]) for r in rows])
    arr = np.array([float(r["creation_time"]) - t0 for r in rows])
    span = max(arr[-1], 1.0)
    k = float((g * dur).sum() / (load * gcap.sum() * span))
    jobs = []
    for i, r in enumerate(rows):
        req = int(r["cpu_milli"]) / 1000
        ok = np.array([nt.gpus >= g[i] and nt.cores >= req for nt in nodes])
        if not ok.any():
            ok = np.array([nt.gpus >= g[i] for nt in nodes])
        w = np.where(ok, gcap, 0)
        nt = nodes[int(rng.choice(len(nodes), p=w / w.sum()))]
        need = max(req / g[i], 0.5) * float(rng.lognormal(np.log(need_median), need_sigma))
        serial = float(rng.uniform(0.0, 0.1))
        big_n = max(need * g[i], 1.0)
        rate = gpu_rate * g[i]
        r1 = rate * (1 + serial * (big_n - 1)) / big_n     # reaches the ceiling at big_n cores
        jobs.append(CPUJob(i, "trace", int(g[i]), nt.name, arr[i] * k, r1, 1.0, gpu_rate, gpu_rate * g[i] * dur[i],
                           serial=serial, request_cores=req))
    return jobs, {"time_compression": k, "tasks_sampled": len(rows)}


def run_trace_study(quick: bool = True, seed: int = 0, path=None) -> dict:
    """Even / static (the trace's requested cores) / adaptive (learned power law) / oracle on the
    trace's jobs and node types, and the adaptive gain's sensitivity to how far true needs
    deviate from the requests (``need_median``, ``need_sigma``), which the trace does not record."""
    nodes = trace_cluster(0.02 if quick else 0.08, path)
    n = 120 if quick else 1200
    jobs, meta = trace_jobs(nodes, n, seed, path=path)
    res = {p: simulate(jobs, nodes, p, seed) for p in POLICIES}
    gain = {q: {p: res[q]["gpu_utilisation"] / res[p]["gpu_utilisation"] - 1 for p in ("even", "static")}
            for q in ("adaptive", "oracle")}
    sens = []
    grid = ((1.0, 0.25), (1.0, 0.8), (1.4, 0.5)) if quick else \
        ((1.0, 0.25), (1.0, 0.8), (0.7, 0.5), (1.4, 0.5), (0.7, 0.8), (1.4, 0.8))
    for med, sd in grid:
        js, _ = trace_jobs(nodes, n, seed, need_median=med, need_sigma=sd, path=path)
        st, ad = (simulate(js, nodes, p, seed)["gpu_utilisation"] for p in ("static", "adaptive"))
        sens.append({"need_median": med, "need_sigma": sd, "static": st, "adaptive": ad,
                     "adaptive_gain_over_static": ad / st - 1})
    band = [gain["adaptive"]["static"]] + [x["adaptive_gain_over_static"] for x in sens]
    return {"nodes": [nt.__dict__ for nt in nodes], "jobs": len(jobs), **meta,
            "request_cores_per_gpu_percentiles": {str(q): float(np.percentile([j.request_cores / j.gpus for j in jobs],
                                                                              q)) for q in (5, 25, 50, 75, 95)},
            "offered_load": offered_load(jobs, nodes), "results": res,
            "adaptive_gain_over": gain["adaptive"], "oracle_gain_over": gain["oracle"],
            "sensitivity": sens,
            "sensitive_to": {"parameter": "true CPU need vs the trace's request (median ratio 0.7-1.4, "
                                          "log-sd 0.25-0.8)", "band": [float(min(band)), float(max(band))]},
            "paper": {"gpu_utilisation_gain": 0.208, "source": "CODA, ICDCS 2020: +20.8% GPU utilisation over "
                                                                "static allocation"},
            "notes": ["static = each job gets the cores it requested in the trace (cpu_milli / 1000), the "
                      "production allocation; even = node cores / GPUs per GPU; adaptive learns a power law "
                      "from 3 noisy points while the true curves are Amdahl-shaped (different family)"]}

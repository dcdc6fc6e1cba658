"""ElasticBatch: SLO-aware serving of dynamic input sizes on MIG instances.

After "ElasticBatch" (IEEE TPDS 2024, doi 10.1109/TPDS.2024.3431189): requests of varying input
size are bucketised; a latency predictor trained on a few profiled points picks, per bucket, a
MIG instance profile and a batch size that meet the latency SLO with the fewest GPUs; instances
are packed onto GPUs in valid MIG layouts. The paper reports 50% fewer GPU instances than with
MIG disabled. The paper's details are not all public (SPECS marks them unconfirmed); the
algorithm here is our reading, stated in each docstring.

Outside checks (the analytical :class:`MigInstance` plays the cluster in :func:`run_study`, and the
predictor's features are that formula's terms, so its in-model error is ~0 by construction):
:func:`validate_published` fits the predictor on a few points of NVIDIA's published BERT-Base
latency tables (TensorRT ``demo/BERT/README.md``) and scores the rest; :func:`run_trace_study`
plans MIG instances for the Alibaba GPU trace 2023's GPU-sharing tasks (``gpu_milli < 1000``).

MIG rules (source: NVIDIA "Multi-Instance GPU User Guide", section *Supported MIG Profiles*, and
``nvidia-smi mig -lgipp`` placements). A GPU has 8 memory-slice positions; a GPU-instance
profile occupies ``size`` consecutive positions starting at one of its allowed ``starts``:

======== ============ ===== ======= ===========================
GPU      profile      count  size    start positions
======== ============ ===== ======= ===========================
A100 40G 1g.5gb        7     1       0 1 2 3 4 5 6
A100 40G 2g.10gb       3     2       0 2 4
A100 40G 3g.20gb       2     4       0 4
A100 40G 4g.20gb       1     4       0
A100 40G 7g.40gb       1     8       0
H100 80G 1g.10gb       7     1       0 1 2 3 4 5 6
H100 80G 1g.20gb       4     2       0 2 4 6
H100 80G 2g.20gb       3     2       0 2 4
H100 80G 3g.40gb       2     4       0 4
H100 80G 4g.40gb       1     4       0
H100 80G 7g.80gb       1     8       0
======== ============ ===== ======= ===========================

(position 7 alone is never usable by a 1g profile: there are only 7 compute slices.)
:func:`valid_layouts` enumerates every maximal combination; :func:`pack` places instances.

Devices are pluggable (:class:`Device`: ``latency(batch, input_size)`` in seconds and
``capacity`` in tokens). :class:`MigInstance` is an analytical GPU-slice model;
:class:`BBSDevice` wraps the BBS SpMxV / LSTM cycle models (``hwcosim.models.bbs.spmxv.CycleModel``,
``hwcosim.models.bbs.lstm.LSTMCycleModel``) at a stated clock.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["MigProfile", "MigGPU", "A100_40GB", "H100_80GB", "valid_layouts", "pack", "Device", "MigInstance",
           "BBSDevice", "Workload", "BERT_BASE", "ServingConfig", "LatencyPredictor", "plan", "plan_device", "simulate",
           "run_study", "PUBLISHED_BERT_BASE_FP16_MS", "TableDevice", "validate_published", "trace_sharing_tasks",
           "profile_for_share", "oracle_gpus", "plan_trace_snapshot", "run_trace_study"]


@dataclass(frozen=True)
class MigProfile:
    """A GPU-instance profile: ``g`` compute slices, ``mem_gb``, ``size`` positions, ``starts``."""

    name: str
    g: int
    mem_gb: float
    size: int
    starts: tuple

    def __post_init__(self):
        if self.g < 1 or self.size < 1 or self.mem_gb <= 0 or not self.starts:
            raise ValueError(f"MIG profile {self.name!r}: bad g/size/mem/starts")
        if any(s % self.size and self.size != 8 for s in self.starts if self.size in (2, 4)):
            raise ValueError(f"MIG profile {self.name!r}: starts {self.starts} not aligned to size {self.size}")


@dataclass(frozen=True)
class MigGPU:
    """A MIG-capable GPU: 8 positions, its profiles, and the dense fp16 peak of the whole GPU."""

    name: str
    profiles: tuple
    peak_tflops: float
    slices: int = 7
    positions: int = 8

    def __post_init__(self):
        for p in self.profiles:
            if any(s + p.size > self.positions for s in p.starts):
                raise ValueError(f"{self.name}: profile {p.name} overruns {self.positions} positions")

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise UsageError(f"{self.name}: no MIG profile {name!r}; profiles: {[p.name for p in self.profiles]}")

    @property
    def full(self) -> MigProfile:
        return max(self.profiles, key=lambda p: p.size)


A100_40GB = MigGPU("A100-40GB", (
    MigProfile("1g.5gb", 1, 5, 1, (0, 1, 2, 3, 4, 5, 6)),
    MigProfile("2g.10gb", 2, 10, 2, (0, 2, 4)),
    MigProfile("3g.20gb", 3, 20, 4, (0, 4)),
    MigProfile("4g.20gb", 4, 20, 4, (0,)),
    MigProfile("7g.40gb", 7, 40, 8, (0,)),
), peak_tflops=312.0)

H100_80GB = MigGPU("H100-80GB", (
    MigProfile("1g.10gb", 1, 10, 1, (0, 1, 2, 3, 4, 5, 6)),
    MigProfile("1g.20gb", 1, 20, 2, (0, 2, 4, 6)),
    MigProfile("2g.20gb", 2, 20, 2, (0, 2, 4)),
    MigProfile("3g.40gb", 3, 40, 4, (0, 4)),
    MigProfile("4g.40gb", 4, 40, 4, (0,)),
    MigProfile("7g.80gb", 7, 80, 8, (0,)),
), peak_tflops=989.0)


def _fits(occ: int, p: MigProfile, s: int) -> bool:
    mask = ((1 << p.size) - 1) << s
    return not occ & mask


def valid_layouts(gpu: MigGPU) -> list[tuple[tuple[str, int], ...]]:
    """All maximal MIG layouts of ``gpu``: tuples of ``(profile, start)`` with no overlap.

    A compute-slice budget of ``gpu.slices`` also applies (4g + 3g = 7 is valid; 4g + 2g + 1g = 7).
    """
    placements = [(p, s) for p in gpu.profiles for s in p.starts]
    out = set()

    def rec(i, occ, used, cur):
        extended = False
        for j in range(i, len(placements)):
            p, s = placements[j]
            if _fits(occ, p, s) and used + p.g <= gpu.slices:
                extended = True
                rec(j + 1, occ | (((1 << p.size) - 1) << s), used + p.g, cur + [(p.name, s)])
        if not extended:
            # maximal only if no placement at all fits (not just among later ones)
            if all(not (_fits(occ, p, s) and used + p.g <= gpu.slices) for p, s in placements):
                out.add(tuple(sorted(cur, key=lambda x: x[1])))

    rec(0, 0, 0, [])
    return sorted(out)


def pack(gpu: MigGPU, instances: list[str]) -> list[list[tuple[str, int]]]:
    """Place instance profiles on as few GPUs as possible (first-fit decreasing on valid starts).

    Returns one ``[(profile, start), ...]`` list per GPU. Largest profiles first; each goes to the
    first GPU with a free aligned start and enough compute slices left.
    """
    profs = sorted((gpu.profile(n) for n in instances), key=lambda p: (-p.size, -p.g))
    gpus: list[list] = []  # [occ, used, placed]
    for p in profs:
        for gi in gpus:
            s = next((s for s in p.starts if _fits(gi[0], p, s)), None)
            if s is not None and gi[1] + p.g <= gpu.slices:
                gi[0] |= ((1 << p.size) - 1) << s
                gi[1] += p.g
                gi[2].append((p.name, s))
                break
        else:
            gpus.append([((1 << p.size) - 1) << p.starts[0], p.g, [(p.name, p.starts[0])]])
    return [g[2] for g in gpus]


@runtime_checkable
class Device(Protocol):
    """What the scheduler needs from a serving device."""

    name: str
    capacity: float  # largest batch * input_size (tokens) that fits in memory

    def latency(self, batch: int, input_size: int) -> float: ...


@dataclass(frozen=True)
class Workload:
    """A transformer-encoder inference cost: FLOPs per token, quadratic attention FLOPs, memory.

    ``flops(b, s) = b * (s * per_token + s^2 * per_token_pair)``. BERT-base: ~2 x 110 M FLOPs per
    token, attention ``4 * layers * d = 3.7e4`` per token pair; ~0.44 GB fp16 weights (plus
    runtime), ~0.5 MB activations per token in flight.
    """

    name: str = "bert-base"
    per_token: float = 2.2e8
    per_token_pair: float = 3.7e4
    weights_gb: float = 1.0
    act_mb_per_token: float = 0.5


BERT_BASE = Workload()


@dataclass(frozen=True)
class MigInstance:
    """Analytical latency of one MIG instance (the ground truth of the simulated cluster).

    ``t = t_launch + flops / (eff * peak * g / 7) + t_sat * g / 7 ...`` -- precisely:
    ``t = t_launch + (flops + g * w_half) / (eff * peak_slice * g)``: a kernel needs
    ``w_half`` FLOPs per slice to reach half occupancy, so a small batch on a large instance wastes
    slices (the reason MIG helps). ``eff`` = achieved fraction of peak at full occupancy.
    """

    gpu: MigGPU
    profile: MigProfile
    workload: Workload = BERT_BASE
    t_launch_s: float = 2.0e-3
    eff: float = 0.35
    w_half: float = 4.0e10

    @property
    def name(self) -> str:
        return f"{self.gpu.name}/{self.profile.name}"

    @property
    def capacity(self) -> float:
        return (self.profile.mem_gb - self.workload.weights_gb) * 1e3 / self.workload.act_mb_per_token

    def latency(self, batch: int, input_size: int) -> float:
        w = self.workload
        flops = batch * (input_size * w.per_token + input_size ** 2 * w.per_token_pair)
        peak_slice = self.eff * self.gpu.peak_tflops * 1e12 / self.gpu.slices
        g = self.profile.g
        return self.t_launch_s + (flops + g * self.w_half) / (peak_slice * g)


@dataclass(frozen=True)
class BBSDevice:
    """A BBS accelerator as a serving device, timed by its cycle model at ``clock_mhz``.

    - LSTM engine (``hwcosim.models.bbs.lstm.LSTMCycleModel``): a request is a sequence of
      ``input_size`` steps; a batch of ``b`` runs back to back: ``expected(b, input_size)`` cycles.
    - SpMxV engine (``hwcosim.models.bbs.spmxv.CycleModel``): a request is ``input_size`` vectors; a batch is
      ``expected(b * input_size)`` cycles (vectors stream through the double-buffered memory).

    ``capacity`` is the largest ``batch * input_size`` accepted (the on-chip buffer, default
    4096 steps/vectors).
    """

    model: object
    clock_mhz: float = 200.0
    capacity: float = 4096.0
    name: str = "bbs"

    def __post_init__(self):
        from hwcosim.models.bbs.lstm import LSTMCycleModel
        from hwcosim.models.bbs.spmxv import CycleModel

        if not isinstance(self.model, (CycleModel, LSTMCycleModel)):
            raise UsageError("BBSDevice: model must be a CycleModel or LSTMCycleModel, "
                             f"not {type(self.model).__name__}")
        if not self.clock_mhz > 0:
            raise UsageError(f"BBSDevice: clock must be > 0 MHz, not {self.clock_mhz!r}")

    def latency(self, batch: int, input_size: int) -> float:
        from hwcosim.models.bbs.lstm import LSTMCycleModel

        if isinstance(self.model, LSTMCycleModel):
            cyc = self.model.expected(int(batch), int(input_size))
        else:
            cyc = self.model.expected(int(batch) * int(input_size))
        return cyc / (self.clock_mhz * 1e6)


# -- serving configuration, predictor, planner ----------------------------------------------------

@dataclass(frozen=True)
class ServingConfig:
    """Traffic and SLO.

    Parameters
    ----------
    rate : float
        Total request rate (requests/s), Poisson.
    slo_s : float
        Latency SLO per request (queueing + batching + compute).
    buckets : tuple of int
        Upper bounds of the input-size buckets; a request is padded to its bucket's bound.
    size_median, size_sigma : float
        Input sizes ~ lognormal(log(median), sigma), clipped to [1, buckets[-1]].
    batches : tuple of int
        Batch sizes the planner may choose.
    rho_max : float
        Highest planned instance load (headroom for Poisson bursts).
    seed : int
    """

    rate: float = 2000.0
    slo_s: float = 0.15
    buckets: tuple = (32, 64, 128, 256, 512)
    size_median: float = 60.0
    size_sigma: float = 0.8
    batches: tuple = (1, 2, 4, 8, 16, 32, 64)
    rho_max: float = 0.7
    seed: int = 0

    def __post_init__(self):
        if not (self.rate > 0 and self.slo_s > 0 and 0 < self.rho_max < 1):
            raise UsageError("ElasticBatch: rate and slo_s must be > 0, rho_max in (0, 1)")
        if not self.buckets or list(self.buckets) != sorted(set(self.buckets)) or self.buckets[0] < 1:
            raise UsageError(f"ElasticBatch: buckets must be increasing positive bounds, not {self.buckets!r}")
        if not self.batches or min(self.batches) < 1:
            raise UsageError(f"ElasticBatch: batches must be positive, not {self.batches!r}")

    def bucket_shares(self) -> np.ndarray:
        """Probability of each bucket under the lognormal size law (exact, via the normal CDF)."""
        from scipy.stats import norm

        edges = np.log(np.array((0.5,) + tuple(b + 0.5 for b in self.buckets)))
        cdf = norm.cdf((edges - math.log(self.size_median)) / self.size_sigma)
        cdf[-1] = 1.0
        cdf[0] = 0.0
        return np.diff(cdf)

    def sample_sizes(self, n: int, rng: np.random.Generator) -> np.ndarray:
        s = np.exp(rng.normal(math.log(self.size_median), self.size_sigma, n))
        return np.clip(np.rint(s), 1, self.buckets[-1]).astype(int)


class LatencyPredictor:
    """Per-device latency regression from a few profiled points (scikit-learn).

    Features ``[b*s, b*s^2, b, s, 1]`` (the cost terms of a batched encoder and a fixed cost),
    fitted by non-negative least squares (``LinearRegression(positive=True, fit_intercept=False)``:
    the fixed cost is a coefficient too, so it cannot go negative; with a free intercept the fit
    on measured numpy timings gave -0.85 ms and negative latencies at small shapes) to measured
    latencies with multiplicative noise. ``n_points`` and ``profile_time_s`` record the profiling cost.
    """

    def __init__(self, noise: float = 0.03, reps: int = 20, seed: int = 0):
        self.noise, self.reps, self.seed = noise, reps, seed
        self.models: dict[str, object] = {}
        self.n_points = 0
        self.profile_time_s = 0.0

    @staticmethod
    def _feat(b, s):
        b = np.asarray(b, float)
        s = np.asarray(s, float)
        return np.stack([b * s, b * s * s, b, s, np.ones_like(b)], axis=-1)

    def profile(self, dev: Device, batches, sizes) -> None:
        from sklearn.linear_model import LinearRegression

        rng = np.random.default_rng([self.seed, len(self.models)])
        pts = [(b, s) for b in batches for s in sizes if b * s <= dev.capacity]
        if len(pts) < 5:
            raise UsageError(f"ElasticBatch: {dev.name}: {len(pts)} profiling points fit; need >= 5")
        y = []
        for b, s in pts:
            t = dev.latency(b, s)
            meas = t * (1 + self.noise * rng.standard_normal(self.reps))
            y.append(float(np.median(meas)))
            self.profile_time_s += float(meas.sum())
        self.n_points += len(pts)
        b, s = np.array(pts).T
        self.models[dev.name] = LinearRegression(positive=True, fit_intercept=False).fit(self._feat(b, s), np.array(y))

    def predict(self, dev: Device, batch, size) -> np.ndarray:
        return self.models[dev.name].predict(self._feat(np.atleast_1d(batch), np.atleast_1d(size)).reshape(-1, 5))


def _options(devs, cfg: ServingConfig, bucket: int, rate: float, lat):
    """Per device profile, the best batch: (instances, batch, latency) meeting the SLO, or None.

    Planning rule: a request may wait for the batch in service and then its own batch, so
    ``2 * latency(b) <= SLO``; ``n = ceil(rate * latency / (rho_max * b))`` instances.
    """
    out = {}
    for name, dev in devs.items():
        best = None
        for b in cfg.batches:
            if b * bucket > dev.capacity:
                continue
            t = float(lat(dev, b, bucket))
            if 2 * t > cfg.slo_s:
                continue
            n = max(1, math.ceil(rate * t / (cfg.rho_max * b))) if rate > 0 else 0
            if best is None or n < best[0] or (n == best[0] and t < best[2]):
                best = (n, b, t)
        if best is not None:
            out[name] = best
    return out


def plan(gpu: MigGPU, cfg: ServingConfig, mode: str, predictor: LatencyPredictor | None = None,
         workload: Workload = BERT_BASE) -> dict:
    """Choose (profile, batch, instances) per bucket and pack the instances onto GPUs.

    mode:
      - ``"elasticbatch"``: latencies from ``predictor``; per bucket the option using the fewest
        memory positions (``n * size``), then first-fit-decreasing MIG packing;
      - ``"oracle"``: true latencies; exhaustive search over every combination of per-bucket
        profile choices, each packed, keeping the fewest GPUs (then fewest positions);
      - ``"nomig"``: true latencies, whole GPUs only (MIG disabled), same bucketing.
    """
    if mode not in ("elasticbatch", "oracle", "nomig"):
        raise UsageError(f"ElasticBatch: mode must be elasticbatch|oracle|nomig, not {mode!r}")
    profiles = [gpu.full] if mode == "nomig" else list(gpu.profiles)
    devs = {p.name: MigInstance(gpu, p, workload) for p in profiles}
    if mode == "elasticbatch":
        if predictor is None:
            raise UsageError("ElasticBatch: mode 'elasticbatch' needs a fitted LatencyPredictor")

        def lat(d, b, s):
            return predictor.predict(d, b, s)[0]
    else:
        def lat(d, b, s):
            return d.latency(b, s)
    rates = cfg.rate * cfg.bucket_shares()
    opts = []
    for k, bk in enumerate(cfg.buckets):
        o = _options(devs, cfg, bk, rates[k], lat)
        if not o:
            raise UsageError(f"ElasticBatch: no profile meets the {cfg.slo_s * 1e3:.0f} ms SLO for bucket "
                             f"<= {bk}; relax the SLO or shrink the bucket")
        opts.append(o)

    def realise(choice):
        inst = [c for k, c in enumerate(choice) for _ in range(opts[k][c][0])]
        return pack(gpu, inst)

    if mode == "oracle":
        best = None
        for choice in itertools.product(*[sorted(o) for o in opts]):
            layout = realise(choice)
            key = (len(layout), sum(gpu.profile(c).size * opts[k][c][0] for k, c in enumerate(choice)))
            if best is None or key < best[0]:
                best = (key, choice, layout)
        choice, layout = best[1], best[2]
    else:
        choice = tuple(min(o, key=lambda c: (gpu.profile(c).size * o[c][0], o[c][2])) for o in opts)
        layout = realise(choice)
    per_bucket = [{"bucket": bk, "rate": float(rates[k]), "profile": choice[k], "instances": opts[k][choice[k]][0],
                   "batch": opts[k][choice[k]][1], "planned_latency_s": opts[k][choice[k]][2]}
                  for k, bk in enumerate(cfg.buckets)]
    return {"mode": mode, "gpus": len(layout), "instances": sum(p["instances"] for p in per_bucket),
            "layout": layout, "buckets": per_bucket}


def plan_device(dev: Device, cfg: ServingConfig, predictor: LatencyPredictor) -> dict:
    """ElasticBatch's per-bucket batch choice when one device serves every bucket.

    The rule of :func:`plan` (``_options``) with latencies from the fitted ``predictor``: a batch
    is allowed when ``2 * latency <= SLO``; among the allowed ones the batch needing the least
    device capacity at the bucket's share of ``cfg.rate`` wins (then the lower latency). With one
    shared device the capacity is the fraction ``rate * latency / (rho_max * batch)`` (rounding
    every bucket up to a whole instance, as for MIG slices, means nothing when all buckets share
    one device). A bucket with no allowed batch gets the smallest batch. Returns
    ``{bucket: batch}``.
    """
    if dev.name not in predictor.models:
        raise UsageError(f"ElasticBatch: the predictor was not fitted on {dev.name!r}")
    rates = cfg.rate * cfg.bucket_shares()
    out = {}
    for k, bk in enumerate(cfg.buckets):
        best = None
        for b in cfg.batches:
            if b * bk > dev.capacity:
                continue
            t = float(predictor.predict(dev, b, bk)[0])
            if 2 * t > cfg.slo_s:
                continue
            need = float(rates[k]) * t / (cfg.rho_max * b)
            if best is None or need < best[0] - 1e-12 or (abs(need - best[0]) <= 1e-12 and t < best[2]):
                best = (need, b, t)
        out[int(bk)] = int(best[1]) if best is not None else int(min(cfg.batches))
    return out


def simulate(gpu: MigGPU, cfg: ServingConfig, pl: dict, duration_s: float = 10.0, noise: float = 0.03,
             workload: Workload = BERT_BASE) -> dict:
    """Serve Poisson traffic on a plan; true latencies with ``noise``; dynamic batching.

    Each request goes to its bucket (padded to the bound) and to one of the bucket's instances
    uniformly at random; an idle instance takes up to ``batch`` queued requests at once.
    Returns SLO attainment, p99 latency, utilisation = busy slice-seconds / (7 * GPUs * T) and
    flop_utilisation = padded-request FLOPs / (dense peak * GPUs * T).
    """
    rng = np.random.default_rng([cfg.seed, 7])
    n = rng.poisson(cfg.rate * duration_s)
    arr = np.sort(rng.uniform(0, duration_s, n))
    sizes = cfg.sample_sizes(n, rng)
    bidx = np.searchsorted(np.asarray(cfg.buckets), sizes)
    lat_all = np.empty(n)
    busy = flops = 0.0
    for k, bp in enumerate(pl["buckets"]):
        dev = MigInstance(gpu, gpu.profile(bp["profile"]), workload)
        sel = np.flatnonzero(bidx == k)
        if len(sel) == 0:
            continue
        which = rng.integers(0, bp["instances"], len(sel))
        for i in range(bp["instances"]):
            reqs = sel[which == i]
            t_free, j = 0.0, 0
            while j < len(reqs):
                start = max(t_free, arr[reqs[j]])
                m = j + 1
                while m < len(reqs) and m - j < bp["batch"] and arr[reqs[m]] <= start:
                    m += 1
                svc = dev.latency(m - j, bp["bucket"]) * (1 + noise * rng.standard_normal())
                t_free = start + svc
                lat_all[reqs[j:m]] = t_free - arr[reqs[j:m]]
                busy += svc * dev.profile.g
                flops += (m - j) * (bp["bucket"] * workload.per_token + bp["bucket"] ** 2 * workload.per_token_pair)
                j = m
    return {"requests": int(n), "slo_attainment": float(np.mean(lat_all <= cfg.slo_s)),
            "p99_latency_s": float(np.quantile(lat_all, 0.99)),
            "utilisation": busy / (gpu.slices * max(pl["gpus"], 1) * duration_s),
            "flop_utilisation": flops / (gpu.peak_tflops * 1e12 * max(pl["gpus"], 1) * duration_s)}


def run_study(quick: bool = True, seed: int = 0, gpu_name: str = "A100-40GB") -> dict:
    """ElasticBatch vs MIG disabled vs the exhaustive oracle at a few loads; profiling cost."""
    gpu = {"A100-40GB": A100_40GB, "H100-80GB": H100_80GB}.get(gpu_name)
    if gpu is None:
        raise UsageError(f"ElasticBatch: GPU must be A100-40GB or H100-80GB, not {gpu_name!r}")
    rates = [1000.0, 3000.0] if quick else [500.0, 1000.0, 2000.0, 4000.0, 8000.0]
    base = ServingConfig(seed=seed)
    pred = LatencyPredictor(seed=seed)
    prof_b, prof_s = (1, 8, 32), (32, 128, 512)
    for p in gpu.profiles:
        pred.profile(MigInstance(gpu, p), prof_b, prof_s)
    # exhaustive profiling: every (profile, batch, bucket) the planner may ask for
    full_pts = sum(1 for p in gpu.profiles for b in base.batches for s in base.buckets
                   if b * s <= MigInstance(gpu, p).capacity)
    full_time = sum(MigInstance(gpu, p).latency(b, s) * pred.reps for p in gpu.profiles for b in base.batches
                    for s in base.buckets if b * s <= MigInstance(gpu, p).capacity)
    err = []
    for p in gpu.profiles:
        d = MigInstance(gpu, p)
        for b in base.batches:
            for s in base.buckets:
                if b * s <= d.capacity:
                    err.append(abs(pred.predict(d, b, s)[0] / d.latency(b, s) - 1))
    rows = []
    dur = 5.0 if quick else 20.0
    for r in rates:
        cfg = ServingConfig(rate=r, seed=seed)
        res = {}
        for mode in ("nomig", "elasticbatch", "oracle"):
            pl = plan(gpu, cfg, mode, pred)
            res[mode] = {**{k: pl[k] for k in ("gpus", "instances")}, **simulate(gpu, cfg, pl, dur),
                         "plan": pl["buckets"], "layout": pl["layout"]}
        rows.append({"rate": r, **res})
    saving = float(np.mean([1 - x["elasticbatch"]["gpus"] / x["nomig"]["gpus"] for x in rows]))
    return {"gpu": gpu.name, "layouts": len(valid_layouts(gpu)), "runs": rows, "gpu_saving_vs_nomig": saving,
            "profiling": {"points": pred.n_points, "time_s": pred.profile_time_s, "exhaustive_points": full_pts,
                          "exhaustive_time_s": full_time, "mean_rel_error": float(np.mean(err)),
                          "max_rel_error": float(np.max(err))},
            "paper": {"gpu_saving_vs_nomig": 0.5},
            "note": "runs/gpu_saving_vs_nomig and profiling errors are in-model: the predictor's features are the "
                    "terms of MigInstance's formula, so they are exact by construction; see predictor_published "
                    "and trace for checks on outside data",
            "predictor_published": validate_published(), "trace": _trace_or_reason(quick, gpu.name, seed)}


def _trace_or_reason(quick: bool, gpu_name: str, seed: int) -> dict:
    """:func:`run_trace_study`, or ``{"skipped": reason}`` when there is no data directory."""
    from hwcosim.models.data import DatasetMissing

    try:
        return run_trace_study(quick, gpu_name, seed=seed)
    except DatasetMissing as e:
        return {"skipped": str(e)}


# -- checks against data the predictor and the planner were not derived from ----------------------

#: Published BERT-Base FP16 average latencies (ms) by (sequence length, batch): NVIDIA TensorRT
#: repository, ``demo/BERT/README.md``, section *Results*, tables "Inference performance: NVIDIA
#: A100 (40GB)", "... NVIDIA A30" and "... NVIDIA T4 (16GB)", BERT Base, FP16 "Average" column
#: (TensorRT engines, 1000-2000 timed iterations after 100 warm-up ones). A full A100 is the
#: 7g.40gb profile; the A30 (56 SMs against the A100's 108) stands for a part of an A100.
PUBLISHED_BERT_BASE_FP16_MS = {
    "A100-40GB": {128: (0.67, 0.83, 1.02, 1.38, 1.87, 2.18, 3.34, 4.10, 8.05, 16.14),
                  384: (1.31, 1.64, 2.31, 3.62, 5.03, 6.72, 9.79, 13.51, 26.11, 51.26)},
    "A30": {128: (0.89, 1.13, 1.54, 2.50, 3.55, 4.44, 6.86, 8.63, 17.17, 33.58),
            384: (1.70, 2.36, 3.87, 7.53, 10.58, 14.48, 21.17, 28.00, 54.32, 107.15)},
    "T4": {128: (1.95, 2.71, 4.53, 9.09, 12.53, 17.90, 26.86, 36.63, 72.04, 144.20),
           384: (4.04, 6.61, 13.02, 27.81, 41.82, 55.31, 84.11, 114.90, 227.73, 458.76)},
}
PUBLISHED_BATCHES = (1, 2, 4, 8, 12, 16, 24, 32, 64, 128)
PUBLISHED_SOURCE = ("NVIDIA/TensorRT demo/BERT/README.md, 'Inference performance' tables, BERT Base FP16 "
                    "average latency")


@dataclass(frozen=True)
class TableDevice:
    """A device whose latency is looked up in a published table (``{size: per-batch ms}``)."""

    name: str
    table: dict
    batches: tuple = PUBLISHED_BATCHES
    capacity: float = 128 * 384

    def latency(self, batch: int, input_size: int) -> float:
        return self.table[int(input_size)][self.batches.index(int(batch))] * 1e-3


def validate_published(fit_batches=(1, 8, 32), noise: float = 0.0) -> dict:
    """Fit :class:`LatencyPredictor` on ``fit_batches`` x both sequence lengths of each published
    table and report the relative error on every other batch of that table (held out), plus the
    error when the A100 fit predicts the A30 by scaling with the SM ratio (56/108)."""
    out = {"source": PUBLISHED_SOURCE, "fit_batches": list(fit_batches), "devices": {}}
    a100_pred = None
    for name, table in PUBLISHED_BERT_BASE_FP16_MS.items():
        dev = TableDevice(name, table)
        pred = LatencyPredictor(noise=noise, reps=1)
        pred.profile(dev, fit_batches, tuple(table))
        errs = [float(pred.predict(dev, b, s)[0] / dev.latency(b, s) - 1)
                for s in table for b in PUBLISHED_BATCHES if b not in fit_batches]
        a = np.abs(errs)
        out["devices"][name] = {"held_out_points": len(errs), "mean_abs_rel_err": float(a.mean()),
                                "max_abs_rel_err": float(a.max()), "signed_errors": errs}
        if name == "A100-40GB":
            a100_pred = (pred, dev)
    pred, dev = a100_pred
    a30 = TableDevice("A30", PUBLISHED_BERT_BASE_FP16_MS["A30"])
    cross = np.abs([float(pred.predict(dev, b, s)[0] * 108 / 56 / a30.latency(b, s) - 1)
                    for s in a30.table for b in PUBLISHED_BATCHES])
    out["a100_fit_scaled_to_a30"] = {"mean_abs_rel_err": float(cross.mean()), "max_abs_rel_err": float(cross.max())}
    return out


def trace_sharing_tasks(path=None) -> dict:
    """The trace's GPU-sharing tasks (``0 < gpu_milli < 1000``) of the Alibaba GPU trace 2023
    (``openb_pod_list_default.csv``, read through :func:`hwcosim.models.data.dataset`).

    Returns arrays ``milli``, ``qos``, ``start``, ``end`` (s). The trace marks no task as
    inference; the ATC 2023 paper describes its GPU-sharing tasks as mostly inference, which
    we take as given.
    """
    import csv

    if path is None:
        from hwcosim.models.data import dataset
        path = dataset("alibaba-gpu-2023", "openb_pod_list_default.csv")
    rows = [r for r in csv.DictReader(open(path, newline=""))
            if int(r["num_gpu"] or 0) == 1 and 0 < int(r["gpu_milli"] or 0) < 1000]
    if not rows:
        raise UsageError(f"{path}: no GPU-sharing tasks (0 < gpu_milli < 1000)")
    end = np.array([float(r["deletion_time"] or "inf") for r in rows])
    return {"milli": np.array([int(r["gpu_milli"]) for r in rows]), "qos": np.array([r["qos"] for r in rows]),
            "start": np.array([float(r["creation_time"]) for r in rows]), "end": end}


def profile_for_share(gpu: MigGPU, share: float) -> MigProfile:
    """ElasticBatch's rule for one task: the profile using the fewest memory positions whose compute
    share ``g / slices`` covers ``share`` (then the fewest slices); the whole GPU when none does."""
    ok = [p for p in gpu.profiles if p.g / gpu.slices >= share - 1e-12]
    return min(ok, key=lambda p: (p.size, p.g)) if ok else gpu.full


def oracle_gpus(gpu: MigGPU, instances: list[str]) -> int:
    """The fewest GPUs holding ``instances`` (exact: an integer program over the valid layouts,
    ``min sum x_l`` s.t. ``sum_l x_l * count_l(p) >= demand(p)``, solved by HiGHS)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    names = [p.name for p in gpu.profiles]
    dem = np.array([instances.count(n) for n in names], float)
    if not dem.any():
        return 0
    lay = valid_layouts(gpu)
    a = np.array([[sum(1 for q, _ in lay_ if q == n) for lay_ in lay] for n in names], float)
    res = milp(np.ones(len(lay)), constraints=LinearConstraint(a, dem, np.inf), integrality=np.ones(len(lay)),
               bounds=Bounds(0, np.inf))
    if not res.success:
        raise RuntimeError(f"MIG oracle: {res.message}")
    return int(round(res.fun))


def plan_trace_snapshot(gpu: MigGPU, milli: np.ndarray, scale: float = 1.0) -> dict:
    """GPUs for a set of concurrent sharing tasks: MIG disabled (one GPU each), ElasticBatch
    (per-task profile by :func:`profile_for_share`, first-fit-decreasing packing), the exact
    oracle on the same profiles, and the time-sharing bound ``ceil(sum share)`` (no isolation).
    ``scale``: a task's share of this GPU = ``gpu_milli / 1000 * scale`` (the trace's shares are of
    its own, mostly older, GPUs)."""
    inst = [profile_for_share(gpu, m / 1000 * scale).name for m in milli]
    return {"tasks": int(len(milli)), "nomig": int(len(milli)), "elasticbatch": len(pack(gpu, inst)),
            "oracle": oracle_gpus(gpu, inst), "timeshare_bound": int(math.ceil(float(np.sum(milli)) / 1000 * scale)),
            "profiles": {p.name: inst.count(p.name) for p in gpu.profiles}}


def run_trace_study(quick: bool = True, gpu_name: str = "A100-40GB", path=None, seed: int = 0) -> dict:
    """The MIG planner on the trace's GPU-sharing tasks served together (all of them, and the
    latency-sensitive ``LS`` ones alone; quick: a random 400 of them): GPU saving of ElasticBatch
    and of the oracle vs MIG disabled, and its sensitivity to the share scale (trace GPU -> A100).

    The tasks are planned as one concurrent set, as the ATC 2023 paper's emulation submits the
    trace's tasks until the cluster fills (no departures): the trace's own creation/deletion times
    leave at most a dozen sharing tasks alive at once.
    """
    gpu = {"A100-40GB": A100_40GB, "H100-80GB": H100_80GB}.get(gpu_name)
    if gpu is None:
        raise UsageError(f"ElasticBatch: GPU must be A100-40GB or H100-80GB, not {gpu_name!r}")
    t = trace_sharing_tasks(path)
    idx = np.arange(len(t["milli"]))
    if quick:
        idx = np.sort(np.random.default_rng(seed).choice(idx, min(400, idx.size), replace=False))
    milli, qos = t["milli"][idx], t["qos"][idx]
    out = {"gpu": gpu.name, "tasks_in_trace": int(len(t["milli"])), "tasks": int(idx.size),
           "qos": {str(q): int((qos == q).sum()) for q in sorted(set(qos.tolist()))},
           "milli_percentiles": {str(p): float(np.percentile(milli, p)) for p in (5, 25, 50, 75, 95)},
           "by_scale": {}}
    for scale in (0.5, 0.75, 1.0):
        out["by_scale"][str(scale)] = {}
        for key, sel in (("all", np.ones(idx.size, bool)), ("LS", qos == "LS")):
            r = plan_trace_snapshot(gpu, milli[sel], scale)
            out["by_scale"][str(scale)][key] = {**r, "saving_vs_nomig": 1 - r["elasticbatch"] / r["nomig"],
                                                "oracle_saving_vs_nomig": 1 - r["oracle"] / r["nomig"],
                                                "timeshare_saving_vs_nomig": 1 - r["timeshare_bound"] / r["nomig"]}
    s = [v[k]["saving_vs_nomig"] for v in out["by_scale"].values() for k in v]
    out["saving_vs_nomig"] = out["by_scale"]["1.0"]["all"]["saving_vs_nomig"]
    out["sensitive_to"] = {"parameter": "share scale (trace GPU share -> A100 share) 0.5-1.0, all or LS tasks",
                           "band": [float(min(s)), float(max(s))]}
    out["paper"] = {"gpu_saving_vs_nomig": 0.5, "source": "ElasticBatch, IEEE TPDS 2024: 50% fewer GPU instances "
                                                          "than with MIG disabled"}
    return out

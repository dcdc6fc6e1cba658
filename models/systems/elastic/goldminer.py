"""GoldMiner: stateless preprocessing on elastic data workers.

After Zhao et al., "GoldMiner: Elastic Scaling of Training Data Pre-Processing Pipelines for Deep
Learning", SIGMOD 2023 (doi 10.1145/3589773). GoldMiner finds the stateless part of a training
job's input pipeline, runs it on separate, elastically scaled data workers, and keeps the
stateful part (shuffling buffers, batching, anything with carried state) in the trainer; the
paper reports up to 12.1x job speed, 2.5x JCT and 2.1x GPU utilisation on 64 GPUs.

Implemented here, for real:

- :class:`Pipeline` of stages (callables ``sample -> sample``). :func:`is_stateless` inspects a
  callable (closure cells over mutable objects, ``global``/``nonlocal`` stores, callable objects
  carrying attributes, generators) to classify it; :func:`stateless` / :func:`stateful` override.
  :meth:`Pipeline.split` returns the longest stateless prefix (offloaded) and the rest (kept).
- :class:`DataWorkerPool`: the offloaded prefix runs on local worker processes (``fork``; the
  stage functions are inherited, not pickled). Bounded in-flight window (back-pressure: the
  feeder stops when ``max_inflight`` samples are outstanding), sequence numbers and a reorder
  buffer (every sample delivered once, in order), graceful scale-in (a retiring worker finishes
  its current sample) and scale-out.
- :class:`Autoscaler`: from measured rates -- the trainer's wait fraction (starvation) and the
  fraction of time results sit unconsumed -- adds or removes workers.

- :class:`DaskDataWorkers`: the same contract on Dask (``dask[distributed]``) workers;
  :func:`data_workers` picks it when ``distributed`` is installed (``backend="auto"``); the
  default of :class:`DataWorkerPool` users stays local processes.

Not implemented: graph extraction from a TensorFlow/PyTorch program (the pipeline is declared in
Python), and remote Dask clusters were not exercised (only ``LocalCluster``). :func:`simulate_cluster` is the
cluster-level study: JCT and GPU utilisation with static per-GPU CPU allocation vs an elastic
shared pool of data workers. :func:`run_trace_study` runs it on the Alibaba GPU trace 2023 (whole-GPU
tasks, requested cores, node list), each job's CPU demand from preprocessing pipelines timed here
(:func:`measure_pipelines`) against the static allocation the trace requested.
"""

from __future__ import annotations

import collections
import dis
import functools
import heapq
import multiprocessing as mp
import os
import queue as _queue
import time
import types
from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["stateless", "stateful", "is_stateless", "Pipeline", "DataWorkerPool", "DaskDataWorkers", "data_workers",
           "Autoscaler",
           "augment_digit", "ClusterConfig", "simulate_cluster", "measure_speedup", "run_study",
           "jpeg_train_transform", "measure_pipelines", "trace_jobs", "simulate_trace", "run_trace_study",
           "GPU_SAMPLES_PER_S"]

_MUTABLE = (list, dict, set, bytearray, np.ndarray, collections.deque, np.random.Generator,
            np.random.RandomState, types.GeneratorType)


def stateless(fn):
    """Mark ``fn`` stateless (safe to run anywhere, any number of times, in any order)."""
    fn.__goldminer_stateless__ = True
    return fn


def stateful(fn):
    """Mark ``fn`` stateful (it stays in the trainer process)."""
    fn.__goldminer_stateless__ = False
    return fn


def is_stateless(fn) -> bool:
    """Classify a stage: ``True`` if it carries no state between calls, as far as can be seen.

    Explicit marks win. Otherwise a stage is stateful if it is a callable object with instance
    attributes, a bound method, a ``functools.partial`` over mutable arguments, or a function
    whose closure holds mutable objects or whose bytecode stores to globals / enclosing scopes.
    """
    mark = getattr(fn, "__goldminer_stateless__", None)
    if mark is not None:
        return bool(mark)
    if isinstance(fn, functools.partial):
        if any(isinstance(a, _MUTABLE) for a in list(fn.args) + list(fn.keywords.values())):
            return False
        return is_stateless(fn.func)
    if isinstance(fn, types.MethodType):
        return False
    if isinstance(fn, types.BuiltinFunctionType) or isinstance(fn, np.ufunc):
        return True
    if not isinstance(fn, types.FunctionType):
        return not getattr(fn, "__dict__", None)
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, _MUTABLE) or (hasattr(v, "__dict__") and not isinstance(v, (types.FunctionType,
                                                                                     types.ModuleType, type))):
            return False
    for ins in dis.get_instructions(fn):
        if ins.opname in ("STORE_GLOBAL", "STORE_DEREF", "DELETE_GLOBAL", "YIELD_VALUE"):
            return False
    return True


class Pipeline:
    """An ordered list of stages; :meth:`split` separates the offloadable stateless prefix."""

    def __init__(self, stages):
        self.stages = list(stages)
        if not self.stages or not all(callable(s) for s in self.stages):
            raise UsageError("GoldMiner: a pipeline needs one or more callable stages")

    def split(self) -> tuple[list, list]:
        k = 0
        while k < len(self.stages) and is_stateless(self.stages[k]):
            k += 1
        return self.stages[:k], self.stages[k:]

    def run_inline(self, samples):
        """Reference: every stage in this process, in order."""
        for s in samples:
            for st in self.stages:
                s = st(s)
            yield s


_STAGES: list = []  # inherited by forked workers


def _apply(stages, x):
    for st in stages:
        x = st(x)
    return x


def _worker(inq, outq):
    while True:
        item = inq.get()
        if item is None:  # retire: nothing in hand, nothing lost
            outq.put(("bye", os.getpid(), None))
            return
        seq, x = item
        try:
            y = _apply(_STAGES, x)
        except Exception as e:  # report, keep serving: the trainer decides
            outq.put(("err", seq, f"{type(e).__name__}: {e}"))
            continue
        outq.put(("ok", seq, y))


class DataWorkerPool:
    """Runs the stateless prefix of ``pipeline`` on local processes with back-pressure.

    Parameters
    ----------
    pipeline : Pipeline
    workers : int
        Initial worker count.
    max_workers : int
        Upper bound for scale-out.
    max_inflight : int
        Samples sent but not yet consumed (queue + workers + reorder buffer); the feeder blocks
        beyond it (back-pressure).
    stall_timeout_s : float
        No result for this long raises ``RuntimeError`` (a lost sample never hangs silently);
        an exception in a stage is re-raised in the trainer with the sample number.
    """

    def __init__(self, pipeline: Pipeline, workers: int = 1, max_workers: int = 2, max_inflight: int = 32,
                 stall_timeout_s: float = 120.0):
        if not (1 <= workers <= max_workers) or max_inflight < 1:
            raise UsageError(f"GoldMiner: need 1 <= workers ({workers}) <= max_workers ({max_workers}), "
                             f"max_inflight >= 1")
        self.offload, self.local = pipeline.split()
        self.max_workers, self.max_inflight = max_workers, max_inflight
        self.stall_timeout_s = stall_timeout_s
        self.ctx = mp.get_context("fork")
        self.inq, self.outq = self.ctx.Queue(), self.ctx.Queue()
        self.procs: list = []
        self.retiring = 0
        self.sent = self.delivered = 0
        self.max_seen_inflight = 0
        self.history: list[tuple[int, int]] = []  # (delivered count, worker count) at each resize
        global _STAGES
        _STAGES = self.offload
        for _ in range(workers):
            self._spawn()

    @property
    def workers(self) -> int:
        return len(self.procs) - self.retiring

    def _spawn(self):
        p = self.ctx.Process(target=_worker, args=(self.inq, self.outq), daemon=True)
        p.start()
        self.procs.append(p)

    def resize(self, n: int) -> None:
        n = max(1, min(self.max_workers, int(n)))
        while self.workers < n:
            self._spawn()
        while self.workers > n:
            self.inq.put(None)
            self.retiring += 1
        self.history.append((self.delivered, n))

    def _reap(self, pid: int):
        self.retiring -= 1
        for p in self.procs:
            if p.pid == pid:
                p.join(timeout=5)
        self.procs = [p for p in self.procs if p.pid != pid]

    def imap(self, samples, autoscaler: Autoscaler | None = None):
        """Yield fully processed samples in input order; exactly once each."""
        it = iter(samples)
        pending: dict[int, object] = {}
        nxt = 0
        exhausted = False
        while True:
            while not exhausted and self.sent - self.delivered < self.max_inflight:
                try:
                    x = next(it)
                except StopIteration:
                    exhausted = True
                    break
                self.inq.put((self.sent, x))
                self.sent += 1
            self.max_seen_inflight = max(self.max_seen_inflight, self.sent - self.delivered)
            if nxt == self.sent and exhausted:
                return
            t0 = time.perf_counter()
            while nxt not in pending:
                try:
                    kind, seq, y = self.outq.get(timeout=self.stall_timeout_s)
                except _queue.Empty:
                    dead = [p.pid for p in self.procs if p.exitcode not in (None, 0)]
                    raise RuntimeError(f"GoldMiner: no sample for {self.stall_timeout_s} s "
                                       f"(dead workers: {dead}); sample {nxt} lost") from None
                if kind == "err":
                    raise RuntimeError(f"GoldMiner: stage failed on sample {seq}: {y}")
                if kind == "bye":
                    self._reap(seq)
                    continue
                if seq in pending or seq < nxt:
                    raise RuntimeError(f"GoldMiner: sample {seq} delivered twice")
                pending[seq] = y
            waited = time.perf_counter() - t0
            y = pending.pop(nxt)
            nxt += 1
            self.delivered += 1
            t1 = time.perf_counter()
            yield _apply(self.local, y)
            if autoscaler is not None:
                want = autoscaler.observe(waited, time.perf_counter() - t1, self.workers)
                if want != self.workers:
                    self.resize(want)

    def close(self):
        for _ in range(len(self.procs)):
            self.inq.put(None)
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DaskDataWorkers:
    """The same contract as :class:`DataWorkerPool` on Dask workers (``distributed`` installed).

    Stateless stages are shipped with each task (cloudpickle); a window of ``max_inflight``
    futures gives back-pressure; results are taken in submission order, one per sequence number
    (a task Dask re-runs after a worker loss still yields one result). Without ``client`` a
    ``LocalCluster`` of single-threaded worker processes is started and scaled by :meth:`resize`.
    """

    def __init__(self, pipeline: Pipeline, workers: int = 1, max_workers: int = 2, max_inflight: int = 32,
                 client=None):
        from distributed import Client, LocalCluster

        if not (1 <= workers <= max_workers) or max_inflight < 1:
            raise UsageError(f"GoldMiner: need 1 <= workers ({workers}) <= max_workers ({max_workers}), "
                             f"max_inflight >= 1")
        self.offload, self.local = pipeline.split()
        self.max_workers, self.max_inflight = max_workers, max_inflight
        self.cluster = None
        if client is None:
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None)
            client = Client(self.cluster)
        self.client = client
        self.sent = self.delivered = 0
        self.history: list[tuple[int, int]] = []
        self._target = workers

    @property
    def workers(self) -> int:
        return self._target if self.cluster is not None else len(self.client.nthreads())

    def resize(self, n: int) -> None:
        n = max(1, min(self.max_workers, int(n)))
        if self.cluster is not None and n != self._target:
            self.cluster.scale(n)
            self._target = n
        self.history.append((self.delivered, n))

    def imap(self, samples, autoscaler: Autoscaler | None = None):
        window: collections.deque = collections.deque()
        it = iter(samples)
        exhausted = False
        while True:
            while not exhausted and len(window) < self.max_inflight:
                try:
                    x = next(it)
                except StopIteration:
                    exhausted = True
                    break
                window.append(self.client.submit(_apply, self.offload, x, pure=False))
                self.sent += 1
            if not window:
                return
            t0 = time.perf_counter()
            y = window.popleft().result()
            waited = time.perf_counter() - t0
            self.delivered += 1
            t1 = time.perf_counter()
            yield _apply(self.local, y)
            if autoscaler is not None:
                want = autoscaler.observe(waited, time.perf_counter() - t1, self.workers)
                if want != self.workers:
                    self.resize(want)

    def close(self):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def data_workers(pipeline: Pipeline, backend: str = "auto", **kw):
    """A data-worker pool: ``"process"`` (local processes), ``"dask"``, or ``"auto"`` (dask if the
    ``distributed`` package imports, else processes)."""
    if backend not in ("auto", "process", "dask"):
        raise UsageError(f"GoldMiner: backend must be auto|process|dask, not {backend!r}")
    if backend == "auto":
        try:
            import distributed  # noqa: F401

            backend = "dask"
        except ImportError:
            backend = "process"
    return DaskDataWorkers(pipeline, **kw) if backend == "dask" else DataWorkerPool(pipeline, **kw)


class Autoscaler:
    """Scale data workers from measured wait (starvation) vs consume time, over a window.

    After every ``window`` samples: if the trainer waited more than ``up`` of the window's time
    for data, add a worker; if it waited less than ``down``, remove one (the data rate exceeds
    what the trainer uses).
    """

    def __init__(self, window: int = 16, up: float = 0.10, down: float = 0.01, max_workers: int = 2):
        self.window, self.up, self.down, self.max_workers = window, up, down, max_workers
        self.wait = self.busy = 0.0
        self.n = 0

    def observe(self, waited: float, consumed: float, workers: int) -> int:
        self.wait += waited
        self.busy += consumed
        self.n += 1
        if self.n < self.window:
            return workers
        frac = self.wait / max(self.wait + self.busy, 1e-12)
        self.wait = self.busy = 0.0
        self.n = 0
        if frac > self.up and workers < self.max_workers:
            return workers + 1
        if frac < self.down and workers > 1:
            return workers - 1
        return workers


# -- a real CPU-heavy pipeline -----------------------------------------------------------------------

@stateless
def augment_digit(item):
    """Upsample an 8x8 digit to 128x128, rotate, elastic-deform, blur, resize to 32x32, normalise.

    ``item = (index, image)``; the angle and the deformation field derive from ``index`` so the
    result is deterministic (a stateless stage). About 10 ms of CPU per sample.
    """
    from scipy import ndimage

    i, img = item
    big = ndimage.zoom(img.astype(np.float64), 16, order=3)
    ang = float((i * 37) % 31 - 15)
    rot = ndimage.rotate(big, ang, reshape=False, order=3)
    rng = np.random.default_rng(int(i))
    dx = ndimage.gaussian_filter(rng.uniform(-1, 1, big.shape), 8) * 40
    dy = ndimage.gaussian_filter(rng.uniform(-1, 1, big.shape), 8) * 40
    yy, xx = np.meshgrid(np.arange(big.shape[0]), np.arange(big.shape[1]), indexing="ij")
    warped = ndimage.map_coordinates(rot, [yy + dy, xx + dx], order=3, mode="reflect")
    small = ndimage.zoom(ndimage.gaussian_filter(warped, 1.5), 0.25, order=1)
    return i, ((small - small.mean()) / (small.std() + 1e-9)).astype(np.float32)


def measure_speedup(n: int = 200, workers: int = 2) -> dict:
    """Wall time of the digits augmentation pipeline in-process vs on ``workers`` data workers."""
    from sklearn.datasets import load_digits

    imgs = load_digits().images[:n]
    batches = []

    def batcher(item):  # stateful: a batch buffer
        batches.append(item[0])
        return item

    pipe = Pipeline([augment_digit, batcher])
    t0 = time.perf_counter()
    ref = [x for _, x in pipe.run_inline(enumerate(imgs))]
    t_in = time.perf_counter() - t0
    t0 = time.perf_counter()
    with DataWorkerPool(pipe, workers=workers, max_workers=workers) as pool:
        out = [x for _, x in pool.imap(enumerate(imgs))]
    t_pool = time.perf_counter() - t0
    same = len(out) == len(ref) and all(np.array_equal(a, b) for a, b in zip(out, ref))
    return {"samples": n, "workers": workers, "inprocess_s": t_in, "pool_s": t_pool, "speedup": t_in / t_pool,
            "identical": bool(same)}


# -- cluster-level simulation ------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterConfig:
    """Cluster of ``nodes`` x (``gpus_per_node`` GPUs, ``cpus_per_node`` cores); Poisson jobs.

    Each job: ``gpus`` GPUs, a GPU step time, and a preprocessing cost per step in core-seconds
    drawn so that ``cpu_ratio = cost / step`` (cores needed per job to keep up) is lognormal
    around ``cpu_ratio_median`` per GPU -- some jobs need far more than their even share.
    """

    nodes: int = 8
    gpus_per_node: int = 8
    cpus_per_node: int = 64
    jobs: int = 120
    mean_interarrival_s: float = 25.0
    mean_steps: float = 2000.0
    cpu_ratio_median: float = 8.0
    cpu_ratio_sigma: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if min(self.nodes, self.gpus_per_node, self.cpus_per_node, self.jobs) < 1:
            raise UsageError("GoldMiner sim: nodes, gpus_per_node, cpus_per_node and jobs must be >= 1")
        if self.mean_interarrival_s <= 0 or self.mean_steps <= 0 or self.cpu_ratio_median <= 0:
            raise UsageError("GoldMiner sim: times, steps and ratios must be > 0")


def simulate_cluster(cfg: ClusterConfig, policy: str) -> dict:
    """Jobs sharing GPUs FIFO; data workers ``static`` (cores split evenly per GPU, on the job's
    own GPUs' share) or ``elastic`` (all cores of the cluster are a pool, water-filled each
    event so that the job with the lowest data/GPU rate ratio gets the next core).

    A job's step time is ``max(gpu_step, cpu_cost / cores)``. Returns mean JCT, makespan and GPU
    utilisation (GPU-busy time / GPU-allocated time and / cluster GPU time).
    """
    if policy not in ("static", "elastic"):
        raise UsageError(f"GoldMiner sim: policy must be static|elastic, not {policy!r}")
    rng = np.random.default_rng(cfg.seed)
    n = cfg.jobs
    arr = np.cumsum(rng.exponential(cfg.mean_interarrival_s, n))
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.4, 0.3, 0.2, 0.1])
    gstep = rng.uniform(0.1, 0.5, n)
    cpu_cost = gstep * gpus * np.exp(rng.normal(np.log(cfg.cpu_ratio_median), cfg.cpu_ratio_sigma, n))
    steps = rng.exponential(cfg.mean_steps, n)
    G = cfg.nodes * cfg.gpus_per_node
    C = cfg.nodes * cfg.cpus_per_node
    per_gpu = cfg.cpus_per_node / cfg.gpus_per_node
    free_g = G
    running: dict[int, float] = {}
    cores: dict[int, float] = {}
    queue: list[int] = []
    finish = np.full(n, np.nan)
    t = 0.0
    gpu_alloc_time = gpu_busy_time = 0.0
    ev = [(float(a), j) for j, a in enumerate(arr)]
    heapq.heapify(ev)

    def step_time(j):
        return max(gstep[j], cpu_cost[j] / cores[j])

    def allocate():
        if policy == "static":
            for j in running:
                cores[j] = per_gpu * gpus[j]
            return
        # water-filling: every job first its even share, then spare cores to the most starved
        for j in running:
            cores[j] = min(per_gpu * gpus[j], cpu_cost[j] / gstep[j])
        spare = C - sum(cores.values())
        need = {j: cpu_cost[j] / gstep[j] - cores[j] for j in running}
        while spare > 1e-9:
            open_ = [j for j in running if need[j] > 1e-9]
            if not open_:
                break
            share = spare / len(open_)
            for j in open_:
                g = min(share, need[j])
                cores[j] += g
                need[j] -= g
                spare -= g

    done = 0
    while done < n:
        nxt = min(((t + running[j] * step_time(j), j) for j in running), default=(np.inf, -1))
        if ev and ev[0][0] <= nxt[0]:
            ta, j = heapq.heappop(ev)
            tnew, arrival = ta, j
        else:
            tnew, arrival = nxt[0], None
        dt = tnew - t
        for j in running:
            st = step_time(j)
            running[j] -= dt / st
            gpu_alloc_time += gpus[j] * dt
            gpu_busy_time += gpus[j] * dt * gstep[j] / st
        t = tnew
        if arrival is not None:
            queue.append(arrival)
        else:
            j = nxt[1]
            finish[j] = t
            free_g += gpus[j]
            running.pop(j)
            cores.pop(j)
            done += 1
        while queue and gpus[queue[0]] <= free_g:
            j = queue.pop(0)
            free_g -= gpus[j]
            running[j] = steps[j]
            cores[j] = 0.0
        allocate()
    mk = float(np.nanmax(finish) - arr[0])
    ideal = steps * gstep
    return {"policy": policy, "mean_jct_s": float(np.mean(finish - arr)), "makespan_s": mk,
            "gpu_util_allocated": gpu_busy_time / gpu_alloc_time, "gpu_util_cluster": gpu_busy_time / (G * mk),
            "job_speed_mean": float(np.mean(ideal / np.maximum(finish - arr, 1e-9)))}


def run_study(quick: bool = True, seed: int = 0) -> dict:
    """Pipeline speedup on this machine, then the cluster sim (static vs elastic data workers)."""
    sp = measure_speedup(n=120 if quick else 400, workers=2)
    seeds = [seed] if quick else [seed + i for i in range(4)]
    sims = []
    for s in seeds:
        c = ClusterConfig(jobs=80 if quick else 200, seed=s)
        sims.append({p: simulate_cluster(c, p) for p in ("static", "elastic")})
    m = {p: {k: float(np.mean([r[p][k] for r in sims])) for k in sims[0][p] if k != "policy"}
         for p in ("static", "elastic")}
    jct = m["static"]["mean_jct_s"] / m["elastic"]["mean_jct_s"]
    util = m["elastic"]["gpu_util_allocated"] / m["static"]["gpu_util_allocated"]
    lines = [f"pipeline: {sp['samples']} digits, in-process {sp['inprocess_s']:.2f} s, {sp['workers']} data workers "
             f"{sp['pool_s']:.2f} s, speedup {sp['speedup']:.2f}x, identical output {sp['identical']}",
             f"cluster sim: JCT static/elastic {jct:.2f}x (paper 2.5x), GPU utilisation of allocated GPUs "
             f"{m['static']['gpu_util_allocated']:.3f} -> {m['elastic']['gpu_util_allocated']:.3f} "
             f"({util:.2f}x; paper 2.1x)"]
    return {"speedup": sp, "sims": sims, "mean": m, "jct_ratio": jct, "gpu_util_ratio": util, "print": lines,
            "paper": {"job_speed_max": 12.1, "jct": 2.5, "gpu_util": 2.1}}


# -- the Alibaba GPU trace 2023 with measured preprocessing costs -------------------------------------

def _cpu_timed(fn, items, reps: int) -> float:
    """Median over ``reps`` passes of the CPU time per item of ``fn`` (BLAS on one thread, one warm-up
    item): process CPU time, not wall time, since this shared machine's other tenants take time slices."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        fn(items[0])
        per = []
        for _ in range(reps):
            t0 = time.process_time()
            for x in items:
                fn(x)
            per.append((time.process_time() - t0) / len(items))
    return float(np.median(per))


@stateless
def jpeg_train_transform(item):
    """The ImageNet training transform on a JPEG: decode, random-resized crop (from the index), resize
    to 224x224, horizontal flip on odd indices, normalise, HWC -> CHW float32."""
    import io

    from PIL import Image

    i, data = item
    im = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = im.size
    s = 0.35 + 0.6 * ((i * 7919) % 101) / 100
    cw, ch = max(8, int(w * s ** 0.5)), max(8, int(h * s ** 0.5))
    x0, y0 = (i * 31) % (w - cw + 1), (i * 17) % (h - ch + 1)
    im = im.resize((224, 224), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
    a = np.asarray(im, dtype=np.float32) / 255.0
    if i % 2:
        a = a[:, ::-1]
    a = (a - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return i, np.ascontiguousarray(a.transpose(2, 0, 1))


def _jpeg_samples(n: int, side: int = 384) -> list:
    """``n`` JPEG files (quality 90, ``side`` x ``side``, RGB) made from sklearn digits: each digit
    upsampled (bicubic) and tinted per channel; made once, outside the timed region."""
    import io

    from PIL import Image
    from sklearn.datasets import load_digits

    imgs = load_digits().images
    out = []
    for i in range(n):
        g = (imgs[i % len(imgs)] * (255 / 16)).astype(np.uint8)
        big = np.asarray(Image.fromarray(g).resize((side, side), Image.BICUBIC), np.float32)
        rgb = np.stack([big * (0.6 + 0.4 * ((i + k) % 3) / 2) for k in range(3)], -1).clip(0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, "JPEG", quality=90)
        out.append((i, buf.getvalue()))
    return out


def _text_samples(n: int, chars: int = 2500) -> tuple[list, dict]:
    """``n`` windows of real English text (Python's own reference documentation, ``pydoc_data``) and a
    vocabulary of its 30,000 most frequent words (built outside the timed region)."""
    import re
    from pydoc_data.topics import topics

    text = "\n".join(topics[k] for k in sorted(topics))
    words = collections.Counter(re.findall(r"[a-z]+|[0-9]+|[^\sa-z0-9]", text.lower()))
    vocab = {w: k + 4 for k, (w, _) in enumerate(words.most_common(30000))}
    step = max(1, (len(text) - chars) // max(n, 1))
    return [(i, text[i * step:i * step + chars]) for i in range(n)], vocab


def _tokenise(vocab: dict, max_len: int = 512):
    import re

    pat = re.compile(r"[a-z]+|[0-9]+|[^\sa-z0-9]")

    @stateless
    def tokenise(item):
        """Lower-case, split into words/digits/punctuation, map to ids (unknown = 1, pieces of 4
        characters for unknown words), add [CLS]/[SEP], truncate/pad to ``max_len``, attention mask."""
        i, s = item
        ids = [2]
        for w in pat.findall(s.lower()):
            k = vocab.get(w)
            if k is None:
                ids.extend(vocab.get(w[j:j + 4], 1) for j in range(0, len(w), 4))
            else:
                ids.append(k)
        ids = ids[:max_len - 1] + [3]
        a = np.zeros(max_len, np.int32)
        a[:len(ids)] = ids
        return i, a, (a > 0).astype(np.int8)

    return tokenise


#: Per-GPU training throughput (samples/s) each measured pipeline has to feed: a small CNN on 32x32
#: images (digits), a ResNet-50-class model on 224x224 images (JPEG), a BERT-base-class model on
#: 512-token sequences (text). Assumed, V100-class, mixed precision; the study sweeps x0.5 .. x2.
GPU_SAMPLES_PER_S = {"digits-augment": 2000.0, "jpeg-imagenet": 800.0, "text-tokenise": 200.0}


def measure_pipelines(n: int = 24, reps: int = 3) -> dict:
    """CPU seconds per sample of three real preprocessing pipelines, timed here (median of ``reps``).

    ``digits-augment``: :func:`augment_digit` on sklearn digits; ``jpeg-imagenet``:
    :func:`jpeg_train_transform` on 384x384 JPEGs; ``text-tokenise``: word/piece tokenisation to 512
    ids of Python's reference documentation. Records the load average (shared machine)."""
    from sklearn.datasets import load_digits

    digits = [(i, im) for i, im in enumerate(load_digits().images[:n])]
    texts, vocab = _text_samples(4 * n)
    out = {"digits-augment": _cpu_timed(augment_digit, digits, reps),
           "jpeg-imagenet": _cpu_timed(jpeg_train_transform, _jpeg_samples(n), reps),
           "text-tokenise": _cpu_timed(_tokenise(vocab), texts, reps)}
    return {"cpu_s_per_sample": out, "samples": n, "reps": reps, "load_average": list(os.getloadavg()),
            "cpus": os.cpu_count()}


def trace_jobs(path_pods=None, path_nodes=None, fraction: float = 0.05, n: int | None = None, seed: int = 0,
               max_hours: float = 24.0, skip_quantile: float = 0.05) -> dict:
    """The trace's whole-GPU tasks (``num_gpu >= 1``, ``gpu_milli`` 1000): arrival (creation time),
    duration (deletion - creation, 60 s .. ``max_hours``), GPUs and requested cores (``cpu_milli``);
    and the GPU node list scaled by ``fraction`` (GPUs and cores of the nodes kept: every
    ``1/fraction``-th node in name order). ``n`` samples that many tasks (seeded), in time order. Tasks
    created before the ``skip_quantile`` creation time are left out (the trace is a snapshot: its first
    ~78% of time holds 5% of the tasks, long-running survivors)."""
    import csv

    from hwcosim.models.data import dataset

    if not 0 < fraction <= 1:
        raise UsageError(f"GoldMiner trace: fraction must be in (0, 1], not {fraction}")
    pods = path_pods or dataset("alibaba-gpu-2023", "openb_pod_list_default.csv")
    nodes = path_nodes or dataset("alibaba-gpu-2023", "openb_node_list_gpu_node.csv")
    rows = [r for r in csv.DictReader(open(pods, newline=""))
            if int(r["num_gpu"] or 0) >= 1 and int(r["gpu_milli"] or 0) in (0, 1000)]
    total = len(rows)
    t0 = float(np.quantile([float(r["creation_time"]) for r in rows], skip_quantile))
    rows = [r for r in rows if float(r["creation_time"]) >= t0]
    if n is not None and n < len(rows):
        rng = np.random.default_rng(seed)
        rows = [rows[i] for i in np.sort(rng.choice(len(rows), n, replace=False))]
    rows.sort(key=lambda r: float(r["creation_time"]))
    nl = sorted(csv.DictReader(open(nodes, newline="")), key=lambda r: r["sn"])
    step = max(1, round(1 / fraction))
    kept = nl[::step]
    arr = np.array([float(r["creation_time"]) for r in rows])
    return {"arrival_s": arr - arr[0], "gpus": np.array([int(r["num_gpu"]) for r in rows]),
            "req_cores": np.array([int(r["cpu_milli"]) / 1000 for r in rows]),
            "duration_s": np.array([min(max(float(r["deletion_time"]) - float(r["creation_time"]), 60.0),
                                        max_hours * 3600) for r in rows]),
            "cluster_gpus": int(sum(int(r["gpu"]) for r in kept)),
            "cluster_cores": float(sum(int(r["cpu_milli"]) for r in kept) / 1000),
            "nodes": len(kept), "tasks_in_trace": total}


def simulate_trace(arr, gpus, need, work, req, G: int, C: float, policy: str) -> dict:
    """Trace jobs FIFO on ``G`` GPUs and ``C`` cores (arrays per job: arrival s, GPUs, cores ``need`` to
    feed its GPUs at full speed, GPU-bound ``work`` s, requested cores ``req``).

    ``static``: a job starts when its GPUs and its requested cores are free and keeps ``req`` cores;
    its speed is ``min(1, req / need)``. ``elastic`` (GoldMiner's data workers): a job starts when its
    GPUs are free; at every event the cores of the whole cluster are water-filled over running jobs
    (max-min fair in speed: ``cores_j = s * need_j``, capped at speed 1). Returns mean JCT, makespan,
    GPU utilisation (GPU-busy / cluster GPU time; and / GPU time held by jobs), CPU utilisation
    (cores doing preprocessing / cluster cores) and the cores allocated (held) fraction, all over the
    makespan.
    """
    if policy not in ("static", "elastic"):
        raise UsageError(f"GoldMiner sim: policy must be static|elastic, not {policy!r}")
    n = len(arr)
    req = np.minimum(req, C)
    rem = np.asarray(work, float).copy()
    speed = np.zeros(n)
    cores = np.zeros(n)
    finish = np.full(n, np.nan)
    running: list[int] = []
    queue: collections.deque = collections.deque()
    free_g, free_c = G, C
    t, k = 0.0, 0
    gpu_busy = gpu_held = cpu_busy = cpu_held = 0.0

    def allocate():
        if not running:
            return
        idx = np.array(running)
        if policy == "static":
            speed[idx] = np.minimum(1.0, req[idx] / need[idx])
            cores[idx] = speed[idx] * need[idx]
            return
        nd = need[idx]
        if nd.sum() <= C:
            s = np.ones(len(idx))
        else:  # water level s: sum(min(s, 1) * need) = C
            s = np.full(len(idx), C / nd.sum())
        speed[idx] = s
        cores[idx] = s * nd

    while k < n or running or queue:
        if running:
            r = np.array(running)
            dts = rem[r] / speed[r]
            j = int(np.argmin(dts))
            t_done = t + float(dts[j])
        else:
            t_done = np.inf
        t_arr = float(arr[k]) if k < n else np.inf
        tnew = min(t_done, t_arr)
        if running:
            r = np.array(running)
            dt = tnew - t
            rem[r] -= speed[r] * dt
            gpu_busy += float((gpus[r] * speed[r]).sum()) * dt
            gpu_held += float(gpus[r].sum()) * dt
            cpu_busy += float(cores[r].sum()) * dt
            cpu_held += float(req[r].sum() if policy == "static" else cores[r].sum()) * dt
        t = tnew
        if t_arr <= t_done:
            queue.append(k)
            k += 1
        else:
            jj = running.pop(j)
            finish[jj] = t
            free_g += gpus[jj]
            if policy == "static":
                free_c += req[jj]
        while queue and gpus[queue[0]] <= free_g and (policy == "elastic" or req[queue[0]] <= free_c + 1e-9):
            jj = queue.popleft()
            free_g -= gpus[jj]
            if policy == "static":
                free_c -= req[jj]
            running.append(jj)
        allocate()
    mk = float(np.nanmax(finish) - arr[0])
    return {"policy": policy, "mean_jct_s": float(np.mean(finish - arr)), "makespan_s": mk,
            "gpu_util": gpu_busy / (G * mk), "gpu_util_allocated": gpu_busy / max(gpu_held, 1e-12),
            "cpu_util": cpu_busy / (C * mk), "cpu_held": cpu_held / (C * mk),
            "jobs_per_h": 3600 * n / mk,
            "job_speed_mean": float(np.mean(work / np.maximum(finish - arr, 1e-9)))}


def _trace_case(tr: dict, cost: dict, rates: dict, load: float, seed: int, mix=None) -> dict:
    """One trace configuration: each job draws a pipeline (``mix`` shares, default equal); its cores
    needed = GPUs x measured CPU s/sample x GPU samples/s; the trace's duration is read as the run
    with its requested cores, so GPU-bound work = duration x min(1, req / need); arrivals compressed
    so that the offered GPU load over the arrival window (of the trace's durations) is ``load``
    (:func:`~hwcosim.models.systems.elastic.easyscale.compress_to_load`)."""
    from .easyscale import compress_to_load

    names = list(cost)
    p = np.full(len(names), 1 / len(names)) if mix is None else np.asarray(mix, float) / np.sum(mix)
    rng = np.random.default_rng(seed)
    kind = rng.choice(len(names), len(tr["gpus"]), p=p)
    per_gpu = np.array([cost[names[i]] * rates[names[i]] for i in kind])
    need = np.maximum(tr["gpus"] * per_gpu, 1e-3)
    req = tr["req_cores"]
    work = tr["duration_s"] * np.minimum(1.0, req / need)
    kc, reached = compress_to_load(tr["arrival_s"], tr["gpus"], tr["duration_s"], tr["cluster_gpus"], load)
    arr = tr["arrival_s"] * kc
    res = {p_: simulate_trace(arr, tr["gpus"], need, work, req, tr["cluster_gpus"], tr["cluster_cores"], p_)
           for p_ in ("static", "elastic")}
    st, el = res["static"], res["elastic"]
    return {"load": load, "load_reached": reached, "results": res, "jct_ratio": st["mean_jct_s"] / el["mean_jct_s"],
            "gpu_util_ratio": el["gpu_util_allocated"] / st["gpu_util_allocated"],
            "cluster_gpu_util_ratio": el["gpu_util"] / st["gpu_util"],
            "throughput_ratio": el["jobs_per_h"] / st["jobs_per_h"],
            "starved_jobs": float(np.mean(req < need)),
            "need_per_gpu_percentiles": {str(q): float(np.percentile(need / tr["gpus"], q)) for q in (5, 50, 95)}}


def run_trace_study(quick: bool = True, seed: int = 0, path_pods=None, path_nodes=None) -> dict:
    """GoldMiner on the Alibaba GPU trace 2023: data-worker CPU demand from measured pipelines, elastic
    data workers vs the static allocation each task requested; the JCT / GPU / CPU figures beside the
    paper's, and their sensitivity to the assumed GPU throughput (x0.5 .. x2) and the offered load."""
    meas = measure_pipelines(n=12 if quick else 48, reps=3 if quick else 7)
    cost = meas["cpu_s_per_sample"]
    tr = trace_jobs(path_pods, path_nodes, fraction=0.01 if quick else 0.05, n=300 if quick else None, seed=seed)
    base = _trace_case(tr, cost, GPU_SAMPLES_PER_S, 0.8, seed)
    sens = []
    for scale, load in ((0.5, 0.8), (2.0, 0.8), (1.0, 0.5), (1.0, 0.95)) + (() if quick else ((0.5, 0.5), (2.0, 0.95))):
        c = _trace_case(tr, cost, {k: v * scale for k, v in GPU_SAMPLES_PER_S.items()}, load, seed)
        sens.append({"gpu_rate_scale": scale, "load": load, "load_reached": c["load_reached"],
                     "jct_ratio": c["jct_ratio"], "gpu_util_ratio": c["gpu_util_ratio"],
                     "starved_jobs": c["starved_jobs"]})
    band = [base["jct_ratio"]] + [s["jct_ratio"] for s in sens]
    ub = [base["gpu_util_ratio"]] + [s["gpu_util_ratio"] for s in sens]
    return {"pipelines": meas, "gpu_samples_per_s": GPU_SAMPLES_PER_S,
            "trace": {k: (int(v) if isinstance(v, (int, np.integer)) else v) for k, v in tr.items()
                      if not isinstance(v, np.ndarray)} | {"jobs": int(len(tr["gpus"]))},
            "base": base, "sensitivity": sens, "jct_ratio": base["jct_ratio"], "gpu_util_ratio": base["gpu_util_ratio"],
            "sensitive_to": {"parameter": "GPU samples/s each pipeline feeds (x0.5 .. x2) and offered GPU load "
                                          "(0.5 .. 0.95)", "band": [float(min(band)), float(max(band))],
                             "gpu_util_band": [float(min(ub)), float(max(ub))]},
            "paper": {"jct": 2.5, "gpu_util": 2.1, "job_speed_max": 12.1,
                      "source": "GoldMiner, SIGMOD 2023 (doi 10.1145/3589773), abstract: average JCT up to 2.5x, "
                                "GPU utilisation up to 2.1x on a 64-GPU cluster, jobs up to 12.1x faster"},
            "notes": ["static = the cores each task requested in the trace (cpu_milli), the production allocation; "
                      "elastic = GoldMiner's data workers on any core of the (scaled) GPU nodes",
                      "the trace's duration is read as the run at its requested cores: static reproduces it and "
                      "elastic can only speed up starved jobs (CPU need above the request)",
                      "GPU samples/s per pipeline are assumed (V100-class), the CPU cost per sample is measured "
                      "here (CPU time; this machine's cores stand for the cluster's)"]}

"""CPU allocation for DL jobs on a heterogeneous GPU cluster (CODA, ICDCS 2020), against static rules.

A training job's GPU is fed by CPU work (decoding, augmentation, batching). With too few cores
the GPU starves; beyond the point where the GPU is the bottleneck, more cores are wasted. CODA
(Zhao et al., "CODA: Improving Resource Utilization by Slimming and Co-locating DNN and CPU
Jobs", ICDCS 2020) profiles each job's throughput against its core count and allocates cores
adaptively, reporting +20.8% GPU utilisation over static allocation. Static rules in practice:
an even split of a node's cores over its GPUs, or per-task-type constants (Kubeflow-style
templates: so many cores per GPU for vision, for NLP...).

- :class:`ThroughputModel`: ``thr(c) = min(gpu_rate, r * c**alpha)`` fitted in log space to a few
  profiled (cores, samples/s) points. :func:`profile_loader` measures such points for real: a
  multiprocessing pipeline that decodes and augments scikit-learn digits images (upsampling,
  rotation, noise) with 1..k worker processes.
- :func:`allocate`: per node, ``even``, ``static`` (cores per GPU by job type) or ``adaptive``
  (greedy on the marginal gain of GPU-weighted utilisation, optimal for concave curves; cores
  move when jobs arrive or leave).
- :func:`simulate` / :class:`CPUClusterSim`: the cluster simulation on the discrete-event core of
  :mod:`models.cluster` (:class:`~models.cluster.engine.Simulator`): hosts of several GPU types
  (a :class:`~models.cluster.topology.Topology`, one ToR per type), job arrivals, placements and
  completions as events; between events each job progresses at ``thr(c)``; GPU utilisation (busy
  fraction of the allocated GPUs, and of the whole cluster) and JCT. :func:`simulate_loop` is the
  same model as a plain loop, a cross-check for the tests.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass

import numpy as np

from models.cluster.engine import Simulator

__all__ = ["ThroughputModel", "profile_loader", "NodeType", "CPUJob", "allocate", "simulate", "POLICIES",
           "heterogeneous_cluster", "job_stream", "run_study", "CPUClusterSim", "simulate_loop"]

POLICIES = ("even", "static", "adaptive")
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
            raise ValueError(f"need r > 0, alpha in (0, 1.2], gpu_rate > 0; got {self.r}, {self.alpha}, "
                             f"{self.gpu_rate}")

    def __call__(self, cores) -> np.ndarray:
        c = np.asarray(cores, dtype=np.float64)
        return np.minimum(self.gpu_rate, self.r * np.power(np.maximum(c, 0), self.alpha))

    @classmethod
    def fit(cls, cores, rates, gpu_rate: float) -> ThroughputModel:
        """Least squares of ``log rate = log r + alpha log cores`` on the profiled points below the ceiling."""
        c, t = np.asarray(cores, float), np.asarray(rates, float)
        if c.size < 2 or np.any(c <= 0) or np.any(t <= 0):
            raise ValueError("need >= 2 profiled points with cores > 0 and rate > 0")
        keep = t < 0.98 * gpu_rate
        if keep.sum() < 2:
            keep[:] = True
        alpha, logr = np.polyfit(np.log(c[keep]), np.log(t[keep]), 1)
        return cls(float(np.exp(logr)), float(np.clip(alpha, 0.05, 1.2)), float(gpu_rate))

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
            raise ValueError(f"node type {self.name!r}: need gpus >= 1, cores >= gpus, count >= 1, speed > 0")


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

    def model(self, speed: float) -> ThroughputModel:
        return ThroughputModel(self.r_per_core, self.alpha, self.gpu_rate_per_gpu * self.gpus * speed)


def allocate(policy: str, jobs, node: NodeType) -> list[int]:
    """Cores for each job on one node (``jobs`` = the CPUJob objects running there)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
    if not jobs:
        return []
    per_gpu = node.cores // node.gpus
    if policy == "even":
        return [per_gpu * j.gpus for j in jobs]
    if policy == "static":
        want = [STATIC_CORES_PER_GPU[j.kind] * j.gpus for j in jobs]
        if sum(want) <= node.cores:
            return want
        f = node.cores / sum(want)
        return [max(1, int(w * f)) for w in want]
    models = [j.model(node.speed) for j in jobs]
    alloc = [1] * len(jobs)
    free = node.cores - len(jobs)
    while free > 0:
        gain = [j.gpus * (m(a + 1) - m(a)) / m.gpu_rate for j, m, a in zip(jobs, models, alloc)]
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


def job_stream(n: int, nodes, seed: int = 0, rate_per_h: float = 12.0, loader: ThroughputModel | None = None):
    """Random jobs: type cv/nlp/speech/rl, 1/2/4/8 GPUs of a random type, Poisson arrivals.

    A job's one-core rate ``r`` is the measured loader's (``loader.r``, else 1,000 samples/s) times
    U(0.7, 1.3); its exponent is U(0.7, 1.0) (near-linear scaling of a multi-process loader on a
    dedicated server); its GPU ceiling per reference GPU is ``r * need**alpha`` with ``need`` cores
    drawn from :data:`CORE_NEED` for its type. Work: 0.5 to 2 hours at full speed.
    """
    rng = np.random.default_rng(seed)
    base_r = loader.r if loader is not None else 1000.0
    kinds = list(CORE_NEED)
    out, t = [], 0.0
    for k in range(n):
        kind = kinds[rng.integers(len(kinds))]
        nt = nodes[rng.integers(len(nodes))]
        g = int(rng.choice([x for x in (1, 2, 4, 8) if x <= nt.gpus]))
        r = base_r * rng.uniform(0.7, 1.3)
        alpha = float(rng.uniform(0.7, 1.0))
        gpu_rate = r * rng.uniform(*CORE_NEED[kind]) ** alpha
        t += rng.exponential(3600 / rate_per_h)
        work = gpu_rate * g * nt.speed * rng.uniform(1800, 7200)
        out.append(CPUJob(k, kind, g, nt.name, t, r, alpha, gpu_rate, work))
    return out


class CPUClusterSim(Simulator):
    """The allocation study on :class:`models.cluster.engine.Simulator`, the cluster's discrete-event core.

    The cluster is a :class:`~models.cluster.topology.Topology` with one ToR per node type (hosts of
    a type share a ToR); host ``h`` has ``gpus`` GPUs and ``cores`` CPU cores of its type. Job
    arrivals, placements and completions are events on the engine's heap (same time: insertion
    order; same inputs: same result). Between events every running job trains at
    ``thr(cores)`` samples/s (:class:`ThroughputModel`); a host's cores are (re)allocated by
    ``policy`` when a job starts or ends there, and the completion events of that host's jobs are
    rescheduled (stale ones are ignored by version).

    Placement: FIFO per GPU type (a job waits only for its own type), first host of the type with
    enough free GPUs. Static and even allocations are fixed when a job starts (from the cores its
    host has left); adaptive re-allocates the host's cores at every arrival and departure.
    """

    def __init__(self, nodes, policy: str, seed: int = 0):
        from models.cluster.topology import Topology

        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
        self.types = list(nodes)
        self.host_type = np.repeat(np.arange(len(self.types)), [nt.count for nt in self.types])
        topo = Topology(self.host_type.copy(), np.zeros(len(self.types), dtype=np.int64),
                        gpus_per_host=max(nt.gpus for nt in self.types), nic_ports=1, aggs_per_pod=1,
                        cores_per_plane=1, name="cpualloc-" + "-".join(nt.name for nt in self.types))
        super().__init__(topo, seed=seed)
        self.policy = policy
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
                raise ValueError(f"job {j.jid}: no {j.gpu_type!r} nodes in the cluster")
            if j.gpus > max(nt.gpus for nt in self.types if nt.name == j.gpu_type):
                raise ValueError(f"job {j.jid}: {j.gpus} GPUs do not fit one {j.gpu_type} node")
            self._push(j.arrival, self._arrive, j)

    # ---- events ------------------------------------------------------------------------------
    def _arrive(self, job: CPUJob) -> None:
        self.queue.append(job)
        self._try_start()

    def _try_start(self) -> None:
        rest, touched = [], []
        for j in self.queue:
            hosts = np.flatnonzero((self.host_type == self._type_index(j.gpu_type)) & (self.free >= j.gpus))
            if not hosts.size:
                rest.append(j)
                continue
            h = int(hosts[0])
            self._settle(h)
            self.free[h] -= j.gpus
            self.run_state[j.jid] = {"job": j, "host": h, "cores": None, "left": j.work, "rate": 0.0,
                                     "t": self.now, "version": 0}
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

    # ---- helpers -----------------------------------------------------------------------------
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
        if self.policy == "adaptive":
            for st, c in zip(here, allocate("adaptive", [st["job"] for st in here], nt)):
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
        return {"policy": self.policy, "gpu_utilisation": float(self.busy.sum() / self.alloc.sum()),
                "cluster_gpu_utilisation": float(self.busy.sum() / (total_gpus * self.last_done)),
                "mean_jct_h": float(j.mean() / 3600), "p90_jct_h": float(np.quantile(j, 0.9) / 3600),
                "mean_wait_h": float(w.mean() / 3600), "makespan_h": self.last_done / 3600, "events": self.events,
                "utilisation_by_type": {nt.name: (float(self.busy[i] / self.alloc[i]) if self.alloc[i] else None)
                                        for i, nt in enumerate(self.types)}}


def simulate(jobs, nodes, policy: str, seed: int = 0) -> dict:
    """Run the jobs on the cluster engine (:class:`CPUClusterSim`) with one allocation policy.

    Returns GPU utilisation (busy fraction of the allocated GPU-time, overall and per GPU type,
    and of the whole cluster over the makespan), mean and p90 JCT, mean queueing wait, makespan.
    """
    sim = CPUClusterSim(nodes, policy, seed)
    sim.submit(jobs)
    sim.run()
    return sim.results()


def simulate_loop(jobs, nodes, policy: str) -> dict:
    """Reference: the same model as a plain time-stepping loop (no engine), kept to cross-check
    :func:`simulate` in the tests."""
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
        if policy == "adaptive":
            for st, c in zip(here, allocate(policy, [st["job"] for st in here], inst[k][0])):
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
    """Profile the real loader (1 and 2 workers; +3 when not quick), fit, then the cluster
    comparison on the engine (:func:`simulate`) for every policy over the same job stream."""
    prof = profile_loader((1, 2) if quick else (1, 2, 3), images=600 if quick else 1797) if profile else None
    loader = ThroughputModel.fit(prof["cores"], prof["samples_per_s"], gpu_rate=1e12) if prof else None
    nodes = heterogeneous_cluster()
    jobs = job_stream(150 if quick else 600, nodes, seed, loader=loader)
    res = {p: simulate(jobs, nodes, p, seed) for p in POLICIES}
    ad = res["adaptive"]
    return {"profile": prof, "loader_fit": None if loader is None else {"r": loader.r, "alpha": loader.alpha},
            "nodes": [nt.__dict__ for nt in nodes], "jobs": len(jobs), "engine": "models.cluster.engine.Simulator",
            "results": res,
            "adaptive_gain_over": {p: ad["gpu_utilisation"] / res[p]["gpu_utilisation"] - 1
                                   for p in ("even", "static")},
            "adaptive_cluster_gain_over": {p: ad["cluster_gpu_utilisation"] / res[p]["cluster_gpu_utilisation"] - 1
                                           for p in ("even", "static")},
            "jct_ratio_over_adaptive": {p: res[p]["mean_jct_h"] / ad["mean_jct_h"] for p in ("even", "static")}}

"""Trace-driven GPU-sharing cluster scheduler and the FGD comparison of "Beware of Fragmentation".

Reproduces the experiment of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent", USENIX ATC 2023 (https://www.usenix.org/conference/atc23/
presentation/weng), on the trace it published (Alibaba ``cluster-trace-gpu-v2023``, "openb"), read
through :func:`hwcosim.models.data.dataset` and never copied here.

What the paper and its artifact (https://github.com/hkust-adsl/kubernetes-scheduler-simulator) state
and this module models (the code is written here):

- **Cluster**: the trace's GPU nodes (1,213 nodes, 6,212 GPUs): CPU (milli), memory (MiB), GPU count
  and model. Each GPU has a capacity of 1000 milli-GPU.
- **Tasks**: CPU, memory, ``num_gpu`` and ``gpu_milli``. A task with ``num_gpu == 1`` and
  ``gpu_milli < 1000`` shares one GPU (it fits on any GPU with that much left); otherwise it needs
  ``num_gpu`` whole free GPUs. ``gpu_spec`` ("V100M16|V100M32") restricts the GPU models.
- **Fragmentation measure** (paper Sec. 3; artifact ``pkg/utils/frag.go``): for a node ``n`` and a
  task type ``m``, ``F_n(m)`` is the unallocated GPU capacity of ``n`` that ``m`` cannot use: all of
  it when ``m`` cannot run on ``n`` at all (GPU type, too few fitting GPUs, too little CPU), else the
  remaining share of every GPU with less left than ``m``'s per-GPU request. The node's fragmentation
  is the expectation over the target workload's task-type distribution, ``F_n = sum_m p_m F_n(m)``,
  and the cluster's is the sum over nodes. As in the artifact, memory is not part of the measure.
- **FGD** places each task on the node (and, for a sharing task, on the GPU) whose fragmentation
  grows least (the steepest descent of ``F``).
- **Baselines** (paper Sec. 6.1, the artifact's plugins): random-fit; best-fit (least weighted
  remaining CPU and GPU after placement); dot-product (Tetris, the smallest dot product of the
  node's free and the task's requested resources, normalised by the largest node); GPU packing (a
  sharing task first on a partly used GPU, then a used node, idle nodes last); GPU clustering (tasks
  with the same GPU request packed on the same nodes).
- **Experiment** (paper Sec. 6.1, Fig. 7 and 9; artifact ``experiments/run_scripts``: ``-tune 1.3``,
  seeds 42..51): tasks sampled from the trace's pod list arrive one by one, never leave, until their
  GPU requests reach 130% of the cluster's GPU capacity; tasks that fit nowhere are dropped. Measured
  against the arrived workload (% of cluster GPU capacity): unallocated GPUs and fragmented GPUs.
  The paper's headline: FGD "reduces unallocated GPUs by up to 49%, resulting in the utilization of
  additional 290 GPUs" (abstract) on the 6,200-GPU emulated cluster.

Scheduler details that set the figures (the artifact's, kept as defaults, each a parameter): node
scores are Kubernetes integers 0..100 (FGD: ``int(100 * sigmoid(-dF / 1000 milli-GPU))``) and ties go
to the first node by name (the artifact's ``selectHost``), so near-equal nodes are filled in order;
a sharing task goes on the tightest fitting GPU (the artifact's default ``best``) except under FGD
(least fragmentation) and random-fit (a random GPU). On the full trace, stock Kubernetes' random
ties make GPU packing and clustering ~150-175 GPUs worse, and exact scores make FGD ~40 GPUs worse.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = [
    "MILLI", "POLICIES", "WORKLOADS", "PAPER", "ARTIFACT_UNALLOCATED_AT_130", "PACKING_BASELINES",
    "Cluster", "TaskSet", "TaskTypes",
    "load_nodes", "load_tasks", "task_types", "node_fragmentation", "subsample_nodes",
    "sample_arrivals", "simulate", "run_fgd_study", "format_report",
]

#: Capacity of one GPU in milli-GPU.
MILLI = 1000
#: Most GPUs on one node in the trace.
MAX_GPUS = 8
#: The policies compared, in the paper's order (FGD last).
POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
#: Trace variants (upstream ``openb_pod_list_<variant>.csv``).
WORKLOADS = ("default", "gpushare100", "gpuspec33", "multigpu50")
#: The paper's figures (abstract): FGD vs the packing baselines on the 6,212-GPU cluster.
PAPER = {"reduction_up_to": 0.49, "gpus_saved": 290, "cluster_gpus": 6212, "inflation": 1.30,
         "seeds": 10, "source": "Weng et al., USENIX ATC 2023, abstract and Sec. 6"}

#: The artifact's published results behind the paper's figures: unallocated GPUs at 130% arrived
#: workload, mean of seeds 42..51, derived from the allocation rate (% of 6,212 GPUs) in
#: ``experiments/analysis/expected_results/analysis_allo_discrete.csv`` of
#: https://github.com/hkust-adsl/kubernetes-scheduler-simulator (commit 8f3d641).
ARTIFACT_UNALLOCATED_AT_130 = {
    "default": {"random": 778.4, "dotprod": 568.5, "clustering": 504.5, "packing": 496.8, "bestfit": 430.1,
                "fgd": 286.3},
    "gpushare100": {"random": 1277.0, "dotprod": 1092.3, "clustering": 1078.0, "packing": 1082.9, "bestfit": 931.4,
                    "fgd": 813.7},
    "gpuspec33": {"random": 841.4, "dotprod": 674.4, "clustering": 489.7, "packing": 421.2, "bestfit": 429.1,
                  "fgd": 338.7},
    "multigpu50": {"random": 604.1, "dotprod": 319.9, "clustering": 260.2, "packing": 237.2, "bestfit": 264.8,
                   "fgd": 175.3},
}
#: The baselines the paper calls packing-based (its "up to 49%" is against these; random-fit is not one).
PACKING_BASELINES = ("dotprod", "clustering", "packing", "bestfit")

DATASET = "alibaba-gpu-2023"


# ---- data -----------------------------------------------------------------------------------------
@dataclass
class Cluster:
    """The node list: per-node capacities and GPU model (index into ``models``)."""
    names: list[str]
    cpu: np.ndarray        # milli-CPU
    mem: np.ndarray        # MiB
    ngpu: np.ndarray       # GPUs on the node
    model: np.ndarray      # index into models
    models: list[str]

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def gpus(self) -> int:
        return int(self.ngpu.sum())


@dataclass
class TaskSet:
    """A list of tasks: requests and the GPU models each may use (``access[i, model]``)."""
    cpu: np.ndarray
    mem: np.ndarray
    num: np.ndarray        # GPUs requested (0..8)
    milli: np.ndarray      # milli-GPU per requested GPU (0 when num == 0)
    spec: list[str]        # "" or "A|B"
    access: np.ndarray     # (tasks, models) bool

    @property
    def n(self) -> int:
        return len(self.cpu)

    def take(self, idx) -> TaskSet:
        idx = np.asarray(idx, dtype=int)
        return TaskSet(self.cpu[idx], self.mem[idx], self.num[idx], self.milli[idx],
                       [self.spec[i] for i in idx], self.access[idx])

    @property
    def gpu_request(self) -> np.ndarray:
        """Total milli-GPU requested per task."""
        return self.num * self.milli


def _dataset_file(name: str) -> Path:
    from hwcosim.models.data import dataset
    return dataset(DATASET, name)


def load_nodes(path: Path | None = None) -> Cluster:
    """The trace's GPU nodes (``openb_node_list_gpu_node.csv``)."""
    path = Path(path) if path else _dataset_file("openb_node_list_gpu_node.csv")
    rows = sorted(csv.DictReader(open(path, newline="")), key=lambda r: r["sn"])  # name order: ties
    models = sorted({r["model"] for r in rows if r["model"]})
    mid = {m: i for i, m in enumerate(models)}
    ngpu = np.array([int(r["gpu"]) for r in rows])
    if ngpu.max() > MAX_GPUS or ngpu.min() < 1:
        raise UsageError(f"{path}: GPU counts must be 1..{MAX_GPUS}; use the GPU node list")
    return Cluster([r["sn"] for r in rows], np.array([int(r["cpu_milli"]) for r in rows]),
                   np.array([int(r["memory_mib"]) for r in rows]), ngpu,
                   np.array([mid[r["model"]] for r in rows]), models)


def _access(specs: list[str], models: list[str]) -> np.ndarray:
    acc = np.ones((len(specs), len(models)), dtype=bool)
    for i, s in enumerate(specs):
        if s:
            allowed = set(s.split("|"))
            acc[i] = [m in allowed for m in models]
    return acc


def load_tasks(workload: str, models: list[str], path: Path | None = None) -> TaskSet:
    """The pods of trace variant ``workload`` (``openb_pod_list_<workload>.csv``)."""
    if path is None:
        if workload not in WORKLOADS:
            raise UsageError(f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}")
        path = _dataset_file(f"openb_pod_list_{workload}.csv")
    rows = list(csv.DictReader(open(path, newline="")))
    num = np.array([int(r["num_gpu"]) for r in rows])
    milli = np.array([int(r["gpu_milli"] or 0) for r in rows])
    milli = np.where(num == 0, 0, np.where(num > 1, MILLI, milli))
    if ((num == 1) & ((milli <= 0) | (milli > MILLI))).any():
        raise UsageError(f"{path}: gpu_milli must be 1..{MILLI} for single-GPU tasks")
    spec = [(r.get("gpu_spec") or "").strip() for r in rows]
    spec = ["" if s.lower() == "nan" else s for s in spec]
    return TaskSet(np.array([int(r["cpu_milli"]) for r in rows]), np.array([int(r["memory_mib"]) for r in rows]),
                   num, milli, spec, _access(spec, models))


@dataclass
class TaskTypes:
    """The target workload: distinct (CPU, GPUs, milli-GPU, GPU models) task types and their share."""
    cpu: np.ndarray
    num: np.ndarray
    milli: np.ndarray
    access: np.ndarray     # (types, models)
    p: np.ndarray

    @property
    def k(self) -> int:
        return len(self.p)


def task_types(tasks: TaskSet, popularity: float = 0.95, cpu_tasks: bool = True) -> TaskTypes:
    """The target workload of the measure: the distinct (CPU, GPUs, milli-GPU, GPU models) task types
    of ``tasks``, the most frequent first, kept until they cover ``popularity`` of the tasks, their
    shares renormalised (the artifact's "typical pods": CPU tasks included, 95%). Every unallocated
    GPU is a fragment to a CPU-only type, so those add the same amount to every placement's change
    and only shift the reported fragmentation."""
    keys: dict[tuple, int] = {}
    first: list[int] = []
    counts: list[int] = []
    for i in range(tasks.n):
        if not cpu_tasks and tasks.num[i] == 0:
            continue
        key = (int(tasks.cpu[i]), int(tasks.num[i]), int(tasks.milli[i]), tasks.spec[i])
        j = keys.get(key)
        if j is None:
            keys[key] = len(first)
            first.append(i)
            counts.append(1)
        else:
            counts[j] += 1
    if not first or not (tasks.num > 0).any():
        raise UsageError("the workload has no GPU tasks; the fragmentation measure needs some")
    if not 0 < popularity <= 1:
        raise UsageError(f"popularity must be in (0, 1], got {popularity}")
    c = np.array(counts, dtype=float)
    order = np.argsort(-c, kind="stable")
    cum = np.cumsum(c[order]) / c.sum()
    keep = order[:int(np.searchsorted(cum, popularity - 1e-12)) + 1]
    idx = np.array(first)[keep]
    ck = c[keep]
    return TaskTypes(tasks.cpu[idx], tasks.num[idx], tasks.milli[idx], tasks.access[idx], ck / ck.sum())


# ---- the fragmentation measure -------------------------------------------------------------------
def node_fragmentation(gpu_left: np.ndarray, cpu_left: np.ndarray, model: np.ndarray,
                       types: TaskTypes) -> np.ndarray:
    """Expected fragmented milli-GPU of each node state: ``gpu_left`` (S, G) milli left per GPU (0 for
    absent GPUs), ``cpu_left`` (S,), ``model`` (S,) -> (S,) ``sum_m p_m F_n(m)``."""
    gl = np.asarray(gpu_left)[:, None, :]                         # S,1,G
    total = gl.sum(axis=2).astype(float)                          # S,1
    tm = types.milli[None, :, None]                               # 1,K,1
    fits = (gl >= tm).sum(axis=2)                                 # S,K
    ok = (fits >= types.num[None, :]) & (types.num[None, :] > 0)
    ok &= np.asarray(cpu_left)[:, None] >= types.cpu[None, :]
    ok &= types.access.T[np.asarray(model)]                       # S,K
    partial = np.where(gl < tm, gl, 0).sum(axis=2)                # S,K
    frag = np.where(ok, partial, total)
    return frag @ types.p


# ---- cluster state and policies ------------------------------------------------------------------
class _State:
    def __init__(self, cl: Cluster):
        self.cl = cl
        self.cpu = cl.cpu.copy()
        self.mem = cl.mem.copy()
        g = np.zeros((cl.n, MAX_GPUS), dtype=np.int64)
        for i, k in enumerate(cl.ngpu):
            g[i, :k] = MILLI
        self.gpu = g
        self.n_tasks = np.zeros(cl.n, dtype=np.int64)

    def feasible(self, tasks: TaskSet, t: int) -> np.ndarray:
        ok = (self.cpu >= tasks.cpu[t]) & (self.mem >= tasks.mem[t])
        if tasks.num[t] > 0:
            ok &= tasks.access[t][self.cl.model]
            ok &= (self.gpu >= tasks.milli[t]).sum(axis=1) >= tasks.num[t]
        return ok

    def place(self, tasks: TaskSet, t: int, node: int, gpu_ids) -> None:
        self.cpu[node] -= tasks.cpu[t]
        self.mem[node] -= tasks.mem[t]
        for g in gpu_ids:
            self.gpu[node, g] -= tasks.milli[t]
        self.n_tasks[node] += 1
        if self.cpu[node] < 0 or self.mem[node] < 0 or (self.gpu[node] < 0).any():
            raise AssertionError("over-allocated a node")  # a bug, never expected


def _tightest_gpu(row: np.ndarray, milli: int) -> int:
    """The fitting GPU with the least left (best fit within the node)."""
    cand = np.where(row >= milli, row, MILLI + 1)
    return int(np.argmin(cand))


def _whole_gpus(row: np.ndarray, num: int) -> list[int]:
    return [int(i) for i in np.flatnonzero(row >= MILLI)[:num]]


#: Kubernetes node scores are integers 0..100 (the artifact's plugins truncate to int64).
MAX_SPEC_CPU, MAX_SPEC_GPU = 128000, 8000  # the artifact's normalisers (open-gpu-share const.go)


def _pick(rng, idx: np.ndarray, score: np.ndarray, best="max") -> int:
    """A node among ``idx`` (ascending) with the best score; ties broken uniformly at random with
    ``rng``, else (None) to the first node in name order, as the artifact's scheduler does."""
    s = score if best == "max" else -score
    top = idx[np.isclose(s, s.max(), rtol=0, atol=1e-9)]
    return int(top[rng.integers(len(top))]) if rng is not None and len(top) > 1 else int(top[0])


class _FGD:
    """FGD with a cache of each (node state, task type) decision: identical nodes share a state."""

    def __init__(self, st: _State, types: TaskTypes, int_scores: bool = True):
        self.st, self.types, self.int_scores = st, types, int_scores
        self.key_id: dict[tuple, int] = {}
        self.state_frag: list[float] = []
        self.sid = np.array([self._sid(i) for i in range(st.cl.n)], dtype=np.int64)
        self.cache: dict[tuple, dict[int, tuple[float, int]]] = {}

    def _key(self, node: int) -> tuple:
        st = self.st
        return (int(st.cl.model[node]), int(st.cpu[node]), tuple(sorted(st.gpu[node].tolist(), reverse=True)))

    def _sid(self, node: int) -> int:
        key = self._key(node)
        j = self.key_id.get(key)
        if j is None:
            j = len(self.state_frag)
            self.key_id[key] = j
            st = self.st
            self.state_frag.append(float(node_fragmentation(st.gpu[node][None], st.cpu[node:node + 1],
                                                            st.cl.model[node:node + 1], self.types)[0]))
        return j

    def node_frag(self) -> np.ndarray:
        return np.array(self.state_frag)[self.sid]

    def choose(self, tasks: TaskSet, t: int, feas: np.ndarray, rng) -> tuple[int, list[int]]:
        st = self.st
        idx = np.flatnonzero(feas)
        c, num, milli = int(tasks.cpu[t]), int(tasks.num[t]), int(tasks.milli[t])
        tkey = (c, num, milli, tasks.spec[t])
        memo = self.cache.setdefault(tkey, {})
        sids = self.sid[idx]
        uniq, first = np.unique(sids, return_index=True)
        missing = [(int(s), int(idx[f])) for s, f in zip(uniq, first) if int(s) not in memo]
        if missing:
            rows, cpus, mods, owner, gval = [], [], [], [], []
            for s, node in missing:
                row = st.gpu[node]
                if num == 0:
                    cands = [(row, -1)]
                elif num == 1 and milli < MILLI:
                    cands = []
                    for v in sorted({int(x) for x in row if x >= milli}):
                        new = row.copy()
                        new[int(np.flatnonzero(row == v)[0])] -= milli
                        cands.append((new, v))
                else:
                    new = row.copy()
                    new[_whole_gpus(row, num)] = 0
                    cands = [(new, MILLI)]
                for new, v in cands:
                    rows.append(new)
                    cpus.append(st.cpu[node] - c)
                    mods.append(st.cl.model[node])
                    owner.append(s)
                    gval.append(v)
            f = node_fragmentation(np.array(rows), np.array(cpus), np.array(mods), self.types)
            best: dict[int, tuple[float, int]] = {}
            for s, fv, v in zip(owner, f, gval):
                d = float(fv) - self.state_frag[s]
                if s not in best or d < best[s][0] - 1e-9:
                    best[s] = (d, v)
            memo.update(best)
        delta = np.array([memo[int(s)][0] for s in sids])
        if self.int_scores:  # the artifact: int64(sigmoid((F_before - F_after) / 1000) * 100)
            node = _pick(rng, idx, np.floor(100.0 / (1.0 + np.exp(np.clip(delta / 1000.0, -50, 50)))), best="max")
        else:
            node = _pick(rng, idx, delta, best="min")
        row = st.gpu[node]
        if num == 0:
            gpus = []
        elif num == 1 and milli < MILLI:
            gpus = [int(np.flatnonzero(row == memo[int(self.sid[node])][1])[0])]
        else:
            gpus = _whole_gpus(row, num)
        return node, gpus

    def placed(self, node: int) -> None:
        self.sid[node] = self._sid(node)


def _choose_baseline(policy: str, st: _State, tasks: TaskSet, t: int, feas: np.ndarray, rng, tie_rng,
                     aff: np.ndarray, aff_id: int, int_scores: bool = True) -> tuple[int, list[int]]:
    idx = np.flatnonzero(feas)
    c, num, milli = int(tasks.cpu[t]), int(tasks.num[t]), int(tasks.milli[t])
    g = st.gpu[idx]
    share = num == 1 and milli < MILLI
    left_total = g.sum(axis=1)
    if policy == "random":
        node = int(idx[rng.integers(len(idx))])
        if num == 0:
            return node, []
        if share:
            fit = np.flatnonzero(st.gpu[node] >= milli)
            return node, [int(fit[rng.integers(len(fit))])]
        return node, _whole_gpus(st.gpu[node], num)
    quant = np.floor if int_scores else (lambda v: v)
    if policy == "bestfit":
        # least weighted remaining (CPU, GPU) after placement, normalised by the largest node spec
        rem = 0.5 * (st.cpu[idx] - c) / MAX_SPEC_CPU + 0.5 * (left_total - num * milli) / MAX_SPEC_GPU
        node = _pick(tie_rng, idx, quant((1.0 - rem) * 100), best="max")
    elif policy == "dotprod":
        # Tetris alignment: the smallest dot product of free and requested (CPU, GPU), normalised
        dot = (st.cpu[idx] / MAX_SPEC_CPU) * (c / MAX_SPEC_CPU) \
            + (left_total / MAX_SPEC_GPU) * (num * milli / MAX_SPEC_GPU)
        node = _pick(tie_rng, idx, quant((1.0 - dot / 2) * 100), best="max")
    elif policy == "packing":
        if num == 0:
            score = np.zeros(len(idx))
        else:
            ngpu = st.cl.ngpu[idx]
            full = (g >= MILLI).sum(axis=1)
            idle = full == ngpu
            if share:
                tight = np.where(g >= milli, g, MILLI + 1).min(axis=1)
                uses_free = tight >= MILLI
                tier1 = np.maximum(100 - (tight * 100 // MILLI) // 10, 50)
                score = np.where(uses_free, 50 - 1, tier1)
            else:
                score = np.full(len(idx), max(50 - num, 33))
            score = np.where(idle, np.maximum(33 - full, full), score)
        node = _pick(tie_rng, idx, score.astype(float), best="max")
    elif policy == "clustering":
        if num == 0:
            score = np.zeros(len(idx))
        else:
            a = aff[idx]
            same = a[:, aff_id] > 0
            kinds = (a > 0).sum(axis=1)
            fill = 25 * (MAX_SPEC_GPU - left_total) // MAX_SPEC_GPU
            base = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
            score = base + fill
        node = _pick(tie_rng, idx, score.astype(float), best="max")
    else:
        raise UsageError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    if num == 0:
        return node, []
    if share:
        return node, [_tightest_gpu(st.gpu[node], milli)]
    return node, _whole_gpus(st.gpu[node], num)


# ---- the experiment ------------------------------------------------------------------------------
def subsample_nodes(cl: Cluster, fraction: float, seed: int = 0) -> Cluster:
    """``fraction`` of the nodes, keeping the mix of node kinds (model, GPUs, CPU, memory) by largest
    remainder; a kind keeps at least none. Deterministic for ``seed``."""
    if not 0 < fraction <= 1:
        raise UsageError(f"node fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return cl
    rng = np.random.default_rng(seed)
    kinds: dict[tuple, list[int]] = {}
    for i in range(cl.n):
        kinds.setdefault((int(cl.model[i]), int(cl.ngpu[i]), int(cl.cpu[i]), int(cl.mem[i])), []).append(i)
    keys = sorted(kinds)
    want = np.array([len(kinds[k]) * fraction for k in keys])
    take = np.floor(want).astype(int)
    rest = int(round(cl.n * fraction)) - take.sum()
    order = np.argsort(-(want - take), kind="stable")
    take[order[:max(rest, 0)]] += 1
    idx = sorted(int(j) for k, m in zip(keys, take) for j in rng.choice(kinds[k], size=m, replace=False))
    return Cluster([cl.names[i] for i in idx], cl.cpu[idx], cl.mem[idx], cl.ngpu[idx], cl.model[idx], cl.models)


def sample_arrivals(tasks: TaskSet, capacity_milli: int, inflation: float, seed: int) -> np.ndarray:
    """The arriving tasks, as the artifact's workload tuning (``-tune 1.3 --shuffle-pod``) builds
    them: every task of the trace, then tasks drawn uniformly with replacement from it while the
    total GPU request stays within ``inflation`` x the cluster's GPU capacity (or, when the trace
    asks for more, random tasks removed until it fits), in a random order."""
    rng = np.random.default_rng(seed)
    req = tasks.gpu_request
    target = inflation * capacity_milli
    idx = list(range(tasks.n))
    total = int(req.sum())
    if total > target:
        perm = list(rng.permutation(tasks.n))
        while total > target and perm:
            j = perm.pop()
            idx.remove(j)
            total -= int(req[j])
    else:
        while True:
            j = int(rng.integers(tasks.n))
            if total + req[j] > target:
                break
            idx.append(j)
            total += int(req[j])
    order = np.array(idx, dtype=int)
    return order[rng.permutation(len(order))]


def simulate(cl: Cluster, tasks: TaskSet, types: TaskTypes, policy: str, order: np.ndarray, seed: int,
             grid: np.ndarray, placements: bool = False, int_scores: bool = True, ties: str = "name") -> dict:
    """Place ``tasks[order]`` one by one with ``policy``; at each point of ``grid`` (arrived GPU
    workload, % of capacity) record allocated, unallocated and fragmented GPUs. With
    ``placements``, also return ``(task, node, gpu ids)`` per arrival (node -1: not placed). With
    ``int_scores`` node scores are truncated to the integers 0..100 as in Kubernetes (and the
    artifact). ``ties``: "name" gives a tie to the first node in name order (the artifact's
    scheduler), "random" breaks it uniformly at random (stock Kubernetes)."""
    if ties not in ("name", "random"):
        raise UsageError(f"ties must be 'name' or 'random', got {ties!r}")
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    rng = np.random.default_rng([seed, POLICIES.index(policy)])
    tie_rng = rng if ties == "random" else None
    st = _State(cl)
    cap = cl.gpus * MILLI
    fgd = _FGD(st, types, int_scores) if policy == "fgd" else None
    aff_keys: dict[tuple, int] = {}
    aff = np.zeros((cl.n, 64), dtype=np.int64)
    req = tasks.gpu_request
    arrived = allocated = 0
    failed = failed_gpu = 0
    out = {k: np.full(len(grid), np.nan) for k in ("allocated", "unallocated", "fragmented")}
    gi = 0
    placed: list[tuple[int, int, list[int]]] = []

    def record(upto: float):
        nonlocal gi
        while gi < len(grid) and grid[gi] <= upto + 1e-12:
            frag = fgd.node_frag().sum() if fgd else node_fragmentation(st.gpu, st.cpu, cl.model, types).sum()
            out["allocated"][gi] = allocated / MILLI
            out["unallocated"][gi] = (cap - allocated) / MILLI
            out["fragmented"][gi] = frag / MILLI
            gi += 1

    record(0.0)
    for t in order:
        t = int(t)
        arrived += int(req[t])
        feas = st.feasible(tasks, t)
        if feas.any():
            if fgd is not None:
                node, gpus = fgd.choose(tasks, t, feas, tie_rng)
            else:
                aid = -1
                if tasks.num[t] > 0:
                    # the artifact's affinity: "share-gpu" for any share, else "<k>-gpu"
                    akey = (1, 0) if tasks.milli[t] < MILLI else (int(tasks.num[t]), MILLI)
                    aid = aff_keys.setdefault(akey, len(aff_keys))
                    if aid >= aff.shape[1]:
                        aff = np.concatenate([aff, np.zeros_like(aff)], axis=1)
                node, gpus = _choose_baseline(policy, st, tasks, t, feas, rng, tie_rng, aff, aid, int_scores)
                if aid >= 0:
                    aff[node, aid] += 1
            st.place(tasks, t, node, gpus)
            allocated += int(req[t])
            if fgd is not None:
                fgd.placed(node)
            if placements:
                placed.append((t, node, list(gpus)))
        else:
            if placements:
                placed.append((t, -1, []))
            failed += 1
            failed_gpu += int(req[t])
        record(100.0 * arrived / cap)
    record(np.inf)  # points past the last arrival (none, by construction of the arrivals)
    res = {"policy": policy, "seed": seed, "tasks": len(order), "failed": failed,
           "failed_gpus": failed_gpu / MILLI, **{k: v.tolist() for k, v in out.items()}}
    if placements:
        res["placements"] = placed
    return res


def _at(grid: np.ndarray, curve: np.ndarray, x: float) -> float:
    return float(np.interp(x, grid, curve))


def run_fgd_study(workload: str = "default", seeds=None, quick: bool = False, out_dir=None,
                  policies=POLICIES, node_fraction: float | None = None, inflation: float = 1.3,
                  int_scores: bool = True, popularity: float = 1.0, ties: str = "name", progress=None) -> dict:
    """FGD vs the five baselines on the trace (the paper's Fig. 7 and 9 experiment).

    ``quick``: 1/8 of the nodes (same kind mix), 2 seeds, 2% grid: seconds. Full: all 1,213 nodes,
    seeds 42..51 as the artifact, 1% grid (~20 s per seed). ``int_scores=False`` ranks nodes by the
    exact scores instead of Kubernetes' integer 0..100 ones. ``popularity``: the share of the trace's
    tasks whose types make the measure's target workload (the paper: the workload's task-type
    distribution, 1.0; the artifact keeps the most frequent types up to 95%, which leaves out every
    multi-GPU type of the default trace). ``ties``: see :func:`simulate`. Writes ``fgd_<workload>.json`` and ``.png`` to
    ``out_dir`` when given. Returns the curves (mean over seeds) and, per baseline, FGD's reduction of
    unallocated GPUs at 100% and at the end of arrivals, beside the paper's "up to 49% / 290 GPUs".
    """
    if seeds is None:
        seeds = (42, 43) if quick else tuple(range(42, 52))
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise UsageError("give at least one seed")
    frac = node_fraction if node_fraction is not None else (0.125 if quick else 1.0)
    step = 2.0 if quick else 1.0
    full = load_nodes()
    cl = subsample_nodes(full, frac, seed=0)
    tasks = load_tasks(workload, cl.models)
    types = task_types(tasks, popularity=popularity)
    cap = cl.gpus * MILLI
    grid = np.arange(0.0, 100.0 * inflation + 1e-9, step)
    runs: dict[str, list[dict]] = {p: [] for p in policies}
    for seed in seeds:
        order = sample_arrivals(tasks, cap, inflation, seed)
        for p in policies:
            runs[p].append(simulate(cl, tasks, types, p, order, seed, grid, int_scores=int_scores, ties=ties))
            if progress:
                progress(f"seed {seed} {p}: unallocated {runs[p][-1]['unallocated'][-1]:.0f} GPUs")
    mean = {p: {k: np.nanmean([r[k] for r in runs[p]], axis=0).tolist()
                for k in ("unallocated", "fragmented", "allocated")} for p in policies}
    x_end = float(grid[-1])
    summary: dict[str, dict] = {}
    if "fgd" in policies:
        for p in policies:
            if p == "fgd":
                continue
            row = {}
            for name, x in (("at_100", 100.0), ("at_end", x_end)):
                b = _at(grid, np.array(mean[p]["unallocated"]), x)
                f = _at(grid, np.array(mean["fgd"]["unallocated"]), x)
                row[name] = {"x": x, "baseline_gpus": b, "fgd_gpus": f, "saved_gpus": b - f,
                             "reduction": (b - f) / b if b > 0 else 0.0}
            # per-seed spread of the end-point reduction
            red = [(rb["unallocated"][-1] - rf["unallocated"][-1]) / rb["unallocated"][-1]
                   for rb, rf in zip(runs[p], runs["fgd"]) if rb["unallocated"][-1] > 0]
            row["at_end"]["reduction_min"] = float(min(red)) if red else 0.0
            row["at_end"]["reduction_max"] = float(max(red)) if red else 0.0
            summary[p] = row
    scale = full.gpus / cl.gpus
    packing = [p for p in summary if p in PACKING_BASELINES]
    best_red = max((summary[p]["at_end"]["reduction"] for p in packing), default=0.0)
    best_saved = max((summary[p]["at_end"]["saved_gpus"] for p in packing), default=0.0)
    art = ARTIFACT_UNALLOCATED_AT_130.get(workload, {})
    artifact = None
    if art and inflation == 1.3:
        red = {p: (art[p] - art["fgd"]) / art[p] for p in art if p != "fgd"}
        top = max((p for p in red if p in PACKING_BASELINES), key=red.get)
        artifact = {"unallocated_at_130": art, "reduction": red, "up_to_vs": top,
                    "reduction_up_to": red[top], "gpus_saved": art[top] - art["fgd"]}
    result = {
        "workload": workload, "seeds": list(seeds), "quick": quick, "inflation": inflation,
        "nodes": cl.n, "gpus": cl.gpus, "trace_nodes": full.n, "trace_gpus": full.gpus,
        "task_types": types.k, "trace_tasks": tasks.n,
        "arrivals_per_seed": [runs[policies[0]][i]["tasks"] for i in range(len(seeds))],
        "grid_pct": grid.tolist(), "mean": mean,
        "failed_tasks": {p: [r["failed"] for r in runs[p]] for p in policies},
        "fgd_vs": summary,
        "ours": {"reduction_up_to": best_red, "gpus_saved": best_saved,
                 "up_to_vs": max(packing, key=lambda p: summary[p]["at_end"]["reduction"]) if packing else None,
                 "gpus_saved_scaled_to_trace": best_saved * scale,
                 "unallocated_at_end_scaled_to_trace": {p: mean[p]["unallocated"][-1] * scale for p in policies}},
        "paper": PAPER, "artifact": artifact, "int_scores": int_scores, "popularity": popularity, "ties": ties,
        "runs": {p: [{k: r[k] for k in ("seed", "failed", "failed_gpus")} | {"unallocated_end": r["unallocated"][-1]}
                     for r in runs[p]] for p in policies},
    }
    if out_dir is not None:
        from hwcosim.models.atomic import staged_dir

        out = Path(out_dir)
        with staged_dir(out) as st:  # the JSON and the PNG appear together, at the end
            (st / f"fgd_{workload}.json").write_text(json.dumps(result, indent=1))
            _plot(result, st / f"fgd_{workload}.png")
        result["files"] = [str(out / f"fgd_{workload}.json"), str(out / f"fgd_{workload}.png")]
    return result


def _plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.array(result["grid_pct"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for p, m in result["mean"].items():
        axes[0].plot(x, m["unallocated"], label=p, lw=2 if p == "fgd" else 1)
        axes[1].plot(x, m["fragmented"], label=p, lw=2 if p == "fgd" else 1)
    axes[0].set_ylabel("unallocated GPUs")
    axes[1].set_ylabel("fragmented GPUs (expected, target workload)")
    for ax in axes:
        ax.set_xlabel("arrived workload (% of cluster GPU capacity)")
        ax.grid(alpha=.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"FGD vs baselines, Alibaba GPU 2023 '{result['workload']}', {result['nodes']} nodes / "
                 f"{result['gpus']} GPUs, seeds {result['seeds']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_report(result: dict) -> str:
    """The study's lines: ours beside the paper and its artifact's published results."""
    scale = result["trace_gpus"] / result["gpus"]
    art = result.get("artifact") or {}
    lines = [f"FGD study on '{result['workload']}': {result['nodes']} nodes, {result['gpus']} GPUs "
             f"(trace {result['trace_nodes']} / {result['trace_gpus']}), seeds {result['seeds']}, "
             f"arrivals to {100 * result['inflation']:.0f}% of GPU capacity, "
             f"{'integer' if result.get('int_scores', True) else 'exact'} node scores, ties to "
             f"{'the first node by name' if result.get('ties') == 'name' else 'a random node'}, "
             f"{result['task_types']} task types ({100 * result.get('popularity', 1):.0f}% of tasks) in the measure"]
    ends = {p: m["unallocated"][-1] for p, m in result["mean"].items()}
    for p, e in ends.items():
        ref = art.get("unallocated_at_130", {}).get(p)
        line = f"  {p:10s}: unallocated at end {e:7.1f} GPUs"
        if scale != 1:
            line += f" (x{scale:.2f} = {e * scale:6.0f})"
        if ref is not None:
            line += f"; artifact {ref:6.1f}"
        if p in result["fgd_vs"]:
            v = result["fgd_vs"][p]["at_end"]
            line += (f"; FGD saves {100 * v['reduction']:5.1f}% "
                     f"[{100 * v['reduction_min']:.0f}..{100 * v['reduction_max']:.0f}]"
                     f" = {v['saved_gpus']:.0f} GPUs")
            if art:
                line += f" (artifact {100 * art['reduction'][p]:.1f}%)"
        lines.append(line)
    o, pp = result["ours"], result["paper"]
    lines.append(f"  ours vs packing baselines: up to {100 * o['reduction_up_to']:.0f}% / {o['gpus_saved']:.0f} GPUs "
                 f"(vs {o['up_to_vs']}; {o['gpus_saved_scaled_to_trace']:.0f} scaled to the trace); "
                 f"paper: up to {100 * pp['reduction_up_to']:.0f}% / {pp['gpus_saved']} GPUs"
                 + (f"; artifact: {100 * art['reduction_up_to']:.1f}% / {art['gpus_saved']:.0f} GPUs "
                    f"vs {art['up_to_vs']}"
                    if art else ""))
    return "\n".join(lines)

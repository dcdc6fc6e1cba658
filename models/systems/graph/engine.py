"""A partitioned, vectorised message-passing engine with serial, process-pool and Dask executors.

The vertex-program model follows GraM (Wu et al., SoCC 2015) and Pregel-style message passing,
with the mirror/master combining of PowerGraph/PowerLyra gather-apply-scatter:

1. **emit** (masters, vectorised over all vertices): each vertex publishes a value; an inactive
   vertex publishes the combiner's identity, so the frontier costs no extra array.
2. **message + combine** (per partition, vectorised over its edges): each edge ``u -> v`` turns
   ``value[u]`` into a message with an edge operator (``copy``, ``add_weight``, ``add_one``,
   ``mul_weight`` or a picklable callable); messages to the same destination are reduced
   (``sum`` or ``min``) with ``ufunc.reduceat`` over the partition's dst-sorted edges. The result
   is one partial per (partition, destination) -- a mirror's contribution.
3. **gather** (masters): partials are combined in ascending partition order, so every executor
   gives bit-identical results for a given partitioning.
4. **apply** (masters, vectorised): new state and the convergence test.

Executors run step 2: :class:`SerialExecutor` (one core), :class:`ProcessExecutor` (a process
pool holding the partitions for the whole run; only the emitted vector crosses per step) and
:class:`DaskExecutor` (partitions scattered to Dask workers once; an embedded ``LocalCluster`` by
default, or an existing scheduler by address; ``kernel="compiled"`` runs the compiled partition
kernel in each task). :class:`~models.systems.graph.compiled.CompiledExecutor` runs the whole
superstep compiled on nogil threads (``make_executor("compiled")``).
"""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
from hwcosim.models.errors import UsageError

from .graph import Graph
from .partition import Partition, Partitioning, partition
from .result import RunResult

__all__ = ["VertexProgram", "Engine", "RunResult", "SerialExecutor", "ProcessExecutor", "DaskExecutor",
           "partition_step", "make_executor", "EDGE_OPS"]

EDGE_OPS = ("copy", "add_weight", "add_one", "mul_weight")
_IDENTITY = {"sum": 0.0, "min": np.inf}
_REDUCE = {"sum": np.add, "min": np.minimum}


def partition_step(part: Partition, value: np.ndarray, edge_op, combiner: str) -> np.ndarray:
    """Messages along a partition's edges, reduced per destination.

    Parameters
    ----------
    part : Partition
    value : ndarray, shape (n,)
        The emitted value of every vertex.
    edge_op : str or callable
        One of :data:`EDGE_OPS`, or ``f(src_values, weights) -> messages`` (picklable).
    combiner : {"sum", "min"}

    Returns
    -------
    ndarray, shape (len(part.dst_unique),)
        The combined message per distinct destination of the partition.
    """
    if part.m == 0:
        return np.zeros(0)
    v = value[part.src]
    if edge_op == "copy":
        msg = v
    elif edge_op == "add_weight":
        msg = v + part.weight
    elif edge_op == "add_one":
        msg = v + 1.0
    elif edge_op == "mul_weight":
        msg = v * part.weight
    else:
        msg = edge_op(v, part.weight)
    return _REDUCE[combiner].reduceat(msg, part.seg_start)


class VertexProgram:
    """Base class of a vertex program (see the module docstring for the step structure).

    Subclasses set ``combiner`` and ``edge_op`` and implement :meth:`init`, :meth:`emit` and
    :meth:`apply`, each vectorised over all vertices.
    """

    combiner: str = "sum"
    edge_op = "copy"
    max_steps: int = 100
    #: the compiled executor's fused kernel for this class (``"pr"``, ``"bfs"``, ``"cc"``, ``"sssp"``);
    #: read from the class's own body only, so a subclass (which may change emit/apply) runs unfused
    fused: str | None = None

    def init(self, g: Graph) -> tuple[np.ndarray, dict]:
        """Return the initial state, shape (n,), and a context dict for emit/apply."""
        raise NotImplementedError

    def emit(self, state: np.ndarray, ctx: dict) -> np.ndarray:
        """The per-vertex value sent along out-edges; the identity for inactive vertices."""
        raise NotImplementedError

    def apply(self, state: np.ndarray, acc: np.ndarray, ctx: dict) -> tuple[np.ndarray, bool]:
        """New state from the combined messages ``acc`` (identity where none); and ``done``."""
        raise NotImplementedError


# ---- executors -----------------------------------------------------------------------------------
class SerialExecutor:
    """Runs every partition in this process, one after another (one core)."""

    name = "serial"

    def start(self, parts: tuple) -> None:
        self.parts = parts

    def step(self, value, edge_op, combiner) -> list:
        return [partition_step(p, value, edge_op, combiner) for p in self.parts]

    def close(self) -> None:
        self.parts = ()


_WORKER_PARTS: dict = {}


def _pool_init(parts):
    _WORKER_PARTS.clear()
    _WORKER_PARTS.update({p.pid: p for p in parts})


def _pool_step(args):
    pids, value, edge_op, combiner = args
    return [partition_step(_WORKER_PARTS[i], value, edge_op, combiner) for i in pids]


class ProcessExecutor:
    """A process pool over partitions on one machine.

    Each worker process receives the partitions once (inherited on fork); a step ships only
    the emitted vector. Partitions are dealt round-robin to ``workers`` groups; partials come
    back in partition order.

    Parameters
    ----------
    workers : int
        Process count (>= 1).
    """

    name = "processes"

    def __init__(self, workers: int = 2):
        if workers < 1:
            raise UsageError(f"worker count must be >= 1, not {workers}")
        self.workers = workers
        self.pool = None

    def start(self, parts: tuple) -> None:
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(method)
        self.k = len(parts)
        self.groups = [list(range(i, self.k, self.workers)) for i in range(min(self.workers, self.k))]
        self.pool = ctx.Pool(len(self.groups), initializer=_pool_init, initargs=(parts,))

    def step(self, value, edge_op, combiner) -> list:
        res = self.pool.map(_pool_step, [(g, value, edge_op, combiner) for g in self.groups])
        out = [None] * self.k
        for g, r in zip(self.groups, res):
            for i, x in zip(g, r):
                out[i] = x
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None


def _dask_step(part, value, edge_op, combiner, kernel="numpy"):
    if kernel == "compiled":
        from .compiled import compiled_partition_step

        return compiled_partition_step(part, value, edge_op, combiner)
    return partition_step(part, value, edge_op, combiner)


class DaskExecutor:
    """Runs partitions as Dask distributed tasks.

    Parameters
    ----------
    address : str, optional
        A scheduler address (``tcp://host:8786``); default: an embedded ``LocalCluster``.
    workers : int
        Workers of the embedded cluster.
    processes : bool
        Embedded cluster with worker processes (True) or threads in this process (False).
    kernel : {"numpy", "compiled"}
        The partition kernel each task runs: :func:`partition_step` or the compiled executor's
        :func:`~models.systems.graph.compiled.compiled_partition_step` (the scale-out path of the
        compiled engine: the same numba kernel per partition; emit/apply stay on the client).
    """

    name = "dask"

    def __init__(self, address: str | None = None, workers: int = 2, processes: bool = False,
                 kernel: str = "numpy"):
        if workers < 1:
            raise UsageError(f"worker count must be >= 1, not {workers}")
        if kernel not in ("numpy", "compiled"):
            raise UsageError(f"Unknown Dask partition kernel {kernel!r}; choose numpy or compiled")
        self.address, self.workers, self.processes, self.kernel = address, workers, processes, kernel
        self.client = self.cluster = None

    def start(self, parts: tuple) -> None:
        from hwcosim.models.extras import systems_extra

        with systems_extra("the Dask graph executor"):
            from distributed import Client, LocalCluster

        if self.address:
            self.client = Client(self.address, timeout="20s")
        else:
            self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=self.processes,
                                        dashboard_address=None, silence_logs=40)
            self.client = Client(self.cluster)
        self.futs = self.client.scatter(list(parts))

    def step(self, value, edge_op, combiner) -> list:
        vf = self.client.scatter(value, broadcast=True)
        futs = [self.client.submit(_dask_step, pf, vf, edge_op, combiner, self.kernel, pure=False)
                for pf in self.futs]
        return self.client.gather(futs)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None


def make_executor(kind: str, workers: int = 2, scheduler: str | None = None, threads: int | None = None):
    """An executor by name: ``compiled`` (``threads`` nogil threads), ``serial``, ``processes``,
    ``dask``, ``dask-compiled`` (Dask tasks running the compiled partition kernel) or ``gram``
    (:class:`~models.systems.graph.gram_dask.GramDaskExecutor`: shards resident on Dask worker
    processes, boundary messages only)."""
    if kind == "compiled":
        from .compiled import CompiledExecutor

        return CompiledExecutor(threads)
    if kind == "serial":
        return SerialExecutor()
    if kind == "processes":
        return ProcessExecutor(workers)
    if kind == "dask":
        return DaskExecutor(scheduler, workers)
    if kind == "dask-compiled":
        return DaskExecutor(scheduler, workers, kernel="compiled")
    if kind == "gram":
        from .gram_dask import GramDaskExecutor

        return GramDaskExecutor(scheduler, workers)
    raise UsageError(f"Unknown executor {kind!r}; choose compiled, serial, processes, dask, dask-compiled or gram")


# ---- engine --------------------------------------------------------------------------------------
class Engine:
    """Runs vertex programs over a partitioned graph.

    Parameters
    ----------
    g : Graph
    parts : Partitioning, optional
        Default: ``partition(g, k, method)``.
    k : int
        Partition count when ``parts`` is not given.
    method : str
        Partitioning method when ``parts`` is not given.
    executor : SerialExecutor | ProcessExecutor | DaskExecutor | CompiledExecutor, optional
        Default serial. An executor with a ``run_fused(g, parts, program, steps)`` method (the
        compiled one) runs the programs it knows itself; ``None`` from it falls back to the
        generic superstep loop below.
    """

    def __init__(self, g: Graph, parts: Partitioning | None = None, *, k: int = 1, method: str = "hybrid",
                 executor=None):
        self.g = g
        self.parts = parts if parts is not None else partition(g, k, method)
        if self.parts.n != g.n:
            raise UsageError(f"Partitioning is for {self.parts.n} vertices, the graph has {g.n}")
        self.executor = executor if executor is not None else SerialExecutor()

    def combine(self, partials: list, combiner: str) -> np.ndarray:
        """Combine per-partition partials in ascending partition order (deterministic)."""
        acc = np.full(self.g.n, _IDENTITY[combiner])
        red = _REDUCE[combiner]
        for part, x in zip(self.parts.parts, partials):
            if x.size:
                acc[part.dst_unique] = red(acc[part.dst_unique], x)
        return acc

    def run(self, program: VertexProgram, max_steps: int | None = None) -> RunResult:
        """Run ``program`` to convergence or ``max_steps`` supersteps."""
        steps_cap = program.max_steps if max_steps is None else max_steps
        ex = self.executor
        fused = getattr(ex, "run_fused", None)
        if fused is not None:
            r = fused(self.g, self.parts, program, steps_cap)
            if r is not None:
                return r
        state, ctx = program.init(self.g)
        t0 = time.perf_counter()
        ex.start(self.parts.parts)
        t1 = time.perf_counter()
        c1 = time.process_time()
        steps = 0
        try:
            while steps < steps_cap:
                value = program.emit(state, ctx)
                partials = ex.step(value, program.edge_op, program.combiner)
                acc = self.combine(partials, program.combiner)
                state, done = program.apply(state, acc, ctx)
                steps += 1
                if done:
                    break
        finally:
            dt = time.perf_counter() - t1
            cpu = time.process_time() - c1
            ex.close()
        return RunResult(state, steps, dt, steps * self.g.m, t1 - t0, ex.name, self.parts.summary(), cpu)

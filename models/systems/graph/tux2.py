"""TuX2: heterogeneous (bipartite) graphs, the MEGA model and stale-synchronous execution.

Xiao, Xue, Miao, Li, Chen, Wu, Li, Zhou, "TuX2: Distributed Graph Computation for Machine
Learning", NSDI 2017. TuX2 runs machine-learning algorithms as graph programs:

- **Heterogeneous vertex types.** An ML data set is a bipartite graph: users/items (matrix
  factorisation), samples/features (logistic regression), documents/words (LDA). Each side
  (``a`` and ``b`` here) has its own data arrays; edges carry their own data (a rating, a
  feature value, a token's topic).
- **MEGA** (Mini-batch, Exchange, GlobalSync, Apply). A program is a sequence of user stages run
  once per *mini-batch* (a worker's share of the A-side vertices and their edges):
  ``exchange`` is vectorised over the batch's edges and returns per-edge messages, which the
  engine sums per vertex (an accumulator); ``apply`` updates a side's vertex data from its
  accumulator; ``globalsync`` contributes to values shared by all workers (e.g. LDA's topic
  totals). :class:`MEGAProgram` is the base class.
- **Stale synchronous parallel (SSP).** A worker (one partition of the graph) runs clock after
  clock (one clock = one mini-batch). It reads the master copies of the vertex data, computes,
  and pushes its deltas to the masters, where they are added on arrival. A worker may start
  clock ``c`` only once every worker's deltas of clocks ``< c - s`` have reached the masters,
  so a read is at most ``s`` clocks stale. ``s = 0`` is bulk synchronous (BSP).
- **Partitioning.** The graph is cut with the PowerLyra hybrid cut of
  :mod:`~models.systems.graph.partition`; ``"bicut"`` (the default) is the hybrid cut with threshold 0
  on edges oriented A -> B, i.e. every edge goes with its A vertex: the A side (the larger,
  "favourite" subset of BiGraph, Chen et al. 2015, which TuX2 adopts) has no mirrors and the B
  side is replicated.

Time is simulated: :class:`WorkerModel` draws, from a seed, a speed for every (worker, clock)
(a persistent per-worker speed, per-clock jitter, and rare stragglers), so BSP pays for the
slowest worker of every clock while SSP absorbs it. The numerics are real and follow the
simulated schedule exactly (a discrete-event simulation: a worker computes on the master values
present at its simulated start time), so a run is deterministic for a seed. Wall time of the
host is measured too. Two executors run the workers for real: ``threads`` (the modelled
durations slept for real) and ``processes`` (:mod:`~models.systems.graph.tux2_procs`: one OS
process per worker over shared-memory masters, nothing modelled: convergence per measured second).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError

from .graph import Graph
from .partition import partition

__all__ = ["Bipartite", "WorkerModel", "Stage", "Batch", "MEGAProgram", "TuX2Engine", "TuX2Result",
           "PARTITIONERS", "EXECUTORS", "register_executor"]

PARTITIONERS = ("bicut", "hybrid", "vertex-cut", "edge-cut")
EXECUTORS = ("simulated", "threads", "processes", "dask")
SIDES = ("a", "b")

#: executor name -> ``(runner, options)``. ``runner(engine, program, master, s, C, batches, record,
#: **options)`` runs ``C`` clocks on every worker and returns a :class:`TuX2Result`; ``options`` names the
#: keywords of :meth:`TuX2Engine.run` it takes. ``simulated`` and ``threads`` are defined here; the
#: modules of the others register them when the package imports them (``processes``:
#: :mod:`~models.systems.graph.tux2_procs`, ``dask``: :mod:`~models.systems.graph.tux2_dask`), so
#: this module depends on none of them.
_RUNNERS: dict[str, tuple[Callable, tuple[str, ...]]] = {}


def register_executor(name: str, runner: Callable, options: tuple[str, ...] = ()) -> None:
    """Make ``runner`` the executor ``name`` (one of :data:`EXECUTORS`) of :meth:`TuX2Engine.run`."""
    if name not in EXECUTORS:
        raise ValueError(f"Unknown executor {name!r}; the TuX2 executors are {', '.join(EXECUTORS)}")
    _RUNNERS[name] = (runner, tuple(options))


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise UsageError(f"{name} must be an integer >= {lo}, not {value!r}")
    return int(value)


@dataclass(frozen=True, eq=False)
class Bipartite:
    """A bipartite graph with typed vertices: ``n_a`` A vertices, ``n_b`` B vertices.

    Parameters
    ----------
    n_a, n_b : int
        Vertex counts of the two types (e.g. samples and features).
    a, b : ndarray of int64, shape (E,)
        Edge endpoints: ``a[e]`` in ``[0, n_a)``, ``b[e]`` in ``[0, n_b)``. Parallel edges are
        allowed (LDA: one edge per token).
    edata : dict of str -> ndarray, shape (E, ...)
        Static edge data (rating, feature value, ...).
    a_data, b_data : dict of str -> ndarray, shape (n_a, ...) / (n_b, ...)
        Static vertex data (e.g. labels of samples).
    types : tuple of str
        Names of the two vertex types, for reports.
    name : str
    """

    n_a: int
    n_b: int
    a: np.ndarray
    b: np.ndarray
    edata: dict = field(default_factory=dict)
    a_data: dict = field(default_factory=dict)
    b_data: dict = field(default_factory=dict)
    types: tuple = ("a", "b")
    name: str = "bipartite"

    def __post_init__(self):
        _check_int("n_a", self.n_a, 1)
        _check_int("n_b", self.n_b, 1)
        a = np.ascontiguousarray(self.a, dtype=np.int64)
        b = np.ascontiguousarray(self.b, dtype=np.int64)
        if a.ndim != 1 or a.shape != b.shape or a.size == 0:
            raise UsageError(f"a and b must be non-empty 1-D arrays of equal length, not {a.shape} and {b.shape}")
        if a.min() < 0 or a.max() >= self.n_a or b.min() < 0 or b.max() >= self.n_b:
            raise UsageError(f"edge endpoints out of range: a in [{a.min()}, {a.max()}] (n_a={self.n_a}), "
                             f"b in [{b.min()}, {b.max()}] (n_b={self.n_b})")
        for kind, d, n in (("edata", self.edata, a.size), ("a_data", self.a_data, self.n_a),
                           ("b_data", self.b_data, self.n_b)):
            for k, v in d.items():
                if np.shape(v)[:1] != (n,):
                    raise UsageError(f"{kind}[{k!r}] must have {n} rows, not shape {np.shape(v)}")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def m(self) -> int:
        return int(self.a.size)

    def graph(self) -> Graph:
        """The homogeneous view: vertices ``0..n_a-1`` are A, ``n_a..n_a+n_b-1`` are B; edges A -> B."""
        return Graph(self.n_a + self.n_b, self.a, self.b + self.n_a, name=self.name)


@dataclass(frozen=True)
class WorkerModel:
    """Seeded model of worker progress (simulated seconds).

    A clock of worker ``w`` computes for ``edges * exchanges * edge_cost / speed[w, c]`` and then
    pushes its deltas: ``sync_latency + bytes * byte_cost``. ``speed[w, c]`` is the product of a
    persistent per-worker speed (log-normal, ``speed_sigma``), a per-clock jitter (log-normal,
    ``jitter_sigma``) and, with probability ``straggler_p``, a slow-down by ``straggler_factor``.
    The table depends only on the seed, so runs with different staleness see the same speeds.
    The defaults are assumptions, not measurements: 1 us per edge and stage, a 200 us push/pull
    round trip, 1 GB/s for deltas, nearly equal machines (5 %), 30 % per-clock jitter and a 4x
    straggler in 5 % of the clocks.
    """

    edge_cost: float = 1e-6
    sync_latency: float = 2e-4
    byte_cost: float = 1e-9
    speed_sigma: float = 0.05
    jitter_sigma: float = 0.3
    straggler_p: float = 0.05
    straggler_factor: float = 4.0
    seed: int = 0

    def __post_init__(self):
        for k in ("edge_cost", "sync_latency", "byte_cost", "speed_sigma", "jitter_sigma"):
            if not getattr(self, k) >= 0:
                raise UsageError(f"{k} must be >= 0, not {getattr(self, k)}")
        if not 0 <= self.straggler_p <= 1:
            raise UsageError(f"straggler_p must be in [0, 1], not {self.straggler_p}")
        if not self.straggler_factor >= 1:
            raise UsageError(f"straggler_factor must be >= 1, not {self.straggler_factor}")

    def slowdown(self, workers: int, clocks: int) -> np.ndarray:
        """``1 / speed``, shape (workers, clocks)."""
        rng = np.random.default_rng([self.seed, 0x7A2])
        base = rng.lognormal(0.0, self.speed_sigma, (workers, 1))
        jit = rng.lognormal(0.0, self.jitter_sigma, (workers, clocks))
        strag = np.where(rng.random((workers, clocks)) < self.straggler_p, self.straggler_factor, 1.0)
        return base * jit * strag


@dataclass(frozen=True)
class Stage:
    """One MEGA stage: ``kind`` in {"exchange", "apply", "globalsync"} and the user function.

    - ``exchange(bt, view) -> {"a": {name: per-edge array}, "b": {...}}``: messages along the
      batch's edges, summed per vertex into ``bt.acc[side][name]`` (rows follow ``bt.ua``/``bt.ub``).
      It may rewrite ``bt.edata`` (edge state owned by the worker, e.g. LDA topics).
    - ``apply(bt, view)``: updates ``view[side]`` rows of the batch's vertices from ``bt.acc``.
    - ``globalsync(bt, view) -> {name: contribution}``: added to the shared ``view["g"]``.
    """

    kind: str
    fn: Callable

    def __post_init__(self):
        if self.kind not in ("exchange", "apply", "globalsync"):
            raise ValueError(f"Unknown stage kind {self.kind!r}; choose exchange, apply or globalsync")


@dataclass(eq=False)
class Batch:
    """A mini-batch as the stages see it.

    Attributes
    ----------
    worker, clock : int
    e : ndarray, shape (E_b,)
        Edge ids of the batch.
    a, b : ndarray, shape (E_b,)
        Endpoints of the batch's edges.
    ua, ub : ndarray
        Distinct A and B vertices of the batch; ``ia``, ``ib`` map each edge to its row there.
    edata : dict
        Per-edge data of the batch (static and mutable edge state), rows follow ``e``.
    g : Bipartite
        The graph (static vertex data in ``g.a_data`` / ``g.b_data``).
    global_batch : float
        A vertices per global clock, ``n_a / batches`` (the mini-batch size of plain SGD).
    rng : numpy Generator
        Seeded by (seed, worker, clock): independent of the schedule.
    inc : dict
        Sparse incidence matrices (``ua`` x edges, ``ub`` x edges) that sum messages per vertex.
    acc : dict
        Accumulators filled by exchange stages.
    """

    worker: int
    clock: int
    e: np.ndarray
    a: np.ndarray
    b: np.ndarray
    ua: np.ndarray
    ub: np.ndarray
    ia: np.ndarray
    ib: np.ndarray
    edata: dict
    g: Bipartite
    global_batch: float
    rng: np.random.Generator
    inc: dict
    acc: dict = field(default_factory=lambda: {"a": {}, "b": {}})


class MEGAProgram:
    """Base class of a TuX2 program.

    Subclasses implement :meth:`init` (vertex, global and edge state), :attr:`stages` and
    :meth:`loss` (of the master state, lower is better). ``a_complete = True`` declares that an
    exchange needs all edges of an A vertex in one batch (e.g. a sample's dot product); the engine
    then rejects partitionings that split an A vertex.
    """

    name = "program"
    metric = "loss"
    a_complete = False

    def init(self, g: Bipartite, rng: np.random.Generator) -> dict:
        """``{"a": {...}, "b": {...}, "g": {...}, "e": {...}}``: vertex, global and edge state."""
        raise NotImplementedError

    @property
    def stages(self) -> list:
        raise NotImplementedError

    def minibatch(self, ua: np.ndarray, clock: int, batches: int) -> np.ndarray:
        """The Mini-batch stage: the A vertices of a worker (ascending) processed at ``clock``.

        Default: ``batches`` contiguous groups, visited round-robin.
        """
        return np.array_split(ua, batches)[clock % batches]

    def loss(self, g: Bipartite, state: dict) -> float:
        raise NotImplementedError


@dataclass
class TuX2Result:
    """Outcome of :meth:`TuX2Engine.run`.

    ``history`` has one row per global clock (every worker done with it): clock, simulated
    time, wall seconds (loss evaluation excluded) and the loss of the master state.
    ``staleness_reads`` counts reads by staleness (clocks of the slowest applied worker behind
    the reader); ``max_staleness`` is its largest key.
    """

    state: dict
    history: list
    staleness: int
    workers: int
    clocks: int
    sim_time: float
    wall_time: float
    max_staleness: int
    staleness_reads: dict
    wait_time: float
    partitioning: dict
    trace: dict | None = None


class TuX2Engine:
    """Runs MEGA programs over a partitioned bipartite graph under SSP.

    Parameters
    ----------
    g : Bipartite
    workers : int
        Worker (partition) count, 1 <= workers <= n_a.
    partitioner : {"bicut", "hybrid", "vertex-cut", "edge-cut"}
    model : WorkerModel, optional
    seed : int
        Seeds the program's initial state and the per-clock generators.
    """

    def __init__(self, g: Bipartite, workers: int = 4, *, partitioner: str = "bicut",
                 model: WorkerModel | None = None, seed: int = 0):
        workers = _check_int("workers", workers, 1)
        if workers > g.n_a:
            raise UsageError(f"workers must be <= the {g.n_a} A vertices, not {workers}")
        if partitioner not in PARTITIONERS:
            raise UsageError(f"Unknown partitioner {partitioner!r}; choose one of {', '.join(PARTITIONERS)}")
        self.g, self.workers, self.partitioner = g, workers, partitioner
        self.model = model if model is not None else WorkerModel(seed=seed)
        self.seed = seed
        method, thr = ("hybrid", 0) if partitioner == "bicut" else (partitioner, None)
        P = partition(g.graph(), workers, method, threshold=thr, seed=seed, edge_ids=True)
        self.summary = P.summary() | {"partitioner": partitioner}
        # each worker's edges, sorted by A vertex (stable): batches are runs of A vertices
        self.local = []
        owners = np.empty(g.m, np.int64)
        for p in P.parts:
            e = p.eids[np.argsort(g.a[p.eids], kind="stable")]
            owners[e] = p.pid
            self.local.append(e)
        lo = np.full(g.n_a, workers)
        hi = np.full(g.n_a, -1)
        np.minimum.at(lo, g.a, owners)
        np.maximum.at(hi, g.a, owners)
        split = (lo != hi) & (hi >= 0)
        self.a_split = int(split.sum())
        self._cache: dict = {}

    def __getstate__(self):
        """Pickled (for worker processes) without the mini-batch cache, which each process rebuilds."""
        return self.__dict__ | {"_cache": {}}

    # ---- batches ---------------------------------------------------------------------------
    def _batch_edges(self, program: MEGAProgram, w: int, clock: int, batches: int):
        e = self.local[w]
        aw = self.g.a[e]
        pick = np.asarray(program.minibatch(np.unique(aw), clock, batches), np.int64)
        key = (w, pick.tobytes())
        if key in self._cache:
            return self._cache[key]
        sel = e[np.isin(aw, pick)]
        a, b = self.g.a[sel], self.g.b[sel]
        ua, ia = np.unique(a, return_inverse=True)
        ub, ib = np.unique(b, return_inverse=True)
        ones = np.ones(sel.size)
        cols = np.arange(sel.size)
        inc = {"a": sp.csr_matrix((ones, (ia, cols)), shape=(ua.size, sel.size)),
               "b": sp.csr_matrix((ones, (ib, cols)), shape=(ub.size, sel.size))}
        self._cache[key] = out = (sel, a, b, ua, ub, ia, ib, inc)
        return out

    def _compute(self, program, state, view, w, clock, batches):
        sel, a, b, ua, ub, ia, ib, inc = self._batch_edges(program, w, clock, batches)
        ed = {k: v[sel] for k, v in self.g.edata.items()} | {k: v[sel] for k, v in state["e"].items()}
        bt = Batch(w, clock, sel, a, b, ua, ub, ia, ib, ed, self.g, self.g.n_a / batches,
                   np.random.default_rng([self.seed, w, clock]), inc)
        n_ex = 0
        for st in program.stages:
            if st.kind == "exchange":
                n_ex += 1
                msgs = st.fn(bt, view) or {}
                for side, d in msgs.items():
                    for k, m in d.items():
                        m = np.asarray(m, float)
                        bt.acc[side][k] = inc[side] @ m if sel.size else np.zeros((0,) + m.shape[1:])
            elif st.kind == "apply":
                st.fn(bt, view)
            else:
                for k, v in (st.fn(bt, view) or {}).items():
                    view["g"][k] = view["g"][k] + v
        for k in state["e"]:
            state["e"][k][sel] = bt.edata[k]
        return sel.size * max(n_ex, 1)

    # ---- run -------------------------------------------------------------------------------
    def _read(self, master, applied, w: int, c: int, s: int, reads: dict):
        """A worker's read of the masters at clock ``c``, with the staleness instrument."""
        stale = c - int(applied.min())      # measured on the applied data, not on the gate
        if stale > s or stale < 0:
            raise RuntimeError(f"internal error: worker {w} read {stale} clocks stale with bound {s}")
        reads[stale] = reads.get(stale, 0) + 1
        view = {k: {n: v.copy() for n, v in master[k].items()} for k in ("a", "b", "g")}
        snap = {k: {n: v.copy() for n, v in master[k].items()} for k in ("a", "b", "g")}
        return view, snap

    @staticmethod
    def _deltas(view, snap):
        """Changed rows of every vertex/global array (new - old) and their size in bytes."""
        deltas, nbytes = {}, 0
        for k in ("a", "b", "g"):
            for n, v in view[k].items():
                d = v - snap[k][n]
                if d.ndim == 0:
                    deltas[(k, n)] = (None, d)
                    nbytes += 8
                    continue
                rows = np.flatnonzero(np.any(d.reshape(d.shape[0], -1) != 0, axis=1))
                if rows.size:
                    deltas[(k, n)] = (rows, d[rows])
                    nbytes += rows.size * (8 + 8 * int(np.prod(d.shape[1:])))
        return deltas, nbytes

    @staticmethod
    def _push(master, deltas):
        for (k, n), (rows, d) in deltas.items():
            if rows is None:
                master[k][n] = master[k][n] + d
            else:
                master[k][n][rows] += d

    def run(self, program: MEGAProgram, *, staleness: int = 0, epochs: int = 10, batches: int = 1,
            record: bool = True, executor: str = "simulated", time_scale: float = 1.0,
            start_method: str | None = None, client=None, straggler: int | None = None) -> TuX2Result:
        """Run ``epochs * batches`` clocks per worker under SSP with bound ``staleness``.

        Parameters
        ----------
        program : MEGAProgram
        staleness : int
            ``s >= 0``; 0 is BSP.
        epochs : int
            Passes over every worker's edges (>= 1).
        batches : int
            Mini-batches per epoch (>= 1): one clock processes ``1/batches`` of a worker's A vertices.
        record : bool
            Evaluate the loss after every global clock.
        executor : {"simulated", "threads", "processes"}
            ``simulated``: the deterministic discrete-event simulation (module docstring).
            ``threads``: one thread per worker with a real SSP gate (a condition variable); each
            clock also sleeps for its modelled duration times ``time_scale`` (the emulated worker
            speed), so the host wall time includes the real waiting of SSP/BSP. Its result
            depends on thread timing; ``sim_time`` is then the wall time divided by ``time_scale``.
            ``processes``: one OS process per worker, masters in shared memory, the SSP gate a
            condition variable across processes, no modelled delays: clocks last as long as the
            computation takes (:mod:`~models.systems.graph.tux2_procs`). ``sim_time`` is the wall
            time; ``trace`` holds the per-(worker, clock) minimum observed clock and timings.
        time_scale : float
            Real seconds per modelled second in the ``threads`` executor (> 0).
            ``dask``: one long-running Dask task per worker, each on its own Dask worker, the masters
            and the SSP gate in a Dask actor (:mod:`~models.systems.graph.tux2_dask`); measured
            like ``processes``.
        start_method : str, optional
            ``multiprocessing`` start method of the ``processes`` executor (default ``forkserver``
            where available, else ``spawn``).
        client : distributed.Client, optional
            The ``dask`` executor's cluster (at least ``workers`` Dask workers); default a
            ``LocalCluster`` of ``workers`` processes for the run.
        straggler : int, optional
            ``processes`` and ``dask`` executors: hold this worker at every clock until every other worker has
            finished or is blocked at the staleness gate (the slowest straggler the bound allows,
            whatever the host's scheduling).

        Raises
        ------
        ValueError
            For a bad argument, or ``program.a_complete`` with a partitioning that splits A vertices.
        """
        s = _check_int("staleness", staleness, 0)
        epochs = _check_int("epochs", epochs, 1)
        batches = _check_int("batches", batches, 1)
        if not isinstance(program, MEGAProgram):
            raise UsageError(f"program must be a MEGAProgram, not {type(program).__name__}")
        if executor not in EXECUTORS:
            raise UsageError(f"Unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
        if not (isinstance(time_scale, (int, float)) and time_scale > 0):
            raise UsageError(f"time_scale must be > 0, not {time_scale!r}")
        if program.a_complete and self.a_split:
            raise UsageError(f"{program.name} needs all edges of an A vertex on one worker, but the "
                             f"{self.partitioner!r} partitioning splits {self.a_split} of them; use 'bicut'")
        master = program.init(self.g, np.random.default_rng(self.seed))
        for k in ("a", "b", "g", "e"):
            master.setdefault(k, {})
        if executor not in _RUNNERS:  # the package imports every executor's module
            raise RuntimeError(f"internal error: the {executor!r} executor is not registered")
        runner, options = _RUNNERS[executor]
        if straggler is not None and "straggler" not in options:
            have = [n for n in EXECUTORS if "straggler" in _RUNNERS.get(n, (None, ()))[1]]
            raise UsageError(f"straggler is an option of the {' and '.join(have)} executors, not of {executor!r}")
        given = {"time_scale": time_scale, "start_method": start_method, "client": client, "straggler": straggler}
        return runner(self, program, master, s, epochs * batches, batches, record, **{k: given[k] for k in options})

    def _duration(self, work: int, nbytes: int, slow: float) -> float:
        m = self.model
        return work * m.edge_cost * slow + m.sync_latency + nbytes * m.byte_cost

    def _simulate(self, program, master, s, C, batches, record) -> TuX2Result:
        W = self.workers
        slow = self.model.slowdown(W, C)
        applied = np.zeros(W, np.int64)     # clocks of each worker whose deltas reached the masters
        clock = np.zeros(W, np.int64)       # next clock of each worker
        busy = np.zeros(W, bool)
        ready_at = np.zeros(W)              # when each worker became free to start
        reads: dict = {}
        events: list = []                   # (time, seq, worker, deltas)
        seq = 0
        wait = 0.0
        history = []
        loss_wall = 0.0
        t_wall0 = time.perf_counter()
        if record:
            history.append({"clock": 0, "sim_time": 0.0, "wall_time": 0.0, "loss": program.loss(self.g, master)})
            loss_wall += time.perf_counter() - t_wall0
        global_clock = 0

        def try_start(w: int, now: float):
            nonlocal seq, wait
            c = int(clock[w])
            if busy[w] or c >= C or applied.min() < c - s:
                return
            view, snap = self._read(master, applied, w, c, s, reads)
            wait += now - ready_at[w]
            work = self._compute(program, master, view, w, c, batches)
            deltas, nbytes = self._deltas(view, snap)
            busy[w] = True
            heapq.heappush(events, (now + self._duration(work, nbytes, slow[w, c]), seq, w, deltas))
            seq += 1

        for w in range(W):
            try_start(w, 0.0)
        now = 0.0
        while events:
            now, _, w, deltas = heapq.heappop(events)
            self._push(master, deltas)
            applied[w] += 1
            clock[w] += 1
            busy[w] = False
            ready_at[w] = now
            gmin = int(applied.min())
            if record and gmin > global_clock:
                t = time.perf_counter()
                lv = program.loss(self.g, master)
                loss_wall += time.perf_counter() - t
                history.append({"clock": gmin, "sim_time": now,
                                "wall_time": time.perf_counter() - t_wall0 - loss_wall, "loss": lv})
            global_clock = max(global_clock, gmin)
            for v in [w] + [x for x in range(W) if x != w]:
                try_start(v, now)
        if not (applied == C).all():
            raise RuntimeError("internal error: the SSP schedule deadlocked")
        wall = time.perf_counter() - t_wall0 - loss_wall
        return TuX2Result(master, history, s, W, C, now, wall, max(reads), dict(sorted(reads.items())), wait,
                          self.summary)

    def _threads(self, program, master, s, C, batches, record, time_scale: float = 1.0) -> TuX2Result:
        import threading

        W = self.workers
        slow = self.model.slowdown(W, C)
        applied = np.zeros(W, np.int64)
        started = np.zeros(W, np.int64)     # clocks each worker has read its inputs for
        reads: dict = {}
        history = []
        cv = threading.Condition()
        acc = {"wait": 0.0, "loss_wall": 0.0, "gclock": 0}
        errors = []
        t0 = time.perf_counter()
        if record:
            history.append({"clock": 0, "sim_time": 0.0, "wall_time": 0.0, "loss": program.loss(self.g, master)})
            acc["loss_wall"] += time.perf_counter() - t0

        def worker(w: int):
            try:
                for c in range(C):
                    with cv:
                        tw = time.perf_counter()
                        cv.wait_for(lambda c=c: applied.min() >= c - s or errors)
                        if errors:
                            return
                        acc["wait"] += time.perf_counter() - tw
                        view, snap = self._read(master, applied, w, c, s, reads)
                        started[w] = c + 1
                        cv.notify_all()
                    work = self._compute(program, master, view, w, c, batches)
                    deltas, nbytes = self._deltas(view, snap)
                    time.sleep(self._duration(work, nbytes, slow[w, c]) * time_scale)
                    with cv:
                        if s == 0:  # BSP: no clock-c delta lands before every worker has read clock c
                            cv.wait_for(lambda c=c: started.min() > c or errors)
                            if errors:
                                return
                        self._push(master, deltas)
                        applied[w] += 1
                        gmin = int(applied.min())
                        if record and gmin > acc["gclock"]:
                            t = time.perf_counter()
                            lv = program.loss(self.g, master)
                            acc["loss_wall"] += time.perf_counter() - t
                            wall = time.perf_counter() - t0 - acc["loss_wall"]
                            history.append({"clock": gmin, "sim_time": wall / time_scale, "wall_time": wall,
                                            "loss": lv})
                            acc["gclock"] = gmin
                        cv.notify_all()
            except BaseException as e:  # surface a worker's failure in the caller
                with cv:
                    errors.append(e)
                    cv.notify_all()

        threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(W)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        wall = time.perf_counter() - t0 - acc["loss_wall"]
        return TuX2Result(master, history, s, W, C, wall / time_scale, wall, max(reads), dict(sorted(reads.items())),
                          acc["wait"] / time_scale, self.summary)


register_executor("simulated", TuX2Engine._simulate)
register_executor("threads", TuX2Engine._threads, ("time_scale",))

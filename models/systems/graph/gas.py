"""A gather-apply-scatter (GAS) layer: the PowerGraph model, as the baseline of TuX2.

Gonzalez, Low, Gu, Bickson, Guestrin, "PowerGraph: Distributed Graph-Parallel Computation on
Natural Graphs", OSDI 2012. A vertex program has three phases, run on every *active* vertex in a
synchronous superstep (PowerGraph's synchronous engine, bulk synchronous parallel):

1. **gather**: over the vertex's edges, a message per edge computed from the edge and both end
   vertices, summed per vertex. Under a **vertex-cut** each partition (worker) gathers over the
   edges it holds; a vertex's mirrors send their partial sums to its master.
2. **apply**: the master updates the vertex data from the sum and sends the new value to its mirrors.
3. **scatter**: over the edges again, activating neighbours (the programs here keep every vertex of
   the active type active, so they scatter nothing; :meth:`GASProgram.sides` names the active type).

The project's :class:`~models.systems.graph.engine.Engine` runs scalar vertex values with
source-only edge operators, which cannot express a gather that reads both endpoints and vector
vertex data (MF's ``r - p_u . q_i``), so this module is a small GAS layer on the same graph
package: the homogeneous view of a :class:`~models.systems.graph.tux2.Bipartite` graph is cut with
:func:`~models.systems.graph.partition.partition` (``"vertex-cut"``, PowerGraph's random
vertex-cut; hashed masters), gathers are vectorised over a partition's edges and partial sums are
combined at the masters in ascending partition order (deterministic, as in the engine).

:class:`GasMF` and :class:`GasLR` are matrix factorisation and logistic regression as plain GAS
programs, with the arithmetic of :class:`~models.systems.graph.tux2_algos.MF` and
:class:`~models.systems.graph.tux2_algos.LR` (a superstep of :class:`GasMF` is one full-batch
gradient step; :class:`GasLR` needs two supersteps per step: samples gather their dot products,
then features gather the gradient). GAS has no mini-batch: every superstep gathers over all edges
of the active type, the restriction TuX2's MEGA model lifts.

**Time.** As in :class:`~models.systems.graph.tux2.TuX2Engine`, a worker's step lasts
``work * edge_cost * slowdown[w, t] + 2 * sync_latency + bytes * byte_cost`` (two exchanges:
mirrors -> masters, masters -> mirrors) with the costs of a
:class:`~models.systems.graph.tux2.WorkerModel`; a BSP superstep lasts as long as its slowest
worker. ``work`` is edges gathered; ``bytes`` the worker's mirror rows sent and received.
:class:`PaiWorkerModel` takes the slowdowns from a real Alibaba PAI job's per-worker mini-batch
times (:mod:`~models.systems.reliability.pai`): worker ``w`` in step ``t`` is slowed by
``v[(offset + t) % T, w] / median(v)`` of that job (one modelled worker per trace worker, one
trace row per TuX2 clock; a GAS superstep that gathers over ``k`` clocks' worth of edges spans ``k``
rows and is slowed by their mean, :meth:`GASEngine.slowdown`, so both systems meet the same stretch
of trace per pass over the data). Executors: ``simulated``
(deterministic) and ``threads`` (one thread per worker computes its partition for real and then
sleeps its modelled duration times ``time_scale``, a barrier ends the superstep: wall seconds).

:func:`gas_vs_tux2` is the study: time to a common target loss, GAS (BSP) against TuX2 MEGA under
SSP with staleness 0, 1, 2, 4, same data, workers and straggler table; and the code lines of the
vertex-program functions of both forms.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError
from scipy.special import expit

from .partition import partition
from .tux2 import Bipartite, WorkerModel
from .tux2_algos import MFModel, _nonneg, _positive, code_lines, lr_loss, mf_rmse

__all__ = ["GASProgram", "GASEngine", "GASResult", "GasMF", "GasLR", "PaiWorkerModel", "pai_slowdown",
           "gas_line_counts", "gas_vs_tux2", "GAS_EXECUTORS"]

GAS_EXECUTORS = ("simulated", "threads")
SIDES = ("a", "b")


# ---- stragglers from the PAI traces ----------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _pai_table(job: int) -> np.ndarray:
    from hwcosim.models.systems.reliability.pai import load_job

    v = load_job(job).v
    return v / float(np.median(v))


def pai_slowdown(job: int, workers: int, steps: int, offset: int = 0) -> np.ndarray:
    """Slowdown, shape (workers, steps): worker ``w`` at step ``t`` is ``v[(offset + t) % T, w] / median(v)``
    of PAI job ``job`` (1-4; ``v`` the normalised per-worker mini-batch time, ``T`` its logged iterations)."""
    tab = _pai_table(job)
    T, n = tab.shape
    if not 1 <= workers <= n:
        raise UsageError(f"PAI job {job} has {n} workers: use 1 .. {n} workers, not {workers}")
    rows = (int(offset) + np.arange(steps)) % T
    return np.ascontiguousarray(tab[rows, :workers].T)


@dataclass(frozen=True)
class PaiWorkerModel(WorkerModel):
    """A :class:`~models.systems.graph.tux2.WorkerModel` whose slowdowns are a real PAI job's
    (:func:`pai_slowdown`) instead of the seeded log-normal jitter and stragglers (those fields
    are unused). ``job``: 1-4 of ``alibaba-pai-2020``; ``offset``: first trace row."""

    job: int = 1
    offset: int = 0

    def __post_init__(self):
        super().__post_init__()
        if self.job not in (1, 2, 3, 4):
            raise UsageError(f"PAI job must be one of 1, 2, 3, 4, not {self.job!r}")
        if not (isinstance(self.offset, int) and self.offset >= 0):
            raise UsageError(f"offset must be an integer >= 0, not {self.offset!r}")

    def slowdown(self, workers: int, clocks: int) -> np.ndarray:
        return pai_slowdown(self.job, workers, clocks, self.offset)


# ---- the GAS model ----------------------------------------------------------------------------------
class GASProgram:
    """A gather-apply-scatter vertex program over a bipartite graph (vectorised).

    - :meth:`sides` ``(step)``: the vertex types active in a superstep (``"a"``, ``"b"`` or both).
    - :meth:`gather` ``(side, e, state)``: per-edge messages to the ``side`` endpoint of each edge
      of ``e`` (an :class:`Edges`: the partition's edges with their endpoints and data), read from
      ``state`` (the vertex data, as the partition's mirrors hold it), summed per vertex.
    - :meth:`apply` ``(side, state, acc, g)``: new vertex data of ``side`` from the sums ``acc``
      (``{name: array with a row per vertex of that side}``, zero for vertices without edges).
    """

    name = "gas"
    metric = "loss"

    def init(self, g: Bipartite, rng: np.random.Generator) -> dict:
        raise NotImplementedError

    def sides(self, step: int) -> tuple:
        return SIDES

    def gather(self, side: str, e, state: dict) -> dict:
        raise NotImplementedError

    def apply(self, side: str, state: dict, acc: dict, g: Bipartite) -> None:
        raise NotImplementedError

    def steps_per_epoch(self) -> int:
        """Supersteps that make one pass of the algorithm (a gradient step)."""
        return 1

    def loss(self, g: Bipartite, state: dict) -> float:
        raise NotImplementedError


@dataclass(eq=False)
class Edges:
    """A partition's edges: endpoints ``a``, ``b``, edge data ``edata`` and the graph ``g``."""

    a: np.ndarray
    b: np.ndarray
    edata: dict
    g: Bipartite


class GasMF(MFModel, GASProgram):
    """Matrix factorisation: users and items both gather ``e q_i - reg p_u`` / ``e p_u - reg q_i``."""

    def gather(self, side, e, state):
        p, q = state["a"]["p"][e.a], state["b"]["q"][e.b]
        err = (e.edata["r"] - np.einsum("ij,ij->i", p, q))[:, None]
        return {"p": err * q - self.reg * p} if side == "a" else {"q": err * p - self.reg * q}

    def apply(self, side, state, acc, g):
        name = "p" if side == "a" else "q"
        state[side][name] += self.lr * acc[name]

    def loss(self, g, state):
        return mf_rmse(g, state["a"]["p"], state["b"]["q"])


class GasLR(GASProgram):
    """Logistic regression: even supersteps samples gather ``x w`` (apply: the error), odd supersteps
    features gather ``x err + reg w`` (apply: the gradient step over all samples)."""

    name, metric = "lr", "log-loss"

    def __init__(self, lr: float = 1.0, reg: float = 1e-3):
        _positive(lr=lr)
        _nonneg(reg=reg)
        self.lr, self.reg = lr, reg

    def init(self, g, rng):
        return {"a": {"err": np.zeros(g.n_a)}, "b": {"w": np.zeros(g.n_b)}}

    def sides(self, step):
        return ("a",) if step % 2 == 0 else ("b",)

    def steps_per_epoch(self):
        return 2

    def gather(self, side, e, state):
        if side == "a":
            return {"z": e.edata["x"] * state["b"]["w"][e.b]}
        return {"w": e.edata["x"] * state["a"]["err"][e.a] + self.reg * state["b"]["w"][e.b]}

    def apply(self, side, state, acc, g):
        if side == "a":
            state["a"]["err"] = expit(acc["z"]) - g.a_data["y"]
        else:
            state["b"]["w"] -= self.lr * acc["w"] / g.n_a

    def loss(self, g, state):
        return lr_loss(g, state["b"]["w"], self.reg)


@dataclass
class GASResult:
    """Outcome of :meth:`GASEngine.run`: ``history`` rows (step, sim_time, wall_time, loss) after
    every superstep; ``steps`` run; ``reached``: the target loss was reached (when one was given)."""

    state: dict
    history: list
    steps: int
    sim_time: float
    wall_time: float
    workers: int
    partitioning: dict
    bytes_per_step: float
    reached: bool | None = None


class GASEngine:
    """Runs :class:`GASProgram` s over a vertex-cut bipartite graph in synchronous supersteps.

    Parameters
    ----------
    g : Bipartite
    workers : int
        Partitions = workers (>= 1).
    partitioner : {"vertex-cut", "hybrid", "edge-cut"}
        Default PowerGraph's random vertex-cut.
    model : WorkerModel, optional
        Step costs and slowdowns (default ``WorkerModel(seed=seed)``).
    seed : int
    """

    def __init__(self, g: Bipartite, workers: int = 4, *, partitioner: str = "vertex-cut",
                 model: WorkerModel | None = None, seed: int = 0):
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise UsageError(f"workers must be an integer >= 1, not {workers!r}")
        self.g, self.workers, self.seed = g, int(workers), seed
        self.model = model if model is not None else WorkerModel(seed=seed)
        P = partition(g.graph(), self.workers, partitioner, seed=seed, edge_ids=True)
        self.summary = P.summary() | {"partitioner": partitioner}
        master_a, master_b = P.master[:g.n_a], P.master[g.n_a:]
        self.parts = []
        for p in P.parts:
            e = np.sort(p.eids)
            a, b = g.a[e], g.b[e]
            ua, ia = np.unique(a, return_inverse=True)
            ub, ib = np.unique(b, return_inverse=True)
            ones, cols = np.ones(e.size), np.arange(e.size)
            self.parts.append({
                "e": e, "edges": Edges(a, b, {k: v[e] for k, v in g.edata.items()}, g),
                "u": {"a": ua, "b": ub},
                "inc": {"a": sp.csr_matrix((ones, (ia, cols)), shape=(ua.size, e.size)),
                        "b": sp.csr_matrix((ones, (ib, cols)), shape=(ub.size, e.size))},
                "mirrors": {"a": int((master_a[ua] != p.pid).sum()), "b": int((master_b[ub] != p.pid).sum())}})

    def _gather(self, program, w: int, sides, state) -> tuple[dict, int]:
        """Partition ``w``'s partial sums per active side and its work (edges gathered)."""
        part = self.parts[w]
        out = {}
        for side in sides:
            msgs = program.gather(side, part["edges"], state)
            out[side] = {k: part["inc"][side] @ np.asarray(m, float) for k, m in msgs.items()}
        return out, part["e"].size * len(sides)

    def _bytes(self, w: int, sides, state) -> int:
        """Mirror rows of worker ``w``: partial sums out and new values in, 8 B per float and per id."""
        n = 0
        for side in sides:
            width = sum(int(np.prod(v.shape[1:])) for v in state[side].values())
            n += 2 * self.parts[w]["mirrors"][side] * (8 + 8 * width)
        return n

    def _combine_apply(self, program, sides, state, partials) -> None:
        for side in sides:
            n = self.g.n_a if side == "a" else self.g.n_b
            acc: dict = {}
            for w, part in enumerate(partials):        # ascending partition order: deterministic
                for k, x in part[side].items():
                    if k not in acc:
                        acc[k] = np.zeros((n,) + x.shape[1:])
                    acc[k][self.parts[w]["u"][side]] += x
            program.apply(side, state, acc, self.g)

    def _duration(self, work: int, nbytes: int, slow: float) -> float:
        m = self.model
        return work * m.edge_cost * slow + 2 * m.sync_latency + nbytes * m.byte_cost

    def slowdown(self, steps: int, rows_per_step: float = 1.0) -> np.ndarray:
        """Slowdown of every (worker, superstep), shape (workers, steps): superstep ``t`` spans the
        model's rows ``[t k, (t + 1) k)`` (``k = rows_per_step``; at least one row), averaged: a longer
        step averages the worker's speed over the stretch of trace it covers."""
        k = float(rows_per_step)
        if not k > 0:
            raise UsageError(f"rows_per_step must be > 0, not {rows_per_step!r}")
        if k == 1.0:
            return self.model.slowdown(self.workers, steps)
        lo = np.floor(np.arange(steps) * k).astype(np.int64)
        hi = np.maximum(lo + 1, np.floor(np.arange(1, steps + 1) * k).astype(np.int64))
        tab = self.model.slowdown(self.workers, int(hi[-1]))
        cum = np.concatenate([np.zeros((self.workers, 1)), np.cumsum(tab, axis=1)], axis=1)
        return (cum[:, hi] - cum[:, lo]) / (hi - lo)

    def run(self, program: GASProgram, *, steps: int = 100, target: float | None = None,
            executor: str = "simulated", time_scale: float = 1.0, record: bool = True,
            rows_per_step: float = 1.0) -> GASResult:
        """Run up to ``steps`` supersteps; stop at the first superstep whose loss is <= ``target``.

        ``executor``: ``simulated`` or ``threads`` (module docstring); ``time_scale``: real seconds
        per modelled second of the ``threads`` executor. The loss is evaluated after every
        superstep (``record`` or ``target``), outside the timed region. ``rows_per_step``: rows of
        the worker model's slowdown table a superstep spans (:meth:`slowdown`).
        """
        if not isinstance(program, GASProgram):
            raise UsageError(f"program must be a GASProgram, not {type(program).__name__}")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise UsageError(f"steps must be an integer >= 1, not {steps!r}")
        if executor not in GAS_EXECUTORS:
            raise UsageError(f"Unknown GAS executor {executor!r}; choose one of {', '.join(GAS_EXECUTORS)}")
        if not (isinstance(time_scale, (int, float)) and time_scale > 0):
            raise UsageError(f"time_scale must be > 0, not {time_scale!r}")
        W = self.workers
        state = program.init(self.g, np.random.default_rng(self.seed))
        slow = self.slowdown(steps, rows_per_step)
        history = [{"step": 0, "sim_time": 0.0, "wall_time": 0.0, "loss": program.loss(self.g, state)}] \
            if record or target is not None else []
        pool = None
        if executor == "threads":
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(W, thread_name_prefix="gas-worker")
        sim = wall = 0.0
        nbytes_total = 0
        reached = None if target is None else bool(history[0]["loss"] <= target)
        t = 0
        try:
            while t < steps and not reached:
                sides = program.sides(t)
                nb = [self._bytes(w, sides, state) for w in range(W)]
                t0 = time.perf_counter()
                if pool is None:
                    res = [self._gather(program, w, sides, state) for w in range(W)]
                else:
                    def work(w, sides=sides, t=t, nb=nb):
                        r = self._gather(program, w, sides, state)
                        time.sleep(self._duration(r[1], nb[w], slow[w, t]) * time_scale)
                        return r
                    res = list(pool.map(work, range(W)))
                self._combine_apply(program, sides, state, [r[0] for r in res])
                wall += time.perf_counter() - t0
                sim += max(self._duration(r[1], nb[w], slow[w, t]) for w, r in enumerate(res))
                nbytes_total += sum(nb)
                t += 1
                if history:
                    lv = program.loss(self.g, state)
                    history.append({"step": t, "sim_time": sim, "wall_time": wall, "loss": lv})
                    if target is not None:
                        reached = bool(lv <= target)
        finally:
            if pool is not None:
                pool.shutdown()
        return GASResult(state, history, t, sim, wall, W, self.summary, nbytes_total / max(t, 1), reached)


# ---- code lines -------------------------------------------------------------------------------------
def gas_line_counts() -> dict:
    """Code lines (not blank/comment/docstring) of MF and LR as GAS and as TuX2 MEGA programs, counted
    the same way: the whole program class, and its vertex-program functions only (GAS: gather,
    apply, sides; MEGA: the stage functions)."""
    from .tux2_algos import LR, MF

    out = {}
    for name, gas, mega, gas_fns, mega_fns in (
            ("mf", GasMF, MF, ("gather", "apply"), ("gradients", "step")),
            ("lr", GasLR, LR, ("gather", "apply", "sides"), ("dot", "error", "gradient", "step"))):
        gf = sum(code_lines(getattr(gas, f)) for f in gas_fns)
        mf = sum(code_lines(getattr(mega, f)) for f in mega_fns) + code_lines(mega.stages.fget)
        out[name] = {"gas_class": code_lines(gas), "tux2_class": code_lines(mega),
                     "gas_functions": gf, "tux2_functions": mf, "tux2_over_gas_functions": mf / gf,
                     "tux2_over_gas_class": code_lines(mega) / code_lines(gas),
                     "gas_function_names": list(gas_fns), "tux2_function_names": list(mega_fns) + ["stages"]}
    return out


# ---- the study: GAS (BSP) vs TuX2 MEGA under SSP, with PAI stragglers -------------------------------
def _setup(algo: str, quick: bool, seed: int):
    """Data, the TuX2 program, the GAS program, TuX2 epochs and batches of one algorithm."""
    from .tux2_algos import LR, MF, digits_lr, synthetic_ratings

    if algo == "mf":
        if quick:
            return synthetic_ratings(300, 200, seed=seed), MF(lr=0.05), GasMF(lr=0.05), 10, 5
        # items have ~60 ratings: a full-batch step is stable below lr ~ 0.07 (rank 5, unit-variance ratings)
        return synthetic_ratings(1200, 600, seed=seed), MF(lr=0.02), GasMF(lr=0.02), 40, 5
    if algo == "lr":
        return digits_lr(), LR(lr=0.5), GasLR(lr=0.5), (5 if quick else 20), 5
    raise UsageError(f"Unknown algorithm {algo!r}; the GAS baseline has mf and lr")


def _time_to(history: list, target: float, key: str):
    for h in history:
        if h["loss"] <= target:
            return h[key]
    return None


def _ratio(x, y):
    return None if x is None or y is None else x / max(y, 1e-12)


def _compare(algo: str, g, prog, gprog, W: int, model, seed: int, staleness, epochs: int, batches: int,
             executor: str, time_scale: float, gas_cap: int, progress=None) -> dict:
    """One (algorithm, straggler table, batch count) point in one executor: TuX2 at each staleness,
    then GAS until it reaches the worst final TuX2 loss (the common target)."""
    from .tux2 import TuX2Engine

    key = "sim_time" if executor == "simulated" else "wall_time"
    eng = TuX2Engine(g, W, model=model, seed=seed, partitioner="bicut")
    tux = {}
    for s in staleness:
        if progress:
            progress(f"{algo}: TuX2 s={s} ({executor})")
        r = eng.run(prog, staleness=s, epochs=epochs, batches=batches, executor=executor, time_scale=time_scale)
        tux[s] = {"history": r.history, "time": r.sim_time if key == "sim_time" else r.wall_time,
                  "final_loss": r.history[-1]["loss"], "max_staleness": r.max_staleness, "wait_time": r.wait_time}
    target = max(v["final_loss"] for v in tux.values())
    if progress:
        progress(f"{algo}: GAS ({executor})")
    geng = GASEngine(g, W, model=model, seed=seed)
    # a GAS superstep gathers over k TuX2 clocks' worth of edges: it spans k rows of the straggler table
    k = len(gprog.sides(0)) * batches / max(1, sum(st.kind == "exchange" for st in prog.stages))
    gr = geng.run(gprog, steps=gas_cap, target=target, executor=executor, time_scale=time_scale, rows_per_step=k)
    gas = {"history": gr.history, "time": gr.sim_time if key == "sim_time" else gr.wall_time,
           "final_loss": gr.history[-1]["loss"], "steps": gr.steps, "reached": gr.reached,
           "bytes_per_step": gr.bytes_per_step, "partitioning": geng.summary, "trace_rows_per_step": k}
    gas["time_to_target"] = _time_to(gr.history, target, key)
    for v in tux.values():
        v["time_to_target"] = _time_to(v["history"], target, key)
        v["speedup_vs_gas"] = _ratio(gas["time_to_target"], v["time_to_target"])
        v["speedup_vs_bsp"] = _ratio(tux[0]["time_to_target"], v["time_to_target"])
    best = [v["speedup_vs_gas"] for v in tux.values() if v["speedup_vs_gas"] is not None]
    return {"executor": executor, "time_key": key, "target_loss": target,
            "tolerance": "every run is timed to the first point with loss <= target (the worst final TuX2 loss); "
                         "GAS stops there, so its last loss is within one superstep's progress of the target",
            "gas_loss_at_stop_over_target": gas["final_loss"] / target,
            "tux2": {str(s): v for s, v in tux.items()},
            "gas": gas, "tux2_partitioning": eng.summary, "best_speedup_vs_gas": max(best) if best else None,
            "bsp_speedup_vs_gas": tux[0]["speedup_vs_gas"]}


def gas_vs_tux2(quick: bool = True, seed: int = 0, algos=("mf", "lr"), staleness=(0, 1, 2, 4), workers: int = 10,
                job: int = 1, offset: int = 0, executor: str | None = None, time_scale: float | None = None,
                band_jobs=None, band_batches=None, progress=None) -> dict:
    """Time to a common target loss: GAS (PowerGraph model, vertex-cut, BSP) vs TuX2 MEGA under SSP.

    Both run on the same data, the same ``workers`` (one per worker of PAI job ``job``) and the
    same straggler table (:class:`PaiWorkerModel`, rows from ``offset``) and the same step costs
    (:class:`~models.systems.graph.tux2.WorkerModel` defaults). TuX2 runs its mini-batch program
    (``batches`` per epoch) under SSP with each staleness; the target is the worst final TuX2 loss,
    and GAS runs supersteps until its loss reaches that target (at most 20 x the TuX2 epochs).
    The headline (``runs``) is measured in ``executor`` (``threads``, the default: wall seconds, the
    modelled step durations slept for real times ``time_scale``; ``simulated``, the default with
    ``quick``: deterministic, no sleeping); the band
    (``band``) repeats the comparison in the simulated executor for every PAI job in
    ``band_jobs`` at the default mini-batch count and for every mini-batch count in ``band_batches``
    with job ``job`` (defaults: jobs 1-4 and 2, 5, 10 batches; ``quick``: ``job`` and 5 only).

    Returns a dict: per algorithm the headline comparison, the band and its min/max, the data; and
    the code line counts (:func:`gas_line_counts`). The headline figure is
    ``algos[a]["runs"]["best_speedup_vs_gas"]`` (GAS time to target / the best TuX2 time to target).
    """
    import os

    executor = executor or ("simulated" if quick else "threads")
    if executor not in GAS_EXECUTORS:
        raise UsageError(f"Unknown executor {executor!r}; choose one of {', '.join(GAS_EXECUTORS)}")
    if 0 not in staleness:
        raise UsageError("staleness must include 0 (BSP)")
    time_scale = time_scale or (5.0 if quick else 40.0)  # slept durations well above the host's compute
    band_batches = tuple(band_batches) if band_batches is not None else ((5,) if quick else (2, 5, 10))
    band_jobs = tuple(band_jobs) if band_jobs is not None else ((job,) if quick else (1, 2, 3, 4))
    model = PaiWorkerModel(seed=seed, job=job, offset=offset)
    out = {"quick": quick, "seed": seed, "workers": workers, "staleness": list(staleness),
           "stragglers": {"dataset": "alibaba-pai-2020", "job": job, "offset": offset,
                          "rule": "worker w at TuX2 clock t slowed by v[(offset + t) % T, w] / median(v) of the job; "
                                  "a GAS superstep spans k rows (k clocks' worth of edges) and takes their mean"},
           "model": {k: v for k, v in model.__dict__.items() if k in ("edge_cost", "sync_latency", "byte_cost")},
           "executor": executor, "time_scale": time_scale if executor == "threads" else None,
           "host": {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg())},
           "line_counts": gas_line_counts(), "algos": {}}
    for algo in algos:
        g, prog, gprog, epochs, batches = _setup(algo, quick, seed)
        cap = 20 * epochs * gprog.steps_per_epoch()
        rec = {"data": {"name": g.name, "types": g.types, "n_a": g.n_a, "n_b": g.n_b, "edges": g.m},
               "metric": prog.metric, "epochs": epochs, "batches": batches,
               "program": {k: v for k, v in vars(prog).items() if isinstance(v, (int, float))}}
        rec["runs"] = _compare(algo, g, prog, gprog, workers, model, seed, staleness, epochs, batches, executor,
                               time_scale, cap, progress)
        band = []
        points = [(j, batches) for j in band_jobs] + [(job, bs) for bs in band_batches if (job, bs) not in
                                                       [(j, batches) for j in band_jobs]]
        for j, bs in points:
            if executor == "simulated" and j == job and bs == batches:
                r = rec["runs"]
            else:
                r = _compare(algo, g, prog, gprog, workers, PaiWorkerModel(seed=seed, job=j, offset=offset), seed,
                             staleness, epochs, bs, "simulated", 1.0, cap, progress)
            band.append({"job": j, "batches": bs, "target_loss": r["target_loss"],
                         "gas_time_to_target": r["gas"]["time_to_target"],
                         "tux2_time_to_target": {s: v["time_to_target"] for s, v in r["tux2"].items()},
                         "speedup_vs_gas": {s: v["speedup_vs_gas"] for s, v in r["tux2"].items()},
                         "ssp_speedup_vs_bsp": {s: v["speedup_vs_bsp"] for s, v in r["tux2"].items()}})
        rec["band"] = band
        vals = [x for b in band for x in b["speedup_vs_gas"].values() if x is not None]
        ssp = [x for b in band for x in b["ssp_speedup_vs_bsp"].values() if x is not None]
        rec["band_speedup_vs_gas"] = [float(min(vals)), float(max(vals))] if vals else None
        rec["band_ssp_speedup_vs_bsp"] = [float(min(ssp)), float(max(ssp))] if ssp else None
        out["algos"][algo] = rec
    out["host"]["loadavg_end"] = list(os.getloadavg())
    return out

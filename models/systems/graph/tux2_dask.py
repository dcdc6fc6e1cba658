"""TuX2 on Dask workers: SSP with the masters and the staleness gate in a Dask actor.

The ``dask`` executor of :meth:`~models.systems.graph.tux2.TuX2Engine.run`. Each TuX2 worker is
one long-running task pinned to its own Dask worker (a ``LocalCluster`` of worker processes by
default, or the workers of a given client's cluster), running the same per-batch MEGA code as the
other executors (:meth:`TuX2Engine._compute`). The master copies of the vertex data and the
globals, the clocks and the gate live in one :class:`SSPServer`, a Dask actor (it runs on one of
the workers; every call is a message to it):

- ``pull(w, c, ua, ub)`` waits (an ``asyncio.Condition`` on the actor's event loop, no polling)
  until ``min(clocks) >= c - s`` -- the SSP gate, ``s = 0`` is BSP -- records ``min(clocks)`` for
  ``(w, c)`` and returns the master rows of the batch's vertices and the globals;
- ``push(w, c, deltas, edges)`` adds the worker's deltas (new - read) to the same rows, stores its
  edge state (each edge is written only by its owner), advances ``clocks[w]`` and wakes the
  waiters. Under BSP a clock-``c`` push first waits until every worker has pulled clock ``c``, so
  every clock-``c`` read sees exactly the state after clock ``c - 1`` (the serial mini-batch
  algorithm up to the order of the float additions), as in :mod:`~models.systems.graph.tux2_procs`.

The bound is enforced where the masters are, so it holds whatever process or host a worker runs
on. Time is measured (no modelled delays): ``wall_time`` from the moment every worker has built its
mini-batches (a ``ready`` barrier in the actor) to the last push. The actor snapshots the masters
whenever the slowest clock advances (``record``); the losses are evaluated by the caller afterwards.
Unlike the processes executor, every pull and push is serialised through Dask's comms (TCP between
local processes), and each worker task gets the engine (graph included) pickled once.
"""

from __future__ import annotations

import time

import numpy as np
from hwcosim.models.errors import UsageError

from .tux2 import TuX2Result, register_executor

__all__ = ["SSPServer", "run_dask"]


class SSPServer:
    """The masters, clocks and SSP gate of a Dask TuX2 run (created as a Dask actor)."""

    def __init__(self, master: dict, W: int, C: int, s: int, record: bool, straggler: int | None = None):
        self.master = {k: {n: np.array(v, copy=True) for n, v in master[k].items()} for k in ("a", "b", "g", "e")}
        self.W, self.C, self.s, self.record, self.straggler = W, C, s, record, straggler
        self.waiting = np.zeros(W, np.int64)      # c + 1 while worker w waits at the gate of clock c
        self.clocks = np.zeros(W, np.int64)
        self.started = np.zeros(W, np.int64)
        self.min_clock = np.full((W, C), -1, np.int64)
        self.times = np.zeros((W, C, 3))          # start, end (s after t0), gate wait
        self.ready = 0
        self.t0 = self.t0_epoch = None
        self.snaps: list = []
        self.failed = None                        # the first worker's error: every gate then gives up
        self._cv = None

    def _cond(self):
        import asyncio

        if self._cv is None:                      # created on the actor's event loop
            self._cv = asyncio.Condition()
        return self._cv

    def _snapshot(self):
        return {k: {n: v.copy() for n, v in self.master[k].items()} for k in ("a", "b", "g", "e")}

    async def arrive(self, w: int) -> float:
        """The start barrier: returns once every worker has built its batches."""
        cv = self._cond()
        async with cv:
            self.ready += 1
            if self.ready == self.W:
                self.t0 = time.perf_counter()
                self.t0_epoch = time.time()
                if self.record:
                    self.snaps.append((0.0, self.clocks.copy(), self._snapshot()))
                cv.notify_all()
            await cv.wait_for(lambda: self.ready == self.W or self.failed)
            self._check()
            return self.t0

    async def pull(self, w: int, c: int, ua: np.ndarray, ub: np.ndarray) -> dict:
        cv = self._cond()
        async with cv:
            tw = time.perf_counter()
            def gate():
                return int(self.clocks.min()) >= c - self.s or self.failed

            if not gate():
                self.waiting[w] = c + 1
                cv.notify_all()
                await cv.wait_for(gate)
                self.waiting[w] = 0
            self._check()
            t = time.perf_counter()
            lo = int(self.clocks.min())
            if c - lo > self.s:
                raise RuntimeError(f"internal error: worker {w} pulled clock {c} with the slowest at {lo}")
            self.min_clock[w, c] = lo
            self.times[w, c, 0], self.times[w, c, 2] = t - self.t0, t - tw
            rows = {"a": ua, "b": ub}
            out = {(k, n): m[rows[k]] for k in ("a", "b") for n, m in self.master[k].items()}
            out.update({("g", n): np.array(m, copy=True) for n, m in self.master["g"].items()})
            self.started[w] = c + 1
            cv.notify_all()
            if w == self.straggler:               # held until every other worker is done or blocked
                await cv.wait_for(lambda: all(o == w or self.clocks[o] == self.C or self._blocked(o)
                                              for o in range(self.W)) or self.failed)
                self._check()
            return out

    def _blocked(self, o: int) -> bool:
        return bool(self.waiting[o]) and int(self.clocks.min()) < self.waiting[o] - 1 - self.s

    async def push(self, w: int, c: int, ua: np.ndarray, ub: np.ndarray, deltas: dict, sel: np.ndarray,
                   edges: dict) -> None:
        cv = self._cond()
        async with cv:
            if self.s == 0:        # BSP: no clock-c delta before every worker has read clock c
                tw = time.perf_counter()
                await cv.wait_for(lambda: int(self.started.min()) > c or self.failed)
                self._check()
                self.times[w, c, 2] += time.perf_counter() - tw
            rows = {"a": ua, "b": ub}
            for (k, n), d in deltas.items():
                if k == "g":
                    self.master["g"][n] = self.master["g"][n] + d
                else:
                    self.master[k][n][rows[k]] += d
            for n, v in edges.items():
                self.master["e"][n][sel] = v
            before = int(self.clocks.min())
            self.clocks[w] += 1
            self.times[w, c, 1] = time.perf_counter() - self.t0
            if self.record and int(self.clocks.min()) > before:
                self.snaps.append((self.times[w, c, 1], self.clocks.copy(), self._snapshot()))
            cv.notify_all()

    def _check(self):
        if self.failed:
            raise RuntimeError(f"run aborted: {self.failed}")

    async def abort(self, w: int, why: str) -> None:
        """A worker failed: wake every waiter, whose gate then raises instead of waiting forever."""
        cv = self._cond()
        async with cv:
            self.failed = self.failed or f"TuX2 worker {w} failed: {why}"
            cv.notify_all()

    def result(self) -> dict:
        return {"state": self._snapshot(), "snaps": self.snaps, "min_clock": self.min_clock, "times": self.times,
                "clocks": self.clocks, "t0_epoch": self.t0_epoch}


def _dask_worker(w: int, server, engine, program, view: dict, s: int, C: int, batches: int) -> float:
    """One TuX2 worker as a Dask task: pull, compute the MEGA stages, push, clock after clock."""
    try:
        return _dask_worker_body(w, server, engine, program, view, s, C, batches)
    except BaseException as e:
        server.abort(w, f"{type(e).__name__}: {e}").result()
        raise


def _dask_worker_body(w: int, server, engine, program, view: dict, s: int, C: int, batches: int) -> float:
    for c in range(min(C, batches)):              # build the mini-batches before the clock starts
        engine._batch_edges(program, w, c, batches)
    server.arrive(w).result()
    state = {"e": {n: v.copy() for n, v in view.pop("e").items()}}
    cpu0 = time.process_time()
    for c in range(C):
        sel, _, _, ua, ub = engine._batch_edges(program, w, c, batches)[:5]
        got = server.pull(w, c, ua, ub).result()
        rows = {"a": ua, "b": ub}
        for (k, n), v in got.items():
            if k == "g":
                view["g"][n] = v.copy()
            else:
                view[k][n][rows[k]] = v
        engine._compute(program, state, view, w, c, batches)
        deltas = {(k, n): (view[k][n][rows[k]] - v if k != "g" else np.asarray(view["g"][n]) - v)
                  for (k, n), v in got.items()}
        server.push(w, c, ua, ub, deltas, sel, {n: v[sel] for n, v in state["e"].items()}).result()
    return time.process_time() - cpu0


def run_dask(engine, program, master: dict, s: int, C: int, batches: int, record: bool, client=None,
             straggler: int | None = None):
    """Run ``C`` clocks on every worker of ``engine`` as Dask tasks; see the module docstring.

    ``client``: a ``distributed.Client`` whose cluster has at least ``engine.workers`` workers
    (each TuX2 worker is pinned to its own); default a ``LocalCluster`` of ``engine.workers``
    worker processes with one thread each, started and closed for this run. Returns a
    :class:`~models.systems.graph.tux2.TuX2Result` (``trace`` as the processes executor's:
    ``min_clock``, ``start``, ``end``, ``wait``, ``cpu_s``, ``startup_s``). ``straggler``: as the
    processes executor's (:func:`~models.systems.graph.tux2_procs.run_processes`).
    """
    from distributed import Client, LocalCluster

    W = engine.workers
    if straggler is not None and not (isinstance(straggler, int) and 0 <= straggler < W):
        raise UsageError(f"straggler must be a worker index in 0..{W - 1}, not {straggler!r}")
    t_launch = time.time()          # the start is stamped on the actor's host: wall clock, not perf_counter
    own = client is None
    cluster = None
    if own:
        cluster = LocalCluster(n_workers=W, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=40)
        client = Client(cluster)
    try:
        addrs = sorted(client.scheduler_info()["workers"])
        if len(addrs) < W:
            raise UsageError(f"the Dask cluster has {len(addrs)} workers, fewer than the {W} TuX2 workers")
        master = {k: {n: np.asarray(v) for n, v in master[k].items()} for k in ("a", "b", "g", "e")}
        server = client.submit(SSPServer, master, W, C, s, record, straggler, actor=True, workers=[addrs[0]]).result()
        view = {k: {n: v.copy() for n, v in master[k].items()} for k in ("a", "b", "g", "e")}
        futs = [client.submit(_dask_worker, w, server, engine, program, view, s, C, batches, workers=[addrs[w]],
                              allow_other_workers=False, pure=False, key=f"tux2-worker-{w}-{time.time_ns()}")
                for w in range(W)]
        cpu = np.array(client.gather(futs), float)
        res = server.result().result()
        startup = float(res["t0_epoch"] - t_launch)
    finally:
        if own:
            client.close()
            cluster.close()
    mins, times = res["min_clock"], res["times"]
    stale = np.arange(C)[None, :] - mins
    if (mins < 0).any() or (stale > s).any() or not (res["clocks"] == C).all():
        raise RuntimeError("internal error: the Dask worker trace is incomplete or breaks the staleness bound")
    vals, cnt = np.unique(stale, return_counts=True)
    history = [{"clock": int(cl.min()), "sim_time": float(t), "wall_time": float(t),
                "loss": program.loss(engine.g, st), "clocks": cl.tolist()} for t, cl, st in res["snaps"]]
    wall = float(times[:, -1, 1].max())
    trace = {"min_clock": mins, "start": times[:, :, 0], "end": times[:, :, 1], "wait": times[:, :, 2],
             "cpu_s": cpu, "startup_s": startup, "executor": "dask", "own_cluster": own}
    return TuX2Result(res["state"], history, s, W, C, wall, wall, int(stale.max()),
                      {int(v): int(n) for v, n in zip(vals, cnt)}, float(times[:, :, 2].sum()),
                      engine.summary, trace)


register_executor("dask", run_dask, ("client", "straggler"))

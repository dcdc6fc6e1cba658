"""TuX2 on real worker processes: SSP across OS processes over shared-memory master copies.

The ``processes`` executor of :meth:`~models.systems.graph.tux2.TuX2Engine.run`. Each worker is an
OS process (``multiprocessing`` with the ``forkserver`` start method where the platform has it,
else ``spawn``), so the workers run truly in parallel (no GIL) and nothing is simulated or slept:
a clock's duration is the time the worker takes to compute its mini-batch.

Shared state, one :class:`multiprocessing.shared_memory.SharedMemory` block holding numpy views:

- the master copies of the vertex data (``a`` and ``b`` sides), the globals (``g``) and the edge
  state (``e``, each edge written only by the worker that owns it);
- ``clocks[w]``: the clocks of worker ``w`` whose deltas have been added to the masters, and
  ``started[w]`` the clocks it has read its inputs for;
- control words (start, abort) and the start time;
- the per-worker trace: for every (worker, clock) the minimum of ``clocks`` the worker observed
  when it started the clock, the start and end times and the time it waited at the gate.

The graph itself (edge endpoints, edge and vertex data) and each worker's edge list (the
partitioning) go into a second, read-only block: a worker attaches it and builds its
:class:`~models.systems.graph.tux2.Bipartite` and engine on views of it, zero-copy, instead of
unpickling its own copy of the whole graph (``share_graph=False`` keeps the pickled copy, for the
measurement in :func:`graph_sharing_study`).

One :class:`multiprocessing.Condition` guards the masters and the clocks. A worker at clock ``c``
waits on it until ``min(clocks) >= c - s`` (the SSP gate; ``s = 0`` is BSP), copies the rows of
its mini-batch (``ua``, ``ub``) and the globals out of the masters, releases the lock, runs the
program's MEGA stages on its private copy, then re-takes the lock, adds its deltas (new - read) to
the same master rows, advances ``clocks[w]``, wakes every waiter and, in the same critical
section, passes the gate of its next clock (so the first worker to finish a clock observes the
others still on it). The bound is on the oldest delta a read may miss; with ``s > 0`` a read may
also see deltas of later clocks of faster workers (as in SSP, Ho et al., NIPS 2013). BSP
(``s = 0``) is exact: a worker's clock-``c`` deltas wait until every worker has read its clock-``c``
inputs, so every clock-``c`` read sees exactly the state after clock ``c - 1`` (the serial
mini-batch algorithm up to the order of the float additions). The MEGA contract this relies on:
stages read and write only the rows of the batch's own vertices (``bt.ua``/``bt.ub`` and the
endpoints ``bt.a``/``bt.b``) and the globals;
:class:`~models.systems.graph.tux2_algos.MF`, ``LR`` and ``LDA`` do.

The parent process supervises: it waits (``multiprocessing.connection.wait``, no polling) on a
pipe the workers write a byte to whenever the slowest worker's clock advances, and on the
processes' sentinels (a worker that dies is noticed at once). For each such event it takes a copy
of the masters under the lock and its wall time; the losses are evaluated after the run, so the
measured wall time contains no loss evaluation. Workers ignore SIGINT: on Ctrl-C or any error the
parent sets the abort word, wakes the workers, joins them (terminating any that do not exit) and
unlinks the shared memory, so no process or segment outlives a run. If the parent is killed
outright (SIGKILL), each worker sees its parent's sentinel and exits, and Python's resource
tracker then unlinks the segment.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import signal
import time
import traceback
from multiprocessing import connection
from multiprocessing.shared_memory import SharedMemory

import numpy as np
from hwcosim.models.errors import UsageError

from .tux2 import Bipartite, TuX2Engine, TuX2Result, register_executor

__all__ = ["run_processes", "default_start_method", "process_study", "graph_sharing_study",
           "SNAPSHOT_BUDGET_BYTES"]

#: Largest total size of the recorded master snapshots (one per advance of the slowest clock).
SNAPSHOT_BUDGET_BYTES = 1 << 30
_ALIGN = 64
_START, _ABORT = 0, 1
_LOCK_TIMEOUT = 1.0      # supervisor: re-check the sentinels while a lock acquisition is blocked
_JOIN_TIMEOUT = 5.0      # shutdown: grace before terminate, then kill


def default_start_method() -> str:
    """``forkserver`` where available (fast, and safe in a threaded parent), else ``spawn``."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


# ---- shared-memory layout ------------------------------------------------------------------------
def _layout(master: dict, W: int, C: int) -> tuple[list, int]:
    """``[(key, shape, dtype str, offset)]`` and the total size of the block."""
    items = []
    for k in ("a", "b", "g", "e"):
        for n, v in master[k].items():
            v = np.asarray(v)
            items.append(((k, n), v.shape, v.dtype.str))
    items += [(("clocks",), (W,), "<i8"), (("started",), (W,), "<i8"), (("ctrl",), (2,), "<i8"), (("t0",), (1,), "<f8"),
              (("min_clock",), (W, C), "<i8"), (("times",), (W, C, 3), "<f8"), (("cpu",), (W,), "<f8"),
              (("wsetup",), (W, 3), "<f8"), (("waiting",), (W,), "<i8"), (("done",), (W,), "<i8")]
    out, off = [], 0
    for key, shape, dt in items:
        out.append((key, shape, dt, off))
        off += -(-max(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize, 1) // _ALIGN) * _ALIGN
    return out, max(off, _ALIGN)


def _views(buf, layout: list) -> dict:
    V: dict = {"a": {}, "b": {}, "g": {}, "e": {}}
    for key, shape, dt, off in layout:
        arr = np.ndarray(shape, dtype=np.dtype(dt), buffer=buf, offset=off)
        if len(key) == 2:
            V[key[0]][key[1]] = arr
        else:
            V[key[0]] = arr
    return V


# ---- the graph in shared memory ------------------------------------------------------------------
def _graph_arrays(engine) -> dict:
    """The read-only arrays of ``engine``: the graph's edges and data, each worker's edge list."""
    g = engine.g
    arrs = {("g", "a"): g.a, ("g", "b"): g.b}
    for kind in ("edata", "a_data", "b_data"):
        for n, v in getattr(g, kind).items():
            arrs[(kind, n)] = v
    for w, e in enumerate(engine.local):
        arrs[("local", w)] = e
    return {k: np.ascontiguousarray(np.asarray(v)) for k, v in arrs.items()}


def _graph_block(engine):
    """Copy ``engine``'s graph arrays into a new shared-memory block: ``(shm, layout, engine shell)``.

    The shell is the engine without its graph and edge lists (a few hundred bytes pickled); a
    worker rebuilds both as views of the block (:func:`_attach_graph`).
    """
    arrs = _graph_arrays(engine)
    layout, off = [], 0
    for key, v in arrs.items():
        layout.append((key, v.shape, v.dtype.str, off))
        off += -(-max(v.nbytes, 1) // _ALIGN) * _ALIGN
    shm = SharedMemory(create=True, size=max(off, _ALIGN))
    try:
        for (key, shape, dt, o) in layout:
            np.ndarray(shape, dtype=np.dtype(dt), buffer=shm.buf, offset=o)[...] = arrs[key]
    except BaseException:
        shm.close()
        shm.unlink()
        raise
    g = engine.g
    meta = {"n_a": g.n_a, "n_b": g.n_b, "types": g.types, "name": g.name}
    shell = object.__new__(type(engine))
    shell.__dict__.update(engine.__dict__ | {"g": None, "local": None, "_cache": {}})
    return shm, {"layout": layout, "meta": meta}, shell


def _attach_graph(buf, spec: dict, shell):
    """The engine of a worker over read-only views of the graph block (no copy, no validation pass)."""
    parts: dict = {"edata": {}, "a_data": {}, "b_data": {}, "local": {}}
    ends = {}
    for (kind, n), shape, dt, off in spec["layout"]:
        v = np.ndarray(shape, dtype=np.dtype(dt), buffer=buf, offset=off)
        v.flags.writeable = False
        if kind == "g":
            ends[n] = v
        else:
            parts[kind][n] = v
    g = object.__new__(Bipartite)          # the parent validated the graph; a views-only rebuild
    for k, v in (spec["meta"] | {"a": ends["a"], "b": ends["b"], "edata": parts["edata"],
                                 "a_data": parts["a_data"], "b_data": parts["b_data"]}).items():
        object.__setattr__(g, k, v)
    shell.g = g
    shell.local = [parts["local"][w] for w in range(len(parts["local"]))]
    return shell


# ---- worker --------------------------------------------------------------------------------------
def _exit_with_parent() -> None:
    """End this worker if the run's process dies without shutting it down (e.g. SIGKILL).

    A thread waits on the parent's sentinel (ready when the parent is gone) and exits the
    process at once: the worker may be blocked on the condition, whose lock a killed parent may
    even hold, so no orderly return is possible. (``PR_SET_PDEATHSIG`` would not do: under
    ``forkserver`` the worker's parent is the fork server, which outlives the run while any
    worker holds its liveness pipe.)
    """
    import os
    import threading

    parent = mp.parent_process()
    if parent is None:  # pragma: no cover - always set in a multiprocessing child
        return

    def watch():
        connection.wait([parent.sentinel])
        os._exit(3)

    threading.Thread(target=watch, name="tux2-parent-watch", daemon=True).start()


def _worker(w: int, spec: dict, cond, conn, errq) -> None:
    """Entry of worker process ``w`` (module level, so the spawn/forkserver child can import it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent handles Ctrl-C and shuts us down
    _exit_with_parent()
    shm = gshm = None
    entered = time.time()                            # the arguments (a pickled engine too) are unpickled by now
    try:
        shm = SharedMemory(name=spec["shm"])
        if spec.get("graph") is not None:
            gshm = SharedMemory(name=spec["graph"]["shm"])
            spec = spec | {"engine": _attach_graph(gshm.buf, spec["graph"], spec["engine"])}
        V = _views(shm.buf, spec["layout"])
        V["wsetup"][w, :2] = entered, time.time()
        _worker_body(w, spec, V, cond, conn)
    except BaseException:  # reported to the parent, which stops the run and raises it
        errq.put((w, traceback.format_exc()))
        conn.send_bytes(b"E")
    finally:
        for seg in (gshm, shm):
            if seg is not None:
                with contextlib.suppress(BufferError):   # a view still referenced: the exit unmaps it
                    seg.close()


def _worker_body(w: int, spec: dict, V: dict, cond, conn) -> None:
    eng, prog = spec["engine"], spec["program"]
    s, C, batches = spec["staleness"], spec["clocks"], spec["batches"]
    clocks, started, ctrl, t0a = V["clocks"], V["started"], V["ctrl"], V["t0"]
    min_clock, times = V["min_clock"][w], V["times"][w]
    waiting, done, straggler, W = V["waiting"], V["done"], spec["straggler"], len(clocks)

    def blocked(o: int) -> bool:
        """Worker ``o`` is waiting at a gate it cannot pass yet."""
        return bool(waiting[o]) and clocks.min() < waiting[o] - 1 - s
    master = {k: V[k] for k in ("a", "b", "g")}
    state = {"e": V["e"]}                            # this worker's edges only are written
    view = {k: {n: v.copy() for n, v in master[k].items()} for k in ("a", "b", "g")}
    for c in range(min(C, batches)):                 # build the mini-batches before the clock starts
        eng._batch_edges(prog, w, c, batches)
    V["wsetup"][w, 2] = time.time()
    conn.send_bytes(b"R")
    perf = time.perf_counter
    with cond:
        cond.wait_for(lambda: ctrl[_START] or ctrl[_ABORT])
        t0 = float(t0a[0])
        cpu0 = time.process_time()
        for c in range(C):
            tw = perf()
            def gate(c=c):
                return clocks.min() >= c - s or ctrl[_ABORT]

            if not gate():
                waiting[w] = c + 1                   # blocked at the gate of clock c (for a held straggler)
                cond.notify_all()
                cond.wait_for(gate)
                waiting[w] = 0
            if ctrl[_ABORT]:
                return
            t = perf()
            lo = int(clocks.min())
            min_clock[c] = lo
            times[c, 0], times[c, 2] = t - t0, t - tw
            if c - lo > s:
                raise RuntimeError(f"internal error: worker {w} started clock {c} with the slowest worker "
                                   f"at {lo}, staleness bound {s}")
            ua, ub = eng._batch_edges(prog, w, c, batches)[3:5]
            rows = {"a": ua, "b": ub}
            snap = {}
            for k in ("a", "b"):
                for n, m in master[k].items():
                    view[k][n][rows[k]] = snap[k, n] = m[rows[k]]
            for n, m in master["g"].items():
                view["g"][n] = m.copy()
                snap["g", n] = view["g"][n].copy()
            started[w] = c + 1
            if s == 0:
                cond.notify_all()
            if w == straggler:
                cond.wait_for(lambda: all(o == w or done[o] or blocked(o) for o in range(W)) or ctrl[_ABORT])
                if ctrl[_ABORT]:
                    return
            cond.release()
            try:
                eng._compute(prog, state, view, w, c, batches)
            finally:
                cond.acquire()
            if s == 0:   # BSP: no clock-c delta reaches the masters before every worker has read clock c
                tw = perf()
                cond.wait_for(lambda c=c: started.min() > c or ctrl[_ABORT])
                if ctrl[_ABORT]:
                    return
                times[c, 2] += perf() - tw
            for k in ("a", "b"):
                for n, m in master[k].items():
                    m[rows[k]] += view[k][n][rows[k]] - snap[k, n]
            for n, m in master["g"].items():
                m[...] += np.asarray(view["g"][n]) - snap["g", n]
            before = int(clocks.min())
            clocks[w] += 1
            times[c, 1] = perf() - t0
            cond.notify_all()
            if int(clocks.min()) > before:
                conn.send_bytes(b"P")
        V["cpu"][w] = time.process_time() - cpu0
        done[w] = 1
        cond.notify_all()
    conn.send_bytes(b"D")


# ---- supervisor ----------------------------------------------------------------------------------
def _probe_memory(procs) -> list:
    """RSS, USS and PSS (bytes) of each worker process, from /proc through psutil; [] without psutil."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency of the project
        return []
    out = []
    for p in procs:
        m = psutil.Process(p.pid).memory_full_info()
        out.append({"rss": int(m.rss), "uss": int(m.uss), "pss": int(getattr(m, "pss", 0)),
                    "shared": int(getattr(m, "shared", 0))})
    return out


def _snapshot(V: dict) -> dict:
    return {k: {n: v.copy() for n, v in V[k].items()} for k in ("a", "b", "g", "e")}


def _acquire(lock, procs) -> None:
    """Take ``lock``; give up with an error if a worker died (it may have held the lock)."""
    while not lock.acquire(timeout=_LOCK_TIMEOUT):
        dead = [p.name for p in procs if p.exitcode not in (None, 0)]
        if dead:
            raise RuntimeError(f"TuX2 worker process {', '.join(dead)} died while the masters were locked")


def _shutdown(procs, cond, V) -> None:
    """Abort the workers, join them, terminate or kill any that do not exit."""
    if V is not None and cond is not None:
        alive = [p for p in procs if p.is_alive()]
        if alive and cond.acquire(timeout=_LOCK_TIMEOUT):
            try:
                V["ctrl"][_ABORT] = 1
                cond.notify_all()
            finally:
                cond.release()
    for p in procs:
        p.join(_JOIN_TIMEOUT)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(_JOIN_TIMEOUT)
        if p.is_alive():  # pragma: no cover - terminate ignored
            p.kill()
            p.join()


def run_processes(engine, program, master: dict, s: int, C: int, batches: int, record: bool,
                  start_method: str | None = None, share_graph: bool = True, probe_memory: bool = False,
                  straggler: int | None = None):
    """Run ``C`` clocks on every worker of ``engine`` as OS processes; see the module docstring.

    Returns a :class:`~models.systems.graph.tux2.TuX2Result` whose ``trace`` holds, per worker and
    clock, the minimum clock observed at the start (``min_clock``), the start and end times
    (seconds after the common start) and the gate wait, and per worker the CPU seconds it used
    (``cpu_s``: on a shared host, less than its busy time when it was preempted); ``wall_time`` is from the common start
    to the last push (process start-up, recorded as ``trace["startup_s"]``, excluded).

    ``share_graph`` (default): the graph and the edge lists reach the workers through a shared
    read-only block (attached zero-copy); ``False``: each worker unpickles its own copy of the
    engine (the behaviour before, kept for the comparison). ``probe_memory``: record in
    ``trace["worker_memory"]`` each worker's RSS, USS (pages only it maps) and PSS once every
    worker is ready (mini-batches built, before the first clock), read with psutil. ``trace["setup"]``
    holds the parts of the start-up: the graph block copy, launch to ready, and per worker when it
    entered (process started, arguments unpickled), had its engine (graph attached) and had built
    its mini-batches, in seconds after the launch.

    ``straggler``: hold that worker at every clock, after it has read its inputs, until every other
    worker has finished or is blocked at the staleness gate: the slowest straggler the bound allows,
    independent of the host's scheduling (the others run exactly ``s`` clocks ahead of it).
    """
    W = engine.workers
    if straggler is not None and not (isinstance(straggler, int) and 0 <= straggler < W):
        raise UsageError(f"straggler must be a worker index in 0..{W - 1}, not {straggler!r}")
    method = start_method or default_start_method()
    if method not in mp.get_all_start_methods():
        raise UsageError(f"Unknown start method {method!r}; choose one of {', '.join(mp.get_all_start_methods())}")
    try:
        pickle.dumps(program)
    except Exception as e:
        raise UsageError(f"the processes executor sends the program to worker processes, but "
                         f"{type(program).__name__} cannot be pickled ({e}); define it at module level") from None
    master = {k: {n: np.ascontiguousarray(np.asarray(v)) for n, v in master[k].items()} for k in ("a", "b", "g", "e")}
    snap_bytes = sum(v.nbytes for d in master.values() for v in d.values())
    if record and snap_bytes * (C + 1) > SNAPSHOT_BUDGET_BYTES:
        raise UsageError(f"recording the loss keeps up to {C + 1} copies of {snap_bytes / 1e6:.1f} MB of state, over "
                         f"the {SNAPSHOT_BUDGET_BYTES >> 20} MB budget; use fewer clocks or record=False")
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["hwcosim.models.systems.graph.tux2_algos"])
    layout, size = _layout(master, W, C)
    t_launch = time.perf_counter()
    t_launch_epoch = time.time()                     # worker stamps are wall-clock (another process)
    gshm, gspec, sent = (None, None, engine)
    if share_graph:
        gshm, gspec, sent = _graph_block(engine)
        gspec["shm"] = gshm.name
    t_graph = time.perf_counter() - t_launch
    try:
        shm = SharedMemory(create=True, size=size)
    except BaseException:
        if gshm is not None:
            gshm.close()
            gshm.unlink()
        raise
    procs: list = []
    V = cond = None
    mem = None
    try:
        V = _views(shm.buf, layout)
        for k in ("a", "b", "g", "e"):
            for n, v in master[k].items():
                V[k][n][...] = v
        for key in ("clocks", "started", "ctrl", "t0", "min_clock", "times", "cpu", "wsetup", "waiting", "done"):
            V[key][...] = 0
        V["min_clock"][...] = -1
        cond = ctx.Condition()
        reader, writer = ctx.Pipe(duplex=False)
        errq = ctx.SimpleQueue()
        spec = {"shm": shm.name, "layout": layout, "engine": sent, "program": program, "staleness": s,
                "clocks": C, "batches": batches, "graph": gspec, "straggler": straggler}
        for w in range(W):
            p = ctx.Process(target=_worker, args=(w, spec, cond, writer, errq), name=f"tux2-worker-{w}", daemon=True)
            p.start()
            procs.append(p)

        counts = {b"R": 0, b"D": 0, b"E": 0}
        snaps: list = []

        def pump() -> bool:
            """Wait for messages or a process exit; True if the slowest clock advanced."""
            connection.wait([reader] + [p.sentinel for p in procs if p.exitcode is None])
            advanced = False
            while reader.poll():
                m = reader.recv_bytes()
                if m == b"P":
                    advanced = True
                else:
                    counts[m] += 1
            # a worker sends D (done) or E (failed, traceback on errq) before it exits 0
            dead = [f"{p.name} (exit code {p.exitcode})" for p in procs if p.exitcode not in (None, 0)]
            if counts[b"E"] or dead:
                errs = []
                while not errq.empty():
                    errs.append(errq.get())
                detail = "\n".join(f"tux2-worker-{w}:\n{tb}" for w, tb in errs) or ", ".join(dead)
                raise RuntimeError(f"a TuX2 worker process failed: {detail}")
            return advanced

        while counts[b"R"] < W:
            pump()
        t_ready = time.perf_counter() - t_launch
        if probe_memory:
            mem = _probe_memory(procs)
        if record:
            snaps.append((0.0, V["clocks"].copy(), _snapshot(V)))
        _acquire(cond, procs)
        try:
            t0 = time.perf_counter()
            V["t0"][0] = t0
            V["ctrl"][_START] = 1
            cond.notify_all()
        finally:
            cond.release()
        startup = t0 - t_launch
        while counts[b"D"] < W:
            if pump() and record:
                _acquire(cond, procs)
                try:
                    t = time.perf_counter() - t0
                    snaps.append((t, V["clocks"].copy(), _snapshot(V)))
                finally:
                    cond.release()
        for p in procs:
            p.join()
        final = _snapshot(V)
        mins, times, cpu = V["min_clock"].copy(), V["times"].copy(), V["cpu"].copy()
        wsetup = V["wsetup"].copy() - t_launch_epoch
    finally:
        _shutdown(procs, cond, V)
        V = None
        with contextlib.suppress(BufferError):
            shm.close()
        shm.unlink()
        if gshm is not None:
            with contextlib.suppress(BufferError):
                gshm.close()
            gshm.unlink()

    stale = np.arange(C)[None, :] - mins
    if (mins < 0).any() or (stale > s).any():
        raise RuntimeError("internal error: the worker trace is incomplete or breaks the staleness bound")
    vals, cnt = np.unique(stale, return_counts=True)
    history = []
    for t, cl, st in snaps:
        history.append({"clock": int(cl.min()), "sim_time": t, "wall_time": t,
                        "loss": program.loss(engine.g, st), "clocks": cl.tolist()})
    wall = float(times[:, -1, 1].max())
    trace = {"min_clock": mins, "start": times[:, :, 0], "end": times[:, :, 1], "wait": times[:, :, 2],
             "cpu_s": cpu, "startup_s": startup, "start_method": method, "share_graph": bool(share_graph),
             "setup": {"graph_block_s": t_graph, "launch_to_ready_s": t_ready,
                       "graph_block_bytes": gshm.size if gshm is not None else 0,
                       # per worker, seconds after the launch: entered (process started, arguments
                       # unpickled), engine ready (graph attached), mini-batches built
                       "worker_entered_s": wsetup[:, 0].tolist(), "worker_engine_ready_s": wsetup[:, 1].tolist(),
                       "worker_batches_built_s": wsetup[:, 2].tolist()}}
    if mem is not None:
        trace["worker_memory"] = mem
    return TuX2Result(final, history, s, W, C, wall, wall, int(stale.max()),
                      {int(v): int(n) for v, n in zip(vals, cnt)}, float(times[:, :, 2].sum()),
                      engine.summary, trace)


# ---- measured study: loss vs wall seconds, SSP vs BSP on real processes --------------------------
def _proc_setup(algo: str, quick: bool, seed: int):
    """Data, program and run length of one algorithm for :func:`process_study`."""
    from .tux2_algos import LR, MF, digits_lr, synthetic_ratings

    if algo == "mf":
        g = synthetic_ratings(1500, 800, density=0.02, seed=seed) if quick else \
            synthetic_ratings(4000, 2000, density=0.01, seed=seed)
        return g, MF(lr=0.05), (20 if quick else 30), 5
    if algo == "lr":
        return digits_lr(), LR(lr=0.5), (20 if quick else 40), 5
    raise UsageError(f"Unknown algorithm {algo!r} for the process study; choose mf or lr")


def _time_to(history: list, target: float, key: str = "wall_time"):
    for h in history:
        if h["loss"] <= target:
            return h[key]
    return None


def process_study(quick: bool = True, seed: int = 0, algos=("mf", "lr"), staleness=(0, 1, 2, 4), workers: int = 2,
                  repeats: int | None = None, progress=None, start_method: str | None = None) -> dict:
    """SSP (each ``s``) vs BSP (``s = 0``) on ``workers`` real processes: loss against measured wall seconds.

    Every configuration runs ``repeats`` times, the staleness values in a rotated order each
    round so that a change of the (shared) machine's load does not favour one of them; the
    1-minute load average is recorded before and after every run. Per algorithm: the BSP run of
    one worker process (the serial reference: same code, no synchronisation), the simulated BSP
    engine's final loss (the processes' BSP must equal it), and for every run the wall seconds to
    two loss targets: the worst final loss over all runs (a level every run reaches) and 90 % of
    the way from the initial loss to it, and the clocks (of the slowest worker) to the first: time
    to target = clocks to target (statistical efficiency: staleness costs clocks) / clocks per
    second (hardware efficiency: staleness saves waiting). Speedups are medians of BSP over medians of SSP (and
    best of BSP over best of SSP: on a loaded host the fastest repeat is the least disturbed).
    ``cpu_share`` is the workers' CPU seconds over ``workers x`` wall seconds: how much of a core
    each worker got, blocked time included (BSP/SSP waiting lowers it, other load too).
    """
    import os

    if 0 not in staleness:
        raise UsageError("staleness must include 0 (the BSP baseline)")
    repeats = repeats or (2 if quick else 5)
    out = {"workers": workers, "quick": quick, "seed": seed, "repeats": repeats, "staleness": list(staleness),
           "host": {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg())},
           "start_method": start_method or default_start_method(), "algos": {}}
    for algo in algos:
        g, prog, ep, bs = _proc_setup(algo, quick, seed)
        eng = TuX2Engine(g, workers, seed=seed)
        say = progress or (lambda _m: None)
        say(f"{algo}: simulated BSP reference")
        sim = eng.run(prog, staleness=0, epochs=ep, batches=bs, record=False)
        sim_loss = prog.loss(g, sim.state)
        say(f"{algo}: 1 worker process (serial reference)")
        one = TuX2Engine(g, 1, seed=seed).run(prog, staleness=0, epochs=ep, batches=bs, executor="processes",
                                              start_method=start_method)
        runs: dict = {s: [] for s in staleness}
        order = list(staleness)
        for rep in range(repeats):
            for s in order[rep % len(order):] + order[:rep % len(order)]:
                say(f"{algo}: staleness {s}, repeat {rep + 1}/{repeats}")
                la = os.getloadavg()[0]
                r = eng.run(prog, staleness=s, epochs=ep, batches=bs, executor="processes", start_method=start_method)
                runs[s].append({"history": [{k: h[k] for k in ("clock", "wall_time", "loss")} for h in r.history],
                                "wall_time": r.wall_time, "final_loss": r.history[-1]["loss"],
                                "clocks_per_s": r.clocks / r.wall_time, "wait_s_per_worker": r.wait_time / workers,
                                "max_staleness": r.max_staleness, "staleness_reads": r.staleness_reads,
                                "cpu_share": float(r.trace["cpu_s"].sum() / (workers * r.wall_time)),
                                "startup_s": r.trace["startup_s"], "loadavg_1min_before": la,
                                "loadavg_1min_after": os.getloadavg()[0]})
        l0 = runs[0][0]["history"][0]["loss"]
        final = max(x["final_loss"] for v in runs.values() for x in v)
        mid = l0 - 0.9 * (l0 - final)
        summary = {}
        for s, v in runs.items():
            for x in v:
                x["wall_s_to_target"] = _time_to(x["history"], final)
                x["wall_s_to_90pct"] = _time_to(x["history"], mid)
                x["clocks_to_target"] = _time_to(x["history"], final, "clock")
            row = {}
            for key in ("wall_s_to_target", "wall_s_to_90pct", "clocks_to_target", "wall_time", "final_loss",
                        "clocks_per_s", "wait_s_per_worker", "cpu_share"):
                vals = [x[key] for x in v if x[key] is not None]
                row[key] = {"median": float(np.median(vals)), "min": float(min(vals)), "max": float(max(vals))} \
                    if vals else None
            row["max_staleness"] = max(x["max_staleness"] for x in v)
            summary[str(s)] = row
        for row in summary.values():
            for key in ("wall_s_to_target", "wall_s_to_90pct"):
                b, m = summary["0"][key], row[key]
                row[f"speedup_vs_bsp_{key[7:]}"] = b["median"] / m["median"] if b and m else None
                row[f"speedup_vs_bsp_{key[7:]}_best"] = b["min"] / m["min"] if b and m else None
        bsp_final = [x["final_loss"] for x in runs[0]]
        out["algos"][algo] = {
            "data": {"name": g.name, "types": g.types, "n_a": g.n_a, "n_b": g.n_b, "edges": g.m},
            "metric": prog.metric, "program": {k: v for k, v in vars(prog).items() if isinstance(v, (int, float))},
            "epochs": ep, "batches": bs, "clocks": ep * bs, "partitioning": eng.summary,
            "initial_loss": l0, "target_loss": final, "target_90pct_loss": mid,
            "simulated_bsp_final_loss": sim_loss,
            "bsp_max_abs_diff_vs_simulated": float(max(abs(x - sim_loss) for x in bsp_final)),
            "one_worker": {"wall_time": one.wall_time, "final_loss": one.history[-1]["loss"],
                           "wall_s_to_target": _time_to(one.history, final),
                           "history": [{k: h[k] for k in ("clock", "wall_time", "loss")} for h in one.history]},
            "summary": summary, "runs": {str(s): v for s, v in runs.items()}}
    out["host"]["loadavg_end"] = list(os.getloadavg())
    return out


# ---- measured: the graph shared vs pickled to every worker ---------------------------------------
def graph_sharing_study(scales=(18, 19, 20), workers: int = 2, seed: int = 0, batches: int = 8, epochs: int = 1,
                        rank: int = 8, progress=None, start_method: str | None = None) -> dict:
    """Start-up time and worker memory with the graph pickled to each worker vs in shared memory.

    For each R-MAT scale: MF on :func:`~models.systems.graph.tux2_algos.rmat_ratings` (``16 *
    2**scale`` ratings) on ``workers`` processes, BSP, ``epochs * batches`` clocks, once with the
    graph pickled into every worker (``share_graph=False``, the executor before) and once attached
    from the shared block. Recorded per run: the start-up (launch until every worker has built
    its mini-batches: process start, unpickling, graph block copy), each worker's RSS/USS/PSS at
    that point (USS: the pages no other process maps, i.e. a worker's private memory), the run's
    wall time and final RMSE, the 1-minute load average; per scale the pickled size of the engine
    either way and the largest difference of the two final states (BSP: float addition order only).
    """
    import gc
    import os

    from .tux2_algos import MF, rmat_ratings

    say = progress or (lambda _m: None)
    out = {"workers": workers, "seed": seed, "batches": batches, "epochs": epochs, "rank": rank,
           "program": "mf (BSP)", "start_method": start_method or default_start_method(),
           "host": {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg())}, "scales": []}
    for sc in scales:
        say(f"scale {sc}: R-MAT ratings and partitioning")
        t0 = time.perf_counter()
        g = rmat_ratings(sc, rank=5, seed=seed)
        eng = TuX2Engine(g, workers, seed=seed)
        prep = time.perf_counter() - t0
        # batch gradient steps sum over a vertex's ratings: a step size over the largest degree keeps
        # the hubs of a power-law graph from diverging (the RMSE is reported, not the subject here)
        deg = max(int(np.bincount(g.a).max()), int(np.bincount(g.b).max()))
        prog = MF(rank=rank, lr=0.5 / deg)
        _, _, shell = _graph_block_sizes(eng)
        row = {"scale": sc, "n_a": g.n_a, "n_b": g.n_b, "edges": g.m, "graph_and_partition_s": prep,
               "max_degree": deg, "lr": prog.lr,
               "initial_rmse": prog.loss(g, prog.init(g, np.random.default_rng(seed))),
               "graph_bytes": sum(v.nbytes for v in _graph_arrays(eng).values()),
               "engine_pickle_bytes": len(pickle.dumps(eng, protocol=pickle.HIGHEST_PROTOCOL)),
               "engine_shell_pickle_bytes": shell, "runs": {}}
        states = {}
        for share in (False, True):
            say(f"scale {sc}: graph {'shared' if share else 'pickled'}")
            master = prog.init(g, np.random.default_rng(seed))
            for k in ("a", "b", "g", "e"):
                master.setdefault(k, {})
            la = os.getloadavg()[0]
            r = run_processes(eng, prog, master, 0, epochs * batches, batches, False, start_method,
                              share_graph=share, probe_memory=True)
            mem = r.trace["worker_memory"]
            states[share] = r.state
            row["runs"]["shared" if share else "pickled"] = {
                "startup_s": r.trace["startup_s"], "setup": r.trace["setup"], "wall_time": r.wall_time,
                "worker_memory": mem, "worker_rss_max": max(m["rss"] for m in mem) if mem else None,
                "worker_uss_max": max(m["uss"] for m in mem) if mem else None,
                "worker_uss_sum": sum(m["uss"] for m in mem) if mem else None,
                "final_rmse": prog.loss(g, r.state), "loadavg_1min_before": la,
                "loadavg_1min_after": os.getloadavg()[0]}
            del r, master
            gc.collect()
        a, b = row["runs"]["pickled"], row["runs"]["shared"]
        row["max_abs_diff_shared_vs_pickled"] = float(max(np.abs(states[True][k][n] - states[False][k][n]).max()
                                                          for k, n in (("a", "p"), ("b", "q"))))
        row["startup_ratio_pickled_over_shared"] = a["startup_s"] / b["startup_s"]
        if a["worker_uss_sum"] and b["worker_uss_sum"]:
            row["worker_private_bytes_saved"] = a["worker_uss_sum"] - b["worker_uss_sum"]
        out["scales"].append(row)
        del g, eng, states
        gc.collect()
    out["host"]["loadavg_end"] = list(os.getloadavg())
    return out


def _graph_block_sizes(engine) -> tuple:
    """``(graph bytes, block bytes, pickled shell bytes)`` without creating a block."""
    arrs = _graph_arrays(engine)
    shell = object.__new__(type(engine))
    shell.__dict__.update(engine.__dict__ | {"g": None, "local": None, "_cache": {}})
    return (sum(v.nbytes for v in arrs.values()),
            sum(-(-max(v.nbytes, 1) // _ALIGN) * _ALIGN for v in arrs.values()),
            len(pickle.dumps(shell, protocol=pickle.HIGHEST_PROTOCOL)))


register_executor("processes", run_processes, ("start_method", "straggler"))

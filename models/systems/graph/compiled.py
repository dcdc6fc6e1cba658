"""Compiled multicore executor: numba partition kernels on nogil threads over shared memory.

The engine's superstep (:mod:`~models.systems.graph.engine`) is emit, message + combine per
partition, gather in ascending partition order, apply. :class:`CompiledExecutor` runs it with
compiled kernels:

- **Partition plan** (built once per :class:`~models.systems.graph.partition.Partitioning` and
  cached): each partition's edges as destination segments (CSC of the partition, uint32 source
  ids), the segments whose destination the partition masters first (*local*), then the segments
  of each other destination partition ``q`` in ascending ``q`` (*remote*, the mirrors of
  PowerGraph/PowerLyra). Every remote segment owns one slot of a preallocated message buffer, so
  the messages of partition ``p`` for partition ``q`` are one contiguous batch; each master
  ``q`` has a receive list of (slot, vertex) in ascending ``p``. The accumulators of all masters
  and the buffer are one shared array (vertex ``v`` at ``v``, slot ``i`` at ``n + i``).
- **Superstep** on ``T`` threads (``threading.Thread``; the kernels are ``@njit(nogil=True)`` so
  the threads run in parallel): phase A, every partition of the thread runs its edge kernel
  (local results straight into the accumulator of the master, remote results into its buffer
  slots); barrier; phase B, every master partition combines the batches it receives (ascending
  sender, so the result does not depend on ``T``), applies the vertex program to the vertices it
  masters and emits their next value, writing its convergence partials; barrier; every thread
  reduces the ``k`` partials in partition order and takes the same decision.
- **Gather order** (PageRank): the value each vertex emits sits at its *gather id* (vertices
  numbered by decreasing out-degree), and the partitions' source ids are stored as gather ids,
  so the hot values of a power-law graph share cache lines and stay in the last-level cache (an
  R-MAT graph's ids are permuted, scattering its hubs). Built on first use, in the setup time.
- **Programs**: PageRank, BFS, connected components and SSSP run fused (the vertex program is
  compiled too). BFS and CC choose a direction per superstep (Beamer et al., SC 2012): *pull*
  as above (BFS skips visited destinations and stops a segment at its first frontier source:
  every frontier vertex has the same level, so that is the minimum), or *push* when the frontier's
  out-edges are few: each partition walks its own edges by source (a CSR built on first use)
  from the frontier list that the masters fill in phase B, writing the same accumulator/buffer
  targets. Both directions compute the same minimum, so the result is the same. Any other
  :class:`~models.systems.graph.engine.VertexProgram` with a built-in edge operator runs with
  the generic compiled partition kernel (:func:`compiled_partition_step`), the program's own
  emit/apply in numpy; Dask uses that same kernel per partition (``DaskExecutor(kernel="compiled")``);
  the fused superstep itself (shared accumulator, barriers) is single-machine only.

Results do not depend on the thread count (a fixed partitioning fixes every floating-point
order); BFS, CC and SSSP equal the serial engine exactly, PageRank to rounding (the serial
engine's ``reduceat`` sums a segment pairwise).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError
from numba import njit

from .partition import Partition, Partitioning
from .result import RunResult

__all__ = ["CompiledExecutor", "compiled_partition_step", "Plan", "build_plan", "degree_ids", "MAX_THREADS"]

MAX_THREADS = 1024
_OPS = {"copy": 0, "add_weight": 1, "add_one": 2, "mul_weight": 3}
_COMBS = {"sum": 0, "min": 1}


# ---- generic kernel (any built-in edge operator; the Engine's step interface) ----------------------
@njit(nogil=True, cache=True)
def _msg(v, w, op):
    if op == 0:
        return v
    if op == 1:
        return v + w
    if op == 2:
        return v + 1.0
    return v * w


@njit(nogil=True, cache=True)
def _partials_kernel(src, seg_start, weight, value, op, comb, out):
    m = src.shape[0]
    s_n = seg_start.shape[0]
    for i in range(s_n):
        lo = seg_start[i]
        hi = seg_start[i + 1] if i + 1 < s_n else m
        acc = _msg(value[src[lo]], weight[lo], op)
        if comb == 0:
            for e in range(lo + 1, hi):
                acc += _msg(value[src[e]], weight[e], op)
        else:
            for e in range(lo + 1, hi):
                x = _msg(value[src[e]], weight[e], op)
                if x < acc:
                    acc = x
        out[i] = acc


def compiled_partition_step(part: Partition, value: np.ndarray, edge_op, combiner: str) -> np.ndarray:
    """:func:`~models.systems.graph.engine.partition_step` with a compiled kernel.

    The same result (``min`` exactly; ``sum`` to rounding: this kernel sums a segment in edge
    order). A callable ``edge_op`` has no compiled form: ``ValueError``.
    """
    if not isinstance(edge_op, str) or edge_op not in _OPS:
        raise UsageError(f"the compiled kernel supports the edge operators {', '.join(_OPS)}, not {edge_op!r}")
    if combiner not in _COMBS:
        raise UsageError(f"Unknown combiner {combiner!r}; choose sum or min")
    out = np.empty(part.dst_unique.size)
    if part.m:
        _partials_kernel(part.src, part.seg_start, part.weight, np.ascontiguousarray(value, dtype=np.float64),
                         _OPS[edge_op], _COMBS[combiner], out)
    return out


# ---- fused kernels -----------------------------------------------------------------------------------
# ``out`` is one array: the masters' accumulators (index = vertex, 0 .. n-1) followed by the message
# buffer (index n + slot); a segment writes ``out[seg_tgt[s]]``, its own vertex when local, its slot
# when remote.
@njit(nogil=True, cache=True)
def _sum_edges(src, seg_ptr, seg_tgt, y, out):
    """PageRank phase A (pull): sum of ``y[src]`` per destination segment."""
    for s in range(seg_ptr.shape[0] - 1):
        t = 0.0
        for e in range(seg_ptr[s], seg_ptr[s + 1]):
            t += y[src[e]]
        out[seg_tgt[s]] = t


@njit(nogil=True, cache=True)
def _min_edges(src, w, use_w, seg_ptr, seg_tgt, val, out):
    """CC/SSSP phase A (pull): min of ``val[src] (+ w)`` per destination segment (``inf`` = inactive)."""
    for s in range(seg_ptr.shape[0] - 1):
        t = np.inf
        if use_w:
            for e in range(seg_ptr[s], seg_ptr[s + 1]):
                x = val[src[e]] + w[e]
                if x < t:
                    t = x
        else:
            for e in range(seg_ptr[s], seg_ptr[s + 1]):
                x = val[src[e]]
                if x < t:
                    t = x
        out[seg_tgt[s]] = t


@njit(nogil=True, cache=True)
def _bfs_edges(src, seg_ptr, seg_dst, seg_tgt, front, level, nxt, out):
    """BFS phase A (pull, bottom-up): an unvisited destination with a frontier source gets ``nxt``."""
    for s in range(seg_ptr.shape[0] - 1):
        t = np.inf
        if level[seg_dst[s]] == np.inf:
            for e in range(seg_ptr[s], seg_ptr[s + 1]):
                if front[src[e]]:
                    t = nxt  # every frontier source has the same level: the first one is the minimum
                    break
        out[seg_tgt[s]] = t


@njit(nogil=True, cache=True)
def _push_min(flist, foff, fcnt, csr_ptr, csr_tgt, val, add, out):
    """BFS/CC phase A (push, top-down): each frontier vertex relaxes its out-edges of this partition."""
    for q in range(foff.shape[0]):
        for i in range(foff[q], foff[q] + fcnt[q]):
            u = flist[i]
            x = val[u] + add
            for e in range(csr_ptr[u], csr_ptr[u + 1]):
                t = csr_tgt[e]
                if x < out[t]:
                    out[t] = x


@njit(nogil=True, cache=True)
def _gather(recv_slot, recv_v, out, comb):
    """Phase B, first half: combine the received batches (ascending sender), reset the slots."""
    if comb == 0:
        for j in range(recv_slot.shape[0]):
            out[recv_v[j]] += out[recv_slot[j]]
            out[recv_slot[j]] = 0.0
    else:
        for j in range(recv_slot.shape[0]):
            x = out[recv_slot[j]]
            v = recv_v[j]
            if x < out[v]:
                out[v] = x
            out[recv_slot[j]] = np.inf


@njit(nogil=True, cache=True)
def _pr_apply(owned, recv_slot, recv_v, out, state, inv, dangling, y, gid, c0, d, dang_n, part):
    """PageRank phase B: new rank, next emitted value (``y`` at the vertex's gather id), partials
    (L1 change, dangling mass)."""
    _gather(recv_slot, recv_v, out, 0)
    diff = 0.0
    dmass = 0.0
    for i in range(owned.shape[0]):
        v = owned[i]
        new = c0 + d * (out[v] + dang_n)
        diff += abs(new - state[v])
        state[v] = new
        y[gid[v]] = new * inv[v]
        if dangling[v]:
            dmass += new
        out[v] = 0.0
    part[0] = diff
    part[1] = dmass


@njit(nogil=True, cache=True)
def _pr_init(owned, state, inv, dangling, y, gid, part):
    dmass = 0.0
    for i in range(owned.shape[0]):
        v = owned[i]
        y[gid[v]] = state[v] * inv[v]
        if dangling[v]:
            dmass += state[v]
    part[0] = 0.0
    part[1] = dmass


@njit(nogil=True, cache=True)
def _bfs_apply(owned, recv_slot, recv_v, out, level, front, flist, foff, outdeg, indeg, part):
    """BFS phase B: newly reached vertices join the frontier (flag and list); partials
    (frontier size, its out-edges, in-edges of the still unvisited)."""
    _gather(recv_slot, recv_v, out, 1)
    cnt = 0
    mf = 0
    mu = 0
    for i in range(owned.shape[0]):
        v = owned[i]
        a = out[v]
        if level[v] == np.inf and a != np.inf:
            level[v] = a
            front[v] = 1
            flist[foff + cnt] = v
            cnt += 1
            mf += outdeg[v]
        else:
            front[v] = 0
            if level[v] == np.inf:
                mu += indeg[v]
        out[v] = np.inf
    part[0] = cnt
    part[1] = mf
    part[2] = mu


@njit(nogil=True, cache=True)
def _relax_apply(owned, recv_slot, recv_v, out, state, val, flist, foff, outdeg, part):
    """CC/SSSP phase B: ``state = min(state, acc)``; changed vertices emit their value (others
    ``inf``) and join the active list; partials (active count, their out-edges)."""
    _gather(recv_slot, recv_v, out, 1)
    cnt = 0
    mf = 0
    for i in range(owned.shape[0]):
        v = owned[i]
        a = out[v]
        if a < state[v]:
            state[v] = a
            val[v] = a
            flist[foff + cnt] = v
            cnt += 1
            mf += outdeg[v]
        else:
            val[v] = np.inf
        out[v] = np.inf
    part[0] = cnt
    part[1] = mf
    part[2] = 0.0


# ---- plan ----------------------------------------------------------------------------------------------
def degree_ids(outdeg: np.ndarray, dtype=np.int64) -> np.ndarray:
    """``gid[v]``: the vertices numbered by decreasing out-degree (ties by id), PageRank's gather order."""
    order = np.argsort(-np.asarray(outdeg), kind="stable")
    gid = np.empty(order.size, dtype)
    gid[order] = np.arange(order.size, dtype=dtype)
    return gid



@dataclass(frozen=True, eq=False)
class Plan:
    """A partitioning laid out for the fused kernels (see the module docstring).

    Per partition ``p``: ``src[p]`` (uint32 when ``n < 2**32``), ``weight[p]``, ``seg_ptr[p]``,
    ``seg_dst[p]``, ``seg_tgt[p]`` (index into the accumulator + buffer array), ``n_local[p]``.
    Per master ``q``: ``owned[q]``, ``recv_slot[q]`` (index ``n + slot``), ``recv_v[q]``,
    ``foff[q]`` (its region of the frontier list). ``slots`` = buffer length. :meth:`push` adds
    each partition's edges by source (CSR) for the push (top-down) direction, on first use.
    """

    n: int
    k: int
    src: tuple
    weight: tuple
    seg_ptr: tuple
    seg_dst: tuple
    seg_tgt: tuple
    n_local: tuple
    owned: tuple
    recv_slot: tuple
    recv_v: tuple
    foff: np.ndarray
    slots: int
    seconds: float
    _lazy: dict = field(default_factory=dict, repr=False)

    def summary(self) -> dict:
        return {"message_slots": self.slots, "local_segments": int(sum(self.n_local)),
                "remote_segments": self.slots, "plan_seconds": self.seconds}

    def gather(self) -> tuple:
        """(src_g, gid): each partition's sources as *gather ids*, and ``gid[v]`` per vertex.

        Gather ids number the vertices by decreasing out-degree (ties by id), so the values that
        most edges read sit together at the start of the gathered array: on an R-MAT graph (ids
        permuted, as Graph500 does) the hot part then stays in the last-level cache when the whole
        array (8 bytes per vertex) does not. PageRank gathers through them (built on first use);
        sums run in the same order, so ranks are unchanged bit for bit.
        """
        if "gather" not in self._lazy:
            outdeg = np.zeros(self.n, np.int64)
            for src in self.src:
                outdeg += np.bincount(src, minlength=self.n)
            gid = degree_ids(outdeg, self.src[0].dtype if self.src else np.uint32)
            self._lazy["gather"] = (tuple(gid[src] for src in self.src), gid)
        return self._lazy["gather"]

    def push(self) -> tuple:
        """(csr_ptr, csr_tgt) per partition: its edges grouped by source, each with its target."""
        if "csr" not in self._lazy:
            ptrs, tgts = [], []
            for p in range(self.k):
                src = self.src[p]
                lens = np.diff(self.seg_ptr[p])
                tgt = np.repeat(self.seg_tgt[p], lens)
                order = np.argsort(src, kind="stable")
                ptr = np.zeros(self.n + 1, np.int64)
                np.cumsum(np.bincount(src, minlength=self.n), out=ptr[1:])
                ptrs.append(ptr.astype(np.uint32) if src.size < 2**32 else ptr)
                tgts.append(tgt[order])
            self._lazy["csr"] = (tuple(ptrs), tuple(tgts))
        return self._lazy["csr"]


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def build_plan(P: Partitioning) -> Plan:
    """The fused-kernel layout of ``P`` (cached per Partitioning object)."""
    plan = _PLANS.get(P)
    if plan is not None:
        return plan
    t0 = time.perf_counter()
    n, k, master = P.n, P.k, P.master
    # unsigned ids: numba then indexes without the negative-index wrap-around test (about 1.5x on a gather)
    itype = np.uint32 if n < 2**32 else np.uint64
    cols = {x: [] for x in ("src", "weight", "seg_ptr", "seg_dst", "n_local", "remote")}
    base = 0
    for part in P.parts:
        du, seg = part.dst_unique, part.seg_start
        lens = np.diff(np.r_[seg, part.m]).astype(np.int64)
        q = master[du] if du.size else np.zeros(0, np.int64)
        local = q == part.pid
        order = np.lexsort((du, np.where(local, -1, q)))  # local first, then by destination partition
        lens_o = lens[order]
        ptr = np.zeros(du.size + 1, np.int64)
        np.cumsum(lens_o, out=ptr[1:])
        if np.array_equal(order, np.arange(du.size)):
            src, w = part.src, part.weight
        else:
            perm = np.repeat(seg[order] - ptr[:-1], lens_o) + np.arange(part.m)
            src, w = part.src[perm], part.weight[perm]
        nl = int(local.sum())
        cols["src"].append(np.ascontiguousarray(src, dtype=itype))
        cols["weight"].append(np.ascontiguousarray(w))
        cols["seg_ptr"].append(ptr)
        cols["seg_dst"].append(np.ascontiguousarray(du[order], dtype=itype))
        cols["n_local"].append(nl)
        nr = du.size - nl
        cols["remote"].append((q[order][nl:], n + base + np.arange(nr, dtype=np.int64), du[order][nl:]))
        base += nr
    ttype = np.uint32 if n + base < 2**32 else np.uint64
    seg_tgt = tuple(np.r_[d[:nl].astype(np.int64), r[1]].astype(ttype)
                    for d, nl, r in zip(cols["seg_dst"], cols["n_local"], cols["remote"]))
    owned, rslot, rv = [], [], []
    for qq in range(k):
        owned.append(np.flatnonzero(master == qq).astype(itype))
        rslot.append(np.concatenate([r[1][r[0] == qq] for r in cols["remote"]]).astype(ttype))
        rv.append(np.concatenate([r[2][r[0] == qq] for r in cols["remote"]]).astype(itype))
    foff = np.zeros(k, np.int64)
    np.cumsum([o.size for o in owned[:-1]], out=foff[1:])
    plan = Plan(n, k, tuple(cols["src"]), tuple(cols["weight"]), tuple(cols["seg_ptr"]), tuple(cols["seg_dst"]),
                seg_tgt, tuple(cols["n_local"]), tuple(owned), tuple(rslot), tuple(rv), foff, base,
                time.perf_counter() - t0)
    _PLANS[P] = plan
    return plan


# ---- executor ------------------------------------------------------------------------------------------
class _NoBarrier:
    def wait(self):
        return 0

    def abort(self):
        pass


def _ordered_sum(a) -> float:
    s = 0.0
    for x in a.tolist():
        s += x
    return s


#: push (top-down) when the frontier's out-edges times this are fewer than the pull work: BFS pull
#: stops a segment at its first frontier source, so it is cheaper per edge than it looks (Beamer et
#: al., SC 2012, use 14); CC pull reads every edge.
PUSH_ALPHA = {"bfs": 14.0, "cc": 2.0}

#: with the default thread count, one thread per this many edges at most (see CompiledExecutor)
AUTO_EDGES_PER_THREAD = 1 << 19


class CompiledExecutor:
    """Compiled partition kernels on ``threads`` nogil threads (see the module docstring).

    Parameters
    ----------
    threads : int or None
        Worker threads, 1 .. :data:`MAX_THREADS`. Partition ``p`` runs on thread ``p mod threads``;
        a thread count above the partition count leaves threads idle. ``None`` (default): every
        core of the machine, but at most one thread per :data:`AUTO_EDGES_PER_THREAD` edges of the
        graph, since on a small graph a superstep is shorter than the two barrier waits that keep
        the threads in step (measured on the 264k-edge Debian graph: BFS 1.4 ms at 1 thread,
        7.2 ms at 2 threads on a loaded host). An explicit count is always honoured.
    direction : {"auto", "pull", "push"}
        BFS and CC: choose per superstep (default), or always pull / push. Every choice gives
        the same result.
    """

    name = "compiled"

    def __init__(self, threads: int | None = None, direction: str = "auto"):
        self.auto = threads is None
        threads = (os.cpu_count() or 1) if threads is None else threads
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= MAX_THREADS:
            raise UsageError(f"thread count must be an integer in [1, {MAX_THREADS}], not {threads!r}")
        if direction not in ("auto", "pull", "push"):
            raise UsageError(f"Unknown direction {direction!r}; choose auto, pull or push")
        self.threads = int(threads)
        self.direction = direction
        self.parts = ()
        self._pool = None

    # -- the Engine's generic step interface (Python emit/apply, compiled partition kernels) --
    def start(self, parts: tuple) -> None:
        self.parts = parts
        if self.threads > 1 and len(parts) > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(min(self.threads, len(parts)))

    def step(self, value, edge_op, combiner) -> list:
        value = np.ascontiguousarray(value, dtype=np.float64)
        if self._pool is None:
            return [compiled_partition_step(p, value, edge_op, combiner) for p in self.parts]
        return list(self._pool.map(lambda p: compiled_partition_step(p, value, edge_op, combiner), self.parts))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.parts = ()

    # -- fused run -----------------------------------------------------------------------------------------
    def run_fused(self, g, P: Partitioning, program, steps_cap: int):
        """Run a known program fully compiled; ``None`` if the program has no fused form."""
        kind = vars(type(program)).get("fused")  # PageRank, BFS, ConnectedComponents, SSSP (not subclasses)
        if kind is None:
            return None
        state, ctx = program.init(g)  # validates (source in range, weights >= 0)
        t0 = time.perf_counter()
        plan = build_plan(P)
        use_push = kind in ("bfs", "cc") and self.direction != "pull"
        if use_push:
            csr_ptr, csr_tgt = plan.push()
        if kind == "pr":
            src_g, gid = plan.gather()
        setup = time.perf_counter() - t0
        n, k = g.n, plan.k
        T = min(self.threads, k)
        if self.auto:
            T = max(1, min(T, g.m // AUTO_EDGES_PER_THREAD))
        out = np.full(n + plan.slots, 0.0 if kind == "pr" else np.inf)
        parts = np.zeros((2, k, 3))
        state = np.array(state, dtype=np.float64)
        shared = {"steps": 0, "pushes": 0}
        if kind == "pr":
            inv, dangling = ctx["inv"], ctx["dangling"].astype(np.uint8)
            y = np.zeros(n)
            for q in range(k):
                _pr_init(plan.owned[q], state, inv, dangling, y, gid, parts[1, q])
            c0, d = (1 - program.damping) / n, program.damping
            thresh = n * program.tol
        else:
            outdeg, indeg = g.out_degree(), g.in_degree()
            flist = np.zeros(n, plan.owned[0].dtype)
            active = ctx["front"] if kind == "bfs" else (ctx["active"] if kind == "sssp" else np.ones(n, bool))
            for q in range(k):  # the initial frontier / active set, in each master's region
                o = plan.owned[q]
                a = o[active[o]]
                flist[plan.foff[q]:plan.foff[q] + a.size] = a
                parts[1, q] = (a.size, outdeg[a].sum(), indeg[o[~active[o]]].sum() if kind == "bfs" else 0)
            if kind == "bfs":
                front = active.astype(np.uint8)
            else:
                val = np.where(active, state, np.inf)
        use_w = kind == "sssp"
        alpha = PUSH_ALPHA.get(kind, 0.0)

        def worker(t: int, barrier) -> None:
            mine = range(t, k, T)
            step = 0
            while step < steps_cap:
                cur = step & 1
                prev = parts[cur ^ 1]
                if use_push:
                    if self.direction == "push":
                        push = True
                    else:
                        pull_work = _ordered_sum(prev[:, 2]) if kind == "bfs" else float(g.m)
                        push = alpha * _ordered_sum(prev[:, 1]) < pull_work
                    fcnt = prev[:, 0].astype(np.int64)
                    if push and t == 0:
                        shared["pushes"] += 1
                for p in mine:
                    if kind == "pr":
                        _sum_edges(src_g[p], plan.seg_ptr[p], plan.seg_tgt[p], y, out)
                    elif use_push and push:
                        _push_min(flist, plan.foff, fcnt, csr_ptr[p], csr_tgt[p], state,
                                  1.0 if kind == "bfs" else 0.0, out)
                    elif kind == "bfs":
                        _bfs_edges(plan.src[p], plan.seg_ptr[p], plan.seg_dst[p], plan.seg_tgt[p], front, state,
                                   float(step + 1), out)
                    else:
                        _min_edges(plan.src[p], plan.weight[p], use_w, plan.seg_ptr[p], plan.seg_tgt[p], val, out)
                barrier.wait()
                if kind == "pr":
                    dang_n = _ordered_sum(prev[:, 1]) / n
                for q in mine:
                    r = (plan.owned[q], plan.recv_slot[q], plan.recv_v[q], out)
                    if kind == "pr":
                        _pr_apply(*r, state, inv, dangling, y, gid, c0, d, dang_n, parts[cur, q])
                    elif kind == "bfs":
                        _bfs_apply(*r, state, front, flist, plan.foff[q], outdeg, indeg, parts[cur, q])
                    else:
                        _relax_apply(*r, state, val, flist, plan.foff[q], outdeg, parts[cur, q])
                barrier.wait()
                step += 1
                if kind == "pr":
                    done = _ordered_sum(parts[cur, :, 0]) < thresh
                else:
                    done = _ordered_sum(parts[cur, :, 0]) == 0
                if done:
                    break
            if t == 0:
                shared["steps"] = step

        t1 = time.perf_counter()
        c1 = time.process_time()
        if T == 1:
            worker(0, _NoBarrier())
        else:
            barrier = threading.Barrier(T)
            errors = []

            def run(t):
                try:
                    worker(t, barrier)
                except threading.BrokenBarrierError:
                    pass
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                    errors.append(e)
                    barrier.abort()

            ths = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(1, T)]
            for th in ths:
                th.start()
            run(0)
            for th in ths:
                th.join()
            if errors:
                raise errors[0]
        dt = time.perf_counter() - t1
        cpu = time.process_time() - c1
        steps = shared["steps"]
        summary = P.summary()
        summary.update(plan.summary())
        summary["push_steps"] = shared["pushes"]
        return RunResult(state, steps, dt, steps * g.m, setup, f"{self.name} ({T} threads)", summary, cpu)

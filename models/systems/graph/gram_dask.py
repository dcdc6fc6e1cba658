"""GraM-style scale-out: resident partitions on Dask worker processes, boundary messages only.

GraM (Wu et al., "GraM: Scaling Graph Computation to the Trillions", SoCC 2015) keeps each
server's share of the graph in its memory for the whole run and moves, per superstep, only the
messages that cross servers, combined per destination and sent in batches. :class:`GramDaskExecutor`
runs the engine's programs that way on the processes of a Dask cluster (an embedded
``LocalCluster`` of ``workers`` processes, or any scheduler by address):

- **Shards** (:func:`build_shards`, on the client, once per
  :class:`~models.systems.graph.partition.Partitioning`): partition ``p`` goes to worker
  ``p mod W``; a vertex belongs to the worker of its master partition. A worker's edges (all its
  partitions, merged) form one CSC in *local ids*: its own vertices first (numbered by decreasing
  out-degree, the compiled engine's gather order), then its *ghosts* (sources mastered elsewhere),
  grouped by owning worker. Destination segments come local first, then grouped by destination
  worker; each remote segment owns a message slot, so the messages for worker ``q`` are one
  contiguous batch whose receiving ids ``q`` learns once at setup.
- **Residency**: each shard is scattered once to its worker and held there by a
  :class:`GramWorker` Dask actor for the executor's lifetime; the vertex state also lives there.
- **Superstep** (``GramWorker.superstep``, all workers at once; the workers exchange directly,
  actor to actor, never through the client): (1) each worker sends the emitted values of its
  vertices that other workers read as sources (the PowerGraph/PowerLyra mirror update; empty for
  an edge placement by source, GraM's own), one batch per destination worker; (2) it runs the
  compiled engine's partition kernel (:mod:`~models.systems.graph.compiled`, numba, nogil) over its
  edges; (3) it sends each destination worker one batch of combined messages (one value per
  remote destination vertex); (4) it combines the batches it receives in ascending sender order
  and applies the vertex program to its own vertices. For ``min`` programs (BFS, CC, SSSP) a batch
  carries only the active entries (position + value) when that is smaller than the dense batch.
  The client sends each worker the step number and one scalar (PageRank's dangling mass) and gets
  back two or three scalars (convergence partials, bytes sent): small messages only.

Bytes are counted as sent (the numpy payloads: values and, for sparse batches, uint32 positions;
Dask's framing is not included), per superstep, beside the *cut*: the ghost entries plus the
remote message slots, the entries a dense superstep must move.

Programs: PageRank, BFS, connected components and SSSP (the classes the compiled executor fuses).
BFS and CC equal the serial engine exactly; PageRank agrees to rounding (sums run in another
order). Any other vertex program: :class:`~models.errors.UsageError`.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hwcosim.models.errors import UsageError

from .compiled import _min_edges, _sum_edges, degree_ids
from .partition import Partitioning
from .result import RunResult

__all__ = ["GramDaskExecutor", "GramWorker", "build_shards", "shard_cut", "KINDS"]

#: the programs this executor runs (``VertexProgram.fused`` of PageRank, BFS, CC, SSSP)
KINDS = ("pr", "bfs", "cc", "sssp")
_SPARSE_B = 12  # bytes per sparse entry (uint32 position + float64 value) vs 8 per dense entry


# ---- shards (client side) ------------------------------------------------------------------------------
def build_shards(P: Partitioning, W: int, outdeg: np.ndarray, labels: np.ndarray | None = None) -> list:
    """The ``W`` worker shards of ``P`` (see the module docstring); a list of dicts of arrays.

    ``outdeg`` is every vertex's out-degree (PageRank's ``1/deg`` and the local order);
    ``labels`` the float labels of connected components (default ``0 .. n-1``).
    """
    if W < 1 or W > P.k:
        raise UsageError(f"the GraM executor needs 1 <= workers <= partitions; got {W} workers, {P.k} partitions "
                         f"(give -k >= {W})")
    n, k = P.n, P.k
    wp = np.arange(k) % W
    vw = wp[P.master]
    gid = degree_ids(outdeg)
    owned, lid = [], np.empty(n, np.int64)
    for w in range(W):
        o = np.flatnonzero(vw == w)
        o = o[np.argsort(gid[o], kind="stable")]
        lid[o] = np.arange(o.size)
        owned.append(o)
    ghost_pos = np.empty(n, np.int64)
    shards = []
    for w in range(W):
        parts = [P.parts[p] for p in range(k) if wp[p] == w]
        src = np.concatenate([p.src for p in parts])
        dst = np.concatenate([p.dst for p in parts])
        wt = np.concatenate([p.weight for p in parts])
        if len(parts) > 1:
            o = np.argsort(dst, kind="stable")
            src, dst, wt = src[o], dst[o], wt[o]
        m = src.size
        if m:
            seg = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
        else:
            seg = np.zeros(0, np.int64)
        du = dst[seg]
        lens = np.diff(np.r_[seg, m]).astype(np.int64)
        q = vw[du]
        local = q == w
        order = np.lexsort((lid[du], np.where(local, -1, q)))  # local first, then by destination worker
        lens_o = lens[order]
        ptr = np.zeros(du.size + 1, np.int64)
        np.cumsum(lens_o, out=ptr[1:])
        perm = np.repeat(seg[order] - ptr[:-1], lens_o) + np.arange(m)
        src, wt = src[perm], wt[perm]
        du, q = du[order], q[order]
        nl = int(local.sum())
        n_own = owned[w].size
        # ghosts: sources mastered on another worker, grouped by that worker, in its local order
        gh = np.unique(src[vw[src] != w])
        gh = gh[np.lexsort((lid[gh], vw[gh]))]
        ghost_pos[gh] = n_own + np.arange(gh.size)
        is_own = vw[src] == w
        lsrc = np.where(is_own, lid[src], ghost_pos[src])
        itype = np.uint32 if n_own + gh.size + du.size < 2**32 else np.uint64
        seg_tgt = np.r_[lid[du[:nl]], n_own + np.arange(du.size - nl)].astype(itype)
        uniform = bool(wt.size == 0 or np.all(wt == wt[0]))
        gcnt = np.bincount(vw[gh], minlength=W)
        mcnt = np.bincount(q[nl:], minlength=W)
        shards.append({
            "rank": w, "n": n, "n_own": n_own, "owned": owned[w], "outdeg": outdeg[owned[w]],
            "labels": (owned[w].astype(float) if labels is None else labels[owned[w]]),
            "src": lsrc.astype(itype), "seg_ptr": ptr, "seg_tgt": seg_tgt, "n_local_seg": nl,
            "weight": None if uniform else wt, "wscalar": float(wt[0]) if wt.size else 1.0,
            "n_ghost": gh.size, "m": m,
            # ghost batch from worker r: y[n_own + goff[r] : ... + gcnt[r]]
            "goff": np.r_[0, np.cumsum(gcnt)[:-1]], "gcnt": gcnt,
            # message batch for worker r: out[n_own + moff[r] : ... + mcnt[r]]
            "moff": np.r_[0, np.cumsum(mcnt)[:-1]], "mcnt": mcnt,
            "_ghosts": gh, "_mdst": du[nl:],
        })
    # the receiving side of both exchanges, in the sender's batch order
    for sh in shards:
        sh["send_val"] = {}
        sh["recv_msg"] = {}
    for w, sh in enumerate(shards):
        for r in range(W):
            if sh["gcnt"][r]:
                g = sh["_ghosts"][sh["goff"][r]:sh["goff"][r] + sh["gcnt"][r]]
                shards[r]["send_val"][w] = lid[g]
            if sh["mcnt"][r]:
                d = sh["_mdst"][sh["moff"][r]:sh["moff"][r] + sh["mcnt"][r]]
                shards[r]["recv_msg"][w] = lid[d]
    for sh in shards:
        del sh["_ghosts"], sh["_mdst"]
    return shards


def shard_cut(shards: list) -> dict:
    """The cut of a shard set: ghost entries (values a dense superstep sends) and remote message slots."""
    ghosts = int(sum(int(sh["n_ghost"]) for sh in shards))
    slots = int(sum(int(sh["mcnt"].sum()) for sh in shards))
    return {"workers": len(shards), "ghost_entries": ghosts, "message_slots": slots,
            "dense_bytes_per_superstep": 8 * (ghosts + slots),
            "edges_per_worker": [int(sh["m"]) for sh in shards],
            "vertices_per_worker": [int(sh["n_own"]) for sh in shards]}


# ---- worker side ---------------------------------------------------------------------------------------
def _encode(vals: np.ndarray, sparse_ok: bool):
    """A batch: ``(None, vals)`` dense, or ``(pos, vals[pos])`` with only the finite entries."""
    if sparse_ok:
        fin = np.flatnonzero(np.isfinite(vals))
        if fin.size * _SPARSE_B < vals.size * 8:
            return fin.astype(np.uint32), vals[fin]
    return None, vals


def _nbytes(batch) -> int:
    pos, vals = batch
    return int(vals.nbytes) + (0 if pos is None else int(pos.nbytes))


class GramWorker:
    """One worker's resident shard and vertex state (created as a Dask actor; see the module docstring)."""

    def __init__(self, shard: dict):
        self.sh = shard
        self.rank = int(shard["rank"])
        self.n_own = int(shard["n_own"])
        self.out = np.zeros(self.n_own + int(shard["mcnt"].sum()))
        self.y = np.zeros(self.n_own + int(shard["n_ghost"]))
        self.peers: list = []
        self.inbox: dict = {}
        self._cv = None
        self._pool = ThreadPoolExecutor(1)
        self.kind = None
        self._warm()

    def _warm(self) -> None:
        """Call both kernels once with this shard's dtypes (numba's first call in a process costs about
        a second; here it falls in the setup, not in the first superstep)."""
        sh = self.sh
        src, tgt = np.zeros(1, sh["src"].dtype), np.zeros(1, sh["seg_tgt"].dtype)
        ptr, y, out = np.array([0, 1], np.int64), np.zeros(1), np.zeros(1)
        _sum_edges(src, ptr, tgt, y, out)
        _min_edges(src, np.zeros(1), False, ptr, tgt, y, out)

    def connect(self, peers: list) -> int:
        """The actor handles of every worker, by rank (this one included)."""
        self.peers = peers
        return len(peers)

    def reset(self, kind: str, params: dict) -> int:
        """Initial state of a run of ``kind`` (``pr``: damping, n; ``bfs``/``sssp``: source; ``cc``)."""
        sh, no = self.sh, self.n_own
        self.kind, self.params = kind, params
        self.inbox.clear()
        deg = sh["outdeg"].astype(float)
        if kind == "pr":
            self.inv = np.zeros(no)
            self.inv[deg > 0] = 1.0 / deg[deg > 0]
            self.dangling = deg == 0
            self.state = np.full(no, 1.0 / sh["n"])
            self.y[:no] = self.state * self.inv
        elif kind in ("bfs", "sssp"):
            self.state = np.full(no, np.inf)
            self.active = np.zeros(no, bool)
            hit = np.flatnonzero(sh["owned"] == params["source"])
            self.state[hit] = 0.0
            self.active[hit] = True
            self._emit()
        else:
            self.state = np.array(sh["labels"], dtype=float)
            self.active = np.ones(no, bool)
            self._emit()
        return int(no)

    def _emit(self) -> None:
        no = self.n_own
        if self.kind == "pr":
            self.y[:no] = self.state * self.inv
            return
        add = {"bfs": 1.0, "sssp": self.sh["wscalar"] if self.sh["weight"] is None else 0.0, "cc": 0.0}[self.kind]
        self.y[:no] = np.where(self.active, self.state + add if add else self.state, np.inf)

    def _cond(self):
        if self._cv is None:
            self._cv = asyncio.Condition()
        return self._cv

    async def receive(self, step: int, phase: int, sender: int, pos, vals) -> int:
        """A batch from ``sender`` for ``step`` (``phase`` 0: source values, 1: messages)."""
        cv = self._cond()
        async with cv:
            self.inbox.setdefault((step, phase), {})[sender] = (pos, vals)
            cv.notify_all()
        return 0

    async def _wait(self, step: int, phase: int, senders) -> dict:
        cv = self._cond()
        need = set(senders)
        async with cv:
            await cv.wait_for(lambda: need <= set(self.inbox.get((step, phase), {})))
            return self.inbox.pop((step, phase), {})

    def _send(self, step: int, phase: int, batches: dict) -> tuple:
        """Start sending ``batches`` (destination rank -> batch); the acknowledgements are awaited at the
        end of the superstep, so a busy receiver does not hold up this worker's next phase."""
        async def one(r, b):
            return await self.peers[r].receive(step, phase, self.rank, b[0], b[1])

        task = asyncio.ensure_future(asyncio.gather(*(one(r, b) for r, b in batches.items())))
        return task, sum(_nbytes(b) for b in batches.values()), len(batches)

    def _kernel(self) -> None:
        sh, out = self.sh, self.out
        if self.kind == "pr":
            out[:self.n_own] = 0.0
            _sum_edges(sh["src"], sh["seg_ptr"], sh["seg_tgt"], self.y, out)
        else:
            out[:self.n_own] = np.inf
            w = sh["weight"]
            use_w = self.kind == "sssp" and w is not None
            _min_edges(sh["src"], w if use_w else np.zeros(1), use_w, sh["seg_ptr"], sh["seg_tgt"], self.y, out)

    def _apply(self, msgs: dict, dang_n: float) -> list:
        sh, no = self.sh, self.n_own
        acc = self.out[:no]
        for r in sorted(msgs):  # ascending sender: the sum order does not depend on arrival
            pos, vals = msgs[r]
            idx = sh["recv_msg"][r] if pos is None else sh["recv_msg"][r][pos]
            if self.kind == "pr":
                acc[idx] += vals  # one slot per (sender, vertex): no repeated index
            else:
                acc[idx] = np.minimum(acc[idx], vals)
        if self.kind == "pr":
            p = self.params
            new = (1 - p["damping"]) / sh["n"] + p["damping"] * (acc + dang_n)
            diff = float(np.abs(new - self.state).sum())
            self.state = new
            self._emit()
            return [diff, float(new[self.dangling].sum())]
        if self.kind == "bfs":
            new = np.isinf(self.state) & np.isfinite(acc)
            self.state[new] = acc[new]
        else:
            new = acc < self.state
            self.state = np.minimum(self.state, acc)
        self.active = new
        self._emit()
        return [float(new.sum()), 0.0]

    async def superstep(self, step: int, dang_n: float) -> list:
        """One superstep; returns ``[partial 0, partial 1, bytes sent, batches sent, value bytes sent,
        compute seconds]`` (compute: the edge kernel and the apply, as this worker timed them)."""
        sh, no = self.sh, self.n_own
        loop = asyncio.get_running_loop()
        sparse = self.kind != "pr"
        vb = {r: _encode(self.y[:no][idx], sparse) for r, idx in sh["send_val"].items()}
        s0, b0, c0 = self._send(step, 0, vb)
        got = await self._wait(step, 0, [r for r in range(len(self.peers)) if sh["gcnt"][r]])
        for r, (pos, vals) in got.items():
            lo = no + int(sh["goff"][r])
            if pos is None:
                self.y[lo:lo + vals.size] = vals
            else:
                self.y[lo:lo + int(sh["gcnt"][r])] = np.inf
                self.y[lo + pos.astype(np.int64)] = vals
        tk = time.perf_counter()
        await loop.run_in_executor(self._pool, self._kernel)
        tk = time.perf_counter() - tk
        mb = {r: _encode(self.out[no + int(sh["moff"][r]):no + int(sh["moff"][r] + sh["mcnt"][r])].copy(), sparse)
              for r in range(len(self.peers)) if sh["mcnt"][r]}
        s1, b1, c1 = self._send(step, 1, mb)
        msgs = await self._wait(step, 1, list(sh["recv_msg"]))
        ta = time.perf_counter()
        part = await loop.run_in_executor(self._pool, self._apply, msgs, dang_n)
        ta = time.perf_counter() - ta
        await s0
        await s1
        return part + [float(b0 + b1), float(c0 + c1), float(b0), tk + ta]

    def result(self) -> tuple:
        """(global ids of this worker's vertices, their state)."""
        return self.sh["owned"], self.state


# ---- client side ---------------------------------------------------------------------------------------
def _wait_all(futs) -> list:
    return [f.result() for f in futs]


class GramDaskExecutor:
    """PageRank, BFS, CC, SSSP with resident shards on Dask worker processes (see the module docstring).

    Parameters
    ----------
    address : str, optional
        A scheduler address (``tcp://host:8786``); default: an embedded ``LocalCluster`` of
        ``workers`` processes (one thread each).
    workers : int
        Workers used (the first ``workers`` of the cluster, by address); at most the partition count.
    client : distributed.Client, optional
        An existing client to use (its cluster is left running).

    Used as a context manager (or after :meth:`open`), the cluster and the resident shards stay
    up across runs until :meth:`close`; otherwise every run starts and closes its own cluster
    (the start is counted in ``setup_seconds``).
    """

    name = "gram"

    def __init__(self, address: str | None = None, workers: int = 2, client=None):
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise UsageError(f"worker count must be an integer >= 1, not {workers!r}")
        self.address, self.workers, self._given = address, int(workers), client
        self.client = client
        self.cluster = None
        self.actors: list = []
        self._P = None
        self._persist = False
        self.cut: dict = {}
        self.load_seconds = 0.0

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> GramDaskExecutor:
        """Start (or connect to) the cluster; it then stays up until :meth:`close`."""
        self._persist = True
        self._connect()
        return self

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def _connect(self) -> None:
        if self.client is not None:
            return
        from hwcosim.models.extras import systems_extra

        with systems_extra("the GraM Dask executor"):
            from distributed import Client, LocalCluster

        if self.address:
            self.client = Client(self.address, timeout="20s")
        else:
            self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                        dashboard_address=":0", silence_logs=40)
            self.client = Client(self.cluster, direct_to_workers=True)

    def _drop_actors(self) -> None:
        self.actors = []
        self._P = None
        if getattr(self, "_futs", None):
            self.client.cancel(self._futs)
        self._futs = []

    def close(self) -> None:
        self._persist = False
        if self.client is not None:
            self._drop_actors()
            if self._given is None:
                self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = None if self._given is None else self._given
        self.cluster = None

    def load(self, g, P: Partitioning) -> float:
        """Build the shards of ``P`` and place them on the workers (once per Partitioning); seconds taken."""
        if self._P is not None and self._P() is P:
            return 0.0
        t0 = time.perf_counter()
        self._connect()
        self._drop_actors()
        addrs = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        if len(addrs) < self.workers:
            try:
                self.client.wait_for_workers(self.workers, timeout=30)
            except TimeoutError as e:
                raise UsageError(f"the Dask cluster has {len(addrs)} workers; {self.workers} asked (start more "
                                 "workers or give fewer)") from e
            addrs = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        addrs = addrs[:self.workers]
        labels = np.asarray(g.vertex_ids, dtype=float)
        shards = build_shards(P, self.workers, np.asarray(g.out_degree()), labels)
        self.cut = shard_cut(shards)
        futs = []
        for sh, a in zip(shards, addrs):
            f = self.client.scatter([sh], workers=[a], direct=True)[0]  # one piece, not per key
            futs.append(self.client.submit(GramWorker, f, actor=True, workers=[a], allow_other_workers=False,
                                           pure=False))
            futs.append(f)
        del shards
        self._futs = futs
        self.actors = [f.result() for f in futs[0::2]]
        _wait_all([a.connect(self.actors) for a in self.actors])
        self._P = weakref.ref(P)
        self.load_seconds = time.perf_counter() - t0
        return self.load_seconds

    # -- the Engine's fused-run interface ----------------------------------------------------------------
    def run_fused(self, g, P: Partitioning, program, steps_cap: int) -> RunResult:
        kind = vars(type(program)).get("fused")
        if kind not in KINDS:
            raise UsageError(f"the gram executor runs pagerank, bfs, cc and sssp, not {type(program).__name__}; "
                             "use --executor compiled or dask for other vertex programs")
        state0, ctx = program.init(g)  # validates the source and the weights
        t0 = time.perf_counter()
        try:
            self.load(g, P)
            params: dict = {}
            dang = 0.0
            if kind == "pr":
                params = {"damping": program.damping}
                dang = float(state0[ctx["dangling"]].sum()) / g.n
                thresh = g.n * program.tol
            elif kind in ("bfs", "sssp"):
                params = {"source": int(np.flatnonzero(ctx["front" if kind == "bfs" else "active"])[0])}
            _wait_all([a.reset(kind, params) for a in self.actors])
            setup = time.perf_counter() - t0
            t1, c1 = time.perf_counter(), time.process_time()
            steps, per_step = 0, []
            while steps < steps_cap:
                ts = time.perf_counter()
                parts = _wait_all([a.superstep(steps, dang) for a in self.actors])
                ts = time.perf_counter() - ts
                steps += 1
                tot = [0.0] * 5
                for p in parts:  # worker order: deterministic
                    tot = [x + y for x, y in zip(tot, p)]
                per_step.append({"bytes": int(tot[2]), "batches": int(tot[3]), "value_bytes": int(tot[4]),
                                 "seconds": ts, "max_compute_s": max(p[5] for p in parts)})
                if kind == "pr":
                    dang = tot[1] / g.n
                    done = tot[0] < thresh
                else:
                    done = tot[0] == 0
                if done:
                    break
            dt, cpu = time.perf_counter() - t1, time.process_time() - c1
            state = np.empty(g.n)
            for ids, st in _wait_all([a.result() for a in self.actors]):
                state[ids] = st
        finally:
            if not self._persist:
                self.close()
        summary = P.summary()
        summary.update({"cut": self.cut, "supersteps": per_step, "shard_load_seconds": self.load_seconds,
                        "bytes_total": int(sum(s["bytes"] for s in per_step)), "workers": self.workers,
                        "host_cores": os.cpu_count()})
        return RunResult(state, steps, dt, steps * g.m, setup, f"{self.name} ({self.workers} Dask workers)",
                         summary, cpu)


"""Chunk-level collective transport in the style of NCCL's proxy, with mechanical faults.

The flow-level engine (:mod:`hwcosim.models.systems.cluster.engine`) moves a collective's bytes at one rate. This
model goes one level down, to the unit that NCCL's network proxy and Mycroft's counters see: the
**chunk**. Every collective is a set of *connections* (one per ring hop per NCCL channel, or one
per P2P pair per channel); a connection moves ``K`` chunk slots in order, and for every slot ``k``
three times exist:

- ``G[k]`` (GPU ready): the sender's GPU kernel has written chunk ``k`` into a staging slot. It
  needs the kernel's previous chunk (``G[k-1]`` plus the per-chunk kernel time), the data it
  reduces or forwards (for a ring, chunk ``k - d`` of the connection *into* the sender, ``d``
  chunks per ring step), and a free local slot (``D[k - W]``: the window of ``W`` slots,
  NCCL_STEPS = 8).
- ``T[k]`` (RDMA posted): the sender's proxy thread posts the RDMA write. It needs ``G[k]``, the
  proxy's previous post plus its per-chunk CPU time, and a receive credit: the receiver has
  consumed chunk ``k - W`` (its kernel used it to make its own next chunk ready, or copied it out).
- ``D[k]`` (RDMA done): the write completes at the receiver. The connection's link service is
  serial: the transfer starts at ``max(T[k], end of the previous transfer)``, takes ``chunk /
  rate`` where ``rate`` is the connection's max-min fair share of its path (the flow model,
  :func:`hwcosim.models.systems.cluster.network._waterfill`, over every connection of the collective running at
  once, on the ECMP paths of :class:`~models.systems.cluster.routing.ECMPRouter`), plus the path latency.

The recurrences are solved slot by slot, vectorised over every connection of the job (every DP
ring of every stage and TP rank at once), so one iteration costs ``O(K)`` numpy calls of width
``connections``. Per-rank compute precedes the collectives; a rank enters a collective when its
own previous step is done (no global barrier: the mechanics make ranks wait for each other).

**Faults act on mechanics only** (:class:`Effects`; the reliability layer maps fault kinds onto
them and nothing here knows a fault's name):

- a slow GPU multiplies its compute and per-chunk kernel times;
- an overloaded host multiplies the host share of compute and adds scheduling delay to every
  chunk its proxies post;
- a process that dies stops its kernel, its proxy and its loggers; a hung GPU stops its kernel
  (chunks stop becoming ready) while the process keeps logging;
- a dead link (NIC down, switch down) has capacity 0 in the flow model: ECMP re-hashes around it
  where it can, and a connection with no live path stops being served (posted chunks never
  complete);
- a lossy link drops each chunk transmission with probability ``1 - keep``: the chunk is resent
  after a NAK delay (random, seeded), and the drops are counted on that link;
- a flapping port pauses transfers that would start while it is down.

What any observer may read is a :class:`~models.systems.cluster.telemetry.Telemetry` (written here), not
this object.

Coarsening (stated, not hidden): NCCL moves 512 KB chunks; when a ring step's slice would need
more than ``max_chunks_per_step`` chunks, the slice is cut into that many equal larger chunks, so
the counters count those. Per-chunk costs (proxy CPU time, scheduling delay, drops and their
NAK delays) are charged per NCCL chunk inside a coarse slot, so coarsening changes the counters'
unit and the variance, not the mean cost. Overlap of DP communication with compute, all-to-all and tree
all-reduce are not modelled here (the flow-level engine has them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError

from .job import JobSpec
from .network import _waterfill
from .routing import ECMPRouter, Router
from .telemetry import Telemetry
from .topology import Topology

__all__ = ["TransportParams", "Effects", "ConnSet", "ring_conns", "p2p_conns", "TransportSim"]


@dataclass(frozen=True)
class TransportParams:
    """Mechanical constants (ours unless marked; order-of-magnitude engineering values).

    Parameters
    ----------
    chunk_bytes : float
        NCCL's ring chunk: 4 MB buffer / 8 steps = 512 KB (NCCL defaults).
    window : int
        Slots per connection (NCCL_STEPS = 8).
    max_chunks_per_step : int
        Coarsening cap (module docstring); at most ``window``.
    gpu_bw : float
        Bytes per second the GPU kernel moves; a chunk costs ``3 * chunk / gpu_bw`` (read two
        operands, write one).
    proxy_s : float
        Proxy CPU time to post one chunk.
    sched_s : float
        Extra proxy delay per NCCL chunk per unit of host CPU overload above 1 (the proxy thread
        waits for a core; 20 us, about one chunk's wire time at 200 Gb/s).
    host_frac : float
        Share of an iteration's compute that is host CPU work (data loading, kernel launch).
    nak_s : float
        Delay before a dropped chunk is resent (NAK round trip and go-back-N restart).
    state_log_s : float
        Period of the proxies' state log (Mycroft: 100 ms, paper).
    """

    chunk_bytes: float = 512 * 1024
    window: int = 8
    max_chunks_per_step: int = 4
    gpu_bw: float = 1.0e12
    proxy_s: float = 2e-6
    sched_s: float = 2e-5
    host_frac: float = 0.05
    nak_s: float = 2e-4
    state_log_s: float = 0.1

    def __post_init__(self):
        if not (isinstance(self.window, int) and self.window >= 1):
            raise UsageError(f"window must be an integer >= 1, not {self.window!r}")
        if not (isinstance(self.max_chunks_per_step, int) and 1 <= self.max_chunks_per_step <= self.window):
            raise UsageError(f"max_chunks_per_step must be an integer in [1, window], not {self.max_chunks_per_step!r}")
        for n in ("chunk_bytes", "gpu_bw", "state_log_s"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("proxy_s", "sched_s", "nak_s"):
            if not getattr(self, n) >= 0:
                raise UsageError(f"{n} must be >= 0, not {getattr(self, n)!r}")
        if not 0 <= self.host_frac < 1:
            raise UsageError(f"host_frac must lie in [0, 1), not {self.host_frac!r}")


@dataclass
class Effects:
    """Mechanical state changes over time (what faults do, without their names).

    Interval lists hold ``(members, t_on, t_off, value)``; ``members`` is a boolean mask over
    GPUs (``gpu_slow``), hosts (``cpu_slow``) or links (``lossy``, ``flaps``, ``down``).
    """

    n_gpus: int
    n_hosts: int
    n_links: int
    gpu_slow: list = field(default_factory=list)
    cpu_slow: list = field(default_factory=list)
    die_at: np.ndarray = None
    hang_at: np.ndarray = None
    nan_at: np.ndarray = None
    hw_visible: np.ndarray = None  # a death raises a hardware event (Xid / DCGM)
    lossy: list = field(default_factory=list)  # (link mask, on, off, keep)
    flaps: list = field(default_factory=list)  # (link mask, on, off, period)
    down: list = field(default_factory=list)  # (link mask, on, off, None)

    def __post_init__(self):
        for n in ("die_at", "hang_at", "nan_at"):
            if getattr(self, n) is None:
                setattr(self, n, np.full(self.n_gpus, np.inf))
        if self.hw_visible is None:
            self.hw_visible = np.zeros(self.n_gpus, dtype=bool)

    def mask(self, size: int, idx) -> np.ndarray:
        m = np.zeros(size, dtype=bool)
        m[np.asarray(idx, dtype=np.int64)] = True
        return m

    def epochs(self) -> np.ndarray:
        """Times at which the set of dead links changes (starting with 0)."""
        ts = {0.0}
        for _m, on, off, _v in self.down:
            ts.add(float(on))
            if np.isfinite(off):
                ts.add(float(off))
        return np.array(sorted(ts))

    def dead_links(self, t: float) -> np.ndarray:
        dead = np.zeros(self.n_links, dtype=bool)
        for m, on, off, _v in self.down:
            if on <= t < off:
                dead |= m
        return dead


def _factor(intervals, members: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Product of the interval values active at ``t`` for each member index."""
    f = np.ones(np.shape(t))
    for mask, on, off, v in intervals:
        sel = mask[members] & (t >= on) & (t < off)
        if sel.any():
            f = np.where(sel, f * v, f)
    return f


@dataclass
class ConnSet:
    """The connections of one collective step of a job (all its rings / pairs, all channels).

    Attributes
    ----------
    label : str
    src, dst, chan : ndarray of int, shape (n,)
    dep, succ : ndarray of int, shape (n,)
        Connection into the sender / out of the receiver in the same ring and channel (-1: P2P).
    K, d : int
        Chunk slots per connection; slots per ring step (a slot depends on slot ``k - d`` of
        ``dep``).
    chunk : float
        Bytes per slot.
    """

    label: str
    src: np.ndarray
    dst: np.ndarray
    chan: np.ndarray
    dep: np.ndarray
    succ: np.ndarray
    K: int
    d: int
    chunk: float
    alpha_s: float = 0.0
    q: float = 1.0  # NCCL chunks per slot (coarsening factor)
    paths: list = field(default_factory=list)  # per epoch, shape (n, 6)
    rate: list = field(default_factory=list)  # per epoch, shape (n,)

    @property
    def n(self) -> int:
        return int(self.src.size)


def _slots(nbytes: float, p: TransportParams, cap: int) -> tuple[int, float]:
    m = int(min(cap, max(1, np.ceil(nbytes / p.chunk_bytes))))
    return m, nbytes / m


def ring_conns(label: str, groups: np.ndarray, size: float, channels: int, p: TransportParams,
               alpha_s: float = 0.0) -> ConnSet:
    """Ring all-reduce of ``size`` bytes per rank within every row of ``groups`` (shape (g, n))."""
    groups = np.asarray(groups, dtype=np.int64)
    g, n = groups.shape
    if n < 2:
        raise UsageError("a ring needs at least 2 ranks")
    m, chunk = _slots(size / (n * channels), p, p.max_chunks_per_step)
    j = np.arange(n)
    src, dst, chan, dep, succ = [], [], [], [], []
    for c in range(channels):
        for r in range(g):
            base = (c * g + r) * n
            src.append(groups[r])
            dst.append(np.roll(groups[r], -1))
            chan.append(np.full(n, c))
            dep.append(base + (j - 1) % n)
            succ.append(base + (j + 1) % n)
    cat = np.concatenate
    return ConnSet(label, cat(src), cat(dst), cat(chan), cat(dep), cat(succ), 2 * (n - 1) * m, m, chunk, alpha_s,
                   max(1.0, chunk / p.chunk_bytes))


def p2p_conns(label: str, a: np.ndarray, b: np.ndarray, size: float, channels: int, p: TransportParams,
              alpha_s: float = 0.0) -> ConnSet:
    """Point-to-point transfers ``a[i] -> b[i]`` of ``size`` bytes each, over ``channels``."""
    a = np.asarray(a, dtype=np.int64).ravel()
    b = np.asarray(b, dtype=np.int64).ravel()
    m, chunk = _slots(size / channels, p, 4 * p.window)
    n = a.size * channels
    return ConnSet(label, np.tile(a, channels), np.tile(b, channels), np.repeat(np.arange(channels), a.size),
                   np.full(n, -1), np.full(n, -1), m, 0, chunk, alpha_s, max(1.0, chunk / p.chunk_bytes))


def _link_gpu(topo: Topology) -> np.ndarray:
    """The cluster inventory: which GPU each NVLink and NIC-port link belongs to (-1: fabric)."""
    from .topology import LinkKind

    out = np.full(topo.n_links, -1, dtype=np.int64)
    g = np.arange(topo.n_gpus)
    for k in (LinkKind.NVL_UP, LinkKind.NVL_DN):
        out[topo.link_block(k)] = g
    for k in (LinkKind.PORT_UP, LinkKind.PORT_DN):
        out[topo.link_block(k)] = np.repeat(g, topo.nic_ports)
    return out


class TransportSim:
    """One training job on the chunk-level transport, with mechanical :class:`Effects`.

    Parameters
    ----------
    topo : Topology
    spec : JobSpec
        Only ring all-reduce and P2P are modelled (``algo="ring"``, no overlap, no all-to-all).
    place : ndarray, shape (pp, dp, tp)
    effects : Effects, optional
    params : TransportParams, optional
    seed : int
        Seeds ECMP hashing and the random chunk drops on lossy links.
    router : Router, optional
    record : bool
        Keep every chunk's G/T/D times in the telemetry (needed by the counter-based detectors;
        large jobs may switch it off and keep only the completion logs).
    """

    def __init__(self, topo: Topology, spec: JobSpec, place, effects: Effects | None = None,
                 params: TransportParams | None = None, seed: int = 0, router: Router | None = None,
                 record: bool = True):
        if spec.algo != "ring" or spec.overlap > 0 or spec.a2a_bytes > 0:
            raise UsageError(f"job {spec.name!r}: the transport models ring all-reduce and P2P only "
                             "(algo='ring', overlap=0, a2a_bytes=0)")
        self.topo, self.spec = topo, spec
        self.place = np.asarray(place, dtype=np.int64)
        if self.place.shape != (spec.pp, spec.dp, spec.tp):
            raise UsageError(f"placement shape must be {(spec.pp, spec.dp, spec.tp)}, not {self.place.shape}")
        self.p = params or TransportParams()
        self.fx = effects or Effects(topo.n_gpus, topo.n_hosts, topo.n_links)
        self.rng = np.random.default_rng(seed)
        self.router = router if router is not None else ECMPRouter(topo, seed)
        self.record = record
        self.colls = self._build()
        self._route()
        self.tel = Telemetry(n_gpus=topo.n_gpus, gpus_per_host=topo.gpus_per_host, place=self.place.copy(),
                             state_log_s=self.p.state_log_s,
                             conns={c.label: (c.src, c.dst, c.chan, c.K, c.chunk) for c in self.colls},
                             paths={c.label: c.paths[0] for c in self.colls}, window=self.p.window,
                             link_gpu=_link_gpu(topo))
        self.iter_end: list[float] = []
        self.now = 0.0
        self.drops: list = []  # (transfer start times, link, chunks dropped): the switch's error counters

    # ---- structure -------------------------------------------------------------------------------
    def _build(self) -> list[ConnSet]:
        s, pl, p = self.spec, self.place, self.p
        out = []
        if s.pp > 1 and s.act_bytes > 0:
            a = pl[:-1].reshape(-1)
            b = pl[1:].reshape(-1)
            out.append(p2p_conns("pp", np.concatenate([a, b]), np.concatenate([b, a]), s.act_bytes, s.channels, p,
                                 s.alpha_s))
        if s.tp > 1 and s.tp_bytes > 0:
            out.append(ring_conns("tp", pl.reshape(-1, s.tp), s.tp_bytes, s.channels, p, s.alpha_s))
        if s.dp > 1 and s.grad_bytes > 0:
            out.append(ring_conns("dp", pl.transpose(0, 2, 1).reshape(-1, s.dp), s.grad_bytes, s.channels, p,
                                  s.alpha_s))
        return out

    def _route(self) -> None:
        """Paths and max-min rates of every connection set in every epoch of dead links."""
        topo, fx = self.topo, self.fx
        self.epochs = fx.epochs()
        saved = self.router.alive.copy()
        for c in self.colls:
            c.paths, c.rate = [], []
            lat = topo.base_latency(c.src, c.dst) + c.alpha_s
            c.lat = lat
            for t in self.epochs:
                dead = fx.dead_links(float(t))
                self.router.alive = saved & ~dead
                paths = np.empty((c.n, 6), dtype=np.int64)
                for ch in np.unique(c.chan):
                    sel = c.chan == ch
                    # integer route keys: the ECMP hash of a str is salted per process
                    key = (1000 + ("pp", "tp", "dp").index(c.label), int(ch))
                    paths[sel] = self.router.route(0, key, c.src[sel], c.dst[sel])
                hop = paths >= 0
                inv = paths[hop]
                loc = np.nonzero(hop)[0]
                cap = topo.capacity * ~dead
                rate = _waterfill(inv, loc, cap, np.zeros(c.n, dtype=np.int64))
                c.paths.append(paths)
                c.rate.append(rate)
        self.router.alive = saved

    # ---- mechanics -------------------------------------------------------------------------------
    def _compute(self, start: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        """End of every rank's compute phase started at ``start`` (inf: never)."""
        fx, p = self.fx, self.p
        w = self.spec.compute_s
        host = ranks // self.topo.gpus_per_host
        end = start + w * (1 - p.host_frac) * _factor(fx.gpu_slow, ranks, start) \
            + w * p.host_frac * _factor(fx.cpu_slow, host, start)
        # a slow-down that starts (or ends) mid-compute stretches (or shrinks) what is left of it,
        # in proportion to the share of the compute it acts on
        for ivs, mem, share in ((fx.gpu_slow, ranks, 1 - p.host_frac), (fx.cpu_slow, host, p.host_frac)):
            for mask, on, off, v in ivs:
                mid = mask[mem] & (on > start) & (on < end)
                if mid.any():
                    end = np.where(mid, on + (end - on) * (1 + share * (v - 1)), end)
                back = mask[mem] & (off > start) & (off < end) & (on <= start)
                if back.any() and np.isfinite(off):
                    end = np.where(back, off + (end - off) / (1 + share * (v - 1)), end)
        stop = np.minimum(fx.die_at[ranks], fx.hang_at[ranks])
        return np.where(stop < end, np.inf, end)

    def _collective(self, c: ConnSet, enter: np.ndarray, horizon: float):
        """Run one collective: returns (exit time per GPU, G, T, D) (arrays (K, n))."""
        fx, p, W, K, d = self.fx, self.p, self.p.window, c.K, c.d
        n = c.n
        src, dst = c.src, c.dst
        e_src, e_dst = enter[src], enter[dst]
        stop_s = np.minimum(fx.die_at[src], fx.hang_at[src])
        stop_d = np.minimum(fx.die_at[dst], fx.hang_at[dst])
        die_s = fx.die_at[src]
        host_s = src // self.topo.gpus_per_host
        g0 = 3.0 * c.chunk / p.gpu_bw
        has_dep = c.dep >= 0
        depi = np.where(has_dep, c.dep, 0)
        has_succ = c.succ >= 0
        succi = np.where(has_succ, c.succ, 0)
        G = np.empty((K, n))
        T = np.empty((K, n))
        D = np.empty((K, n))
        free = np.full(n, -np.inf)
        multi = len(self.epochs) > 1
        ar = np.arange(n)

        def crossing(m):
            return np.stack([np.where(pp >= 0, m[np.maximum(pp, 0)], False).any(axis=1) for pp in c.paths])

        lossy = [(crossing(m), m, on, off, keep) for m, on, off, keep in fx.lossy]
        flaps = [(crossing(m)[0], on, off, per) for m, on, off, per in fx.flaps]
        svc_e = np.stack([np.divide(c.chunk, r, out=np.full(n, np.inf), where=r > 0) for r in c.rate])
        for k in range(K):
            base = e_src if k == 0 else G[k - 1]
            gs = g0 * _factor(fx.gpu_slow, src, base) if fx.gpu_slow else g0
            gk = base + gs
            if d and k >= d:
                gk = np.where(has_dep, np.maximum(gk, D[k - d, depi] + gs), gk)
            if k >= W:
                gk = np.maximum(gk, D[k - W])
            gk = np.where(gk >= stop_s, np.inf, gk)
            G[k] = gk
            if k < W:
                cr = e_dst
            else:
                j = k - W
                if d and j + d < K:
                    cons = np.where(has_succ, G[j + d, succi], D[j] + g0)
                else:
                    cons = D[j] + g0
                cr = np.where(cons >= stop_d, np.inf, cons)
            pk = np.maximum(gk, cr)
            if k:
                pk = np.maximum(pk, T[k - 1])
            cs = c.q * p.proxy_s
            if fx.cpu_slow:
                cf = _factor(fx.cpu_slow, host_s, pk)
                cs = c.q * (p.proxy_s * cf + p.sched_s * (cf - 1.0))
            tk = pk + cs
            tk = np.where(tk >= die_s, np.inf, tk)
            T[k] = tk
            start = np.maximum(tk, free)
            fin = np.isfinite(start)
            flapping = []
            for cross, on, off, per in flaps:  # the port is down for the first half of every period
                ok = cross & fin & (start >= on) & (start < off)
                if ok.any():
                    ph = np.where(ok, np.mod(np.where(ok, start, on) - on, per), per)
                    start = np.where(ok & (ph < per / 2), start + per / 2 - ph, start)
                    flapping.append((ok, on, per))
            if multi:
                ep = np.clip(np.searchsorted(self.epochs, np.where(fin, start, 0.0), side="right") - 1, 0,
                             len(self.epochs) - 1)
                svc = svc_e[ep, ar]
            else:
                ep = 0
                svc = svc_e[0]
            if lossy:
                keep = np.ones(n)
                acts = []
                for cr_e, m, on, off, kp in lossy:
                    act = (cr_e[ep, ar] if multi else cr_e[0]) & fin & (start >= on) & (start < off)
                    keep = np.where(act, keep * kp, keep)
                    acts.append((m, act))
                hit = keep < 1.0
                if hit.any():
                    # each of the q NCCL chunks in the slot is resent until it gets through
                    qn = int(round(c.q))
                    fails = np.zeros(n)
                    fails[hit] = self.rng.negative_binomial(qn, keep[hit])
                    svc = svc * (1.0 + fails / qn) + fails * p.nak_s
                    # each link's counter gets its share of the drops (by its drop probability)
                    # when several lossy links act on one connection at once
                    pr = np.zeros(n)
                    for (_m, act), (_c, _m2, _on, _off, kp) in zip(acts, lossy):
                        pr = pr + np.where(act, 1.0 - kp, 0.0)
                    for (m, act), (_c, _m2, _on, _off, kp) in zip(acts, lossy):
                        lost = act & (fails > 0)
                        if lost.any():
                            share = (1.0 - kp) / pr[lost]
                            self.drops.append((start[lost], np.full(int(lost.sum()), int(np.flatnonzero(m)[0])),
                                               fails[lost] * share))
            free = start + svc
            for ok, on, per in flapping:  # a transfer makes no progress while the port is down
                u = per / 2
                ph = np.mod(np.where(ok, start, on) - on, per)
                left = per - ph
                rem = svc - left
                more = ok & (rem > 0)
                if more.any():
                    extra = u + np.floor(np.maximum(rem, 0) / u * (1 - 1e-12)) * u
                    free = np.where(more, free + extra, free)
            D[k] = free + c.lat
        last_cons = np.where(D[K - 1] + g0 >= stop_d, np.inf, D[K - 1] + g0)
        exit_ = np.full(self.topo.n_gpus, -np.inf)
        np.maximum.at(exit_, src, D[K - 1])
        np.maximum.at(exit_, dst, last_cons)
        return exit_, G, T, D

    # ---- run -------------------------------------------------------------------------------------
    def run(self, iterations: int | None = None, until: float = np.inf) -> TransportSim:
        """Run ``iterations`` (default the spec's) or until simulated time ``until``."""
        ranks = self.place.ravel()
        n_it = self.spec.iterations if iterations is None else int(iterations)
        t = np.zeros(self.topo.n_gpus)
        tel, fx = self.tel, self.fx
        tel.horizon = float(until)
        tel.hw_events = self._hardware_events(until)
        for it in range(n_it):
            start = t[ranks]
            c_end = self._compute(start, ranks)
            x = t.copy()
            x[ranks] = c_end
            for seq, c in enumerate(self.colls):
                enter = x
                ex, G, T, D = self._collective(c, enter, until)
                nxt = enter.copy()
                touched = ex > -np.inf
                nxt[touched] = ex[touched]
                tel.log_collective(it, seq, c.label, ranks, enter[ranks], nxt[ranks], fx.die_at[ranks],
                                   (G, T, D) if self.record else None, until)
                x = nxt
            t = x
            end = t[ranks]
            fin = float(end.max())
            nan = bool((fx.nan_at[ranks] < c_end).any())
            if np.isfinite(fin) and fin <= until:
                self.iter_end.append(fin)
                tel.log_loss(it, fin, nan)
            if not np.isfinite(end.min()) or float(end.min()) > until or not np.isfinite(fin):
                break
        tel.set_drops(self.drops, until)
        if len(self.iter_end) == n_it:
            tel.finished = self.iter_end[-1]
        self.now = min(until, self.iter_end[-1] if self.iter_end and not np.isfinite(until) else until)
        return self

    def _hardware_events(self, until: float) -> list:
        """What host agents and hardware sensors record: a rank's process exiting, Xid on a GPU that
        died of a hardware error, port and switch link state changes, as (time, sensor, link or
        GPU id, state)."""
        fx, ev = self.fx, []
        for g in np.flatnonzero(np.isfinite(fx.die_at)):
            if fx.die_at[g] <= until and g in set(self.place.ravel().tolist()):
                ev.append((float(fx.die_at[g]), "proc", int(g), "exit"))  # the host agent sees the exit
                if fx.hw_visible[g]:
                    ev.append((float(fx.die_at[g]), "xid", int(g), "error"))
        for m, on, off, _v in fx.down:
            for lk in np.flatnonzero(m):
                if on <= until:
                    ev.append((float(on), "link", int(lk), "down"))
                if np.isfinite(off) and off <= until:
                    ev.append((float(off), "link", int(lk), "up"))
        for m, on, off, per in fx.flaps:
            t = on
            while t < min(off, until):
                for lk in np.flatnonzero(m):
                    ev.append((float(t), "link", int(lk), "down"))
                    if t + per / 2 <= until:
                        ev.append((float(t + per / 2), "link", int(lk), "up"))
                t += per
        ev.sort()
        return ev

    @property
    def iteration_times(self) -> np.ndarray:
        return np.diff(np.array([0.0, *self.iter_end]))

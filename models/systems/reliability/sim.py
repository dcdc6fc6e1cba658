"""A fault-injecting, telemetry-recording subclass of the flow-level cluster simulator.

:class:`FaultySimulator` extends :class:`hwcosim.models.systems.cluster.engine.Simulator` (which it does not
modify) in three ways:

1. **Per-rank compute.** The base engine runs one compute step per job; here every rank computes
   ``compute_s * slow[rank]`` and the following collective starts when the slowest rank joins
   (bulk-synchronous training: a collective cannot progress before every member has posted it).
   A stopped or hung rank never joins, so the job stalls, as it does in NCCL.
2. **Fault injection** (:meth:`FaultySimulator.inject`) of every :mod:`~models.systems.reliability.faults`
   kind at its onset time, with automatic revert after ``duration``: link faults change link
   capacities (ECMP rehashes around dead links through the router, as in the base engine).
3. **Telemetry** (:mod:`~models.systems.reliability.telemetry`): per-rank collective timestamps, per-flow
   Mycroft counters, node inspection, training signals (NaN loss).
"""

from __future__ import annotations

import heapq

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.cluster.engine import Simulator
from hwcosim.models.systems.cluster.job import Compute
from hwcosim.models.systems.cluster.topology import LinkKind, Topology

from .faults import Fault, FaultKind
from .telemetry import CollectiveRecord, Telemetry

__all__ = ["FaultySimulator", "gpu_links", "agg_switch_links"]


def gpu_links(topo: Topology, g: int, up_only: bool = False) -> np.ndarray:
    """Link ids of GPU ``g``'s NVLink and NIC ports (``up_only``: only the sending direction)."""
    p = topo.nic_ports
    nu, nd = topo.link_block(LinkKind.NVL_UP).start, topo.link_block(LinkKind.NVL_DN).start
    pu, pd = topo.link_block(LinkKind.PORT_UP).start, topo.link_block(LinkKind.PORT_DN).start
    up = [nu + g, *(pu + g * p + np.arange(p)).tolist()]
    if up_only:
        return np.array(up, dtype=np.int64)
    return np.array(up + [nd + g, *(pd + g * p + np.arange(p)).tolist()], dtype=np.int64)


def nic_port_links(topo: Topology, g: int, port: int | None = None) -> np.ndarray:
    """Up and down links of one port (or all ports) of GPU ``g``'s NIC."""
    p = topo.nic_ports
    ports = np.arange(p) if port is None else np.array([port % p])
    pu, pd = topo.link_block(LinkKind.PORT_UP).start, topo.link_block(LinkKind.PORT_DN).start
    return np.concatenate([pu + g * p + ports, pd + g * p + ports]).astype(np.int64)


def agg_switch_links(topo: Topology, sw: int) -> np.ndarray:
    """Every link of aggregation switch ``sw = pod * aggs_per_pod + a``."""
    A, L1, C, L2 = topo.aggs_per_pod, topo.tor_lanes, topo.cores_per_plane, topo.core_lanes
    pod, a = divmod(int(sw), A)
    tors = np.flatnonzero(topo.tor_pod == pod)
    tor_idx = ((tors[:, None] * A + a) * L1 + np.arange(L1)).ravel()
    agg_idx = (((pod * A + a) * C + np.arange(C))[:, None] * L2 + np.arange(L2)).ravel()
    return np.concatenate([topo.link_block(LinkKind.TOR_UP).start + tor_idx,
                           topo.link_block(LinkKind.TOR_DN).start + tor_idx,
                           topo.link_block(LinkKind.AGG_UP).start + agg_idx,
                           topo.link_block(LinkKind.AGG_DN).start + agg_idx]).astype(np.int64)


class FaultySimulator(Simulator):
    """The cluster simulator with per-rank compute, fault injection and telemetry.

    Parameters
    ----------
    topo, router, seed
        As :class:`~models.systems.cluster.engine.Simulator`.

    Attributes
    ----------
    slow : ndarray, shape (gpus,)
        Compute slow-down factor of every GPU (1 = healthy).
    stopped, hung, nan : ndarray of bool, shape (gpus,)
        Fail-stopped, hung, producing NaN.
    telemetry : Telemetry
        What the monitors may read.
    faults : list of Fault
        Every injected fault (the ground truth the detectors are scored against).
    stalls : dict
        job id -> time its progress stopped (a rank never joined a collective).
    """

    def __init__(self, topo: Topology, router=None, seed: int = 0):
        super().__init__(topo, router, seed)
        g, n_l = topo.n_gpus, topo.n_links
        self.slow = np.ones(g)
        self.stopped = np.zeros(g, dtype=bool)
        self.hung = np.zeros(g, dtype=bool)
        self.nan = np.zeros(g, dtype=bool)
        self._dead = np.zeros(n_l, dtype=np.int64)
        self._scale = np.ones(n_l)
        self.telemetry = Telemetry(topo)
        self.faults: list[Fault] = []
        self.stalls: dict[int, float] = {}
        self._enter: dict[int, np.ndarray] = {}
        self._open: dict[tuple, CollectiveRecord] = {}

    # ---- faults ------------------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        """Schedule ``fault`` at ``fault.t`` (and its revert at ``t + duration`` if finite)."""
        gpu_kinds = (FaultKind.GPU_FAIL, FaultKind.GPU_SLOW, FaultKind.NIC_DOWN, FaultKind.NIC_FLAP, FaultKind.NAN,
                     FaultKind.HANG)
        if fault.kind in gpu_kinds and not 0 <= fault.target < self.topo.n_gpus:
            raise UsageError(f"{fault.kind} target {fault.target} is not a GPU id of this topology")
        if fault.kind == FaultKind.CPU_OVERLOAD and not 0 <= fault.target < self.topo.n_hosts:
            raise UsageError(f"cpu_overload target {fault.target} is not a host id of this topology")
        if fault.kind in (FaultKind.LINK_LOSSY,) and not 0 <= fault.target < self.topo.n_links:
            raise UsageError(f"link_lossy target {fault.target} is not a link id of this topology")
        if fault.kind == FaultKind.SWITCH_FAIL and not 0 <= fault.target < self.topo.n_pods * self.topo.aggs_per_pod:
            raise UsageError(f"switch_fail target {fault.target} is not an aggregation switch id")
        self.faults.append(fault)
        self._push_first(fault.t, self._apply, fault, +1)
        if np.isfinite(fault.duration) and fault.kind != FaultKind.NIC_FLAP:
            self._push_first(fault.t + fault.duration, self._apply, fault, -1)

    def _push_first(self, t: float, fn, *args) -> None:
        """Schedule ahead of every other event at the same time (a fault at t acts on work starting at t)."""
        heapq.heappush(self._heap, (t, next(self._seq) - (1 << 62), fn, args))

    def _links(self, links: np.ndarray, dead: int = 0, scale: float = 1.0) -> None:
        self._dead[links] += dead
        self._scale[links] *= scale
        cap = self.topo.capacity[links] * self._scale[links] * (self._dead[links] == 0)
        self.net.set_capacity(links, cap)
        self.router.alive[links] = self._dead[links] == 0
        for sid, paths in self.router.on_link_change(self).items():
            if sid in self.net:
                self.net.reroute(sid, paths)
                self._streams[sid].paths = paths

    def _apply(self, f: Fault, sign: int) -> None:
        t, k = self.topo, f.kind
        self.telemetry.fault_log.append((self.now, f.fid, "on" if sign > 0 else "off"))
        if k == FaultKind.GPU_FAIL:
            self.stopped[f.target] = sign > 0
            self._links(gpu_links(t, f.target), dead=sign)
        elif k == FaultKind.HANG:
            self.hung[f.target] = sign > 0
            self._links(gpu_links(t, f.target, up_only=True), dead=sign)
        elif k == FaultKind.GPU_SLOW:
            self.slow[f.target] *= f.severity ** sign
        elif k == FaultKind.CPU_OVERLOAD:
            g = np.arange(f.target * t.gpus_per_host, (f.target + 1) * t.gpus_per_host)
            self.slow[g] *= f.severity ** sign
        elif k == FaultKind.NIC_DOWN:
            self._links(nic_port_links(t, f.target), dead=sign)
        elif k == FaultKind.NIC_FLAP:
            self._flap(f, down=True)
            return
        elif k == FaultKind.LINK_LOSSY:
            self._links(np.array([f.target]), scale=f.severity ** sign)
        elif k == FaultKind.SWITCH_FAIL:
            self._links(agg_switch_links(t, f.target), dead=sign)
        elif k == FaultKind.NAN:
            self.nan[f.target] = sign > 0

    def _flap(self, f: Fault, down: bool) -> None:
        links = nic_port_links(self.topo, f.target, port=0)
        end = f.t + f.duration
        if down and self.now < end:
            self._links(links, dead=+1)
            self._push(min(self.now + f.severity / 2, end), self._flap, f, False)
        elif not down:
            self._links(links, dead=-1)
            if self.now + f.severity / 2 < end:
                self._push(self.now + f.severity / 2, self._flap, f, True)

    # ---- per-rank compute and telemetry ------------------------------------------------------
    def _start_step(self, jid: int, it: int, k: int) -> None:
        rec = self.jobs[jid]
        steps = self._steps[jid]
        if k == len(steps):
            rec.iter_end.append(self.now)
            ranks = rec.place.ravel()
            self.telemetry.iteration(jid, it, self.now, bool(self.nan[ranks].any()))
            if it + 1 >= rec.spec.iterations:
                rec.finished = self.now
                return
            it, k = it + 1, 0
        step = steps[k]
        if isinstance(step, Compute):
            self._step_started[jid] = self.now
            ranks = rec.place.ravel()
            dur = step.seconds * self.slow[ranks]
            stuck = self.stopped[ranks] | self.hung[ranks]
            self._enter[jid] = np.where(stuck, np.inf, self.now + dur)
            rec.compute_s += step.seconds
            if stuck.any():
                self._stall(jid, it, k)
                return
            rec.compute_until = self.now + float(dur.max())
            self._push(rec.compute_until, self._compute_done, jid, it, k)
            return
        ranks = rec.place.ravel()
        enter = self._enter.pop(jid, None)
        if enter is None:
            enter = np.full(ranks.size, self.now)
        r = CollectiveRecord(jid, it, k, step.label, ranks, enter, self.now)
        self.telemetry.collectives.append(r)
        self._open[(jid, it, k)] = r
        n_before = set(self._streams)
        super()._start_step(jid, it, k)
        conns = [(i.src, i.dst, i.paths) for sid, i in self._streams.items() if sid not in n_before]
        if conns:
            self.telemetry.connections[(jid, k)] = conns

    def _compute_done(self, jid: int, it: int, k: int) -> None:
        ranks = self.jobs[jid].place.ravel()
        stuck = self.stopped[ranks] | self.hung[ranks]
        if stuck.any():  # a rank died or hung during compute: it never joins the collective
            self._enter[jid][stuck] = np.inf
            self._stall(jid, it, k)
            return
        self._start_step(jid, it, k + 1)

    def _stall(self, jid: int, it: int, k: int) -> None:
        """A rank will never join step ``k + 1``: the healthy ranks' agents still log their entry."""
        self.stalls.setdefault(jid, self.now)
        steps = self._steps[jid]
        if k + 1 < len(steps):
            ranks = self.jobs[jid].place.ravel()
            r = CollectiveRecord(jid, it, k + 1, steps[k + 1].label, ranks, self._enter.pop(jid), float("nan"))
            self.telemetry.collectives.append(r)

    def _coll_done(self, jid: int, it: int, k: int) -> None:
        key = (jid, it, k)
        last = self._pending_colls.get(key) == 1
        if last and key in self._open:
            self._open.pop(key).t_end = self.now
        super()._coll_done(jid, it, k)

    # ---- read-outs ---------------------------------------------------------------------------
    def stream_progress(self) -> list[tuple]:
        """(stream id, StreamInfo, bytes done, bytes total, rate) of every active stream.

        Reads the flow network's per-stream state (``FlowNetwork`` keeps it private; we only read).
        """
        net = self.net
        rates = net.rates()
        net._sync()  # noqa: SLF001 - write the vectorised remaining bytes back before reading them
        out = []
        for sid, info in self._streams.items():
            size = net._size[sid]  # noqa: SLF001
            out.append((sid, info, size - net._remaining[sid], size, rates.get(sid, 0.0)))  # noqa: SLF001
        return out

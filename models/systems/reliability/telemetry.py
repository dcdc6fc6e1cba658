"""Telemetry that the reliability systems read, with a stated cost per sample.

Three sources, one per paper:

- **Per-rank collective timestamps** (C4D, Dong et al., HPCA 2025): for every collective step, the
  time each rank posted it (``enter``) and the time it completed (``t_end``; NaN while open).
- **Per-flow counters** (Mycroft, SOSP 2025): for every flow (QP) of every open collective,
  chunk counters GPU_ready ``G``, RDMA_transmitted ``T``, RDMA_done ``D``, ``stuck_time`` and
  ``total_chunks``, with metadata (job, step, src, dst). The flow-level engine moves a stream's
  bytes at one rate, so ``D`` is the stream's progress in chunks; ``G`` and ``T`` are modelled
  from it and the fault state of the endpoints (our model of what the NCCL proxy would show):
  see :func:`flow_counters` for the rules (NCCL posts ``w`` chunks ahead; a dead sender makes
  nothing ready; a dead path leaves posted chunks undone; a lagging host posts late).
- **Node inspection** (ByteRobust, SOSP 2025): per-host checks (GPU via DCGM/Xid, NIC port state,
  fabric links, host CPU load), each returning the faults it can see directly.

Costs are ours (the papers give only Mycroft's 100 ms state-log period and 512 MB ring per host,
and ByteRobust's once-per-second inspection): :data:`COSTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.systems.cluster.topology import Topology

from .faults import FaultKind

__all__ = ["CollectiveRecord", "Telemetry", "flow_counters", "inspect_nodes", "COSTS", "FlowCounters"]

#: Cost per sample (ours; order-of-magnitude engineering estimates, stated so reports can add them).
COSTS = {
    "collective_timestamp": {"bytes": 32, "cpu_us": 0.5, "note": "per rank per collective (C4D agent)"},
    "flow_state_log": {"bytes": 96, "cpu_us": 1.0, "period_s": 0.1,
                       "note": "per flow per 100 ms state log (Mycroft; 512 MB ring per host)"},
    "completion_log": {"bytes": 64, "cpu_us": 0.5, "note": "per rank per collective (Mycroft)"},
    "inspection": {"bytes": 256, "cpu_us": 2000.0, "period_s": 1.0,
                   "note": "per host per second: DCGM, Xid, NIC, PCIe (ByteRobust)"},
}


@dataclass
class CollectiveRecord:
    """Timestamps of one collective step of one job.

    Attributes
    ----------
    job, it, step : int
    label : str
        ``dp``, ``pp`` or ``tp``.
    ranks : ndarray of int, shape (n,)
        GPU ids of the job (Megatron order).
    enter : ndarray of float, shape (n,)
        When each rank posted the collective (inf: never).
    t_start : float
        When the step began on the network (the last rank joined).
    t_end : float
        Completion (NaN while open).
    """

    job: int
    it: int
    step: int
    label: str
    ranks: np.ndarray
    enter: np.ndarray
    t_start: float
    t_end: float = float("nan")


@dataclass
class Telemetry:
    """Telemetry store of a :class:`~models.systems.reliability.sim.FaultySimulator`."""

    topo: Topology
    collectives: list = field(default_factory=list)
    losses: list = field(default_factory=list)  # (job, it, t, is_nan)
    fault_log: list = field(default_factory=list)  # (t, fault id, "on"/"off")
    connections: dict = field(default_factory=dict)  # (job, step) -> [(src, dst, paths)] last seen

    def latency_matrix(self, job: int, n_gpus: int, capacity, chunk_bytes: float = 1 << 20) -> np.ndarray:
        """C4D's rank x rank matrix: seconds per chunk on every connection of ``job`` (inf: dead).

        A connection's latency is ``chunk / r`` with ``r`` the rate its path sustains on its own,
        ``min over hops of capacity / (paths of the job on that hop)`` (what a probe of that
        connection would see); NaN where two GPUs do not talk.
        """
        m = np.full((n_gpus, n_gpus), np.nan)
        cap = np.asarray(capacity, dtype=float)
        allp = [(s, d, p) for (j, _k), conns in self.connections.items() if j == job for s, d, p in conns]
        if not allp:
            return m
        load = np.zeros(cap.size)
        for _s, _d, p in allp:
            np.add.at(load, p[p >= 0], 1.0)
        for s, d, p in allp:
            for i in range(s.size):
                hops = p[i][p[i] >= 0]
                r = float(np.min(cap[hops] / np.maximum(load[hops], 1.0)))
                v = chunk_bytes / r if r > 0 else np.inf
                m[s[i], d[i]] = v if np.isnan(m[s[i], d[i]]) else max(m[s[i], d[i]], v)
        return m

    def iteration(self, job: int, it: int, t: float, is_nan: bool) -> None:
        self.losses.append((job, it, t, is_nan))

    def samples_cost(self) -> dict:
        """Bytes and CPU microseconds spent on the collective timestamps recorded so far."""
        n = sum(r.ranks.size for r in self.collectives)
        c = COSTS["collective_timestamp"]
        return {"timestamps": n, "bytes": n * c["bytes"], "cpu_s": n * c["cpu_us"] * 1e-6}


@dataclass
class FlowCounters:
    """Mycroft counters of every flow of every open collective at one instant (arrays, shape (f,))."""

    t: float
    job: np.ndarray
    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    G: np.ndarray
    T: np.ndarray
    D: np.ndarray
    total: np.ndarray
    rate: np.ndarray  # chunks per second now


def flow_counters(sim, chunk_bytes: float = 1 << 20, window: int = 8) -> FlowCounters:
    """Snapshot of Mycroft's per-flow counters (see the module docstring for the model).

    ``D`` is the stream's progress in chunks. A flowing stream has ``G = T = D + w`` (``T = D +
    w // 2`` when the sender's host lags: slowed GPU or overloaded CPU). In a stalled stream: a
    flow whose path has a dead hop and whose sender is alive has posted ``w`` chunks that never
    complete (``G = T = D + w``); a flow whose sender stopped or hung has nothing ready
    (``G = T = D``); any other flow finished the ``w`` chunks it had and idles
    (``G = T = D + w`` with ``D`` advanced by ``w``: its receiver got them).
    """
    rows = []
    cap = sim.net.capacity
    for _sid, info, done, total, rate in sim.stream_progress():
        n = info.src.size
        jid, it, k, _ci = info.coll
        d = np.full(n, np.floor(done / chunk_bytes))
        tot = np.full(n, np.ceil(total / chunk_bytes))
        dead_src = sim.stopped[info.src] | sim.hung[info.src]
        if rate > 0:
            g = np.minimum(d + window, tot)
            lag = sim.slow[info.src] > 1.0
            tt = np.where(lag, np.minimum(d + window // 2, tot), g)
        else:
            paths = info.paths
            dead_path = np.where(paths >= 0, cap[np.maximum(paths, 0)] <= 0, False).any(axis=1)
            idle = ~dead_path & ~dead_src
            d = np.where(idle, np.minimum(d + window, tot), d)
            g = np.where(dead_src, d, np.minimum(d + window, tot))
            g = np.where(idle, d, g)
            tt = g
        rows.append((np.full(n, jid), np.full(n, k), info.src, info.dst, g, tt, d, tot, np.full(n, rate / chunk_bytes)))
    if not rows:
        z = np.zeros(0)
        return FlowCounters(sim.now, z, z, z, z, z, z, z, z, z)
    cols = [np.concatenate(c) for c in zip(*rows)]
    return FlowCounters(sim.now, *cols)


def inspect_nodes(sim, hosts=None) -> list[tuple[int, str, int]]:
    """Run ByteRobust-style node inspection now: ``[(fault id, check, host)]`` it can see.

    Checks: ``dcgm/xid`` sees explicit GPU failures; ``nic`` sees NIC ports down (including a
    flapping port while it is down); ``switch`` sees dead aggregation switches; ``link`` sees a
    link whose capacity fell below half (error counters). Hangs, NaN, CPU overload and GPU
    slow-down are invisible to inspection (they need training signals or stack traces).
    """
    active = {}
    for _t, fid, state in sim.telemetry.fault_log:
        if state == "on":
            active[fid] = True
        else:
            active.pop(fid, None)
    out = []
    topo = sim.topo
    for f in sim.faults:
        if f.fid not in active:
            continue
        host = f.target // topo.gpus_per_host if f.kind not in (FaultKind.LINK_LOSSY, FaultKind.SWITCH_FAIL,
                                                                FaultKind.CPU_OVERLOAD) else -1
        if hosts is not None and host >= 0 and host not in hosts:
            continue
        if f.kind == FaultKind.GPU_FAIL and f.explicit:
            out.append((f.fid, "dcgm/xid", host))
        elif f.kind in (FaultKind.NIC_DOWN, FaultKind.NIC_FLAP):
            out.append((f.fid, "nic", host))
        elif f.kind == FaultKind.SWITCH_FAIL:
            out.append((f.fid, "switch", -1))
        elif f.kind == FaultKind.LINK_LOSSY and f.severity < 0.5:
            out.append((f.fid, "link", -1))
    return out

"""Collective timestamps of the flow-level :class:`~models.systems.reliability.sim.FaultySimulator`, and
the stated cost per telemetry sample.

The detectors (C4D, Mycroft, ByteRobust's monitors) no longer read this: they read the
:class:`~models.systems.cluster.telemetry.Telemetry` that the chunk-level transport
(:mod:`hwcosim.models.systems.cluster.transport`) writes, whose counters are produced by the mechanics. The
per-flow counters that used to be synthesised here from the injected fault state, and the node
inspection that listed the injected faults, are gone (issue 24: a detector must not read the
injector). The flow-level simulator keeps its per-rank collective timestamps for its own tests
and for the network slow-down calibration.

Costs are ours (the papers give only Mycroft's 100 ms state-log period and 512 MB ring per host,
and ByteRobust's once-per-second inspection): :data:`COSTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.systems.cluster.topology import Topology

__all__ = ["CollectiveRecord", "Telemetry", "COSTS"]

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

"""Routing policies: how a stream's flows are mapped to paths, and at which priority.

A router is asked once per stream start (:meth:`Router.route`) with a stable ``route_key``
(job, step, collective, channel): collective connections (NCCL QPs) are long-lived, so the same
key must get the same paths in every iteration unless the router re-plans.

:class:`ECMPRouter` is the baseline of C4 and Crux: per-flow hashing of the flow key over all
equal-cost choices (bond port, aggregation switch, core, parallel lane), oblivious to load. When a
link fails, flows whose path uses it are re-hashed among the surviving paths (the next hop is
removed from the ECMP group), flows on healthy paths stay.

:class:`NCCLPortECMPRouter` is the fairer baseline of the C4P study: NCCL binds every channel's
connection (QP) to one NIC port deterministically, channel ``c`` on port ``c mod P`` at both ends
(round-robin over the GPU's ports, as NCCL assigns channels to NICs), so the bond ports of a NIC
never collide; only the switch hops are hashed.
"""

from __future__ import annotations

import numpy as np

from .topology import Topology, hash_choices

__all__ = ["Router", "ECMPRouter", "NCCLPortECMPRouter"]


class Router:
    """Base class: subclasses implement :meth:`route`; :meth:`priority` defaults to 0."""

    def __init__(self, topo: Topology, seed: int = 0):
        self.topo = topo
        self.seed = int(seed)
        self.alive = np.ones(topo.n_links, dtype=bool)

    def route(self, job_id: int, route_key: tuple, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def priority(self, job_id: int) -> int:
        return 0

    def on_job_start(self, sim, job_id: int) -> None:
        """Hook: a job was added (planners may precompute)."""

    def on_link_change(self, sim) -> dict[int, np.ndarray]:
        """Hook after :attr:`alive` changed; returns {stream id: new paths} for active streams."""
        return {}

    def usable(self, paths: np.ndarray) -> np.ndarray:
        """Row mask: every hop of the path is alive."""
        ok = np.where(paths >= 0, self.alive[np.maximum(paths, 0)], True)
        return ok.all(axis=1)


class ECMPRouter(Router):
    """Load-oblivious per-flow ECMP hashing (keys: job, src, dst, route key).

    The first-choice (salt 0) paths of a connection are cached: a collective re-opens the same
    connections every iteration, and hashing them again dominated the run time of large jobs.
    A cached entry is used only while every hop is alive, which is exactly when :meth:`route`
    would return it, so results are identical with and without the cache.
    """

    def __init__(self, topo: Topology, seed: int = 0):
        super().__init__(topo, seed)
        self._cache: dict[tuple, np.ndarray] = {}

    def _hashed(self, job_id, route_key, src, dst, salt: int) -> np.ndarray:
        n = src.size
        kh = abs(hash(route_key)) % (1 << 61)
        keys = np.column_stack([np.full(n, job_id), src, dst, np.full(n, kh), np.full(n, salt)])
        return self.topo.paths(src, dst, hash_choices(keys, self.seed))

    def route(self, job_id, route_key, src, dst):
        ck = (job_id, route_key, src.tobytes(), dst.tobytes())
        paths = self._cache.get(ck)
        if paths is None:
            paths = self._hashed(job_id, route_key, src, dst, 0)
            if len(self._cache) < 1 << 20:
                self._cache[ck] = paths.copy()
        else:
            paths = paths.copy()
        bad = ~self.usable(paths)
        salt = 1
        while bad.any() and salt < 64:
            paths[bad] = self._hashed(job_id, route_key, src[bad], dst[bad], salt)
            bad = ~self.usable(paths)
            salt += 1
        return paths

    def on_link_change(self, sim):
        out = {}
        for sid, info in sim.active_streams().items():
            p = info.paths
            if not self.usable(p).all():
                out[sid] = self.route(info.job_id, info.route_key, info.src, info.dst)
        return out


class NCCLPortECMPRouter(ECMPRouter):
    """ECMP on the switch hops, NCCL's deterministic channel-to-port binding on the NIC hops.

    The channel is the last element of the route key (the stream key of
    :mod:`hwcosim.models.systems.cluster.collectives`); its connection leaves the source GPU on
    port ``channel mod P`` and enters the destination GPU on the same port index. Re-hashing after
    a failure (salt > 0) re-draws every hop, as a bond fails over to its surviving port.
    """

    def _hashed(self, job_id, route_key, src, dst, salt: int) -> np.ndarray:
        if salt:
            return super()._hashed(job_id, route_key, src, dst, salt)
        n = src.size
        kh = abs(hash(route_key)) % (1 << 61)
        keys = np.column_stack([np.full(n, job_id), src, dst, np.full(n, kh), np.full(n, salt)])
        ch = hash_choices(keys, self.seed)
        last = route_key[-1] if isinstance(route_key, tuple) and route_key else 0
        port = int(last) % self.topo.nic_ports if isinstance(last, (int, np.integer)) else 0
        ch[:, 0] = port
        ch[:, 1] = port
        return self.topo.paths(src, dst, ch)

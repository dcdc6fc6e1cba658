"""Replays as actions on the machines: a group of machines re-runs a slice of the job on the
chunk-level transport and the caller learns only what that run's telemetry shows.

ByteRobust's dual-phase replay (:func:`~models.systems.reliability.byterobust.dual_phase_replay`)
asks, for each candidate group of machines, "does the replay on these machines reproduce the
failure?". Here that question is answered by running a small data-parallel job on exactly those
machines (:class:`~models.systems.cluster.transport.TransportSim`) with the machines' physical state
(:class:`~models.systems.cluster.transport.Effects`: the *world*, built once from the faults when
the run starts) and reading its :class:`~models.systems.cluster.telemetry.Telemetry`: a NaN loss,
a rank that never completes, or no completed iteration is a failed replay. The localiser holds a
:class:`MachineReplay` handle, never the fault list or the effects.

The replayed slice (ours): every GPU of the group in one DP ring on a one-ToR Clos, 20 ms of
compute and a 4 MB all-reduce per iteration, ``iterations`` iterations from the last checkpoint
(the data that produced the failure is replayed, so a machine that corrupts gradients does it
again).
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["MachineReplay"]

_CACHE: dict = {}  # the replayed run is deterministic in the group's size and local state


class MachineReplay:
    """Replay handle over the machines of a cluster.

    Parameters
    ----------
    world : Effects
        The machines' physical state (per-GPU death, hang, NaN and slow-down; the transport's own
        representation). Only the state in force at ``at`` matters: a defect that set in before
        the replay is there for the whole replay.
    gpus_per_host : int
    at : float
        Wall time of the replay (after the failure was seen).
    iterations : int
        Iterations the replayed slice runs.
    """

    def __init__(self, world, gpus_per_host: int, at: float, iterations: int = 2):
        if not (isinstance(gpus_per_host, (int, np.integer)) and gpus_per_host >= 1):
            raise UsageError(f"gpus_per_host must be an integer >= 1, not {gpus_per_host!r}")
        self._world = world
        self.gph = int(gpus_per_host)
        self.at = float(at)
        self.iterations = int(iterations)
        self.calls: list[tuple[int, ...]] = []  # the groups replayed (what an operator's log shows)

    @property
    def hosts(self) -> int:
        return self._world.n_gpus // self.gph

    def __call__(self, hosts) -> bool:
        """Replay on the machines ``hosts``; True iff the replay's telemetry shows a failure."""
        from hwcosim.models.systems.cluster.job import JobSpec, placement
        from hwcosim.models.systems.cluster.topology import clos
        from hwcosim.models.systems.cluster.transport import Effects, TransportSim

        h = np.unique(np.asarray(list(hosts), dtype=np.int64))
        if h.size == 0 or h.min() < 0 or h.max() >= self.hosts:
            raise UsageError(f"replay hosts must be a non-empty subset of [0, {self.hosts})")
        self.calls.append(tuple(h.tolist()))
        gpus = (h[:, None] * self.gph + np.arange(self.gph)).ravel()
        n = gpus.size
        topo = clos(1, 1, int(h.size), gpus_per_host=self.gph, nic_ports=1)
        w = self._world
        fx = Effects(topo.n_gpus, topo.n_hosts, topo.n_links)
        for name in ("die_at", "hang_at", "nan_at"):  # a defect present at the replay is there from its start
            getattr(fx, name)[:] = np.where(getattr(w, name)[gpus] <= self.at, 0.0, np.inf)
        fx.hw_visible[:] = w.hw_visible[gpus]
        for mask, on, off, v in w.gpu_slow:
            m = mask[gpus]
            if m.any() and on <= self.at < off:
                fx.gpu_slow.append((m, 0.0, np.inf, v))
        key = (int(h.size), self.gph, self.iterations,
               *(tuple(np.flatnonzero(np.isfinite(getattr(fx, a))).tolist()) for a in ("die_at", "hang_at", "nan_at")),
               tuple(np.flatnonzero(fx.hw_visible).tolist()),
               tuple((tuple(np.flatnonzero(m).tolist()), float(v)) for m, _a, _b, v in fx.gpu_slow))
        if key in _CACHE:
            return _CACHE[key]
        if n < 2:
            spec = JobSpec("replay", dp=1, compute_s=0.02, grad_bytes=0.0, iterations=self.iterations)
        else:
            spec = JobSpec("replay", dp=n, compute_s=0.02, grad_bytes=4e6, iterations=self.iterations)
        sim = TransportSim(topo, spec, placement(spec, np.arange(n)), fx, seed=0, record=False)
        horizon = 10.0 * self.iterations
        sim.run(until=horizon)
        losses = sim.tel.losses_until(horizon)
        _CACHE[key] = out = bool(len(losses) < self.iterations or any(nan for _i, _t, nan in losses))
        return out

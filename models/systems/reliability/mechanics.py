"""Faults as mechanics: the translation from a fault list to the transport model's :class:`Effects`.

This is the only place that reads fault kinds to drive the chunk-level transport
(:mod:`hwcosim.models.systems.cluster.transport`). What each kind does there:

=============  ========================================================================
kind           mechanics
=============  ========================================================================
gpu_fail       the rank's process dies at onset (kernel, proxy and loggers stop); a
               hardware error (``explicit``) also raises an Xid event
hang           the rank's GPU kernel stops at onset; the process keeps running and logging
gpu_slow       the rank's compute and per-chunk kernel time x ``severity``
cpu_overload   host share of compute x ``severity``; the host's proxies post every chunk
               ``sched_s * (severity - 1)`` later (waiting for a core)
nic_down       every port of the rank's NIC: capacity 0 (ECMP has no other path)
nic_flap       port 0 of the rank's NIC is down for the first half of every period
link_lossy     the link drops each chunk transmission with probability ``1 - severity``
switch_fail    every link of the aggregation switch: capacity 0 (ECMP re-hashes)
nan            the rank's gradients turn NaN at onset (losses after the next all-reduce)
=============  ========================================================================

Detectors never import this module: they read :class:`~models.systems.cluster.telemetry.Telemetry`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.cluster.topology import Topology
from hwcosim.models.systems.cluster.transport import Effects

from .faults import Fault, FaultKind
from .sim import agg_switch_links, nic_port_links

__all__ = ["effects_from_faults"]


def effects_from_faults(topo: Topology, faults: list[Fault]) -> Effects:
    """The :class:`Effects` of ``faults`` on ``topo``."""
    fx = Effects(topo.n_gpus, topo.n_hosts, topo.n_links)
    G, H, L = topo.n_gpus, topo.n_hosts, topo.n_links
    for f in faults:
        k, t, off = f.kind, float(f.t), float(f.t + f.duration)
        if k in (FaultKind.GPU_FAIL, FaultKind.HANG, FaultKind.GPU_SLOW, FaultKind.NIC_DOWN, FaultKind.NIC_FLAP,
                 FaultKind.NAN) and not 0 <= f.target < G:
            raise UsageError(f"{k} target {f.target} is not a GPU id of this topology")
        if k == FaultKind.GPU_FAIL:
            fx.die_at[f.target] = min(fx.die_at[f.target], t)
            fx.hw_visible[f.target] |= bool(f.explicit)
        elif k == FaultKind.HANG:
            fx.hang_at[f.target] = min(fx.hang_at[f.target], t)
        elif k == FaultKind.NAN:
            fx.nan_at[f.target] = min(fx.nan_at[f.target], t)
        elif k == FaultKind.GPU_SLOW:
            fx.gpu_slow.append((fx.mask(G, [f.target]), t, off, float(f.severity)))
        elif k == FaultKind.CPU_OVERLOAD:
            if not 0 <= f.target < H:
                raise UsageError(f"cpu_overload target {f.target} is not a host id of this topology")
            fx.cpu_slow.append((fx.mask(H, [f.target]), t, off, float(f.severity)))
        elif k == FaultKind.NIC_DOWN:
            fx.down.append((fx.mask(L, nic_port_links(topo, f.target)), t, off, None))
        elif k == FaultKind.NIC_FLAP:
            fx.flaps.append((fx.mask(L, nic_port_links(topo, f.target, port=0)), t, off, float(f.severity)))
        elif k == FaultKind.LINK_LOSSY:
            if not 0 <= f.target < L:
                raise UsageError(f"link_lossy target {f.target} is not a link id of this topology")
            fx.lossy.append((fx.mask(L, [f.target]), t, off, float(f.severity)))
        elif k == FaultKind.SWITCH_FAIL:
            if not 0 <= f.target < topo.n_pods * topo.aggs_per_pod:
                raise UsageError(f"switch_fail target {f.target} is not an aggregation switch id")
            fx.down.append((fx.mask(L, agg_switch_links(topo, f.target)), t, off, None))
    return fx


def run_job(topo, spec, place, faults, until: float, seed: int = 0, params=None, record: bool = True,
            route_seed: int | None = None, noise=None, noise_seed: int | None = None):
    """Run ``spec`` on the transport with ``faults`` up to ``until``; returns the simulator (its
    ``.tel`` is what detectors get). ``seed`` drives the random drops and the noise, ``route_seed``
    (default ``seed``) the ECMP hashing. ``noise``: a
    :class:`~models.systems.reliability.noise.NoiseParams` adds background events over the run
    (``sim.noise_events`` lists them, for scoring only; default none: no background at all), drawn
    with ``noise_seed`` (default ``seed``)."""
    from hwcosim.models.systems.cluster.routing import ECMPRouter
    from hwcosim.models.systems.cluster.transport import TransportSim

    router = ECMPRouter(topo, seed if route_seed is None else route_seed)
    fx = effects_from_faults(topo, faults)
    events = []
    if noise is not None:
        from .noise import add_noise

        if not np.isfinite(until):
            raise UsageError("a run with noise needs a finite horizon (until)")
        events = add_noise(fx, topo, noise, until, seed if noise_seed is None else noise_seed,
                           gpus=np.asarray(place).ravel())
    sim = TransportSim(topo, spec, place, fx, params=params, seed=seed, record=record, router=router)
    sim.noise_events = events
    return sim.run(until=until)


__all__ += ["run_job"]

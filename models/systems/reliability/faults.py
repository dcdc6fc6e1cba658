"""Seeded fault injection for the cluster simulator.

Fault kinds (:class:`FaultKind`) cover what the reliability papers see in production:

=============  ===================================================================  ==============
kind           effect in :class:`FaultySimulator` (flow level)                      symptom class
=============  ===================================================================  ==============
gpu_fail       the rank stops (compute never ends) and its NVLink/NIC links go to   fail-stop
               capacity 0 (CUDA error, Xid, "GPU lost")
gpu_slow       the rank's compute time is multiplied by ``severity`` (thermal       slow (compute)
               throttling, MFU decline)
cpu_overload   every rank of the host computes ``severity`` times slower            slow (compute)
               (data-loader / host CPU contention)
nic_down       every port of the rank's NIC goes to capacity 0                      hang (comm)
nic_flap       one port of the rank's NIC toggles down/up every ``period_s``        slow (comm)
link_lossy     one fabric link (ToR/agg uplink) keeps ``severity`` of its capacity   slow (comm)
               (packet loss -> retransmission goodput; or a link trained down)
switch_fail    one aggregation switch dies: its links go to 0, ECMP reroutes        slow (comm)
nan            the rank's loss becomes NaN at the next iteration end (training      silent (data)
               goes on; only a training-signal monitor sees it)
hang           the rank stops making progress: compute never ends and it stops      hang
               sending (its up-links go to 0); no hardware check fires
=============  ===================================================================  ==============

The default mix (:data:`BYTEROBUST_MIX`) is ByteRobust's published incident mix over 778,135
jobs (Wan et al., "Robust LLM Training Infrastructure at ByteDance", SOSP 2025, arXiv
2509.16293): CUDA error 36.1%, CPU overload 11.0%, CPU OOM 10.1%, job hang 9.9%, disk full 5.0%,
InfiniBand 2.9%, HDFS 2.0%, MFU decline 0.8%, NaN 0.3%. The mapping of their categories onto our
kinds is ours: CUDA error, CPU OOM, disk full and HDFS errors all kill the process -> ``gpu_fail``
(fail-stop; for the three non-GPU ones the hardware inspection does not see it, recorded by
``explicit=False`` in :data:`MIX_SOURCES`); InfiniBand 2.9% is split equally among ``nic_down``,
``nic_flap``, ``link_lossy`` and ``switch_fail``; MFU decline -> ``gpu_slow``. The listed
categories sum to 78.1%; the remaining 21.9% (not itemised in SPECS.md) is left out and the mix
renormalised. The rate is ours too: Meta's Llama 3 report (Dubey et al., 2024) counts 419
unexpected interruptions in 54 days on 16,384 GPUs, about 4.7e-4 per GPU-day, which is the
default :attr:`FaultMix.rate_per_gpu_day`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["FaultKind", "Fault", "FaultMix", "BYTEROBUST_MIX", "MIX_SOURCES", "sample_faults", "KINDS"]


class FaultKind:
    """Names of the fault kinds (strings, so they print and serialise as themselves)."""

    GPU_FAIL = "gpu_fail"
    GPU_SLOW = "gpu_slow"
    CPU_OVERLOAD = "cpu_overload"
    NIC_DOWN = "nic_down"
    NIC_FLAP = "nic_flap"
    LINK_LOSSY = "link_lossy"
    SWITCH_FAIL = "switch_fail"
    NAN = "nan"
    HANG = "hang"


KINDS = (FaultKind.GPU_FAIL, FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD, FaultKind.NIC_DOWN, FaultKind.NIC_FLAP,
         FaultKind.LINK_LOSSY, FaultKind.SWITCH_FAIL, FaultKind.NAN, FaultKind.HANG)

#: ByteRobust category -> (our kind, share %, seen by hardware inspection).
MIX_SOURCES = {
    "CUDA error": (FaultKind.GPU_FAIL, 36.1, True),
    "CPU overload": (FaultKind.CPU_OVERLOAD, 11.0, False),
    "CPU OOM": (FaultKind.GPU_FAIL, 10.1, False),
    "job hang": (FaultKind.HANG, 9.9, False),
    "disk full": (FaultKind.GPU_FAIL, 5.0, False),
    "InfiniBand/nic_down": (FaultKind.NIC_DOWN, 2.9 / 4, True),
    "InfiniBand/nic_flap": (FaultKind.NIC_FLAP, 2.9 / 4, True),
    "InfiniBand/link_lossy": (FaultKind.LINK_LOSSY, 2.9 / 4, True),
    "InfiniBand/switch_fail": (FaultKind.SWITCH_FAIL, 2.9 / 4, True),
    "HDFS": (FaultKind.GPU_FAIL, 2.0, False),
    "MFU decline": (FaultKind.GPU_SLOW, 0.8, False),
    "NaN": (FaultKind.NAN, 0.3, False),
}


def _mix_from_sources() -> dict[str, float]:
    w = dict.fromkeys(KINDS, 0.0)
    for kind, share, _ in MIX_SOURCES.values():
        w[kind] += share
    tot = sum(w.values())
    return {k: v / tot for k, v in w.items()}


BYTEROBUST_MIX = _mix_from_sources()


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Parameters
    ----------
    fid : int
        Id (index in the injected list).
    kind : str
        One of :data:`KINDS`.
    t : float
        Onset (seconds of simulated time).
    target : int
        GPU id (gpu_*, nic_*, nan, hang), host id (cpu_overload), link id (link_lossy) or
        aggregation switch id ``pod * aggs_per_pod + a`` (switch_fail).
    duration : float
        Seconds until it clears by itself (``inf``: until repaired).
    severity : float
        Slow-down factor (> 1) for gpu_slow / cpu_overload; remaining capacity fraction (0, 1)
        for link_lossy; flap period in seconds for nic_flap; unused otherwise.
    explicit : bool
        Whether hardware inspection (DCGM, Xid, NIC state) can see it directly.
    """

    fid: int
    kind: str
    t: float
    target: int
    duration: float = np.inf
    severity: float = 1.0
    explicit: bool = True

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UsageError(f"fault kind must be one of {KINDS}, not {self.kind!r}")
        if not self.t >= 0:
            raise UsageError(f"fault time must be >= 0, not {self.t!r}")
        if not self.duration > 0:
            raise UsageError(f"fault duration must be > 0, not {self.duration!r}")
        if self.kind in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD) and not self.severity > 1:
            raise UsageError(f"{self.kind} severity is a slow-down factor > 1, not {self.severity!r}")
        if self.kind == FaultKind.LINK_LOSSY and not 0 < self.severity < 1:
            raise UsageError(f"link_lossy severity is the kept capacity fraction in (0, 1), not {self.severity!r}")
        if self.kind == FaultKind.NIC_FLAP and not self.severity > 0:
            raise UsageError(f"nic_flap severity is the flap period in seconds (> 0), not {self.severity!r}")

    @property
    def stops(self) -> bool:
        """True for faults that stop the job (fail-stop and hangs), False for slow/silent ones."""
        return self.kind in (FaultKind.GPU_FAIL, FaultKind.NIC_DOWN, FaultKind.HANG)


@dataclass(frozen=True)
class FaultMix:
    """Rates and mix of injected faults.

    Parameters
    ----------
    rate_per_gpu_day : float
        Expected faults per GPU per day (default 4.7e-4, Llama 3's interruption rate; ours).
    weights : dict
        Kind -> relative weight (normalised); default :data:`BYTEROBUST_MIX`.
    slow_factor : tuple of float
        Range of the slow-down factor of gpu_slow / cpu_overload (uniform).
    lossy_keep : tuple of float
        Range of the capacity fraction a lossy link keeps.
    flap_period_s : float
        Period of a flapping port.
    transient_s : tuple of float
        Duration range of self-clearing faults (slow, lossy, flap, cpu_overload) and of a switch
        failure (until swapped); fail-stop, NIC down, hang and NaN last until the job acts.
    """

    rate_per_gpu_day: float = 4.7e-4
    weights: dict = field(default_factory=lambda: dict(BYTEROBUST_MIX))
    slow_factor: tuple = (1.5, 4.0)
    lossy_keep: tuple = (0.1, 0.5)
    flap_period_s: float = 2.0
    transient_s: tuple = (600.0, 7200.0)

    def __post_init__(self):
        if not self.rate_per_gpu_day >= 0:
            raise UsageError(f"rate_per_gpu_day must be >= 0, not {self.rate_per_gpu_day!r}")
        bad = set(self.weights) - set(KINDS)
        if bad:
            raise UsageError(f"unknown fault kinds {sorted(bad)}; known: {KINDS}")
        w = np.array([float(self.weights.get(k, 0.0)) for k in KINDS])
        if np.any(w < 0) or not w.sum() > 0:
            raise UsageError("fault weights must be >= 0 with a positive sum")
        if not (1 < self.slow_factor[0] <= self.slow_factor[1]):
            raise UsageError(f"slow_factor must be a range within (1, inf), not {self.slow_factor!r}")
        if not (0 < self.lossy_keep[0] <= self.lossy_keep[1] < 1):
            raise UsageError(f"lossy_keep must be a range within (0, 1), not {self.lossy_keep!r}")
        if not self.flap_period_s > 0:
            raise UsageError(f"flap_period_s must be > 0, not {self.flap_period_s!r}")
        if not (0 < self.transient_s[0] <= self.transient_s[1]):
            raise UsageError(f"transient_s must be a positive range, not {self.transient_s!r}")

    @property
    def probabilities(self) -> np.ndarray:
        """Probability of every kind, in :data:`KINDS` order."""
        w = np.array([float(self.weights.get(k, 0.0)) for k in KINDS])
        return w / w.sum()


_EXPLICIT_SHARE = dict.fromkeys(KINDS, 0.0)
_TOTAL_SHARE = dict.fromkeys(KINDS, 0.0)
for _kind, _share, _expl in MIX_SOURCES.values():
    _EXPLICIT_SHARE[_kind] += _share if _expl else 0.0
    _TOTAL_SHARE[_kind] += _share


def sample_faults(mix: FaultMix, n_gpus: int, horizon_s: float, seed: int, gpus_per_host: int = 8,
                  n_fabric_links: int = 0, n_agg_switches: int = 0, fabric_link_offset: int = 0,
                  n: int | None = None) -> list[Fault]:
    """Draw a Poisson stream of faults on ``n_gpus`` GPUs over ``[0, horizon_s)``.

    Parameters
    ----------
    mix : FaultMix
    n_gpus : int
        GPUs of the job (targets are drawn uniformly among them).
    horizon_s : float
        Length of the window (seconds).
    seed : int
        Seed: the same arguments give the same list.
    gpus_per_host : int
        For cpu_overload targets (host ids).
    n_fabric_links, fabric_link_offset : int
        link_lossy targets are ``fabric_link_offset + U{0..n_fabric_links-1}`` (0: target -1,
        event-level runs).
    n_agg_switches : int
        switch_fail targets (0: target -1).
    n : int, optional
        Force the number of faults instead of drawing it (tests, flow-level studies).

    Returns
    -------
    list of Fault, sorted by time.
    """
    if not (isinstance(n_gpus, (int, np.integer)) and n_gpus >= 1):
        raise UsageError(f"n_gpus must be an integer >= 1, not {n_gpus!r}")
    if not horizon_s > 0:
        raise UsageError(f"horizon_s must be > 0, not {horizon_s!r}")
    rng = np.random.default_rng(seed)
    lam = mix.rate_per_gpu_day * n_gpus * horizon_s / 86400.0
    count = int(rng.poisson(lam)) if n is None else int(n)
    t = np.sort(rng.uniform(0, horizon_s, count))
    kinds = rng.choice(len(KINDS), size=count, p=mix.probabilities)
    gpu = rng.integers(0, n_gpus, count)
    u = rng.uniform(size=count)
    sev_slow = mix.slow_factor[0] + u * (mix.slow_factor[1] - mix.slow_factor[0])
    sev_loss = mix.lossy_keep[0] + u * (mix.lossy_keep[1] - mix.lossy_keep[0])
    dur = rng.uniform(*mix.transient_s, count)
    u_expl = rng.uniform(size=count)
    link = rng.integers(0, max(n_fabric_links, 1), count)
    sw = rng.integers(0, max(n_agg_switches, 1), count)
    out = []
    for i in range(count):
        k = KINDS[int(kinds[i])]
        tot = _TOTAL_SHARE[k]
        explicit = bool(u_expl[i] < (_EXPLICIT_SHARE[k] / tot if tot else 1.0))
        target, sev, d = int(gpu[i]), 1.0, np.inf
        if k in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD):
            sev, d = float(sev_slow[i]), float(dur[i])
            if k == FaultKind.CPU_OVERLOAD:
                target = int(gpu[i]) // gpus_per_host
        elif k == FaultKind.LINK_LOSSY:
            sev, d = float(sev_loss[i]), float(dur[i])
            target = fabric_link_offset + int(link[i]) if n_fabric_links else -1
        elif k == FaultKind.NIC_FLAP:
            sev, d = mix.flap_period_s, float(dur[i])
        elif k == FaultKind.SWITCH_FAIL:
            target = int(sw[i]) if n_agg_switches else -1
            d = float(dur[i])  # until the network team swaps it (ours: the transient range)
        if k in (FaultKind.NAN, FaultKind.HANG, FaultKind.CPU_OVERLOAD, FaultKind.GPU_SLOW):
            explicit = False
        out.append(Fault(i, k, float(t[i]), target, d, sev, explicit))
    return out

"""Background noise of a healthy cluster, as mechanics of the transport, and the relative rules
that tell it from a fault.

Production telemetry is never clean: switch ports count the odd dropped packet, links flap and
come back, and healthy ranks run slow for a few seconds (a page fault storm, a co-located
process, thermal throttling). :class:`NoiseParams` draws such events as a Poisson stream per link
or per GPU over the run and :func:`add_noise` writes them into the transport's
:class:`~models.systems.cluster.transport.Effects` beside the faults, so they reach the telemetry
exactly as a fault's effects do (drop counters, link down/up events, late ranks). Nothing here is
a fault: scoring counts a detector's verdict on noise as a false alarm (the study that does so is
:mod:`.noise_study`).

The default rates are ours (order of magnitude, not measured; the C4, Mycroft and ByteRobust
papers give none in /work/shared/SPECS.md); the noise study reports every detector with the noise
off, at these rates, and at 4x these rates, so what a figure depends on them is visible.

The detectors' side: :func:`drop_suspects` and :func:`link_suspects` are the relative rules the
closed loop and C4D use on the switch counters and link events (a link drops in several healthy
iterations in a row, far above the background the counters themselves show; a link that comes
back within a few healthy iterations and does not keep flapping is not acted on).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["NoiseParams", "add_noise", "drop_suspects", "link_suspects"]


@dataclass(frozen=True)
class NoiseParams:
    """Rates and shapes of the background events (all ours).

    Parameters
    ----------
    drop_bursts_per_link_hour : float
        Bursts of packet drops on a healthy fabric link (per link per hour).
    drop_burst_s : float
        Length of one burst.
    drop_keep : float
        Chunk delivery probability during a burst (1 - the burst's drop probability).
    flaps_per_port_day : float
        NIC-port flaps that heal on their own (per port per day).
    flap_down_s : tuple
        Range of one flap's down time (uniform).
    slow_per_gpu_hour : float
        Slow-but-healthy episodes of a rank (per GPU per hour).
    slow_factor : tuple
        Range of the episode's compute slow-down (uniform).
    slow_s : tuple
        Range of the episode's length (uniform).
    scale : float
        Multiplier on every rate (0: no noise).
    """

    drop_bursts_per_link_hour: float = 2.0
    drop_burst_s: float = 1.0
    drop_keep: float = 0.995
    flaps_per_port_day: float = 2.0
    flap_down_s: tuple = (0.2, 2.0)
    slow_per_gpu_hour: float = 4.0
    slow_factor: tuple = (1.05, 1.3)
    slow_s: tuple = (1.0, 10.0)
    scale: float = 1.0

    def __post_init__(self):
        for n in ("drop_bursts_per_link_hour", "flaps_per_port_day", "slow_per_gpu_hour", "scale"):
            if not getattr(self, n) >= 0:
                raise UsageError(f"{n} must be >= 0, not {getattr(self, n)!r}")
        if not self.drop_burst_s > 0 or not 0 < self.drop_keep <= 1:
            raise UsageError(f"drop_burst_s must be > 0 and drop_keep in (0, 1], not {self.drop_burst_s!r}, "
                             f"{self.drop_keep!r}")
        for n in ("flap_down_s", "slow_factor", "slow_s"):
            lo, hi = getattr(self, n)
            if not 0 < lo <= hi:
                raise UsageError(f"{n} must be a range 0 < lo <= hi, not {getattr(self, n)!r}")


def _poisson_times(rng, rate_per_s: float, horizon: float, n: int) -> list[tuple[int, float]]:
    """(member, time) of a Poisson stream of ``rate_per_s`` per member over ``[0, horizon)``."""
    if rate_per_s <= 0 or n == 0 or not np.isfinite(horizon) or horizon <= 0:
        return []
    k = int(rng.poisson(rate_per_s * horizon * n))
    who = rng.integers(n, size=k)
    t = rng.uniform(0.0, horizon, size=k)
    return sorted(zip(who.tolist(), t.tolist()), key=lambda x: x[1])


def add_noise(fx, topo, noise: NoiseParams, horizon: float, seed: int, gpus=None, links=None) -> list[dict]:
    """Append background events over ``[0, horizon)`` to ``fx`` (in place); returns them as
    ``{"kind", "member", "t", "t_off"}`` (for scoring only).

    ``gpus``: the GPUs that may run slow (default all); ``links``: the fabric links that may drop
    (default every link). Flaps hit port 0 of a NIC of ``gpus``.
    """
    from .sim import nic_port_links

    if noise.scale == 0:
        return []
    rng = np.random.default_rng((seed, 0x5EED))
    gpus = np.arange(topo.n_gpus) if gpus is None else np.asarray(gpus, dtype=np.int64)
    links = np.arange(topo.n_links) if links is None else np.asarray(links, dtype=np.int64)
    out = []
    for i, t in _poisson_times(rng, noise.scale * noise.drop_bursts_per_link_hour / 3600.0, horizon, links.size):
        lk = int(links[i])
        fx.lossy.append((fx.mask(topo.n_links, [lk]), t, t + noise.drop_burst_s, noise.drop_keep))
        out.append({"kind": "drops", "member": lk, "t": t, "t_off": t + noise.drop_burst_s})
    for i, t in _poisson_times(rng, noise.scale * noise.flaps_per_port_day / 86400.0, horizon, gpus.size):
        g = int(gpus[i])
        d = float(rng.uniform(*noise.flap_down_s))
        # one down period of d: the transport's flap is down for the first half of every period
        fx.flaps.append((fx.mask(topo.n_links, nic_port_links(topo, g, port=0)), t, t + 2 * d, 2 * d))
        out.append({"kind": "flap", "member": g, "t": t, "t_off": t + d})
    for i, t in _poisson_times(rng, noise.scale * noise.slow_per_gpu_hour / 3600.0, horizon, gpus.size):
        g = int(gpus[i])
        f = float(rng.uniform(*noise.slow_factor))
        d = float(rng.uniform(*noise.slow_s))
        fx.gpu_slow.append((fx.mask(topo.n_gpus, [g]), t, t + d, f))
        out.append({"kind": "slow", "member": g, "t": t, "t_off": t + d})
    return out


# ---- the detectors' relative rules -------------------------------------------------------------
def drop_suspects(tel, edges, n_links: int, m: float = 10.0, min_drops: float = 1.0) -> np.ndarray:
    """Links whose switch drop counter stands out from the background the counters show in every
    window ``[edges[j], edges[j + 1])`` (a caller passes the last few iterations' ends, so a
    link must drop in each of them): in every window more than ``min_drops``, more than ``m`` x
    the other links' mean count per unit time over the history before ``edges[0]`` (scaled to the
    window), and more than ``m`` x the median of the other links counting in that window. A burst
    shorter than the windows never qualifies; a lossy link drops in every iteration."""
    e = np.asarray(edges, dtype=float)
    if e.size < 2 or np.any(np.diff(e) <= 0):
        raise UsageError(f"edges must be at least two increasing times, not {edges!r}")
    t0 = float(e[0])
    hist = tel.drops(-np.inf, t0, n_links)
    wins = [tel.drops(float(a), float(b) - 1e-12, n_links) for a, b in zip(e[:-1], e[1:])]
    n = max(n_links, hist.size, *(w.size for w in wins))
    hist = np.pad(hist, (0, n - hist.size))
    wins = [np.pad(w, (0, n - w.size)) for w in wins]
    cand = np.flatnonzero(np.minimum.reduce(wins) > min_drops)
    if cand.size == 0:
        return cand
    tot = float(hist.sum())
    out = []
    for lk in cand:
        rate = (tot - hist[lk]) / max(n - 1, 1) / t0 if t0 > 0 else 0.0
        ok = True
        for w, span in zip(wins, np.diff(e)):
            hot = np.flatnonzero(w > 0)
            others = w[hot[hot != lk]]
            if not w[lk] > max(m * rate * span, m * float(np.median(others)) if others.size else 0.0):
                ok = False
                break
        if ok:
            out.append(int(lk))
    return np.array(out, dtype=np.int64)


def link_suspects(tel, t: float, hold_s: float, flaps: int = 3, window_s: float = 60.0) -> list[tuple[float, int]]:
    """Link events worth acting on by ``t``: ``(time, link)`` for a link that stayed down
    ``hold_s`` (a caller passes a multiple of the healthy iteration time) or went down ``flaps``
    times within ``window_s``; the time is when that became true. A link that comes back sooner
    and does not keep flapping is background."""
    ev = tel.hw(t, "link")
    by: dict[int, list] = {}
    for te, _s, lk, state in ev:
        by.setdefault(int(lk), []).append((float(te), state))
    out = []
    for lk, es in by.items():
        downs = [te for te, s in es if s == "down"]
        when = np.inf
        for te, s in es:
            if s != "down":
                continue
            up = [u for u, s2 in es if s2 == "up" and u >= te]
            back = up[0] if up else np.inf
            if back - te >= hold_s and te + hold_s <= t:
                when = min(when, te + hold_s)
                break
        d = np.array(downs)
        for j in range(flaps - 1, d.size):
            if d[j] - d[j - flaps + 1] <= window_s:
                when = min(when, float(d[j]))
                break
        if np.isfinite(when):
            out.append((when, lk))
    return sorted(out)

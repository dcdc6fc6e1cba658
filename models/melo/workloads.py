"""Datacenter flow-size distributions and a seeded Poisson flow generator.

Two empirical CDFs used throughout the datacenter-transport literature:

- **Web search** — measured by Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, and
  reused by pFabric (Alizadeh et al., SIGCOMM 2013) and HPCC (Li et al., SIGCOMM 2019). The
  points below are the tabulation in HPCC's public simulator
  (``alibaba-edu/High-Precision-Congestion-Control``, ``traffic_gen/WebSearch_distribution.txt``):
  sizes 10 KB .. 30 MB, mean about 1.6 MB.
- **Data mining** — measured by Greenberg et al., "VL2", SIGCOMM 2009, and reused by pFabric;
  points as tabulated in ``TritonNetworking/opera-sim`` (``Figure1_traffic/datamining.csv``):
  80 % of flows under 10 KB, a tail to 1 GB, mean about 7.4 MB.

Sampling is inverse-transform with linear interpolation between the tabulated points (as ns-2's
empirical random variable does). A packet-level simulator in Python cannot carry 1 GB flows in
a short study, so :meth:`FlowSizeCDF.sample` takes an optional cap; callers must report it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["FlowSizeCDF", "WEB_SEARCH", "DATA_MINING", "WORKLOADS", "poisson_flows"]


@dataclass(frozen=True)
class FlowSizeCDF:
    """A piecewise-linear empirical CDF of flow sizes.

    Parameters
    ----------
    name : str
    sizes : tuple of float
        Flow sizes in bytes, non-decreasing, shape ``(K,)``.
    probs : tuple of float
        CDF at ``sizes``, non-decreasing from 0 to 1, shape ``(K,)``.
    source : str
        Citation.
    """

    name: str
    sizes: tuple
    probs: tuple
    source: str = ""

    def __post_init__(self):
        s, p = np.asarray(self.sizes, dtype=np.float64), np.asarray(self.probs, dtype=np.float64)
        if s.shape != p.shape or s.ndim != 1 or len(s) < 2:
            raise ValueError(f"{self.name}: sizes and probs must be 1-D of equal length >= 2")
        if np.any(np.diff(s) < 0) or np.any(np.diff(p) < 0):
            raise ValueError(f"{self.name}: sizes and probs must be non-decreasing")
        if p[0] != 0.0 or p[-1] != 1.0:
            raise ValueError(f"{self.name}: the CDF must start at 0 and end at 1, not {p[0]} .. {p[-1]}")

    def sample(self, rng: np.random.Generator, n: int, max_bytes: float | None = None) -> np.ndarray:
        """Draw ``n`` flow sizes in bytes, shape ``(n,)`` int64, each >= 1 (capped at ``max_bytes``)."""
        u = rng.random(n)
        x = np.interp(u, np.asarray(self.probs), np.asarray(self.sizes, dtype=np.float64))
        if max_bytes is not None:
            x = np.minimum(x, float(max_bytes))
        return np.maximum(np.rint(x), 1).astype(np.int64)

    def mean(self, max_bytes: float | None = None) -> float:
        """Mean flow size in bytes (of ``min(X, max_bytes)``), exact for the piecewise-linear CDF."""
        s = np.asarray(self.sizes, dtype=np.float64)
        p = np.asarray(self.probs, dtype=np.float64)
        if max_bytes is not None:
            cap = float(max_bytes)
            pc = float(np.interp(cap, s, p)) if cap < s[-1] else 1.0
            keep = s < cap
            s = np.concatenate([s[keep], [cap]])
            p = np.concatenate([p[keep], [pc]])
            tail = (1.0 - pc) * cap
        else:
            tail = 0.0
        return float(np.sum(np.diff(p) * (s[1:] + s[:-1]) / 2.0) + tail)


WEB_SEARCH = FlowSizeCDF(
    "websearch",
    (0, 10e3, 20e3, 30e3, 50e3, 80e3, 200e3, 1e6, 2e6, 5e6, 10e6, 30e6),
    (0, 0.15, 0.20, 0.30, 0.40, 0.53, 0.60, 0.70, 0.80, 0.90, 0.97, 1.0),
    "DCTCP (Alizadeh et al., SIGCOMM 2010), as tabulated by HPCC's traffic_gen",
)
DATA_MINING = FlowSizeCDF(
    "datamining",
    (100, 180, 250, 560, 900, 1100, 1870, 3160, 10e3, 100001, 400e3, 1.85e6, 10e6, 30e6, 100e6, 250e6, 1e9),
    (0, 0.085, 0.14, 0.33, 0.47, 0.55, 0.65, 0.70, 0.80, 0.874, 0.90, 0.95, 0.97, 0.98, 0.99, 0.995, 1.0),
    "VL2 (Greenberg et al., SIGCOMM 2009), as tabulated by opera-sim Figure1_traffic",
)
WORKLOADS = {w.name: w for w in (WEB_SEARCH, DATA_MINING)}


def poisson_flows(
    cdf: FlowSizeCDF,
    n_flows: int,
    load: float,
    link_gbps: float,
    rng: np.random.Generator,
    max_bytes: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson flow arrivals offering ``load`` of the link.

    Returns
    -------
    arrivals_ns : ndarray, shape (n_flows,), float64
        Arrival times in nanoseconds, increasing.
    sizes : ndarray, shape (n_flows,), int64
        Flow sizes in bytes.
    """
    if not 0.0 < load <= 1.0:
        raise UsageError(f"load must be in (0, 1], not {load}")
    sizes = cdf.sample(rng, n_flows, max_bytes)
    mean_ns = cdf.mean(max_bytes) * 8.0 / link_gbps / load  # ns between arrivals on average
    arrivals = np.cumsum(rng.exponential(mean_ns, n_flows))
    return arrivals, sizes

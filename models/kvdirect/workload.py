"""YCSB-style workloads for the KV-Direct models: seeded uniform / Zipf key streams.

KV-Direct (Li et al., SOSP 2017) evaluates with YCSB-like streams: uniform or Zipf (skew 0.99)
key popularity, GET/PUT mixes and small KVs (10 B in the headline numbers). Zipf over ``n_keys``
ranks: ``P(rank k) = k**-theta / H(n_keys, theta)``. Ranks are mapped to key ids by a seeded
random permutation of the hottest ranks (so hot keys land in unrelated buckets); key bytes are
the key id in little endian. For very large ``n_keys`` (1e9) the tail of the CDF beyond the
first ``2**20`` ranks uses the integral (midpoint) approximation of the harmonic sum, which is
accurate to ~1e-12 relative there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["Workload", "zipf_harmonic", "zipf_top_mass", "zipf_ranks", "generate", "key_bytes"]

_HEAD = 1 << 20


def zipf_harmonic(n, s: float) -> np.ndarray:
    """Generalised harmonic number ``H(n, s) = sum_{k<=n} k**-s`` for real ``n >= 0`` (vectorised).

    Exact up to ``2**20``; beyond, the midpoint integral ``int_{m+1/2}^{n+1/2} x**-s dx`` is added.
    """
    n0 = np.asarray(n, dtype=np.float64)
    n = np.atleast_1d(n0)
    head = np.concatenate([[0.0], np.cumsum(np.arange(1, _HEAD + 1, dtype=np.float64) ** -s)])
    nf = np.floor(n)
    small = np.minimum(nf, _HEAD).astype(np.int64)
    out = head[small]
    big = nf > _HEAD
    if big.any():
        a, b = _HEAD + 0.5, nf[big] + 0.5
        tail = (np.log(b / a) if abs(1 - s) < 1e-12 else (b ** (1 - s) - a ** (1 - s)) / (1 - s))
        out = out.copy()
        out[big] += tail
    return out.reshape(n0.shape)


def zipf_top_mass(frac, n_keys: int, theta: float) -> np.ndarray:
    """Access probability mass of the hottest ``frac`` of ``n_keys`` keys (``theta=0``: uniform)."""
    frac = np.clip(np.asarray(frac, dtype=np.float64), 0.0, 1.0)
    if theta == 0:
        return frac
    return zipf_harmonic(frac * n_keys, theta) / zipf_harmonic(n_keys, theta)


def zipf_ranks(n_keys: int, theta: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sample ``size`` ranks in ``[0, n_keys)`` (0 hottest) from Zipf(theta); theta=0 is uniform."""
    if theta == 0:
        return rng.integers(0, n_keys, size=size, dtype=np.int64)
    m = min(n_keys, _HEAD)
    head_cdf = np.cumsum(np.arange(1, m + 1, dtype=np.float64) ** -theta)
    total = float(zipf_harmonic(n_keys, theta))
    u = rng.random(size) * total
    r = np.searchsorted(head_cdf, u, side="right").astype(np.int64)
    tail = u >= head_cdf[-1]
    if tail.any() and n_keys > m:
        a = m + 0.5
        x = u[tail] - head_cdf[-1]
        if abs(1 - theta) < 1e-12:
            b = a * np.exp(x)
        else:
            b = (x * (1 - theta) + a ** (1 - theta)) ** (1 / (1 - theta))
        r[tail] = np.clip(np.floor(b - 0.5).astype(np.int64), m, n_keys - 1)
    return np.minimum(r, n_keys - 1)


@dataclass(frozen=True)
class Workload:
    """A YCSB-style workload.

    Parameters
    ----------
    n_keys : int
        Key-space size (>= 1).
    get_ratio : float
        Fraction of GETs; the rest are PUTs (0..1).
    theta : float
        Zipf skew (0 = uniform, 0.99 = YCSB's default), 0..2.
    kv_sizes : tuple of (key_bytes, value_bytes, weight)
        Size mix; each key id keeps one size class (chosen by ``key_id % len`` weighted table).
    """

    n_keys: int = 1_000_000_000
    get_ratio: float = 1.0
    theta: float = 0.99
    kv_sizes: tuple = ((5, 5, 1.0),)

    def __post_init__(self):
        if not isinstance(self.n_keys, int) or self.n_keys < 1:
            raise UsageError(f"n_keys must be a positive integer, not {self.n_keys!r}")
        if not 0.0 <= self.get_ratio <= 1.0:
            raise UsageError(f"get_ratio must be in [0, 1], not {self.get_ratio!r}")
        if not 0.0 <= self.theta <= 2.0:
            raise UsageError(f"theta must be in [0, 2] (0 uniform, 0.99 YCSB), not {self.theta!r}")
        if not self.kv_sizes:
            raise UsageError("kv_sizes needs at least one (key_bytes, value_bytes, weight)")
        for ks, vs, w in self.kv_sizes:
            if not (1 <= ks <= 255 and 0 <= vs <= 65535 and w > 0):
                raise UsageError(f"bad kv size entry {(ks, vs, w)!r}: key 1..255 B, value 0..65535 B, "
                                 "weight > 0")
            if self.n_keys > 256 ** min(ks, 8):
                raise UsageError(f"{ks}-byte keys cannot name {self.n_keys} distinct keys; lengthen keys")

    @property
    def label(self) -> str:
        d = "uniform" if self.theta == 0 else f"zipf{self.theta:g}"
        return f"{d}, {self.get_ratio:.0%} GET"

    def size_of(self, key_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key_bytes, value_bytes) arrays of each key id (deterministic in the id)."""
        w = np.array([s[2] for s in self.kv_sizes], dtype=np.float64)
        table = np.repeat(np.arange(len(w)), np.maximum(1, np.round(w / w.sum() * 64)).astype(np.int64))
        cls = table[np.asarray(key_id, dtype=np.int64) % len(table)]
        ks = np.array([s[0] for s in self.kv_sizes], dtype=np.int64)[cls]
        vs = np.array([s[1] for s in self.kv_sizes], dtype=np.int64)[cls]
        return ks, vs


def generate(w: Workload, n_ops: int, seed: int) -> dict[str, np.ndarray]:
    """A seeded stream of ``n_ops`` operations.

    Returns
    -------
    dict with ``is_get`` (n_ops,) bool, ``key_id`` (n_ops,) int64, ``key_bytes`` and
    ``value_bytes`` (n_ops,) int64.
    """
    if n_ops < 1:
        raise UsageError(f"n_ops must be >= 1, not {n_ops}")
    rng = np.random.default_rng(seed)
    ranks = zipf_ranks(w.n_keys, w.theta, n_ops, rng)
    # scatter ranks over ids: an affine bijection mod n_keys with a seeded odd multiplier
    mult = int(rng.integers(1, max(2, w.n_keys))) | 1
    while np.gcd(mult, w.n_keys) != 1:
        mult += 2
    off = int(rng.integers(0, w.n_keys))
    key_id = (ranks.astype(object) * mult + off) % w.n_keys if w.n_keys > (1 << 31) else \
        (ranks * mult + off) % w.n_keys
    key_id = np.asarray(key_id, dtype=np.int64)
    is_get = rng.random(n_ops) < w.get_ratio
    ks, vs = w.size_of(key_id)
    return {"is_get": is_get, "key_id": key_id, "key_bytes": ks, "value_bytes": vs}


def key_bytes(key_id: int, n: int) -> bytes:
    """Key bytes of a key id: little-endian id, zero-padded / truncated to ``n`` bytes."""
    return int(key_id).to_bytes(8, "little")[:n].ljust(n, b"\0")

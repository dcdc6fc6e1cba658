"""Parameters of the KV-Direct store model (one frozen object shared by model, RTL and tests).

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, "KV-Direct: High-Performance In-Memory
Key-Value Store with Programmable NIC", SOSP 2017. The two tuning knobs of the paper's hash table
are kept: the *inline threshold* (KVs whose encoding is at most this many bytes live inside the
bucket) and the *hash-index ratio* (the fraction of memory given to the bucket array; the rest is
slab space for offline KVs and chained buckets).
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcosim.models.errors import UsageError

__all__ = ["KVDParams", "BUCKET_BYTES", "SLOT_BYTES", "SLOTS", "SLAB_SIZES", "MAX_MEMORY_BYTES",
           "INLINE_HEADER_BYTES", "OFFLINE_HEADER_BYTES", "PTR_UNIT"]

BUCKET_BYTES = 64
"""A bucket is one 64 B memory line (512 bits)."""
SLOTS = 10
SLOT_BYTES = 5
PTR_UNIT = 32
"""Pointers (offline slots, next-bucket) count 32 B units: 31 bits reach 64 GiB."""
MAX_MEMORY_BYTES = (1 << 31) * PTR_UNIT
SLAB_SIZES = (32, 64, 128, 256, 512)
INLINE_HEADER_BYTES = 2
"""Inline KV encoding: key_len (1 B), val_len (1 B), key, value."""
OFFLINE_HEADER_BYTES = 3
"""Offline (slab) KV encoding: key_len (1 B), val_len (2 B little endian), key, value."""


@dataclass(frozen=True)
class KVDParams:
    """Geometry of one KV-Direct store.

    Parameters
    ----------
    memory_bytes : int
        Size of the simulated flat memory (host memory in the paper), a multiple of 512 and at
        most 64 GiB (31-bit pointers at 32 B granularity).
    hash_index_ratio : float
        Fraction of memory used by the bucket array, in (0, 1). ``n_buckets =
        floor(memory_bytes * ratio / 64)`` (at least 1); the slab region starts at the next
        512 B boundary.
    inline_threshold : int
        Largest inline KV encoding in bytes (``2 + len(key) + len(value)``), 3..50. Larger KVs
        are stored offline in a slab. 0 disables inline storage.
    max_key_bytes : int
        Longest key (1..255). The hash runs over the key zero-padded to this width plus a length
        byte, so the RTL hashes a fixed-width word.
    slab_sync_batch : int
        Free-slab pointers moved per DMA batch between the NIC-side cache and the host pools.
    slab_cache_high : int
        When the NIC cache of one slab class holds more than this many free slabs, a batch is
        returned to the host. Defaults (512 / 650) are the constants of the first author's code
        (``bojieli/KVS``, ``constant.hpp``).

    Raises
    ------
    ValueError
        On any value the layout cannot hold, naming the value and the fix.
    """

    memory_bytes: int = 1 << 20
    hash_index_ratio: float = 0.5
    inline_threshold: int = 20
    max_key_bytes: int = 32
    slab_sync_batch: int = 512
    slab_cache_high: int = 650

    def __post_init__(self):
        m = self.memory_bytes
        if not isinstance(m, int) or m < 1024 or m % 512:
            raise UsageError(f"memory_bytes must be an integer multiple of 512 and >= 1024, not {m!r}")
        if m > MAX_MEMORY_BYTES:
            raise UsageError(f"memory_bytes={m} exceeds the 64 GiB that 31-bit pointers at 32 B reach; "
                             "use several stores (one per NIC)")
        r = self.hash_index_ratio
        if not (isinstance(r, (int, float)) and 0.0 < r < 1.0):
            raise UsageError(f"hash_index_ratio must be in (0, 1), not {r!r}")
        t = self.inline_threshold
        if not isinstance(t, int) or not (t == 0 or 3 <= t <= SLOTS * SLOT_BYTES):
            raise UsageError(f"inline_threshold must be 0 (no inline KVs) or 3..50 bytes (one bucket), "
                             f"not {t!r}")
        k = self.max_key_bytes
        if not isinstance(k, int) or not 1 <= k <= 255:
            raise UsageError(f"max_key_bytes must be 1..255 (a 1-byte length field), not {k!r}")
        if not isinstance(self.slab_sync_batch, int) or self.slab_sync_batch < 1:
            raise UsageError(f"slab_sync_batch must be a positive integer, not {self.slab_sync_batch!r}")
        if not isinstance(self.slab_cache_high, int) or self.slab_cache_high < self.slab_sync_batch:
            raise UsageError(f"slab_cache_high={self.slab_cache_high!r} must be >= slab_sync_batch="
                             f"{self.slab_sync_batch}; raise it or lower the batch")
        if self.slab_base + 512 > m:
            raise UsageError(f"hash_index_ratio={r} leaves no slab space in {m} B; lower the ratio")

    @property
    def n_buckets(self) -> int:
        return max(1, int(self.memory_bytes * self.hash_index_ratio) // 64)

    @property
    def index_bytes(self) -> int:
        return self.n_buckets * 64

    @property
    def slab_base(self) -> int:
        """First byte of the slab region (512 B aligned, so slab buddies are size-aligned)."""
        return -(-self.index_bytes // 512) * 512

    @property
    def slab_bytes(self) -> int:
        return (self.memory_bytes - self.slab_base) // 512 * 512

    def to_dict(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "hash_index_ratio": self.hash_index_ratio,
                "inline_threshold": self.inline_threshold, "max_key_bytes": self.max_key_bytes,
                "slab_sync_batch": self.slab_sync_batch, "slab_cache_high": self.slab_cache_high}

"""The KV-Direct model's hash function, defined bit-exactly so that RTL can implement it.

KV-Direct (Li et al., SOSP 2017) hashes a key to a bucket and keeps a short secondary hash in
each offline slot so that most non-matching offline KVs are skipped without fetching them. The
paper does not fix the function; this choice is ours:

1. **Input word.** ``W = key || 0x00 * (max_key_bytes - len(key)) || len(key)``: the key
   zero-padded to ``max_key_bytes`` followed by one length byte (so ``b"a"`` and ``b"a\\0"``
   differ). A fixed width means the RTL hashes a constant-size word.
2. **CRC.** ``c = CRC-32/ISO-HDLC(W)`` (the Ethernet / zlib CRC: reflected polynomial
   0xEDB88320, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF). Over a fixed-width word this is
   a pure XOR network in hardware (no multipliers, one or two pipeline stages).
   **Finaliser.** ``h = fmix32(c)``, the MurmurHash3 32-bit finaliser (``x ^= x >> 16;
   x *= 0x85EBCA6B; x ^= x >> 13; x *= 0xC2B2AE35; x ^= x >> 16``, all mod 2**32): two 32x32
   multipliers (DSP blocks) and three XOR-shifts. It is needed because a CRC is affine over
   GF(2): its top bits map *sequential* keys onto a linear subspace of buckets (measured here:
   12,288 keys 0..12287 over 8,192 buckets filled only 0, 2 or 4 keys per bucket, so half of
   them overflowed 3-KV buckets into chains); the multiplies break the linearity.
3. **Bucket index.** ``bucket = (h * n_buckets) >> 32`` (multiply-shift range reduction; for a
   power-of-two ``n_buckets = 2**k`` it is simply the top ``k`` bits of ``h``).
4. **Secondary hash.** ``sec = h & 0x1FF`` (the low 9 bits; independent of the bucket index
   while ``n_buckets <= 2**23``).
5. **OoO-engine slot.** ``ooo = h & 0x3FF`` (the 1,024-entry dependency table keys on the
   hash, so different keys may share a slot: a false dependency, never a missed one).
"""

from __future__ import annotations

import zlib

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["hash_word", "fmix32", "key_hash", "bucket_index", "secondary_hash", "key_hash_batch", "CRC_TABLE"]


def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1).astype(np.uint32)
    return t


CRC_TABLE = _crc_table()
"""Byte-wise CRC-32 table (256,) uint32, for the vectorised batch hash."""


def hash_word(key: bytes, max_key_bytes: int) -> bytes:
    """The fixed-width hash input ``key || zero padding || len(key)`` (``max_key_bytes + 1`` B)."""
    if not 1 <= len(key) <= max_key_bytes:
        raise UsageError(f"key length {len(key)} is outside 1..{max_key_bytes} (max_key_bytes)")
    return bytes(key) + bytes(max_key_bytes - len(key)) + bytes([len(key)])


def fmix32(x):
    """MurmurHash3 finaliser on uint32 (Python int or uint32 ndarray)."""
    if isinstance(x, np.ndarray):
        x = x.astype(np.uint64)
        m = np.uint64(0xFFFFFFFF)
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x85EBCA6B)) & m
        x ^= x >> np.uint64(13)
        x = (x * np.uint64(0xC2B2AE35)) & m
        x ^= x >> np.uint64(16)
        return x.astype(np.uint32)
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


def key_hash(key: bytes, max_key_bytes: int) -> int:
    """32-bit hash of one key: ``fmix32(crc32(W))`` (see module docstring)."""
    return fmix32(zlib.crc32(hash_word(key, max_key_bytes)) & 0xFFFFFFFF)


def bucket_index(h: int, n_buckets: int) -> int:
    """Bucket number ``(h * n_buckets) >> 32``."""
    return (h * n_buckets) >> 32


def secondary_hash(h: int) -> int:
    """9-bit secondary hash stored in offline slots."""
    return h & 0x1FF


def key_hash_batch(keys: np.ndarray, lengths: np.ndarray, max_key_bytes: int) -> np.ndarray:
    """Vectorised :func:`key_hash` over many keys.

    Parameters
    ----------
    keys : ndarray, shape (n, max_key_bytes), uint8
        Keys, zero-padded on the right.
    lengths : ndarray, shape (n,), int
        Key lengths (1..max_key_bytes); bytes past the length must be zero.

    Returns
    -------
    ndarray, shape (n,), uint32
    """
    keys = np.asarray(keys, dtype=np.uint8)
    lengths = np.asarray(lengths, dtype=np.int64)
    if keys.ndim != 2 or keys.shape[1] != max_key_bytes:
        raise UsageError(f"keys must have shape (n, {max_key_bytes}), not {keys.shape}")
    if ((lengths < 1) | (lengths > max_key_bytes)).any():
        raise UsageError(f"key lengths must be in 1..{max_key_bytes}")
    words = np.concatenate([keys, lengths.astype(np.uint8)[:, None]], axis=1)
    crc = np.full(len(words), 0xFFFFFFFF, dtype=np.uint32)
    for j in range(words.shape[1]):  # loop over the fixed word width, vectorised over keys
        crc = CRC_TABLE[(crc ^ words[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return fmix32(crc ^ np.uint32(0xFFFFFFFF))

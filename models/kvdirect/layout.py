"""Bit layout of a KV-Direct hash bucket and of inline / offline KV encodings.

KV-Direct (Li et al., SOSP 2017, and the first author's thesis) stores a chained hash table of
64 B buckets. Layout (bit ``i`` of the bucket is bit ``i % 8`` of byte ``i // 8``, i.e. the 64
bytes read as one little-endian 512-bit integer):

=========  ======  =====================================================================
bits       width   field
=========  ======  =====================================================================
0..399     400     10 slots x 5 B; slot ``s`` is bytes ``5s .. 5s+4``
400..429   30      10 x 3-bit slot type; slot ``s`` at bits ``400 + 3s``
430..479   50      bitmap, one bit per slot-area byte: set at the first and the last byte
                   of every inline KV (so the RTL finds KV extents without parsing headers)
480..510   31      next-bucket pointer in 32 B units (valid only if bit 511 is set)
511        1       valid bit: a chained bucket follows
=========  ======  =====================================================================

Slot types (our encoding of the paper's 3-bit "slab type"): 0 empty; 1 part of an inline KV;
2..6 an offline slot pointing to a slab of 32/64/128/256/512 B; 7 is reserved and never written.

Offline slot (40 bits, little endian): bits 0..30 pointer to the slab in 32 B units, bits
31..39 the 9-bit secondary hash of the key.

Inline KV: ``key_len (1 B) | val_len (1 B) | key | value`` in consecutive whole slots starting at
a slot boundary (``ceil((2 + k + v) / 5)`` slots), unused trailing bytes zero. Offline KV in a
slab: ``key_len (1 B) | val_len (2 B LE) | key | value``, the slab is the smallest class that
holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcosim.models.errors import UsageError

from .params import INLINE_HEADER_BYTES, OFFLINE_HEADER_BYTES, SLAB_SIZES, SLOT_BYTES, SLOTS

__all__ = ["Bucket", "T_EMPTY", "T_INLINE", "T_RESERVED", "slab_type", "type_slab_class",
           "encode_inline", "decode_inline", "encode_offline", "decode_offline_header",
           "pack_offline_slot", "unpack_offline_slot", "slab_class_for", "inline_slots",
           "LayoutError"]

T_EMPTY = 0
T_INLINE = 1
T_RESERVED = 7
_MASK31 = (1 << 31) - 1
_MASK50 = (1 << 50) - 1


class LayoutError(ValueError):
    """A bucket or slab in memory breaks the layout invariants (corruption)."""


def slab_type(cls: int) -> int:
    """Slot type code of slab class ``cls`` (0..4 -> 2..6)."""
    return 2 + cls


def type_slab_class(t: int) -> int:
    return t - 2


def slab_class_for(nbytes: int) -> int:
    """Smallest slab class holding ``nbytes``; ``ValueError`` above 512 B."""
    for c, s in enumerate(SLAB_SIZES):
        if nbytes <= s:
            return c
    raise UsageError(f"a KV of {nbytes} B encoded exceeds the largest slab (512 B); shorten the value")


def inline_slots(nbytes: int) -> int:
    return -(-nbytes // SLOT_BYTES)


@dataclass
class Bucket:
    """A decoded 64 B bucket (mutable working copy).

    Attributes
    ----------
    slots : bytearray, length 50
    types : list of 10 int (3-bit)
    bitmap : int (50-bit)
    next_ptr : int (31-bit, 32 B units)
    valid : bool
    """

    slots: bytearray = field(default_factory=lambda: bytearray(SLOTS * SLOT_BYTES))
    types: list = field(default_factory=lambda: [T_EMPTY] * SLOTS)
    bitmap: int = 0
    next_ptr: int = 0
    valid: bool = False

    @classmethod
    def unpack(cls, raw: bytes) -> Bucket:
        if len(raw) != 64:
            raise LayoutError(f"a bucket is 64 bytes, not {len(raw)}")
        w = int.from_bytes(bytes(raw), "little")
        types = [(w >> (400 + 3 * s)) & 7 for s in range(SLOTS)]
        return cls(bytearray(bytes(raw[:50])), types, (w >> 430) & _MASK50, (w >> 480) & _MASK31,
                   bool(w >> 511))

    def pack(self) -> bytes:
        w = int.from_bytes(bytes(self.slots), "little")
        for s, t in enumerate(self.types):
            w |= (t & 7) << (400 + 3 * s)
        w |= (self.bitmap & _MASK50) << 430
        w |= (self.next_ptr & _MASK31) << 480
        w |= int(bool(self.valid)) << 511
        return w.to_bytes(64, "little")

    def copy(self) -> Bucket:
        return Bucket(bytearray(self.slots), list(self.types), self.bitmap, self.next_ptr, self.valid)

    def is_empty(self) -> bool:
        return all(t == T_EMPTY for t in self.types)

    def inline_starts(self) -> list[int]:
        """Slot numbers where an inline KV starts (bitmap bits at slot boundaries, paired)."""
        starts = []
        b = 0
        while b < SLOTS * SLOT_BYTES:
            if (self.bitmap >> b) & 1 and b % SLOT_BYTES == 0 and self.types[b // SLOT_BYTES] == T_INLINE:
                n = INLINE_HEADER_BYTES + self.slots[b] + self.slots[b + 1]
                starts.append(b // SLOT_BYTES)
                b += inline_slots(n) * SLOT_BYTES
            else:
                b += SLOT_BYTES
        return starts

    def free_run(self, n: int, start: int = 0) -> int | None:
        """First slot of ``n`` consecutive empty slots, or None."""
        run = 0
        for s in range(start, SLOTS):
            run = run + 1 if self.types[s] == T_EMPTY else 0
            if run == n:
                return s - n + 1
        return None

    def put_inline(self, s: int, enc: bytes) -> None:
        n = inline_slots(len(enc))
        lo, hi = s * SLOT_BYTES, (s + n) * SLOT_BYTES
        self.slots[lo:hi] = enc + bytes(hi - lo - len(enc))
        for i in range(s, s + n):
            self.types[i] = T_INLINE
        self.bitmap |= (1 << lo) | (1 << (lo + len(enc) - 1))

    def clear_inline(self, s: int) -> None:
        lo = s * SLOT_BYTES
        ln = INLINE_HEADER_BYTES + self.slots[lo] + self.slots[lo + 1]
        n = inline_slots(ln)
        self.slots[lo:(s + n) * SLOT_BYTES] = bytes(n * SLOT_BYTES)
        for i in range(s, s + n):
            self.types[i] = T_EMPTY
        self.bitmap &= ~((1 << lo) | (1 << (lo + ln - 1)))

    def put_offline(self, s: int, ptr_units: int, sec: int, cls: int) -> None:
        self.slots[s * SLOT_BYTES:(s + 1) * SLOT_BYTES] = pack_offline_slot(ptr_units, sec)
        self.types[s] = slab_type(cls)

    def clear_offline(self, s: int) -> None:
        self.slots[s * SLOT_BYTES:(s + 1) * SLOT_BYTES] = bytes(SLOT_BYTES)
        self.types[s] = T_EMPTY


def pack_offline_slot(ptr_units: int, sec: int) -> bytes:
    if not 0 <= ptr_units <= _MASK31 or not 0 <= sec < 512:
        raise LayoutError(f"offline slot fields out of range: ptr={ptr_units}, sec={sec}")
    return (ptr_units | (sec << 31)).to_bytes(SLOT_BYTES, "little")


def unpack_offline_slot(raw: bytes) -> tuple[int, int]:
    w = int.from_bytes(bytes(raw), "little")
    return w & _MASK31, (w >> 31) & 0x1FF


def encode_inline(key: bytes, value: bytes) -> bytes:
    return bytes([len(key), len(value)]) + key + value


def decode_inline(slots: bytes | bytearray, s: int) -> tuple[bytes, bytes]:
    lo = s * SLOT_BYTES
    k, v = slots[lo], slots[lo + 1]
    body = bytes(slots[lo + INLINE_HEADER_BYTES: lo + INLINE_HEADER_BYTES + k + v])
    return body[:k], body[k:]


def encode_offline(key: bytes, value: bytes) -> bytes:
    return bytes([len(key)]) + len(value).to_bytes(2, "little") + key + value


def decode_offline_header(raw: bytes | bytearray) -> tuple[int, int]:
    """(key_len, val_len) from the first 3 bytes of a slab."""
    return raw[0], int.from_bytes(bytes(raw[1:OFFLINE_HEADER_BYTES]), "little")

"""Golden model of the KV-Direct key-value store on a simulated flat memory.

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, "KV-Direct: High-Performance
In-Memory Key-Value Store with Programmable NIC", SOSP 2017. The store is laid out byte for byte
as described in :mod:`hwcosim.models.kvdirect.layout`: a bucket array of ``n_buckets`` 64 B buckets at
address 0, then a slab region (:mod:`hwcosim.models.kvdirect.slab`) holding offline KVs and chained
buckets (a full bucket chains to a 64 B slab). Keys hash with :mod:`hwcosim.models.kvdirect.hashing`.

Operations and their memory traffic (counted in 64 B lines touched, :class:`OpCost`):

- ``get``: read the chain bucket by bucket until the key is found; an offline slot whose 9-bit
  secondary hash matches costs a slab read (``ceil(slab / 64)`` lines). Inline hit in the first
  bucket: 1 read (the paper's "~1 access per GET").
- ``put``: read the whole chain (the key may be anywhere), then write the slab (offline) and the
  changed buckets. Inline, no chaining: 1 read + 1 write (the paper's 2); offline: + slab write.
- ``delete``: read until found, write the bucket; a chained bucket left empty is unlinked (its
  predecessor is rewritten) and its slab freed.
- atomics (``update_scalar``, ``fetch_add``, ``update_scalar_to_vector``, ``update_vector``) read
  like ``get`` and write back only the lines they change. ``reduce`` / ``filter`` read only.
  Values are arrays of little-endian fixed-width integers (1/2/4/8 B) with two's-complement
  wrap-around, as a hardware adder computes; functions are registered ahead by id.

A PUT plans all of its allocations (slab, chained bucket) before it changes memory: if one
fails, the others are returned and :class:`StoreFullError` is raised with the store unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .hashing import bucket_index, key_hash, secondary_hash
from .layout import (
    T_EMPTY,
    T_INLINE,
    Bucket,
    LayoutError,
    decode_inline,
    decode_offline_header,
    encode_inline,
    encode_offline,
    inline_slots,
    slab_class_for,
    type_slab_class,
    unpack_offline_slot,
)
from .params import (
    INLINE_HEADER_BYTES,
    OFFLINE_HEADER_BYTES,
    PTR_UNIT,
    SLAB_SIZES,
    SLOT_BYTES,
    SLOTS,
    KVDParams,
)
from .slab import SlabAllocator, StoreFullError

__all__ = ["KVStore", "OpCost", "StoreFullError", "BUILTIN_FUNCTIONS", "BUILTIN_PREDICATES",
           "F_ADD", "F_SUB", "F_MIN", "F_MAX", "F_AND", "F_OR", "F_XOR", "F_SWAP",
           "P_EQ", "P_NE", "P_LT", "P_LE", "P_GT", "P_GE"]

F_ADD, F_SUB, F_MIN, F_MAX, F_AND, F_OR, F_XOR, F_SWAP = range(8)
BUILTIN_FUNCTIONS: dict[int, tuple[str, Callable]] = {
    F_ADD: ("add", np.add), F_SUB: ("sub", np.subtract), F_MIN: ("min", np.minimum),
    F_MAX: ("max", np.maximum), F_AND: ("and", np.bitwise_and), F_OR: ("or", np.bitwise_or),
    F_XOR: ("xor", np.bitwise_xor), F_SWAP: ("swap", lambda old, x: np.broadcast_to(x, old.shape).copy()),
}
"""Update functions ``new = f(old, operand)`` by id (elementwise, integer wrap-around)."""

P_EQ, P_NE, P_LT, P_LE, P_GT, P_GE = range(6)
BUILTIN_PREDICATES: dict[int, tuple[str, Callable]] = {
    P_EQ: ("eq", np.equal), P_NE: ("ne", np.not_equal), P_LT: ("lt", np.less),
    P_LE: ("le", np.less_equal), P_GT: ("gt", np.greater), P_GE: ("ge", np.greater_equal),
}
"""Filter predicates ``keep = p(element, operand)`` by id."""


@dataclass
class OpCost:
    """Memory traffic of one operation, in 64 B lines (``alloc_dma``: slab-pool sync DMAs)."""

    reads: int = 0
    writes: int = 0
    alloc_dma: int = 0

    @property
    def accesses(self) -> int:
        return self.reads + self.writes + self.alloc_dma


@dataclass
class _Found:
    bi: int            # index into the chain list
    slot: int
    value: bytes
    slab: int | None   # slab address (offline) or None (inline)
    cls: int | None


def _lines(addr: int, n: int) -> int:
    return 0 if n <= 0 else (addr + n - 1) // 64 - addr // 64 + 1


def _int_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in "iu" or dt.itemsize not in (1, 2, 4, 8):
        raise UsageError(f"element type must be a 1/2/4/8-byte integer dtype, not {dt}")
    return dt.newbyteorder("<")


class KVStore:
    """A KV-Direct store on ``params.memory_bytes`` of simulated memory.

    Parameters
    ----------
    params : KVDParams

    Attributes
    ----------
    mem : ndarray, shape (memory_bytes,), uint8
        The flat memory image (buckets at 0, slabs from ``params.slab_base``).
    alloc : SlabAllocator
    last : OpCost
        Memory traffic of the most recent operation.
    totals : dict str -> ndarray (4,) int64
        Per operation name: count, reads, writes, alloc DMAs.
    functions, predicates : dict int -> (name, callable)
        Registered update functions and filter predicates.
    """

    def __init__(self, params: KVDParams | None = None):
        self.p = params if params is not None else KVDParams()
        self.mem = np.zeros(self.p.memory_bytes, dtype=np.uint8)
        self.alloc = SlabAllocator(self.p)
        self.functions = dict(BUILTIN_FUNCTIONS)
        self.predicates = dict(BUILTIN_PREDICATES)
        self.last = OpCost()
        self.totals: dict[str, np.ndarray] = {}
        self._dma0 = 0

    # --- registration ---------------------------------------------------------------------
    def register_function(self, fid: int, name: str, fn: Callable) -> None:
        """Register ``new = fn(old, operand)`` (elementwise on integer arrays) under ``fid`` (0..255)."""
        if not isinstance(fid, int) or not 0 <= fid <= 255:
            raise UsageError(f"function id must be 0..255 (an 8-bit field), not {fid!r}")
        if fid in self.functions:
            raise UsageError(f"function id {fid} is taken by {self.functions[fid][0]!r}; pick a free id")
        self.functions[fid] = (name, fn)

    # --- memory access with counting --------------------------------------------------------
    def _rd(self, addr: int, n: int) -> bytes:
        self.last.reads += _lines(addr, n)
        return self.mem[addr:addr + n].tobytes()

    def _wr(self, addr: int, data: bytes) -> None:
        self.last.writes += _lines(addr, len(data))
        self.mem[addr:addr + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def _begin(self) -> None:
        self.last = OpCost()
        self._dma0 = self.alloc.dma_accesses

    def _end(self, name: str) -> None:
        self.last.alloc_dma = self.alloc.dma_accesses - self._dma0
        t = self.totals.setdefault(name, np.zeros(4, dtype=np.int64))
        t += np.array([1, self.last.reads, self.last.writes, self.last.alloc_dma], dtype=np.int64)

    # --- key handling ---------------------------------------------------------------------
    def _check_key(self, key) -> bytes:
        key = bytes(key)
        if not 1 <= len(key) <= self.p.max_key_bytes:
            raise UsageError(f"key length {len(key)} is outside 1..{self.p.max_key_bytes} (max_key_bytes)")
        return key

    def _head(self, h: int) -> int:
        return bucket_index(h, self.p.n_buckets) * 64

    def _walk(self, key: bytes, h: int, full: bool) -> tuple[list[tuple[int, Bucket]], _Found | None]:
        """Read the chain of ``key``'s bucket; stop at the key unless ``full``."""
        chain: list[tuple[int, Bucket]] = []
        found = None
        addr, sec = self._head(h), secondary_hash(h)
        for _ in range(len(self.alloc.used) + 2):
            b = Bucket.unpack(self._rd(addr, 64))
            chain.append((addr, b))
            if found is None:
                found = self._find_in(b, key, sec, len(chain) - 1)
                if found is not None and not full:
                    break
            if not b.valid:
                break
            addr = b.next_ptr * PTR_UNIT
        else:
            raise LayoutError("bucket chain loops")
        return chain, found

    def _find_in(self, b: Bucket, key: bytes, sec: int, bi: int) -> _Found | None:
        for s in b.inline_starts():
            k, v = decode_inline(b.slots, s)
            if k == key:
                return _Found(bi, s, v, None, None)
        for s in range(SLOTS):
            t = b.types[s]
            if t in (T_EMPTY, T_INLINE):
                continue
            ptr, ssec = unpack_offline_slot(b.slots[s * SLOT_BYTES:(s + 1) * SLOT_BYTES])
            if ssec != sec:
                continue
            cls = type_slab_class(t)
            raw = self._rd(ptr * PTR_UNIT, SLAB_SIZES[cls])
            kl, vl = decode_offline_header(raw)
            o = OFFLINE_HEADER_BYTES
            if raw[o:o + kl] == key:
                return _Found(bi, s, raw[o + kl:o + kl + vl], ptr * PTR_UNIT, cls)
        return None

    # --- GET / PUT / DELETE ---------------------------------------------------------------
    def get(self, key) -> bytes | None:
        """Value of ``key`` or None."""
        key = self._check_key(key)
        self._begin()
        _, f = self._walk(key, key_hash(key, self.p.max_key_bytes), full=False)
        self._end("get")
        return None if f is None else f.value

    def put(self, key, value) -> bool:
        """Insert or replace; returns True if the key existed.

        Raises
        ------
        StoreFullError
            No slab for an offline KV or a chained bucket; the store is unchanged.
        ValueError
            Key or value too long.
        """
        key, value = self._check_key(key), bytes(value)
        inline = INLINE_HEADER_BYTES + len(key) + len(value) <= self.p.inline_threshold
        if inline:
            enc = encode_inline(key, value)
        else:
            enc = encode_offline(key, value)
            new_cls = slab_class_for(len(enc))
        h = key_hash(key, self.p.max_key_bytes)
        self._begin()
        try:
            chain, f = self._walk(key, h, full=True)
            bufs = [b.copy() for _, b in chain]
            orig = [b.pack() for _, b in chain]
            to_free: list[tuple[int, int]] = []
            reuse_slab = None
            prefer = None
            if f is not None:
                prefer = f.bi
                if f.slab is None:
                    bufs[f.bi].clear_inline(f.slot)
                else:
                    bufs[f.bi].clear_offline(f.slot)
                    if not inline and f.cls == new_cls:
                        reuse_slab = f.slab
                    else:
                        to_free.append((f.slab, f.cls))
            got: list[tuple[int, int]] = []
            try:
                slab = reuse_slab
                if not inline and slab is None:
                    slab = self.alloc.alloc(new_cls)
                    got.append((slab, new_cls))
                n = inline_slots(len(enc)) if inline else 1
                where = self._place(bufs, n, prefer)
                new_bucket = None
                if where is None:
                    new_bucket = self.alloc.alloc(1)
                    got.append((new_bucket, 1))
            except StoreFullError:
                for a, c in got:
                    self.alloc.free(a, c)
                raise
            # commit: slab first, then buckets
            if not inline:
                self._wr(slab, enc)
            if new_bucket is not None:
                nb = Bucket()
                tgt = nb
                bufs[-1].next_ptr, bufs[-1].valid = new_bucket // PTR_UNIT, True
                s = 0
            else:
                bi, s = where
                tgt = bufs[bi]
            if inline:
                tgt.put_inline(s, enc)
            else:
                tgt.put_offline(s, slab // PTR_UNIT, secondary_hash(h), new_cls)
            if new_bucket is not None:
                self._wr(new_bucket, nb.pack())
            for (addr, _), b, o in zip(chain, bufs, orig, strict=True):
                packed = b.pack()
                if packed != o:
                    self._wr(addr, packed)
            for a, c in to_free:
                self.alloc.free(a, c)
            return f is not None
        finally:
            self._end("put")

    def _place(self, bufs: list[Bucket], n: int, prefer: int | None) -> tuple[int, int] | None:
        order = ([prefer] if prefer is not None else []) + [i for i in range(len(bufs)) if i != prefer]
        for i in order:
            s = bufs[i].free_run(n)
            if s is not None:
                return i, s
        return None

    def delete(self, key) -> bool:
        """Remove ``key``; returns True if it existed."""
        key = self._check_key(key)
        self._begin()
        try:
            chain, f = self._walk(key, key_hash(key, self.p.max_key_bytes), full=False)
            if f is None:
                return False
            addr, b = chain[f.bi]
            if f.slab is None:
                b.clear_inline(f.slot)
            else:
                b.clear_offline(f.slot)
                self.alloc.free(f.slab, f.cls)
            if f.bi > 0 and b.is_empty():
                # unlink the empty chained bucket: predecessor takes over its next pointer
                paddr, pb = chain[f.bi - 1]
                pb.next_ptr, pb.valid = b.next_ptr, b.valid
                self._wr(paddr, pb.pack())
                self.alloc.free(addr, 1)
            else:
                self._wr(addr, b.pack())
            return True
        finally:
            self._end("delete")

    # --- atomics and vector operations ------------------------------------------------------
    def _locate(self, key, name: str) -> tuple[list, _Found | None]:
        key = self._check_key(key)
        self._begin()
        return self._walk(key, key_hash(key, self.p.max_key_bytes), full=False)

    def _elems(self, value: bytes, dt: np.dtype) -> np.ndarray:
        if len(value) % dt.itemsize:
            raise UsageError(f"value of {len(value)} B is not a whole number of {dt.itemsize}-byte elements")
        return np.frombuffer(value, dtype=dt).copy()

    def _fn(self, fid: int) -> Callable:
        if fid not in self.functions:
            raise UsageError(f"function id {fid!r} is not registered; use register_function first")
        return self.functions[fid][1]

    def _writeback(self, chain, f: _Found, new: bytes, lo: int, hi: int) -> None:
        """Write bytes ``lo:hi`` of the value back (inline: the bucket; offline: touched lines)."""
        addr, b = chain[f.bi]
        if f.slab is None:
            klen = b.slots[f.slot * SLOT_BYTES]
            off = f.slot * SLOT_BYTES + INLINE_HEADER_BYTES + klen
            b.slots[off:off + len(new)] = new
            self._wr(addr, b.pack())
        else:
            klen = self.mem[f.slab]
            base = f.slab + OFFLINE_HEADER_BYTES + int(klen)
            if hi > lo:
                self._wr(base + lo, new[lo:hi])

    def _rmw(self, key, fid: int, operand, dtype, index: int | None, name: str):
        dt = _int_dtype(dtype)
        fn = self._fn(fid)
        try:
            chain, f = self._locate(key, name)
            if f is None:
                return None
            old = self._elems(f.value, dt)
            if index is not None:
                if not -len(old) <= index < len(old):
                    raise IndexError(f"element index {index} outside a value of {len(old)} elements")
                index %= len(old)
                sel = slice(index, index + 1)
            else:
                sel = slice(0, len(old))
            opnd = np.asarray(operand)
            opnd = opnd.astype(dt, casting="unsafe") if opnd.dtype.kind in "iub" else None
            if opnd is None:
                raise UsageError(f"operand must be integer, not {np.asarray(operand).dtype}")
            if name == "update_vector" and opnd.shape != old.shape:
                raise UsageError(f"vector operand shape {opnd.shape} must match the value's {old.shape}")
            new = old.copy()
            with np.errstate(over="ignore"):
                new[sel] = np.asarray(fn(old[sel], opnd), dtype=dt)
            self._writeback(chain, f, new.tobytes(), sel.start * dt.itemsize, sel.stop * dt.itemsize)
            return old[sel]
        finally:
            self._end(name)

    def update_scalar(self, key, fid: int, operand: int, index: int = 0, dtype="<i8"):
        """Atomic ``v[index] = f(v[index], operand)``; returns the old element (int) or None if absent."""
        old = self._rmw(key, fid, operand, dtype, index, "update_scalar")
        return None if old is None else old[0].item()

    def fetch_add(self, key, delta: int, index: int = 0, dtype="<i8"):
        """Atomic fetch-and-add on element ``index``; returns the old element or None."""
        return self.update_scalar(key, F_ADD, delta, index, dtype)

    def update_scalar_to_vector(self, key, fid: int, operand: int, dtype="<i8"):
        """Atomic ``v[i] = f(v[i], operand)`` for all i; returns the old vector or None."""
        return self._rmw(key, fid, operand, dtype, None, "update_s2v")

    def update_vector(self, key, fid: int, operand, dtype="<i8"):
        """Atomic ``v[i] = f(v[i], operand[i])``; returns the old vector or None."""
        return self._rmw(key, fid, operand, dtype, None, "update_vector")

    def reduce(self, key, fid: int, dtype="<i8", initial: int | None = None):
        """Fold the value's elements with a registered ufunc; None if the key is absent."""
        dt = _int_dtype(dtype)
        fn = self._fn(fid)
        if not isinstance(fn, np.ufunc):
            raise UsageError(f"function id {fid} is not a numpy ufunc; reduce needs an associative ufunc")
        try:
            _, f = self._locate(key, "reduce")
            if f is None:
                return None
            v = self._elems(f.value, dt)
            kw = {} if initial is None else {"initial": np.asarray(initial).astype(dt, casting="unsafe")}
            with np.errstate(over="ignore"):
                return fn.reduce(v, dtype=dt, **kw).item()
        finally:
            self._end("reduce")

    def filter(self, key, pid: int, operand: int, dtype="<i8"):
        """Elements ``e`` of the value with ``predicate(e, operand)``; None if the key is absent."""
        dt = _int_dtype(dtype)
        if pid not in self.predicates:
            raise UsageError(f"predicate id {pid!r} is not registered")
        try:
            _, f = self._locate(key, "filter")
            if f is None:
                return None
            v = self._elems(f.value, dt)
            return v[self.predicates[pid][1](v, np.asarray(operand).astype(dt, casting="unsafe"))]
        finally:
            self._end("filter")

    # --- inspection -------------------------------------------------------------------------
    def _peek_bucket(self, addr: int) -> Bucket:
        return Bucket.unpack(self.mem[addr:addr + 64].tobytes())

    def check(self) -> dict[bytes, bytes]:
        """Verify every layout invariant and return the stored items (no access counting).

        Raises
        ------
        AssertionError
            On any inconsistency (bad type code, bitmap mismatch, dangling or leaked slab,
            key in the wrong chain, duplicate key, slab region not exactly covered).
        """
        p = self.p
        items: dict[bytes, bytes] = {}
        referenced: dict[int, int] = {}
        for i in range(p.n_buckets):
            addr = i * 64
            while True:
                b = self._peek_bucket(addr)
                bm, inl = 0, set()
                for s in b.inline_starts():
                    lo = s * SLOT_BYTES
                    ln = INLINE_HEADER_BYTES + b.slots[lo] + b.slots[lo + 1]
                    assert ln <= p.inline_threshold, f"inline KV of {ln} B above the threshold"
                    assert b.slots[lo] >= 1
                    bm |= (1 << lo) | (1 << (lo + ln - 1))
                    inl.update(range(s, s + inline_slots(ln)))
                    k, v = decode_inline(b.slots, s)
                    self._check_item(items, k, v, i)
                assert bm == b.bitmap, f"bucket {addr:#x}: bitmap {b.bitmap:#x} != KV extents {bm:#x}"
                for s, t in enumerate(b.types):
                    assert t != 7, f"bucket {addr:#x} slot {s}: reserved type 7"
                    assert (t == T_INLINE) == (s in inl), f"bucket {addr:#x} slot {s}: type/bitmap mismatch"
                    chunk = bytes(b.slots[s * SLOT_BYTES:(s + 1) * SLOT_BYTES])
                    if t == T_EMPTY:
                        assert chunk == bytes(SLOT_BYTES), f"bucket {addr:#x} slot {s}: empty but not zero"
                    elif t != T_INLINE:
                        ptr, sec = unpack_offline_slot(chunk)
                        cls = type_slab_class(t)
                        a = ptr * PTR_UNIT
                        assert self.alloc.used.get(a) == cls, f"offline slot -> unallocated slab {a:#x}"
                        assert a not in referenced, f"slab {a:#x} referenced twice"
                        referenced[a] = cls
                        raw = self.mem[a:a + SLAB_SIZES[cls]].tobytes()
                        kl, vl = decode_offline_header(raw)
                        o = OFFLINE_HEADER_BYTES
                        assert slab_class_for(o + kl + vl) == cls, "slab class is not the smallest fit"
                        assert o + kl + vl > p.inline_threshold, "offline KV small enough to be inline"
                        k, v = raw[o:o + kl], raw[o + kl:o + kl + vl]
                        assert secondary_hash(key_hash(k, p.max_key_bytes)) == sec, "secondary hash mismatch"
                        self._check_item(items, k, v, i)
                if not b.valid:
                    break
                addr = b.next_ptr * PTR_UNIT
                assert self.alloc.used.get(addr) == 1, f"chained bucket {addr:#x} is not a 64 B slab"
                assert addr not in referenced, f"bucket {addr:#x} linked twice"
                referenced[addr] = 1
        assert referenced == self.alloc.used, "allocated slabs leaked or dangling"
        self.alloc.check()
        return items

    def _check_item(self, items: dict, k: bytes, v: bytes, bucket: int) -> None:
        assert k not in items, f"duplicate key {k!r}"
        assert bucket_index(key_hash(k, self.p.max_key_bytes), self.p.n_buckets) == bucket, \
            f"key {k!r} in the wrong chain"
        items[k] = v

    def items(self) -> dict[bytes, bytes]:
        """All stored key/value pairs (runs :meth:`check`)."""
        return self.check()

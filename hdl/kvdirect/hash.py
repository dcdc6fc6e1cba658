"""The KV-Direct key hash in RTL: ``fmix32(CRC-32(key || len))`` of :mod:`hwcosim.models.kvdirect.hashing`.

KV-Direct (Li et al., SOSP 2017) hashes keys to buckets in the NIC pipeline; our model fixes the
function bit-exactly (see :mod:`hwcosim.models.kvdirect.hashing`). For 8 B keys the CRC input is the
fixed 9-byte word ``key || 0x08``; CRC-32 is affine over GF(2), so each of its 32 output bits is
a constant XOR a parity of a fixed subset of the 64 key bits. :func:`crc_matrix` derives those
subsets and the constant from ``zlib.crc32`` itself (no hand-written table), and
:func:`crc32_key` builds the XOR network.

:class:`KeyHash` pipelines the hash in :data:`HASH_STAGES` (5) register stages, advancing when
``en`` is high; each 32x32 constant multiplication keeps the low 32 bits only, so it is three
16x16 products (``aL*cL`` whole, ``aH*cL`` and ``aL*cH`` mod 2^16) and one sum:

- stage 1: the CRC XOR network (32 parity trees of about 32 inputs: ~3 LUT levels);
- stage 2: ``a = x ^ (x >> 16)`` into the three products of ``a * 0x85EBCA6B`` (DSP output registers);
- stage 3: their sum ``x = aL*cL + ((aH*cL + aL*cH) << 16)`` mod 2^32 (two 16-bit adders);
- stage 4: ``b = x ^ (x >> 13)`` into the three products of ``b * 0xC2B2AE35``;
- stage 5: their sum; the output ``h = x ^ (x >> 16)`` is combinational.

Latency 5 enabled cycles, throughput one key per cycle. Resources: ~1,000 XOR inputs in LUTs,
six 16x16 multipliers (DSPs), ~100 flip-flops per stage plus whatever the caller carries. (The
first version had three stages, each multiplication whole in one: a DSP's combinational delay
and a 32-bit carry chain in one cycle.)
"""

from __future__ import annotations

import functools
import zlib

from amaranth import Module
from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.models.kvdirect.rtl_model import HASH_STAGES

__all__ = ["crc_matrix", "crc32_key", "KeyHash", "FMIX_C1", "FMIX_C2", "HASH_STAGES"]

FMIX_C1 = 0x85EBCA6B
FMIX_C2 = 0xC2B2AE35


@functools.cache
def crc_matrix(key_bytes: int = 8) -> tuple[int, tuple[int, ...]]:
    """``(const, rows)``: CRC-32 of ``key || len`` = ``const ^ XOR_j(bit j of key) * col_j``.

    Returns the constant (CRC of the all-zero key) and, for each output bit ``i``, a mask of the
    key bits whose parity it XORs.
    """
    def crc(k: int) -> int:
        return zlib.crc32(k.to_bytes(key_bytes, "little") + bytes([key_bytes])) & 0xFFFFFFFF

    const = crc(0)
    cols = [crc(1 << j) ^ const for j in range(8 * key_bytes)]
    rows = tuple(sum(1 << j for j, c in enumerate(cols) if (c >> i) & 1) for i in range(32))
    return const, rows


def crc32_key(m: Module, key, key_bytes: int = 8):
    """Combinational CRC-32 of ``key || len`` (``key``: a ``8 * key_bytes``-bit value)."""
    const, rows = crc_matrix(key_bytes)
    out = Signal(32, name="crc")
    for i, mask in enumerate(rows):
        bits = [key[j] for j in range(8 * key_bytes) if (mask >> j) & 1]
        par = bits[0]
        for b in bits[1:]:
            par = par ^ b
        m.d.comb += out[i].eq(par ^ ((const >> i) & 1))
    return out


def _mul_low32(m: Module, x, c: int, *, en, name: str):
    """``(x * c) mod 2**32`` over two stages: the three 16x16 partial products that reach the low
    32 bits, each in a registered multiplier, then their sum (a register). Returns the sum."""
    xl, xh = x[:16], x[16:32]
    cl, ch = c & 0xFFFF, c >> 16
    ll = registered_mul(m, xl, Const(cl, 16), en=en, name=f"{name}_ll")
    hl = registered_mul(m, xh, Const(cl, 16), en=en, name=f"{name}_hl")
    lh = registered_mul(m, xl, Const(ch, 16), en=en, name=f"{name}_lh")
    out = Signal(32, name=name)
    with m.If(en):
        m.d.sync += out.eq(Cat(ll[:16], (ll[16:32] + hl[:16] + lh[:16])[:16]))
    return out


class KeyHash(wiring.Component):
    """:data:`HASH_STAGES`-stage pipelined ``fmix32(CRC-32(key || 8))`` (see the module docstring).

    Attributes
    ----------
    en : In(1)
        Advance the pipeline this cycle.
    key : In(64)
        Key entering stage 1 when ``en``.
    h : Out(32)
        Hash of the key that entered :data:`HASH_STAGES` enabled cycles ago.
    """

    def __init__(self):
        super().__init__({"key": In(64), "en": In(1), "h": Out(32)})

    def elaborate(self, platform):
        m = Module()
        c = crc32_key(m, self.key)
        x1 = Signal(32, name="hx1")
        with m.If(self.en):
            m.d.sync += x1.eq(c)
        a = Signal(32, name="ha")
        m.d.comb += a.eq(x1 ^ (x1 >> 16))
        x2 = _mul_low32(m, a, FMIX_C1, en=self.en, name="hx2")
        b = Signal(32, name="hb")
        m.d.comb += b.eq(x2 ^ (x2 >> 13))
        x3 = _mul_low32(m, b, FMIX_C2, en=self.en, name="hx3")
        m.d.comb += self.h.eq(x3 ^ (x3 >> 16))
        return m

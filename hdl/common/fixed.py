"""Fixed-point requantisation in Amaranth, mirroring :func:`hwcosim.models.fixedpoint.requantize`.

Round half up (add half an output LSB, arithmetic shift right), then saturate. Change this
and the model together, or neither.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Value, signed
from hwcosim.models.fixedpoint import Q

__all__ = ["requantize", "round_to", "saturate"]


def requantize(value: Value, src_frac: int, fmt: Q) -> Value:
    """A signed ``fmt.width``-bit expression of ``value`` (signed, ``src_frac`` fraction bits)."""
    return saturate(round_to(value, src_frac, fmt), fmt)


def round_to(value: Value, src_frac: int, fmt: Q) -> Value:
    """``value`` (``src_frac`` fraction bits) rounded to ``fmt``'s fraction bits, not yet clipped:
    the first half of :func:`requantize` (``requantize == saturate(round_to(...))``), for a
    pipeline that registers the rounding adder's sum before the clip."""
    shift = src_frac - fmt.frac_bits
    if shift > 0:
        return (value + (1 << (shift - 1))) >> shift
    if shift < 0:
        return value << (-shift)
    return value


def saturate(value: Value, fmt: Q) -> Value:
    """``value`` (an integer in ``fmt``'s raw units) clipped to ``fmt``'s range, as a signed
    ``fmt.width``-bit expression.

    The range is a whole two's-complement word, so the clip is a bit test, not a comparison:
    ``value`` fits iff its bits from ``fmt.width - 1`` up are all equal (all zero when ``value`` is
    unsigned), and otherwise its sign picks the limit. A comparison against the limits is a carry
    chain behind the one that made ``value`` (the critical path of the BBS LSTM's gate sum); the
    bit test is a small LUT tree.
    """
    w = fmt.width
    hi = Const(fmt.max_raw, signed(w))
    lo = Const(fmt.min_raw, signed(w))
    shape = value.shape()
    wv = len(value)
    if shape.signed and wv <= w:            # always fits: sign-extended to the format's width
        return Cat(value, value[-1].replicate(w - wv)).as_signed()
    if not shape.signed and wv < w:
        return Cat(value, Const(0, w - wv)).as_signed()
    top = value[w - 1:]
    if shape.signed:
        fits = (top == 0) | (top == (1 << len(top)) - 1)
        return Mux(fits, value[:w].as_signed(), Mux(value[-1], lo, hi))
    return Mux(top == 0, value[:w].as_signed(), hi)

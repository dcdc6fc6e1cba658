"""Fixed-point requantisation in Amaranth, mirroring :func:`models.fixedpoint.requantize`.

Round half up (add half an output LSB, arithmetic shift right), then saturate. Change this
and the model together, or neither.
"""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Value, signed

from models.fixedpoint import Q

__all__ = ["requantize"]


def requantize(value: Value, src_frac: int, fmt: Q) -> Value:
    """A signed ``fmt.width``-bit expression of ``value`` (signed, ``src_frac`` fraction bits)."""
    shift = src_frac - fmt.frac_bits
    if shift > 0:
        rounded = (value + (1 << (shift - 1))) >> shift
    elif shift < 0:
        rounded = value << (-shift)
    else:
        rounded = value
    hi = Const(fmt.max_raw, signed(fmt.width))
    lo = Const(fmt.min_raw, signed(fmt.width))
    return Mux(rounded > hi, hi, Mux(rounded < lo, lo, rounded[: fmt.width].as_signed()))

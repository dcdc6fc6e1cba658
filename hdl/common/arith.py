"""Arithmetic building blocks shared by the designs."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Value, signed
from hwcosim.hdl.common.fixed import requantize

__all__ = ["tree_sum", "count_saturating", "requantize_parallel"]


def tree_sum(terms: list):
    """Balanced adder tree over Amaranth values (each sum widens by one bit, so it cannot overflow).

    Combinational; depth ceil(log2(len(terms))) adders.
    """
    if not terms:
        raise ValueError("an adder tree needs at least one term")
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def count_saturating(m, pairs, domain: str = "sync") -> None:
    """For each ``(counter, condition)``: add one per cycle the condition holds, sticking at the
    counter's maximum (performance counters never wrap silently)."""
    for ctr, cond in pairs:
        with m.If(cond & (ctr != (1 << len(ctr)) - 1)):
            m.d[domain] += ctr.eq(ctr + 1)


def requantize_parallel(value: Value, src_frac: int, fmt) -> Value:
    """:func:`hwcosim.hdl.common.fixed.requantize`, the same value for every input, one carry chain deep.

    ``requantize`` rounds (an adder) and then compares the rounded sum with the format's limits
    (two more carry chains behind it). Here the limits are compared with ``value`` itself, against
    constants moved through the rounding: ``(v + half) >> s > hi`` iff ``v >= ((hi + 1) << s) - half``
    and ``(v + half) >> s < lo`` iff ``v < (lo << s) - half``; the rounding adder and both
    comparators run side by side and a multiplexer picks the result. For pipeline stages where
    the clock needs the requantisation in one carry-chain delay. Without a right shift
    (``src_frac <= fmt.frac_bits``) it is :func:`~hdl.common.fixed.requantize`.
    """
    shift = src_frac - fmt.frac_bits
    if shift <= 0:
        return requantize(value, src_frac, fmt)
    half = 1 << (shift - 1)
    rounded = (value + half) >> shift
    hi = Const(fmt.max_raw, signed(fmt.width))
    lo = Const(fmt.min_raw, signed(fmt.width))
    return Mux(value >= ((fmt.max_raw + 1) << shift) - half, hi,
               Mux(value < (fmt.min_raw << shift) - half, lo, rounded[: fmt.width].as_signed()))

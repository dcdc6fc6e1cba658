"""Arithmetic building blocks shared by the designs."""

from __future__ import annotations

__all__ = ["tree_sum", "count_saturating"]


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

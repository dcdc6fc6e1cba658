"""Fixed-point formats and the arithmetic rules every golden model and RTL block share.

A format ``Q(int_bits, frac_bits)`` is a signed two's-complement number of
``int_bits + frac_bits`` bits whose ``int_bits`` include the sign bit. ``Q(1, 7)`` is an
8-bit number in [-1, 1 - 2**-7]; ``Q(4, 12)`` a 16-bit number in [-8, 8 - 2**-12].
Raw values are held as numpy ``int64`` arrays of the integer ``x * 2**frac_bits``.

Rules (mirrored in :mod:`hwcosim.hdl.common.fixed`; change both or neither):

- **Quantise** (software side, float -> raw): round to nearest, ties to even
  (``numpy.rint``), then saturate to the format's range. NaN is refused.
- **Requantise** (hardware side, raw with ``src_frac`` fractional bits -> a format): when
  bits are dropped, round half up, i.e. add ``2**(shift-1)`` and shift right arithmetically
  (floor); when bits are added, shift left. Then saturate to the target range.
- Products and sums inside a datapath are exact (accumulators are sized so they cannot
  overflow); only requantisation rounds or saturates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["Q", "quantize", "dequantize", "requantize", "saturate", "acc_bits"]


@dataclass(frozen=True)
class Q:
    """A signed fixed-point format.

    Parameters
    ----------
    int_bits : int
        Integer bits, sign bit included (>= 1).
    frac_bits : int
        Fractional bits (>= 0).

    Raises
    ------
    ValueError
        If the format has no sign bit, negative fractional bits, or is wider than 32 bits
        (so that products and their sums stay exact in ``int64``).
    """

    int_bits: int
    frac_bits: int

    def __post_init__(self):
        if not isinstance(self.int_bits, int) or not isinstance(self.frac_bits, int):
            raise UsageError(f"Q() takes integers, not {self.int_bits!r}, {self.frac_bits!r}")
        if self.int_bits < 1:
            raise UsageError(f"Q int_bits includes the sign bit and must be >= 1, not {self.int_bits}")
        if self.frac_bits < 0:
            raise UsageError(f"Q frac_bits must be >= 0, not {self.frac_bits}")
        if self.width > 32:
            raise UsageError(f"Q({self.int_bits}, {self.frac_bits}) is {self.width} bits; at most 32 are supported")

    @property
    def width(self) -> int:
        return self.int_bits + self.frac_bits

    @property
    def min_raw(self) -> int:
        return -(1 << (self.width - 1))

    @property
    def max_raw(self) -> int:
        return (1 << (self.width - 1)) - 1

    @property
    def lsb(self) -> float:
        """The value of one unit in the last place."""
        return 2.0 ** -self.frac_bits

    @property
    def max_value(self) -> float:
        return self.max_raw * self.lsb

    def __str__(self) -> str:
        return f"Q{self.int_bits}.{self.frac_bits}"

    def to_dict(self) -> dict:
        return {"int_bits": self.int_bits, "frac_bits": self.frac_bits}

    @classmethod
    def from_dict(cls, d: dict) -> Q:
        try:
            return cls(int(d["int_bits"]), int(d["frac_bits"]))
        except (KeyError, TypeError, OverflowError) as e:
            raise UsageError(f"a fixed-point format needs int_bits and frac_bits, got {d!r}") from e

    @classmethod
    def parse(cls, text: str) -> Q:
        """Parse ``"Q2.6"`` or ``"2.6"`` (int bits incl. sign . frac bits)."""
        t = text.strip().upper().removeprefix("Q")
        try:
            i, f = t.split(".")
            return cls(int(i), int(f))
        except ValueError as e:
            raise UsageError(
                f"cannot read fixed-point format {text!r}: write Q<int_bits>.<frac_bits>, e.g. Q2.6 "
                "(int_bits include the sign bit)"
            ) from e

    @classmethod
    def fitting(cls, max_abs: float, width: int) -> Q:
        """The format of ``width`` bits with the most fractional bits that holds ``max_abs``."""
        if not np.isfinite(max_abs):
            raise UsageError(f"cannot choose a format for a non-finite magnitude {max_abs}")
        for int_bits in range(1, width + 1):
            q = cls(int_bits, width - int_bits)
            if max_abs <= q.max_value + q.lsb / 2:
                return q
        return cls(width, 0)


def saturate(raw: np.ndarray, fmt: Q) -> np.ndarray:
    """Clip raw integers to ``fmt``'s range (int64 in, int64 out)."""
    return np.clip(np.asarray(raw, dtype=np.int64), fmt.min_raw, fmt.max_raw)


def quantize(x: np.ndarray, fmt: Q) -> np.ndarray:
    """Float -> raw ``int64``: round to nearest (ties to even), saturate. NaN is refused."""
    x = np.asarray(x, dtype=np.float64)
    if np.isnan(x).any():
        raise UsageError("cannot quantise NaN values; clean the weights first")
    scaled = np.rint(np.clip(x * (1 << fmt.frac_bits), fmt.min_raw - 1, fmt.max_raw + 1))
    return saturate(scaled.astype(np.int64), fmt)


def dequantize(raw: np.ndarray, fmt: Q) -> np.ndarray:
    """Raw -> float64."""
    return np.asarray(raw, dtype=np.int64).astype(np.float64) * fmt.lsb


def requantize(raw: np.ndarray, src_frac: int, fmt: Q) -> np.ndarray:
    """Exact raw value with ``src_frac`` fractional bits -> ``fmt`` (round half up, saturate)."""
    raw = np.asarray(raw, dtype=np.int64)
    shift = src_frac - fmt.frac_bits
    if shift > 0:
        raw = (raw + (1 << (shift - 1))) >> shift
    elif shift < 0:
        raw = raw << (-shift)
    return saturate(raw, fmt)


def acc_bits(a: Q, b: Q, terms: int) -> int:
    """Width of an accumulator that sums ``terms`` products of ``a`` x ``b`` without overflow."""
    if terms < 1:
        raise UsageError(f"an accumulator sums at least one term, not {terms}")
    return a.width + b.width + max(0, int(terms - 1).bit_length())

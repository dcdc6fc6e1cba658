"""Small validation helpers shared by the pattern modules (not a pattern; registers nothing)."""

from __future__ import annotations

import numpy as np
from hwcosim.pruning.base import PatternError

__all__ = ["positive_int", "pair", "split", "as_mask", "sparsity_value"]


def positive_int(value, what: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum`` or :class:`PatternError` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PatternError(f"{what} must be an integer >= {minimum}, not {value!r}")
    return int(value)


def pair(value, what: str) -> tuple[int, int]:
    """``value`` (an int pair, list, or ``"RxC"`` text) as a tuple of two positive ints."""
    if isinstance(value, str):
        parts = value.lower().replace("*", "x").split("x")
        try:
            value = tuple(int(p) for p in parts)
        except ValueError:
            raise PatternError(f"{what} {value!r} is not of the form RxC, e.g. 4x4") from None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise PatternError(f"{what} must be two integers (rows, cols), e.g. (4, 4), not {value!r}")
    return positive_int(value[0], f"{what} rows"), positive_int(value[1], f"{what} cols")


def split(shape: tuple[int, ...], tile: tuple[int, int], what: str) -> tuple[int, int]:
    """Tiles per axis of a 2-D ``shape`` cut into ``tile``; refuses shapes that do not divide."""
    rows, cols = shape
    th, tw = tile
    if rows % th or cols % tw:
        raise PatternError(
            f"a {rows} x {cols} matrix does not split into {th} x {tw} {what}s; "
            f"choose a {what} that divides the shape or pad the matrix to a multiple of it"
        )
    return rows // th, cols // tw


def as_mask(mask, ndim: int | None = 2, what: str = "mask") -> np.ndarray:
    """A mask as a boolean array of rank ``ndim`` (or :class:`PatternError`)."""
    m = np.asarray(mask)
    if m.dtype != bool:
        if m.dtype.kind not in "biu" or not np.isin(m, (0, 1)).all():
            raise PatternError(f"a {what} holds booleans (or 0/1), not dtype {m.dtype}")
        m = m.astype(bool)
    if ndim is not None and m.ndim != ndim:
        raise PatternError(f"a {what} is {ndim}-D, got shape {m.shape}")
    return m


def sparsity_value(value, what: str) -> None:
    """Refuse a sparsity that is not a finite number in [0, 1) (the group-size-specific upper
    bound is checked later by :func:`hwcosim.pruning.base.kept_per_group`)."""
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or not 0 <= value < 1:
        raise PatternError(f"{what} sparsity must be a number in [0, 1), not {value!r}")

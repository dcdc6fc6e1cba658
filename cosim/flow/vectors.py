"""Input vectors from a user's ``.npy`` file (``hwcosim sim --vector``, the board sessions, the fuzzer)."""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["load_vectors"]


def load_vectors(path: str, cols: int) -> np.ndarray:
    """The vectors in the ``.npy`` file ``path`` as float64 of shape ``(n, cols)`` (one vector of shape
    ``(cols,)`` becomes ``(1, cols)``); :class:`~hwcosim.models.errors.UsageError` naming the problem
    for an unreadable file, another shape, a non-numeric dtype or NaN/Inf."""
    from hwcosim.pruning.io import WeightIOError, read_npy

    try:
        x = read_npy(path)
    except WeightIOError as e:
        raise UsageError(f"cannot read vectors: {e}; give a .npy of shape (cols,) or (n, cols)") from None
    x = np.atleast_2d(x)
    if x.ndim != 2 or x.shape[1] != cols or x.dtype.kind not in "fiu":
        raise UsageError(f"vectors in {path} have shape {x.shape}; the matrix needs (n, {cols}) numbers")
    if not np.isfinite(x).all():
        raise UsageError(f"vectors in {path} hold NaN/Inf; clean them first")
    return x.astype(np.float64)

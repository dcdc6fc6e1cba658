"""N:M fine-grained structured sparsity: in every group of ``M`` consecutive weights of a row,
exactly ``N`` are kept.

NVIDIA's sparse tensor cores (Ampere and later; Mishra et al., "Accelerating Sparse Deep
Neural Networks", arXiv 2104.08378, 2021) execute 2:4 (and 1:2 for 32-bit types) along the
reduction (K) dimension, i.e. along the rows of a weight matrix ``W`` in ``y = W x``; other
N:M ratios (4:8, 1:4, ...) appear in the literature (e.g. Zhou et al., "Learning N:M
Fine-grained Structured Sparse Neural Networks From Scratch", ICLR 2021). Within each group the
``N`` largest magnitudes survive, ties to the lower column. N:M is FSS
(:mod:`hwcosim.pruning.patterns.fss`) with a ``1 x M`` region, and BBS with ``banks = cols / M``.
The compressed storage is in :mod:`hwcosim.pruning.formats.nm`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, register
from hwcosim.pruning.patterns._common import as_mask, positive_int
from hwcosim.pruning.patterns._select import topk_groups

__all__ = ["NM"]


@register
@dataclass(frozen=True)
class NM(Pattern):
    """``n`` kept out of every ``m`` consecutive weights along each row.

    Parameters
    ----------
    n : int
        Kept per group, ``1 <= n <= m`` (``n == m`` is dense).
    m : int
        Group length (>= 2); the column count must divide by it.
    """

    name = "nm"
    n: int = 2
    m: int = 4

    def __post_init__(self):
        positive_int(self.m, "N:M group length m", minimum=2)
        positive_int(self.n, "N:M kept count n")
        if self.n > self.m:
            raise PatternError(f"N:M keeps n={self.n} of m={self.m}: n cannot exceed m; e.g. use 2:4")

    @property
    def sparsity(self) -> float:
        return 1.0 - self.n / self.m

    def groups(self, cols: int) -> int:
        if cols % self.m:
            raise PatternError(
                f"{cols} columns do not split into groups of m={self.m}; "
                f"pad the matrix to a multiple of {self.m} columns"
            )
        return cols // self.m

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        rows, cols = w.shape
        return topk_groups(w.reshape(rows, self.groups(cols), self.m), self.n).reshape(rows, cols)

    def check(self, mask: np.ndarray) -> None:
        m = as_mask(mask)
        rows, cols = m.shape
        counts = m.reshape(rows, self.groups(cols), self.m).sum(axis=-1)
        if (counts != self.n).any():
            r, g = np.argwhere(counts != self.n)[0]
            raise PatternError(
                f"row {r}, group {g} keeps {counts[r, g]} of {self.m}, "
                f"expected exactly {self.n} ({self.n}:{self.m})"
            )

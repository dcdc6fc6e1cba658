"""FSS, fine-grained structured sparsity: Zhang, Cao, Dai, Geng, Yao, Xiao, Liu, Wu, Zhang,
Sun, Ji, Wang, Huang, "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference",
IEEE TCAD 44(7), 2025 (doi 10.1109/TCAD.2024.3524356).

"Local randomness, global regularity": the matrix is tiled into regions of ``r_h x r_w``
weights; every region keeps the same number ``N`` of nonzeros (global regularity: every
region costs the hardware the same work and storage), placed anywhere inside its region
(local randomness: the ``N`` largest magnitudes of the region, ties to the lower in-region
index in row-major order). Our reading of the paper (see SPECS.md): a ``1 x M`` region with
``N`` kept is N:M (:mod:`hwcosim.pruning.patterns.nm`); a ``1 x bank_size`` region is one BBS bank
(:mod:`hwcosim.pruning.patterns.bank_balanced`); the tests check both equalities mask for mask.
The region-major storage format is :mod:`hwcosim.pruning.formats.fss`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._common import as_mask, pair, positive_int, sparsity_value, split
from hwcosim.pruning.patterns._select import topk_groups

__all__ = ["FSS", "to_regions", "from_regions"]


def to_regions(a: np.ndarray, region: tuple[int, int]) -> np.ndarray:
    """(rows, cols) -> (rows // r_h, cols // r_w, r_h * r_w), region-major, row-major inside."""
    rh, rw = region
    gr, gc = split(a.shape, region, "region")
    return a.reshape(gr, rh, gc, rw).transpose(0, 2, 1, 3).reshape(gr, gc, rh * rw)


def from_regions(t: np.ndarray, region: tuple[int, int]) -> np.ndarray:
    """Inverse of :func:`to_regions`: (gr, gc, r_h * r_w) -> (gr * r_h, gc * r_w)."""
    rh, rw = region
    gr, gc, _ = t.shape
    return t.reshape(gr, gc, rh, rw).transpose(0, 2, 1, 3).reshape(gr * rh, gc * rw)


@register
@dataclass(frozen=True)
class FSS(Pattern):
    """The same ``n`` nonzeros in every ``r_h x r_w`` region, free placement inside it.

    Parameters
    ----------
    region : (int, int)
        Region shape ``(r_h, r_w)`` (also a list or ``"2x8"``), at least 2 elements; the
        matrix shape must divide by it.
    n : int, optional
        Nonzeros per region, ``1 <= n <= r_h * r_w``. Give ``n`` or ``sparsity``, not both.
    sparsity : float, optional
        Fraction pruned; ``n = round(r_h * r_w * (1 - sparsity))`` (>= 1).
    """

    name = "fss"
    region: tuple[int, int] = (1, 16)
    n: int | None = None
    sparsity: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "region", pair(self.region, "FSS region"))
        if self.size < 2:
            raise PatternError("a 1x1 FSS region leaves nothing to choose; use a region of >= 2 weights")
        if (self.n is None) == (self.sparsity is None):
            raise PatternError(
                "FSS needs exactly one of n (nonzeros per region) or sparsity, "
                f"got n={self.n!r}, sparsity={self.sparsity!r}"
            )
        if self.n is not None:
            positive_int(self.n, "FSS nonzeros per region n")
            if self.n > self.size:
                raise PatternError(
                    f"FSS n={self.n} exceeds the region size {self.size} "
                    f"({self.region[0]}x{self.region[1]}); choose n <= {self.size}"
                )
        else:
            sparsity_value(self.sparsity, "FSS")
            kept_per_group(self.size, self.sparsity, "region")

    @property
    def size(self) -> int:
        return self.region[0] * self.region[1]

    @property
    def k(self) -> int:
        """Nonzeros kept per region."""
        if self.n is not None:
            return int(self.n)
        return kept_per_group(self.size, self.sparsity, "region")

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        return from_regions(topk_groups(to_regions(w, self.region), self.k), self.region)

    def check(self, mask: np.ndarray) -> None:
        m = as_mask(mask)
        counts = to_regions(m, self.region).sum(axis=-1)
        if (counts != self.k).any():
            i, j = np.argwhere(counts != self.k)[0]
            raise PatternError(
                f"region ({i}, {j}) keeps {counts[i, j]} weights, expected {self.k} "
                f"in every {self.region[0]}x{self.region[1]} region"
            )

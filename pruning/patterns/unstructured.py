"""Unstructured magnitude pruning: the "random sparsity" baseline of Yao et al., "Balanced
Sparsity for Efficient DNN Inference on GPU", AAAI 2019 (arXiv 1811.00206), and of Cao et al.,
FPGA 2019 (BBS).

The ``k = round(size * (1 - sparsity))`` largest magnitudes of the whole tensor survive
(global per tensor, not per row). The count is exact: ties at the threshold magnitude go to the
lower flat (C-order) index, so the result is deterministic and never sparser than asked,
unlike a ``|w| > threshold`` rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._common import as_mask, sparsity_value
from hwcosim.pruning.patterns._select import topk_flat

__all__ = ["Unstructured"]


@register
@dataclass(frozen=True)
class Unstructured(Pattern):
    """Global magnitude pruning of a tensor of any rank.

    Parameters
    ----------
    sparsity : float
        Fraction pruned, in [0, (size - 1) / size]; ``round(size * (1 - sparsity))`` (>= 1)
        weights are kept.

    Raises
    ------
    PatternError
        Sparsity out of range, non-finite weights, an empty tensor.
    """

    name = "unstructured"
    sparsity: float = 0.5

    def __post_init__(self):
        sparsity_value(self.sparsity, "unstructured")

    def k(self, size: int) -> int:
        """Weights kept in a tensor of ``size`` elements."""
        return kept_per_group(size, self.sparsity, "tensor")

    def mask(self, w: np.ndarray) -> np.ndarray:
        """Keep-mask of ``w`` (any shape): exactly ``k(w.size)`` True."""
        w = check_weights(w, ndim=None)
        return topk_flat(w, self.k(w.size))

    def check(self, mask: np.ndarray) -> None:
        m = as_mask(mask, ndim=None)
        got, want = int(m.sum()), self.k(m.size)
        if got != want:
            raise PatternError(f"unstructured mask keeps {got} of {m.size} weights, expected {want}")

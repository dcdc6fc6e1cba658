"""Bank-balanced sparsity (BBS): Cao et al., "Efficient and Effective Sparse LSTM on FPGA with
Bank-Balanced Sparsity", FPGA 2019 (doi 10.1145/3289602.3293898).

Each row of a 2-D weight matrix is split into ``banks`` equal banks of consecutive columns;
every bank keeps the same ``k`` largest-magnitude weights, chosen independently per bank.
Unlike a threshold at the k-th magnitude (which prunes all ties and can leave a bank sparser
than asked), this is an exact top-k: ties are broken towards the lower column index, so every
bank holds exactly ``k`` nonzero slots. That constant count is what lets the CSB format drop
row pointers and lets every multiplier of the SpMxV engine stay busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._select import topk_groups

__all__ = ["BankBalanced"]


@register
@dataclass(frozen=True)
class BankBalanced(Pattern):
    """Row banks of equal size, the same number of kept weights in every bank.

    Parameters
    ----------
    banks : int
        Banks per row; the column count must divide by it.
    sparsity : float
        Fraction pruned, in [0, (bank_size - 1) / bank_size]. The kept count per bank is
        ``round(bank_size * (1 - sparsity))`` (at least 1), so the achieved sparsity is the
        nearest one the bank size allows.
    """

    name = "bbs"
    banks: int = 4
    sparsity: float = 0.5

    def __post_init__(self):
        if not isinstance(self.banks, (int, np.integer)) or self.banks < 1:
            raise PatternError(f"bank count must be a positive integer, not {self.banks!r}")

    def bank_size(self, cols: int) -> int:
        if cols % self.banks:
            raise PatternError(
                f"{cols} columns do not split into {self.banks} equal banks; "
                f"choose a bank count that divides {cols} or pad the matrix"
            )
        size = cols // self.banks
        if size < 2:
            raise PatternError(f"banks of {size} column leave nothing to prune; use fewer banks")
        return size

    def k(self, cols: int) -> int:
        """Nonzeros kept per bank for a matrix of ``cols`` columns."""
        return kept_per_group(self.bank_size(cols), self.sparsity, "bank")

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        rows, cols = w.shape
        size, k = self.bank_size(cols), self.k(cols)
        # exact top-k per bank, ties to the lower column (same mask as pruning.base.topk_mask)
        return topk_groups(w.reshape(rows, self.banks, size), k).reshape(rows, cols)

    def check(self, mask: np.ndarray) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.ndim != 2:
            raise PatternError(f"a BBS mask is 2-D, got shape {mask.shape}")
        rows, cols = mask.shape
        size = self.bank_size(cols)
        counts = mask.reshape(rows, self.banks, size).sum(axis=-1)
        if counts.min() != counts.max():
            raise PatternError(
                f"banks hold unequal nonzero counts ({counts.min()}..{counts.max()}); not bank-balanced"
            )
        if counts.flat[0] != self.k(cols):
            raise PatternError(f"banks keep {counts.flat[0]} weights, expected {self.k(cols)}")

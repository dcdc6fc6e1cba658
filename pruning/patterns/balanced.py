"""Balanced Sparsity: Yao, Cao, Xiao, Zhang, Nie, "Balanced Sparsity for Efficient DNN
Inference on GPU", AAAI 2019 (arXiv 1811.00206).

Each row is split into blocks of ``block`` consecutive columns (the paper's "balance range")
and every block keeps the same number of largest-magnitude weights, so every GPU thread that
owns a block does the same work.

Relation to BBS (Cao et al., FPGA 2019): **mask for mask the same** as
:class:`hwcosim.pruning.patterns.bank_balanced.BankBalanced` with ``banks = cols // block`` (same exact
top-k per group, same tie rule: lower column index wins); ``tests/pruning/test_patterns.py`` checks it.
The two differ only in how they are parameterised, which follows the hardware: Balanced
Sparsity fixes the *block size* (a GPU kernel's tile width, independent of the row length),
BBS fixes the *bank count* (the number of multipliers / vector memories of an FPGA PE), so
the bank size follows from the row length. Because the masks coincide, the CLI writes a
balanced-pruned matrix in the CSB format of BBS. (The paper also prunes iteratively during
training; that schedule lives in :mod:`hwcosim.pruning.schedule`, not here.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._common import as_mask, positive_int, sparsity_value
from hwcosim.pruning.patterns._select import topk_groups

__all__ = ["Balanced"]


@register
@dataclass(frozen=True)
class Balanced(Pattern):
    """Row blocks of ``block`` columns, each keeping ``round(block * (1 - sparsity))`` weights.

    Parameters
    ----------
    block : int
        Block (balance range) width in columns, >= 2; the column count must divide by it.
    sparsity : float
        Fraction pruned per block, in [0, (block - 1) / block].
    """

    name = "balanced"
    block: int = 32
    sparsity: float = 0.5

    def __post_init__(self):
        positive_int(self.block, "balanced block size", minimum=2)
        sparsity_value(self.sparsity, "balanced")
        self.k()

    def k(self) -> int:
        """Weights kept per block."""
        return kept_per_group(self.block, self.sparsity, "block")

    def banks(self, cols: int) -> int:
        """The BBS bank count that gives the same mask for ``cols`` columns."""
        if cols % self.block:
            raise PatternError(
                f"{cols} columns do not split into blocks of {self.block}; "
                f"choose a block size that divides {cols} or pad the matrix"
            )
        return cols // self.block

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        rows, cols = w.shape
        nb = self.banks(cols)
        return topk_groups(w.reshape(rows, nb, self.block), self.k()).reshape(rows, cols)

    def check(self, mask: np.ndarray) -> None:
        m = as_mask(mask)
        rows, cols = m.shape
        counts = m.reshape(rows, self.banks(cols), self.block).sum(axis=-1)
        if (counts != self.k()).any():
            raise PatternError(
                f"blocks keep {counts.min()}..{counts.max()} weights, expected "
                f"{self.k()} in every block of {self.block}; not balanced"
            )

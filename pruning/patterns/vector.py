"""Vector sparsity: ``1 x v`` (along a row) or ``v x 1`` (along a column) vectors kept or
pruned whole, by vector norm, globally per matrix.

The vector-sparsity baseline of Yao et al., AAAI 2019 (arXiv 1811.00206) (after Mao et al.,
"Exploring the Granularity of Sparsity in CNNs", 2017). It is block sparsity with a one-row or
one-column tile; the selection and tie rule are those of :mod:`hwcosim.pruning.patterns.block`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._common import positive_int, sparsity_value
from hwcosim.pruning.patterns._select import topk_flat
from hwcosim.pruning.patterns.block import _NORMS, block_scores, check_blocks, expand

__all__ = ["Vector"]


@register
@dataclass(frozen=True)
class Vector(Pattern):
    """Vectors of ``length`` weights kept or pruned whole.

    Parameters
    ----------
    length : int
        Vector length ``v`` (>= 2).
    orient : {"row", "col"}
        ``"row"``: ``1 x v`` vectors of consecutive columns of a row; ``"col"``: ``v x 1``
        vectors of consecutive rows of a column.
    sparsity : float
        Fraction of vectors pruned.
    norm : {"l2", "l1"}
    """

    name = "vector"
    length: int = 4
    orient: str = "row"
    sparsity: float = 0.5
    norm: str = "l2"

    def __post_init__(self):
        positive_int(self.length, "vector length", minimum=2)
        if self.orient not in ("row", "col"):
            raise PatternError(f"vector orient must be 'row' (1 x v) or 'col' (v x 1), not {self.orient!r}")
        if self.norm not in _NORMS:
            raise PatternError(f"vector norm must be one of {_NORMS}, not {self.norm!r}")
        sparsity_value(self.sparsity, "vector")

    @property
    def tile(self) -> tuple[int, int]:
        return (1, self.length) if self.orient == "row" else (self.length, 1)

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        s = block_scores(w, self.tile, self.norm)
        return expand(topk_flat(s, kept_per_group(s.size, self.sparsity, "vector")), self.tile)

    def check(self, mask: np.ndarray) -> None:
        check_blocks(mask, self.tile, self.sparsity, "vector")

"""Block sparsity: whole ``b_r x b_c`` tiles are kept or pruned by their norm.

The block-sparsity baseline of Yao et al., AAAI 2019 (arXiv 1811.00206) and of the BBS paper
(Cao et al., FPGA 2019); block-sparse GPU kernels (e.g. OpenAI's blocksparse, scipy's BSR)
store exactly this structure. Blocks are scored by their L2 (default) or L1 norm and the
``round(n_blocks * (1 - sparsity))`` best blocks of the whole matrix are kept (global per
tensor). Ties between equal scores go to the lower block index in row-major block order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.pruning.base import Pattern, PatternError, check_weights, kept_per_group, register
from hwcosim.pruning.patterns._common import as_mask, pair, sparsity_value, split
from hwcosim.pruning.patterns._select import topk_flat

__all__ = ["Block", "block_scores"]

_NORMS = ("l2", "l1")


def block_scores(w: np.ndarray, block: tuple[int, int], norm: str) -> np.ndarray:
    """Norm of every ``block`` tile of ``w`` (rows, cols) -> (rows // b_r, cols // b_c).

    L2 is returned squared (the same order, no square root needed).
    """
    br, bc = block
    gr, gc = split(w.shape, block, "block")
    t = w.reshape(gr, br, gc, bc)
    if norm == "l1":
        return np.abs(t).sum(axis=(1, 3))
    return np.einsum("ijkl,ijkl->ik", t, t)


def expand(block_mask: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """Repeat a per-block mask (gr, gc) to element level (gr * b_r, gc * b_c)."""
    br, bc = block
    gr, gc = block_mask.shape
    return np.broadcast_to(block_mask[:, None, :, None], (gr, br, gc, bc)).reshape(gr * br, gc * bc)


def check_blocks(mask: np.ndarray, block: tuple[int, int], sparsity: float, what: str) -> None:
    """Shared invariant of block and vector masks: uniform tiles, the expected tile count."""
    m = as_mask(mask)
    gr, gc = split(m.shape, block, what)
    t = m.reshape(gr, block[0], gc, block[1])
    anyk, allk = t.any(axis=(1, 3)), t.all(axis=(1, 3))
    if (anyk != allk).any():
        bad = np.argwhere(anyk != allk)[0]
        raise PatternError(
            f"{what} {tuple(int(x) for x in bad)} is partly kept; a {what} is kept or pruned whole"
        )
    want = kept_per_group(gr * gc, sparsity, what)
    if int(allk.sum()) != want:
        raise PatternError(f"mask keeps {int(allk.sum())} of {gr * gc} {what}s, expected {want}")


@register
@dataclass(frozen=True)
class Block(Pattern):
    """``b_r x b_c`` blocks kept or pruned whole, by block norm, globally per matrix.

    Parameters
    ----------
    block : (int, int)
        Tile shape ``(b_r, b_c)``; also accepted as a list or ``"4x4"``. The matrix shape must
        divide by it.
    sparsity : float
        Fraction of blocks pruned, in [0, (n_blocks - 1) / n_blocks].
    norm : {"l2", "l1"}
        Block score.
    """

    name = "block"
    block: tuple[int, int] = (4, 4)
    sparsity: float = 0.5
    norm: str = "l2"

    def __post_init__(self):
        object.__setattr__(self, "block", pair(self.block, "block"))
        if self.norm not in _NORMS:
            raise PatternError(f"block norm must be one of {_NORMS}, not {self.norm!r}")
        if self.block == (1, 1):
            raise PatternError("a 1x1 block is unstructured pruning; use --pattern unstructured")
        sparsity_value(self.sparsity, "block")

    def mask(self, w: np.ndarray) -> np.ndarray:
        w = check_weights(w)
        s = block_scores(w, self.block, self.norm)
        keep = topk_flat(s, kept_per_group(s.size, self.sparsity, "block"))
        return expand(keep, self.block)

    def check(self, mask: np.ndarray) -> None:
        check_blocks(mask, self.block, self.sparsity, "block")

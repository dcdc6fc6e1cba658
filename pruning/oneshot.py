"""Activation-aware one-shot pruning under a hardware sparsity pattern: magnitude, Wanda, OBS.

A linear layer ``y = W x`` (``W`` is ``(out, in)``) is pruned from a few hundred calibration
inputs ``X`` (``(tokens, in)``), without retraining, so that the mask obeys a registered
:class:`pruning.base.Pattern` exactly (``pattern.check(mask)`` passes; every bank keeps ``k``,
every FSS region ``n``, every N:M group ``N``). Three methods:

``magnitude``
    the pattern's own rule on ``|W|`` (the baseline ``hwcosim prune`` always had).
``wanda``
    Sun, Liu, Bair, Kolter, "A Simple and Effective Pruning Approach for Large Language Models"
    (Wanda), arXiv 2306.11695, 2023: the score of ``W[i, j]`` is ``|W[i, j]| * ||X[:, j]||_2``
    (the weight times the norm of the input channel it multiplies). The pattern chooses its mask
    from that score instead of ``|W|``; kept weights are unchanged.
``obs``
    Frantar & Alistarh, "SparseGPT: Massive Language Models Can Be Accurately Pruned in One-Shot",
    ICML 2023 (arXiv 2301.00774), after the Optimal Brain Surgeon of Hassibi & Stork (1993):
    with ``H = X^T X + lambda I`` (damping ``lambda`` = ``damp`` x mean diagonal) and ``U`` the
    upper Cholesky factor of ``H^-1``, the input columns are swept left to right; a weight
    ``W[i, j]`` pruned at column ``j`` has saliency ``W[i, j]^2 / U[j, j]^2`` and its error
    ``e = W[i, j] / U[j, j]`` is compensated on the not yet swept columns, ``W[i, j:] -= e U[j, j:]``
    (lazily across column blocks of ``blocksize``). The mask of a block is chosen when the sweep
    reaches it, from the saliencies of the updated weights ("adaptive mask selection").

**How the pattern constrains OBS** (the axis question). OBS sweeps the *input* axis (the axis of
``H``); the patterns group weights along rows (BBS banks and N:M groups are runs of consecutive
input columns of one output row; an FSS region spans ``r_h`` rows and ``r_w`` columns; unstructured
is one group, the whole tensor). So a group can straddle the block the sweep is in. We do not
special-case any pattern: at the start of each column block the pattern's own ``mask`` is run on
the whole matrix with *forced* scores: already swept weights that were kept get a score above
every other, already swept weights that were pruned get 0, and every not yet swept weight its
current saliency plus a tiny positive floor. For every pattern that keeps a top-k per group
(unstructured, bbs, balanced, nm, fss) this reproduces the earlier decisions exactly (a group's
forced keeps fill at most its k; the rest is chosen among unswept weights, which all outrank the
forced zeros), and fixes the current block's weights from the current saliencies, comparing them
with the (not yet updated) saliencies of the later columns of the same group. The final mask is a
mask the pattern itself produced, so ``check`` passes by construction, and it is checked anyway.
Patterns that score whole tiles (``block``, ``vector``) cannot keep earlier decisions this way
(a tile mixes swept and unswept weights); for them the mask is chosen once, before the sweep,
from the OBS saliencies, and the sweep then only updates the kept weights (the result records
``mask_selection: "fixed"``). With ``blocksize`` a multiple of the group width (128 for banks of
16 or 32, groups of 4 or 8) every bank/N:M group lies inside one block and the choice uses only
updated saliencies.

Weights stored ``(in, out)`` (an ONNX ``MatMul`` initialiser) are pruned with the pattern on the
stored orientation (``transposed=True``), as ``hwcosim prune`` always did, so the exported format
is unchanged; the OBS arithmetic runs on the ``(out, in)`` view.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from models.errors import UsageError
from pruning.base import Pattern, PatternError

__all__ = ["METHODS", "Calib", "LayerResult", "prune_layer", "obs_prune", "wanda_scores", "output_error",
           "fixed_mask_patterns"]

METHODS = ("magnitude", "wanda", "obs")

#: Patterns whose masks are top-k per group (adaptive OBS mask selection keeps earlier decisions).
_GROUP_TOPK = ("unstructured", "bbs", "balanced", "nm", "fss")


def fixed_mask_patterns() -> tuple[str, ...]:
    return _GROUP_TOPK


@dataclass
class Calib:
    """Second-moment statistics of one layer's inputs: ``H = sum x x^T`` over ``n`` tokens."""

    H: np.ndarray
    n: int

    @classmethod
    def from_inputs(cls, X: np.ndarray, name: str = "layer") -> Calib:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] == 0:
            raise UsageError(f"tensor {name!r}: no calibration activations were captured (shape {X.shape})")
        if not np.isfinite(X).all():
            raise UsageError(f"tensor {name!r}: its input activations hold NaN/Inf values on the calibration "
                             "inputs; fix the inputs or the model")
        return cls(X.T @ X, X.shape[0])

    def add(self, X: np.ndarray, name: str = "layer") -> None:
        other = Calib.from_inputs(X, name)
        if other.H.shape != self.H.shape:
            raise UsageError(f"tensor {name!r}: two uses see inputs of {self.H.shape[0]} and {other.H.shape[0]} "
                             "channels; a shared weight must see one input width")
        self.H = self.H + other.H
        self.n += other.n


@dataclass
class LayerResult:
    weights: np.ndarray          # pruned (and for obs updated) weights, stored orientation, float64
    mask: np.ndarray             # bool, stored orientation
    method: str
    seconds: float
    info: dict = field(default_factory=dict)


def wanda_scores(W: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``|W[i, j]| * ||X[:, j]||`` for ``W`` (out, in) and ``H = X^T X``."""
    return np.abs(W) * np.sqrt(np.maximum(np.diag(H), 0.0))[None, :]


def _mask(pattern: Pattern, score: np.ndarray, transposed: bool) -> np.ndarray:
    """The pattern's mask of a nonnegative (out, in) score, applied in the stored orientation."""
    m = pattern.mask(score.T if transposed else score)
    return np.asarray(m, dtype=bool).T if transposed else np.asarray(m, dtype=bool)


def _inverse_cholesky(H: np.ndarray, damp: float) -> tuple[np.ndarray, np.ndarray]:
    """Upper Cholesky factor ``U`` of ``(H + damp * mean(diag H) I)^-1`` (``H^-1 = U^T U``) and the
    dead-channel mask.

    One Cholesky and one triangular inverse: with ``J`` the index reversal and ``J H J = L L^T``,
    ``H^-1 = (J L^-T J)(J L^-1 J)`` and ``J L^-1 J`` is upper triangular with a positive diagonal.
    """
    from scipy.linalg import solve_triangular

    H = np.array(H, dtype=np.float64)
    dead = np.diag(H) <= 0
    H[dead, dead] = 1.0
    lam = damp * float(np.mean(np.diag(H)))
    n = H.shape[0]
    R = H[::-1, ::-1]
    for attempt in range(6):
        try:
            L = np.linalg.cholesky(R + (lam * 10.0 ** attempt) * np.eye(n))
        except np.linalg.LinAlgError:
            continue
        Linv = solve_triangular(L, np.eye(n), lower=True, check_finite=False)
        return np.ascontiguousarray(Linv[::-1, ::-1]), dead
    raise UsageError("the calibration Hessian X^T X is not positive definite even with 10^5 x damping; "
                     "give more (or less degenerate) calibration inputs")


def obs_prune(W: np.ndarray, H: np.ndarray, pattern: Pattern, transposed: bool = False, damp: float = 0.01,
              blocksize: int = 128) -> tuple[np.ndarray, np.ndarray, dict]:
    """SparseGPT-style OBS pruning of ``W`` (out, in) under ``pattern``; returns (W', mask, info).

    ``mask`` and ``W'`` are in the (out, in) orientation; the pattern sees the stored one.
    """
    W = np.array(W, dtype=np.float64)
    rows, cols = W.shape
    U, dead = _inverse_cholesky(H, damp)
    W[:, dead] = 0.0  # inputs that are always zero: their weights do nothing
    d2 = np.diag(U) ** 2
    adaptive = pattern.name in _GROUP_TOPK
    keep = np.zeros((rows, cols), dtype=bool)
    if not adaptive:
        keep = _mask(pattern, W * W / d2[None, :], transposed)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        if adaptive:
            s = W * W / d2[None, :]
            s[:, :i1] = 0.0
            top = float(s.max())
            s[:, i1:] += top * 1e-12 + 1e-300
            s[:, :i1][keep[:, :i1]] = 4.0 * top + 1.0
            m = _mask(pattern, s, transposed)
            if not np.array_equal(m[:, :i1], keep[:, :i1]):  # cannot happen for top-k-per-group patterns
                raise RuntimeError(f"pattern {pattern.name!r} changed an earlier OBS mask decision")
            keep[:, i1:i2] = m[:, i1:i2]
        W1 = W[:, i1:i2].copy()
        E1 = np.zeros_like(W1)
        U1 = U[i1:i2, i1:i2]
        K1 = keep[:, i1:i2]
        for j in range(i2 - i1):
            w = W1[:, j]
            e = np.where(K1[:, j], 0.0, w) / U1[j, j]
            W1[:, j:] -= np.outer(e, U1[j, j:])
            W1[:, j] = np.where(K1[:, j], W1[:, j], 0.0)
            E1[:, j] = e
        W[:, i1:i2] = W1
        if i2 < cols:
            W[:, i2:] -= E1 @ U[i1:i2, i2:]
    W[~keep] = 0.0
    return W, keep, {"mask_selection": "adaptive" if adaptive else "fixed", "damp": damp, "blocksize": blocksize,
                     "dead_inputs": int(dead.sum())}


def prune_layer(w: np.ndarray, pattern: Pattern, method: str, calib: Calib | None = None,
                transposed: bool = False, damp: float = 0.01, blocksize: int = 128,
                name: str = "layer") -> LayerResult:
    """Prune one weight matrix ``w`` (stored orientation) with ``method`` under ``pattern``.

    Parameters
    ----------
    w : array (out, in), or (in, out) with ``transposed=True``
    calib : Calib
        Input statistics (``in`` channels); required for wanda and obs.
    """
    if method not in METHODS:
        raise UsageError(f"unknown pruning method {method!r}; choose one of: {', '.join(METHODS)}")
    t0 = time.perf_counter()
    w = np.asarray(w, dtype=np.float64)
    if method == "magnitude":
        mask = np.asarray(pattern.mask(w), dtype=bool)
        return LayerResult(np.where(mask, w, 0.0), mask, method, time.perf_counter() - t0)
    if calib is None:
        raise UsageError(f"method {method!r} needs calibration inputs (--calibration)")
    W = w.T if transposed else w
    if calib.H.shape != (W.shape[1],) * 2:
        raise UsageError(f"tensor {name!r}: calibration inputs have {calib.H.shape[0]} channels, the weight "
                         f"takes {W.shape[1]} inputs")
    info: dict = {"tokens": calib.n}
    try:
        if method == "wanda":
            m = _mask(pattern, wanda_scores(W, calib.H), transposed)
            Wn = np.where(m, W, 0.0)
        else:
            Wn, m, more = obs_prune(W, calib.H, pattern, transposed, damp, blocksize)
            info.update(more)
    except PatternError as e:
        raise UsageError(f"tensor {name!r} {tuple(w.shape)}: {e}") from None
    mask = m.T if transposed else m
    out = Wn.T if transposed else Wn
    pattern.check(mask)
    return LayerResult(np.ascontiguousarray(out), np.ascontiguousarray(mask), method, time.perf_counter() - t0,
                       info)


def output_error(w_dense: np.ndarray, w_pruned: np.ndarray, X: np.ndarray, transposed: bool = False) -> float:
    """``||(W - W') X^T||_F / ||W X^T||_F`` over the tokens (rows) of ``X``."""
    Wd = (w_dense.T if transposed else w_dense).astype(np.float64)
    Wp = (w_pruned.T if transposed else w_pruned).astype(np.float64)
    X = np.asarray(X, dtype=np.float64)
    ref = np.linalg.norm(X @ Wd.T)
    return float(np.linalg.norm(X @ (Wd - Wp).T) / ref) if ref > 0 else 0.0


# -- whole models --------------------------------------------------------------------------------

def prune_bert(model, ids: list[list[int]], plan: dict, method: str, heldout: list[list[int]] | None = None,
               damp: float = 0.01, blocksize: int = 128, progress=None) -> tuple[object, dict]:
    """Prune the linear layers of a :class:`models.nn.bert.Bert` named in ``plan`` (weight name ->
    pattern), block by block as SparseGPT does: the inputs of block ``i``'s linear layers are
    captured on the calibration token ids ``ids`` with blocks ``< i`` already pruned, all of block
    ``i``'s layers are pruned from them, and the calibration states are propagated through the
    pruned block. ``heldout`` token ids (optional) are carried along the same way for the
    per-layer output error of the report. Returns (pruned copy, {name: record}).
    """
    unknown = sorted(set(plan) - set(model.weight_names()))
    if unknown:
        raise UsageError(f"tensor {unknown[0]!r} is not a linear weight of the BERT encoder")
    pruned = model.copy()
    x, mask = model.batch(ids)
    h = model.embed(x)
    if heldout:
        xh, maskh = model.batch(heldout)
        hh = model.embed(xh)
    records = {}
    for i in range(model.cfg.layers):
        cap: dict = {}
        pruned.block(i, h, mask, capture=cap)
        caph: dict = {}
        if heldout:
            pruned.block(i, hh, maskh, capture=caph)
        for name in [n for n in model.weight_names() if n in plan and n in cap]:
            if progress:
                progress(name)
            calib = Calib.from_inputs(cap[name], name) if method != "magnitude" else None
            w = model.p[name]
            r = prune_layer(w, plan[name], method, calib, damp=damp, blocksize=blocksize, name=name)
            pruned.set_weight(name, r.weights)
            rec = {"seconds": r.seconds, "sparsity": float(1.0 - r.mask.mean()), "tokens": int(cap[name].shape[0]),
                   **r.info, "_mask": r.mask}
            if heldout:
                rec["rel_output_error"] = output_error(w, r.weights, caph[name])
            records[name] = rec
        h = pruned.block(i, h, mask)
        if heldout:
            hh = pruned.block(i, hh, maskh)
    return pruned, records


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of matching rows of two (n, d) arrays."""
    a = np.asarray(a, dtype=np.float64).reshape(len(a), -1)
    b = np.asarray(b, dtype=np.float64).reshape(len(b), -1)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(na * nb, 1e-300)

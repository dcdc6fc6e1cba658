"""SeerNet: Cao, Ma, Xiao, Zhang, Liu, Zhang, Nie, Yang, "SeerNet: Predicting Convolutional
Neural Network Feature-Map Sparsity through Low-Bit Quantization", CVPR 2019.

For a conv layer followed by ReLU (and possibly a max-pool), most outputs are thrown away:
ReLU zeroes the negative ones and max-pool keeps one of every window. SeerNet runs a cheap
k-bit copy of the layer first to predict which outputs survive, then computes only those at
full precision; the others are left at zero (no auxiliary network is trained).

Our implementation (design choices ours where the paper is not followed literally):

- Quantisation: inputs and weights each to ``k`` bits, symmetric, per tensor: integer codes
  ``q = clip(rint(x / s), -(2^(k-1)-1), 2^(k-1)-1)`` with ``s = max|x| / (2^(k-1)-1)``.
  For ``k = 1`` there is no nonzero symmetric level, so we binarise: ``q = sign(x)`` with
  ``s = mean |x|`` over the nonzero entries (exact zeros, e.g. from ReLU, stay zero).
  The quantised layer accumulates the integer codes exactly, then rescales and adds the
  full-precision bias: ``z_q = s_x s_w (q_x * q_w) + b``.
- Predicted mask: ``z_q > 0``; with a 2x2 max-pool, in addition the output must be the
  maximum of ``z_q`` in its pool window (ties all kept), i.e. only outputs that can win
  their window are computed.
- Needed ("true") mask, for precision/recall: the full-precision ``z > 0`` and, with pooling,
  ``z`` is the (first) maximum of its window — exactly the outputs that reach the next layer.
- Full-precision outputs at the predicted positions are per-output dot products of the
  im2col row and the filter (:func:`conv_at`); :func:`dense_conv_exact` computes every output
  the same way, so at the computed positions the two are bit-identical (and both equal the
  im2col matrix product up to float rounding order).
- Accounting: full-precision MACs skipped = 1 - computed / all outputs; the predictor costs
  one k-bit MAC for every dense MAC (reported separately, never hidden).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import im2col3, pool_windows

__all__ = [
    "quantize_symmetric", "predict_mask", "needed_mask", "conv_at", "dense_conv_exact",
    "SeerLayerResult", "seer_layer", "seer_forward", "evaluate",
]


def _check_bits(bits: int) -> int:
    if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
        raise UsageError(f"SeerNet bit width must be an integer in 1..8, not {bits!r}")
    return int(bits)


def quantize_symmetric(x: np.ndarray, bits: int) -> tuple[np.ndarray, float]:
    """Symmetric per-tensor quantisation to ``bits`` bits.

    Parameters
    ----------
    x : ndarray
    bits : int
        1..8 (1 = sign binarisation, see the module notes).

    Returns
    -------
    codes : ndarray of int64, same shape as ``x``
        In ``[-(2^(bits-1)-1), 2^(bits-1)-1]`` (``{-1, 0, 1}`` for 1 bit).
    scale : float
        ``x ~= codes * scale``.
    """
    bits = _check_bits(bits)
    x = np.asarray(x, dtype=np.float64)
    if bits == 1:
        nz = np.abs(x[x != 0])
        scale = float(nz.mean()) if nz.size else 1.0
        return np.sign(x).astype(np.int64), scale
    qmax = (1 << (bits - 1)) - 1
    m = float(np.abs(x).max()) if x.size else 0.0
    scale = m / qmax if m > 0 else 1.0
    return np.clip(np.rint(x / scale), -qmax, qmax).astype(np.int64), scale


def _winners(z: np.ndarray, ties: bool) -> np.ndarray:
    """Bool (N, C, H, W): entries that are the max of their 2x2 window (all ties or the first)."""
    win = pool_windows(z)
    if ties:
        w = win == win.max(axis=-1, keepdims=True)
    else:
        w = np.zeros(win.shape, dtype=bool)
        np.put_along_axis(w, win.argmax(axis=-1)[..., None], True, axis=-1)
    n, c, h2, w2, _ = win.shape
    return w.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * h2, 2 * w2)


def quantized_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """The k-bit copy of a 3x3 "same" conv layer: (N, Cout, H, W) float64 pre-activations.

    Integer codes are accumulated exactly (float64 holds every sum of <= 2^20 products of
    8-bit codes exactly), then rescaled, then the full-precision bias is added.
    """
    qx, sx = quantize_symmetric(x, bits)
    qw, sw = quantize_symmetric(w, bits)
    n, _, h, wd = x.shape
    acc = im2col3(qx.astype(np.float64)) @ qw.reshape(len(qw), -1).astype(np.float64).T
    z = acc * (sx * sw) + np.asarray(b, dtype=np.float64)
    return z.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)


def predict_mask(x: np.ndarray, w: np.ndarray, b: np.ndarray, bits: int, pool: bool) -> np.ndarray:
    """SeerNet's predicted mask of the outputs worth computing.

    Parameters
    ----------
    x : ndarray, shape (N, Cin, H, W)
    w : ndarray, shape (Cout, Cin, 3, 3)
    b : ndarray, shape (Cout,)
    bits : int
    pool : bool
        Whether a 2x2 max-pool follows the ReLU.

    Returns
    -------
    ndarray of bool, shape (N, Cout, H, W)
    """
    zq = quantized_conv(x, w, b, bits)
    m = zq > 0
    if pool:
        m &= _winners(zq, ties=True)
    return m


def needed_mask(z: np.ndarray, pool: bool) -> np.ndarray:
    """Outputs that reach the next layer: ``z > 0`` and, with pooling, the first window max."""
    m = z > 0
    if pool:
        m &= _winners(z, ties=False)
    return m


def conv_at(x: np.ndarray, w: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Full-precision conv outputs at ``mask`` only; zero elsewhere.

    Parameters
    ----------
    x : ndarray, shape (N, Cin, H, W)
    w : ndarray, shape (Cout, Cin, 3, 3)
    b : ndarray, shape (Cout,)
    mask : ndarray of bool, shape (N, Cout, H, W)

    Returns
    -------
    ndarray, shape (N, Cout, H, W), dtype of ``x``
        Each computed output is ``sum(patch * filter) + b`` over one im2col row.
    """
    n, _, h, wd = x.shape
    cout = w.shape[0]
    cols = im2col3(x)
    wf = w.reshape(cout, -1).astype(x.dtype, copy=False)
    nn, co, ii, jj = np.nonzero(mask)
    rows = (nn * h + ii) * wd + jj
    vals = np.sum(cols[rows] * wf[co], axis=-1) + b.astype(x.dtype, copy=False)[co]
    out = np.zeros((n, cout, h, wd), dtype=x.dtype)
    out[nn, co, ii, jj] = vals
    return out


def dense_conv_exact(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every output computed exactly as :func:`conv_at` computes one: (N, Cout, H, W)."""
    n, _, h, wd = x.shape
    cout = w.shape[0]
    cols = im2col3(x)
    wf = w.reshape(cout, -1).astype(x.dtype, copy=False)
    z = np.sum(cols[:, None, :] * wf[None, :, :], axis=-1) + b.astype(x.dtype, copy=False)
    return z.reshape(n, h, wd, cout).transpose(0, 3, 1, 2)


@dataclass(frozen=True)
class SeerLayerResult:
    """One layer's SeerNet run.

    Attributes
    ----------
    out : ndarray
        The layer's output after ReLU (and pooling), from the computed outputs only.
    predicted, needed : ndarray of bool, shape (N, Cout, H, W)
    """

    out: np.ndarray
    predicted: np.ndarray
    needed: np.ndarray

    def stats(self, k_macs_per_output: int) -> dict:
        p, t = self.predicted, self.needed
        tp = int((p & t).sum())
        npred, nneed, total = int(p.sum()), int(t.sum()), p.size
        return {
            "outputs": total,
            "needed": nneed,
            "computed": npred,
            "precision": tp / npred if npred else 1.0,
            "recall": tp / nneed if nneed else 1.0,
            "macs_skipped": 1.0 - npred / total,
            "dense_macs": total * k_macs_per_output,
            "full_precision_macs": npred * k_macs_per_output,
            "lowbit_macs": total * k_macs_per_output,
        }


def seer_layer(x: np.ndarray, w: np.ndarray, b: np.ndarray, pool: bool, bits: int) -> SeerLayerResult:
    """Run one conv + ReLU (+ 2x2 max-pool) layer the SeerNet way (see the module notes)."""
    pred = predict_mask(x, w, b, bits, pool)
    z = conv_at(x, w, b, pred)
    a = np.maximum(z, 0)
    if pool:
        a = pool_windows(a).max(axis=-1)
    need = needed_mask(dense_conv_exact(x, w, b), pool)
    return SeerLayerResult(a, pred, need)


def seer_forward(cnn, x: np.ndarray, bits: int) -> tuple[np.ndarray, list[dict]]:
    """Logits of a :class:`hwcosim.models.nn.cnn.CNN` with every conv layer run by SeerNet.

    Each layer's masks are measured on the input it actually receives (the SeerNet output of
    the previous layer). Returns the logits (N, C) and one stats dict per conv layer.
    """
    x = np.asarray(x, dtype=cnn.params["fc.W"].dtype)
    stats = []
    for li in range(cnn.n_conv):
        w, b, pool = cnn.conv_layer(li)
        r = seer_layer(x, w, b, pool, bits)
        stats.append({"layer": li, **r.stats(w[0].size)})
        x = r.out
    return cnn.readout(x), stats


def evaluate(cnn, x: np.ndarray, y: np.ndarray, bits_list=range(1, 9)) -> dict:
    """SeerNet on a trained CNN for each bit width.

    Returns
    -------
    dict
        ``dense_accuracy`` and ``results``: per bit width ``bits``, ``accuracy``,
        ``accuracy_change`` (vs dense), ``agreement`` (same predicted class as dense), ``layers``
        (per-layer stats: precision, recall, macs_skipped, ...) and ``macs_skipped`` over all
        conv layers.
    """
    y = np.asarray(y)
    dense_pred = cnn.predict(x)
    dense_acc = float((dense_pred == y).mean())
    results = []
    for k in bits_list:
        logits, layers = seer_forward(cnn, x, _check_bits(int(k)))
        pred = logits.argmax(axis=1)
        acc = float((pred == y).mean())
        dm = sum(s["dense_macs"] for s in layers)
        fm = sum(s["full_precision_macs"] for s in layers)
        results.append({
            "bits": int(k), "accuracy": acc, "accuracy_change": acc - dense_acc,
            "agreement": float((pred == dense_pred).mean()), "macs_skipped": 1.0 - fm / dm,
            "layers": layers,
        })
    return {"dense_accuracy": dense_acc, "results": results}

"""Vectorised building blocks shared by the numpy networks: softmax cross-entropy, 3x3 "same"
convolution by im2col (forward and backward), 2x2 max-pooling, and the common model base.

Shapes use NCHW for images. All functions keep the dtype of their inputs.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hwcosim.models.errors import UsageError
from numpy.lib.stride_tricks import sliding_window_view

__all__ = [
    "softmax_xent", "im2col3", "col2im3", "conv3_forward", "conv3_backward", "maxpool2_forward",
    "maxpool2_backward", "pool_windows", "Model",
]


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy and its gradient.

    Parameters
    ----------
    logits : ndarray, shape (N, C)
    y : ndarray of int, shape (N,)

    Returns
    -------
    loss : float
    dlogits : ndarray, shape (N, C)
        Gradient of the mean loss with respect to ``logits``.
    """
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    logp = z - np.log(s)
    loss = float(-logp[np.arange(n), y].mean())
    d = e / s
    d[np.arange(n), y] -= 1
    return loss, (d / n).astype(logits.dtype, copy=False)


def im2col3(x: np.ndarray) -> np.ndarray:
    """Columns of every 3x3 neighbourhood of a zero-padded ("same") image batch.

    Parameters
    ----------
    x : ndarray, shape (N, C, H, W)

    Returns
    -------
    ndarray, shape (N*H*W, C*9)
        Row ``(n*H + i)*W + j`` holds the C x 3 x 3 patch centred on pixel (i, j) of image n,
        flattened in (c, ki, kj) order, matching a weight of shape (Cout, C, 3, 3).
    """
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))  # (N, C, H, W, 3, 3)
    return np.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(n * h * w, c * 9)


def col2im3(dcols: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
    """Adjoint of :func:`im2col3`: scatter-add column gradients back to an (N, C, H, W) image."""
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, 3, 3).transpose(0, 3, 1, 2, 4, 5)  # (N, C, H, W, 3, 3)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for ki in range(3):  # 9 kernel offsets; each update is a whole-batch array operation
        for kj in range(3):
            dxp[:, :, ki:ki + h, kj:kj + w] += d[..., ki, kj]
    return dxp[:, :, 1:-1, 1:-1]


def conv3_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 "same" convolution (cross-correlation), stride 1.

    Parameters
    ----------
    x : ndarray, shape (N, C, H, W)
    w : ndarray, shape (Cout, C, 3, 3)
    b : ndarray, shape (Cout,)

    Returns
    -------
    out : ndarray, shape (N, Cout, H, W)
    cols : ndarray, shape (N*H*W, C*9)
        The im2col matrix, kept for the backward pass.
    """
    n, _, h, wd = x.shape
    cols = im2col3(x)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return np.ascontiguousarray(out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)), cols


def conv3_backward(dout: np.ndarray, cols: np.ndarray, w: np.ndarray, x_shape, need_dx: bool = True):
    """Gradients of :func:`conv3_forward`.

    Returns
    -------
    dx : ndarray, shape ``x_shape`` (or None when ``need_dx`` is False)
    dw : ndarray, shape (Cout, C, 3, 3)
    db : ndarray, shape (Cout,)
    """
    cout = w.shape[0]
    d2 = dout.transpose(0, 2, 3, 1).reshape(-1, cout)  # (N*H*W, Cout)
    dw = (d2.T @ cols).reshape(w.shape)
    db = d2.sum(axis=0)
    dx = col2im3(d2 @ w.reshape(cout, -1), x_shape) if need_dx else None
    return dx, dw, db


def pool_windows(x: np.ndarray) -> np.ndarray:
    """View an (N, C, H, W) batch as its 2x2 pooling windows, shape (N, C, H/2, W/2, 4)."""
    n, c, h, w = x.shape
    if h % 2 or w % 2:
        raise UsageError(f"2x2 max-pooling needs even height and width, got {h}x{w}")
    return x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)


def maxpool2_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max-pooling, stride 2. Returns the pooled (N, C, H/2, W/2) and the argmax (0..3)."""
    win = pool_windows(x)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def maxpool2_backward(dout: np.ndarray, arg: np.ndarray) -> np.ndarray:
    """Route pooled gradients to each window's (first) maximum; returns (N, C, H, W)."""
    n, c, h2, w2 = dout.shape
    d = np.zeros((n, c, h2, w2, 4), dtype=dout.dtype)
    np.put_along_axis(d, arg[..., None], dout[..., None], axis=-1)
    return d.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * h2, 2 * w2)


class Model:
    """Common behaviour of the numpy networks.

    Subclasses set ``config`` (a frozen dataclass) and ``params`` (dict name -> ndarray) and
    implement ``logits(x)`` and ``loss_grads(x, y)``.
    """

    config: Any
    params: dict[str, np.ndarray]

    def logits(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def loss_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:  # pragma: no cover
        raise NotImplementedError

    def predict(self, x: np.ndarray, batch: int = 1024) -> np.ndarray:
        """Class index per sample, shape (N,), int64 (evaluated in batches of ``batch``)."""
        out = [self.logits(x[i:i + batch]).argmax(axis=1) for i in range(0, len(x), batch)]
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of samples classified correctly."""
        return float((self.predict(x) == np.asarray(y)).mean())

    def loss(self, x: np.ndarray, y: np.ndarray) -> float:
        return softmax_xent(self.logits(x), y)[0]

    def copy(self):
        """A deep copy (parameters are copied)."""
        return copy.deepcopy(self)

    def set_params(self, params: dict[str, np.ndarray]) -> None:
        """Replace parameters by name, checking names and shapes; values are cast to the model dtype."""
        for k, v in params.items():
            if k not in self.params:
                raise UsageError(f"unknown parameter {k!r}; this model has {sorted(self.params)}")
            v = np.asarray(v)
            if v.shape != self.params[k].shape:
                raise UsageError(f"parameter {k!r} has shape {v.shape}, expected {self.params[k].shape}")
            self.params[k] = v.astype(self.params[k].dtype, copy=True)

    def n_params(self) -> int:
        return int(sum(p.size for p in self.params.values()))

"""LSTM classifier in numpy with the fused gate layout of the BBS accelerator.

Cao et al., "Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity",
FPGA 2019, run an LSTM's matrix-vector products on a sparse SpMxV engine. To match that
engine, the four gate matrices are fused into ONE matrix ``W`` of shape (4H, I+H) that acts on
the concatenation ``[x_t; h_{t-1}]``, with gate rows in the order (i, f, g, o), and a bias
(4H,)::

    z_t = W @ [x_t; h_{t-1}] + b          (4H,)
    i, f, o = sigmoid(z[0:H]), sigmoid(z[H:2H]), sigmoid(z[3H:4H]);  g = tanh(z[2H:3H])
    c_t = f * c_{t-1} + i * g;   h_t = o * tanh(c_t)

A linear readout ``W_out`` (C, H), ``b_out`` (C,) maps the last hidden state to class logits.
Training is backpropagation through time (BPTT); the loop over time steps is inherent, every
step is vectorised over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import Model, softmax_xent

__all__ = ["LSTMConfig", "LSTMClassifier"]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * z) + 1.0)  # overflow-free form of 1 / (1 + exp(-z))


@dataclass(frozen=True)
class LSTMConfig:
    """Shape and number type of an LSTM classifier.

    Parameters
    ----------
    input_size : int
        Features per time step (I).
    hidden : int
        Hidden units (H); the fused gate matrix is (4H, I+H).
    classes : int
        Output classes (C).
    dtype : str
        ``"float32"`` (training speed) or ``"float64"`` (gradient checks).
    forget_bias : float
        Initial bias of the forget gate (1.0 helps gradients flow early in training).
    """

    input_size: int = 8
    hidden: int = 64
    classes: int = 10
    dtype: str = "float32"
    forget_bias: float = 1.0

    def __post_init__(self):
        for name in ("input_size", "hidden", "classes"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise UsageError(f"LSTMConfig.{name} must be a positive integer, not {v!r}")
        if self.classes < 2:
            raise UsageError(f"LSTMConfig.classes must be >= 2, not {self.classes}")
        if self.dtype not in ("float32", "float64"):
            raise UsageError(f"LSTMConfig.dtype must be 'float32' or 'float64', not {self.dtype!r}")


class LSTMClassifier(Model):
    """One LSTM layer + a linear readout of the last hidden state.

    Parameters
    ----------
    config : LSTMConfig
    seed : int
        Seed of the initial weights (same seed, same weights).

    Attributes
    ----------
    params : dict of str -> ndarray
        ``W`` (4H, I+H), ``b`` (4H,), ``W_out`` (C, H), ``b_out`` (C,).
    """

    def __init__(self, config: LSTMConfig = LSTMConfig(), seed: int = 0):
        self.config = config
        I, H, C = config.input_size, config.hidden, config.classes
        dt = np.dtype(config.dtype)
        rng = np.random.default_rng(seed)
        s = 1.0 / np.sqrt(H)
        b = np.zeros(4 * H)
        b[H:2 * H] = config.forget_bias
        so = np.sqrt(6.0 / (H + C))
        self.params = {
            "W": rng.uniform(-s, s, (4 * H, I + H)).astype(dt),
            "b": b.astype(dt),
            "W_out": rng.uniform(-so, so, (C, H)).astype(dt),
            "b_out": np.zeros(C, dtype=dt),
        }

    # -- forward -----------------------------------------------------------------------------
    def forward(self, x: np.ndarray, return_cache: bool = False):
        """Run the recurrence.

        Parameters
        ----------
        x : ndarray, shape (N, T, I)

        Returns
        -------
        h : ndarray, shape (N, T, H)
            Hidden state after every step (what an accelerator's output is compared with).
        cache : dict, only if ``return_cache``
            Intermediates for :meth:`loss_grads`.
        """
        W, b = self.params["W"], self.params["b"]
        x = np.asarray(x, dtype=W.dtype)
        if x.ndim != 3 or x.shape[2] != self.config.input_size:
            raise UsageError(
                f"LSTM input must have shape (N, T, {self.config.input_size}), got {x.shape}"
            )
        n, T, I = x.shape
        H = self.config.hidden
        h = np.zeros((n, H), dtype=W.dtype)
        c = np.zeros((n, H), dtype=W.dtype)
        hs = np.empty((n, T, H), dtype=W.dtype)
        if return_cache:
            xh = np.empty((T, n, I + H), dtype=W.dtype)
            gates = np.empty((T, n, 4 * H), dtype=W.dtype)
            cs = np.empty((T + 1, n, H), dtype=W.dtype)
            cs[0] = c
        for t in range(T):
            v = np.concatenate([x[:, t], h], axis=1)
            z = v @ W.T + b
            a = np.empty_like(z)
            a[:, :2 * H] = _sigmoid(z[:, :2 * H])
            a[:, 2 * H:3 * H] = np.tanh(z[:, 2 * H:3 * H])
            a[:, 3 * H:] = _sigmoid(z[:, 3 * H:])
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            c = f * c + i * g
            h = o * np.tanh(c)
            hs[:, t] = h
            if return_cache:
                xh[t], gates[t], cs[t + 1] = v, a, c
        if return_cache:
            return hs, {"xh": xh, "gates": gates, "c": cs}
        return hs

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Class scores of the last hidden state, shape (N, C)."""
        h = self.forward(x)[:, -1]
        return h @ self.params["W_out"].T + self.params["b_out"]

    # -- backward ----------------------------------------------------------------------------
    def loss_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Mean cross-entropy and its gradient for every parameter (BPTT).

        Returns
        -------
        loss : float
        grads : dict of str -> ndarray
            Same names and shapes as ``params``.
        """
        p = self.params
        H, I = self.config.hidden, self.config.input_size
        hs, cache = self.forward(x, return_cache=True)
        hT = hs[:, -1]
        logits = hT @ p["W_out"].T + p["b_out"]
        loss, dlog = softmax_xent(logits, y)
        dW = np.zeros_like(p["W"])
        db = np.zeros_like(p["b"])
        dh = dlog @ p["W_out"]
        dc = np.zeros_like(dh)
        xh, gates, cs = cache["xh"], cache["gates"], cache["c"]
        for t in range(hs.shape[1] - 1, -1, -1):
            a = gates[t]
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            tc = np.tanh(cs[t + 1])
            dc = dc + dh * o * (1.0 - tc * tc)
            dz = np.empty_like(a)
            dz[:, :H] = dc * g * i * (1.0 - i)
            dz[:, H:2 * H] = dc * cs[t] * f * (1.0 - f)
            dz[:, 2 * H:3 * H] = dc * i * (1.0 - g * g)
            dz[:, 3 * H:] = dh * tc * o * (1.0 - o)
            dW += dz.T @ xh[t]
            db += dz.sum(axis=0)
            dh = (dz @ p["W"])[:, I:]
            dc = dc * f
        grads = {"W": dW, "b": db, "W_out": dlog.T @ hT, "b_out": dlog.sum(axis=0)}
        return loss, grads

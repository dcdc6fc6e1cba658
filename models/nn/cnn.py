"""A small CNN in numpy: [3x3 "same" conv + ReLU (+ 2x2 max-pool)] x L, then a linear readout.

Used by the SeerNet study (Cao et al., "SeerNet: Predicting Convolutional Neural Network
Feature-Map Sparsity through Low-Bit Quantization", CVPR 2019), whose target is exactly such
conv + ReLU (+ max-pool) layers. Convolutions run as im2col matrix products
(:mod:`hwcosim.models.nn.layers`), forward and backward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import (
    Model,
    conv3_backward,
    conv3_forward,
    maxpool2_backward,
    maxpool2_forward,
    softmax_xent,
)

__all__ = ["CNNConfig", "CNN"]


@dataclass(frozen=True)
class CNNConfig:
    """Layer sizes of the CNN.

    Parameters
    ----------
    in_channels : int
    height, width : int
        Input image size; every pooled layer halves both, so they must stay even there.
    channels : tuple of int
        Output channels of each conv layer.
    pool : tuple of bool
        Whether a 2x2 max-pool follows each conv layer's ReLU (same length as ``channels``).
    classes : int
    dtype : str
        ``"float32"`` or ``"float64"``.
    """

    in_channels: int = 1
    height: int = 8
    width: int = 8
    channels: tuple[int, ...] = (16, 32)
    pool: tuple[bool, ...] = (True, True)
    classes: int = 10
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("in_channels", "height", "width", "classes"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise UsageError(f"CNNConfig.{name} must be a positive integer, not {v!r}")
        if not self.channels or any(int(c) < 1 for c in self.channels):
            raise UsageError(f"CNNConfig.channels must be positive integers, not {self.channels!r}")
        if len(self.pool) != len(self.channels):
            raise UsageError(
                f"CNNConfig.pool has {len(self.pool)} entries for {len(self.channels)} conv layers; "
                "give one bool per layer"
            )
        h, w = self.height, self.width
        for li, p in enumerate(self.pool):
            if p:
                if h % 2 or w % 2:
                    raise UsageError(f"layer {li} pools a {h}x{w} map; pooling needs even sizes")
                h, w = h // 2, w // 2
        if self.dtype not in ("float32", "float64"):
            raise UsageError(f"CNNConfig.dtype must be 'float32' or 'float64', not {self.dtype!r}")

    @property
    def feature_size(self) -> int:
        """Length of the flattened last feature map (the readout's input)."""
        h, w = self.height, self.width
        for p in self.pool:
            if p:
                h, w = h // 2, w // 2
        return self.channels[-1] * h * w


class CNN(Model):
    """Conv/ReLU/pool stack + linear readout.

    Parameters
    ----------
    config : CNNConfig
    seed : int
        Seed of the initial (He-uniform) weights.

    Attributes
    ----------
    params : dict of str -> ndarray
        ``conv{l}.W`` (Cout, Cin, 3, 3), ``conv{l}.b`` (Cout,), ``fc.W`` (C, F), ``fc.b`` (C,).
    """

    def __init__(self, config: CNNConfig = CNNConfig(), seed: int = 0):
        self.config = config
        dt = np.dtype(config.dtype)
        rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        cin = config.in_channels
        for li, cout in enumerate(config.channels):
            s = np.sqrt(6.0 / (cin * 9))
            self.params[f"conv{li}.W"] = rng.uniform(-s, s, (cout, cin, 3, 3)).astype(dt)
            self.params[f"conv{li}.b"] = np.zeros(cout, dtype=dt)
            cin = cout
        f, c = config.feature_size, config.classes
        s = np.sqrt(6.0 / (f + c))
        self.params["fc.W"] = rng.uniform(-s, s, (c, f)).astype(dt)
        self.params["fc.b"] = np.zeros(c, dtype=dt)

    @property
    def n_conv(self) -> int:
        return len(self.config.channels)

    def conv_layer(self, li: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Weight (Cout, Cin, 3, 3), bias (Cout,) and pool flag of conv layer ``li``."""
        return self.params[f"conv{li}.W"], self.params[f"conv{li}.b"], bool(self.config.pool[li])

    def readout(self, feat: np.ndarray) -> np.ndarray:
        """Logits (N, C) from the last feature map (N, C_L, h, w)."""
        return feat.reshape(len(feat), -1) @ self.params["fc.W"].T + self.params["fc.b"]

    def layer_inputs(self, x: np.ndarray) -> list[np.ndarray]:
        """The input of every conv layer and, last, the readout's feature map (dense network).

        Returns a list of ``n_conv + 1`` arrays, each (N, C, H, W).
        """
        x = np.asarray(x, dtype=self.params["fc.W"].dtype)
        outs = [x]
        for li in range(self.n_conv):
            w, b, pool = self.conv_layer(li)
            z, _ = conv3_forward(x, w, b)
            x = np.maximum(z, 0)
            if pool:
                x, _ = maxpool2_forward(x)
            outs.append(x)
        return outs

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Class scores (N, C) for images (N, Cin, H, W)."""
        return self.readout(self.layer_inputs(x)[-1])

    def loss_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Mean cross-entropy and gradients of every parameter (same names and shapes)."""
        x = np.asarray(x, dtype=self.params["fc.W"].dtype)
        caches = []
        for li in range(self.n_conv):
            w, b, pool = self.conv_layer(li)
            z, cols = conv3_forward(x, w, b)
            a = np.maximum(z, 0)
            arg = None
            if pool:
                a, arg = maxpool2_forward(a)
            caches.append((x.shape, cols, z, arg))
            x = a
        logits = self.readout(x)
        loss, dlog = softmax_xent(logits, y)
        grads = {
            "fc.W": dlog.T @ x.reshape(len(x), -1),
            "fc.b": dlog.sum(axis=0),
        }
        d = (dlog @ self.params["fc.W"]).reshape(x.shape)
        for li in range(self.n_conv - 1, -1, -1):
            w, _, pool = self.conv_layer(li)
            xs, cols, z, arg = caches[li]
            if pool:
                d = maxpool2_backward(d, arg)
            d = d * (z > 0)
            d, grads[f"conv{li}.W"], grads[f"conv{li}.b"] = conv3_backward(d, cols, w, xs, need_dx=li > 0)
        return loss, {k: grads[k] for k in self.params}

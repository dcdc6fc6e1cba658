"""A multilayer perceptron in numpy (ReLU hidden layers, linear readout) for quick demos of
pruning and mask-aware fine-tuning."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import Model, softmax_xent

__all__ = ["MLPConfig", "MLP"]


@dataclass(frozen=True)
class MLPConfig:
    """Layer widths of the MLP.

    Parameters
    ----------
    input_size : int
    hidden : tuple of int
        Width of each hidden layer (may be empty: a linear classifier).
    classes : int
    dtype : str
        ``"float32"`` or ``"float64"``.
    """

    input_size: int = 64
    hidden: tuple[int, ...] = (64,)
    classes: int = 10
    dtype: str = "float32"

    def __post_init__(self):
        if not isinstance(self.input_size, (int, np.integer)) or self.input_size < 1:
            raise UsageError(f"MLPConfig.input_size must be a positive integer, not {self.input_size!r}")
        if any(not isinstance(h, (int, np.integer)) or h < 1 for h in self.hidden):
            raise UsageError(f"MLPConfig.hidden must hold positive integers, not {self.hidden!r}")
        if not isinstance(self.classes, (int, np.integer)) or self.classes < 2:
            raise UsageError(f"MLPConfig.classes must be an integer >= 2, not {self.classes!r}")
        if self.dtype not in ("float32", "float64"):
            raise UsageError(f"MLPConfig.dtype must be 'float32' or 'float64', not {self.dtype!r}")


class MLP(Model):
    """Dense ReLU layers ``fc{l}.W`` (out, in), ``fc{l}.b`` (out,); the last layer is linear."""

    def __init__(self, config: MLPConfig = MLPConfig(), seed: int = 0):
        self.config = config
        dt = np.dtype(config.dtype)
        rng = np.random.default_rng(seed)
        sizes = [config.input_size, *config.hidden, config.classes]
        self.params = {}
        for li, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            s = np.sqrt(6.0 / (a + b))
            self.params[f"fc{li}.W"] = rng.uniform(-s, s, (b, a)).astype(dt)
            self.params[f"fc{li}.b"] = np.zeros(b, dtype=dt)
        self.n_layers = len(sizes) - 1

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Class scores (N, C) for inputs (N, input_size)."""
        x = np.asarray(x, dtype=self.params["fc0.W"].dtype)
        for li in range(self.n_layers):
            x = x @ self.params[f"fc{li}.W"].T + self.params[f"fc{li}.b"]
            if li < self.n_layers - 1:
                x = np.maximum(x, 0)
        return x

    def loss_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        x = np.asarray(x, dtype=self.params["fc0.W"].dtype)
        acts = [x]
        for li in range(self.n_layers):
            x = x @ self.params[f"fc{li}.W"].T + self.params[f"fc{li}.b"]
            if li < self.n_layers - 1:
                x = np.maximum(x, 0)
            acts.append(x)
        loss, d = softmax_xent(x, y)
        grads = {}
        for li in range(self.n_layers - 1, -1, -1):
            grads[f"fc{li}.W"] = d.T @ acts[li]
            grads[f"fc{li}.b"] = d.sum(axis=0)
            if li:
                d = (d @ self.params[f"fc{li}.W"]) * (acts[li] > 0)
        return loss, {k: grads[k] for k in self.params}

"""Mini-batch Adam training for the numpy networks, mask-aware, plus a cached trainer.

Adam: Kingma & Ba, ICLR 2015. Masks (param name -> bool array, ``True`` = keep) make the
trainer a fine-tuner for pruned networks: masked weights are zeroed before training, their
gradients (and so Adam's moments) are zeroed, and the weights are zeroed again after every
update, so they stay at exactly 0.0 throughout.

The matrices here are small (tens to hundreds of rows), where a multi-threaded BLAS spends
more time synchronising than computing (about 10x slower per epoch on a loaded 2-core
machine), so training runs with BLAS limited to one thread (``threadpoolctl``, a
scikit-learn dependency).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_bytes
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import Model
from threadpoolctl import threadpool_limits

__all__ = ["TrainConfig", "Adam", "train", "check_masks", "apply_masks", "get_trained", "build_model"]

CACHE_VERSION = 1


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters.

    Parameters
    ----------
    epochs : int
        Passes over the training set (>= 0).
    batch_size : int
    lr : float
        Adam step size.
    lr_final : float
        Step size at the last epoch; the step size decays geometrically from ``lr`` to it.
    beta1, beta2, eps : float
        Adam constants.
    clip : float
        Global gradient-norm clip (0 disables it); keeps BPTT stable.
    seed : int
        Seed of the batch order.
    """

    epochs: int = 40
    batch_size: int = 32
    lr: float = 1e-2
    lr_final: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    clip: float = 5.0
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.epochs, (int, np.integer)) or self.epochs < 0:
            raise UsageError(f"TrainConfig.epochs must be an integer >= 0, not {self.epochs!r}")
        if not isinstance(self.batch_size, (int, np.integer)) or self.batch_size < 1:
            raise UsageError(f"TrainConfig.batch_size must be a positive integer, not {self.batch_size!r}")
        if not (self.lr > 0 and self.lr_final > 0):
            raise UsageError(f"TrainConfig learning rates must be > 0, not lr={self.lr}, lr_final={self.lr_final}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise UsageError(f"Adam betas must lie in [0, 1), not {self.beta1}, {self.beta2}")
        if self.clip < 0:
            raise UsageError(f"TrainConfig.clip must be >= 0 (0 disables clipping), not {self.clip}")


def check_masks(params: dict[str, np.ndarray], masks: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """Validate masks against parameters (names and shapes); returns bool copies."""
    out = {}
    for k, m in (masks or {}).items():
        if k not in params:
            raise UsageError(f"mask for unknown parameter {k!r}; parameters are {sorted(params)}")
        m = np.asarray(m)
        if m.shape != params[k].shape:
            raise UsageError(f"mask {k!r} has shape {m.shape}, the parameter has {params[k].shape}")
        if m.dtype != bool:
            raise UsageError(f"mask {k!r} must be a bool array (True = keep), not dtype {m.dtype}")
        out[k] = m.copy()
    return out


def apply_masks(params: dict[str, np.ndarray], masks: dict[str, np.ndarray]) -> None:
    """Zero the masked-out entries of ``params`` in place."""
    for k, m in masks.items():
        params[k] *= m


class Adam:
    """Adam optimiser over a dict of parameters, updating them in place."""

    def __init__(self, params: dict[str, np.ndarray], beta1=0.9, beta2=0.999, eps=1e-8):
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.beta1, self.beta2, self.eps, self.t = beta1, beta2, eps, 0

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> None:
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        a = lr * np.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t)
        for k, g in grads.items():
            m, v = self.m[k], self.v[k]
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            params[k] -= (a * m / (np.sqrt(v) + self.eps)).astype(params[k].dtype, copy=False)


def train(
    model: Model,
    x: np.ndarray,
    y: np.ndarray,
    config: TrainConfig = TrainConfig(),
    masks: dict[str, np.ndarray] | None = None,
    x_val: np.ndarray | None = None,
    y_val: np.ndarray | None = None,
) -> dict[str, list[float]]:
    """Train ``model`` in place with mini-batch Adam.

    Parameters
    ----------
    model : Model
    x : ndarray, shape (N, ...)
    y : ndarray of int, shape (N,)
    config : TrainConfig
    masks : dict of str -> bool ndarray, optional
        Keep-masks; masked weights are held at exactly zero.
    x_val, y_val : optional
        A validation set whose accuracy is recorded after every epoch.

    Returns
    -------
    dict
        ``loss`` (mean training loss per epoch) and, with a validation set, ``val_accuracy``.
    """
    y = np.asarray(y, dtype=np.int64)
    if len(x) != len(y) or len(y) == 0:
        raise UsageError(f"training set has {len(x)} inputs and {len(y)} labels; give the same nonzero count")
    masks = check_masks(model.params, masks)
    with threadpool_limits(limits=1, user_api="blas"):
        return _train_loop(model, x, y, config, masks, x_val, y_val)


def _train_loop(model, x, y, config, masks, x_val, y_val):
    apply_masks(model.params, masks)
    opt = Adam(model.params, config.beta1, config.beta2, config.eps)
    rng = np.random.default_rng(config.seed)
    hist: dict[str, list[float]] = {"loss": []}
    if x_val is not None:
        hist["val_accuracy"] = []
    n = len(y)
    decay = (config.lr_final / config.lr) ** (1.0 / max(1, config.epochs - 1))
    for ep in range(config.epochs):
        lr = config.lr * decay ** ep
        order = rng.permutation(n)
        total = 0.0
        for s in range(0, n, config.batch_size):
            idx = order[s:s + config.batch_size]
            loss, grads = model.loss_grads(x[idx], y[idx])
            for k, m in masks.items():
                grads[k] = grads[k] * m
            if config.clip > 0:
                norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
                if norm > config.clip:
                    grads = {k: g * (config.clip / norm) for k, g in grads.items()}
            opt.step(model.params, grads, lr)
            apply_masks(model.params, masks)
            total += loss * len(idx)
        hist["loss"].append(total / n)
        if x_val is not None:
            hist["val_accuracy"].append(model.accuracy(x_val, y_val))
    return hist


# -- cached training ------------------------------------------------------------------------

_KINDS = ("lstm", "cnn", "mlp")


def build_model(kind: str, model_config=None, seed: int = 0) -> tuple[Model, object]:
    """A freshly initialised model of ``kind`` and the matching digits dataset view."""
    from hwcosim.models.nn import cnn, data, lstm, mlp

    if kind == "lstm":
        cfg = model_config or lstm.LSTMConfig()
        return lstm.LSTMClassifier(cfg, seed), data.load_digits_sequences(cfg.dtype)
    if kind == "cnn":
        cfg = model_config or cnn.CNNConfig()
        return cnn.CNN(cfg, seed), data.load_digits_images(cfg.dtype)
    if kind == "mlp":
        cfg = model_config or mlp.MLPConfig()
        return mlp.MLP(cfg, seed), data.load_digits_flat(cfg.dtype)
    raise UsageError(f"unknown model kind {kind!r}; choose one of {', '.join(_KINDS)}")


def cache_key(kind: str, model_config, train_config: TrainConfig, seed: int, dataset: str) -> str:
    """Hex digest identifying a trained model by everything that determines its weights."""
    from hwcosim.models.nn.data import SPLIT_SEED

    blob = json.dumps(
        {
            "v": CACHE_VERSION, "kind": kind, "model": asdict(model_config),
            "train": asdict(train_config), "seed": seed, "dataset": dataset, "split_seed": SPLIT_SEED,
        },
        sort_keys=True, default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def get_trained(
    kind: str = "lstm",
    model_config=None,
    train_config: TrainConfig | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = "build/cache",
):
    """Train a model on digits once and cache its parameters; reload them on later calls.

    Parameters
    ----------
    kind : {"lstm", "cnn", "mlp"}
    model_config : LSTMConfig, CNNConfig or MLPConfig, optional
        Defaults to the kind's default config.
    train_config : TrainConfig, optional
        Defaults per kind (LSTM: 40 epochs).
    seed : int
        Initial-weight seed (the batch order uses ``train_config.seed``).
    cache_dir : path or None
        Folder of the cache (``<kind>-<key>.safetensors``, written atomically); None disables it.

    Returns
    -------
    model : Model
    dataset : models.nn.data.Dataset
    info : dict
        ``cache_file``, ``cached`` (True when loaded), ``test_accuracy``.
    """
    from safetensors.numpy import load, save

    model, ds = build_model(kind, model_config, seed)
    tc = train_config or TrainConfig()
    path = None
    if cache_dir is not None:
        key = cache_key(kind, model.config, tc, seed, ds.name)
        path = Path(cache_dir) / f"{kind}-{key}.safetensors"
    cached = False
    if path is not None and path.exists():
        try:
            model.set_params(load(path.read_bytes()))
            cached = True
        except Exception:  # a corrupt or stale file: retrain and overwrite it
            cached = False
    if not cached:
        train(model, ds.x_train, ds.y_train, tc)
        if path is not None:
            buf = save({k: np.ascontiguousarray(v) for k, v in model.params.items()},
                       metadata={"kind": kind, "config": json.dumps(asdict(model.config), default=str)})
            write_bytes(path, buf)
    info = {"cache_file": str(path) if path else None, "cached": cached,
            "test_accuracy": model.accuracy(ds.x_test, ds.y_test)}
    return model, ds, info



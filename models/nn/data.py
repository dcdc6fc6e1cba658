"""Real datasets that ship offline inside installed packages.

scikit-learn's ``load_digits`` (UCI optical handwritten digits, 1,797 images of 8x8 pixels,
grey levels 0..16, 10 classes) is bundled with the package, so no download is needed. It is
served as sequences (8 time steps of one 8-pixel row each, for the LSTM), as images
(N, 1, 8, 8) for the CNN, or flat (N, 64) for the MLP. The train/test split is fixed: a
stratified 80/20 split with a fixed seed, identical on every call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["Dataset", "load_digits_sequences", "load_digits_images", "load_digits_flat", "SPLIT_SEED"]

#: Seed of the fixed stratified train/test split (not the model's seed).
SPLIT_SEED = 12345
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class Dataset:
    """A train/test split.

    Attributes
    ----------
    x_train, x_test : ndarray
        Inputs, first axis = samples; the remaining shape depends on the view.
    y_train, y_test : ndarray of int64, shape (N,)
        Class labels in ``[0, classes)``.
    classes : int
    name : str
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    name: str


def _digits(dtype) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(dtype)  # (1797, 8, 8) in [0, 1]
    return x, d.target.astype(np.int64)


def _split(x: np.ndarray, y: np.ndarray, name: str, dtype) -> Dataset:
    from sklearn.model_selection import train_test_split

    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=y
    )
    return Dataset(
        np.ascontiguousarray(xtr, dtype=dtype), ytr, np.ascontiguousarray(xte, dtype=dtype), yte,
        int(y.max()) + 1, name,
    )


def _check_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise UsageError(f"dataset dtype must be float32 or float64, not {dt}")
    return dt


def load_digits_sequences(dtype=np.float32) -> Dataset:
    """Digits as sequences: ``x`` of shape (N, T=8, I=8), one image row per time step."""
    dt = _check_dtype(dtype)
    x, y = _digits(dt)
    return _split(x, y, "digits-seq", dt)


def load_digits_images(dtype=np.float32) -> Dataset:
    """Digits as images: ``x`` of shape (N, C=1, 8, 8)."""
    dt = _check_dtype(dtype)
    x, y = _digits(dt)
    return _split(x[:, None, :, :], y, "digits-img", dt)


def load_digits_flat(dtype=np.float32) -> Dataset:
    """Digits as flat vectors: ``x`` of shape (N, 64)."""
    dt = _check_dtype(dtype)
    x, y = _digits(dt)
    return _split(x.reshape(len(x), 64), y, "digits-flat", dt)

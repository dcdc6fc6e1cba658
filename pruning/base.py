"""The one interface every sparsity pattern shares: weights in, boolean mask out.

A pattern is a frozen dataclass of its parameters. ``mask(w)`` returns a boolean array of
``w``'s shape (``True`` = keep); ``check(mask)`` raises :class:`PatternError` when a mask
breaks the pattern's invariant; ``describe()`` gives the parameters as a JSON-ready dict.
Patterns register themselves by name so the CLI and the studies can list and build them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = [
    "PatternError", "Pattern", "register", "get_pattern", "pattern_names", "check_weights",
    "kept_per_group", "topk_mask",
]


class PatternError(UsageError):
    """Bad input for a pattern (shape, sparsity, non-finite weights) or a broken invariant."""


_REGISTRY: dict[str, type[Pattern]] = {}


def register(cls: type[Pattern]) -> type[Pattern]:
    """Class decorator: make a pattern available by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise RuntimeError(f"two patterns are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def get_pattern(name: str, **params) -> Pattern:
    """Build the registered pattern ``name`` with ``params``."""
    _load_builtin()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise PatternError(
            f"unknown sparsity pattern {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}"
        ) from None
    try:
        return cls(**params)
    except TypeError as e:
        raise PatternError(f"pattern {name!r}: {e}") from None


def pattern_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    # Importing the modules registers their patterns.
    import importlib
    import pkgutil

    import hwcosim.pruning.patterns as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"hwcosim.pruning.patterns.{mod.name}")


def check_weights(w: np.ndarray, ndim: int | None = 2) -> np.ndarray:
    """Validate a weight array (finite, numeric, of the expected rank) and return it as float64."""
    w = np.asarray(w)
    if w.dtype.kind not in "fiu":
        raise PatternError(f"weights must be numeric, not dtype {w.dtype}")
    if ndim is not None and w.ndim != ndim:
        raise PatternError(f"weights must be a {ndim}-D matrix, got shape {w.shape}")
    if w.size == 0:
        raise PatternError(f"weights are empty (shape {w.shape})")
    w = w.astype(np.float64, copy=False)
    if not np.isfinite(w).all():
        bad = int((~np.isfinite(w)).sum())
        raise PatternError(f"weights hold {bad} NaN/Inf values; clean or clip them before pruning")
    return w


@dataclass(frozen=True)
class Pattern(ABC):
    """Base class of a sparsity pattern (subclasses are frozen dataclasses)."""

    name: ClassVar[str] = ""

    @abstractmethod
    def mask(self, w: np.ndarray) -> np.ndarray:
        """Boolean keep-mask of ``w``'s shape."""

    @abstractmethod
    def check(self, mask: np.ndarray) -> None:
        """Raise :class:`PatternError` unless ``mask`` obeys the pattern's invariant."""

    def describe(self) -> dict:
        return {"pattern": self.name, **asdict(self)}

    def prune(self, w: np.ndarray) -> np.ndarray:
        """``w`` with the pruned entries set to zero."""
        m = self.mask(w)
        return np.where(m, w, 0).astype(np.asarray(w).dtype, copy=False)


def kept_per_group(group_size: int, sparsity: float, what: str) -> int:
    """Nonzeros kept in a group of ``group_size`` at ``sparsity`` (>= 1, exact top-k).

    ``k = round(group_size * (1 - sparsity))``; sparsity must lie in
    [0, (group_size - 1) / group_size] so that at least one weight per group survives.
    """
    if not (isinstance(sparsity, (int, float)) and math.isfinite(sparsity)):
        raise PatternError(f"sparsity must be a number in [0, 1), not {sparsity!r}")
    top = (group_size - 1) / group_size
    if sparsity < 0 or sparsity > top + 1e-9:
        raise PatternError(
            f"sparsity {sparsity} is impossible for {what} of {group_size}: "
            f"choose one in [0, {top:.6g}] (at least one weight per {what} is kept)"
        )
    return max(1, int(round(group_size * (1.0 - sparsity))))


def topk_mask(groups: np.ndarray, k: int) -> np.ndarray:
    """Keep the ``k`` largest magnitudes along the last axis; ties go to the lower index.

    ``groups`` has shape ``(..., n)``; returns a boolean array of the same shape.
    Deterministic: a stable sort of ``-|w|`` puts equal magnitudes in index order.
    """
    n = groups.shape[-1]
    if k >= n:
        return np.ones(groups.shape, dtype=bool)
    order = np.argsort(-np.abs(groups), axis=-1, kind="stable")[..., :k]
    m = np.zeros(groups.shape, dtype=bool)
    np.put_along_axis(m, order, True, axis=-1)
    return m

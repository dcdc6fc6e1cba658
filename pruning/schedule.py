"""Gradual magnitude pruning with the cubic sparsity schedule of Zhu & Gupta, "To prune, or not
to prune: exploring the efficacy of pruning for model compression", ICLR Workshop 2018
(arXiv 1710.01878, 2017)::

    s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt))**3,   t in {t0, t0 + dt, ..., t0 + n*dt}

Sparsity rises fast at first (while the network has redundant weights) and slowly at the end.
Between pruning steps the network is fine-tuned with its masks held fixed.

Two drivers: :func:`gradual_prune` for the numpy models of :mod:`hwcosim.models.nn` (one pruning step
= one call of the mask function, then ``finetune.epochs`` epochs of masked Adam), and
:class:`TorchGradualPruner` for a PyTorch ``nn.Module`` (only when ``torch`` is importable; the
step counter ``t`` is then the optimiser iteration). Masks come from any registered pattern of
:mod:`hwcosim.pruning.base` through :func:`pattern_mask_fn`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.train import TrainConfig, train
from hwcosim.pruning import base
from hwcosim.pruning.base import get_pattern, pattern_names

__all__ = ["CubicSchedule", "MaskFn", "pattern_mask_fn", "pattern_for_sparsity", "gradual_prune",
           "TorchGradualPruner"]

#: ``mask_fn(param_name, weights, sparsity) -> bool keep-mask of weights' shape``
MaskFn = Callable[[str, np.ndarray, float], np.ndarray]


@dataclass(frozen=True)
class CubicSchedule:
    """The cubic sparsity schedule (Zhu & Gupta 2017).

    Parameters
    ----------
    final : float
        Final sparsity s_f in [0, 1).
    initial : float
        Initial sparsity s_i in [0, final].
    start : int
        First pruning step t0 (>= 0).
    steps : int
        Number of pruning intervals n (>= 1).
    interval : int
        Pruning frequency dt (>= 1), in the caller's unit (epochs, iterations).
    """

    final: float
    initial: float = 0.0
    start: int = 0
    steps: int = 10
    interval: int = 1

    def __post_init__(self):
        if not (0.0 <= self.final < 1.0):
            raise UsageError(f"final sparsity must lie in [0, 1), not {self.final}")
        if not (0.0 <= self.initial <= self.final):
            raise UsageError(f"initial sparsity must lie in [0, final={self.final}], not {self.initial}")
        for name, lo in (("start", 0), ("steps", 1), ("interval", 1)):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < lo:
                raise UsageError(f"CubicSchedule.{name} must be an integer >= {lo}, not {v!r}")

    @property
    def end(self) -> int:
        """The last pruning step t0 + n*dt."""
        return self.start + self.steps * self.interval

    def sparsity(self, t):
        """Target sparsity at step(s) ``t`` (scalar or array); s_i before t0, s_f after the end."""
        t = np.asarray(t, dtype=np.float64)
        frac = np.clip((t - self.start) / (self.steps * self.interval), 0.0, 1.0)
        s = self.final + (self.initial - self.final) * (1.0 - frac) ** 3
        return float(s) if s.ndim == 0 else s

    def prune_steps(self) -> np.ndarray:
        """The steps at which masks are recomputed: t0 + k*dt for k = 1..n (int64, shape (n,))."""
        return self.start + self.interval * np.arange(1, self.steps + 1, dtype=np.int64)

    def is_prune_step(self, t: int) -> bool:
        return self.start <= t <= self.end and (t - self.start) % self.interval == 0


def _pattern_fields(name: str) -> dict:
    """Field name -> default of registered pattern ``name`` (raises PatternError if unknown)."""
    pattern_names()
    if name not in base._REGISTRY:
        get_pattern(name)  # raises the registry's "unknown pattern ... choose one of" error
    return {f.name: f.default for f in dataclasses.fields(base._REGISTRY[name])}


def pattern_for_sparsity(name: str, sparsity: float, **params):
    """Build registered pattern ``name`` at ``sparsity``.

    Patterns with a ``sparsity`` field take it directly. Patterns that express sparsity as
    N kept of every M (fields ``n`` and ``m``, e.g. N:M) get ``n = max(1, round(m * (1 - s)))``,
    the nearest count their group size allows (the achieved sparsity is then ``1 - n/m``).
    """
    fields = _pattern_fields(name)
    if "sparsity" in fields:
        return get_pattern(name, sparsity=float(sparsity), **params)
    if {"n", "m"} <= set(fields):
        m = int(params.get("m", fields["m"]))
        n = max(1, int(round(m * (1.0 - sparsity))))
        return get_pattern(name, **{**params, "n": n, "m": m})
    raise UsageError(
        f"pattern {name!r} has neither a 'sparsity' nor 'n'/'m' parameters; "
        "give a mask function of your own instead"
    )


def pattern_mask_fn(name: str, **params) -> MaskFn:
    """A :data:`MaskFn` pruning every parameter with registered pattern ``name``."""
    def fn(_pname: str, w: np.ndarray, sparsity: float) -> np.ndarray:
        if sparsity <= 0:
            return np.ones(np.shape(w), dtype=bool)
        return np.asarray(pattern_for_sparsity(name, sparsity, **params).mask(w), dtype=bool)
    return fn


def gradual_prune(
    model,
    x: np.ndarray,
    y: np.ndarray,
    mask_fn: MaskFn,
    param_names: Sequence[str],
    schedule: CubicSchedule,
    finetune: TrainConfig = TrainConfig(epochs=2, lr=2e-3, lr_final=1e-3),
    final_epochs: int = 0,
    x_val: np.ndarray | None = None,
    y_val: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Prune a numpy model gradually, fine-tuning between steps (model updated in place).

    At every step ``t`` of ``schedule.prune_steps()`` the masks of ``param_names`` are
    recomputed from the current (already masked) weights at ``schedule.sparsity(t)``, then the
    model is fine-tuned for ``finetune.epochs`` epochs with the masks held (batch order seeded
    ``finetune.seed + k`` at step k). ``final_epochs`` more epochs follow the last step.

    Returns
    -------
    masks : dict of str -> bool ndarray
        The final keep-masks.
    history : list of dict
        Per step: ``step``, ``target`` sparsity, ``achieved`` sparsity over ``param_names``,
        ``loss`` (last fine-tuning epoch) and, with a validation set, ``val_accuracy``.
    """
    missing = [p for p in param_names if p not in model.params]
    if missing:
        raise UsageError(f"cannot prune unknown parameters {missing}; the model has {sorted(model.params)}")
    masks: dict[str, np.ndarray] = {}
    history = []
    steps = list(schedule.prune_steps())
    for k, t in enumerate(steps):
        s = schedule.sparsity(t)
        masks = {p: mask_fn(p, model.params[p] * masks.get(p, True), s) for p in param_names}
        epochs = finetune.epochs + (final_epochs if k == len(steps) - 1 else 0)
        hist = train(model, x, y, replace(finetune, epochs=epochs, seed=finetune.seed + k), masks=masks)
        kept = sum(int(m.sum()) for m in masks.values())
        total = sum(m.size for m in masks.values())
        rec = {"step": int(t), "target": float(s), "achieved": 1.0 - kept / total,
               "loss": hist["loss"][-1] if hist["loss"] else None}
        if x_val is not None:
            rec["val_accuracy"] = model.accuracy(x_val, y_val)
        history.append(rec)
    return masks, history


class TorchGradualPruner:
    """Gradual pruning of a PyTorch module's parameters on the cubic schedule.

    Call :meth:`step` with the iteration counter ``t`` after every optimiser step (or attach
    it with :meth:`attach`, which registers an optimiser step post-hook). At the schedule's
    pruning steps the masks are recomputed (weights are moved to numpy for the mask function);
    after every step the masked weights are zeroed, so they stay at exactly 0.0.

    Parameters
    ----------
    module : torch.nn.Module
    param_names : sequence of str
        Names as in ``module.named_parameters()``.
    mask_fn : MaskFn
    schedule : CubicSchedule
        Its unit is the optimiser iteration.

    Raises
    ------
    ImportError
        If torch is not installed (``pip install 'hwcosim[torch]'``).
    """

    def __init__(self, module, param_names: Sequence[str], mask_fn: MaskFn, schedule: CubicSchedule):
        import torch

        self._torch = torch
        named = dict(module.named_parameters())
        missing = [p for p in param_names if p not in named]
        if missing:
            raise UsageError(f"unknown parameters {missing}; the module has {sorted(named)}")
        self.params = {p: named[p] for p in param_names}
        self.mask_fn, self.schedule = mask_fn, schedule
        self.masks: dict[str, object] = {}
        self.t = 0

    def update_masks(self, sparsity: float) -> None:
        torch = self._torch
        with torch.no_grad():
            for name, p in self.params.items():
                w = p.detach().cpu().numpy().astype(np.float64)
                m = self.mask_fn(name, w, sparsity)
                self.masks[name] = torch.as_tensor(np.asarray(m, dtype=bool), device=p.device)

    def apply(self) -> None:
        """Zero the masked weights in place."""
        with self._torch.no_grad():
            for name, m in self.masks.items():
                self.params[name].mul_(m.to(self.params[name].dtype))

    def step(self, t: int | None = None) -> None:
        """Advance to iteration ``t`` (default: previous + 1); prune when the schedule says so."""
        self.t = self.t + 1 if t is None else int(t)
        if self.schedule.is_prune_step(self.t) and self.t > self.schedule.start:
            self.update_masks(self.schedule.sparsity(self.t))
        self.apply()

    def attach(self, optimizer):
        """Call :meth:`step` after every ``optimizer.step()``; returns the hook handle."""
        return optimizer.register_step_post_hook(lambda *_a, **_k: self.step())

    def sparsity(self) -> float:
        """Fraction of exact zeros over the pruned parameters."""
        z = sum(int((p.detach() == 0).sum()) for p in self.params.values())
        return z / sum(p.numel() for p in self.params.values())

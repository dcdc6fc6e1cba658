"""``hwcosim.prune``: prune one weight matrix under a hardware sparsity pattern, in memory.

>>> import numpy as np, hwcosim
>>> r = hwcosim.prune(np.random.default_rng(0).normal(size=(16, 32)), pattern="bbs", banks=4, sparsity=0.75)
>>> r.mask.sum(axis=1)[:2], r.sparsity
(array([8, 8]), 0.75)

Built on the pruning library itself: the registered patterns (:mod:`hwcosim.pruning.base`,
:mod:`hwcosim.pruning.patterns`), the one-shot methods of :mod:`hwcosim.pruning.oneshot`
(``magnitude``, ``wanda``, ``obs``) and the storage formats (:mod:`hwcosim.pruning.formats`).
Whole weight files and models go through :mod:`hwcosim.pruning.api` (``hwcosim prune``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.pruning.base import Pattern, PatternError, check_weights, get_pattern, pattern_names

__all__ = ["prune", "PruneResult", "DEFAULT_SPARSITY"]

#: the sparsity of a pattern that takes one, when none is given
DEFAULT_SPARSITY = 0.5


@dataclass
class PruneResult:
    """One pruned matrix.

    Attributes
    ----------
    weights : ndarray (rows, cols), float64
        The pruned weights: zero where the mask prunes (``obs`` also updates the kept ones).
    mask : ndarray (rows, cols), bool
        ``True`` = kept; it obeys the pattern (checked).
    dense : ndarray
        The weights given, as float64.
    pattern : Pattern
        The pattern object (its parameters: ``pattern.describe()``).
    method : str
        ``magnitude``, ``wanda`` or ``obs``.
    info : dict
        What the method reports (tokens of calibration, OBS mask selection ...).
    """

    weights: np.ndarray
    mask: np.ndarray
    dense: np.ndarray
    pattern: Pattern
    method: str
    info: dict = field(default_factory=dict)

    @property
    def sparsity(self) -> float:
        """The fraction of weights pruned."""
        return float(1.0 - self.mask.mean())

    def output_error(self, inputs: np.ndarray) -> float:
        """``||(W - W') X^T|| / ||W X^T||`` over ``inputs`` (tokens, in): the layer's relative output error."""
        from hwcosim.pruning.oneshot import output_error

        return output_error(self.dense, self.weights, np.asarray(inputs, dtype=np.float64))

    def encode(self, fmt: Any = None) -> Any:
        """The pruned matrix in the pattern's hardware format, quantised to ``fmt``.

        Parameters
        ----------
        fmt : Q or str, optional
            Value format (``"Q2.6"``); default 8 bits fitting the largest kept magnitude.

        Returns
        -------
        CSBMatrix (``bbs``, ``balanced``), FSSMatrix (``fss``) or NMMatrix (``nm``)
            The input of the engines' golden models (``values``, ``indices``) and of
            ``hwcosim sim --csb`` once saved.
        """
        from hwcosim.models.fixedpoint import Q

        if isinstance(fmt, str):
            try:
                fmt = Q.parse(fmt)
            except ValueError as e:
                raise UsageError(f"fmt {fmt!r}: {e}") from None
        name = self.pattern.name
        try:
            if name in ("bbs", "balanced"):
                from hwcosim.pruning.formats import csb

                banks = self.pattern.banks if name == "bbs" else self.pattern.banks(self.weights.shape[1])
                return csb.encode(self.weights, banks, mask=self.mask, fmt=fmt)
            if name == "fss":
                from hwcosim.pruning.formats import fss

                return fss.encode(self.weights, self.pattern.region, mask=self.mask, fmt=fmt)
            if name == "nm":
                from hwcosim.pruning.formats import nm

                return nm.encode(self.weights, self.pattern.n, self.pattern.m, fmt=fmt, mask=self.mask)
        except PatternError as e:
            raise UsageError(f"encoding {name}: {e}") from None
        raise UsageError(f"pattern {name!r} has no hardware format here (bbs, balanced, fss and nm have); "
                         "use .weights and .mask")

    def summary(self) -> dict:
        """JSON-ready: the pattern, the method, the shape and the achieved sparsity."""
        return {"pattern": _plain(self.pattern.describe()), "method": self.method, "shape": list(self.mask.shape),
                "sparsity": self.sparsity, "kept": int(self.mask.sum()), "info": _plain(self.info)}

    def save(self, out_dir: str | os.PathLike, stem: str = "weights", fmt: Any = None) -> dict:
        """Write the result into ``out_dir`` (all files appear at once).

        Files: ``<stem>.mask.npy`` (bool), ``<stem>.pruned.npy`` (float64), ``prune.json`` (the
        summary) and, for a pattern with a hardware format, that format (``<stem>.json``,
        ``.npz``, ``.hex``: CSB for ``bbs``, which ``hwcosim sim --csb OUT_DIR`` reads).

        Parameters
        ----------
        out_dir : path
            Folder (created; same-named files are replaced).
        stem : str
            File name stem.
        fmt : Q or str, optional
            Value format of the hardware encoding (:meth:`encode`).

        Returns
        -------
        dict
            ``{"out": folder, "files": [names]}``.
        """
        from hwcosim.models.atomic import staged_dir, write_text

        out = Path(out_dir)
        enc = None
        if self.pattern.name in ("bbs", "balanced", "fss", "nm"):
            enc = self.encode(fmt)
        files = [f"{stem}.mask.npy", f"{stem}.pruned.npy", "prune.json"]
        with staged_dir(out, flag="out_dir") as st:
            np.save(st / f"{stem}.mask.npy", self.mask)
            np.save(st / f"{stem}.pruned.npy", self.weights)
            if enc is not None:
                from hwcosim.pruning.formats import csb, fss, nm

                mod = {"bbs": csb, "balanced": csb, "fss": fss, "nm": nm}[self.pattern.name]
                before = {p.name for p in st.iterdir()}
                mod.save(enc, st, stem)
                files += sorted({p.name for p in st.iterdir()} - before)
            write_text(st / "prune.json", json.dumps({**self.summary(), "files": files}, indent=1) + "\n")
        return {"out": str(out), "files": files}


def _plain(o):
    if isinstance(o, dict):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_plain(v) for v in o]
    if isinstance(o, np.generic):
        return o.item()
    return o.to_dict() if hasattr(o, "to_dict") else o


def prune(weights, pattern: str | Pattern = "bbs", sparsity: float | None = None, calibration=None,
          method: str = "magnitude", *, transposed: bool = False, damp: float = 0.01, blocksize: int = 128,
          **pattern_params) -> PruneResult:
    """Prune one weight matrix under a sparsity pattern.

    Parameters
    ----------
    weights : array_like (rows, cols)
        The weights (float; ``(out, in)``, or ``(in, out)`` with ``transposed=True``).
    pattern : str or Pattern
        A registered pattern name (``bbs``, ``balanced``, ``fss``, ``nm``, ``block``, ``vector``,
        ``unstructured``) or a pattern object.
    sparsity : float, optional
        Fraction pruned, for patterns that take one (default 0.5); ``nm`` (``n`` of ``m``) and
        ``fss`` with ``n`` fix it by their own parameters.
    calibration : array (tokens, in), optional
        Layer inputs; needed by ``wanda`` and ``obs``.
    method : str
        ``magnitude`` (the pattern's rule on ``|W|``), ``wanda`` or ``obs``
        (:mod:`hwcosim.pruning.oneshot`).
    transposed, damp, blocksize
        As :func:`hwcosim.pruning.oneshot.prune_layer`.
    **pattern_params
        The pattern's own parameters (``banks=8``; ``region=(2, 8)``; ``n=2, m=4``; ``block=(4, 4)``).

    Returns
    -------
    PruneResult
        ``.mask``, ``.weights``, ``.sparsity``, ``.encode()``, ``.save(dir)``.

    Raises
    ------
    UsageError
        Unknown pattern or method, a parameter the pattern refuses, weights of the wrong shape.
    """
    from hwcosim.pruning.oneshot import Calib, prune_layer

    try:
        w = check_weights(weights, ndim=2)
    except PatternError as e:
        raise UsageError(f"weights: {e}") from None
    if isinstance(pattern, Pattern):
        if sparsity is not None or pattern_params:
            raise UsageError("give the pattern's parameters either in the Pattern object or as arguments, not both")
        pat = pattern
    else:
        pat = _make_pattern(str(pattern), sparsity, pattern_params)
    calib = None
    if calibration is not None:
        calib = calibration if isinstance(calibration, Calib) else Calib.from_inputs(np.asarray(calibration))
    try:
        res = prune_layer(w, pat, method, calib, transposed=transposed, damp=damp, blocksize=blocksize)
    except PatternError as e:
        raise UsageError(f"pattern {pat.name}: {e}") from None
    return PruneResult(weights=res.weights, mask=res.mask, dense=w, pattern=pat, method=method, info=res.info)


def _make_pattern(name: str, sparsity: float | None, params: dict) -> Pattern:
    if name not in pattern_names():
        raise UsageError(f"unknown pattern {name!r}; choose one of: {', '.join(pattern_names())}")
    from hwcosim.pruning.base import _REGISTRY

    fields = {f.name for f in dataclasses.fields(_REGISTRY[name]) if f.init}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise UsageError(f"pattern {name!r} takes no parameter {unknown[0]!r}; it takes: "
                         f"{', '.join(sorted(fields))}")
    kw = dict(params)
    if "sparsity" in fields and not (name == "fss" and kw.get("n") is not None):
        kw["sparsity"] = DEFAULT_SPARSITY if sparsity is None else sparsity
    elif sparsity is not None:
        raise UsageError(f"pattern {name!r} fixes its sparsity by its parameters ({', '.join(sorted(fields))}); "
                         "drop sparsity")
    for k in ("region", "block"):
        if isinstance(kw.get(k), list):
            kw[k] = tuple(kw[k])
    try:
        return get_pattern(name, **kw)
    except PatternError as e:
        raise UsageError(str(e)) from None

"""Weight I/O for the pruning toolkit: read tensors from ``.npy`` / ``.npz``, safetensors,
PyTorch state dicts and ONNX models (their initialisers), select them by name or glob, and
read per-tensor pattern configs. Writing a pruned model back in its own format is
:mod:`pruning.roundtrip`.

Safety: nothing here unpickles arbitrary objects. ``.npy``/``.npz`` are read with
``allow_pickle=False``; safetensors is a plain header + buffer format (package ``safetensors``,
numpy API); PyTorch files are read with ``torch.load(weights_only=True)``, PyTorch's restricted
unpickler that only rebuilds tensors and plain containers, and only when torch is installed.
ONNX models are protobuf (package ``onnx``, :mod:`pruning.onnx_io`). ``bfloat16`` tensors
(safetensors, PyTorch, ONNX) are read as ``float32``, which holds them exactly.

A config file (TOML, or YAML when ``pyyaml`` is installed) maps tensor globs to patterns; the
first rule whose glob matches a tensor name wins::

    format = "Q2.6"            # optional default value format ("auto" = 8-bit fitting)

    [[rule]]
    tensors = "*.bias"         # a glob or a list of globs
    skip = true

    [[rule]]
    tensors = ["lstm.weight_*", "fc.weight"]
    pattern = "bbs"
    banks = 16
    sparsity = 0.875
    format = "Q1.7"            # optional, per rule

Every other key of a rule is a parameter of the pattern (see ``hwcosim prune --help``).
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.fixedpoint import Q
from pruning.base import Pattern, PatternError, get_pattern

__all__ = [
    "WeightIOError",
    "load_tensors",
    "tensor_names",
    "select",
    "Rule",
    "PruneConfig",
    "load_config",
    "TORCH_HINT",
]

TORCH_HINT = "pip install torch==2.13.0"
SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth", ".onnx")


class WeightIOError(ValueError):
    """A weight or config file that cannot be read, or a selection that matches nothing."""


def read_npy(path: str | Path) -> np.ndarray:
    """One array from a ``.npy`` file, never unpickling; any damage -> :class:`WeightIOError`."""
    path = Path(path)
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise WeightIOError(f"{path}: no such file") from None
    except Exception as e:  # numpy's header parser raises many types on damaged bytes
        if isinstance(e, ValueError) and "pickle" in str(e).lower():
            raise WeightIOError(
                f"{path}: holds Python objects (pickled); only numeric arrays are read"
            ) from None
        raise WeightIOError(f"{path}: not a readable .npy file ({type(e).__name__}: {e})") from None
    if not isinstance(a, np.ndarray):  # np.load opens a zip as an NpzFile
        if hasattr(a, "close"):
            a.close()
        raise WeightIOError(f"{path}: is a zip (.npz) archive, not a .npy array; rename it to .npz")
    return a


def _load_npy(path: Path) -> dict[str, np.ndarray]:
    return {path.stem: read_npy(path)}


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - any damage in the zip container
        if isinstance(e, ValueError) and "pickle" in str(e).lower():
            raise WeightIOError(
                f"{path}: holds Python objects (pickled); only numeric arrays are read"
            ) from None
        raise WeightIOError(f"{path}: not a readable .npz file ({type(e).__name__}: {e})") from None


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError:  # pragma: no cover - a declared dependency
        raise WeightIOError(
            "reading .safetensors needs the package safetensors: pip install safetensors"
        ) from None
    try:
        out = dict(load_file(str(path)))
        # with ml_dtypes imported (onnx brings it) BF16 arrives as ml_dtypes.bfloat16: widen it
        return {k: (a.astype(np.float32) if a.dtype.kind not in "fiub" else a) for k, a in out.items()}
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        msg = str(e)
        if "bf16" in msg.lower() or "bfloat16" in msg.lower():
            from pruning.roundtrip import RoundTripError, read_safetensors

            try:  # our byte-level reader widens BF16 to float32 (exact)
                return read_safetensors(path)
            except RoundTripError as e2:
                msg = str(e2)
        if "bf16" in msg.lower() or "bfloat16" in msg.lower():
            msg += "; numpy has no bfloat16: convert the file to float32 or float16 first"
        raise WeightIOError(f"{path}: not a readable safetensors file ({msg})") from None


def _flatten(obj, prefix: str, out: dict, torch) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        out[prefix] = t.numpy()
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, torch)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out, torch)
    # numbers, strings, None (e.g. an 'epoch' entry): not tensors, ignored


def _load_torch(path: Path) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise WeightIOError(
            f"{path}: reading PyTorch files needs torch: {TORCH_HINT} "
            "(or export the weights to .safetensors / .npz)"
        ) from None
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, EOFError...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WeightIOError(
            f"{path}: refused or unreadable PyTorch file (loaded with weights_only=True, "
            f"so only tensors and plain containers are allowed): {first}"
        ) from None
    out: dict[str, np.ndarray] = {}
    _flatten(obj, "", out, torch)
    if not out:
        raise WeightIOError(f"{path}: no tensors found in the PyTorch file")
    return out


def _load_onnx(path: Path) -> dict[str, np.ndarray]:
    from pruning.onnx_io import OnnxIOError, load_onnx

    try:
        return load_onnx(path)
    except OnnxIOError as e:
        raise WeightIOError(str(e)) from None


def load_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """All tensors of a weight file, by name, in file order.

    Parameters
    ----------
    path : str or Path
        ``.npy`` (one tensor, named after the file stem), ``.npz``, ``.safetensors``,
        ``.pt`` / ``.pth`` (a state dict, possibly nested: names are joined with ``.``),
        ``.onnx`` (the initialisers of the main graph).

    Raises
    ------
    WeightIOError
        Missing file, unknown suffix, a corrupt file, pickled objects, torch or onnx not
        installed.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightIOError(f"{path}: no such weight file")
    suffix = path.suffix.lower()
    loader = {
        ".npy": _load_npy,
        ".npz": _load_npz,
        ".safetensors": _load_safetensors,
        ".pt": _load_torch,
        ".pth": _load_torch,
        ".onnx": _load_onnx,
    }.get(suffix)
    if loader is None:
        raise WeightIOError(f"{path}: unknown weight file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    return loader(path)


def tensor_names(path: str | Path) -> list[str]:
    return list(load_tensors(path))


def select(names, globs) -> list[str]:
    """Names matching any of ``globs`` (``fnmatch``, case-sensitive), in the original order.

    ``globs`` may be ``None`` (everything), a string (comma-separated globs) or a list.
    A glob that matches nothing is an error (a typo should not silently prune nothing).
    """
    names = list(names)
    if globs is None:
        return names
    if isinstance(globs, str):
        globs = [g.strip() for g in globs.split(",") if g.strip()]
    if not globs:
        raise WeightIOError("empty tensor selection; give a name or glob such as 'encoder.*.weight'")
    for g in globs:
        if not any(fnmatch.fnmatchcase(n, g) for n in names):
            shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
            raise WeightIOError(f"tensor glob {g!r} matches none of: {shown}")
    return [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs)]


@dataclass(frozen=True)
class Rule:
    """One config rule: tensors matching ``globs`` get ``pattern`` (``None`` = skip)."""

    globs: tuple[str, ...]
    pattern: Pattern | None
    fmt: Q | None = None

    def matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, g) for g in self.globs)


@dataclass(frozen=True)
class PruneConfig:
    """An ordered list of rules; the first match wins. ``fmt`` is the default value format."""

    rules: tuple[Rule, ...] = field(default_factory=tuple)
    fmt: Q | None = None
    source: str = ""

    def rule_for(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.matches(name)), None)


def _parse_format(text, where: str) -> Q | None:
    if text is None or text == "auto":
        return None
    try:
        return Q.parse(str(text))
    except ValueError as e:
        raise WeightIOError(f"{where}: {e}") from None


def load_config(path: str | Path) -> PruneConfig:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``, needs pyyaml) pruning config.

    Every rule's pattern is built (and so validated) here, so a bad parameter is reported with
    the rule's number before any weight is touched.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightIOError(f"{path}: no such config file")
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise WeightIOError(f"{path}: not valid TOML ({e})") from None
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise WeightIOError(
                f"{path}: YAML configs need pyyaml (pip install pyyaml); or write the config as TOML"
            ) from None
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise WeightIOError(f"{path}: not valid YAML ({e})") from None
    else:
        raise WeightIOError(f"{path}: config must be .toml (or .yaml with pyyaml), not {suffix!r}")
    if not isinstance(data, dict):
        raise WeightIOError(f"{path}: the config must be a table with [[rule]] entries")
    unknown = set(data) - {"rule", "format"}
    if unknown:
        raise WeightIOError(f"{path}: unknown top-level keys {sorted(unknown)}; allowed: rule, format")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise WeightIOError(f"{path}: no rules; add [[rule]] tables with tensors = ... and pattern = ...")
    rules = []
    for i, r in enumerate(raw_rules, 1):
        where = f"{path}: rule {i}"
        if not isinstance(r, dict):
            raise WeightIOError(f"{where}: must be a table")
        r = dict(r)
        globs = r.pop("tensors", None)
        if isinstance(globs, str):
            globs = [globs]
        if not isinstance(globs, list) or not globs or not all(isinstance(g, str) for g in globs):
            raise WeightIOError(f'{where}: needs tensors = "glob" or a list of globs')
        fmt = _parse_format(r.pop("format", None), where)
        if r.pop("skip", False):
            if r:
                raise WeightIOError(f"{where}: a skip rule takes no other keys, found {sorted(r)}")
            rules.append(Rule(tuple(globs), None, fmt))
            continue
        name = r.pop("pattern", None)
        if not isinstance(name, str):
            raise WeightIOError(f'{where}: needs pattern = "<name>" (or skip = true)')
        try:
            pat = get_pattern(name, **r)
        except PatternError as e:
            raise WeightIOError(f"{where}: {e}") from None
        rules.append(Rule(tuple(globs), pat, fmt))
    return PruneConfig(tuple(rules), _parse_format(data.get("format"), str(path)), str(path))

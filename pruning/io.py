"""Weight I/O for the pruning toolkit: read tensors from ``.npy`` / ``.npz``, safetensors,
PyTorch state dicts and ONNX models (their initialisers), select them by name or glob, and
read per-tensor pattern configs. Writing a pruned model back in its own format is
:mod:`hwcosim.pruning.roundtrip`.

Safety: nothing here unpickles arbitrary objects. ``.npy``/``.npz`` are read with
``allow_pickle=False``; safetensors is a plain header + buffer format (package ``safetensors``,
numpy API); PyTorch files are read with ``torch.load(weights_only=True)``, PyTorch's restricted
unpickler that only rebuilds tensors and plain containers, and only when torch is installed.
ONNX models are protobuf (package ``onnx``, :mod:`hwcosim.pruning.onnx_io`). ``bfloat16`` tensors
(safetensors, PyTorch, ONNX) are read as ``float32``, which holds them exactly.

A config file (TOML, or YAML read with ``pyyaml``) maps tensor globs to patterns; the
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.models.budget import check_alloc, check_npy, check_npz
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q
from hwcosim.models.safeparse import decode_utf8, one_line, toml_loads
from hwcosim.pruning.base import Pattern, PatternError, get_pattern

__all__ = [
    "npz_members",
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


class WeightIOError(UsageError):
    """A weight or config file that cannot be read, or a selection that matches nothing."""


def _np_load(path: Path, kind: str, read):
    """``read(np.load(f))`` on the open file ``f``; every failure a one-line :class:`WeightIOError`.

    The file is opened (and closed) here: numpy leaks the handle of a zip it fails to open.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise WeightIOError(f"{path}: no such file") from None
    except OSError as e:
        raise WeightIOError(f"{path}: cannot read it ({e.strerror or e})") from None
    with f:
        magic = f.read(6)
        f.seek(0)
        if magic != b"\x93NUMPY" and not magic.startswith(b"PK\x03\x04") and not magic.startswith(b"PK\x05\x06"):
            if magic[:1] == b"\x80":  # a pickle (protocol 2+): numpy would offer to unpickle it
                raise WeightIOError(f"{path}: holds Python objects (pickled); only numeric arrays are read")
            raise WeightIOError(f"{path}: not a {kind} file (it does not start with the NumPy header "
                                f"\\x93NUMPY{' or a zip' if kind == '.npz' else ''}); write it with numpy.save")
        try:
            return read(np.load(f, allow_pickle=False))
        except WeightIOError:
            raise
        except Exception as e:  # noqa: BLE001 - numpy's header parser and zipfile raise many types
            if isinstance(e, ValueError) and "pickle" in str(e).lower():
                raise WeightIOError(
                    f"{path}: holds Python objects (pickled); only numeric arrays are read"
                ) from None
            raise WeightIOError(f"{path}: not a readable {kind} file ({type(e).__name__}: {one_line(e)})") from None


def read_npy(path: str | Path) -> np.ndarray:
    """One array from a ``.npy`` file, never unpickling; any damage -> :class:`WeightIOError`."""
    path = Path(path)
    check_npy(path, WeightIOError)  # the header's shape against the budget and the file size, before loading

    def one(a):
        if not isinstance(a, np.ndarray):  # np.load opens a zip as an NpzFile
            a.close()
            raise WeightIOError(f"{path}: is a zip (.npz) archive, not a .npy array; rename it to .npz")
        return a

    return _np_load(path, ".npy", one)


def _load_npy(path: Path) -> dict[str, np.ndarray]:
    return {path.stem: read_npy(path)}


def npz_members(path: str | Path) -> dict[str, int]:
    """``{array name: unpacked bytes}`` of a ``.npz`` from its zip directory, reading no array."""
    import zipfile

    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            return {i.filename[:-4]: int(i.file_size) for i in zf.infolist() if i.filename.endswith(".npy")}
    except FileNotFoundError:
        raise WeightIOError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise WeightIOError(f"{path}: not a readable .npz file ({type(e).__name__}: {one_line(e)})") from None


def _load_npz(path: Path, keep=None) -> dict[str, np.ndarray]:
    members = npz_members(path)
    chosen = [k for k in members if keep is None or keep(k)]
    # checked from the zip directory and each member's .npy header, before anything is unpacked
    check_npz(path, WeightIOError, names=set(chosen), fix="select fewer tensors (--tensors)")

    def some(z):
        if isinstance(z, np.ndarray):
            raise WeightIOError(f"{path}: is a .npy array, not a zip (.npz) archive; rename it to .npy")
        with z:
            return {k: z[k] for k in z.files if k in chosen}

    return _np_load(path, ".npz", some)


_WIDENED = {"BF16": 2, "F16": 2}  # read as float32: twice the bytes they take in the file


def _check_safetensors_budget(path: Path) -> None:
    """The float32 arrays a safetensors file's header declares, against the memory budget, before
    the data is read (its header is JSON at the start of the file; a damaged one is left to the reader)."""
    from hwcosim.pruning.roundtrip import RoundTripError, safetensors_header

    try:
        header, _start = safetensors_header(path)
    except RoundTripError:
        return
    total = 0
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        offs = info.get("data_offsets")
        if isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs):
            total += max(offs[1] - offs[0], 0) * _WIDENED.get(info.get("dtype"), 1)
    check_alloc(total, f"{path}: its tensors", "select fewer tensors or a smaller model", WeightIOError)


def _check_torch_budget(path: Path) -> None:
    """A PyTorch file's tensor storage against the memory budget before ``torch.load``: the unpacked
    sizes of the zip archive's ``data/`` members (the format since torch 1.6), else the file size."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            total = sum(i.file_size for i in zf.infolist() if "/data/" in i.filename)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        total = path.stat().st_size
    check_alloc(total, f"{path}: its tensor storage", "export fewer tensors", WeightIOError)


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    _check_safetensors_budget(path)
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
            from hwcosim.pruning.roundtrip import RoundTripError, read_safetensors

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
    _check_torch_budget(path)
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
    from hwcosim.pruning.onnx_io import OnnxIOError, load_onnx

    try:
        return load_onnx(path)
    except OnnxIOError as e:
        raise WeightIOError(str(e)) from None


def load_tensors(path: str | Path, keep=None) -> dict[str, np.ndarray]:
    """The tensors of a weight file (all, or those whose name ``keep(name)`` accepts), in file order.

    A ``.npz`` is read selectively: only the kept arrays are unpacked, after their unpacked size
    (from the zip directory) was checked against the memory available.

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
    if loader is _load_npz:
        return _load_npz(path, keep)
    out = loader(path)
    return out if keep is None else {k: v for k, v in out.items() if keep(k)}


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


def _yaml_problem(e) -> str:
    """One line from a pyyaml error (its own text spans several lines, with a source excerpt)."""
    parts = [x for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x]
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    text = one_line(" ".join(parts) if parts else e)
    if mark is not None:
        text += f" (line {mark.line + 1}, column {mark.column + 1})"
    return text


_MAX_NESTING = 64


def _flow_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` in ``text`` (quotes ignored: an over-estimate is harmless here)."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return best


def _load_yaml(path: Path):
    """A YAML config as plain data (``yaml.SafeLoader``: no Python objects), refusing duplicate keys
    (which YAML would silently resolve to the last one, while TOML refuses them) and aliases."""
    try:
        import yaml
    except ImportError:
        raise WeightIOError(
            f"{path}: YAML configs need pyyaml (pip install pyyaml); or write the config as TOML"
        ) from None

    class _Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            # An alias repeats a subtree by reference: nine levels of nine fit in 400 bytes and expand
            # to 387 million strings once a message prints the value. Configs need no aliases.
            if self.check_event(yaml.events.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, "found an alias (*name); write the value out instead of using YAML anchors",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                except TypeError:  # unhashable: the base class reports it
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"found the key {key!r} twice",
                        key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    text = decode_utf8(path.read_bytes(), str(path), WeightIOError, "config")
    if _flow_depth(text) > _MAX_NESTING:  # pyyaml takes seconds to hit its recursion limit in [[[[...
        raise WeightIOError(f"{path}: brackets nested more than {_MAX_NESTING} deep; flatten the config")
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise WeightIOError(f"{path}: not valid YAML: {_yaml_problem(e)}; fix the syntax there") from None
    except (RecursionError, MemoryError):
        raise WeightIOError(f"{path}: nested too deeply to read; flatten the config") from None
    except (ValueError, OverflowError) as e:  # a value its tag cannot build: 2020-13-45, !!int x, 5000 digits
        why = "an integer of more than 4300 digits" if "integer string conversion" in str(e) else one_line(e, 120)
        raise WeightIOError(f"{path}: a value YAML cannot build ({why}); write it as a plain number or "
                            "string") from None


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
        data = toml_loads(path.read_bytes(), str(path), WeightIOError, "config")
    elif suffix in (".yaml", ".yml"):
        data = _load_yaml(path)
    else:
        raise WeightIOError(f"{path}: config must be .toml (or .yaml with pyyaml), not {suffix!r}")
    if not isinstance(data, dict):
        raise WeightIOError(f"{path}: the config must be a table with [[rule]] entries")
    unknown = set(data) - {"rule", "format"}
    if unknown:
        raise WeightIOError(f"{path}: unknown top-level keys {sorted(map(repr, unknown))}; allowed: rule, format")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise WeightIOError(f"{path}: no rules; add [[rule]] tables with tensors = ... and pattern = ...")
    rules = []
    for i, r in enumerate(raw_rules, 1):
        where = f"{path}: rule {i}"
        if not isinstance(r, dict):
            raise WeightIOError(f"{where}: must be a table")
        r = dict(r)
        odd = [k for k in r if not isinstance(k, str)]
        if odd:
            raise WeightIOError(f"{where}: keys must be names such as pattern or banks, not {odd[0]!r}")
        globs = r.pop("tensors", None)
        if isinstance(globs, str):
            globs = [globs]
        if not isinstance(globs, list) or not globs or not all(isinstance(g, str) for g in globs):
            raise WeightIOError(f'{where}: needs tensors = "glob" or a list of globs')
        fmt = _parse_format(r.pop("format", None), where)
        skip = r.pop("skip", False)
        if not isinstance(skip, bool):
            raise WeightIOError(f"{where}: skip must be true or false, not {skip!r}")
        if skip:
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

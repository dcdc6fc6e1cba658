"""A key that fixes a design's elaborated netlist without elaborating it.

Elaborating an Amaranth design and converting it to RTLIL costs 0.1 to 8 s of CPU (the BBS LSTM's
formal harness: 7.5 s); the test suite and sweeps simulate one configuration many times, and the
formal record checks verdicts of unchanged harnesses. :func:`design_key` names what the netlist is a
function of, so those can reuse a netlist (:func:`hwcosim.cosim.flow.runner.to_verilog`) or a verdict
(:mod:`hwcosim.cosim.flow.formal`) without elaborating:

- the design object as constructed: its class and, recursively, every attribute it holds
  (parameters, nested components, the names, shapes and initial values of its signals, arrays by
  their bytes); an attribute with no canonical form (a closure, an object of an unknown kind) means
  **no key**, and the caller elaborates as before;
- the source of the code that elaborates it: every ``.py`` file of ``hdl/`` and of ``models/`` but
  ``models/systems/`` (what ``hdl`` imports), and the versions of Python and Amaranth;
- the state of those modules in this process (every module of ``hdl/`` and the ``models`` modules it
  names, a fixed list): every module-level constant and table by value (a monkeypatched one, e.g. a
  test's smaller FIFO depth), the current value of every context variable (``dsp_target("ecp5")``
  elaborates DSP primitives) and the qualified name of every module-level function and class and of
  their methods (a patched-in replacement has another name).

A key is a sha256 hex digest; equal keys mean the same netlist for everything listed. What it does not
see, and what therefore must not change a netlist: state held elsewhere than the design object and
those modules (environment variables: ``hdl/`` reads none).
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import functools
import hashlib
import json
import sys
import types
from pathlib import Path

__all__ = ["design_key", "source_digest", "mark_used"]

_ROOT = Path(__file__).resolve().parents[2]
#: traversal limit: a design holding more objects than this gets no key (elaborated as before)
MAX_NODES = 200_000
_SIMPLE = (type(None), bool, int, float, complex, str, bytes)


#: attributes that say where an object was created (absolute source paths, lines): the Verilog is
#: written without source locations, and a key must not change with the checkout's folder
_WHERE = ("_MustUse__context", "_MustUse__used", "src_loc", "_src_loc", "src_loc_at", "_src_loc_at")


class _NoKey(Exception):
    pass


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 of every ``.py`` file under ``hdl/`` and ``models/`` (not ``models/systems/``) and of this
    module, by path and content, with the Python and Amaranth versions."""
    from importlib import metadata

    h = hashlib.sha256()
    files = sorted(p for top in ("hdl", "models") for p in (_ROOT / top).rglob("*.py")
                   if p.relative_to(_ROOT / top).parts[:1] != ("systems",) or top == "hdl")
    for p in files + [Path(__file__).resolve()]:   # and this key's own rules
        h.update(str(p.relative_to(_ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    try:
        amaranth = metadata.version("amaranth")
    except metadata.PackageNotFoundError:  # pragma: no cover - amaranth is a dependency
        amaranth = "?"
    h.update(f"{sys.version_info[:3]}|{amaranth}".encode())
    return h.hexdigest()


def _name(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}"


@functools.lru_cache(maxsize=1)
def _state_modules() -> tuple[str, ...]:
    """The modules whose state enters every key, a fixed list (a key must not depend on what else a
    process happened to import): every module of ``hdl/`` and every ``models`` module ``hdl/`` names."""
    import importlib
    import re

    hdl = _ROOT / "hdl"
    names, models = set(), set()
    for p in hdl.rglob("*.py"):
        names.add(".".join(("hwcosim", "hdl", *p.relative_to(hdl).with_suffix("").parts)).removesuffix(".__init__"))
        models.update(re.findall(r"hwcosim\.models(?:\.\w+)+", p.read_text(encoding="utf-8")))
    for ref in models:   # a dotted name may end in an attribute: keep its longest module prefix
        parts = ref.split(".")[2:]
        while parts and not ((_ROOT / "models" / Path(*parts)).with_suffix(".py").is_file()
                             or (_ROOT / "models" / Path(*parts) / "__init__.py").is_file()):
            parts.pop()
        names.add(".".join(["hwcosim", "models", *parts]))
    out = tuple(sorted(names))
    for n in out:
        importlib.import_module(n)
    return out


def _module_state() -> str:
    """The module-level state of :func:`_state_modules` as one digest: constants by value, functions and
    classes (and their methods) by qualified name."""
    h = hashlib.sha256()
    for mname in _state_modules():
        mod = sys.modules[mname]
        h.update(mname.encode())
        for k, v in sorted(vars(mod).items()):
            if k.startswith("__"):
                continue
            if isinstance(v, _SIMPLE) or (isinstance(v, tuple | frozenset) and _all_simple(v)):
                h.update(f"{k}={v!r};".encode())
            elif isinstance(v, type):
                h.update(f"{k}:{_name(v)}[".encode())
                for ak, av in sorted(vars(v).items()):
                    if isinstance(av, types.FunctionType | staticmethod | classmethod | property):
                        fn = getattr(av, "__func__", None) or getattr(av, "fget", None) or av
                        h.update(f"{ak}:{_name(fn)},".encode())
                    elif isinstance(av, _SIMPLE):
                        h.update(f"{ak}={av!r},".encode())
                h.update(b"]")
            elif isinstance(v, types.ModuleType):
                continue   # a submodule (present once anything imported it): not state
            elif isinstance(v, contextvars.ContextVar):   # e.g. hdl.common.dsp's target family
                h.update(f"{k}:context={v.get('<unset>')!r};".encode())
            elif callable(v):
                h.update(f"{k}:{_name(v)};".encode())
            else:   # tables, register maps, arrays: by value
                try:
                    h.update(f"{k}:{json.dumps(_canon(v, {}, [0]))};".encode())
                except (_NoKey, RecursionError, TypeError, ValueError):
                    h.update(f"{k}:{type(v).__qualname__};".encode())
    return h.hexdigest()


def _all_simple(t) -> bool:
    return all(isinstance(x, _SIMPLE) or (isinstance(x, tuple) and _all_simple(x)) for x in t)


def _canon(obj, seen: dict, count: list):
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _NoKey("too large")
    if isinstance(obj, _SIMPLE):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, enum.Enum):
        return ["enum", _name(type(obj)), obj.name]
    if isinstance(obj, type):
        return ["class", _name(obj)]
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        if isinstance(obj, types.MethodType):
            return ["method", _name(obj.__func__), _canon(obj.__self__, seen, count)]
        if "<locals>" in obj.__qualname__ or "<lambda>" in obj.__qualname__ or getattr(obj, "__closure__", None):
            raise _NoKey(f"closure {obj.__qualname__}")
        return ["function", _name(obj)]
    if isinstance(obj, range | slice):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, functools.partial):
        return ["partial", _canon(obj.func, seen, count), _canon(obj.args, seen, count),
                _canon(obj.keywords, seen, count)]
    oid = id(obj)
    if oid in seen:
        return ["ref", seen[oid]]
    seen[oid] = len(seen)
    if isinstance(obj, list | tuple):
        return [type(obj).__name__, [_canon(x, seen, count) for x in obj]]
    if isinstance(obj, set | frozenset):
        return [type(obj).__name__, sorted(json.dumps(_canon(x, seen, count)) for x in obj)]
    if isinstance(obj, dict):
        return ["dict", sorted([json.dumps(_canon(k, seen, count)), _canon(v, seen, count)] for k, v in obj.items())]
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if np is not None and isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        if a.dtype.hasobject:
            return ["ndarray-object", list(a.shape), [_canon(x, seen, count) for x in a.ravel().tolist()]]
        return ["ndarray", a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]
    if np is not None and isinstance(obj, np.generic):
        return ["npscalar", obj.dtype.str, repr(obj.item())]
    from amaranth.hdl import Signal

    if isinstance(obj, Signal):
        return ["Signal", obj.name, repr(obj.shape()), repr(obj.init), obj.reset_less,
                _canon(dict(obj.attrs), seen, count)]
    if dataclasses.is_dataclass(obj):
        return ["dataclass", _name(type(obj)),
                [[f.name, _canon(getattr(obj, f.name), seen, count)] for f in dataclasses.fields(obj)]]
    state = {}
    if hasattr(obj, "__dict__"):
        state.update(vars(obj))
    for cls in type(obj).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if s not in ("__dict__", "__weakref__") and hasattr(obj, s):
                state[s] = getattr(obj, s)
    if not state and not hasattr(obj, "__dict__") and not getattr(type(obj), "__slots__", None):
        raise _NoKey(f"an object of type {_name(type(obj))}")
    for where in _WHERE:   # where it was created (an absolute path and a line): not the netlist
        state.pop(where, None)
    return ["object", _name(type(obj)), sorted([k, _canon(v, seen, count)] for k, v in state.items())]


def design_key(design, *extra) -> str | None:
    """The key of ``design``'s netlist (module docstring), with ``extra`` (JSON-ready: the top-level
    name, ports ...) mixed in; None when some attribute has no canonical form."""
    try:
        canon = _canon(design, {}, [0])
    except (_NoKey, RecursionError, TypeError, ValueError):
        return None
    text = json.dumps([canon, list(extra), source_digest(), _module_state()], default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def mark_used(design) -> None:
    """Mark ``design`` and every elaboratable it holds as used (Amaranth warns at exit about an
    elaboratable that was never elaborated; a netlist reused from its key was not)."""
    from amaranth._unused import MustUse

    stack, seen = [design], set()
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (*_SIMPLE, type, types.FunctionType)):
            continue
        seen.add(id(o))
        if isinstance(o, MustUse):
            o._MustUse__used = True
        if isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif hasattr(o, "__dict__") and type(o).__module__.startswith(("hwcosim", "amaranth")):
            stack.extend(vars(o).values())

"""Registry of the RTL designs that ``hwcosim verilog`` (and ``make verilog``) can emit.

Each design is a :class:`Design`: a name, the Verilog top-level name, a default parameter
object (a frozen dataclass from ``models``) and a factory that builds the Amaranth component.
Parameters are overridden from the command line with ``--param field=value`` (the value is
converted to the field's current type: int, float, bool, or a fixed-point format ``Q2.6``).

Designs are found in modules named ``cosim.designs_*``; each exposes ``DESIGNS``, a list of
:class:`Design`. Adding a design means adding such a module, nothing else.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Design", "designs", "get_design", "override_params"]


@dataclass(frozen=True)
class Design:
    name: str
    top: str
    default_params: Callable[[], Any]
    build: Callable[[Any], Any]
    description: str = ""


def designs() -> dict[str, Design]:
    import cosim

    found: dict[str, Design] = {}
    for mod in pkgutil.iter_modules(cosim.__path__):
        if mod.name.startswith("designs_"):
            for d in importlib.import_module(f"cosim.{mod.name}").DESIGNS:
                if d.name in found:
                    raise RuntimeError(f"two designs are named {d.name!r}")
                found[d.name] = d
    return dict(sorted(found.items()))


def get_design(name: str) -> Design:
    ds = designs()
    if name not in ds:
        raise ValueError(f"unknown design {name!r}; choose one of: {', '.join(ds)}")
    return ds[name]


def _convert(old: Any, text: str, field: str) -> Any:
    from models.fixedpoint import Q

    if isinstance(old, Q):
        try:
            return Q.parse(text)
        except ValueError as e:
            raise ValueError(f"--param {field}: {e}") from None
    try:
        if isinstance(old, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(old, int):
            return int(text, 0)
        if isinstance(old, float):
            return float(text)
        if isinstance(old, tuple):
            return tuple(int(v, 0) for v in text.replace("x", ",").split(","))
        if isinstance(old, str):
            return text
    except ValueError:
        raise ValueError(f"--param {field}={text}: expected a {type(old).__name__} like {old!r}") from None
    raise ValueError(f"--param {field}: fields of type {type(old).__name__} cannot be set from the command line")


def override_params(params: Any, overrides: list[str]) -> Any:
    """``params`` with ``field=value`` overrides applied (validated by the dataclass)."""
    fields = {f.name for f in dataclasses.fields(params)}
    changes = {}
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"--param {item!r}: write field=value, e.g. --param pes=4")
        key, text = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if key not in fields:
            raise ValueError(f"--param {key}: no such parameter; choose from {', '.join(sorted(fields))}")
        changes[key] = _convert(getattr(params, key), text.strip(), key)
    return dataclasses.replace(params, **changes)

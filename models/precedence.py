"""Command line over file over defaults: the one precedence rule of every command that merges them.

A command that reads settings from more than one place (design defaults, a ``--params``/
``--config``/``--scenario``/sweep spec file, command-line flags) merges them with :func:`layered`,
lowest precedence first::

    layered(("defaults", defaults), ("--params p.toml", from_file), ("--param", from_flags))

A value of ``None`` in a layer means "not given there" (so an unset flag never hides the file's
value); a later layer wins. A key that no layer below the command line knows, or that is not in
``known``, cannot apply: it is a :class:`~models.errors.UsageError` naming the key, where it came
from and what is allowed, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hwcosim.models.errors import UsageError

__all__ = ["layered", "sources"]


def _norm(key: str) -> str:
    return str(key).strip().replace("-", "_")


def layered(*layers: tuple[str, Mapping[str, Any] | None], known: Iterable[str] | None = None,
            what: str = "setting") -> dict[str, Any]:
    """Merge ``(name, mapping)`` layers, lowest precedence first; see the module docstring.

    ``known``: the keys that can apply (``None``: any). Keys are compared with ``-`` read as ``_``.
    """
    return sources(*layers, known=known, what=what)[0]


def sources(*layers: tuple[str, Mapping[str, Any] | None], known: Iterable[str] | None = None,
            what: str = "setting") -> tuple[dict[str, Any], dict[str, str]]:
    """:func:`layered`, and for each key the name of the layer its value came from."""
    allowed = None if known is None else {_norm(k) for k in known}
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for name, values in layers:
        for key, value in (values or {}).items():
            k = _norm(key)
            if allowed is not None and k not in allowed:
                raise UsageError(f"{name}: {key!r} is no {what} here; choose from {', '.join(sorted(allowed))}")
            if value is None:
                continue
            merged[k] = value
            origin[k] = name
    return merged, origin

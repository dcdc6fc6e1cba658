"""Helpers shared by the models' command-line modules: one-line errors, output folders, JSON, tables.

Tables: build with :func:`table` (or rich's Table) and print with :func:`show`, the one place that
lays a table out so no number is cut and that records it for ``--json``; :func:`emit` adds a
command's summary to the ``--json`` document (see :mod:`hwcosim.models.tables`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hwcosim.models.atomic import write_text
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import emit, json_active, show, table

__all__ = ["fail", "out_dir", "staged", "check_output_args", "write_json", "json_default", "table", "show", "emit",
           "json_active"]


def fail(msg: str):
    """Bad input: raise :class:`UsageError` (the dispatcher prints ``error: msg``, exit status 2)."""
    raise UsageError(msg)


def out_dir(arg: str | None, default: str) -> Path:
    """The output folder (``arg`` or ``default``), checked before any work: a file in its place or
    in its path, or a folder that cannot be written, is bad input (one line, exit 2)."""
    from hwcosim.models.atomic import check_out_dir

    return check_out_dir(arg if arg else default)


def staged(fn, out: Path, *args, **kwargs):
    """``fn(staging, *args, **kwargs)`` with ``staging`` a temporary folder beside ``out`` whose files
    are renamed into ``out`` only when ``fn`` returns (:func:`hwcosim.models.atomic.staged_dir`): a late
    failure leaves no half-written output folder."""
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:
        return fn(st, *args, **kwargs)


def check_output_args(args) -> None:
    """Refuse an unusable output folder given on the command line (``-o``/``--output``/``--out`` of any
    command) before the command does any work: an existing file, a path inside a file, or a folder
    that cannot be written is bad input (one line, exit 2)."""
    from hwcosim.models.atomic import check_out_dir

    for name in ("output", "out"):
        v = getattr(args, name, None)
        if isinstance(v, str) and v:
            check_out_dir(v)


def _plain(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))


def json_default(o):
    """``json.dumps`` default for a ``--json`` document: numpy values, paths, sets, dataclasses; else text."""
    import dataclasses

    if isinstance(o, np.generic | np.ndarray):
        return _plain(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, set | frozenset):
        return sorted(o, key=str)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    return str(o)


def write_json(path: Path, obj) -> Path:
    """Write ``obj`` as JSON (numpy scalars and arrays converted), atomically."""
    return write_text(path, json.dumps(obj, indent=1, default=_plain) + "\n")

"""Helpers shared by the command modules: one-line errors, output folders, option tables, study commands.

Tables: build with :func:`table` (or rich's Table) and print with :func:`show`, the one place that
lays a table out so no number is cut and that records it for ``--json``; :func:`emit` adds a
command's summary to the ``--json`` document (see :mod:`hwcosim.models.tables`)."""

from __future__ import annotations

from pathlib import Path

from hwcosim.models.benchio import write_json
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import emit, json_active, show, table

__all__ = ["fail", "out_dir", "staged", "lazy", "study_command", "command", "add_study", "entry", "check_output_args",
           "write_json", "json_default", "table", "show", "emit", "json_active", "add_param_args", "add_options"]


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


def lazy(ref: str):
    """The function ``"module:name"``, imported at its first call (a command's parser is built without
    importing the library behind it)."""
    def call(*args, **kwargs):
        import importlib

        mod, _, name = ref.partition(":")
        return getattr(importlib.import_module(mod), name)(*args, **kwargs)

    call.__name__ = ref.partition(":")[2]
    return call


def study_command(ref, default_out: str, options=(), say: bool = True):
    """The command of a study ``"module:bench"`` (or a function) called ``bench(out, quick, seed=...,
    **options)``: runs it into ``-o`` (default ``default_out``), staged, with the ``options`` (dests) that
    were given, and (``say``) prints where the files went and how long it took. Every numeric option's
    range is checked by the parser (:mod:`hwcosim.cosim.cli.ranges`)."""
    import time

    fn = lazy(ref) if isinstance(ref, str) else ref

    def run(args) -> int:
        out = out_dir(args.output, default_out)
        extra = {k: v for k in options if (v := getattr(args, k, None)) is not None}
        t0 = time.monotonic()
        staged(fn, out, args.quick, seed=args.seed, **extra)
        if say:
            print(f"wrote JSON + PNG to {out}/ ({time.monotonic() - t0:.1f} s)")
        return 0

    return run


def command(sub, name: str, func, help_: str | None = None, rows=(), **kw):
    """A subcommand ``name`` that runs ``func(args)``, with the options of ``rows`` (:func:`add_options`);
    ``kw`` go to ``add_parser`` (``description``, ``epilog``, ...)."""
    ap = sub.add_parser(name, help=help_, **kw)
    add_options(ap, rows)
    ap.set_defaults(func=func)
    return ap


def add_study(sub, name: str, help_: str, ref, default_out: str, rows=(), *, description: str | None = None,
              quick: str = "the < 1 minute setting", seed: str | None = "seed (default 0)", say: bool = True):
    """A study subcommand: ``--quick``, ``-o/--output``, ``--seed`` (default 0), then the options of ``rows``
    (:func:`add_options`; passed to the bench by dest), run by :func:`study_command`."""
    dests = [flags.split()[-1].lstrip("-").replace("-", "_") for flags, *_ in rows]
    return command(sub, name, study_command(ref, default_out, dests, say), help_, [
        ("--quick", quick, True), ("-o --output", f"output folder (default {default_out})", dict(metavar="DIR")),
        ("--seed", seed, dict(type=int, default=0)), *rows], description=description)


def entry(*prefix: str):
    """A stand-alone ``main(argv=None)``, the same as ``hwcosim PREFIX... argv``: the one dispatcher
    reports errors."""
    def main(argv=None) -> int:
        import sys

        from hwcosim.cosim.cli import main as hwcosim

        return hwcosim([*prefix, *(sys.argv[1:] if argv is None else argv)])

    main.__doc__ = f"Stand-alone entry, the same as ``hwcosim {' '.join((*prefix, '...'))}``."
    return main


def check_output_args(args) -> None:
    """Refuse an unusable output folder given on the command line (``-o``/``--output``/``--out`` of any
    command) before the command does any work: an existing file, a path inside a file, or a folder
    that cannot be written is bad input (one line, exit 2)."""
    for name in ("output", "out"):
        v = getattr(args, name, None)
        if isinstance(v, str) and v:
            out_dir(v, v)


def json_default(o):
    """``json.dumps`` default for a ``--json`` document: numpy values, paths, sets, dataclasses; else text."""
    import dataclasses

    import numpy as np
    from hwcosim.models.benchio import numpy_plain

    if isinstance(o, np.generic | np.ndarray):
        return numpy_plain(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, set | frozenset):
        return sorted(o, key=str)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    return str(o)


def add_param_args(ap, param_help: str = "set a design parameter, e.g. --param pes=4 --param weight_fmt=Q2.6 "
                   "(repeatable; validated by the design's parameter class)",
                   params_help: str = "design parameters from a TOML file of FIELD = VALUE lines (--param wins)"):
    """Add ``--param FIELD=VALUE`` (repeatable) and ``--params FILE.toml`` to an argparse parser."""
    add_options(ap, [("--param", param_help, dict(action="append", default=[], metavar="FIELD=VALUE")),
                     ("--params", params_help, dict(metavar="FILE.toml", default=None))])


def add_options(ap, rows) -> None:
    """Add options from a table of rows ``(flags, help)``, ``(flags, help, kwargs)`` or ``(flags, help, True)``
    (a ``store_true`` flag); ``flags`` is one string (``"-o --output"``), a name without a dash is positional."""
    for flags, help_, *rest in rows:
        kw = rest[0] if rest else {}
        kw = {"action": "store_true"} if kw is True else kw
        ap.add_argument(*flags.split(), help=help_, **kw)

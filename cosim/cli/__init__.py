"""``hwcosim``: the one console command. Each package owns its subcommands; this dispatches.

Exit status: 0 success, 1 a failed check (RTL != golden model, a failed simulation), 2 bad
input (one line on stderr naming the problem and the fix).
"""

from __future__ import annotations

import argparse
import sys

from hwcosim.models.errors import CheckFailed, UsageError  # re-exported: the one error path

__all__ = ["main", "UsageError", "CheckFailed", "build_parser"]


def _register_all(sub) -> None:
    from hwcosim.cosim.cli import commands

    commands.register(sub)
    for modname in _PACKAGE_COMMANDS:
        mod = __import__(modname, fromlist=["register"])
        (getattr(mod, "register_cli", None) or mod.register)(sub)


# Subcommands that live in other packages (each module has register(subparsers)).
#: (a module with ``register_cli(subparsers)`` is registered through that instead).
_PACKAGE_COMMANDS: list[str] = ["hwcosim.pruning.cli", "hwcosim.pruning.study", "hwcosim.cosim.cli.kvdirect", "hwcosim.cosim.cli.melo",
                                "hwcosim.cosim.cli.cluster", "hwcosim.cosim.cli.beamraster", "hwcosim.cosim.flow.sweep", "hwcosim.cosim.flow.formal",
                                "hwcosim.cosim.flow.fuzz", "hwcosim.cosim.cli.reliability", "hwcosim.cosim.cli.graph",
                                "hwcosim.cosim.cli.jobs", "hwcosim.cosim.cli.elastic", "hwcosim.cosim.cli.bridges", "hwcosim.cosim.cli.build",
                                "hwcosim.cosim.cli.board"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``error: PROG: what; see PROG --help``), exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    from hwcosim.cosim.cli.ranges import apply_ranges

    parser = _Parser(
        prog="hwcosim",
        description="Hardware/software co-design of AI-datacenter systems: verified accelerator RTL, "
                    "golden models, pruning tools and cluster models.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _register_all(sub)
    apply_ranges(parser)  # every numeric option checked against its documented range before any work
    add_json_flags(parser)  # every command: --json prints its tables and summary as one JSON document
    return parser


JSON_HELP = ("print the results (every table this command prints, and its summary) as one JSON document on "
             "stdout; progress and messages go to stderr")


def leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command path, parser)`` of every subcommand that runs something (no further subcommands)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and path:
        yield path, parser
    for a in subs:
        for name, p in a.choices.items():
            yield from leaf_parsers(p, (*path, name))


def add_json_flags(parser: argparse.ArgumentParser) -> None:
    """``--json`` on every subcommand (a command that registered its own keeps it, with this meaning)."""
    for _, p in leaf_parsers(parser):
        own = [a for a in p._actions if "--json" in a.option_strings]
        if own:
            own[0].help = JSON_HELP
        else:
            p.add_argument("--json", action="store_true", help=JSON_HELP)


def _tables_keep_numbers() -> None:
    """Terminal tables never cut a number: a cell that does not fit folds onto the next line instead
    of ending in an ellipsis, and output that is not a terminal (a file, a pipe, a CI log) is laid
    out 200 columns wide instead of rich's default 80."""
    import functools
    import os

    from rich.table import Table

    if not getattr(Table.add_column, "_hwcosim_fold", False):
        orig = Table.add_column

        @functools.wraps(orig)
        def add_column(self, *a, overflow="fold", **k):
            return orig(self, *a, overflow=overflow, **k)

        add_column._hwcosim_fold = True
        Table.add_column = add_column
    if not sys.stdout.isatty():
        os.environ.setdefault("COLUMNS", "200")


def main(argv: list[str] | None = None) -> int:
    _tables_keep_numbers()

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a refused argument (2, its one line already printed)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    if not getattr(args, "json", False):
        return _run(args)
    return _run_json(args, list(sys.argv[1:] if argv is None else argv))


def _run_json(args, argv: list[str]) -> int:
    """Run with ``--json``: anything the command prints goes to stderr (the Python streams and, for
    the tools it starts, file descriptor 1); one JSON document goes to stdout at the end."""
    import contextlib
    import json
    import os

    from hwcosim.cosim.cli.util import json_default
    from hwcosim.models.tables import json_session

    out = sys.stdout
    out.flush()
    saved_fd = None
    try:
        saved_fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no real descriptor 1 (an embedding host): the Python-level redirect still holds
        saved_fd = None
    try:
        with json_session() as doc, contextlib.redirect_stdout(sys.stderr):
            rc = _run(args)
    finally:
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
    command = [a for a in argv if a != "--json"]
    out.write(json.dumps({"command": command, "exit": rc, "tables": doc["tables"], "result": doc["result"]},
                         default=json_default) + "\n")
    out.flush()
    return rc


def _run(args) -> int:
    from hwcosim.cosim.flow.runner import SimFailure, SimulatorMissing
    from hwcosim.cosim.flow.synth import SynthError

    try:
        from hwcosim.cosim.cli.util import check_output_args

        check_output_args(args)  # an unusable -o DIR is refused before any work
        rc = args.func(args)
    except CheckFailed as e:
        print(f"FAILED: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    except SimFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    except SimulatorMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (UsageError, ValueError, FileNotFoundError, IsADirectoryError) as e:
        # ValueError covers parameter validation (BBSParams, Q, PatternError, FormatError)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:
        # a file-system refusal the command did not foresee (disk full, permissions, a path that is a file)
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(f"error: {e.strerror or type(e).__name__}{where}; check the paths and free space", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())

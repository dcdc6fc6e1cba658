"""``hwcosim``: the one console command. Each package owns its subcommands; this dispatches.

Exit status: 0 success, 1 a failed check (RTL != golden model, a failed simulation:
:class:`CheckFailed`), 2 bad input (:class:`UsageError` or a refused path: one line on stderr naming
the problem and the fix), 70 a bug in hwcosim (any other exception: its traceback on stderr, then
one line saying so), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from hwcosim.models.errors import BUG_EXIT, CHECK_EXIT, USAGE_EXIT, CheckFailed, UsageError  # the one error path

__all__ = ["main", "UsageError", "CheckFailed", "build_parser", "BUG_EXIT", "BUG_LINE"]

#: The line printed under the traceback of an exception that is neither bad input nor a failed check.
BUG_LINE = "hwcosim: this is a bug in hwcosim, not in your input; please report it with the traceback above"


def _register_all(sub) -> None:
    from hwcosim.cosim.cli import commands

    commands.register(sub)
    for ref in _PACKAGE_COMMANDS:
        modname, _, fn = ref.partition(":")
        getattr(__import__(modname, fromlist=["register"]), fn or "register")(sub)


#: The other command modules, each with ``register(subparsers)`` (or ``"module:function"``).
_PACKAGE_COMMANDS: list[str] = [
    "hwcosim.cosim.cli.prune", "hwcosim.cosim.cli.study", "hwcosim.cosim.cli.docs_hook", "hwcosim.cosim.cli.kvdirect",
    "hwcosim.cosim.cli.melo", "hwcosim.cosim.cli.cluster", "hwcosim.cosim.cli.beamraster", "hwcosim.cosim.cli.sweep",
    "hwcosim.cosim.cli.commands:register_checks", "hwcosim.cosim.cli.reliability",
    "hwcosim.cosim.cli.graph", "hwcosim.cosim.cli.jobs", "hwcosim.cosim.cli.elastic", "hwcosim.cosim.cli.bridges",
    "hwcosim.cosim.cli.build", "hwcosim.cosim.cli.board", "hwcosim.cosim.cli.compile"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``error: PROG: what; see PROG --help``), exit status 2."""

    def error(self, message):
        _say(f"error: {self.prog}: {message}; see {self.prog} --help")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from hwcosim.cosim.cli.ranges import apply_ranges

    parser = _Parser(
        prog="hwcosim",
        description="Hardware/software co-design of AI-datacenter systems: verified accelerator RTL, "
                    "golden models, pruning tools and cluster models.")
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="the data directory of real datasets (traces, topologies, graphs) for this run; "
                             "default $HWCOSIM_DATA, else ../shared/data beside the checkout")
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


#: the error lines said during this run (``--json`` puts the last one in its document)
_SAID: list[str] = []


def _say(line: str) -> None:
    """Print one error line on stderr and remember it for the ``--json`` document."""
    _SAID.append(line)
    print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run ``hwcosim ARGV``; with ``--json`` anywhere before ``--``, stdout is exactly one JSON document
    (``command``, ``exit``, ``error``: the error line or null, ``tables``, ``result``) whatever the outcome:
    argument errors, bad input, failed checks and bugs included (a bug's traceback stays on stderr)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    head = argv[: argv.index("--")] if "--" in argv else argv
    return _main_json(argv) if "--json" in head else _main(argv)


def _main(argv: list[str]) -> int:
    try:
        _tables_keep_numbers()
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help (0) or a refused argument (2, its one line already printed)
            return int(e.code or 0) if not isinstance(e.code, str) else 2
        with _data_dir(args.data):
            return _run(args)
    except UsageError as e:  # refused while parsing (an option's own check) or a bad --data
        _say(f"error: {_first_line(e)}")
        return USAGE_EXIT
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except Exception:  # noqa: BLE001 - outside the command (the parser): still a bug
        return _bug()


def _main_json(argv: list[str]) -> int:
    """``--json``: anything the command prints goes to stderr (the Python streams and, for the tools it
    starts, file descriptor 1); one JSON document goes to stdout at the end, for every outcome."""
    import json

    from hwcosim.cosim.cli.util import json_default
    from hwcosim.models.tables import json_session

    out = sys.stdout
    out.flush()
    del _SAID[:]
    doc = {"tables": [], "result": None}
    try:
        saved_fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no real descriptor 1 (an embedding host): the Python-level redirect still holds
        saved_fd = None
    try:
        with json_session() as doc, contextlib.redirect_stdout(sys.stderr):
            rc = _main(argv)
    except Exception:  # noqa: BLE001 - the JSON session itself failed: a bug, still one document
        rc = _bug()
    finally:
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
    command = [a for a in argv if a != "--json"]
    try:
        text = json.dumps({"command": command, "exit": rc, "error": _SAID[-1] if _SAID else None,
                           "tables": doc["tables"], "result": doc["result"]}, default=json_default)
    except (TypeError, ValueError):  # a result that is not JSON: a bug; the document still says so
        rc = _bug()
        text = json.dumps({"command": command, "exit": rc, "error": _SAID[-1], "tables": [], "result": None})
    out.write(text + "\n")
    out.flush()
    return rc


@contextlib.contextmanager
def _data_dir(path: str | None):
    """``--data DIR``: the data directory (:mod:`hwcosim.models.data`) for this run only."""
    from hwcosim.models.data import ENV

    if path is None:
        yield
        return
    if not os.path.isdir(path):
        raise UsageError(f"--data {path}: not a folder; give the folder that holds the datasets "
                         f"(alibaba-pai-2020/, lingjun-2023/, ...)")
    old = os.environ.get(ENV)
    os.environ[ENV] = os.path.abspath(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def _bug() -> int:
    """The exception being handled is a bug in hwcosim: its traceback, the bug line, exit 70."""
    import traceback

    sys.stdout.flush()
    traceback.print_exc(file=sys.stderr)
    _say(BUG_LINE)
    sys.stderr.flush()
    return BUG_EXIT


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _run(args) -> int:
    """Run the parsed command and map its outcome to the exit status (the one error rule).

    :class:`CheckFailed` -> 1 (``FAILED: ...``); :class:`UsageError` and ``OSError`` (a path the user
    gave that cannot be read or written) -> 2 (``error: ...``, one line); ``KeyboardInterrupt`` -> 130;
    any other exception is a bug in hwcosim -> its traceback, :data:`BUG_LINE` and 70.
    """
    from hwcosim.cosim.cli.util import check_output_args
    from hwcosim.cosim.flow.runner import SimFailure
    from hwcosim.cosim.flow.synth import SynthError

    try:
        check_output_args(args)  # an unusable -o DIR is refused before any work
        rc = args.func(args)
    except (SimFailure, SynthError) as e:  # checks whose message carries the tool's log tail: all of it
        _say(f"FAILED: {str(e).strip() or type(e).__name__}")
        return CHECK_EXIT
    except CheckFailed as e:
        _say(f"FAILED: {_first_line(e)}")
        return CHECK_EXIT
    except (UsageError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        # parameter validation, every reader's own error class, a missing simulator, a path the user gave
        _say(f"error: {_first_line(e)}")
        return USAGE_EXIT
    except OSError as e:
        # a file-system refusal the command did not foresee (disk full, permissions, a path that is a file)
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        _say(f"error: {e.strerror or _first_line(e)}{where}; check the paths and free space")
        return USAGE_EXIT
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except ImportError as e:  # a command of an optional extra run without it: name the extra (exit 2)
        from hwcosim.models.extras import missing_extra

        err = missing_extra(e)
        if err is None:
            return _bug()
        _say(f"error: {_first_line(err)}")
        return USAGE_EXIT
    except Exception:  # noqa: BLE001 - neither bad input nor a failed check: a bug, never passed off as one
        return _bug()
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())

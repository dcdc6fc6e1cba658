"""The one error rule of the ``hwcosim`` command (issue 40, requirement 3).

Bad input raises :class:`hwcosim.models.errors.UsageError` (exit 2, one line, no traceback); a
check that ran and failed raises :class:`~hwcosim.models.errors.CheckFailed` (exit 1); the
dispatcher also refuses an unusable path (``OSError``, exit 2). Anything else is a bug in hwcosim:
the traceback, one line saying so, exit 70. A numpy broadcast error planted inside a command must
come out as a bug, not as "error: ..." with exit 2 (what the dispatcher did before).
"""

from __future__ import annotations

import ast
import builtins
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim import cli
from hwcosim.models.errors import BUG_EXIT, CheckFailed, UsageError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "hdl", "pruning", "cosim", "hwcosim")

#: The command the bug is planted in (a real subcommand; only its function is replaced).
COMMAND = "check"


def _broadcast_bug(args):
    """A genuine numpy ValueError inside a command: the kind of bug that used to pass for bad input."""
    return int((np.zeros(3) + np.zeros(4)).sum())


def _plant(monkeypatch, func) -> None:
    """Make ``hwcosim check`` run ``func`` instead of its own function (the parser is otherwise real)."""
    real = cli.build_parser

    def build():
        parser = real()
        leaves = dict(cli.leaf_parsers(parser))
        assert (COMMAND,) in leaves, f"hwcosim has no '{COMMAND}' subcommand to plant the bug in"
        leaves[(COMMAND,)].set_defaults(func=func)
        return parser

    monkeypatch.setattr(cli, "build_parser", build)


def _raiser(exc: BaseException):
    def func(args):
        raise exc

    return func


def test_planted_value_error_is_a_bug(monkeypatch, tmp_path, capsys):
    _plant(monkeypatch, _broadcast_bug)
    rc = cli.main([COMMAND, str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == BUG_EXIT == 70
    assert "Traceback (most recent call last)" in err
    assert "ValueError: operands could not be broadcast" in err
    assert "_broadcast_bug" in err  # the traceback reaches the line that failed
    assert err.rstrip().splitlines()[-1] == cli.BUG_LINE
    assert "error: operands" not in err  # not passed off as bad input


def test_planted_value_error_with_json(monkeypatch, tmp_path, capsys):
    """``--json``: the document on stdout says exit 70; the traceback still goes to stderr."""
    import json

    _plant(monkeypatch, _broadcast_bug)
    rc = cli.main([COMMAND, str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert rc == 70
    assert json.loads(out)["exit"] == 70
    assert "Traceback (most recent call last)" in err and cli.BUG_LINE in err


@pytest.mark.parametrize("exc", [ValueError("operands could not be broadcast together"), KeyError("rows"),
                                 TypeError("unsupported operand"), IndexError("index 9 is out of bounds"),
                                 AssertionError("invariant"), RuntimeError("boom")])
def test_any_other_exception_is_a_bug(monkeypatch, tmp_path, capsys, exc):
    _plant(monkeypatch, _raiser(exc))
    assert cli.main([COMMAND, str(tmp_path)]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and f"{type(exc).__name__}" in err
    assert err.rstrip().splitlines()[-1] == cli.BUG_LINE


def test_usage_error_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    _plant(monkeypatch, _raiser(UsageError("--rows 0: give a positive row count\n(a second line)")))
    assert cli.main([COMMAND, str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == ["error: --rows 0: give a positive row count"]
    assert "Traceback" not in err and cli.BUG_LINE not in err


def test_check_failed_is_exit_1(monkeypatch, tmp_path, capsys):
    _plant(monkeypatch, _raiser(CheckFailed("3 result words differ from the golden model")))
    assert cli.main([COMMAND, str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["FAILED: 3 result words differ from the golden model"]


def test_reader_and_tool_errors_keep_their_exit(monkeypatch, tmp_path, capsys):
    """The project's own error classes: bad input -> 2, failed checks (simulation, synthesis) -> 1."""
    from hwcosim.cosim.flow.runner import SimFailure, SimulatorMissing
    from hwcosim.cosim.flow.synth import SynthError
    from hwcosim.models.systems.cluster.scenario import ScenarioError
    from hwcosim.pruning.base import PatternError
    from hwcosim.pruning.formats.csb import FormatError
    from hwcosim.pruning.io import WeightIOError

    cases = [(ScenarioError("scenario.toml: [job] tp: give an integer"), 2),
             (PatternError("sparsity 1.5 is outside [0, 1)"), 2), (FormatError("w.csb: truncated"), 2),
             (WeightIOError("w.npz: not a weight file"), 2), (SimulatorMissing("SIM=icarus needs iverilog"), 2),
             (SimFailure("cocotb test failed"), 1), (SynthError("Yosys failed on top (xcup)"), 1),
             (FileNotFoundError(2, "No such file or directory", str(tmp_path / "none.npz")), 2),
             (PermissionError(13, "Permission denied", str(tmp_path)), 2)]
    for exc, want in cases:
        _plant(monkeypatch, _raiser(exc))
        assert cli.main([COMMAND, str(tmp_path)]) == want, exc
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.splitlines()) == 1, err
        assert err.startswith("FAILED: " if want == 1 else "error: "), err


def test_parameter_validation_is_usage_error():
    """Parameter dataclasses refuse bad fields with UsageError (still a ValueError for library callers)."""
    from hwcosim.models.bbs.spmxv import BBSParams
    from hwcosim.models.fixedpoint import Q

    for bad in (lambda: BBSParams(rows=0, cols=64, banks=4, k=2), lambda: Q(0, 4), lambda: Q.parse("Q2")):
        with pytest.raises(UsageError):
            bad()
        with pytest.raises(ValueError):
            bad()


def _run_module(code: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


_PLANTED_MAIN = textwrap.dedent("""
    import runpy, sys
    import numpy as np
    from hwcosim.cosim import cli

    real = cli.build_parser
    def build():
        p = real()
        dict(cli.leaf_parsers(p))[(sys.argv[1],)].set_defaults(func=lambda a: (np.zeros(3) + np.zeros(4)).sum())
        return p
    cli.build_parser = build
    sys.argv[0] = "hwcosim"
    runpy.run_module("hwcosim.cosim.cli", run_name="__main__", alter_sys=True)  # python -m hwcosim.cosim.cli
""")


def test_planted_bug_through_python_m(tmp_path):
    """The same bug through ``python -m hwcosim.cosim.cli``: a real process exit status of 70."""
    p = _run_module(_PLANTED_MAIN, COMMAND, str(tmp_path))
    assert p.returncode == 70, p.stderr[-2000:]
    assert "Traceback (most recent call last)" in p.stderr
    assert "ValueError: operands could not be broadcast" in p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == cli.BUG_LINE


def test_bad_input_through_python_m(tmp_path):
    """Real bad input (a run folder that does not exist) through ``python -m``: one line, exit 2."""
    p = subprocess.run([sys.executable, "-m", "hwcosim.cosim.cli", "check", str(tmp_path / "no-such-run")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr


# ---- static: every project exception class means "bad input" or "a check failed" ---------------
#: Exception classes that are neither, each with the reason it never reaches the dispatcher as input.
ALLOWED = {
    "UsageError": "the root of bad input",
    "CheckFailed": "the root of failed checks",
    "LayoutError": "an internal invariant of the KV store's own memory (models.kvdirect.layout): raised only by "
                   "a bug, so it must surface as one",
    "_CacheMiss": "control flow inside cosim.flow.sweep (a cache file to ignore), caught where it is raised",
    "_NoKey": "control flow inside cosim.flow.elabkey (a design without a key: elaborated as before), caught "
              "where it is raised",
    "WrongResult": "only the __cause__ of a fuzz Crash (a CheckFailed), never raised on its own",
    "SetupError": "models/systems/jobs/_sandbox_init.py runs by path as the sandbox's PID 1 (standard library "
                  "only, never imported): it reports the error through the status descriptor, the host "
                  "turns that into one line",
}
_BUILTIN_EXC = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                and issubclass(getattr(builtins, n), BaseException)}


def _project_classes() -> dict[str, tuple[str, list[str]]]:
    """``name -> (file, base names)`` of every class defined under the four folders and ``hwcosim/``."""
    out: dict[str, tuple[str, list[str]]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                    out.setdefault(node.name, (path.relative_to(ROOT).as_posix(), bases))
    return out


def _roots(name: str, classes, seen=()) -> set[str]:
    """The builtin exceptions and the two roots that ``name`` derives from, by name within the project."""
    if name in ("UsageError", "CheckFailed") and name in classes:
        return {name}
    if name not in classes or name in seen:
        return {name} if name in _BUILTIN_EXC else set()
    return set().union(*(_roots(b, classes, (*seen, name)) for b in classes[name][1])) if classes[name][1] else set()


def test_every_project_error_class_follows_the_rule():
    classes = _project_classes()
    assert {"UsageError", "CheckFailed"} <= set(classes)
    exceptions = {n for n in classes if _roots(n, classes) & (_BUILTIN_EXC | {"UsageError", "CheckFailed"})}
    assert {"ScenarioError", "PatternError", "FormatError", "WeightIOError", "SimFailure"} <= exceptions
    bad = []
    for name in sorted(exceptions | {n for n in classes if n.endswith("Error")}):
        if name in ALLOWED:
            continue
        roots = _roots(name, classes)
        if not roots & {"UsageError", "CheckFailed"}:
            bad.append(f"{classes[name][0]}: {name}({', '.join(classes[name][1])})")
    assert not bad, ("every exception class must derive from UsageError (bad input) or CheckFailed (a failed "
                     "check), or be listed in ALLOWED with a reason:\n" + "\n".join(bad))


def test_allow_list_is_current():
    classes = _project_classes()
    stale = [n for n in ALLOWED if n not in classes]
    assert not stale, f"ALLOWED names classes that no longer exist: {stale}"


def _one_doc(out: str) -> dict:
    """stdout holds exactly one JSON document (and nothing else)."""
    import json

    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, out
    return json.loads(lines[0])


@pytest.mark.parametrize("argv, rc, says", [
    (["sim", "--no-such-option", "--json"], 2, "unrecognized arguments: --no-such-option"),
    (["sim", "melo-engine", "--param", "nope=1", "--json"], 2, "parameter nope"),
    (["--json"], 2, "arguments are required"),
    (["sim", "--help", "--json"], 0, None),
])
def test_json_is_one_document_for_every_outcome(argv, rc, says, capsys):
    """``--json``: argument errors, bad input and --help each leave exactly one document on stdout,
    carrying the exit status and the error line (also said on stderr)."""
    assert cli.main(argv) == rc
    out, err = capsys.readouterr()
    doc = _one_doc(out)
    assert doc["exit"] == rc
    if says is None:
        assert doc["error"] is None
    else:
        assert says in doc["error"] and doc["error"] in err.splitlines()


@pytest.mark.parametrize("exc, rc, prefix", [
    (UsageError("--rows 0: give a positive row count"), 2, "error: --rows 0"),
    (CheckFailed("word 3 differs"), 1, "FAILED: word 3 differs"),
    (ValueError("planted"), 70, cli.BUG_LINE),
])
def test_json_document_carries_the_error_line(monkeypatch, tmp_path, capsys, exc, rc, prefix):
    _plant(monkeypatch, _raiser(exc))
    assert cli.main([COMMAND, str(tmp_path), "--json"]) == rc
    out, err = capsys.readouterr()
    doc = _one_doc(out)
    assert doc["exit"] == rc and doc["error"].startswith(prefix)
    assert ("Traceback (most recent call last)" in err) == (rc == 70)

"""Terminal tables never cut a number, and every command takes ``--json`` (issue 27, requirement 6).

- :func:`hwcosim.models.tables.show` (the one way a table reaches the terminal) keeps every number whole
  at 60 columns: labels fold, numeric columns are at least as wide as their longest number, and a
  table that cannot fit is printed wider than the terminal rather than cut.
- Every subcommand of the parser (derived from it, not listed by hand: a new command without an
  entry in :data:`CASES` fails here) runs with ``--json`` at ``COLUMNS=60`` and prints exactly one
  JSON document on stdout (nothing else), with every table it would have printed. Cheap
  invocations run in ``make test``; studies, RTL simulation and benches are marked ``slow``.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from hwcosim.cosim.cli import build_parser, leaf_parsers, main

SCEN = "models/systems/cluster/scenarios"


def _leaves() -> list[str]:
    return [" ".join(p) for p, _ in leaf_parsers(build_parser())]


# ---- the table helper ------------------------------------------------------------------------------
def _render(t, width: int) -> str:
    from hwcosim.models.tables import show
    from rich.console import Console

    buf = io.StringIO()
    show(t, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def _wide_table():
    from hwcosim.models.tables import table

    return table("a long title that must wrap somewhere on a narrow terminal",
                 ["design and configuration", "LUT4", "cycles", "Fmax (MHz)", "words/s", "note"],
                 [["bbs-spmxv with a long configuration label", 1048576, 123456789, "83.9", "12,345,678.5",
                   "kept 4096 of 8192"],
                  ["x", 3, 4, "5.1", "6", "-"]])


def test_a_table_at_60_columns_keeps_every_number_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    text = _render(_wide_table(), 60)
    for n in ("1048576", "123456789", "83.9", "12,345,678.5", "4096", "8192"):
        assert n in text, (n, text)
    assert "…" not in text and "..." not in text
    # and through the environment, as a command sees it (rich reads COLUMNS)
    from hwcosim.models.tables import show
    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr("rich.console.Console", lambda **k: Console(file=buf, color_system=None, **k))
    show(_wide_table())
    assert "1048576" in buf.getvalue() and "123456789" in buf.getvalue()


def test_a_table_that_fits_is_not_widened():
    from hwcosim.models.tables import table

    text = _render(table("t", ["name", "n"], [["a", 1048576]]), 60)
    assert max(len(ln) for ln in text.splitlines()) < 60 and "1048576" in text


def test_json_session_records_tables_with_numbers_as_numbers():
    from hwcosim.models.tables import emit, json_session, show

    with json_session() as doc:
        show(_wide_table())
        emit("summary", {"k": 1})
    (t,) = doc["tables"]
    assert t["columns"][:2] == ["design and configuration", "LUT4"]
    assert t["rows"][0][1:5] == [1048576, 123456789, 83.9, 12345678.5] and t["rows"][1][5] == "-"
    assert doc["result"] == {"summary": {"k": 1}}


# ---- every command with --json ---------------------------------------------------------------------
#: command -> (arguments of a cheap run, runs in make test?). ``{w}``: a 16 x 32 weight file,
#: ``{csb}``: CSB weights pruned from it, ``{train}``: a small training script, ``{run}``: a run folder
CASES: dict[str, tuple[list[str], bool]] = {
    "verilog": (["bbs-spmxv", "--synth", "none", "-o", "v"], True),
    "sim": (["--csb", "{csb}", "--pes", "2", "--n", "1"], False),
    "check": (["{run}"], False),
    "demo": (["--synth", "none", "--vectors", "1"], False),
    "bench": (["--only", "kvdirect_resources", "--quick"], False),
    "prune": (["--pattern", "bbs", "--banks", "4", "--sparsity", "0.5", "{w}", "-o", "p"], True),
    "study accuracy": (["--quick"], False),
    "study seernet": (["--quick"], False),
    "study seernet-timing": (["--quick"], False),
    "study oneshot": (["--quick"], False),
    "kvdirect study": (["--ops", "1000"], False),
    "kvdirect mops": (["--ops", "1000"], False),
    "melo study": (["--quick"], False),
    "melo run": (["--conns", "2", "--duration-us", "100"], True),
    "cluster arnold": (["--quick"], False),
    "cluster c4p": (["--quick"], False),
    "cluster crux": (["--quick"], False),
    "cluster run": ([f"{SCEN}/small.toml", "-q"], True),
    "cluster speed": (["--gpus", "64", "--jobs", "4", "--iterations", "1"], True),
    "beamraster study": (["--quick"], False),
    "beamraster sim": (["--M", "4", "--K", "2", "--frames", "1"], False),
    "beamraster realtime": ([], False),
    "sweep": (["cosim/flow/sweeps/kvdirect_rs.toml"], False),
    "formal": (["--list"], True),
    "fuzz": (["--list"], True),
    "reliability c4d": (["--quick"], False),
    "reliability mycroft": (["--quick"], False),
    "reliability byterobust": (["--quick"], False),
    "reliability byterobust-loop": (["--quick"], False),
    "reliability noise": (["--quick"], False),
    "reliability pai": (["--quick"], False),
    "docs": (["--check"], True),
    "papers": (["bbs", "kv-direct"], True),
    "cluster trace": (["--quick"], False),
    "graph run": (["pagerank", "--graph", "karate", "--executor", "serial"], True),
    "graph partition": (["--graph", "karate"], True),
    "graph tux2": (["--algo", "mf", "--epochs", "1", "--workers", "2", "--executor", "simulated"], False),
    "graph compiled-bench": (["--scales", "8", "--threads", "1", "--repeats", "1"], False),
    "graph bench": (["--quick"], False),
    "graph outofcore": (["--scale", "8", "--blocks", "2", "--iterations", "3"], True),
    "graph gnn": (["--quick"], False),
    "graph tux2-bench": (["--quick"], False),
    "graph tux2-gas": (["--quick"], False),
    "graph tux2-procs": (["--quick"], False),
    "jobcheck": (["{train}"], True),
    "cognn": (["--quick"], False),
    "cpualloc": (["--quick"], False),
    "easyscale": (["--quick"], False),
    "elasticbatch": (["--quick"], False),
    "goldminer": (["--quick"], False),
    "cosim melo": (["--model-only", "--scale", "0.05"], False),
    "cosim serve": (["--model-only", "--requests", "8", "--device", "bbs"], False),
    "cosim kv": (["--model-only", "--iterations", "1", "--workers", "2"], False),
    "build": (["--list-boards"], True),
    "compile": (["{onnx}", "--sparsity", "0.5", "--calibration", "{x}"], True),
    "run": (["{compiled}", "--inputs", "{x}"], True),
    "board run": (["bbs-spmxv", "--sim", "--param", "rows=16", "--param", "cols=32", "--param", "banks=4",
                   "--param", "pes=4", "-n", "1"], False),
}
#: commands whose cheap run prints no table (a listing or a one-line result); the rest must record one
NO_TABLE = {"verilog", "formal", "fuzz", "jobcheck", "docs", "cluster trace"}


def test_every_subcommand_has_a_json_case():
    leaves = _leaves()
    assert len(leaves) >= 40
    assert not (set(leaves) - set(CASES)), f"add a cheap --json run to CASES for {sorted(set(leaves) - set(CASES))}"
    assert not (set(CASES) - set(leaves)), f"stale CASES entries {sorted(set(CASES) - set(leaves))}"
    for path, p in leaf_parsers(build_parser()):
        assert any("--json" in a.option_strings for a in p._actions), path


def _cases():
    for cmd, (argv, cheap) in CASES.items():
        yield pytest.param(cmd, argv, marks=[] if cheap else [pytest.mark.slow], id=cmd)


def _inputs(tmp_path, argv: list[str]) -> list[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name in ("models", "cosim"):
        (tmp_path / name).symlink_to(root / name)
    sub = {}
    if any("{w}" in a or "{csb}" in a or "{run}" in a for a in argv):
        np.save(tmp_path / "w.npy", np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32))
        sub["{w}"] = "w.npy"
    if any("{csb}" in a or "{run}" in a for a in argv):
        assert main(["prune", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5", "w.npy", "-o", "csb"]) == 0
        sub["{csb}"] = "csb"
    if any("{run}" in a for a in argv):
        assert main(["sim", "--csb", "csb", "--pes", "2", "--n", "1", "-o", "run"]) == 0  # -o: the run folder
        sub["{run}"] = "run"
    if any("{onnx}" in a or "{compiled}" in a for a in argv):   # a 16-32-4 ONNX MLP (tests/flow/test_compile.py)
        import onnx
        from test_compile import X_MLP, mlp

        onnx.save(mlp(), tmp_path / "mlp.onnx")
        np.save(tmp_path / "x.npy", X_MLP)
        sub.update({"{onnx}": "mlp.onnx", "{x}": "x.npy"})
    if any("{compiled}" in a for a in argv):
        assert main(["compile", "mlp.onnx", "--calibration", "x.npy", "-o", "compiled"]) == 0
        sub["{compiled}"] = "compiled"
    if any("{train}" in a for a in argv):
        (tmp_path / "train.py").write_text("import numpy as np\nprint('loss', float(np.ones(3).sum()))\n")
        sub["{train}"] = "train.py"
    return [sub.get(a, a) for a in argv]


@pytest.mark.parametrize("cmd,argv", list(_cases()))
def test_json_at_60_columns(cmd, argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "60")
    argv = _inputs(tmp_path, argv)
    capsys.readouterr()
    no_out = ("build", "formal", "fuzz", "jobcheck", "check", "docs", "papers")
    out_opt = [] if "-o" in argv or cmd in no_out else ["-o", "out"]
    rc = main([*cmd.split(), "--json", *argv, *out_opt])  # before the arguments: jobcheck passes on the rest
    out = capsys.readouterr().out
    doc = json.loads(out)  # exactly one document: anything else on stdout fails here
    assert rc == 0 and doc["exit"] == 0, (rc, doc.get("exit"))
    assert doc["command"][: len(cmd.split())] == cmd.split()
    if cmd not in NO_TABLE:
        assert doc["tables"], f"{cmd}: no table recorded"
    if cmd == "jobcheck":
        assert doc["result"]["report"]["findings"] == []
    for t in doc["tables"]:
        assert all(len(r) == len(t["columns"]) for r in t["rows"]), t["title"]


@pytest.mark.parametrize("cmd,argv", [
    ("prune", ["--pattern", "bbs", "--banks", "4", "--sparsity", "0.5", "{w}", "--dry-run"]),
    ("cluster run", [f"{SCEN}/small.toml", "-q", "-o", "out"]),
])
def test_terminal_table_shows_every_number_of_the_json(cmd, argv, tmp_path, monkeypatch, capsys):
    """The same command at 60 columns, on the terminal and as JSON: every number of the JSON tables
    appears whole in the terminal text."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "60")
    argv = _inputs(tmp_path, argv)
    assert main([*cmd.split(), *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main([*cmd.split(), *argv]) == 0
    text = capsys.readouterr().out
    nums = [str(c) for t in doc["tables"] for r in t["rows"] for c in r if isinstance(c, int | float)]
    assert nums
    cells = re.findall(r"[^\s│┃]+", text)
    for n in nums:
        assert n in text or any(n == c.replace(",", "").replace("_", "") for c in cells), (n, text)

"""Precedence is defined once (:mod:`hwcosim.models.precedence`) and holds for every command that merges a
file with its command line: command line over file over defaults, and a value that cannot apply is
an error, never silently dropped (issue 27, requirement 8).

The commands are found in the parser (every subcommand with a file option: ``--params``,
``--config``, ``--scenario``, a sweep spec or a scenario argument); each one must have a test here
or in the file that :data:`TESTS` names for it.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import build_parser, leaf_parsers, main
from hwcosim.models.errors import UsageError
from hwcosim.models.precedence import layered, sources

ROOT = Path(__file__).resolve().parents[2]
SCEN = ROOT / "models" / "systems" / "cluster" / "scenarios"
COSIM = SCEN / "cosim_small.toml"

FILE_OPTIONS = {"params", "config", "scenario", "spec"}


def _merging_commands() -> list[str]:
    out = []
    for path, p in leaf_parsers(build_parser()):
        dests = {a.dest for a in p._actions if not isinstance(a, argparse._HelpAction)}
        if dests & FILE_OPTIONS:
            out.append(" ".join(path))
    return out


#: command -> (test file, test function) showing command line > file > default and the error for a
#: value that cannot apply
TESTS = {
    "verilog": ("tests/flow/test_params_channel.py", "test_file_then_command_line"),
    "build": ("tests/flow/test_precedence.py", "test_build_board_configuration_then_file_then_param"),
    "sim": ("tests/flow/test_precedence.py", "test_sim_params_file_aliases_then_param"),
    "board run": ("tests/flow/test_precedence.py", "test_board_run_params_file_then_param"),
    "sweep": ("tests/flow/test_params_channel.py", "test_sweep_command_line_beats_the_spec_file"),
    "prune": ("tests/flow/test_precedence.py", "test_prune_flags_override_the_config"),
    "cosim melo": ("tests/flow/test_precedence.py", "test_cosim_melo_command_line_file_default"),
    "cosim serve": ("tests/flow/test_precedence.py", "test_cosim_serve_command_line_file_default"),
    "cosim kv": ("tests/flow/test_precedence.py", "test_cosim_kv_command_line_file_default"),
    "cluster run": ("tests/flow/test_precedence.py", "test_cluster_run_seed"),
}
#: the modules where those commands merge their layers: each goes through models.precedence
MERGE_SITES = ["cosim/registry.py", "cosim/api.py", "cosim/designs/bbs/board.py",
               "cosim/flow/sweep.py", "pruning/api.py", "cosim/designs/melo/bridge.py",
               "cosim/designs/fss/bridge.py", "cosim/designs/kvdirect/bridge.py", "cosim/cli/cluster.py"]


def test_every_merging_command_has_a_precedence_test():
    cmds = _merging_commands()
    assert len(cmds) >= 8, cmds
    missing = [c for c in cmds if c not in TESTS]
    assert not missing, f"add a precedence test for {missing} to TESTS"
    for cmd, (f, fn) in TESTS.items():
        tree = ast.parse((ROOT / f).read_text())
        assert fn in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, (cmd, f, fn)


@pytest.mark.parametrize("path", MERGE_SITES)
def test_merge_sites_use_the_one_rule(path):
    text = (ROOT / path).read_text()
    assert "from hwcosim.models.precedence import" in text, f"{path} merges layers without models.precedence"


# ---- the rule ------------------------------------------------------------------------------------
def test_layered_order_none_and_unknown_keys():
    assert layered(("defaults", {"a": 1, "b": 2, "c": 3}), ("file", {"b": 20, "c": None}),
                   ("command line", {"c": 300, "b": None})) == {"a": 1, "b": 20, "c": 300}
    merged, origin = sources(("defaults", {"a": 1}), ("file", {"a": 2}), ("cli", {"a-b": 3}))
    assert merged == {"a": 2, "a_b": 3} and origin == {"a": "file", "a_b": "cli"}
    with pytest.raises(UsageError, match=r"p.toml: 'colour' is no setting here; choose from a, b"):
        layered(("defaults", {"a": 1}), ("p.toml", {"colour": 1}), known=("a", "b"))
    with pytest.raises(UsageError, match="--set"):
        layered(("file", {"a": 1}), ("--set", {"z": None}), known=("a",))  # even a None key must be known


# ---- sim, board run: the design-parameter channel -------------------------------------------------
def _csb(tmp_path, rows=16, cols=32, banks=4):
    w = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    assert main(["prune", "--pattern", "bbs", "--banks", str(banks), "--sparsity", "0.5", str(tmp_path / "w.npy"),
                 "-o", str(tmp_path / "csb")]) == 0
    return tmp_path / "csb"


def test_sim_params_file_aliases_then_param(tmp_path):
    from hwcosim.cosim.api import bbs_params_from_csb

    csb = _csb(tmp_path)
    f = tmp_path / "p.toml"
    f.write_text("pes = 2\nvec_fmt = \"Q2.6\"\n")
    d = bbs_params_from_csb(str(csb))[0]
    p = bbs_params_from_csb(str(csb), str(f))[0]
    assert (p.pes, str(p.vec_fmt)) == (2, "Q2.6") and (d.pes, str(d.vec_fmt)) != (2, "Q2.6")  # file > default
    p = bbs_params_from_csb(str(csb), str(f), pes=4)[0]
    assert (p.pes, str(p.vec_fmt)) == (4, "Q2.6")  # alias flag > file
    p = bbs_params_from_csb(str(csb), str(f), pes=4, param_items=["pes=1"])[0]
    assert p.pes == 1  # --param > alias flag > file
    with pytest.raises(UsageError, match="nope"):
        bbs_params_from_csb(str(csb), param_items=["nope=1"])
    with pytest.raises(UsageError, match="the CSB weights fix banks"):
        bbs_params_from_csb(str(csb), param_items=["banks=8"])  # a value the weights fix cannot apply


def test_board_run_params_file_then_param(tmp_path):
    from hwcosim.cosim.designs.bbs.board import inputs
    from hwcosim.cosim.registry import get_design

    d = get_design("bbs-spmxv")
    f = tmp_path / "p.toml"
    f.write_text("rows = 16\ncols = 32\nbanks = 4\npes = 2\n")
    kw = dict(params_file=str(f), param=[], seed=1, n=1)
    p = inputs(d, **kw)[0]
    assert (p.rows, p.cols, p.pes) == (16, 32, 2)
    p = inputs(d, **{**kw, "param": ["pes=4"]})[0]
    assert (p.rows, p.pes) == (16, 4)
    with pytest.raises(UsageError, match="nope"):
        inputs(d, **{**kw, "param": ["nope=4"]})


def test_build_board_configuration_then_file_then_param(tmp_path):
    """hwcosim build: the design's board configuration, then --params, then --param (a --param used to
    replace the whole board configuration by the design's defaults)."""
    from hwcosim.cosim.cli.build import plan_params
    from hwcosim.cosim.registry import get_design

    d = get_design("bbs-spmxv")
    board = d.board_params()
    ns = dict(param=[], params=None)
    assert plan_params(d, argparse.Namespace(**ns)) == board
    f = tmp_path / "p.toml"
    f.write_text("pes = 4\nk = 1\n")
    p = plan_params(d, argparse.Namespace(**{**ns, "params": str(f)}))
    assert (p.pes, p.k, p.rows, p.out_stage) == (4, 1, board.rows, board.out_stage)
    p = plan_params(d, argparse.Namespace(**{**ns, "params": str(f), "param": ["pes=2"]}))
    assert (p.pes, p.k, p.rows, p.out_stage) == (2, 1, board.rows, True)
    with pytest.raises(UsageError, match="nope"):
        plan_params(d, argparse.Namespace(**{**ns, "param": ["nope=1"]}))


# ---- prune --config --------------------------------------------------------------------------------
def _prune_table(tmp_path, capsys, *argv) -> list[list]:
    capsys.readouterr()
    assert main(["prune", *argv, str(tmp_path / "w.npy"), "--dry-run", "-o", str(tmp_path / "o"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc["tables"][0]["rows"]


def test_prune_flags_override_the_config(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32))
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[rule]]\ntensors = "*"\npattern = "bbs"\nbanks = 4\nsparsity = 0.5\nformat = "Q3.5"\n')
    # default (no config): the flags alone
    (row,) = _prune_table(tmp_path, capsys, "--banks", "2", "--sparsity", "0.25")
    assert "bbs banks=2 sparsity=0.25" in row[2]
    # the file over the defaults
    (row,) = _prune_table(tmp_path, capsys, "--config", str(cfg))
    assert "bbs banks=4 sparsity=0.5" in row[2] and row[3] == "csb Q3.5"
    # the command line over the file (they used to be dropped silently)
    (row,) = _prune_table(tmp_path, capsys, "--config", str(cfg), "--banks", "8", "--format", "Q2.6")
    assert "bbs banks=8 sparsity=0.5" in row[2] and row[3] == "csb Q2.6"
    # values that cannot apply
    for argv, needle in ((["--n", "2"], "--n applies to no rule"), (["--pattern", "nm"], "--pattern nm with --config"),
                         (["--banks", "3"], "3 equal banks")):
        assert main(["prune", "--config", str(cfg), *argv, str(tmp_path / "w.npy"), "--dry-run"]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and needle in err[0], err


# ---- cosim melo / serve / kv --scenario ------------------------------------------------------------
def _scenario(tmp_path, old: str = "", new: str = ""):
    from hwcosim.models.systems.cluster.scenario import load_scenario

    text = COSIM.read_text()
    assert old in text
    f = tmp_path / "s.toml"
    f.write_text(text.replace(old, new, 1))
    return load_scenario(f)


def test_cosim_melo_command_line_file_default(tmp_path):
    from hwcosim.cosim.designs.melo.bridge import params_from_scenario

    sc = _scenario(tmp_path)
    p = params_from_scenario(sc)
    assert (p.scale, p.f_clk_mhz, p.seed, p.loss) == (2e-3, 250.0, 1, 0.02)  # file; clock: default
    sc2 = _scenario(tmp_path, "failure = 0 ", "failure = 0\nclock_mhz = 200.0 ")
    assert params_from_scenario(sc2).f_clk_mhz == 200.0  # file over default
    p = params_from_scenario(sc2, scale=1e-3, f_clk_mhz=300.0, seed=5, loss=0.1)
    assert (p.scale, p.f_clk_mhz, p.seed, p.loss) == (1e-3, 300.0, 5, 0.1)  # command line over file


def test_cosim_serve_command_line_file_default(tmp_path):
    from hwcosim.cosim.designs.fss.bridge import ServeScenarioParams, params_from_scenario

    sc = _scenario(tmp_path)
    d = ServeScenarioParams(device="bbs")
    ps = params_from_scenario(sc)
    assert [p.device for p in ps] == ["bbs", "fss"] and ps[0].load == d.load and ps[0].seed == 1  # defaults
    file_req = ps[0].n_requests
    (p,) = params_from_scenario(sc, "fss", n_requests=8, load=0.5, seed=3)
    assert (p.device, p.n_requests, p.load, p.seed) == ("fss", 8, 0.5, 3)  # command line over file
    assert file_req != 8 and file_req != d.n_requests  # the file's value over the default


def test_cosim_kv_command_line_file_default(tmp_path):
    from hwcosim.cosim.designs.kvdirect.bridge import KVScenarioParams, params_from_scenario

    sc = _scenario(tmp_path)
    p = params_from_scenario(sc)
    assert p.iterations == 2 and p.theta == KVScenarioParams().theta and p.seed == 1  # file; theta: default
    p = params_from_scenario(sc, iterations=1, theta=0.5, seed=9, n_workers=None)
    assert (p.iterations, p.theta, p.seed) == (1, 0.5, 9)
    with pytest.raises(Exception, match="colour: unknown field"):
        _scenario(tmp_path, "[cosim.kv]\n", "[cosim.kv]\ncolour = 1\n")


def test_cluster_run_seed(tmp_path, monkeypatch):
    """--seed over the file's seed; the run itself is stopped at once (its output is tested elsewhere)."""
    from hwcosim.models.systems.cluster import scenario

    class Seen(BaseException):  # not an Exception: the dispatcher reports those as bugs (exit 70)
        pass

    def stop(sc, *a, **k):
        raise Seen(sc.seed)

    monkeypatch.setattr(scenario, "run_scenario", stop)
    base = scenario.load_scenario(SCEN / "small.toml").seed
    for argv, seed in (([], base), (["--seed", str(base + 6)], base + 6)):
        with pytest.raises(Seen) as e:
            main(["cluster", "run", str(SCEN / "small.toml"), "-q", "-o", str(tmp_path / "o"), *argv])
        assert e.value.args[0] == seed

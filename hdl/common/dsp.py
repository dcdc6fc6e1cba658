"""Registered multipliers that use the FPGA's DSP output register where the build targets one.

``registered_mul(m, a, b, en=..., name=...)`` is ``out <= a * b`` whenever ``en`` is high (no
reset: a datapath register): the same value and the same cycle in every build. What differs is where
the register lives:

- by default (simulation, formal, Verilog for other tools) it is an ordinary Amaranth register
  after a ``*``, which Yosys maps to a DSP multiplier and a register in the fabric;
- inside ``with dsp_target("ecp5"):`` (``hwcosim build`` on an ECP5 part) the product is one
  ``MULT18X18D`` with its output register enabled (``REG_OUTPUT_CLK = CLK0``, clock enable
  ``CE0``; its synchronous reset ``RST0`` tied low). Yosys 0.70's ``synth_ecp5`` never moves a register into
  the DSP block, so a registered product otherwise costs two trips through the routing between
  the fabric and the DSP rows (3 ns each on an LFE5U-85F, placed and routed by nextpnr), around
  the multiplier's 3.9 ns, short of 100 MHz for the BBS and BeamRaster multipliers. With the register
  in the block, the multiplier ends at the register's setup and its clock-to-output starts the
  next cycle's route. nextpnr times the cell from its ``MULT18X18D_REGS_OUTPUT`` database entry.

Operands up to 18 bits each, signed or unsigned (``SIGNEDA``/``SIGNEDB``), as Amaranth's
``*`` defines the product. :data:`ECP5_SIM_MODEL` is a behavioural model of the subset of
``MULT18X18D`` this module instantiates, appended by :mod:`hwcosim.cosim.flow.runner` to a simulated
netlist that instantiates the primitive, so the ECP5 variant is simulated against the golden
models too (Lattice's sysDSP usage guide, FPGA-TN-02205: ``P = A * B`` over the 18-bit operands,
signedness per ``SIGNEDA``/``SIGNEDB``, output register enabled by its ``CE``, reset by its
``RST``).
"""

from __future__ import annotations

import contextlib
import contextvars

from amaranth.hdl import ClockSignal, Instance, Signal
from hwcosim.models.errors import UsageError

__all__ = ["registered_mul", "register_copies", "dsp_target", "ECP5_SIM_MODEL", "ECP5_FF_SIM_MODEL", "sim_models"]

_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("hwcosim_dsp_target", default=None)
_FAMILIES = ("ecp5",)
_W = 18   # MULT18X18D operand width


@contextlib.contextmanager
def dsp_target(family: str | None):
    """Elaborate (``to_verilog``, ``rtlil.convert``) inside this block for ``family``'s DSP cells
    (``"ecp5"``); other families and ``None`` keep the generic registered ``*``."""
    token = _TARGET.set(family if family in _FAMILIES else None)
    try:
        yield
    finally:
        _TARGET.reset(token)


def registered_mul(m, a, b, *, en, name: str, domain: str = "sync") -> Signal:
    """A register of ``a * b``'s shape loaded with ``a * b`` in every cycle ``en`` is high.

    The register has no reset (``reset_less``; the DSP block's ``RST0`` is tied low): a product is
    datapath, used only under its stage's valid bit, and a board's clock domain may have no reset
    at all (the oscillator's, on a board without a reset button); the fabric version behaves the
    same, so the RTL simulation and the ECP5 netlist agree after any reset."""
    out = Signal((a * b).shape(), name=name, reset_less=True)
    if _TARGET.get() != "ecp5" or len(a) > _W or len(b) > _W or len(out) > 2 * _W:
        with m.If(en):
            m.d[domain] += out.eq(a * b)
        return out
    sa, sb = a.shape().signed, b.shape().signed
    ax, bx = Signal(_W, name=f"{name}_a"), Signal(_W, name=f"{name}_b")
    p = Signal(2 * _W, name=f"{name}_p")
    m.d.comb += [ax.eq(a), bx.eq(b), out.eq(p[:len(out)])]   # extended per the operand's sign
    ports = {f"i_A{i}": ax[i] for i in range(_W)}
    ports.update({f"i_B{i}": bx[i] for i in range(_W)})
    ports.update({f"o_P{i}": p[i] for i in range(2 * _W)})
    m.submodules[f"{name}_dsp"] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="NONE", p_REG_INPUTB_CLK="NONE", p_REG_PIPELINE_CLK="NONE",
        p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0", p_REG_OUTPUT_RST="RST0", p_RESETMODE="SYNC",
        i_SIGNEDA=int(sa), i_SIGNEDB=int(sb), i_SOURCEA=0, i_SOURCEB=0,
        i_CLK0=ClockSignal(domain), i_CE0=en, i_RST0=0, **ports)
    return out


def _sim_model() -> str:
    a = ", ".join(f"A{i}" for i in range(_W))
    b = ", ".join(f"B{i}" for i in range(_W))
    p = ", ".join(f"P{i}" for i in range(2 * _W))
    pa = " ".join(f"assign P{i} = out[{i}];" for i in range(2 * _W))
    return f"""
// Behavioural model of the MULT18X18D subset instantiated by hdl/common/dsp.py (simulation only;
// see that module): P = A * B over 18-bit operands, signed per SIGNEDA/SIGNEDB, optionally through
// the output register (REG_OUTPUT_CLK = "CLK0": clock CLK0, enable CE0, synchronous reset RST0).
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE", parameter REG_INPUTB_CLK = "NONE",
    parameter REG_PIPELINE_CLK = "NONE", parameter REG_OUTPUT_CLK = "NONE",
    parameter REG_OUTPUT_CE = "CE0", parameter REG_OUTPUT_RST = "RST0", parameter RESETMODE = "SYNC"
) (
    input {a},
    input {b},
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0,
    output {p}
);
    wire [17:0] a = {{{", ".join(f"A{i}" for i in reversed(range(_W)))}}};
    wire [17:0] b = {{{", ".join(f"B{i}" for i in reversed(range(_W)))}}};
    wire signed [18:0] ae = {{SIGNEDA & a[17], a}};
    wire signed [18:0] be = {{SIGNEDB & b[17], b}};
    wire signed [37:0] prod = ae * be;
    reg [35:0] q = 36'd0;
    always @(posedge CLK0)
        if (RST0) q <= 36'd0;
        else if (CE0) q <= prod[35:0];
    wire [35:0] out = (REG_OUTPUT_CLK == "NONE") ? prod[35:0] : q;
    {pa}
endmodule
"""


#: Verilog of the simulation model (see the module docstring)
ECP5_SIM_MODEL = _sim_model()


def register_copies(m, d, copies: int, *, name: str, domain: str = "sync") -> list:
    """``copies`` registers of ``d``'s shape, all loaded with ``d`` every cycle (no reset, no enable).

    A value that drives many cells from one register - a bypass hit selecting a few hundred
    multiplexer inputs, a weight feeding a row of DSP blocks - reaches them over one long net,
    and on an LFE5U-85F that route, not the logic, can set the clock (8-9 ns of the FSS
    engine's 10 ns). Identical registers would be merged back into one by Yosys (``opt_merge``
    merges flip-flops with equal inputs, whatever ``keep`` attribute their wires carry), so:

    - by default (simulation, formal, Verilog for other tools) the copies are one register,
      named ``name`` and returned ``copies`` times;
    - inside ``with dsp_target("ecp5"):`` each bit of each copy is its own ``TRELLIS_FF`` cell
      (``LSR`` tied low, ``CE`` and ``M`` left open as Yosys's own flip-flop mapping leaves them:
      nextpnr's packer routes a flip-flop's data through ``M`` when no LUT in its slice drives it,
      and refuses an ``M`` tied to a constant), which Yosys leaves alone (``opt_merge`` touches
      only its internal cell types) and nextpnr places near the cells it drives.

    Both behave alike cycle for cycle; :data:`ECP5_FF_SIM_MODEL` simulates the second."""
    if copies < 1:
        raise UsageError(f"copies={copies}: give at least one")
    shape = d.shape()
    if _TARGET.get() != "ecp5":
        q = Signal(shape, name=name, reset_less=True)
        m.d[domain] += q.eq(d)
        return [q] * copies
    src = Signal(shape, name=f"{name}_d")
    m.d.comb += src.eq(d)
    out = []
    for i in range(copies):
        q = Signal(shape, name=f"{name}_c{i}")
        for b in range(len(q)):
            m.submodules[f"{name}_c{i}_ff{b}"] = Instance(
                "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
                p_SRMODE="LSR_OVER_CE", p_REGSET="RESET",
                i_CLK=ClockSignal(domain), i_LSR=0, i_DI=src[b], o_Q=q[b])
        out.append(q)
    return out


#: Behavioural model of the ``TRELLIS_FF`` subset :func:`register_copies` instantiates
#: (simulation only): a D flip-flop, clock enable and set/reset unused, starting at 0.
ECP5_FF_SIM_MODEL = """
// Behavioural model of the TRELLIS_FF subset instantiated by hdl/common/dsp.py (simulation only):
// Q <= DI at every rising CLK edge (CEMUX = "1"), LSR tied low by the instantiation, Q starts at 0.
module TRELLIS_FF #(
    parameter GSR = "DISABLED", parameter CEMUX = "1", parameter CLKMUX = "CLK", parameter LSRMUX = "LSR",
    parameter SRMODE = "LSR_OVER_CE", parameter REGSET = "RESET"
) (input CLK, LSR, CE, DI, M, output reg Q);
    initial Q = 1'b0;
    always @(posedge CLK)
        if (LSR) Q <= 1'b0;
        else Q <= DI;
endmodule
"""


def sim_models(verilog_text: str) -> str:
    """The behavioural models a netlist needs for simulation (empty when it instantiates none)."""
    out = ""
    if "MULT18X18D " in verilog_text and "module MULT18X18D" not in verilog_text:
        out += ECP5_SIM_MODEL
    if "TRELLIS_FF " in verilog_text and "module TRELLIS_FF" not in verilog_text:
        out += ECP5_FF_SIM_MODEL
    return out

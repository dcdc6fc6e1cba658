"""Formal properties of the BBS LSTM board top (:class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop`) at its
AXI interfaces.

:class:`LSTMAxiTopFormal` wraps the whole top (the LSTM layer included, on the smallest
parameters the top accepts: one input, one hidden unit, one bank, ``P = 4``, 2-bit weights and
inputs; the load is 2 words) in a harness with the same ports, so every input is a free
variable of the solver.

Assumptions
    Reset is not re-asserted after the initial (reset) state. The AXI4-Lite master obeys
    AXI4-Lite (:func:`hwcosim.hdl.common.axil_formal.assume_axil_master`); ``s_axis_w`` and
    ``s_axis_x`` hold ``TVALID`` and ``TDATA`` until ``TREADY``; ``BREADY``, ``RREADY``,
    ``m_axis_h_tready`` and the whole ``m_axi`` read slave side are free (the properties hold
    whatever the memory does).

Assertions, by group (see :mod:`hwcosim.hdl.common.axil_formal` for the first five)
    ``b_hold``, ``r_hold``   B and R hold until ready.
    ``b_count``, ``r_count`` exactly one B per accepted write (address and data together), one
                             R per accepted read, none without a request.
    ``resp``                 SLVERR exactly for an access outside the register map and for a
                             write to a read-only register (:data:`hwcosim.hdl.bbs.axi_top.WRITABLE`),
                             OKAY otherwise; an unmapped read returns 0; CTRL reads 0; CONFIG
                             and LOAD_WORDS read their constants.
    ``h_hold``               ``m_axis_h`` holds ``TVALID``, ``TDATA`` and ``TLAST`` until
                             ``TREADY``, except in the cycle after a SOFT_RESET write (which
                             drops a step in flight, as documented).

The AXI4-Lite groups are proved by k-induction (the slave's state is a few registers, so they
are inductive whatever the layer's state). ``h_hold`` holds through the layer's output
register, but the top also clears the layer on LOAD_MM and on a read error or timeout, so its
induction would need the layer's pipeline invariants plus "no hidden beat while LOAD_MM owns
the loader"; it is checked by BMC from reset, deep enough for hidden beats under
back-pressure (see the covers).

Covers: a SLVERR write and a SLVERR read answered; an OKAY write answered while a read waits
for RREADY; a hidden beat waiting for ``TREADY`` (25 cycles from reset: two weight words, the
deserialiser's move to its output register, SEQ_LEN, NUM_SEQ, START, one input, the layer's
latency; 23 with the 11-stage element-wise unit, 21 with the single-register deserialiser), so
the fast BMC depth of 28 checks ``h_hold`` on real hidden beats.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cat, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from hwcosim.hdl.bbs.axi_top import CTRL, REGISTER_MAP, WRITABLE, LSTMAxiTop
from hwcosim.hdl.common.axil_formal import (
    AXIL_GROUPS,
    OKAY,
    SLVERR,
    assert_axis_hold,
    assume_axil_master,
    assume_axis_source,
    axil_slave_props,
)
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile
from hwcosim.hdl.common.formal import Props, mutant_checks, past
from hwcosim.models.bbs.lstm import LSTMParams
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q

__all__ = ["LSTMAxiTopFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params", "TOP_ARGS"]

PROPERTIES = AXIL_GROUPS + ("h_hold",)
_WHERE = "hdl/bbs/axi_top_formal.py"
#: read-master parameters of the harness's top (the smallest it accepts; a 4-cycle timeout)
TOP_ARGS = dict(mm_addr_width=32, mm_data_width=32, mm_max_burst=1, mm_max_outstanding=1, mm_timeout_cycles=4)


def formal_params() -> LSTMParams:
    """The smallest LSTM the top accepts: I = H = 1, one bank, k = 1, P = 4, narrow formats."""
    return LSTMParams(input_size=1, hidden=1, banks=1, k=1, pes=4, weight_fmt=Q(1, 1), vec_fmt=Q(1, 1),
                      gate_fmt=Q(2, 4), cell_fmt=Q(2, 4), act_frac=5)


class LSTMAxiTopFormal(wiring.Component):
    """Formal harness: :class:`LSTMAxiTop` (or a broken subclass) with its AXI properties.

    Parameters
    ----------
    params : LSTMParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    const_regs : bool
        Also check that CONFIG and LOAD_WORDS read their constants (group ``resp``); they slow
        the k-induction down by an order of magnitude, so only BMC checks use it.
    """

    def __init__(self, params: LSTMParams, dut_class: type = LSTMAxiTop, props=None, const_regs: bool = False):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown LSTMAxiTop properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.const_regs = const_regs
        self.dut = dut_class(params, **TOP_ARGS)
        super().__init__(dict(self.dut.signature.members))

    def const_reads(self, config):
        """Reads of the constant registers (with ``const_regs``)."""
        if not self.const_regs:
            return []
        return [(self.s_axil_araddr[2:] == REGISTER_MAP.CONFIG.word, config),
                (self.s_axil_araddr[2:] == REGISTER_MAP.LOAD_WORDS.word, self.dut.load_words)]

    def elaborate(self, platform):
        p = self.params
        m = Module()
        dut = self.dut
        m.submodules.dut = Fragment.get(dut, platform)
        for name, member in self.signature.members.items():
            if member.flow == In:
                m.d.comb += getattr(dut, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(dut, name))
        chk = Props(m, PROPERTIES, self.props, "LSTMAxiTop")
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        assume_axil_master(m, self, has_past)
        assume_axis_source(m, self, has_past, "s_axis_w")
        assume_axis_source(m, self, has_past, "s_axis_x")

        widx, ridx = self.s_axil_awaddr[2:], self.s_axil_araddr[2:]
        # the expectations come from the register map: its writable set, its addresses, its
        # write-only registers (read 0) and the CONFIG fields
        writable = Cat(*(widx == REGISTER_MAP[n].word for n in WRITABLE)).any()
        readable = Cat(*(ridx == r.word for r in REGISTER_MAP)).any()
        config = REGISTER_MAP.CONFIG.pack(P=p.pes, B=p.banks, K=p.k)
        sig = axil_slave_props(
            m, self, chk, has_past,
            w_resp=Mux(writable, OKAY, SLVERR), r_resp=Mux(readable, OKAY, SLVERR),
            r_data=[(~readable, 0), *((ridx == REGISTER_MAP[n].word, 0) for n in REGISTER_MAP.write_only())]
            + self.const_reads(config))

        # h_hold: a SOFT_RESET write drops a step in flight (documented); nothing else may
        soft = Signal()
        m.d.comb += soft.eq(sig["aw_fire"] & (widx == REGISTER_MAP.CTRL.word)
                            & (self.s_axil_wdata & CTRL["SOFT_RESET"]).any())
        assert_axis_hold(m, self, chk, has_past, "m_axis_h", "h_hold", past(m, soft, "past_soft"))

        # covers
        m.d.comb += [Cover(sig["b_fire"] & (self.s_axil_bresp == SLVERR)),
                     Cover(sig["r_fire"] & (self.s_axil_rresp == SLVERR)),
                     Cover(sig["b_fire"] & (self.s_axil_bresp == OKAY) & self.s_axil_rvalid & ~self.s_axil_rready),
                     Cover(self.m_axis_h_tvalid & ~self.m_axis_h_tready)]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class OkayEverywhereRegs(AxiLiteRegFile):
    """Broken: every write answers OKAY, as before SLVERR was introduced (an unmapped or
    read-only address included)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.wr):
            m.d.sync += self.s_axil_bresp.eq(OKAY)
        return m


class DropBRegs(AxiLiteRegFile):
    """Broken: ``BVALID`` falls without ``BREADY`` when a read is accepted."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.s_axil_bvalid & ~self.s_axil_bready & self.rd):
            m.d.sync += self.s_axil_bvalid.eq(0)
        return m


class RSlipRegs(AxiLiteRegFile):
    """Broken: ``RDATA`` changes while waiting for ``RREADY`` (a write re-reads the register)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.s_axil_rvalid & ~self.s_axil_rready & self.s_axil_awvalid):
            m.d.sync += self.s_axil_rdata.eq(self.s_axil_rdata + 1)
        return m


class OkayEverywhereTop(LSTMAxiTop):
    regfile_cls = OkayEverywhereRegs


class DropBTop(LSTMAxiTop):
    regfile_cls = DropBRegs


class RSlipTop(LSTMAxiTop):
    regfile_cls = RSlipRegs


#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "okay-everywhere": (OkayEverywhereTop, "bmc", 4, AXIL_GROUPS, "resp: BRESP differs"),
    "drop-b": (DropBTop, "bmc", 5, AXIL_GROUPS, "b_hold: BVALID fell"),
    "r-slip": (RSlipTop, "bmc", 5, AXIL_GROUPS, "r_hold: RRESP or RDATA changed"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: k-induction of the AXI4-Lite groups, BMC of every group
    (``h_hold`` included) from reset, covers and the broken variants, on the smallest LSTM.
    ``full`` adds a deeper BMC that also checks the constant registers."""
    prm = formal_params()
    out = [
        dict(name="axil-prove", build=lambda: LSTMAxiTopFormal(prm, props=AXIL_GROUPS), mode="prove", depth=2,
             doc="AXI4-Lite: hold, one response per request, SLVERR exactly off the map: k-induction"),
        dict(name="all-bmc", build=lambda: LSTMAxiTopFormal(prm), mode="bmc", depth=28,
             doc="every group, m_axis_h hold included: BMC from reset"),
        dict(name="cover", build=lambda: LSTMAxiTopFormal(prm), mode="cover", depth=26,
             doc="reachable: SLVERR write, SLVERR read, OKAY write while a read waits, a hidden beat waiting"),
    ]
    if full:
        out.append(dict(name="all-bmc30", build=lambda: LSTMAxiTopFormal(prm, const_regs=True), mode="bmc",
                        depth=36, doc="every group, constant registers included: deep BMC"))
    out += mutant_checks(MUTANTS, lambda cls, props: LSTMAxiTopFormal(prm, cls, props))
    return out

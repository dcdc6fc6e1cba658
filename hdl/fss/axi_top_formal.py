"""Formal properties of the FSS board top (:class:`hwcosim.hdl.fss.axi_top.FSSAxiTop`) at its AXI
interfaces.

:class:`FSSAxiTopFormal` wraps the whole top (engine and weight store included, on the tiny
engine of :func:`hwcosim.hdl.fss.gemm_formal.formal_params`: 2x2 regions with 2 nonzeros, 2x1 PEs,
layers up to 8 x 4, so a 4-beat store of one-word beats) in a harness with the same ports.

Assumptions
    Reset is not re-asserted after the initial (reset) state. The AXI4-Lite master obeys
    AXI4-Lite; ``s_axis_w`` and ``s_axis_x`` hold ``TVALID`` and ``TDATA`` until ``TREADY``;
    ``BREADY``, ``RREADY`` and ``m_axis_y_tready`` are free.

Assertions, by group (see :mod:`hwcosim.hdl.common.axil_formal` for the first five)
    ``b_hold``, ``r_hold``   B and R hold until ready.
    ``b_count``, ``r_count`` exactly one B per accepted write (address and data together), one
                             R per accepted read, none without a request.
    ``resp``                 the register map's responses: a read answers SLVERR with data 0
                             exactly outside the map (CTRL reads 0, OKAY; CONFIG0..2 and ID
                             read their constants); a write answers SLVERR exactly for an
                             address outside the map, a read-only register, or a size register
                             (ROW_GROUPS, K_REGIONS, TILES) written while busy or out of range
                             (the documented size-write rule), OKAY otherwise.
    ``y_hold``               ``m_axis_y`` holds ``TVALID``, ``TDATA`` and ``TLAST`` until
                             ``TREADY``, except in the cycle after a SOFT_RESET write.

The AXI4-Lite groups are proved by k-induction (the slave's state is a few registers; the
size-write rule reads the top's ``busy`` register, found by name). ``y_hold`` holds through
the engine's output queue, but the top resets the engine at START, so its induction would
need the engine's pipeline invariants (those of :mod:`hwcosim.hdl.fss.gemm_formal`) plus "no result
in flight while idle": it is checked by BMC from reset, to the depth where a result beat
waits under back-pressure (see the cover).

Covers: a refused (SLVERR) size write, a SLVERR read, an OKAY write while a read waits, a
result beat waiting for ``TREADY`` (about 14 cycles from reset with the engine's 9-cycle
pipeline, so the fast BMC depth of 20 checks ``y_hold`` on real result beats).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cat, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
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
from hwcosim.hdl.common.formal import Props, internals, mutant_checks, past
from hwcosim.hdl.fss.axi_top import CTRL, REGISTER_MAP, WRITABLE, FSSAxiTop, config_words
from hwcosim.hdl.fss.gemm_formal import formal_params as _gemm_params
from hwcosim.models.errors import UsageError
from hwcosim.models.fss.gemm import FSSParams

__all__ = ["FSSAxiTopFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params", "WRITABLE"]

PROPERTIES = AXIL_GROUPS + ("y_hold",)
_WHERE = "hdl/fss/axi_top_formal.py"


def formal_params() -> FSSParams:
    """The tiny engine of the FSS GEMM harness (2x2 regions, n = 2, 2x1 PEs, up to 8 x 4)."""
    return _gemm_params()


class FSSAxiTopFormal(wiring.Component):
    """Formal harness: :class:`FSSAxiTop` (or a broken subclass) with its AXI properties.

    Parameters
    ----------
    params : FSSParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    const_regs : bool
        Also check that CONFIG0..2 and ID read their constants (group ``resp``); they slow
        the k-induction down by an order of magnitude, so only BMC checks use it.
    """

    def __init__(self, params: FSSParams, dut_class: type = FSSAxiTop, props=None, const_regs: bool = False):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown FSSAxiTop properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.const_regs = const_regs
        self.dut = dut_class(params)
        super().__init__(dict(self.dut.signature.members))

    def elaborate(self, platform):
        p = self.params
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        for name, member in self.signature.members.items():
            if member.flow == In:
                m.d.comb += getattr(dut, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(dut, name))
        chk = Props(m, PROPERTIES, self.props, "FSSAxiTop")
        iv = internals(frag, ("busy",), "FSSAxiTop", _WHERE)
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        assume_axil_master(m, self, has_past)
        assume_axis_source(m, self, has_past, "s_axis_w")
        assume_axis_source(m, self, has_past, "s_axis_x")

        widx, ridx, wdata = self.s_axil_awaddr[2:], self.s_axil_araddr[2:], self.s_axil_wdata
        busy = iv["busy"]

        # the expectations come from the register map: addresses, write-only registers (read 0),
        # the constant registers' values (config_words packs the CONFIG fields)
        def at(idx, name):
            return idx == REGISTER_MAP[name].word

        size_ok = Mux(at(widx, "ROW_GROUPS"), (wdata >= 1) & (wdata <= p.max_row_groups),
                      Mux(at(widx, "K_REGIONS"), (wdata >= 1) & (wdata <= p.max_k_regions), wdata >= 1))
        # the writable registers other than CTRL are the sizes: OKAY when idle and in range
        is_size = Cat(*(at(widx, n) for n in WRITABLE if n != "CTRL")).any()
        w_ok = at(widx, "CTRL") | (is_size & ~busy & size_ok)
        readable = Cat(*(at(ridx, r.name) for r in REGISTER_MAP)).any()
        consts = [(at(ridx, n), v) for n, v in config_words(p).items()]
        sig = axil_slave_props(m, self, chk, has_past, w_resp=Mux(w_ok, OKAY, SLVERR),
                               r_resp=Mux(readable, OKAY, SLVERR),
                               r_data=[(~readable, 0), *((at(ridx, n), 0) for n in REGISTER_MAP.write_only()),
                                       *(consts if self.const_regs else [])])

        soft = Signal()
        m.d.comb += soft.eq(sig["aw_fire"] & at(widx, "CTRL") & (wdata & CTRL["SOFT_RESET"]).any())
        assert_axis_hold(m, self, chk, has_past, "m_axis_y", "y_hold", past(m, soft, "past_soft"))

        m.d.comb += [Cover(sig["b_fire"] & (self.s_axil_bresp == SLVERR) & past(m, at(widx, "K_REGIONS"), "p_kr")),
                     Cover(sig["r_fire"] & (self.s_axil_rresp == SLVERR)),
                     Cover(sig["b_fire"] & (self.s_axil_bresp == OKAY) & self.s_axil_rvalid & ~self.s_axil_rready),
                     Cover(self.m_axis_y_tvalid & ~self.m_axis_y_tready)]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class OkayReadRegs(AxiLiteRegFile):
    """Broken: a read of an unmapped address answers OKAY (with data 0)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.rd):
            m.d.sync += self.s_axil_rresp.eq(OKAY)
        return m


class DoubleBRegs(AxiLiteRegFile):
    """Broken: ``BVALID`` stays high after the handshake when a read arrives (a second B)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.s_axil_bvalid & self.s_axil_bready & self.s_axil_arvalid):
            m.d.sync += self.s_axil_bvalid.eq(1)
        return m


class OkayReadTop(FSSAxiTop):
    regfile_cls = OkayReadRegs


class DoubleBTop(FSSAxiTop):
    regfile_cls = DoubleBRegs


class DropYTop(FSSAxiTop):
    """Broken: ``m_axis_y_tvalid`` is masked while an AXI4-Lite read is offered."""

    def elaborate(self, platform):
        from amaranth.hdl._ast import Assign

        m = super().elaborate(platform)
        src = [st.rhs for st in m._statements["comb"] if isinstance(st, Assign) and st.lhs is self.m_axis_y_tvalid]
        if len(src) != 1:
            raise LookupError(f"FSSAxiTop internals changed: m_axis_y_tvalid assigned {len(src)} times; "
                              f"update {_WHERE}")
        m.d.comb += self.m_axis_y_tvalid.eq(src[0] & ~self.s_axil_arvalid)
        return m


#: name -> (broken class, mode, depth, property groups checked, expected failure message)
#: (the bounds that reach a result beat grew with the engine's pipeline: 9 cycles now)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "okay-read": (OkayReadTop, "bmc", 4, AXIL_GROUPS, "resp: RRESP differs"),
    "double-b": (DoubleBTop, "bmc", 5, AXIL_GROUPS, "b_count: BVALID differs"),
    "drop-y": (DropYTop, "bmc", 17, ("y_hold",), "y_hold: m_axis_y TVALID fell"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: k-induction of the AXI4-Lite groups, BMC of every group
    (``y_hold`` included) from reset, covers and the broken variants, on the tiny engine.
    ``full`` adds a deeper BMC that also checks the constant registers."""
    prm = formal_params()
    out = [
        dict(name="axil-prove", build=lambda: FSSAxiTopFormal(prm, props=AXIL_GROUPS), mode="prove", depth=2,
             doc="AXI4-Lite: hold, one response per request, SLVERR exactly as the map says: k-induction"),
        dict(name="all-bmc", build=lambda: FSSAxiTopFormal(prm), mode="bmc", depth=20,
             doc="every group, m_axis_y hold included: BMC from reset"),
        dict(name="cover", build=lambda: FSSAxiTopFormal(prm), mode="cover", depth=16,
             doc="reachable: SLVERR size write, SLVERR read, OKAY write while a read waits, a result beat waiting"),
    ]
    if full:
        out.append(dict(name="all-bmc28", build=lambda: FSSAxiTopFormal(prm, const_regs=True), mode="bmc",
                        depth=32, doc="every group, constant registers included: deep BMC"))
    out += mutant_checks(MUTANTS, lambda cls, props: FSSAxiTopFormal(prm, cls, props))
    return out

"""Formal properties of the row-wise CSR baseline engine (:class:`hwcosim.hdl.bbs.csr.CSRSpMxV`).

:class:`CSRFormal` wraps the engine in a harness whose ports are its three streams (the 32-bit
performance counters are left unconnected, so Yosys removes them) and adds:

Assumptions
    ``w`` and ``x`` hold ``valid`` and ``payload`` until ``ready``; ``y.ready`` is free; reset is
    not re-asserted. The entry lists themselves are free (any values, columns, ``last`` flags).

Assertions, by group
    ``handshake`` ``y`` holds ``valid`` and ``payload`` while ``valid & ~ready``.
    ``count``     the golden model's rule: each product (a ``w`` beat flagged ``end`` closes it)
                  leaves as ``rows / M`` output beats. A ``y`` beat only while one is owed; at
                  most two products' beats owed besides the one in the output register (two result buffers).
    ``vector``    a ``w`` beat is taken only while a complete vector (``cols / L`` ``x`` beats) is
                  loaded and unconsumed; at most two vectors are held; ``x.ready`` is low while
                  both are.
    ``internal``  white-box invariants (harness counters against ``full``, ``wr_cnt``,
                  ``inflight``, ``res_full``, ``ocnt``), checked by BMC. They do not yet make the
                  groups above k-inductive: that needs the unnamed stage-valid, product-end and
                  ``psel`` registers tied in as well (not done).

Covers: a ``y`` beat; two vectors held; a ``y`` beat waiting under back-pressure.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from hwcosim.hdl.bbs.csr import CSRSpMxV
from hwcosim.hdl.common.formal import Props, assert_sink, assume_source, internals, mutant_checks
from hwcosim.models.bbs.csr import CSRParams
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q

__all__ = ["CSRFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params"]

PROPERTIES = ("handshake", "count", "vector", "internal")
_WHERE = "hdl/bbs/csr_formal.py"


def formal_params(rows: int = 4, cols: int = 4, mults: int = 2, lanes: int = 2) -> CSRParams:
    """A tiny engine with narrow formats: 2 PEs, 4 x 4 matrices, 2 vector elements per beat."""
    return CSRParams(rows=rows, cols=cols, mults=mults, lanes=lanes, weight_fmt=Q(2, 1), vec_fmt=Q(2, 1),
                     out_fmt=Q(3, 1))


class CSRFormal(wiring.Component):
    """Formal harness: :class:`CSRSpMxV` (or a broken subclass) with its properties."""

    def __init__(self, params: CSRParams, dut_class: type = CSRSpMxV, props=None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown CSR properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.dut = dut_class(params)
        members = self.dut.signature.members
        super().__init__({n: members[n] for n in ("w", "x", "y")})

    def elaborate(self, platform):
        p = self.params
        V, G = p.vector_beats, p.row_groups
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        wiring.connect(m, wiring.flipped(self.w), dut.w)
        wiring.connect(m, wiring.flipped(self.x), dut.x)
        wiring.connect(m, dut.y, wiring.flipped(self.y))
        iv = internals(frag, ("full", "rd_sel", "wr_cnt", "inflight", "res_full", "osel", "ocnt"),
                       "CSRSpMxV", _WHERE)

        chk = Props(m, PROPERTIES, self.props, "CSR")
        w, x, y = self.w, self.x, self.y
        w_fire, x_fire, y_fire = Signal(), Signal(), Signal()
        m.d.comb += [w_fire.eq(w.valid & w.ready), x_fire.eq(x.valid & x.ready), y_fire.eq(y.valid & y.ready)]
        w_end = w_fire & w.payload.end
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)
        assume_source(m, w, has_past, "w")
        assume_source(m, x, has_past, "x")
        assert_sink(m, y, has_past, chk, "handshake", "y")

        # --- count: rows / M beats per product -------------------------------------------------
        owed = Signal(range(3 * G + 1))
        m.d.sync += owed.eq(owed + Mux(w_end, G, 0) - y_fire)
        chk(~y_fire | (owed != 0), "count: a y beat without a finished product")
        chk(owed <= 2 * G + 1, "count: more beats owed than two products and the output register hold")

        # --- vector -----------------------------------------------------------------------------
        xpos = Signal(range(max(V, 2)))
        vec_done = Signal()
        m.d.comb += vec_done.eq(x_fire & (xpos == V - 1))
        with m.If(x_fire):
            m.d.sync += xpos.eq(Mux(xpos == V - 1, 0, xpos + 1))
        vecs = Signal(range(4))
        m.d.sync += vecs.eq(vecs + vec_done - w_end)
        chk(~w_fire | (vecs != 0), "vector: a w beat taken without a loaded vector")
        chk(vecs <= 2, "vector: more than two vectors held")
        chk(~((vecs == 2) & x.ready), "vector: x.ready while both vector buffers are full")

        # --- internal ---------------------------------------------------------------------------
        full, res_full = iv["full"], iv["res_full"]
        chk(xpos == iv["wr_cnt"], "internal: harness vector position != wr_cnt")
        chk(vecs == full[0] + full[1], "internal: vectors held != full buffers")
        chk(~((full == 1) | (full == 2)) | full.bit_select(iv["rd_sel"], 1),
            "internal: one full vector buffer that is not the read buffer")
        chk(iv["inflight"] <= 2, "internal: more than two products in flight")
        # beats owed: products in the pipeline or the result buffers, minus beats already out
        out_of_cur = Mux(res_full.bit_select(iv["osel"], 1), iv["ocnt"], 0)
        chk(owed == iv["inflight"] * G - out_of_cur + y.valid,
            "internal: beats owed != products in flight x rows/M - beats emitted")
        chk(iv["inflight"] >= res_full[0] + res_full[1], "internal: fewer products in flight than full result buffers")
        chk(res_full.bit_select(iv["osel"], 1) | (iv["ocnt"] == 0), "internal: emitter position without a full buffer")

        m.d.comb += [Cover(y_fire), Cover(vecs == 2), Cover(y.valid & ~y.ready & has_past)]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class NoVectorCSR(CSRSpMxV):
    """Broken: weight beats are taken while no vector is loaded."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = internals(m, ("inflight",), "CSRSpMxV", _WHERE)
        m.d.comb += self.w.ready.eq(iv["inflight"] < 2)
        return m


class ExtraBeatCSR(CSRSpMxV):
    """Broken: the emitter sends one beat too many per product (its row counter wraps late)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = internals(m, ("ocnt", "res_full", "osel"), "CSRSpMxV", _WHERE)
        ren = ~self.y.valid | self.y.ready
        G = self.params.row_groups
        with m.If(ren & iv["res_full"].bit_select(iv["osel"], 1) & (iv["ocnt"] == G - 1)):
            m.d.sync += [iv["res_full"].bit_select(iv["osel"], 1).eq(1), iv["osel"].eq(iv["osel"]),
                         iv["ocnt"].eq(0)]
        return m


class DropValidCSR(CSRSpMxV):
    """Broken: ``y.valid`` falls without ``y.ready`` when a vector beat arrives."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.y.valid & ~self.y.ready & self.x.valid):
            m.d.sync += self.y.valid.eq(0)
        return m


_BLACKBOX = ("handshake", "count", "vector")

#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "no-vector": (NoVectorCSR, "bmc", 4, _BLACKBOX, "vector: a w beat taken without"),
    "extra-beat": (ExtraBeatCSR, "bmc", 14, _BLACKBOX, "count: a y beat without"),
    "drop-valid": (DropValidCSR, "bmc", 12, _BLACKBOX, "handshake: y.valid fell"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: BMC on 2 PEs, 4 x 4 (no k-induction yet); covers; broken
    variants. ``full`` adds 4 PEs, 8 x 8."""
    prm = formal_params()
    out = [
        dict(name="m2-bmc", build=lambda: CSRFormal(prm), mode="bmc", depth=16, doc="every property, M=2: BMC"),
        dict(name="m2-cover", build=lambda: CSRFormal(prm), mode="cover", depth=14,
             doc="reachable: a y beat, two vectors held, a y beat waiting"),
    ]
    if full:
        prm4 = formal_params(rows=8, cols=8, mults=4, lanes=4)
        out += [dict(name="m4-bmc", build=lambda: CSRFormal(prm4), mode="bmc", depth=24,
                     doc="every property, M=4, 8 x 8: BMC")]
    out += mutant_checks(MUTANTS, lambda cls, props: CSRFormal(prm, cls, props))
    return out

"""Formal properties of the BeamRaster precoder (:class:`hwcosim.hdl.beamraster.precoder.Precoder`).

:class:`PrecoderFormal` wraps the precoder in a harness whose ports are its three streams (the
32-bit performance counters are left unconnected, so Yosys removes them) and adds:

Assumptions
    ``s`` and ``c`` hold ``valid`` and ``payload`` until ``ready``; ``x.ready`` is free; reset
    is not re-asserted.

Assertions, by group
    ``handshake`` ``x`` holds ``valid`` and ``payload`` while ``valid & ~ready``.
    ``count``     the golden model's rule: each subcarrier-symbol gives ``M / L`` output beats.
                  An ``x`` beat only while one is owed (``M / L`` per accepted symbol, minus the
                  beats out); the beats owed never exceed what the stages and ``s'`` buffers
                  hold; after a quiet spell (no symbol, ``x.ready`` high) nothing is owed.
    ``swap``      BeamRaster: the coefficient set swaps only at frame boundaries. The harness
                  counts accepted symbols; every symbol of frame ``f`` is issued with bank
                  ``f mod 2`` (the bank never changes inside a frame), only after coefficient set
                  ``f`` has been loaded completely (and at most set ``f + 1`` beyond it), and no
                  coefficient beat is written into the bank the pre-distortion stage is reading.
    ``internal``  white-box invariants that make ``handshake`` and ``count`` k-inductive.

Covers: an ``x`` beat; a symbol of the second frame issued (a swap happened); a coefficient
set loading while the other bank is read.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from hwcosim.hdl.beamraster.precoder import Precoder
from hwcosim.hdl.common.formal import Props, assert_sink, assigned_from, assume_source, internals, mutant_checks
from hwcosim.models.beamraster.datapath import BM_LATENCY, S_BANKS, PrecoderParams, pd_latency
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q

__all__ = ["PrecoderFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params"]

PROPERTIES = ("handshake", "count", "swap", "internal")
_WHERE = "hdl/beamraster/precoder_formal.py"
_REGS = ("crd", "busy", "cwsel", "cwcnt", "sub", "grp", "osym", "ilast", "cfull0", "cfull1")


def formal_params(M: int = 4, K: int = 1, lanes: int = 2, groups: int = 2, sc_per_group: int = 1,
                  symbols_per_frame: int = 2) -> PrecoderParams:
    """Tiny precoder with narrow formats: 4 antennas, frames of 4 subcarrier-symbols."""
    return PrecoderParams(M=M, K=K, lanes=lanes, groups=groups, sc_per_group=sc_per_group,
                          symbols_per_frame=symbols_per_frame, sym_fmt=Q(2, 2), pd_fmt=Q(2, 2),
                          mid_fmt=Q(2, 2), tw_fmt=Q(2, 4), out_fmt=Q(3, 2))


class PrecoderFormal(wiring.Component):
    """Formal harness: :class:`Precoder` (or a broken subclass) with its properties.

    Parameters
    ----------
    params : PrecoderParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    """

    def __init__(self, params: PrecoderParams, dut_class: type = Precoder, props=None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown BeamRaster properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.dut = dut_class(params)
        members = self.dut.signature.members
        super().__init__({n: members[n] for n in ("s", "c", "x")})

    def elaborate(self, platform):
        p = self.params
        K, G, F = p.K, p.ant_groups, p.frame_len
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        wiring.connect(m, wiring.flipped(self.s), dut.s)
        wiring.connect(m, wiring.flipped(self.c), dut.c)
        wiring.connect(m, dut.x, wiring.flipped(self.x))
        iv = internals(frag, _REGS, "Precoder", _WHERE)
        iv["ibank"] = assigned_from(frag, iv["crd"], "Precoder", _WHERE)   # bank of the symbol issuing

        chk = Props(m, PROPERTIES, self.props, "BeamRaster")
        s, c, x = self.s, self.c, self.x
        s_fire, c_fire, x_fire = Signal(), Signal(), Signal()
        m.d.comb += [s_fire.eq(s.valid & s.ready), c_fire.eq(c.valid & c.ready), x_fire.eq(x.valid & x.ready)]
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        assume_source(m, s, has_past, "s")
        assume_source(m, c, has_past, "c")
        assert_sink(m, x, has_past, chk, "handshake", "x")

        # --- count: M / L beats per symbol ----------------------------------------------------------
        # beats the datapath can owe: S_BANKS symbols holding s' buffers (the issuing one among
        # them) and, of symbols already released, what the beam-stage pipeline and output hold
        cap = G * S_BANKS + BM_LATENCY + 1
        owed = Signal(range(cap + G + 1))
        m.d.sync += owed.eq(owed + Mux(s_fire, G, 0) - x_fire)
        chk(~x_fire | (owed != 0), "count: an output beat without a symbol")
        chk(owed <= cap, "count: more output beats owed than the datapath holds")
        # cycles for a full datapath to empty after the last symbol: its rows, the pre-distortion
        # pipeline, every s' buffer through the beam stage, the beam pipeline
        drain = K + pd_latency(K) + S_BANKS * K * G + BM_LATENCY + 2
        quiet = Signal(range(drain + 1))
        with m.If(s_fire | ~x.ready):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != drain):
            m.d.sync += quiet.eq(quiet + 1)
        with m.If(quiet == drain):
            chk((owed == 0) & ~x.valid, "count: the drained precoder still owes output beats")

        # --- swap: coefficient banks change only between frames ---------------------------------------
        pos = Signal(range(F))                 # position of the next symbol in its frame
        frame = Signal(4)                      # frame of the next symbol (mod 16)
        sets = Signal(4)                       # coefficient sets completely loaded (mod 16)
        cpos = Signal(range(p.coef_beats))
        with m.If(s_fire):
            m.d.sync += pos.eq(Mux(pos == F - 1, 0, pos + 1))
            with m.If(pos == F - 1):
                m.d.sync += frame.eq(frame + 1)
        with m.If(c_fire):
            m.d.sync += cpos.eq(Mux(cpos == p.coef_beats - 1, 0, cpos + 1))
            with m.If(cpos == p.coef_beats - 1):
                m.d.sync += sets.eq(sets + 1)
        ahead = Signal(4)
        m.d.comb += ahead.eq(sets - frame)
        with m.If(s_fire):
            chk(iv["crd"] == frame[0], "swap: a symbol issued with the other frame's coefficient bank")
            chk((ahead == 1) | (ahead == 2), "swap: a symbol issued before its frame's coefficient set was loaded")
        with m.If(c_fire):
            chk(~(iv["busy"] & (iv["ibank"] == iv["cwsel"])),
                "swap: a coefficient beat written into the bank being read")
        chk(ahead <= 2, "swap: more than two coefficient sets ahead of the symbols")

        # --- internal -----------------------------------------------------------------------------
        chk(iv["cwcnt"] == cpos, "internal: harness coefficient position != cwcnt")
        chk(iv["cwsel"] == sets[0], "internal: loader bank != loaded sets mod 2")
        frame_pos = (iv["osym"] * p.groups + iv["grp"]) * p.sc_per_group + iv["sub"]
        chk(frame_pos == pos, "internal: harness frame position != (osym, grp, sub)")
        chk(iv["crd"] == frame[0], "internal: bank of the next symbol != frame mod 2")
        pend = iv["busy"] & iv["ilast"]       # the last symbol of the previous frame is issuing
        cur = Mux(iv["crd"], iv["cfull1"], iv["cfull0"])
        oth = Mux(iv["crd"], iv["cfull0"], iv["cfull1"])
        chk(cur == (ahead >= 1), "internal: the next frame's bank full != its set loaded")
        chk(oth == ((ahead == 2) | pend), "internal: the other bank full != next set loaded or last symbol issuing")
        chk(~(pend & (ahead == 2)), "internal: a set loaded into the bank of the frame still issuing")
        with m.If(iv["busy"]):
            chk(iv["ibank"] == (iv["crd"] ^ iv["ilast"]), "internal: the issuing symbol's bank is not its frame's")

        # --- covers ---------------------------------------------------------------------------------
        m.d.comb += [Cover(x_fire), Cover(s_fire & (frame == 1)), Cover(c_fire & iv["busy"])]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class MidFrameSwapPrecoder(Precoder):
    """Broken: the coefficient bank swaps at the end of every OFDM symbol, not of every frame."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        p = self.params
        iv = internals(m, ("crd", "sub", "grp"), "Precoder", _WHERE)
        with m.If(self.s.valid & self.s.ready & (iv["sub"] == p.sc_per_group - 1) & (iv["grp"] == p.groups - 1)):
            m.d.sync += iv["crd"].eq(~iv["crd"])
        return m


class EarlyReleasePrecoder(Precoder):
    """Broken: a coefficient bank is released after every symbol, so the next set may load into
    it in the middle of its frame."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = internals(m, ("busy", "k", "crd", "cfull0", "cfull1"), "Precoder", _WHERE)
        iv["ibank"] = assigned_from(m, iv["crd"], "Precoder", _WHERE)
        with m.If(iv["busy"] & (iv["k"] == self.params.K - 1)):
            with m.If(iv["ibank"]):
                m.d.sync += iv["cfull1"].eq(0)
            with m.Else():
                m.d.sync += iv["cfull0"].eq(0)
        return m


class ExtraBeatPrecoder(Precoder):
    """Broken: the empty output register re-sends its last beat when a coefficient beat is
    accepted (an output beat that no symbol asked for)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(~self.x.valid & self.c.valid & self.c.ready):
            m.d.sync += self.x.valid.eq(1)
        return m


class SlipPrecoder(Precoder):
    """Broken: the output payload changes under back-pressure when a symbol arrives."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.x.valid & ~self.x.ready & self.s.valid):
            m.d.sync += self.x.payload[0].re.eq(~self.x.payload[0].re)
        return m


_BLACKBOX = ("handshake", "count", "swap")
_PROVEN = ("handshake", "swap", "internal")

#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "mid-frame-swap": (MidFrameSwapPrecoder, "bmc", 8, _BLACKBOX, "swap: a symbol issued with the other frame"),
    "early-release": (EarlyReleasePrecoder, "bmc", 8, _BLACKBOX, "swap: a coefficient beat written into the bank"),
    "extra-beat": (ExtraBeatPrecoder, "bmc", 4, _BLACKBOX, "count: an output beat without a symbol"),
    "payload-slip": (SlipPrecoder, "bmc", 19, _BLACKBOX, "handshake: x.payload changed"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: k-induction and BMC of every property on M=4, K=1, L=2,
    frames of 4 symbols; a cover run; the broken variants. ``full`` adds K=2 and deeper BMC."""
    prm = formal_params()
    out = [
        dict(name="m4k1-prove", build=lambda: PrecoderFormal(prm, props=_PROVEN), mode="prove", depth=4,
             doc="frame-boundary swap + handshake: k-induction (unbounded)"),
        dict(name="m4k1-bmc", build=lambda: PrecoderFormal(prm), mode="bmc", depth=28,
             doc="every property, M=4 K=1 L=2, frames of 4 symbols: BMC"),
        dict(name="m4k1-cover", build=lambda: PrecoderFormal(prm), mode="cover", depth=20,
             doc="reachable: an x beat, a symbol of the next frame, a set loading during a frame"),
    ]
    if full:
        prm2 = formal_params(K=2)
        out += [
            dict(name="m4k2-prove", build=lambda: PrecoderFormal(prm2, props=_PROVEN), mode="prove", depth=6,
                 doc="frame-boundary swap + handshake, K=2: k-induction"),
            dict(name="m4k2-bmc", build=lambda: PrecoderFormal(prm2), mode="bmc", depth=38,
                 doc="every property, M=4 K=2 L=2: BMC"),
        ]
    out += mutant_checks(MUTANTS, lambda cls, props: PrecoderFormal(prm, cls, props))
    return out

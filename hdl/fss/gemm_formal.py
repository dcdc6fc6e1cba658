"""Formal properties of the FSS sparse GEMM engine (:class:`hwcosim.hdl.fss.gemm.FSSGemm`).

:class:`GemmFormal` wraps the engine in a harness whose ports are its streams and its layer
configuration (the 32-bit performance counters are left unconnected, so Yosys removes them):

Assumptions
    ``w`` and ``x`` hold ``valid`` and ``payload`` until ``ready``; ``y.ready`` is free;
    ``cfg_k_regions`` and ``cfg_row_groups`` are in ``1 .. max`` and do not change after reset
    (the documented contract: hold them while the engine holds work); reset is not re-asserted.

Assertions, by group
    ``handshake`` ``y`` holds ``valid`` and ``payload`` while ``valid & ~ready``.
    ``count``     the golden model's rule: one ``y`` beat per (tile, row group), i.e. per
                  ``cfg_k_regions`` accepted ``w`` beats. A ``y`` beat only while a completed
                  row group is owed; never more groups owed than output queue slots (the queue
                  never overflows); after ``PIPELINE_LATENCY + out_depth`` quiet cycles (no ``w``
                  beat, ``y.ready`` high) nothing is owed.
    ``lockstep``  FSS global regularity: every PE row consumes one region per cycle and every PE
                  finishes its row group in the same cycle. The results of all ``PR * PC`` PEs
                  enter the output queue together in one beat, exactly ``PIPELINE_LATENCY - 1``
                  cycles after the group's last ``w`` beat whatever the output does (the pipeline
                  never stalls), and at no other time; an empty queue shows the beat on ``y`` in
                  the next cycle (``PIPELINE_LATENCY`` after the last ``w`` beat).
    ``tiles``     a ``w`` beat is taken only while a complete activation tile
                  (``cfg_k_regions`` ``x`` beats) is loaded; at most two tiles are held and
                  ``x.ready`` is low while both are.
    ``internal``  white-box invariants (harness counters equal the engine's ``c``, ``g``,
                  ``wr_cnt``, ``full`` and its owed count and queue level; stage-valid bits agree
                  with the beats) that make the groups above k-inductive.

The engine is built with a 2-beat output queue (``out_depth=2``, below ``PIPELINE_LATENCY``, so
the room check also throttles the weight stream and is exercised).

Covers: a ``y`` beat; two tiles held; a ``y`` beat waiting under back-pressure; a weight beat
held back by a full output queue.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from hwcosim.hdl.common.formal import Props, assert_sink, assume_source, internals, mutant_checks, past, sync_assigns
from hwcosim.hdl.fss.gemm import STAGES, FSSGemm
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q
from hwcosim.models.fss.gemm import PIPELINE_LATENCY, FSSParams

__all__ = ["GemmFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params", "stage_valids"]

PROPERTIES = ("handshake", "count", "lockstep", "tiles", "internal")
#: the output queue of the engine under proof
OUT_DEPTH = 2
_WHERE = "hdl/fss/gemm_formal.py"


def formal_params(region=(2, 2), n: int = 2, pe_rows: int = 2, pe_cols: int = 1, max_rows: int = 8,
                  max_cols: int = 4) -> FSSParams:
    """A tiny engine with narrow formats: 2x2 regions with 2 nonzeros, a 2x1 PE array, layers up
    to 8 x 4 (two region columns, two row groups)."""
    return FSSParams(region=region, n=n, pe_rows=pe_rows, pe_cols=pe_cols, max_rows=max_rows, max_cols=max_cols,
                     weight_fmt=Q(2, 1), act_fmt=Q(2, 1), out_fmt=Q(3, 1))


def stage_valids(frag, dut, wr_sel: bool = False) -> list:
    """``[s1_valid, ..., sS_valid]`` (S = :data:`hwcosim.hdl.fss.gemm.STAGES`, looked up by name); with
    ``wr_sel=True`` the (unnamed) tile write-select register instead. Raises ``LookupError`` when
    the RTL changes shape."""
    from amaranth.hdl._ast import Operator
    from amaranth.hdl._ast import Signal as _Sig

    if wr_sel:
        pairs = [(a.lhs, a.rhs) for a in sync_assigns(frag)]
        # wr_sel: the one-bit register other than rd_sel that toggles (x <= ~x)
        togglers = {id(lhs): lhs for lhs, r in pairs if isinstance(lhs, _Sig) and isinstance(r, Operator)
                    and r.operator == "~" and len(r.operands) == 1 and r.operands[0] is lhs
                    and lhs.name != "rd_sel"}
        if len(togglers) != 1:
            raise LookupError(f"FSSGemm internals changed: cannot find wr_sel; update {_WHERE}")
        return next(iter(togglers.values()))
    names = [f"s{k}_valid" for k in range(1, STAGES + 1)]
    found = internals(frag, names, "FSSGemm", _WHERE)
    return [found[n] for n in names]


class GemmFormal(wiring.Component):
    """Formal harness: :class:`FSSGemm` (or a broken subclass) with its properties.

    Parameters
    ----------
    params : FSSParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    """

    def __init__(self, params: FSSParams, dut_class: type = FSSGemm, props=None, out_depth: int = OUT_DEPTH):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown FSS GEMM properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.dut = dut_class(params, out_depth)
        members = self.dut.signature.members
        super().__init__({n: members[n] for n in ("w", "x", "y", "cfg_k_regions", "cfg_row_groups")})

    def elaborate(self, platform):
        p = self.params
        L = PIPELINE_LATENCY
        KMAX, GMAX = p.max_k_regions, p.max_row_groups
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        wiring.connect(m, wiring.flipped(self.w), dut.w)
        wiring.connect(m, wiring.flipped(self.x), dut.x)
        wiring.connect(m, dut.y, wiring.flipped(self.y))
        kr, rg = self.cfg_k_regions, self.cfg_row_groups
        m.d.comb += [dut.cfg_k_regions.eq(kr), dut.cfg_row_groups.eq(rg)]
        chk = Props(m, PROPERTIES, self.props, "FSS GEMM")
        iv = internals(frag, ("c", "g", "wr_cnt", "full", "rd_sel"), "FSSGemm", _WHERE)
        iv["wr_sel"] = stage_valids(frag, dut, wr_sel=True)
        sv = stage_valids(frag, dut)

        w, x, y = self.w, self.x, self.y
        w_fire, x_fire, y_fire = Signal(), Signal(), Signal()
        m.d.comb += [w_fire.eq(w.valid & w.ready), x_fire.eq(x.valid & x.ready), y_fire.eq(y.valid & y.ready)]
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)
        m.d.comb += Assume((kr >= 1) & (kr <= KMAX) & (rg >= 1) & (rg <= GMAX))
        past_kr, past_rg = past(m, kr, "past_kr"), past(m, rg, "past_rg")
        with m.If(has_past):
            m.d.comb += Assume((kr == past_kr) & (rg == past_rg))

        assume_source(m, w, has_past, "w")
        assume_source(m, x, has_past, "x")
        assert_sink(m, y, has_past, chk, "handshake", "y")

        # --- count -----------------------------------------------------------------------------
        wpos = Signal(range(max(2, KMAX)))           # w beats into the current row group
        group_done = Signal()
        m.d.comb += group_done.eq(w_fire & (wpos == kr - 1))
        with m.If(w_fire):
            m.d.sync += wpos.eq(Mux(wpos == kr - 1, 0, wpos + 1))
        D = self.dut.out_depth
        owed = Signal(range(D + 2))
        m.d.sync += owed.eq(owed + group_done - y_fire)
        chk(~y_fire | (owed != 0), "count: a y beat without a completed row group")
        chk(owed <= D, "count: more row groups owed than output queue slots")
        QUIET = L + D
        quiet = Signal(range(QUIET + 1))
        with m.If(w_fire | ~y.ready):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != QUIET):
            m.d.sync += quiet.eq(quiet + 1)
        with m.If(quiet == QUIET):
            chk((owed == 0) & ~y.valid, "count: the drained engine owes a y beat")

        # --- lockstep: all PEs finish a row group together, L - 1 cycles after its last beat ----
        oqi = internals(frag, ("oq_we", "oq_level", "oq_owed", "oq_head", "oq_tail"), "FSSGemm", _WHERE)
        done_hist = Signal(L)
        m.d.sync += done_hist.eq((done_hist << 1) | group_done)
        chk(oqi["oq_we"] == done_hist[L - 2],
            "lockstep: the result beat is not queued exactly PIPELINE_LATENCY - 1 cycles after its group's last w beat")
        with m.If(past(m, oqi["oq_level"] == 0, "past_q_empty") & past(m, oqi["oq_we"], "past_q_we") & has_past):
            chk(y.valid, "lockstep: a result queued into the empty queue is not on y in the next cycle")

        # --- tiles ------------------------------------------------------------------------------
        xpos = Signal(range(max(2, KMAX)))
        tile_done = Signal()
        m.d.comb += tile_done.eq(x_fire & (xpos == kr - 1))
        with m.If(x_fire):
            m.d.sync += xpos.eq(Mux(xpos == kr - 1, 0, xpos + 1))
        gpos = Signal(range(max(2, GMAX)))
        tile_used = Signal()
        m.d.comb += tile_used.eq(group_done & (gpos == rg - 1))
        with m.If(group_done):
            m.d.sync += gpos.eq(Mux(gpos == rg - 1, 0, gpos + 1))
        tiles = Signal(range(4))
        m.d.sync += tiles.eq(tiles + tile_done - tile_used)
        chk(~w_fire | (tiles != 0), "tiles: a w beat taken without a loaded activation tile")
        chk(tiles <= 2, "tiles: more than two activation tiles held")
        chk(~((tiles == 2) & x.ready), "tiles: x.ready while both tile buffers are full")

        # --- internal ---------------------------------------------------------------------------
        full, rd, wr = iv["full"], iv["rd_sel"], iv["wr_sel"]
        chk(wpos == iv["c"], "internal: harness region column != c")
        chk(gpos == iv["g"], "internal: harness row group != g")
        chk(xpos == iv["wr_cnt"], "internal: harness tile position != wr_cnt")
        lf = internals(frag, ("c_last", "g_last"), "FSSGemm", _WHERE)
        # (the flags hold from the second cycle: in the first, nothing is loaded, so no beat is taken)
        chk(has_past | (iv["full"] == 0), "internal: an activation tile loaded in the first cycle")
        chk((iv["c"] < kr) & (iv["g"] < rg), "internal: c or g beyond the configured shape")
        with m.If(has_past):
            chk(lf["c_last"] == (iv["c"] == kr - 1), "internal: c_last != (c == k_regions - 1)")
            chk(lf["g_last"] == (iv["g"] == rg - 1), "internal: g_last != (g == row_groups - 1)")
        chk(tiles == full[0] + full[1], "internal: tiles held != full buffers")
        chk((full != 0) | (wr == rd), "internal: empty buffers but wr_sel != rd_sel")
        chk((full != 3) | (wr == rd), "internal: both buffers full but wr_sel != rd_sel")
        chk(~((full == 1) | (full == 2)) | (full.bit_select(rd, 1) & (wr != rd)),
            "internal: one full buffer that is not the read buffer")
        lasts = internals(frag, [f"s{k}_last" for k in range(1, STAGES + 1)], "FSSGemm", _WHERE)
        stages = [sv[k - 1] & lasts[f"s{k}_last"] for k in range(1, STAGES + 1)]
        chk(owed == sum(stages) + oqi["oq_level"], "internal: groups owed != last beats in the pipeline + queued")
        chk(owed == oqi["oq_owed"], "internal: harness owed count != the engine's")
        chk(y.valid == (oqi["oq_level"] != 0), "internal: y.valid != queue not empty")
        if D > 1:
            qb = (D - 1).bit_length()
            chk((oqi["oq_tail"] - oqi["oq_head"])[:qb] == oqi["oq_level"][:qb],
                "internal: queue pointers disagree with its level")
        for k in range(STAGES):
            with m.If(quiet > k):
                chk(~sv[k], f"internal: stage {k + 1} busy after {k + 1} quiet cycles")
        for k in range(STAGES):
            chk(stages[k] == done_hist[k], f"internal: stage {k + 1} out of step with the w beats")
        for j in range(1, D + 1):   # the queue drains once the pipeline is empty
            with m.If(quiet >= STAGES + j):
                chk(oqi["oq_level"] <= D - j, f"internal: {D - j + 1}+ results queued after {STAGES + j} quiet cycles")

        room = internals(frag, ("room",), "FSSGemm", _WHERE)["room"]
        m.d.comb += [Cover(y_fire), Cover(tiles == 2), Cover(y.valid & ~y.ready & has_past),
                     Cover(w.valid & (tiles != 0) & ~room)]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class SkewGemm(FSSGemm):
    """Broken: when an activation beat arrives, a finished row group is queued from the stage before
    the last, a cycle early (the result no longer leaves after the fixed latency)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        k = STAGES - 1
        sig = internals(m, (f"s{k}_valid", f"s{k}_last", "oq_we"), "FSSGemm", _WHERE)
        with m.If(self.x.valid):
            m.d.comb += sig["oq_we"].eq(sig[f"s{k}_valid"] & sig[f"s{k}_last"])
        return m


class DropValidGemm(FSSGemm):
    """Broken: ``y.valid`` falls without ``y.ready`` when an activation beat arrives."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(~self.y.ready & self.x.valid):
            m.d.comb += self.y.valid.eq(0)
        return m


class NoTileGemm(FSSGemm):
    """Broken: weight beats are taken while no activation tile is loaded."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.w.ready.eq(internals(m, ("room",), "FSSGemm", _WHERE)["room"])
        return m


class NoRoomGemm(FSSGemm):
    """Broken: weight beats are taken whether or not the output queue has a slot for their group."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        i = internals(m, ("full", "rd_sel"), "FSSGemm", _WHERE)
        m.d.comb += self.w.ready.eq(i["full"].bit_select(i["rd_sel"], 1))
        return m


_BLACKBOX = ("handshake", "count", "lockstep", "tiles")

#: name -> (broken class, mode, depth, property groups checked, expected failure message)
#: (drop-valid needs depth 16: the first result beat is at least PIPELINE_LATENCY + 3 cycles in)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "skew": (SkewGemm, "bmc", 12, ("lockstep",), "lockstep: the result beat"),
    "drop-valid": (DropValidGemm, "bmc", 16, ("handshake",), "handshake: y.valid fell"),
    "no-tile": (NoTileGemm, "bmc", 6, _BLACKBOX, "tiles: a w beat taken without"),
    "no-room": (NoRoomGemm, "bmc", 8, ("count",), "count: more row groups owed than output queue slots"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: k-induction of every property (2x2 regions, n=2, 2x1
    PEs, run-time layer shape up to 2 region columns x 2 row groups), a BMC, a cover run and
    the broken variants. ``full`` adds a sparse 2x4 region with a 2x2 PE array and deeper BMC."""
    prm = formal_params()
    out = [
        dict(name="r2x2n2-prove", build=lambda: GemmFormal(prm), mode="prove", depth=PIPELINE_LATENCY + 2,
             doc="every property, any layer shape up to 8x4: k-induction (unbounded)"),
        dict(name="r2x2n2-bmc", build=lambda: GemmFormal(prm), mode="bmc", depth=16,
             doc="every property: BMC"),
        dict(name="r2x2n2-cover", build=lambda: GemmFormal(prm), mode="cover", depth=12,
             doc="reachable: a y beat, two tiles held, a y beat waiting, a w beat held by a full queue"),
    ]
    if full:
        prm2 = formal_params(region=(2, 4), n=3, pe_rows=1, pe_cols=2, max_rows=4, max_cols=8)
        out += [
            dict(name="r2x4n3-prove", build=lambda: GemmFormal(prm2), mode="prove", depth=PIPELINE_LATENCY + 2,
                 doc="every property, sparse 2x4 regions n=3, 1x2 PEs: k-induction"),
            dict(name="r2x2n2-bmc30", build=lambda: GemmFormal(prm), mode="bmc", depth=30,
                 doc="every property: deep BMC"),
        ]
    out += mutant_checks(MUTANTS, lambda cls, props: GemmFormal(prm, cls, props))
    return out

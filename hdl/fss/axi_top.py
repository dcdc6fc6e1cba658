"""Board-ready top level of the FSS sparse GEMM engine: AXI4-Stream data, AXI4-Lite control and status.

Wraps :class:`hwcosim.hdl.fss.gemm.FSSGemm` for a shell (Vivado block design, Platform Designer). The
engine itself keeps no weights (it re-reads them once per column tile); this wrapper adds an
on-chip weight store, so a layer's weights cross the bus once and every run then streams only
activations in and results out.

Streams (``tdata`` widths rounded up to whole bytes, no ``tkeep``):

- ``s_axis_w`` (32-bit ``tdata``): one layer's FSS weights. Each weight beat of
  :func:`hwcosim.models.fss.gemm.pack_weight_beats` (``PR * N`` lanes of ``value | index << W``,
  ``PR * N * (W + I)`` bits) is cut into ``ceil(bits / 32)`` words, least significant word first
  (the last word's unused upper bits are ignored); beats in the engine's order, row group ``g``
  then region column ``c``: ``ROW_GROUPS * K_REGIONS`` beats in all.
  :func:`hwcosim.cosim.designs.fss.gemm.pack_axi_weight_words` builds the word list. ``s_axis_w_tready`` is always
  high: words go straight into the store. ``STATUS.loaded`` rises when the last word of the last
  beat is in; words that arrive while loaded are dropped and set ``ERROR.extra_weights``.
- ``s_axis_x``: activation beats of :func:`hwcosim.models.fss.gemm.pack_act_beats` (``r_w * PC`` elements of
  ``XW`` bits at ``(t * r_w + b) * XW``), ``K_REGIONS`` beats per column tile, ``TILES`` tiles
  per run. Accepted only while a run still expects activations.
- ``m_axis_y``: result beats of :func:`hwcosim.models.fss.gemm.unpack_output_beats` (``PR * r_h * PC`` values
  of ``OW`` bits), one per (tile, row group); ``tlast`` on the last row group of every tile, so a
  frame is one tile: ``PC`` output columns of all ``ROW_GROUPS * r_h * PR`` rows.
- ``s_axil``: AXI4-Lite, 32-bit data, 8-bit byte address (bits 1:0 ignored); ``wstrb`` ignored;
  the write address and data are taken together. Responses are OKAY except as stated below.

Register map: :data:`REGISTER_MAP` (byte addresses 0x00..0x40), one typed definition
(:class:`hwcosim.hdl.common.registers.RegisterMap`: every register and every field with its bits,
access, reset value and meaning) from which the RTL decode below, the host and testbench
constants (:data:`REGS`, :data:`CTRL`, :data:`STATUS`, :data:`ERROR`, :data:`WRITABLE`), the
formal harness and the design's documentation table are derived. A read of any other address
answers SLVERR with data 0; a write to any other address, or to a read-only register, answers
SLVERR and changes nothing. Both set ERROR.BAD_ADDRESS.

Recovery. ``SOFT_RESET`` puts the design in the state a hardware reset gives, except that the
size registers and ERROR keep their values and the AXI4-Lite channels complete normally: not
busy, not done, weights unloaded (W_WORDS = 0), counters 0, the engine's pipeline and activation
buffer emptied, ``m_axis_y_tvalid`` low. A ``s_axis_w`` word transferred in the cycle of the
SOFT_RESET write is discarded; later words start a new load, so a driver resets its DMA engines
with the block (or writes LOAD once they are drained). A hardware ``rst`` (synchronous, active
high) also resets the size registers to their reset values and clears ERROR.

Latency and throughput are those of :class:`hwcosim.hdl.fss.gemm.FSSGemm`: the wrapper adds no stage on
``x`` or ``y`` (``tvalid``/``tready`` pass through, gated by the run's beat counts), and the
weight store reads ahead (block RAM read, then an output register), so with free-flowing
streams and activations waiting at START, ``RUN_CYCLES == CYCLES ==``
``CycleModel(p, weight_lead=WEIGHT_LEAD).expected(...)`` (:class:`hwcosim.models.fss.gemm.CycleModel`)
and ``STARVE_W == 0``: the first weight beat reaches the engine in its cycle ``WEIGHT_LEAD`` (2),
which a tile of two or more region columns hides and a one-column tile waits for (one cycle).
The engine is held in reset in the START cycle (it is empty then), which is what clears its
counters per run.

Resources beyond the engine: the weight store, ``max_row_groups * max_k_regions`` words of
``PR * N * (W + I)`` bits (block RAM: for the default ``fss-axi`` build, 1,024 x 192 bits), a
``32 * ceil(PR * N * (W + I) / 32)``-bit deserialiser, the register file, three 32-bit tile
counters and the counters above. No multipliers: beat counts are nested counters.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, ResetInserter, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.bbs.axi_top import bytes_up
from hwcosim.hdl.common.arith import count_saturating
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, axil_members, connect_axil
from hwcosim.hdl.common.registers import Field, Register, RegisterMap
from hwcosim.hdl.common.skid import SkidBuffer
from hwcosim.hdl.fss.gemm import FSSGemm
from hwcosim.models.errors import UsageError
from hwcosim.models.fss.gemm import FSSParams

__all__ = ["FSSAxiTop", "WEIGHT_LEAD", "REGISTER_MAP", "REGS", "CTRL", "STATUS", "ERROR", "WRITABLE", "FSS_ID",
           "config_words",
           "words_per_beat"]

_SIZE_RULE = ("a write out of range, or any size write while busy, is refused: SLVERR, the register keeps its "
              "value, ERROR.BAD_SIZE (range) or ERROR.BUSY (busy)")
_PER_RUN = "cleared by START, SOFT_RESET and rst; saturates at 2**32 - 1"
#: The AXI4-Lite register map: the one definition of every register and field (see the module docstring).
REGISTER_MAP = RegisterMap(
    Register("CTRL", 0x00, "w", "commands; reads 0", fields=(
        Field("START", 0, "w1", 0, "run TILES column tiles on the loaded weights"),
        Field("CLEAR_ERROR", 1, "w1", 0, "clear ERROR (applied before the other bits of the same write)"),
        Field("SOFT_RESET", 2, "w1", 0, "the state of a hardware reset except the size registers and ERROR (the "
                                         "other bits of the same write, except CLEAR_ERROR, are ignored)"),
        Field("LOAD", 3, "w1", 0, "restart the weight load: STATUS.loaded falls, the next s_axis_w word is word 0 of "
                                   "beat 0; a START in the same write is refused as unloaded"),
    )),
    Register("ROW_GROUPS", 0x04, "rw", "rows / (r_h * PR), 1..max_row_groups; refused (SLVERR) out of range or busy",
             fields=(Field("ROW_GROUPS", (15, 0), "rw", "max_row_groups",
                           "rows / (r_h * PR), 1..max_row_groups; " + _SIZE_RULE
                           + "; an accepted write restarts the weight load"),)),
    Register("K_REGIONS", 0x08, "rw", "cols / r_w, 1..max_k_regions; refused (SLVERR) out of range or busy",
             fields=(Field("K_REGIONS", (15, 0), "rw", "max_k_regions",
                           "cols / r_w, 1..max_k_regions; " + _SIZE_RULE
                           + "; an accepted write restarts the weight load"),)),
    Register("TILES", 0x0C, "rw", "column tiles of PC per run, 1..2**32-1; refused (SLVERR) when 0 or busy",
             fields=(Field("TILES", (31, 0), "rw", 1, "T / PC column tiles per run, 1..2**32-1; " + _SIZE_RULE),)),
    Register("STATUS", 0x10, "r", "run and load state", fields=(
        Field("BUSY", 0, "r", 0, "a run is in progress"),
        Field("DONE", 1, "r", 0, "the last run's last result beat left; cleared by START"),
        Field("ERROR", 2, "r", 0, "ERROR != 0"),
        Field("LOADED", 3, "r", 0, "the last word of the last weight beat is in"),
        Field("LOADING", 4, "r", 0, "some words of a load are in, not all"),
    )),
    Register("ERROR", 0x14, "r", "error flags, sticky until CTRL.CLEAR_ERROR (kept by SOFT_RESET)", fields=(
        Field("START_UNLOADED", 0, "rc", 0, "START before the weights were loaded"),
        Field("BAD_SIZE", 1, "rc", 0, "size register write out of range"),
        Field("EXTRA_WEIGHTS", 2, "rc", 0, "weight words while loaded (dropped)"),
        Field("BUSY", 3, "rc", 0, "START, LOAD or a size write while busy (ignored)"),
        Field("BAD_ADDRESS", 4, "rc", 0, "AXI4-Lite access to an unmapped address or a write to a read-only "
                                         "register (SLVERR)"),
    )),
    Register("CYCLES", 0x18, "r", "cycles the engine held work (FSSGemm.cycles; per run: " + _PER_RUN + ")"),
    Register("MAC_BEATS", 0x1C, "r", "weight beats consumed (FSSGemm.mac_beats; per run: " + _PER_RUN + ")"),
    Register("STALL_OUT", 0x20, "r", "cycles m_axis_y was refused (FSSGemm.stall_out; per run: " + _PER_RUN + ")"),
    Register("STARVE_W", 0x24, "r", "cycles a loaded tile waited for a weight beat (FSSGemm.starve_w; per run: "
                                    + _PER_RUN + ")"),
    Register("RUN_CYCLES", 0x28, "r", "cycles busy, START to the last result beat (" + _PER_RUN + ")"),
    Register("OUT_BEATS", 0x2C, "r", "result beats sent (per run: " + _PER_RUN + ")"),
    Register("W_WORDS", 0x30, "r", "words accepted into the current weight load (0 after LOAD, a size write, "
                                   "SOFT_RESET or rst; ROW_GROUPS * K_REGIONS * words/beat when loaded)"),
    Register("CONFIG0", 0x34, "r", "identification of the build: region and PE array", fields=(
        Field("R_H", (7, 0), "r", "r_h", "region height"),
        Field("R_W", (15, 8), "r", "r_w", "region width"),
        Field("N", (23, 16), "r", "n", "nonzeros kept per region"),
        Field("PR", (31, 24), "r", "pe_rows", "PE rows"),
    )),
    Register("CONFIG1", 0x38, "r", "identification of the build: PE columns and fixed-point widths", fields=(
        Field("PC", (7, 0), "r", "pe_cols", "PE columns"),
        Field("W", (15, 8), "r", "weight_fmt.width", "weight width"),
        Field("XW", (23, 16), "r", "act_fmt.width", "activation width"),
        Field("OW", (31, 24), "r", "out_fmt.width", "output width"),
    )),
    Register("CONFIG2", 0x3C, "r", "identification of the build: the largest layer", fields=(
        Field("MAX_ROW_GROUPS", (15, 0), "r", "max_row_groups", "largest ROW_GROUPS of the build"),
        Field("MAX_K_REGIONS", (31, 16), "r", "max_k_regions", "largest K_REGIONS of the build"),
    )),
    Register("ID", 0x40, "r", "identification of the design", fields=(
        Field("ID", (31, 0), "r", 0x46535331, "identifies the design: \"FSS1\""),)),
    title="fss-axi",
)
#: ``{name: byte address}`` (host and testbench constants, derived from :data:`REGISTER_MAP`)
REGS = REGISTER_MAP.addresses()
#: registers a write may change (writes elsewhere answer SLVERR)
WRITABLE = REGISTER_MAP.writable()
#: CTRL command bits ``{field: mask}``
CTRL = REGISTER_MAP.masks("CTRL")
#: STATUS bits
STATUS = REGISTER_MAP.masks("STATUS")
#: ERROR bits
ERROR = REGISTER_MAP.masks("ERROR")
FSS_ID = REGISTER_MAP.ID.ID.reset  # "FSS1"
#: the engine cycle in which the weight replay offers its first beat of a run (see above)
WEIGHT_LEAD = 2


def words_per_beat(p: FSSParams) -> int:
    """32-bit ``s_axis_w`` words per weight beat."""
    return -(-p.weight_beat_bits // 32)


def config_words(p: FSSParams) -> dict[str, int]:
    """Values of the read-only identification registers (CONFIG0..2, ID) of a build."""
    M = REGISTER_MAP
    return {"CONFIG0": M.CONFIG0.pack(R_H=p.r_h, R_W=p.r_w, N=p.n, PR=p.pe_rows),
            "CONFIG1": M.CONFIG1.pack(PC=p.pe_cols, W=p.weight_fmt.width, XW=p.act_fmt.width, OW=p.out_fmt.width),
            "CONFIG2": M.CONFIG2.pack(MAX_ROW_GROUPS=p.max_row_groups, MAX_K_REGIONS=p.max_k_regions),
            "ID": FSS_ID}


class FSSAxiTop(wiring.Component):
    """``FSSGemm`` plus a weight store behind AXI4-Stream (w, x, y) and AXI4-Lite (control/status/counters).

    Parameters
    ----------
    params : FSSParams
        The engine's parameters; the weight store holds ``max_rows x max_cols`` layers.

    Raises
    ------
    TypeError
        ``params`` is not an :class:`hwcosim.models.fss.gemm.FSSParams`.
    ValueError
        A field does not fit its CONFIG register (8 bits; 16 bits for the maxima).

    Ports are flat and named as the AXI specification and cocotbext-axi expect
    (``s_axis_x_tdata``, ``s_axil_awaddr``, ...); see the module docstring for the register map.
    """

    def __init__(self, params: FSSParams):
        if not isinstance(params, FSSParams):
            raise TypeError(f"FSSAxiTop takes a models.fss.gemm.FSSParams, not {params!r}")
        self.params = p = params
        for name, v in (("r_h", p.r_h), ("r_w", p.r_w), ("n", p.n), ("pe_rows", p.pe_rows),
                        ("pe_cols", p.pe_cols), ("weight width", p.weight_fmt.width),
                        ("activation width", p.act_fmt.width), ("output width", p.out_fmt.width)):
            if v > 255:
                raise UsageError(f"FSS AXI top: {name} must fit the 8-bit CONFIG field, not {v}")
        for name, v in (("max_row_groups", p.max_row_groups), ("max_k_regions", p.max_k_regions)):
            if v > 0xFFFF:
                raise UsageError(f"FSS AXI top: {name} must fit the 16-bit CONFIG2 field, not {v}")
        xw = bytes_up(p.r_w * p.pe_cols * p.act_fmt.width)
        yw = bytes_up(p.out_lanes * p.out_fmt.width)
        super().__init__({
            "s_axis_w_tdata": In(32), "s_axis_w_tvalid": In(1), "s_axis_w_tready": Out(1),
            "s_axis_x_tdata": In(xw), "s_axis_x_tvalid": In(1), "s_axis_x_tready": Out(1),
            "m_axis_y_tdata": Out(yw), "m_axis_y_tvalid": Out(1), "m_axis_y_tready": In(1),
            "m_axis_y_tlast": Out(1),
            **axil_members(8),
        })

    @property
    def weight_words(self) -> int:
        """32-bit words per weight beat."""
        return words_per_beat(self.params)

    @property
    def store_beats(self) -> int:
        """Depth of the weight store (weight beats of the largest layer)."""
        return self.params.max_row_groups * self.params.max_k_regions

    #: the AXI4-Lite register file (a broken variant in the formal harness replaces it)
    regfile_cls = AxiLiteRegFile

    def elaborate(self, platform):
        p = self.params
        MAP = REGISTER_MAP
        C, E = MAP.CTRL, MAP.ERROR              # command and error bits of the decode below
        m = Module()
        m.submodules.axil = axil = self.regfile_cls(REGISTER_MAP, addr_width=8)
        connect_axil(m, self, axil)
        GMAX, KMAX, NW, BEATS = p.max_row_groups, p.max_k_regions, self.weight_words, self.store_beats

        gemm = FSSGemm(p)
        eng_rst = Signal()
        m.submodules.gemm = ResetInserter(eng_rst)(gemm)

        # --- registers --------------------------------------------------------------------------
        rg = Signal(range(GMAX + 1), init=GMAX)
        kr = Signal(range(KMAX + 1), init=KMAX)
        tiles = Signal(32, init=1)
        # TILES - 1, K_REGIONS - 1 and ROW_GROUPS - 1 as registers written with the sizes (the counters
        # compare with them: no subtractor on their paths; K_REGIONS - 1 -> the replay's column
        # compare -> its enables was fss-axi's critical path). Written in the same cycle
        # as the size, so a START in the very next cycle already sees them (a copy registered from
        # the size a cycle later did not: the formal cover of a result beat found the stale run)
        tiles_m1 = Signal(32, init=0)
        kr_m1 = Signal(range(max(2, KMAX)), init=KMAX - 1)
        rg_m1 = Signal(range(max(2, GMAX)), init=GMAX - 1)
        busy, done, loaded = Signal(name="busy"), Signal(name="done"), Signal(name="loaded")
        err = Signal(len(ERROR))
        run_cycles, out_beats = Signal(32), Signal(32)
        m.d.comb += [gemm.cfg_row_groups.eq(rg), gemm.cfg_k_regions.eq(kr)]

        # --- AXI4-Lite write decode (comb), so every block below can see the commands ----------
        wr = axil.wr
        widx, wdata = axil.widx, axil.wdata
        ctrl_wr = wr & (widx == C.word)
        clear_err = ctrl_wr & wdata[C.CLEAR_ERROR.bit]
        soft = ctrl_wr & wdata[C.SOFT_RESET.bit]
        cmd_start = ctrl_wr & wdata[C.START.bit] & ~soft
        cmd_load = ctrl_wr & wdata[C.LOAD.bit] & ~soft
        start = Signal()
        m.d.comb += [start.eq(cmd_start & ~cmd_load & ~busy & loaded), eng_rst.eq(start | soft)]
        with m.If(clear_err):  # first: errors raised in the same cycle below win
            m.d.sync += err.eq(0)

        # --- weight loader: 32-bit words -> beats -> store ---------------------------------------
        store = Memory(shape=unsigned(p.weight_beat_bits), depth=BEATS, init=[])
        m.submodules.wstore = store
        wp, rp = store.write_port(), store.read_port()
        shreg = Signal(32 * NW)                      # words shift in from the top: first word ends lowest
        wide = Cat(shreg[32:], self.s_axis_w_tdata)
        wcnt = Signal(range(max(2, NW)))
        lc, lg = Signal(range(max(2, KMAX))), Signal(range(max(2, GMAX)))
        waddr = Signal(range(max(2, BEATS)))
        w_words = Signal(range(BEATS * NW + 1))
        m.d.comb += self.s_axis_w_tready.eq(1)
        w_in = self.s_axis_w_tvalid
        take = w_in & ~loaded
        beat_done = take & (wcnt == NW - 1)
        m.d.comb += [wp.addr.eq(waddr), wp.data.eq(wide[:p.weight_beat_bits]), wp.en.eq(beat_done)]
        with m.If(w_in & loaded):
            m.d.sync += err[E.EXTRA_WEIGHTS.bit].eq(1)
        with m.If(take):
            m.d.sync += [shreg.eq(wide), w_words.eq(w_words + 1), wcnt.eq(Mux(beat_done, 0, wcnt + 1))]
            with m.If(beat_done):
                m.d.sync += waddr.eq(waddr + 1)
                with m.If(lc == kr_m1):
                    m.d.sync += lc.eq(0)
                    with m.If(lg == rg_m1):
                        m.d.sync += [lg.eq(0), loaded.eq(1)]
                    with m.Else():
                        m.d.sync += lg.eq(lg + 1)
                with m.Else():
                    m.d.sync += lc.eq(lc + 1)

        def restart_load():
            m.d.sync += [wcnt.eq(0), lc.eq(0), lg.eq(0), waddr.eq(0), w_words.eq(0), loaded.eq(0)]

        # --- weight replay: the store read ahead of the engine ----------------------------------
        issuing, rd_valid = Signal(), Signal()
        rc, rgc = Signal(range(max(2, KMAX))), Signal(range(max(2, GMAX)))
        raddr = Signal(range(max(2, BEATS)))
        rtile = Signal(32)
        # a skid buffer cuts the engine's weight ready (its stall net) off the replay counters
        # (reset with the engine: a START or SOFT_RESET leaves no word of the last run in it)
        wskid = SkidBuffer(len(gemm.w.payload.as_value()))
        m.submodules.wskid = ResetInserter(eng_rst)(wskid)
        # the store's read data is registered (rq) before the skid buffer: a block RAM output
        # drives only flip-flops (its clock-to-out into the engine's first stage was a critical
        # path of fss-axi); the replay reads two beats ahead of the engine
        rq_valid = Signal()
        rq_data = Signal(len(rp.data), reset_less=True)
        rq_adv = ~rq_valid | wskid.i.ready
        radv = ~rd_valid | rq_adv
        m.d.comb += [rp.addr.eq(raddr), rp.en.eq(radv & issuing),
                     wskid.i.valid.eq(rq_valid), wskid.i.payload.eq(rq_data),
                     gemm.w.valid.eq(wskid.o.valid), gemm.w.payload.as_value().eq(wskid.o.payload),
                     wskid.o.ready.eq(gemm.w.ready)]
        with m.If(rq_adv):
            m.d.sync += [rq_valid.eq(rd_valid), rq_data.eq(rp.data)]
        with m.If(radv):
            m.d.sync += rd_valid.eq(issuing)
            with m.If(issuing):
                with m.If(rc == kr_m1):
                    m.d.sync += rc.eq(0)
                    with m.If(rgc == rg_m1):
                        m.d.sync += [rgc.eq(0), raddr.eq(0), rtile.eq(rtile + 1)]
                        with m.If(rtile == tiles_m1):
                            m.d.sync += issuing.eq(0)
                    with m.Else():
                        m.d.sync += [rgc.eq(rgc + 1), raddr.eq(raddr + 1)]
                with m.Else():
                    m.d.sync += [rc.eq(rc + 1), raddr.eq(raddr + 1)]

        # --- activations: K_REGIONS beats per tile, TILES tiles, then the gate closes ----------
        x_more = Signal()
        xc, xtile = Signal(range(max(2, KMAX))), Signal(32)
        x_fire = gemm.x.valid & gemm.x.ready
        m.d.comb += [gemm.x.valid.eq(self.s_axis_x_tvalid & x_more),
                     gemm.x.payload.as_value().eq(self.s_axis_x_tdata),
                     self.s_axis_x_tready.eq(gemm.x.ready & x_more)]
        with m.If(x_fire):
            with m.If(xc == kr_m1):
                m.d.sync += [xc.eq(0), xtile.eq(xtile + 1)]
                with m.If(xtile == tiles_m1):
                    m.d.sync += x_more.eq(0)
            with m.Else():
                m.d.sync += xc.eq(xc + 1)

        # --- results: ROW_GROUPS beats per tile (tlast), the run ends with the last one ---------
        yg, ytile = Signal(range(max(2, GMAX))), Signal(32)
        y_fire = gemm.y.valid & gemm.y.ready
        ylast = yg == rg_m1
        m.d.comb += [self.m_axis_y_tvalid.eq(gemm.y.valid), self.m_axis_y_tdata.eq(gemm.y.payload.as_value()),
                     self.m_axis_y_tlast.eq(ylast), gemm.y.ready.eq(self.m_axis_y_tready)]
        with m.If(y_fire):
            with m.If(ylast):
                m.d.sync += [yg.eq(0), ytile.eq(ytile + 1)]
                with m.If(ytile == tiles_m1):
                    m.d.sync += [busy.eq(0), done.eq(1)]
            with m.Else():
                m.d.sync += yg.eq(yg + 1)
        count_saturating(m, ((run_cycles, busy), (out_beats, y_fire)))

        # --- AXI4-Lite slave ----------------------------------------------------------------------
        bresp_ok = Signal()                     # the response depends on the data and the state
        m.d.comb += axil.w_ok.eq(bresp_ok)

        def size_write(reg, minus_one, lo_ok, hi_ok, restarts):
            with m.If(busy):
                m.d.sync += err[E.BUSY.bit].eq(1)
            with m.Elif(~(lo_ok & hi_ok)):
                m.d.sync += err[E.BAD_SIZE.bit].eq(1)
            with m.Else():
                m.d.comb += bresp_ok.eq(1)
                m.d.sync += [reg.eq(wdata), minus_one.eq(wdata - 1)]
                if restarts:
                    restart_load()

        with m.If(wr):
            with m.Switch(widx):
                with m.Case(C.word):
                    m.d.comb += bresp_ok.eq(1)
                    with m.If((cmd_start | cmd_load) & busy):
                        m.d.sync += err[E.BUSY.bit].eq(1)
                    with m.Elif(cmd_start & (~loaded | cmd_load)):
                        m.d.sync += err[E.START_UNLOADED.bit].eq(1)
                    with m.If(cmd_load & ~busy):
                        restart_load()
                with m.Case(MAP.ROW_GROUPS.word):
                    size_write(rg, rg_m1, wdata != 0, wdata <= GMAX, True)
                with m.Case(MAP.K_REGIONS.word):
                    size_write(kr, kr_m1, wdata != 0, wdata <= KMAX, True)
                with m.Case(MAP.TILES.word):
                    size_write(tiles, tiles_m1, wdata != 0, 1, False)
                with m.Default():
                    m.d.sync += err[E.BAD_ADDRESS.bit].eq(1)

        regs = {"ROW_GROUPS": rg, "K_REGIONS": kr, "TILES": tiles,
                "STATUS": MAP.STATUS.cat(BUSY=busy, DONE=done, ERROR=err.any(), LOADED=loaded,
                                         LOADING=~loaded & (w_words != 0)), "ERROR": err,
                "CYCLES": gemm.cycles, "MAC_BEATS": gemm.mac_beats, "STALL_OUT": gemm.stall_out,
                "STARVE_W": gemm.starve_w, "RUN_CYCLES": run_cycles, "OUT_BEATS": out_beats,
                "W_WORDS": w_words, **config_words(p)}
        m.d.comb += [getattr(axil, f"r_{name}").eq(val) for name, val in regs.items()]
        with m.If(axil.bad_read):
            m.d.sync += err[E.BAD_ADDRESS.bit].eq(1)

        # --- START: the run's counters and sequencers (after the blocks above: it wins) ----------
        with m.If(start):
            m.d.sync += [busy.eq(1), done.eq(0), run_cycles.eq(0), out_beats.eq(0),
                         issuing.eq(1), rd_valid.eq(0), rq_valid.eq(0), rc.eq(0), rgc.eq(0), raddr.eq(0), rtile.eq(0),
                         x_more.eq(1), xc.eq(0), xtile.eq(0), yg.eq(0), ytile.eq(0)]

        # --- SOFT_RESET: last, so it overrides everything but ERROR, the sizes and AXI4-Lite ------
        with m.If(soft):
            restart_load()
            m.d.sync += [busy.eq(0), done.eq(0), run_cycles.eq(0), out_beats.eq(0), shreg.eq(0),
                         issuing.eq(0), rd_valid.eq(0), rq_valid.eq(0), rc.eq(0), rgc.eq(0), raddr.eq(0), rtile.eq(0),
                         x_more.eq(0), xc.eq(0), xtile.eq(0), yg.eq(0), ytile.eq(0)]
        return m

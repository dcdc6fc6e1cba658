"""Board top of the BBS SpMxV engine: a UART host link into on-chip memories, the engine and its
counters, so a laptop can drive it (``hwcosim board run bbs-spmxv --port /dev/ttyUSB0``).

A UART at a standard rate carries a few tens of kilobytes per second; the engine takes one weight
beat of ``P * B`` CSB lanes per cycle. So the host never streams into the engine directly: it
loads the CSB weights once into a weight memory and each vector into a vector memory (both BRAM
or distributed RAM, as the synthesis tool maps them), then a START replays both into
:class:`hwcosim.hdl.bbs.spmxv.SpMxV` at full rate and the results land in a result memory, from which the
host reads them. The engine's own counters and a START-to-done cycle count therefore measure the
engine, not the link.

Blocks: :class:`hwcosim.hdl.common.uart.UartRx` / :class:`~hdl.common.uart.UartTx` (8N1,
``divisor`` clocks per bit) -> :class:`hwcosim.hdl.common.host_bridge.HostBridge` (the protocol of
:mod:`hwcosim.models.hostlink`) -> an AXI4-Lite register file (:data:`REGISTER_MAP`), AXI4-Stream output
channel 0 (weight words), 1 (vector words) and input channel 0 (result words).

Word layouts (32-bit words, least significant word first, each beat padded to whole words):

- weights: ``weight_beats`` beats of ``P*B*(W+I)`` bits
  (:func:`hwcosim.models.bbs.spmxv.pack_weight_beats`), ``WEIGHT_WORDS`` words in all;
- a vector: ``bank_size`` beats of ``B*XW`` bits (:func:`~models.bbs.spmxv.pack_vector_beats`),
  ``VECTOR_WORDS`` words;
- results: ``row_groups`` beats of ``P*OW`` bits (:func:`~models.bbs.spmxv.unpack_output_beats`),
  ``RESULT_WORDS`` words, readable once a run is done (STATUS.done), from the first word after
  every START.

Register map: :data:`REGISTER_MAP` (each register's fields, access and reset are defined there once;
the docs table, the host constants and the decode below are derived from it).

A vector word while the vector memory is full starts the next vector (the loaded one is
replaced); a vector may be reloaded between runs while the weights stay.
"""

from __future__ import annotations

from amaranth import Elaboratable, Module
from amaranth.hdl import Array, Cat, ResetInserter, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.bbs.spmxv import SpMxV
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile
from hwcosim.hdl.common.host_bridge import HostBoardTop, uart_bridge
from hwcosim.hdl.common.registers import Field, Register, RegisterMap
from hwcosim.models.bbs.spmxv import BBSParams

__all__ = ["SpMxVHost", "REGISTER_MAP", "REGS", "CTRL", "STATUS", "ERROR", "words_per_beat",
           "board_top"]

REGISTER_MAP = RegisterMap(
    Register("CTRL", 0x00, "w", "commands; reads 0", fields=(
        Field("START", 0, "w1", 0, "replay the weights and the loaded vector into the engine (needs weights and a "
                                   "vector loaded; ignored while busy)"),
        Field("CLEAR_ERROR", 1, "w1", 0, "clear ERROR"),
        Field("RELOAD", 2, "w1", 0, "reset the engine, the memories' fill state and the counters (ERROR kept): the "
                                    "next weight and vector words start new loads"))),
    Register("STATUS", 0x04, "r", "run and load state", fields=(
        Field("BUSY", 0, "r", 0, "a run is in progress"),
        Field("DONE", 1, "r", 0, "the last run's results are all in the result memory"),
        Field("ERROR", 2, "r", 0, "any ERROR bit is set"),
        Field("WEIGHTS", 3, "r", 0, "a full set of weight words is loaded"),
        Field("VECTOR", 4, "r", 0, "a vector is loaded"))),
    Register("ERROR", 0x08, "r", "error flags, sticky until CTRL.CLEAR_ERROR", fields=(
        Field("START_UNLOADED", 0, "rc", 0, "START without weights or vector"),
        Field("EXTRA_WEIGHTS", 1, "rc", 0, "weight words beyond a full set (dropped)"),
        Field("LOAD_WHILE_BUSY", 2, "rc", 0, "a load word while busy (dropped)"),
        Field("BAD_ADDRESS", 3, "rc", 0, "access outside the map or write to a read-only register"))),
    Register("CYCLES", 0x0C, "r", "engine cycles holding work since RELOAD (SpMxV.cycles)"),
    Register("MAC_BEATS", 0x10, "r", "weight beats consumed since RELOAD (SpMxV.mac_beats)"),
    Register("STALL_OUT", 0x14, "r", "cycles the result was refused (SpMxV.stall_out)"),
    Register("STARVE_W", 0x18, "r", "cycles a loaded vector waited for a weight beat (SpMxV.starve_w)"),
    Register("RUN_CYCLES", 0x1C, "r", "cycles from the last START to its last result written"),
    Register("CONFIG", 0x20, "r", "identification of the build", fields=(
        Field("P", (7, 0), "r", "pes", "processing elements"),
        Field("B", (15, 8), "r", "banks", "banks per row"),
        Field("K", (23, 16), "r", "k", "nonzeros kept per bank"))),
    Register("SHAPE", 0x24, "r", "matrix shape of the build", fields=(
        Field("ROWS", (15, 0), "r", "rows", "matrix rows"),
        Field("COLS", (31, 16), "r", "cols", "matrix columns"))),
    Register("WEIGHT_WORDS", 0x28, "r", "32-bit words of a weight load"),
    Register("VECTOR_WORDS", 0x2C, "r", "32-bit words of a vector"),
    Register("RESULT_WORDS", 0x30, "r", "32-bit words of a result"),
    title="BBS SpMxV board top",
)
REGS = REGISTER_MAP.addresses()
CTRL = REGISTER_MAP.masks("CTRL")
STATUS = REGISTER_MAP.masks("STATUS")
ERROR = REGISTER_MAP.masks("ERROR")
#: bridge channels
CH_WEIGHTS, CH_VECTOR, CH_RESULTS = 0, 1, 0


def words_per_beat(bits: int) -> int:
    return -(-bits // 32)


def beat_bits(p: BBSParams) -> dict[str, int]:
    """Bits of a weight, vector and result beat."""
    return {"w": p.pes * p.banks * p.lane_width, "x": p.banks * p.vec_fmt.width, "y": p.pes * p.out_fmt.width}


class _Loader(Elaboratable):
    """32-bit words -> beats of ``bits`` bits written at consecutive addresses of ``port``."""

    def __init__(self, bits: int, port):
        self.nw, self.bits, self.port = words_per_beat(bits), bits, port
        self.valid, self.word, self.wen = Signal(), Signal(32), Signal()
        self.addr = Signal.like(port.addr)
        self.clear = Signal()
        self.wcnt = Signal(range(max(self.nw, 2)))

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(32 * self.nw)
        wide = Cat(shreg[32:], self.word) if self.nw > 1 else self.word
        m.d.comb += [self.port.addr.eq(self.addr), self.port.data.eq(wide[:self.bits]), self.port.en.eq(0)]
        with m.If(self.valid):
            if self.nw > 1:
                m.d.sync += shreg.eq(wide)
            with m.If(self.wcnt == self.nw - 1):
                m.d.sync += self.wcnt.eq(0)
                m.d.comb += [self.port.en.eq(1), self.wen.eq(1)]
            with m.Else():
                m.d.sync += self.wcnt.eq(self.wcnt + 1)
        with m.If(self.clear):
            m.d.sync += self.wcnt.eq(0)
        return m


class _Replay(Elaboratable):
    """Reads ``n`` consecutive entries of a memory (``port``, one cycle of read latency) onto a
    valid/ready stream, one per cycle when taken."""

    def __init__(self, port, n: int):
        self.port, self.n = port, n
        self.start, self.ready, self.valid = Signal(), Signal(), Signal()
        self.data = port.data

    def elaborate(self, platform):
        m = Module()
        addr = Signal(range(self.n + 1), init=self.n)
        adv = ~self.valid | self.ready
        m.d.comb += [self.port.addr.eq(addr), self.port.en.eq(adv)]
        with m.If(adv):
            with m.If(addr != self.n):
                m.d.sync += [self.valid.eq(1), addr.eq(addr + 1)]
            with m.Else():
                m.d.sync += self.valid.eq(0)
        with m.If(self.start):
            m.d.sync += [addr.eq(0), self.valid.eq(0)]
        return m


class SpMxVHost(wiring.Component):
    """The SpMxV engine behind memories, a register file and a UART host bridge.

    Parameters
    ----------
    params : BBSParams
    divisor : int
        UART clock cycles per bit (:func:`hwcosim.models.hostlink.divisor_for`).
    timeout : int
        The bridge's watchdog on stream words, in cycles.

    Attributes
    ----------
    rx : In(1), tx : Out(1)
        The UART lines (8N1).
    leds : Out(8)
        busy, done, error, weights loaded, vector loaded, RX framing error or overrun seen.
    """

    def __init__(self, params: BBSParams, divisor: int, timeout: int = 1 << 24):
        if not isinstance(params, BBSParams):
            raise TypeError(f"SpMxVHost takes a models.bbs.spmxv.BBSParams, not {params!r}")
        self.params, self.divisor, self.timeout = params, divisor, timeout
        b = beat_bits(params)
        self.weight_words = params.weight_beats * words_per_beat(b["w"])
        self.vector_words = params.vector_beats * words_per_beat(b["x"])
        self.result_words = params.row_groups * words_per_beat(b["y"])
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        p = self.params
        bits = beat_bits(p)
        NY = words_per_beat(bits["y"])
        br, line_error = uart_bridge(m, self, self.divisor, out_channels=2, in_channels=1, timeout=self.timeout)
        m.submodules.regs = rf = AxiLiteRegFile(REGISTER_MAP, addr_width=8)
        for name in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid", "rready"):
            m.d.comb += getattr(rf, f"s_axil_{name}").eq(getattr(br, f"m_axil_{name}"))
        for name in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp", "rvalid"):
            m.d.comb += getattr(br, f"m_axil_{name}").eq(getattr(rf, f"s_axil_{name}"))

        reload = Signal()
        spm = SpMxV(p)
        m.submodules.spmxv = ResetInserter(reload)(spm)
        wmem = Memory(shape=unsigned(bits["w"]), depth=p.weight_beats, init=[])
        xmem = Memory(shape=unsigned(bits["x"]), depth=p.vector_beats, init=[])
        ymem = Memory(shape=unsigned(bits["y"]), depth=p.row_groups, init=[])
        m.submodules.wmem, m.submodules.xmem, m.submodules.ymem = wmem, xmem, ymem
        wwp, wrp = wmem.write_port(), wmem.read_port()
        xwp, xrp = xmem.write_port(), xmem.read_port()
        ywp, yrp = ymem.write_port(), ymem.read_port()

        busy, done = Signal(), Signal()
        err = Signal(len(REGISTER_MAP.ERROR.fields))
        run_cycles = Signal(32)
        start_run = Signal()

        # --- loads: weights on channel 0, vectors on channel 1 ----------------------------------
        m.submodules.wload = wl = _Loader(bits["w"], wwp)
        m.submodules.xload = xl = _Loader(bits["x"], xwp)
        wbeats = Signal(range(p.weight_beats + 1))
        xbeats = Signal(range(p.vector_beats + 1))
        w_loaded = wbeats == p.weight_beats
        x_loaded = (xbeats == p.vector_beats) & (xl.wcnt == 0)
        m.d.comb += [br.m_axis0_tready.eq(1), br.m_axis1_tready.eq(1),
                     wl.word.eq(br.m_axis0_tdata), xl.word.eq(br.m_axis1_tdata)]
        w_in, x_in = br.m_axis0_tvalid, br.m_axis1_tvalid
        e = REGISTER_MAP.ERROR
        with m.If((w_in | x_in) & busy):
            m.d.sync += err[e.LOAD_WHILE_BUSY.bit].eq(1)
        with m.If(w_in & ~busy & w_loaded):
            m.d.sync += err[e.EXTRA_WEIGHTS.bit].eq(1)
        m.d.comb += [wl.valid.eq(w_in & ~busy & ~w_loaded), wl.addr.eq(wbeats)]
        with m.If(wl.wen):
            m.d.sync += wbeats.eq(wbeats + 1)
        x_idx = Signal.like(xbeats)
        m.d.comb += [x_idx.eq(xbeats), xl.valid.eq(x_in & ~busy), xl.addr.eq(x_idx)]
        with m.If(xbeats == p.vector_beats):
            m.d.comb += x_idx.eq(0)
        with m.If(xl.wen):
            m.d.sync += xbeats.eq(x_idx + 1)

        # --- a run: replay the vector and the weights into the engine, results into ymem ---------
        m.submodules.xrep = xr = _Replay(xrp, p.vector_beats)
        m.submodules.wrep = wr = _Replay(wrp, p.weight_beats)
        m.d.comb += [xr.start.eq(start_run | reload), wr.start.eq(start_run | reload),
                     spm.x.valid.eq(xr.valid & busy), spm.x.payload.as_value().eq(xr.data),
                     xr.ready.eq(spm.x.ready & busy),
                     spm.w.valid.eq(wr.valid & busy), spm.w.payload.as_value().eq(wr.data),
                     wr.ready.eq(spm.w.ready & busy)]
        ycount = Signal(range(p.row_groups + 1))
        m.d.comb += [spm.y.ready.eq(1), ywp.addr.eq(ycount), ywp.data.eq(spm.y.payload.as_value()),
                     ywp.en.eq(spm.y.valid & busy)]
        with m.If(spm.y.valid & busy):
            m.d.sync += ycount.eq(ycount + 1)
            with m.If(ycount == p.row_groups - 1):
                m.d.sync += [busy.eq(0), done.eq(1)]
        with m.If(busy):
            m.d.sync += run_cycles.eq(run_cycles + 1)

        # --- results out on input channel 0, once the run is done -------------------------------
        rb = Signal(range(p.row_groups + 1))
        rw = Signal(range(max(NY, 2)))
        fresh = Signal()
        taken = br.s_axis0_tvalid & br.s_axis0_tready
        padded = Signal(32 * NY)
        m.d.comb += [yrp.addr.eq(rb), yrp.en.eq(1), padded.eq(yrp.data),
                     br.s_axis0_tvalid.eq(~busy & fresh & (rb < ycount)),
                     br.s_axis0_tdata.eq(Array(padded[32 * i:32 * i + 32] for i in range(NY))[rw])]
        beat_done = taken & (rw == NY - 1)
        m.d.sync += fresh.eq(~busy & ~beat_done & ~start_run)
        with m.If(taken):
            m.d.sync += rw.eq(rw + 1)
            with m.If(rw == NY - 1):
                m.d.sync += [rw.eq(0), rb.eq(rb + 1)]

        # --- control ---------------------------------------------------------------------------
        c = REGISTER_MAP.CTRL
        ctrl = rf.wr & (rf.widx == c.word)
        m.d.comb += [rf.w_ok.eq(rf.w_writable), reload.eq(ctrl & rf.wdata[c.RELOAD.bit])]
        with m.If(rf.wr & ~rf.w_writable):
            m.d.sync += err[e.BAD_ADDRESS.bit].eq(1)
        with m.If(rf.bad_read):
            m.d.sync += err[e.BAD_ADDRESS.bit].eq(1)
        with m.If(ctrl & rf.wdata[c.CLEAR_ERROR.bit]):
            m.d.sync += err.eq(0)
        with m.If(reload):
            m.d.sync += [wbeats.eq(0), xbeats.eq(0), busy.eq(0), done.eq(0), ycount.eq(0), rb.eq(0), rw.eq(0),
                         run_cycles.eq(0)]
            m.d.comb += [wl.clear.eq(1), xl.clear.eq(1)]
        with m.Elif(ctrl & rf.wdata[c.START.bit] & ~busy):
            with m.If(~w_loaded | ~x_loaded):
                m.d.sync += err[e.START_UNLOADED.bit].eq(1)
            with m.Else():
                m.d.comb += start_run.eq(1)
                m.d.sync += [busy.eq(1), done.eq(0), ycount.eq(0), rb.eq(0), rw.eq(0), run_cycles.eq(0)]

        regs = {"STATUS": REGISTER_MAP.STATUS.cat(BUSY=busy, DONE=done, ERROR=err.any(), WEIGHTS=w_loaded,
                                                   VECTOR=x_loaded), "ERROR": err,
                "CYCLES": spm.cycles, "MAC_BEATS": spm.mac_beats, "STALL_OUT": spm.stall_out,
                "STARVE_W": spm.starve_w, "RUN_CYCLES": run_cycles,
                "CONFIG": REGISTER_MAP.CONFIG.pack(P=p.pes, B=p.banks, K=p.k),
                "SHAPE": REGISTER_MAP.SHAPE.pack(ROWS=p.rows, COLS=p.cols),
                "WEIGHT_WORDS": self.weight_words, "VECTOR_WORDS": self.vector_words,
                "RESULT_WORDS": self.result_words}
        m.d.comb += [getattr(rf, f"r_{name}").eq(v) for name, v in regs.items()]
        m.d.comb += self.leds.eq(Cat(busy, done, err.any(), w_loaded, x_loaded, line_error))
        return m


def board_top(params: BBSParams, baud: int = 115200, pll=None) -> HostBoardTop:
    """The board top (registered in the design's ``board_tops``): :class:`SpMxVHost` on the board's
    UART 0 and first six LEDs, clocked by the oscillator or an ECP5 PLL."""
    return HostBoardTop(lambda divisor: SpMxVHost(params, divisor), baud, pll, n_leds=6)

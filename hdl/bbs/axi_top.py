"""Board-ready top level of the BBS LSTM engine: AXI4-Stream data, AXI4 memory-mapped weight
fetch, AXI4-Lite control and status.

Wraps :class:`hwcosim.hdl.bbs.lstm.LSTMLayer` for a shell (Vivado block design, Platform Designer):

- ``s_axis_w`` (AXI4-Stream, 32-bit ``tdata``): the weights, then the biases, as 32-bit words,
  least significant word first. ``rows/P * k`` weight beats of ``P*B*(W+I)`` bits (CSB words,
  :func:`hwcosim.models.bbs.spmxv.pack_weight_beats`) take ``ceil(P*B*(W+I)/32)`` words each; then ``4H/P``
  bias beats of ``P * GW`` bits take ``ceil(P*GW/32)`` words each
  (:func:`hwcosim.models.bbs.lstm.pack_bias_beats`): ``LOAD_WORDS`` words in all. Load once after a
  reset (hardware or SOFT_RESET); ``STATUS.loaded`` rises when the last bias word is in. Words
  arriving after that are dropped and set ``ERROR.extra_weights``. ``tready`` is low while a
  ``LOAD_MM`` fetch owns the loader.
- ``m_axi`` (AXI4 read channels only, ``mm_data_width``-bit data, ``mm_addr_width``-bit address,
  ID 0, ``ARCACHE`` = 0b0011, ``ARPROT`` = 0): the same ``LOAD_WORDS`` words, fetched from memory
  at ``WADDR`` by ``CTRL.LOAD_MM`` (:class:`hwcosim.hdl.common.axi_reader.AxiReader`: INCR bursts of up
  to ``mm_max_burst`` beats, ``mm_max_outstanding`` in flight, none across 4 KiB; a watchdog of
  ``mm_timeout_cycles``). The words lie in memory in stream order, word ``i`` at byte
  ``WADDR + 4 i`` (little-endian lanes); the buffer is ``ceil(LOAD_WORDS * 32 / mm_data_width)``
  bus beats. The loader takes one 32-bit word per cycle from either source.
- ``s_axis_x`` (AXI4-Stream): one beat per time step, ``I`` inputs of ``XW`` bits at
  ``i * XW`` (``tdata`` rounded up to bytes), accepted only while a run is busy.
- ``m_axis_h`` (AXI4-Stream): ``H / U`` beats per step of ``U = P/4`` hidden values at
  ``u * XW``; ``tlast`` on the last beat of every step.
- ``s_axil`` (AXI4-Lite, 32-bit data, 8-bit byte address, bits 1:0 ignored; ``wstrb`` ignored;
  the write address and data are taken together). Responses are OKAY, except SLVERR for an
  access outside the register map and for a write to a read-only register (below).

Register map: :data:`REGISTER_MAP` (byte addresses 0x00..0x44; 0x00..0x28 as in the stream-only
version), one typed definition (:class:`hwcosim.hdl.common.registers.RegisterMap`: every register
and every field with its bits, access, reset value and meaning) from which the RTL decode below,
the host and testbench constants (:data:`REGS`, :data:`CTRL`, :data:`STATUS`, :data:`ERROR`,
:data:`WRITABLE`), the formal harness and the design's documentation table are derived.

Every address outside the map (up to 0xFC) is unmapped: a read answers SLVERR with data 0, a
write answers SLVERR and changes nothing. A write to a read-only register also answers SLVERR
and changes nothing; CTRL is write-only but mapped (a read answers OKAY, 0). Both set
ERROR.BAD_ADDRESS. A write's response does not depend on the value or on the state (a SEQ_LEN
write while busy is ignored, OKAY), so SLVERR means exactly "no such register".

A START with an error condition does not start a run. The counters CYCLES, MAC_BEATS, STEPS and
STALL_OUT saturate at 2**32 - 1 and count from the last reset of the layer: hardware reset,
SOFT_RESET, an accepted LOAD_MM, or a read error.

Faults and the state they leave (every case is exercised in ``tests/bbs/test_bbs_axi_faults.py``):

- **Read error** (``RRESP`` = SLVERR or DECERR on any beat of a LOAD_MM fetch): ERROR.MM_READ;
  MM_ERR_RESP and MM_ERR_ADDR record the first failing beat. The read master issues no further
  burst and drains the bursts in flight (``mm_busy`` until the last beat). The layer is cleared
  at once: ``loaded`` = 0 (the words taken before the error are discarded), engine idle, a START
  is refused with ERROR.START_UNLOADED. Recovery: CLEAR_ERROR, LOAD_MM (from a good buffer), START.
- **Long stalls** (``s_axis_w``/``s_axis_x`` idle, or ``m_axis_h`` refused for any number of
  cycles; ``ARREADY`` or ``RVALID`` low for fewer than ``mm_timeout_cycles`` cycles at a time):
  nothing is lost or reordered and no timeout fires; the stall shows in LOAD_CYCLES,
  RUN_CYCLES and STALL_OUT.
- **Read timeout** (the memory stops answering: a LOAD_MM fetch, or the drain after a fault or
  SOFT_RESET, waits ``mm_timeout_cycles`` cycles, default ``2**16``, with no AR handshake and no
  R beat): ERROR.MM_TIMEOUT, MM_ERR_RESP = 4, MM_ERR_ADDR the first beat not received (unless a read
  error is already on record); the layer is cleared as for a read error (``loaded`` = 0,
  LOAD_CYCLES = 0). The read master issues nothing more and ``mm_busy`` falls in the next
  cycle; bursts still in flight cannot be cancelled (AXI), so ``mm_stale`` stays high until
  their beats come and are discarded (a burst presented and not accepted stays presented).
  Recovery: CLEAR_ERROR, LOAD_MM, START, as for a read error; the LOAD_MM may be given at once
  (its bursts go behind the stale ones and their beats come after the stale beats, which are
  dropped) and succeeds once the memory answers again. If the memory side is reset and forgets
  the stale bursts, reset this block with it (hardware reset).
- **SOFT_RESET** (any time): the run is abandoned (busy = 0, done = 0, ``s_axis_x_tready`` low,
  a step in flight on ``m_axis_h`` is dropped, possibly without its ``tlast``), the layer is
  cleared (loaded = 0, counters 0, stream loader empty: the next ``s_axis_w`` word is word 0), a
  LOAD_MM fetch is stopped and its bursts in flight are drained (``mm_busy`` until then; a new
  LOAD_MM meanwhile is refused with ERROR.LOAD_REFUSED). SEQ_LEN, NUM_SEQ, WADDR, ERROR and MM_ERR_*
  keep their values (LOAD_CYCLES too, unless a LOAD_MM was abandoned: then 0); ERROR.ABANDONED
  records that work was abandoned. (The layer's own registers are cleared in the cycle after the
  command, from a register; in that cycle its outputs read as cleared and ``m_axis_h`` is idle.)
  Recovery: reset the stream DMA channels with the block (words still in flight on ``s_axis_w`` would start a
  new load), wait for ``mm_busy`` = 0, reload (stream or LOAD_MM), START.
- **Hardware reset** (``rst``, synchronous, active high; the AXI peers are reset with it): every
  register as at power-up (ERROR = 0: the fault cannot be reported), weights unloaded.

Latency and throughput are those of :class:`hwcosim.hdl.bbs.lstm.LSTMLayer`: the wrapper adds no
register stage on ``x`` or ``h`` (``tvalid``/``tready`` pass through gated by ``busy``), so the
cycle model :class:`hwcosim.models.bbs.lstm.LSTMCycleModel` holds from the first ``s_axis_x`` beat.
A LOAD_MM moves one word per cycle when memory keeps up (LOAD_CYCLES ~ LOAD_WORDS + the read
latency of the first burst). Resources beyond the layer: one ``ceil(P*B*(W+I)/32) * 32``-bit
deserialiser register, a ``mm_data_width``-bit word splitter, the read master (three
address-wide registers, two counters and a 16-bit watchdog), the register file and counters.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.bbs.lstm import LSTMLayer
from hwcosim.hdl.common.axi_reader import DEFAULT_TIMEOUT, ERR_TIMEOUT, AxiReader
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, axil_members, connect_axil
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.hdl.common.registers import Field, Register, RegisterMap
from hwcosim.hdl.common.skid import RegisterSlice
from hwcosim.models.bbs.lstm import LSTMParams
from hwcosim.models.errors import UsageError

__all__ = ["LSTMAxiTop", "REGISTER_MAP", "REGS", "CTRL", "STATUS", "ERROR", "WRITABLE", "bytes_up"]

#: The AXI4-Lite register map: the one definition of every register and field (see the module docstring).
REGISTER_MAP = RegisterMap(
    Register("CTRL", 0x00, "w", "commands; reads 0 (OKAY)", fields=(
        Field("START", 0, "w1", 0, "run NUM_SEQ sequences of SEQ_LEN steps (ignored while busy)"),
        Field("CLEAR_ERROR", 1, "w1", 0, "clear ERROR and MM_ERR_* (applied before the other bits of the same "
                                          "write)"),
        Field("LOAD_MM", 2, "w1", 0, "fetch the weights and biases over m_axi from WADDR (a START in the same "
                                      "write is ignored)"),
        Field("SOFT_RESET", 3, "w1", 0, "abandon the run and clear the layer and the loader (the other bits of "
                                         "the same write, except CLEAR_ERROR, are ignored)"),
    )),
    Register("SEQ_LEN", 0x04, "rw", "steps per sequence (16 bits, >= 1); writes while busy are ignored", fields=(
        Field("SEQ_LEN", (15, 0), "rw", 0, "steps per sequence"),)),
    Register("NUM_SEQ", 0x08, "rw", "sequences per run (16 bits, >= 1); writes while busy are ignored", fields=(
        Field("NUM_SEQ", (15, 0), "rw", 0, "sequences per run"),)),
    Register("STATUS", 0x0C, "r", "run, load and read-master state", fields=(
        Field("BUSY", 0, "r", 0, "a run is in progress"),
        Field("DONE", 1, "r", 0, "set when a run's last hidden beat leaves; cleared by START, an accepted LOAD_MM "
                                 "and SOFT_RESET"),
        Field("ERROR", 2, "r", 0, "any ERROR bit is set"),
        Field("LOADED", 3, "r", 0, "every weight and bias word is in and a LOAD_MM fetch has ended (its read "
                                   "master is idle)"),
        Field("LOADING", 4, "r", 0, "a LOAD_MM fetch is running, or some stream words of a load are in, not all"),
        Field("MM_BUSY", 5, "r", 0, "the read master has bursts in flight or presented (it stays high while the "
                                    "bursts in flight at a fault are drained)"),
        Field("MM_STALE", 6, "r", 0, "bursts abandoned by a read timeout are still outstanding: their late beats "
                                     "will be discarded (a LOAD_MM meanwhile is accepted and issues behind them)"),
    )),
    Register("ERROR", 0x10, "r", "error flags, sticky until CTRL.CLEAR_ERROR (kept by SOFT_RESET)", fields=(
        Field("START_UNLOADED", 0, "rc", 0, "START before the weights were loaded"),
        Field("BAD_SIZE", 1, "rc", 0, "START with SEQ_LEN or NUM_SEQ = 0"),
        Field("EXTRA_WEIGHTS", 2, "rc", 0, "weight words after a complete load (dropped)"),
        Field("MM_READ", 3, "rc", 0, "AXI read error (SLVERR or DECERR) during LOAD_MM"),
        Field("LOAD_REFUSED", 4, "rc", 0, "LOAD_MM while busy or while mm_busy (ignored)"),
        Field("MM_UNALIGNED", 5, "rc", 0, "LOAD_MM with WADDR not aligned to the bus width (ignored)"),
        Field("ABANDONED", 6, "rc", 0, "SOFT_RESET abandoned work (a run, a LOAD_MM fetch, or a partly loaded "
                                       "weight set)"),
        Field("MM_TIMEOUT", 7, "rc", 0, "AXI read timeout during LOAD_MM (no AR handshake and no R beat for "
                                        "mm_timeout_cycles cycles)"),
        Field("BAD_ADDRESS", 8, "rc", 0, "AXI4-Lite access outside the register map or write to a read-only "
                                         "register (answered SLVERR)"),
    )),
    Register("CYCLES", 0x14, "r", "engine cycles with a step in flight (LSTMLayer.cycles)"),
    Register("MAC_BEATS", 0x18, "r", "weight beats consumed by the SpMxV (LSTMLayer.mac_beats)"),
    Register("STEPS", 0x1C, "r", "hidden vectors produced (LSTMLayer.steps)"),
    Register("STALL_OUT", 0x20, "r", "cycles m_axis_h was refused (LSTMLayer.stall_out)"),
    Register("RUN_CYCLES", 0x24, "r", "cycles from START to done of the last run"),
    Register("CONFIG", 0x28, "r", "identification of the build", fields=(
        Field("P", (7, 0), "r", "pes", "processing elements"),
        Field("B", (15, 8), "r", "banks", "banks per row"),
        Field("K", (23, 16), "r", "k", "nonzeros kept per bank"),
    )),
    Register("WADDR_LO", 0x2C, "rw", "byte address of the weight buffer, bits 31:0 (taken when LOAD_MM is accepted)"),
    Register("WADDR_HI", 0x30, "rw", "byte address of the weight buffer, bits 63:32 (only mm_addr_width - 32 bits "
                                     "kept)"),
    Register("MM_ERR_RESP", 0x34, "r", "first LOAD_MM failure since CLEAR_ERROR: RRESP (2, 3) or 4 for a timeout",
             fields=(Field("RESP", (2, 0), "r", 0, "RRESP of the failing beat (2 SLVERR, 3 DECERR), or 4 for a read "
                                                    "timeout"),)),
    Register("MM_ERR_ADDR_LO", 0x38, "r", "the failing beat's byte address (timeout: the first beat not received), "
                                          "bits 31:0"),
    Register("MM_ERR_ADDR_HI", 0x3C, "r", "the failing beat's byte address, bits 63:32"),
    Register("LOAD_WORDS", 0x40, "r", "32-bit words of a full weight + bias load (a constant of the build)"),
    Register("LOAD_CYCLES", 0x44, "r", "cycles from the last accepted LOAD_MM to STATUS.loaded (0 if it failed or "
                                       "was abandoned)"),
    title="bbs-lstm-axi",
)
#: ``{name: byte address}`` (host and testbench constants, derived from :data:`REGISTER_MAP`)
REGS = REGISTER_MAP.addresses()
#: registers a write changes (writes elsewhere answer SLVERR)
WRITABLE = REGISTER_MAP.writable()
#: CTRL command bits ``{field: mask}``
CTRL = REGISTER_MAP.masks("CTRL")
#: STATUS bits
STATUS = REGISTER_MAP.masks("STATUS")
#: ERROR bits
ERROR = REGISTER_MAP.masks("ERROR")


def bytes_up(bits: int) -> int:
    """``bits`` rounded up to whole bytes (AXI4-Stream ``tdata`` widths)."""
    return -(-bits // 8) * 8


class LSTMAxiTop(wiring.Component):
    """``LSTMLayer`` behind AXI4-Stream (w, x, h), an AXI4 read master (w) and AXI4-Lite
    (control/status/counters).

    Parameters
    ----------
    params : LSTMParams
    mm_addr_width : int
        ``m_axi_araddr`` width, 32 to 64 bits (default 64).
    mm_data_width : int
        ``m_axi_rdata`` width: 32, 64, 128, 256 or 512 bits (default 32).
    mm_max_burst : int
        Longest read burst in beats, 1 to 256 (default 16).
    mm_max_outstanding : int
        Read bursts in flight at once (default 2).
    mm_timeout_cycles : int or None
        Read watchdog: cycles without an AR handshake or an R beat after which a LOAD_MM fails
        with a timeout (default ``2**16``; ``None``: wait forever).

    Ports are flat and named as the AXI specification and cocotbext-axi expect
    (``s_axis_x_tdata``, ``s_axil_awaddr``, ``m_axi_araddr``, ...); see the module docstring for
    the register map and the fault behaviour.

    Raises
    ------
    TypeError
        ``params`` is not an :class:`hwcosim.models.bbs.lstm.LSTMParams`.
    ValueError
        A read-master parameter out of range.
    """

    def __init__(self, params: LSTMParams, *, mm_addr_width: int = 64, mm_data_width: int = 32,
                 mm_max_burst: int = 16, mm_max_outstanding: int = 2,
                 mm_timeout_cycles: int | None = DEFAULT_TIMEOUT):
        if not isinstance(params, LSTMParams):
            raise TypeError(f"LSTMAxiTop takes a models.bbs.lstm.LSTMParams, not {params!r}")
        if not 32 <= mm_addr_width <= 64:
            raise UsageError(f"m_axi address width must be 32 to 64 bits, not {mm_addr_width}")
        self.params = p = params
        self.mm_addr_width, self.mm_data_width = mm_addr_width, mm_data_width
        self.mm_max_burst, self.mm_max_outstanding = mm_max_burst, mm_max_outstanding
        self.mm_timeout_cycles = mm_timeout_cycles
        # checks the read-master parameters before anything is built
        self._reader_args = dict(addr_width=mm_addr_width, data_width=mm_data_width, max_burst=mm_max_burst,
                                 max_outstanding=mm_max_outstanding, len_width=max(1, self.load_beats.bit_length()),
                                 timeout_cycles=mm_timeout_cycles)
        AxiReader.check_params(**self._reader_args)
        xw = bytes_up(p.input_size * p.vec_fmt.width)
        hw = bytes_up(p.units * p.vec_fmt.width)
        sig = {
            "s_axis_w_tdata": In(32), "s_axis_w_tvalid": In(1), "s_axis_w_tready": Out(1),
            "s_axis_x_tdata": In(xw), "s_axis_x_tvalid": In(1), "s_axis_x_tready": Out(1),
            "m_axis_h_tdata": Out(hw), "m_axis_h_tvalid": Out(1), "m_axis_h_tready": In(1),
            "m_axis_h_tlast": Out(1),
            **axil_members(8),
            "m_axi_arid": Out(1), "m_axi_araddr": Out(mm_addr_width), "m_axi_arlen": Out(8),
            "m_axi_arsize": Out(3), "m_axi_arburst": Out(2), "m_axi_arlock": Out(1), "m_axi_arcache": Out(4),
            "m_axi_arprot": Out(3), "m_axi_arvalid": Out(1), "m_axi_arready": In(1),
            "m_axi_rid": In(1), "m_axi_rdata": In(mm_data_width), "m_axi_rresp": In(2), "m_axi_rlast": In(1),
            "m_axi_rvalid": In(1), "m_axi_rready": Out(1),
        }
        super().__init__(sig)

    @property
    def weight_words(self) -> int:
        """32-bit words per CSB weight beat."""
        b = self.params.bbs
        return -(-(b.pes * b.banks * b.lane_width) // 32)

    @property
    def bias_words(self) -> int:
        p = self.params
        return -(-(p.pes * p.gate_fmt.width) // 32)

    @property
    def load_words(self) -> int:
        """32-bit words of a full load: all weight beats, then all bias beats (``LOAD_WORDS``)."""
        p = self.params
        return p.bbs.weight_beats * self.weight_words + p.rows // p.pes * self.bias_words

    @property
    def load_beats(self) -> int:
        """``m_axi`` beats a LOAD_MM reads (the last one may carry unused words)."""
        return -(-self.load_words * 32 // self.mm_data_width)

    #: the AXI4-Lite register file (a broken variant in the formal harness replaces it)
    regfile_cls = AxiLiteRegFile

    def elaborate(self, platform):
        p = self.params
        MAP = REGISTER_MAP
        C, E = MAP.CTRL, MAP.ERROR              # command and error bits of the decode below
        m = Module()
        m.submodules.axil = axil = self.regfile_cls(REGISTER_MAP, addr_width=8)
        connect_axil(m, self, axil)
        lstm = LSTMLayer(p)
        lstm_rst = Signal()                     # clears the layer: SOFT_RESET, LOAD_MM, read error
        # the clear reaches the layer a cycle later, from a register (timing: its reset net reaches
        # every register of the layer); in that cycle the layer's outputs are masked as if cleared
        clearing = Signal()
        m.d.sync += clearing.eq(lstm_rst)
        m.submodules.lstm = ResetInserter(clearing)(lstm)
        m.submodules.reader = rd = AxiReader(**self._reader_args)
        U, H = p.units, p.hidden
        WB, BB = p.bbs.weight_beats, p.rows // p.pes
        NW, NB = self.weight_words, self.bias_words
        DW, AW = self.mm_data_width, self.mm_addr_width

        # --- registers ------------------------------------------------------------------------
        seq_len, num_seq = Signal(MAP.SEQ_LEN.SEQ_LEN.width), Signal(MAP.NUM_SEQ.NUM_SEQ.width)
        busy, done = Signal(), Signal()
        err = Signal(len(ERROR))
        run_cycles = Signal(32)
        waddr = Signal(64)
        mm_resp, mm_addr = Signal(MAP.MM_ERR_RESP.RESP.width), Signal(64)
        load_cycles, load_timing = Signal(32), Signal()
        mm_mode, kick = Signal(), Signal()      # LOAD_MM owns the loader / start the reader
        m.d.comb += lstm.seq_len.eq(seq_len)
        # SEQ_LEN x NUM_SEQ, registered: the START write takes the run's step count from a register,
        # not through a multiplier (that was the critical path of bbs-lstm-axi), and the
        # register is the multiplier's own output register on an ECP5 (hdl.common.dsp: a fabric
        # register behind the DSP block stayed short of 100 MHz). Both only change while idle, and the register
        # file takes a write at most every other cycle, so the product is up to date by the START
        # that uses it.
        n_steps = registered_mul(m, seq_len, num_seq, en=1, name="n_steps")

        # --- AXI4-Lite write decode (the commands, used below) ---------------------------------
        wr = axil.wr
        waddr_idx, wdata = axil.widx, axil.wdata
        ctrl_wr = wr & (waddr_idx == C.word)
        soft = ctrl_wr & wdata[C.SOFT_RESET.bit]
        load_req = ctrl_wr & wdata[C.LOAD_MM.bit] & ~soft
        aligned = waddr[:(DW // 8).bit_length() - 1] == 0
        load_ok = load_req & ~busy & ~rd.busy & ~kick & aligned
        mm_err = rd.err_strobe & mm_mode
        clear_w = Signal()                      # empty the loader and clear the layer
        m.d.comb += [clear_w.eq(soft | load_ok | mm_err), lstm_rst.eq(clear_w)]

        # --- m_axi: the read master, its constant attributes ------------------------------------
        m.d.comb += [self.m_axi_arid.eq(0), self.m_axi_araddr.eq(rd.araddr), self.m_axi_arlen.eq(rd.arlen),
                     self.m_axi_arsize.eq(rd.arsize), self.m_axi_arburst.eq(rd.arburst),
                     self.m_axi_arlock.eq(0), self.m_axi_arcache.eq(0b0011), self.m_axi_arprot.eq(0),
                     self.m_axi_arvalid.eq(rd.arvalid), rd.arready.eq(self.m_axi_arready),
                     rd.rdata.eq(self.m_axi_rdata), rd.rresp.eq(self.m_axi_rresp), rd.rlast.eq(self.m_axi_rlast),
                     rd.rvalid.eq(self.m_axi_rvalid), self.m_axi_rready.eq(rd.rready),
                     rd.base.eq(waddr[:AW]), rd.length.eq(self.load_beats), rd.start.eq(kick), rd.abort.eq(soft)]
        m.d.sync += kick.eq(load_ok)

        # --- the read data through a register slice (the read master's valid comes from the R
        # channel and its own state in the same cycle; the loader's wide enables follow it) -------
        rs = RegisterSlice(DW)
        m.submodules.rslice = ResetInserter(clear_w)(rs)
        wiring.connect(m, rd.o, rs.i)

        # --- word splitter: DW-bit beats -> 32-bit words, one per cycle --------------------------
        R = DW // 32
        mm_valid, mm_word, mm_ready = Signal(), Signal(32), Signal()
        if R == 1:
            m.d.comb += [mm_valid.eq(rs.o.valid), mm_word.eq(rs.o.payload), rs.o.ready.eq(mm_ready)]
            split_empty = ~rs.o.valid
        else:
            sbuf, scnt = Signal(DW), Signal(range(R + 1))
            m.d.comb += [mm_valid.eq(scnt != 0), mm_word.eq(sbuf[:32]),
                         rs.o.ready.eq((scnt == 0) | ((scnt == 1) & mm_ready))]
            with m.If(mm_valid & mm_ready):
                m.d.sync += [sbuf.eq(sbuf >> 32), scnt.eq(scnt - 1)]
            with m.If(rs.o.valid & rs.o.ready):
                m.d.sync += [sbuf.eq(rs.o.payload), scnt.eq(R)]
            with m.If(clear_w):
                m.d.sync += scnt.eq(0)
            split_empty = (scnt == 0) & ~rs.o.valid
        with m.If(load_ok):
            m.d.sync += mm_mode.eq(1)
        with m.Elif(mm_mode & ~kick & ~rd.busy & split_empty):
            m.d.sync += mm_mode.eq(0)

        # --- weight/bias deserialiser: 32-bit words -> wide beats, one word per cycle -------------
        # Two registers: the shift register collects a beat's words; a complete beat moves to the
        # output register, which the layer takes (wload / bload). The shift register's enables
        # depend on flip-flops only (it takes a word unless it holds a complete beat that cannot
        # move), never on the layer's ready: with one register, bias_loaded -> the handover -> the
        # enables of its 384 flip-flops was bbs-lstm-axi's critical path on one seed.
        # A beat moves in the cycle after its last word while the next beat's first word shifts in,
        # so words still flow at one per cycle.
        NS = max(NW, NB)
        shreg = Signal(32 * NS)                     # words shift in from the top: first word ends lowest
        obuf = Signal(32 * NS)                      # the complete beat offered to the layer
        wcnt = Signal(range(NS + 1))
        cbeats = Signal(range(WB + BB + 1))         # wide beats complete in the shift register so far
        beats = Signal(range(WB + BB + 1))          # wide beats handed over so far
        sh_full, ob_valid = Signal(), Signal()      # a complete beat in the shift / output register
        # comparisons of the beat counts kept as registers: cbeats < WB, cbeats == WB + BB (collector);
        # beats < WB (the output register's beat)
        c_in_w, c_at_end, in_w = Signal(init=1), Signal(init=WB + BB == 0), Signal(init=1)
        m.d.comb += [lstm.wload.valid.eq(ob_valid & in_w), lstm.wload.payload.as_value().eq(obuf[32 * (NS - NW):]),
                     lstm.bload.valid.eq(ob_valid & ~in_w), lstm.bload.payload.as_value().eq(obuf[32 * (NS - NB):])]
        handover = (lstm.wload.valid & lstm.wload.ready) | (lstm.bload.valid & lstm.bload.ready)
        move = sh_full & ~ob_valid
        nwords = Mux(c_in_w, NW, NB)                # of the beat being collected
        des_ready = ~sh_full | ~ob_valid
        src_valid = Mux(mm_mode, mm_valid, self.s_axis_w_tvalid)
        src_word = Mux(mm_mode, mm_word, self.s_axis_w_tdata)
        m.d.comb += [self.s_axis_w_tready.eq(des_ready & ~mm_mode), mm_ready.eq(des_ready & mm_mode)]
        w_fire = src_valid & des_ready
        wide = Signal(32 * NS)
        m.d.comb += wide.eq(Cat(shreg[32:], src_word))
        with m.If(handover):
            m.d.sync += [ob_valid.eq(0), beats.eq(beats + 1), in_w.eq(beats + 1 < WB)]
        with m.If(move):
            m.d.sync += [obuf.eq(shreg), ob_valid.eq(1), sh_full.eq(0)]
        with m.If(w_fire & c_at_end):
            with m.If(~mm_mode):                    # MM: unused words of the last bus beat
                m.d.sync += err[E.EXTRA_WEIGHTS.bit].eq(1)
        with m.Elif(w_fire):
            m.d.sync += shreg.eq(wide)
            with m.If(wcnt == nwords - 1):
                m.d.sync += [wcnt.eq(0), sh_full.eq(1), cbeats.eq(cbeats + 1),
                             c_in_w.eq(cbeats + 1 < WB), c_at_end.eq(cbeats + 1 == WB + BB)]
            with m.Else():
                m.d.sync += wcnt.eq(wcnt + 1)
        with m.If(clear_w):
            m.d.sync += [wcnt.eq(0), beats.eq(0), cbeats.eq(0), sh_full.eq(0), ob_valid.eq(0), done.eq(0),
                         c_in_w.eq(1), c_at_end.eq(WB + BB == 0), in_w.eq(1)]
        partial = ~(lstm.loaded & ~clearing) & ((cbeats != 0) | (wcnt != 0) | sh_full | ob_valid)
        loading = mm_mode | partial
        # loaded: every word is in and a LOAD_MM fetch has ended (its read master is idle), so
        # no late read error or timeout of that fetch can clear the layer under a run
        loaded = Signal()
        m.d.comb += loaded.eq(lstm.loaded & ~clearing & ~mm_mode)

        # --- LOAD_MM timing ---------------------------------------------------------------------
        with m.If(load_timing):
            m.d.sync += load_cycles.eq(load_cycles + 1)
            with m.If(loaded):
                m.d.sync += load_timing.eq(0)
        with m.If(load_ok):
            m.d.sync += [load_timing.eq(1), load_cycles.eq(0)]
        with m.Elif((mm_err | soft) & load_timing):
            m.d.sync += [load_timing.eq(0), load_cycles.eq(0)]

        # --- run control: x gated by busy, steps counted on h -----------------------------------
        x_left, steps_left = Signal(32), Signal(32)
        gate = Signal()         # busy & (x_left != 0), kept as a register (timing: the x valid path)
        m.d.comb += [lstm.x.valid.eq(self.s_axis_x_tvalid & gate),
                     lstm.x.payload.as_value().eq(self.s_axis_x_tdata),
                     self.s_axis_x_tready.eq(lstm.x.ready & gate)]
        with m.If(lstm.x.valid & lstm.x.ready):
            m.d.sync += [x_left.eq(x_left - 1), gate.eq(x_left != 1)]
        hcnt = Signal(range(max(H // U, 2)))
        last = hcnt == H // U - 1
        h_fire = lstm.h.valid & lstm.h.ready
        m.d.comb += [self.m_axis_h_tvalid.eq(lstm.h.valid & ~clearing),
                     self.m_axis_h_tdata.eq(lstm.h.payload.as_value()),
                     self.m_axis_h_tlast.eq(last), lstm.h.ready.eq(self.m_axis_h_tready & ~clearing)]
        with m.If(h_fire):
            m.d.sync += hcnt.eq(Mux(last, 0, hcnt + 1))
            with m.If(last):
                m.d.sync += steps_left.eq(steps_left - 1)
                with m.If(steps_left == 1):
                    m.d.sync += [busy.eq(0), done.eq(1)]
        with m.If(busy):
            m.d.sync += run_cycles.eq(run_cycles + 1)

        # --- AXI4-Lite slave --------------------------------------------------------------------
        # responses depend on the address only: SLVERR for an unmapped or read-only register
        m.d.comb += axil.w_ok.eq(axil.w_writable)
        with m.If(wr & ~axil.w_writable):
            m.d.sync += err[E.BAD_ADDRESS.bit].eq(1)
        with m.If(wr):
            with m.Switch(waddr_idx):
                with m.Case(C.word):
                    with m.If(wdata[C.CLEAR_ERROR.bit]):
                        m.d.sync += [err.eq(0), mm_resp.eq(0), mm_addr.eq(0)]
                    with m.If(soft):
                        with m.If(busy | loading):
                            m.d.sync += err[E.ABANDONED.bit].eq(1)
                    with m.Elif(load_req):
                        with m.If(busy | rd.busy | kick):
                            m.d.sync += err[E.LOAD_REFUSED.bit].eq(1)
                        with m.Elif(~aligned):
                            m.d.sync += err[E.MM_UNALIGNED.bit].eq(1)
                    with m.Elif(wdata[C.START.bit] & ~busy):
                        with m.If(~loaded):
                            m.d.sync += err[E.START_UNLOADED.bit].eq(1)
                        with m.Elif((seq_len == 0) | (num_seq == 0)):
                            m.d.sync += err[E.BAD_SIZE.bit].eq(1)
                        with m.Else():
                            m.d.sync += [busy.eq(1), done.eq(0), x_left.eq(n_steps), steps_left.eq(n_steps), gate.eq(1),
                                         run_cycles.eq(0)]
                with m.Case(MAP.SEQ_LEN.word):
                    with m.If(~busy):
                        m.d.sync += seq_len.eq(wdata[MAP.SEQ_LEN.SEQ_LEN.slice])
                with m.Case(MAP.NUM_SEQ.word):
                    with m.If(~busy):
                        m.d.sync += num_seq.eq(wdata[MAP.NUM_SEQ.NUM_SEQ.slice])
                with m.Case(MAP.WADDR_LO.word):
                    m.d.sync += waddr[:32].eq(wdata)
                with m.Case(MAP.WADDR_HI.word):
                    m.d.sync += waddr[32:AW].eq(wdata[:AW - 32])
        # a read error or timeout: recorded (the first since CLEAR_ERROR), the layer is cleared above
        with m.If(mm_err):
            with m.If(rd.error == ERR_TIMEOUT):
                m.d.sync += err[E.MM_TIMEOUT.bit].eq(1)
            with m.Else():
                m.d.sync += err[E.MM_READ.bit].eq(1)
            with m.If((mm_resp == 0) | (ctrl_wr & wdata[C.CLEAR_ERROR.bit])):
                m.d.sync += [mm_resp.eq(rd.error), mm_addr.eq(rd.err_addr)]
        # SOFT_RESET: the run is abandoned (the layer and the loader are cleared above)
        with m.If(soft):
            m.d.sync += [busy.eq(0), done.eq(0), x_left.eq(0), steps_left.eq(0), gate.eq(0), hcnt.eq(0),
                         run_cycles.eq(0)]

        regs = {"SEQ_LEN": seq_len, "NUM_SEQ": num_seq,
                "STATUS": MAP.STATUS.cat(BUSY=busy, DONE=done, ERROR=err.any(), LOADED=loaded, LOADING=loading,
                                         MM_BUSY=rd.busy, MM_STALE=rd.stale), "ERROR": err,
                **{name: Mux(clearing, 0, getattr(lstm, name.lower()))
                   for name in ("CYCLES", "MAC_BEATS", "STEPS", "STALL_OUT")},
                "RUN_CYCLES": run_cycles,
                "CONFIG": MAP.CONFIG.pack(P=p.pes, B=p.banks, K=p.k),
                "WADDR_LO": waddr[:32], "WADDR_HI": waddr[32:], "MM_ERR_RESP": mm_resp,
                "MM_ERR_ADDR_LO": mm_addr[:32], "MM_ERR_ADDR_HI": mm_addr[32:],
                "LOAD_WORDS": self.load_words, "LOAD_CYCLES": load_cycles}
        m.d.comb += [getattr(axil, f"r_{name}").eq(val) for name, val in regs.items()]
        with m.If(axil.bad_read):
            m.d.sync += err[E.BAD_ADDRESS.bit].eq(1)
        return m

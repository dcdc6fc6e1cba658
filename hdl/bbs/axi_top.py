"""Board-ready top level of the BBS LSTM engine: AXI4-Stream data, AXI4-Lite control and status.

Wraps :class:`hdl.bbs.lstm.LSTMLayer` for a shell (Vivado block design, Platform Designer):

- ``s_axis_w`` (AXI4-Stream, 32-bit ``tdata``): the weights, then the biases, as 32-bit words,
  least significant word first. ``rows/P * k`` weight beats of ``P*B*(W+I)`` bits (CSB words,
  :func:`models.bbs.pack_weight_beats`) take ``ceil(P*B*(W+I)/32)`` words each; then ``4H/P``
  bias beats of ``P * GW`` bits take ``ceil(P*GW/32)`` words each
  (:func:`models.bbs_lstm.pack_bias_beats`). Load once after reset; ``STATUS.loaded`` rises when
  the last bias word is in. Words arriving after that are dropped and set ``ERROR.extra_weights``.
- ``s_axis_x`` (AXI4-Stream): one beat per time step, ``I`` inputs of ``XW`` bits at
  ``i * XW`` (``tdata`` rounded up to bytes), accepted only while a run is busy.
- ``m_axis_h`` (AXI4-Stream): ``H / U`` beats per step of ``U = P/4`` hidden values at
  ``u * XW``; ``tlast`` on the last beat of every step.
- ``s_axil`` (AXI4-Lite, 32-bit data, 8-bit address; ``wstrb`` ignored, responses OKAY).

Register map (byte addresses)::

    0x00 CTRL      W   bit 0 START: run NUM_SEQ sequences of SEQ_LEN steps (ignored while busy);
                       bit 1 CLEAR_ERROR.  Reads 0.
    0x04 SEQ_LEN   RW  steps per sequence (16 bits, >= 1); writes while busy are ignored.
    0x08 NUM_SEQ   RW  sequences per run (16 bits, >= 1); writes while busy are ignored.
    0x0C STATUS    R   bit 0 busy, bit 1 done (set when a run's last hidden beat leaves, cleared
                       by START), bit 2 error (any ERROR bit), bit 3 loaded.
    0x10 ERROR     R   sticky until CLEAR_ERROR: bit 0 START before the weights were loaded,
                       bit 1 START with SEQ_LEN or NUM_SEQ = 0, bit 2 extra weight words.
    0x14 CYCLES    R   engine cycles with a step in flight            (LSTMLayer.cycles)
    0x18 MAC_BEATS R   weight beats consumed by the SpMxV             (LSTMLayer.mac_beats)
    0x1C STEPS     R   hidden vectors produced                         (LSTMLayer.steps)
    0x20 STALL_OUT R   cycles m_axis_h was refused                    (LSTMLayer.stall_out)
    0x24 RUN_CYCLES R  cycles from START to done of the last run
    0x28 CONFIG    R   P | B << 8 | k << 16 (read-only identification of the build)

A START with an error condition does not start a run. The counters at 0x14..0x20 saturate at
2**32 - 1 and count from reset.

Latency and throughput are those of :class:`hdl.bbs.lstm.LSTMLayer`: the wrapper adds no
register stage on ``x`` or ``h`` (``tvalid``/``tready`` pass through gated by ``busy``), so the
cycle model :class:`models.bbs_lstm.LSTMCycleModel` holds from the first ``s_axis_x`` beat.
Resources beyond the layer: one ``ceil(P*B*(W+I)/32) * 32``-bit deserialiser register, the
register file and counters.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.bbs.lstm import LSTMLayer
from models.bbs_lstm import LSTMParams

__all__ = ["LSTMAxiTop", "REGS", "bytes_up"]

REGS = {"CTRL": 0x00, "SEQ_LEN": 0x04, "NUM_SEQ": 0x08, "STATUS": 0x0C, "ERROR": 0x10, "CYCLES": 0x14,
        "MAC_BEATS": 0x18, "STEPS": 0x1C, "STALL_OUT": 0x20, "RUN_CYCLES": 0x24, "CONFIG": 0x28}


def bytes_up(bits: int) -> int:
    """``bits`` rounded up to whole bytes (AXI4-Stream ``tdata`` widths)."""
    return -(-bits // 8) * 8


class LSTMAxiTop(wiring.Component):
    """``LSTMLayer`` behind AXI4-Stream (w, x, h) and AXI4-Lite (control/status/counters).

    Parameters
    ----------
    params : LSTMParams

    Ports are flat and named as the AXI specification and cocotbext-axi expect
    (``s_axis_x_tdata``, ``s_axil_awaddr``, ...); see the module docstring for the register map.
    """

    def __init__(self, params: LSTMParams):
        if not isinstance(params, LSTMParams):
            raise TypeError(f"LSTMAxiTop takes a models.bbs_lstm.LSTMParams, not {params!r}")
        self.params = p = params
        xw = bytes_up(p.input_size * p.vec_fmt.width)
        hw = bytes_up(p.units * p.vec_fmt.width)
        sig = {
            "s_axis_w_tdata": In(32), "s_axis_w_tvalid": In(1), "s_axis_w_tready": Out(1),
            "s_axis_x_tdata": In(xw), "s_axis_x_tvalid": In(1), "s_axis_x_tready": Out(1),
            "m_axis_h_tdata": Out(hw), "m_axis_h_tvalid": Out(1), "m_axis_h_tready": In(1),
            "m_axis_h_tlast": Out(1),
            "s_axil_awaddr": In(8), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
            "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1), "s_axil_wready": Out(1),
            "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
            "s_axil_araddr": In(8), "s_axil_arvalid": In(1), "s_axil_arready": Out(1),
            "s_axil_rdata": Out(32), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
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

    def elaborate(self, platform):
        p = self.params
        m = Module()
        m.submodules.lstm = lstm = LSTMLayer(p)
        U, H = p.units, p.hidden
        WB, BB = p.bbs.weight_beats, p.rows // p.pes
        NW, NB = self.weight_words, self.bias_words

        # --- registers ------------------------------------------------------------------------
        seq_len, num_seq = Signal(16), Signal(16)
        busy, done = Signal(), Signal()
        err = Signal(3)
        run_cycles = Signal(32)
        m.d.comb += lstm.seq_len.eq(seq_len)

        # --- weight/bias deserialiser: 32-bit words -> wide beats -------------------------------
        NS = max(NW, NB)
        shreg = Signal(32 * NS)                     # words shift in from the top: first word ends lowest
        wcnt = Signal(range(NS + 1))
        beats = Signal(range(WB + BB + 1))          # wide beats handed over so far
        held = Signal()                             # a wide beat waits for the layer
        in_w = beats < WB
        nwords = Mux(in_w, NW, NB)
        all_in = beats == WB + BB
        w_fire = self.s_axis_w_tvalid & self.s_axis_w_tready
        m.d.comb += self.s_axis_w_tready.eq(~held | all_in)
        wide = Signal(32 * NS)
        m.d.comb += wide.eq(Cat(shreg[32:], self.s_axis_w_tdata))
        with m.If(w_fire & all_in):
            m.d.sync += err[2].eq(1)
        with m.Elif(w_fire):
            m.d.sync += shreg.eq(wide)
            with m.If(wcnt == nwords - 1):
                m.d.sync += [wcnt.eq(0), held.eq(1)]
            with m.Else():
                m.d.sync += wcnt.eq(wcnt + 1)
        m.d.comb += [lstm.wload.valid.eq(held & in_w), lstm.wload.payload.as_value().eq(shreg[32 * (NS - NW):]),
                     lstm.bload.valid.eq(held & ~in_w), lstm.bload.payload.as_value().eq(shreg[32 * (NS - NB):])]
        with m.If((lstm.wload.valid & lstm.wload.ready) | (lstm.bload.valid & lstm.bload.ready)):
            m.d.sync += [held.eq(0), beats.eq(beats + 1)]

        # --- run control: x gated by busy, steps counted on h -----------------------------------
        x_left, steps_left = Signal(32), Signal(32)
        gate = busy & (x_left != 0)
        m.d.comb += [lstm.x.valid.eq(self.s_axis_x_tvalid & gate),
                     lstm.x.payload.as_value().eq(self.s_axis_x_tdata),
                     self.s_axis_x_tready.eq(lstm.x.ready & gate)]
        with m.If(lstm.x.valid & lstm.x.ready):
            m.d.sync += x_left.eq(x_left - 1)
        hcnt = Signal(range(max(H // U, 2)))
        last = hcnt == H // U - 1
        h_fire = lstm.h.valid & lstm.h.ready
        m.d.comb += [self.m_axis_h_tvalid.eq(lstm.h.valid), self.m_axis_h_tdata.eq(lstm.h.payload.as_value()),
                     self.m_axis_h_tlast.eq(last), lstm.h.ready.eq(self.m_axis_h_tready)]
        with m.If(h_fire):
            m.d.sync += hcnt.eq(Mux(last, 0, hcnt + 1))
            with m.If(last):
                m.d.sync += steps_left.eq(steps_left - 1)
                with m.If(steps_left == 1):
                    m.d.sync += [busy.eq(0), done.eq(1)]
        with m.If(busy):
            m.d.sync += run_cycles.eq(run_cycles + 1)

        # --- AXI4-Lite slave --------------------------------------------------------------------
        wr = self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid
        m.d.comb += [self.s_axil_awready.eq(wr), self.s_axil_wready.eq(wr), self.s_axil_bresp.eq(0),
                     self.s_axil_rresp.eq(0), self.s_axil_arready.eq(~self.s_axil_rvalid)]
        with m.If(wr):
            m.d.sync += self.s_axil_bvalid.eq(1)
        with m.Elif(self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)
        waddr, wdata = self.s_axil_awaddr[2:], self.s_axil_wdata
        with m.If(wr):
            with m.Switch(waddr):
                with m.Case(REGS["CTRL"] >> 2):
                    with m.If(wdata[1]):
                        m.d.sync += err.eq(0)
                    with m.If(wdata[0] & ~busy):
                        with m.If(~lstm.loaded):
                            m.d.sync += err[0].eq(1)
                        with m.Elif((seq_len == 0) | (num_seq == 0)):
                            m.d.sync += err[1].eq(1)
                        with m.Else():
                            n = seq_len * num_seq
                            m.d.sync += [busy.eq(1), done.eq(0), x_left.eq(n), steps_left.eq(n),
                                         run_cycles.eq(0)]
                with m.Case(REGS["SEQ_LEN"] >> 2):
                    with m.If(~busy):
                        m.d.sync += seq_len.eq(wdata[:16])
                with m.Case(REGS["NUM_SEQ"] >> 2):
                    with m.If(~busy):
                        m.d.sync += num_seq.eq(wdata[:16])
        rd = self.s_axil_arvalid & self.s_axil_arready
        with m.If(rd):
            m.d.sync += self.s_axil_rvalid.eq(1)
            regs = {"SEQ_LEN": seq_len, "NUM_SEQ": num_seq,
                    "STATUS": Cat(busy, done, err.any(), lstm.loaded), "ERROR": err,
                    "CYCLES": lstm.cycles, "MAC_BEATS": lstm.mac_beats, "STEPS": lstm.steps,
                    "STALL_OUT": lstm.stall_out, "RUN_CYCLES": run_cycles,
                    "CONFIG": p.pes | p.banks << 8 | p.k << 16}
            with m.Switch(self.s_axil_araddr[2:]):
                for name, val in regs.items():
                    with m.Case(REGS[name] >> 2):
                        m.d.sync += self.s_axil_rdata.eq(val)
                with m.Default():
                    m.d.sync += self.s_axil_rdata.eq(0)
        with m.Elif(self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        return m

"""Board top of the BBS LSTM AXI top (``bbs-lstm-axi``): a UART host link straight onto its
AXI4-Lite registers and AXI4-Stream ports.

Blocks: :class:`hwcosim.hdl.common.uart.UartRx` / :class:`~hdl.common.uart.UartTx` ->
:class:`hwcosim.hdl.common.host_bridge.HostBridge` -> :class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop`:

- AXI4-Lite: the bridge's master drives the top's register file directly (its map is
  :data:`hwcosim.hdl.bbs.axi_top.REGISTER_MAP`);
- output channel 0 -> ``s_axis_w`` (32-bit words as they are: the weight and bias load);
- output channel 1 -> ``s_axis_x`` through a word-to-beat register (``ceil(I*XW/32)`` words per
  input step, least significant first);
- ``m_axis_h`` -> a FIFO of one step's hidden beats (``H/U``) -> input channel 0, each beat as
  ``ceil(U*XW/32)`` words.

The weights sit in the layer's own memories once loaded, so the link's rate matters only for
the inputs and the hidden states: the host sends a step's input and reads that step's hidden
state back before the next, and the FIFO holds one step, so ``m_axis_h`` is never refused for
long. ``RUN_CYCLES`` therefore includes the link's time; ``CYCLES`` (engine cycles with a step in
flight) is the engine's. The AXI4 read master (``LOAD_MM``) has no memory behind it here: its
``ARREADY`` and ``RVALID`` are low, so a ``LOAD_MM`` ends with the read timeout (ERROR bit 7).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib.fifo import SyncFIFOBuffered
from hwcosim.hdl.bbs.axi_top import LSTMAxiTop, bytes_up
from hwcosim.hdl.common.host_bridge import (
    HostBoardTop,
    HostCore,
    beat_to_link_words,
    bridge_axil,
    link_words_to_beat,
    uart_bridge,
)
from hwcosim.models.bbs.lstm import LSTMParams

__all__ = ["LSTMHost", "board_top", "x_words", "h_words"]

CH_WEIGHTS, CH_X, CH_H = 0, 1, 0


def x_words(p: LSTMParams) -> int:
    return -(-bytes_up(p.input_size * p.vec_fmt.width) // 32)


def h_words(p: LSTMParams) -> int:
    return -(-bytes_up(p.units * p.vec_fmt.width) // 32)


class LSTMHost(HostCore):
    """:class:`LSTMAxiTop` behind a UART host bridge (see the module docstring); ``LSTMHost(params,
    divisor, timeout)`` (:class:`hwcosim.hdl.common.host_bridge.HostCore`)."""

    params_type = LSTMParams

    def elaborate(self, platform):
        m = Module()
        p = self.params
        br, line_error = uart_bridge(m, self, self.divisor, out_channels=2, in_channels=1, timeout=self.timeout)
        m.submodules.lstm = top = LSTMAxiTop(p, mm_addr_width=32)
        bridge_axil(m, br, top)
        # weights: words as they are
        m.d.comb += [top.s_axis_w_tdata.eq(br.m_axis0_tdata), top.s_axis_w_tvalid.eq(br.m_axis0_tvalid),
                     br.m_axis0_tready.eq(top.s_axis_w_tready)]
        # inputs: NX words -> one s_axis_x beat
        beat, full, take = link_words_to_beat(m, br, CH_X, 32 * x_words(p), "x")
        m.d.comb += [top.s_axis_x_tdata.eq(beat), top.s_axis_x_tvalid.eq(full),
                     take.eq(top.s_axis_x_tvalid & top.s_axis_x_tready)]
        # hidden states: one step of beats in a FIFO, each beat out as NH words
        m.submodules.hfifo = hf = SyncFIFOBuffered(width=len(top.m_axis_h_tdata), depth=max(2, p.hidden // p.units))
        m.d.comb += [hf.w_data.eq(top.m_axis_h_tdata), hf.w_en.eq(top.m_axis_h_tvalid),
                     top.m_axis_h_tready.eq(hf.w_rdy)]
        beat_to_link_words(m, br, CH_H, hf, "h")
        m.d.comb += self.leds.eq(Cat(top.m_axis_h_tvalid, top.s_axis_x_tready, top.s_axis_w_tready, line_error))
        return m


def board_top(params: LSTMParams, baud: int = 115200, pll=None) -> HostBoardTop:
    """The board top (registered in the design's ``board_tops``)."""
    return HostBoardTop(lambda divisor: LSTMHost(params, divisor), baud, pll)

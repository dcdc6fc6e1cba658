"""Board top of the FSS GEMM AXI top (``fss-axi``): a UART host link straight onto its AXI4-Lite
registers and AXI4-Stream ports.

Blocks: :class:`hwcosim.hdl.common.uart.UartRx` / :class:`~hdl.common.uart.UartTx` ->
:class:`hwcosim.hdl.common.host_bridge.HostBridge` -> :class:`hwcosim.hdl.fss.axi_top.FSSAxiTop`:

- AXI4-Lite: the bridge's master drives the top's register file directly (its map is
  :data:`hwcosim.hdl.fss.axi_top.REGISTER_MAP`);
- output channel 0 -> ``s_axis_w`` (32-bit words as they are: the weight load into the on-chip
  store, one word per cycle, never refused);
- output channel 1 -> ``s_axis_x`` through a word-to-beat register (``ceil(XB/32)`` words per
  activation beat, least significant first, ``XB`` the ``s_axis_x_tdata`` width);
- ``m_axis_y`` -> a FIFO of one column tile's result beats (``max_row_groups``) -> input channel
  0, each beat as ``ceil(YB/32)`` words.

The weights cross the link once; a run then sends each tile's ``K_REGIONS`` activation beats and
reads the tile's ``ROW_GROUPS`` result beats back before the next tile. The FIFO holds a whole
tile, so ``m_axis_y`` is never refused while the host is between reads and the activations of
the next tile are taken at once (the bridge requires a word to be taken within a byte time).
``RUN_CYCLES`` therefore includes the link's time; ``CYCLES`` is the engine's.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat
from amaranth.lib.fifo import SyncFIFOBuffered
from hwcosim.hdl.common.host_bridge import (
    HostBoardTop,
    HostCore,
    beat_to_link_words,
    bridge_axil,
    link_words_to_beat,
    uart_bridge,
)
from hwcosim.hdl.fss.axi_top import FSSAxiTop
from hwcosim.models.fss.gemm import FSSParams

__all__ = ["FSSHost", "board_top", "CH_WEIGHTS", "CH_X", "CH_Y"]

CH_WEIGHTS, CH_X, CH_Y = 0, 1, 0


class FSSHost(HostCore):
    """:class:`FSSAxiTop` behind a UART host bridge (see the module docstring); ``FSSHost(params,
    divisor, timeout)`` (:class:`hwcosim.hdl.common.host_bridge.HostCore`)."""

    params_type = FSSParams

    def elaborate(self, platform):
        m = Module()
        p = self.params
        br, line_error = uart_bridge(m, self, self.divisor, out_channels=2, in_channels=1, timeout=self.timeout)
        m.submodules.fss = top = FSSAxiTop(p)
        bridge_axil(m, br, top)
        # weights: words as they are
        m.d.comb += [top.s_axis_w_tdata.eq(br.m_axis0_tdata), top.s_axis_w_tvalid.eq(br.m_axis0_tvalid),
                     br.m_axis0_tready.eq(top.s_axis_w_tready)]
        # activations: link words -> one s_axis_x beat
        beat, full, take = link_words_to_beat(m, br, CH_X, len(top.s_axis_x_tdata), "x")
        m.d.comb += [top.s_axis_x_tdata.eq(beat), top.s_axis_x_tvalid.eq(full),
                     take.eq(top.s_axis_x_tvalid & top.s_axis_x_tready)]
        # results: one tile of beats in a FIFO, each beat out as link words
        m.submodules.yfifo = yf = SyncFIFOBuffered(width=len(top.m_axis_y_tdata), depth=max(2, p.max_row_groups))
        m.d.comb += [yf.w_data.eq(top.m_axis_y_tdata), yf.w_en.eq(top.m_axis_y_tvalid),
                     top.m_axis_y_tready.eq(yf.w_rdy)]
        beat_to_link_words(m, br, CH_Y, yf, "y")
        m.d.comb += self.leds.eq(Cat(top.m_axis_y_tvalid, top.s_axis_x_tready, top.s_axis_w_tready, line_error))
        return m


def board_top(params: FSSParams, baud: int = 115200, pll=None) -> HostBoardTop:
    """The board top (registered in the design's ``board_tops``)."""
    return HostBoardTop(lambda divisor: FSSHost(params, divisor), baud, pll)

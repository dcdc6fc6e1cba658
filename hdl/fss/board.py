"""Board top of the FSS GEMM AXI top (``fss-axi``): a UART host link straight onto its AXI4-Lite
registers and AXI4-Stream ports.

Blocks: :class:`hdl.common.uart.UartRx` / :class:`~hdl.common.uart.UartTx` ->
:class:`hdl.common.host_bridge.HostBridge` -> :class:`hdl.fss.axi_top.FSSAxiTop`:

- AXI4-Lite: the bridge's master drives the top's register file directly (its map is
  :data:`hdl.fss.axi_top.REGISTER_MAP`);
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

from amaranth import Elaboratable, Module
from amaranth.hdl import Array, Cat, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hdl.common.axil_regs import axil_members
from hdl.common.clocking import board_clock
from hdl.common.host_bridge import HostBridge, board_pins
from hdl.common.uart import UartRx, UartTx
from hdl.fss.axi_top import FSSAxiTop
from models.fss.gemm import FSSParams
from models.hostlink import divisor_for

__all__ = ["FSSHost", "FSSBoardTop", "board_top", "x_words", "y_words", "CH_WEIGHTS", "CH_X", "CH_Y"]

CH_WEIGHTS, CH_X, CH_Y = 0, 1, 0


def _words(bits: int) -> int:
    return -(-bits // 32)


def x_words(top: FSSAxiTop) -> int:
    """Link words per activation beat."""
    return _words(len(top.s_axis_x_tdata))


def y_words(top: FSSAxiTop) -> int:
    """Link words per result beat."""
    return _words(len(top.m_axis_y_tdata))


class FSSHost(wiring.Component):
    """:class:`FSSAxiTop` behind a UART host bridge (see the module docstring).

    Parameters
    ----------
    params : FSSParams
    divisor : int
        UART clock cycles per bit.
    timeout : int
        The bridge's watchdog on stream words, in cycles.
    """

    def __init__(self, params: FSSParams, divisor: int, timeout: int = 1 << 24):
        if not isinstance(params, FSSParams):
            raise TypeError(f"FSSHost takes a models.fss.gemm.FSSParams, not {params!r}")
        self.params, self.divisor, self.timeout = params, divisor, timeout
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.submodules.bridge = br = HostBridge(out_channels=2, in_channels=1, addr_width=8, timeout=self.timeout)
        m.submodules.fss = top = FSSAxiTop(p)
        NX, NY = x_words(top), y_words(top)
        wiring.connect(m, urx.o, br.rx)
        wiring.connect(m, br.tx, utx.i)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx)]
        for name, member in axil_members(8).items():
            mine = getattr(br, "m_axil" + name[len("s_axil"):])
            its = getattr(top, name)
            m.d.comb += its.eq(mine) if member.flow == In else mine.eq(its)

        # weights: words as they are
        m.d.comb += [top.s_axis_w_tdata.eq(br.m_axis0_tdata), top.s_axis_w_tvalid.eq(br.m_axis0_tvalid),
                     br.m_axis0_tready.eq(top.s_axis_w_tready)]

        # activations: NX words -> one s_axis_x beat
        xreg = Signal(32 * NX)
        xcnt = Signal(range(max(NX, 2)))
        xfull = Signal()
        m.d.comb += [top.s_axis_x_tdata.eq(xreg), top.s_axis_x_tvalid.eq(xfull), br.m_axis1_tready.eq(~xfull)]
        with m.If(top.s_axis_x_tvalid & top.s_axis_x_tready):
            m.d.sync += xfull.eq(0)
        with m.If(br.m_axis1_tvalid & ~xfull):
            m.d.sync += xreg.eq(Cat(xreg[32:], br.m_axis1_tdata) if NX > 1 else br.m_axis1_tdata)
            with m.If(xcnt == NX - 1):
                m.d.sync += [xcnt.eq(0), xfull.eq(1)]
            with m.Else():
                m.d.sync += xcnt.eq(xcnt + 1)

        # results: one tile of beats in a FIFO, each beat out as NY words
        yw = len(top.m_axis_y_tdata)
        m.submodules.yfifo = yf = SyncFIFOBuffered(width=yw, depth=max(2, p.max_row_groups))
        m.d.comb += [yf.w_data.eq(top.m_axis_y_tdata), yf.w_en.eq(top.m_axis_y_tvalid),
                     top.m_axis_y_tready.eq(yf.w_rdy)]
        ycnt = Signal(range(max(NY, 2)))
        padded = Signal(32 * NY)
        m.d.comb += [padded.eq(yf.r_data), br.s_axis0_tvalid.eq(yf.r_rdy),
                     br.s_axis0_tdata.eq(Array(padded[32 * i:32 * i + 32] for i in range(NY))[ycnt]),
                     yf.r_en.eq(br.s_axis0_tready & (ycnt == NY - 1))]
        with m.If(br.s_axis0_tvalid & br.s_axis0_tready):
            m.d.sync += ycnt.eq(ycnt + 1)
            with m.If(ycnt == NY - 1):
                m.d.sync += ycnt.eq(0)
        m.d.comb += self.leds.eq(Cat(top.m_axis_y_tvalid, top.s_axis_x_tready, top.s_axis_w_tready,
                                     (urx.frame_errors != 0) | (urx.overruns != 0)))
        return m


class FSSBoardTop(Elaboratable):
    """:class:`FSSHost` on a board's UART 0 and LEDs, clocked by the oscillator or through an ECP5
    PLL (``pll``, :class:`hdl.common.clocking.PllSettings`); the UART divisor follows the clock."""

    def __init__(self, params: FSSParams, baud: int = 115200, pll=None):
        self.params, self.baud, self.pll = params, baud, pll

    def elaborate(self, platform):
        m = Module()
        self.clock_hz = board_clock(m, platform, self.pll)
        self.divisor = divisor = divisor_for(self.clock_hz, self.baud)
        m.submodules.host = host = FSSHost(self.params, divisor)
        board_pins(m, platform, host, 4)
        return m


def board_top(params: FSSParams, baud: int = 115200, pll=None) -> FSSBoardTop:
    return FSSBoardTop(params, baud, pll)

"""Board top of the BBS LSTM AXI top (``bbs-lstm-axi``): a UART host link straight onto its
AXI4-Lite registers and AXI4-Stream ports.

Blocks: :class:`hdl.common.uart.UartRx` / :class:`~hdl.common.uart.UartTx` ->
:class:`hdl.common.host_bridge.HostBridge` -> :class:`hdl.bbs.axi_top.LSTMAxiTop`:

- AXI4-Lite: the bridge's master drives the top's register file directly (its map is
  :data:`hdl.bbs.axi_top.REGISTER_MAP`);
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

from amaranth import Elaboratable, Module
from amaranth.hdl import Array, Cat, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hdl.bbs.axi_top import LSTMAxiTop, bytes_up
from hdl.common.axil_regs import axil_members
from hdl.common.clocking import board_clock
from hdl.common.host_bridge import HostBridge, board_pins
from hdl.common.uart import UartRx, UartTx
from models.bbs.lstm import LSTMParams
from models.hostlink import divisor_for

__all__ = ["LSTMHost", "LSTMBoardTop", "board_top", "x_words", "h_words"]

CH_WEIGHTS, CH_X, CH_H = 0, 1, 0


def x_words(p: LSTMParams) -> int:
    return -(-bytes_up(p.input_size * p.vec_fmt.width) // 32)


def h_words(p: LSTMParams) -> int:
    return -(-bytes_up(p.units * p.vec_fmt.width) // 32)


class LSTMHost(wiring.Component):
    """:class:`LSTMAxiTop` behind a UART host bridge (see the module docstring).

    Parameters
    ----------
    params : LSTMParams
    divisor : int
        UART clock cycles per bit.
    timeout : int
        The bridge's watchdog on stream words, in cycles.
    """

    def __init__(self, params: LSTMParams, divisor: int, timeout: int = 1 << 24):
        if not isinstance(params, LSTMParams):
            raise TypeError(f"LSTMHost takes a models.bbs.lstm.LSTMParams, not {params!r}")
        self.params, self.divisor, self.timeout = params, divisor, timeout
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        p = self.params
        NX, NH = x_words(p), h_words(p)
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.submodules.bridge = br = HostBridge(out_channels=2, in_channels=1, addr_width=8, timeout=self.timeout)
        m.submodules.lstm = top = LSTMAxiTop(p, mm_addr_width=32)
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

        # inputs: NX words -> one s_axis_x beat
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

        # hidden states: one step of beats in a FIFO, each beat out as NH words
        hw = len(top.m_axis_h_tdata)
        m.submodules.hfifo = hf = SyncFIFOBuffered(width=hw, depth=max(2, p.hidden // p.units))
        m.d.comb += [hf.w_data.eq(top.m_axis_h_tdata), hf.w_en.eq(top.m_axis_h_tvalid),
                     top.m_axis_h_tready.eq(hf.w_rdy)]
        hcnt = Signal(range(max(NH, 2)))
        padded = Signal(32 * NH)
        m.d.comb += [padded.eq(hf.r_data), br.s_axis0_tvalid.eq(hf.r_rdy),
                     br.s_axis0_tdata.eq(Array(padded[32 * i:32 * i + 32] for i in range(NH))[hcnt]),
                     hf.r_en.eq(br.s_axis0_tready & (hcnt == NH - 1))]
        with m.If(br.s_axis0_tvalid & br.s_axis0_tready):
            m.d.sync += hcnt.eq(hcnt + 1)
            with m.If(hcnt == NH - 1):
                m.d.sync += hcnt.eq(0)
        m.d.comb += self.leds.eq(Cat(top.m_axis_h_tvalid, top.s_axis_x_tready, top.s_axis_w_tready,
                                     (urx.frame_errors != 0) | (urx.overruns != 0)))
        return m


class LSTMBoardTop(Elaboratable):
    """:class:`LSTMHost` on a board's UART 0 and LEDs, clocked by the oscillator or through an ECP5
    PLL (``pll``, :class:`hdl.common.clocking.PllSettings`); the UART divisor follows the clock."""

    def __init__(self, params: LSTMParams, baud: int = 115200, pll=None):
        self.params, self.baud, self.pll = params, baud, pll

    def elaborate(self, platform):
        m = Module()
        self.clock_hz = board_clock(m, platform, self.pll)
        self.divisor = divisor = divisor_for(self.clock_hz, self.baud)
        m.submodules.host = host = LSTMHost(self.params, divisor)
        board_pins(m, platform, host, 4)
        return m


def board_top(params: LSTMParams, baud: int = 115200, pll=None) -> LSTMBoardTop:
    return LSTMBoardTop(params, baud, pll)

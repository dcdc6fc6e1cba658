"""UART receiver and transmitter, 8N1, for a host link at a standard rate.

``divisor`` is clock cycles per bit (:func:`hwcosim.models.hostlink.divisor_for` picks it from the clock
and the rate and refuses a rate the clock cannot make within 2 %). Both blocks move bytes on
:mod:`amaranth.lib.stream` interfaces.

:class:`UartRx` passes the line through a two-flop synchroniser, waits for a falling edge, checks
the start bit half a bit later (a shorter low pulse is a glitch and is ignored), then samples
the eight data bits (LSB first) and the stop bit each a full bit apart, at their middles. After
the stop bit's sample it waits for the next falling edge at once, so a sender up to about 4 %
fast or slow (half a bit over the 9.5 bits from the start edge to the stop sample, less the
synchroniser's two cycles) is received; ``tests/common/test_uart.py`` checks 3 % both ways. A
stop bit sampled low is a framing error: the byte is dropped and ``frame_errors`` counts it. A
byte that completes while the previous one is still waiting on ``o`` (not taken) is dropped
and counted in ``overruns``; the consumer must take a byte within one byte time.

:class:`UartTx` sends each byte of ``i`` as start bit, eight data bits LSB first, stop bit;
``i.ready`` is high while the line is idle and in the last cycle of a stop bit, so bytes go out
back to back at the full rate.
The line idles high (``tx`` resets to 1).

Resources: a ``log2(divisor)``-bit timer, a 4-bit bit counter and a 10-bit (TX) or 8-bit (RX)
shift register each.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError

__all__ = ["UartRx", "UartTx"]


def _check_divisor(divisor: int) -> int:
    if not isinstance(divisor, int) or isinstance(divisor, bool) or not 4 <= divisor <= 1 << 20:
        raise UsageError(f"UART divisor (clock cycles per bit) must be an integer in 4..2**20, not {divisor!r}")
    return divisor


class UartRx(wiring.Component):
    """8N1 receiver.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, 4 or more.

    Attributes
    ----------
    rx : In(1)
        The line (asynchronous; synchronised inside).
    o : Out(stream.Signature(8))
        Received bytes.
    frame_errors, overruns : Out(16)
        Bytes dropped for a low stop bit / for ``o`` not taking the previous byte in time
        (saturating counters).
    """

    def __init__(self, divisor: int):
        self.divisor = _check_divisor(divisor)
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)),
                          "frame_errors": Out(16), "overruns": Out(16)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(d))
        bit = Signal(range(10))
        shreg = Signal(8)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(d // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):           # a glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(d - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [shreg.eq(Cat(shreg[1:], line)), timer.eq(d - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(~line):
                        with m.If(self.frame_errors != 0xFFFF):
                            m.d.sync += self.frame_errors.eq(self.frame_errors + 1)
                    with m.Elif(self.o.valid & ~self.o.ready):
                        with m.If(self.overruns != 0xFFFF):
                            m.d.sync += self.overruns.eq(self.overruns + 1)
                    with m.Else():
                        m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """8N1 transmitter.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, 4 or more.

    Attributes
    ----------
    i : In(stream.Signature(8))
        Bytes to send; taken one at a time while the line is idle.
    tx : Out(1)
        The line (idles high).
    """

    def __init__(self, divisor: int):
        self.divisor = _check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        timer = Signal(range(d))
        left = Signal(range(11))         # bits still to send, start bit included
        shreg = Signal(10, init=0x3FF)
        # ready in the last cycle of the stop bit too, so bytes go out back to back
        m.d.comb += [self.tx.eq(shreg[0]), self.i.ready.eq((left == 0) | ((left == 1) & (timer == 0)))]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [shreg.eq(Cat(0, self.i.payload, 1)), left.eq(10), timer.eq(d - 1)]
        with m.Elif(left != 0):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                m.d.sync += [shreg.eq(Cat(shreg[1:], 1)), left.eq(left - 1), timer.eq(d - 1)]
        return m

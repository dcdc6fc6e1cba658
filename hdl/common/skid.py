"""Skid buffer: a stream register stage that cuts the ready path, with no added latency.

:class:`SkidBuffer` sits between a producer and a consumer of a ``valid``/``ready`` stream.
Its ``i.ready`` is a register (``~full``), so the consumer's ``o.ready`` never reaches the
producer's logic in the same cycle: that is the point (timing; the enable nets of a long
pipeline hang off ``ready``). Data is not delayed: while the buffer is empty ``o`` shows ``i``
combinationally. When the consumer stalls in a cycle that the producer hands over a word, the
word is kept (``full``); ``i.ready`` falls in the next cycle and ``o`` shows the kept word until
the consumer takes it.

Order and count: every word accepted on ``i`` leaves on ``o`` exactly once, in order. The
consumer sees ``o.valid`` in every cycle it did without the buffer (so a design with a fixed
cycle schedule keeps it) and one word more after a stall at most; the producer sees ``ready``
one cycle later than it would without the buffer. Resources: one register of the payload
width, one flag, a ``width``-bit multiplexer.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError

__all__ = ["SkidBuffer", "RegisterSlice"]


class SkidBuffer(wiring.Component):
    """Zero-latency skid buffer on a ``width``-bit stream (``i`` -> ``o``); ``i.ready`` is
    registered. ``width`` must be at least 1.

    ``eager``: the buffer register loads ``i.payload`` in every cycle the buffer is empty, so
    its enable is ``~full`` (a flip-flop) instead of ``i.valid & ~o.ready``: the consumer's ready
    no longer reaches the enables of ``width`` flip-flops (on the BBS LSTM's 800-bit weight
    port that route was the critical path). The same words leave in the same cycles."""

    def __init__(self, width: int, eager: bool = False):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise UsageError(f"Skid buffer width must be a positive integer, not {width!r}")
        self.width = width
        self.eager = bool(eager)
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width)),
                          "full": Out(1)})

    def elaborate(self, platform):
        m = Module()
        buf = Signal(self.width, reset_less=True)    # datapath: only ``full`` needs a reset
        m.d.comb += [self.i.ready.eq(~self.full),
                     self.o.valid.eq(self.full | self.i.valid),
                     self.o.payload.eq(Mux(self.full, buf, self.i.payload))]
        with m.If(self.full):
            with m.If(self.o.ready):
                m.d.sync += self.full.eq(0)
        with m.Elif(self.i.valid & ~self.o.ready):
            m.d.sync += self.full.eq(1)
            if not self.eager:
                m.d.sync += buf.eq(self.i.payload)
        if self.eager:
            with m.If(~self.full):
                m.d.sync += buf.eq(self.i.payload)
        return m


class RegisterSlice(wiring.Component):
    """One register stage on a ``width``-bit stream: ``o.valid`` and ``o.payload`` come from
    registers (so no logic of the producer's reaches the consumer in the same cycle), ``i.ready``
    is ``~o.valid | o.ready`` (full throughput). One cycle of latency; order and count as the
    input. ``width`` must be at least 1."""

    def __init__(self, width: int):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise UsageError(f"Register slice width must be a positive integer, not {width!r}")
        self.width = width
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        # the word is datapath: only ``o.valid`` is reset (a reset net to every payload bit was the
        # critical path of bbs-lstm-axi, whose layer clear resets the slice)
        word = Signal(self.width, reset_less=True)
        m.d.comb += [self.i.ready.eq(~self.o.valid | self.o.ready), self.o.payload.eq(word)]
        with m.If(self.i.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid), word.eq(self.i.payload)]
        return m

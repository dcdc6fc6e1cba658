"""A synchronous FIFO whose memory write and append are two signals.

:class:`StagedFIFO` is Amaranth's ``SyncFIFO`` (memory read combinationally at the read
pointer, ``level`` counted in a register) with the write split in two:

- ``w_stage`` writes ``w_data`` into the slot after the last word (the *write slot*), without
  appending it: the FIFO's contents and ``level`` do not change, and the next staging
  overwrites it;
- ``w_commit`` appends the write slot's word (staged this cycle or earlier) to the FIFO.

Both act only while ``w_rdy`` (the FIFO is not full). Staging the same cycle as committing
appends ``w_data``, exactly as ``SyncFIFO``'s ``w_en``.

Why: in ``SyncFIFO`` the write enable of a wide FIFO in LUT RAM drives one write-enable pin
per four bits of width (131 for the KV-Direct write-back FIFO's 523 bits), and the logic that
decides whether to write ends on that net. When the data is known to be wanted earlier than
whether it is wanted - an op that may write back is known a stage before it is known that its
bucket is forwarded instead - ``w_stage`` can come from a register and only the few flip-flops
of the pointer and the level wait for the decision (``w_commit``).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError

__all__ = ["StagedFIFO"]


def _positive_int(name: str, v) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise UsageError(f"StagedFIFO: {name}={v!r}: give a positive integer")
    return v


class StagedFIFO(wiring.Component):
    """``depth`` words of ``width`` bits; see the module's description. ``r_data`` is valid
    while ``r_rdy``; ``r_en`` while ``r_rdy`` removes the oldest word."""

    def __init__(self, *, width: int, depth: int):
        self.width = _positive_int("width", width)
        self.depth = _positive_int("depth", depth)
        super().__init__({
            "w_data": In(width), "w_stage": In(1), "w_commit": In(1), "w_rdy": Out(1),
            "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        m.submodules.storage = mem = Memory(shape=self.width, depth=d, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        produce = Signal(range(d), name="produce")
        consume = Signal(range(d), name="consume")
        do_commit = Signal()
        do_read = Signal()
        m.d.comb += [
            self.w_rdy.eq(self.level != d),
            self.r_rdy.eq(self.level != 0),
            do_commit.eq(self.w_commit & self.w_rdy),
            do_read.eq(self.r_en & self.r_rdy),
            wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_stage & self.w_rdy),
            rp.addr.eq(consume), self.r_data.eq(rp.data),
        ]

        def step(p):
            return Mux(p == d - 1, 0, p + 1) if d & (d - 1) else p + 1

        with m.If(do_commit):
            m.d.sync += produce.eq(step(produce))
        with m.If(do_read):
            m.d.sync += consume.eq(step(consume))
        m.d.sync += self.level.eq(self.level + do_commit - do_read)
        return m

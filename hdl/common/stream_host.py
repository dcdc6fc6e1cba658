"""A stream design behind the UART host bridge: the generic board top's core.

:class:`StreamHost` wraps a design whose interface is valid/ready streams plus status and
counter outputs (no AXI4-Lite of its own) for :class:`hwcosim.hdl.common.host_bridge.HostBridge`:

- every input stream ``k`` (in the order given) is fed from the bridge's output channel ``k``:
  ``ceil(bits / 32)`` link words make a beat (least significant first), and the beats wait in an
  input FIFO (``in_depth`` beats), so the bridge's words are taken at once even while the design
  stalls (the bridge needs a word taken within a byte time);
- every output stream ``k`` goes into an output FIFO (its own depth) read by the bridge's input
  channel ``k``, each beat as ``ceil(bits / 32)`` words. A full FIFO stalls the design (nothing
  is lost): the host reads the ``LEVEL<k>`` registers and takes what is waiting;
- an AXI4-Lite register file (the bridge's master) holds:

  ====== ============ ==== =====================================================================
  0x00   CTRL         W    bit 0 SOFT_RESET: the design, the FIFOs and the word assemblers are reset;
                           bit 1 HOLD: while set, the input FIFOs fill but give the design nothing
  0x04   ID           R    the ``ident`` given (which design the bitstream holds)
  0x08   IN_FREE<k>   R    free beats in input FIFO ``k`` (one register per input, from 0x08)
  ...    LEVEL<k>     R    beats waiting in output FIFO ``k`` (after the inputs)
  ...    <STATUS>     R    each status/counter output named in ``status``, zero-extended
  ====== ============ ==== =====================================================================

HOLD lets a host load a batch at link speed and release it to the design back to back (so the
design's own rate shows in its counters, and a pipeline sees overlapping work as it would at line
rate). A host sends at most ``IN_FREE`` beats, reads ``LEVEL`` and that many beats, and repeats: no
command ever waits on the design, whatever the design's rate or stalls (:mod:`hwcosim.cosim.flow.board`'s
:class:`~cosim.flow.board.StreamLink` does this). Resources: the FIFOs (block RAM where deep), a
word register per input, a word counter per output, the register file.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, ResetInserter, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, Reg
from hwcosim.hdl.common.host_bridge import beat_to_link_words, bridge_axil, uart_bridge
from hwcosim.models.errors import UsageError

__all__ = ["StreamHost", "stream_host_regs"]


def stream_host_regs(inputs, outputs, status) -> tuple[Reg, ...]:
    """The register map of a :class:`StreamHost` (names as in the module docstring)."""
    regs = [Reg("CTRL", 0x00, "w", "bit 0 SOFT_RESET, bit 1 HOLD the inputs"),
            Reg("ID", 0x04, "r", "design identifier")]
    addr = 0x08
    for k, name in enumerate(inputs):
        regs.append(Reg(f"IN_FREE{k}", addr, "r", f"free beats in the input FIFO of {name}"))
        addr += 4
    for k, (name, _) in enumerate(outputs):
        regs.append(Reg(f"LEVEL{k}", addr, "r", f"beats waiting in the output FIFO of {name}"))
        addr += 4
    for name in status:
        regs.append(Reg(name.upper(), addr, "r", f"the design's {name}"))
        addr += 4
    return tuple(regs)


class StreamHost(wiring.Component):
    """``core`` (an elaboratable with stream ports) behind a UART host bridge (module docstring).

    Parameters
    ----------
    core : wiring.Component
        The design; ``inputs``/``outputs`` name its stream ports, ``status`` its status outputs.
    inputs : sequence of str
        Input stream port names, fed from bridge output channels 0, 1, ...
    outputs : sequence of (str, int)
        Output stream port names and their FIFO depths, read by bridge input channels 0, 1, ...
    status : sequence of str
        Status/counter outputs (at most 32 bits) readable as registers.
    ident : int
        The ``ID`` register's value.
    divisor : int
        UART clock cycles per bit.
    in_depth : int
        Input FIFO depth in beats.
    timeout : int
        The bridge's watchdog on stream words, in cycles.
    """

    def __init__(self, core, *, inputs, outputs, status, ident: int, divisor: int, in_depth: int = 64,
                 timeout: int = 1 << 24):
        self.core, self.inputs, self.outputs, self.status = core, tuple(inputs), tuple(outputs), tuple(status)
        self.ident, self.divisor, self.in_depth, self.timeout = ident, divisor, in_depth, timeout
        if len(self.inputs) > 16 or len(self.outputs) > 16:
            raise UsageError("a stream host has at most 16 input and 16 output streams (the bridge's channels)")
        if in_depth < 2 or any(d < 2 for _, d in self.outputs):
            raise UsageError("stream host FIFOs need a depth of at least 2 beats")
        for name in self.status:
            if len(getattr(core, name)) > 32:
                raise UsageError(f"status output {name} is wider than a 32-bit register")
        self.regs = stream_host_regs(self.inputs, self.outputs, self.status)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    @staticmethod
    def words(bits: int) -> int:
        return -(-bits // 32)

    def elaborate(self, platform):
        m = Module()
        core = self.core
        br, line_error = uart_bridge(m, self, self.divisor, out_channels=max(1, len(self.inputs)),
                                     in_channels=max(1, len(self.outputs)), timeout=self.timeout)
        m.submodules.regs = rf = AxiLiteRegFile(self.regs, addr_width=8)
        bridge_axil(m, br, rf)
        soft, hold = Signal(), Signal()
        m.d.comb += [soft.eq(rf.wr & (rf.widx == 0) & rf.wdata[0]), rf.w_ok.eq(rf.w_writable),
                     rf.r_ID.eq(self.ident)]
        with m.If(rf.wr & (rf.widx == 0)):
            m.d.sync += hold.eq(rf.wdata[1] & ~rf.wdata[0])
        m.submodules.core = ResetInserter(soft)(core)

        # inputs: words -> beats -> FIFO -> the design
        for k, name in enumerate(self.inputs):
            port = getattr(core, name)
            bits = len(Value.cast(port.payload))
            nw = self.words(bits)
            f = SyncFIFOBuffered(width=bits, depth=self.in_depth)
            m.submodules[f"in{k}"] = ResetInserter(soft)(f)
            wreg, wcnt = Signal(32 * nw, name=f"in{k}_words"), Signal(range(max(nw, 2)), name=f"in{k}_cnt")
            tvalid, tdata = getattr(br, f"m_axis{k}_tvalid"), getattr(br, f"m_axis{k}_tdata")
            tready = getattr(br, f"m_axis{k}_tready")
            beat = Cat(wreg[32:], tdata) if nw > 1 else tdata     # least significant word first
            last = wcnt == nw - 1
            m.d.comb += [tready.eq(~last | f.w_rdy), f.w_data.eq(beat), f.w_en.eq(tvalid & last),
                         port.valid.eq(f.r_rdy & ~hold), Value.cast(port.payload).eq(f.r_data),
                         f.r_en.eq(port.ready & ~hold),
                         getattr(rf, f"r_IN_FREE{k}").eq(self.in_depth - f.level)]
            if nw > 1:
                with m.If(tvalid & tready):
                    m.d.sync += [wreg.eq(beat), wcnt.eq(Mux(last, 0, wcnt + 1))]
                with m.If(soft):
                    m.d.sync += wcnt.eq(0)

        # outputs: the design -> FIFO -> words
        for k, (name, depth) in enumerate(self.outputs):
            port = getattr(core, name)
            f = SyncFIFOBuffered(width=len(Value.cast(port.payload)), depth=depth)
            m.submodules[f"out{k}"] = ResetInserter(soft)(f)
            m.d.comb += [f.w_data.eq(Value.cast(port.payload)), f.w_en.eq(port.valid), port.ready.eq(f.w_rdy),
                         getattr(rf, f"r_LEVEL{k}").eq(f.level)]
            beat_to_link_words(m, br, k, f, f"out{k}", clear=soft)

        for name in self.status:
            m.d.comb += getattr(rf, f"r_{name.upper()}").eq(getattr(core, name))
        m.d.comb += self.leds.eq(Cat(*(getattr(core, n).valid for n, _ in self.outputs[:2]),
                                     line_error))
        return m

"""Board top of the KV-Direct pipeline (``kvdirect-pipeline``): the pipeline and an on-chip memory
behind the generic stream host (:class:`hwcosim.hdl.common.stream_host.StreamHost`) and the UART bridge.

:class:`KVBoardCore` stands in for the host memory the paper reaches over PCIe: a block RAM of
``n_buckets`` 512-bit lines (the hash index; the pipeline's inline KVs never leave it) on the
pipeline's memory port, in order (a read after a write to its line sees the write), one request
per cycle, read data one cycle later, held while the response waits for ``mem_rsp.ready``. After
reset (and SOFT_RESET) it writes zeros over every line before it takes the first request (an empty
store, as :func:`hwcosim.models.kvdirect.rtl_model.golden_run` starts from); ``ready`` rises when done.
Forwarding is on and ``max_reads`` is ``entries``.

Bridge output channel 0 -> the request stream ``i`` (156-bit requests, 5 link words); the response
stream ``o`` -> input channel 0 (76-bit responses, 3 words) through a FIFO drained by ``LEVEL0``.
The pipeline's counters and ``ready`` are registers (``ID`` = ``"KVD1"``).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.host_bridge import HostBoardTop
from hwcosim.hdl.common.stream_host import StreamHost, stream_host_regs
from hwcosim.hdl.kvdirect.pipeline import COUNTERS, REQUEST, RESPONSE, Pipeline
from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.rtl_model import PipelineParams

__all__ = ["KVD_ID", "INPUTS", "OUTPUTS", "STATUS", "KVBoardCore", "kv_host", "board_top", "register_map"]

KVD_ID = 0x4B564431  # "KVD1"
INPUTS = ("i",)
#: the response FIFO (with the 64-deep request FIFO and the pipeline's entries, fewer than 256 ops
#: are ever in flight, so the 8-bit tags stay unique)
OUTPUTS = (("o", 64),)
STATUS = ("ready", *COUNTERS)


def register_map():
    return stream_host_regs(INPUTS, OUTPUTS, STATUS)


class KVBoardCore(wiring.Component):
    """:class:`Pipeline` with an on-chip line memory on its memory port (module docstring)."""

    def __init__(self, params: PipelineParams):
        if not isinstance(params, PipelineParams):
            raise TypeError(f"KVBoardCore takes a models.kvdirect.rtl_model.PipelineParams, not {params!r}")
        if params.entries + 64 + OUTPUTS[0][1] > 255:
            raise UsageError(f"entries={params.entries}: with the board's FIFOs more than 255 operations could be "
                             f"in flight and the 8-bit tags would repeat; use entries <= {255 - 64 - OUTPUTS[0][1]}")
        self.params = params
        sig = {"i": In(stream.Signature(REQUEST)), "o": Out(stream.Signature(RESPONSE)), "ready": Out(1)}
        sig.update({c: Out(32) for c in COUNTERS})
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.kv = kv = Pipeline(p)
        lines = p.n_buckets
        abits = max(1, (lines - 1).bit_length())
        m.submodules.mem = mem = Memory(shape=512, depth=lines, init=[])
        wp, rp = mem.write_port(), mem.read_port()
        wiring.connect(m, wiring.flipped(self.i), kv.i)
        wiring.connect(m, kv.o, wiring.flipped(self.o))
        m.d.comb += [kv.forward_en.eq(1), kv.max_reads.eq(p.entries)]
        m.d.comb += [getattr(self, c).eq(getattr(kv, c)) for c in COUNTERS]

        clearing = Signal(init=1)
        clr = Signal(abits)
        rq, rs = kv.mem_req, kv.mem_rsp
        rsp_valid = Signal()
        rsp_id = Signal.like(rs.payload.id)
        take = Signal()
        m.d.comb += [self.ready.eq(~clearing),
                     rq.ready.eq(~clearing & (~rsp_valid | rs.ready)), take.eq(rq.valid & rq.ready),
                     rs.valid.eq(rsp_valid), rs.payload.id.eq(rsp_id), rs.payload.data.eq(rp.data),
                     rp.addr.eq(rq.payload.addr[:abits]), rp.en.eq(take & ~rq.payload.we)]
        with m.If(clearing):
            m.d.comb += [wp.addr.eq(clr), wp.data.eq(0), wp.en.eq(1)]
            m.d.sync += clr.eq(clr + 1)
            with m.If(clr == lines - 1):
                m.d.sync += clearing.eq(0)
        with m.Else():
            m.d.comb += [wp.addr.eq(rq.payload.addr[:abits]), wp.data.eq(rq.payload.data),
                         wp.en.eq(take & rq.payload.we)]
        with m.If(take & ~rq.payload.we):
            m.d.sync += [rsp_valid.eq(1), rsp_id.eq(rq.payload.id)]
        with m.Elif(rs.ready):
            m.d.sync += rsp_valid.eq(0)
        return m


def kv_host(params: PipelineParams, divisor: int, timeout: int = 1 << 24, core: KVBoardCore | None = None):
    return StreamHost(core or KVBoardCore(params), inputs=INPUTS, outputs=OUTPUTS, status=STATUS, ident=KVD_ID,
                      divisor=divisor, timeout=timeout)


def board_top(params: PipelineParams, baud: int = 115200, pll=None) -> HostBoardTop:
    core = KVBoardCore(params)      # checks the parameters now, not when the platform elaborates
    return HostBoardTop(lambda divisor: kv_host(params, divisor, core=core), baud, pll)

"""cocotb testbench of bridge (c): the KV-Direct pipeline RTL serving the parameter-server job.

The job (:class:`hwcosim.cosim.designs.kvdirect.bridge.KVScenario`) runs in this process; :class:`KVRTLDevice` offers
each arrived batch's operations to ``hwcosim.hdl.kvdirect.Pipeline`` in order from the batch's arrival
cycle, with the memory model of :mod:`hwcosim.cosim.designs.kvdirect.tb_pipeline`, matches responses to
operations by tag, and reports a batch at the transfer cycle of its last response. Writes
``metrics.json``: the job result and the transcript (accepted request words in order, the
response word of each, the final memory image) that :func:`hwcosim.cosim.designs.kvdirect.bridge.check_transcript`
compares with the golden store.
"""

from __future__ import annotations

import time
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from hwcosim.cosim.designs.kvdirect.bridge import KVScenario, KVScenarioParams
from hwcosim.cosim.designs.kvdirect.tb_pipeline import MemoryModel
from hwcosim.cosim.flow.bridge import ClockMap, Completion, co_simulate
from hwcosim.cosim.flow.bridge_rtl import reset_with_clock
from hwcosim.cosim.tb.common import StreamSink, inputs, write_metrics
from hwcosim.models.kvdirect.rtl_model import pack_request, unpack_response


class KVRTLDevice:
    """``hwcosim.hdl.kvdirect.Pipeline`` behind the bridge's device interface (many operations in flight)."""

    name = "rtl"

    def __init__(self, dut, clk, clock: ClockMap, sp: KVScenarioParams):
        self.dut, self.clk, self.clock, self.sp = dut, clk, clock, sp
        self.mem = MemoryModel(dut, sp.engine, clk, sp.mem_latency, 0, sp.outstanding, 0.0, sp.seed + 7)
        self.sink = StreamSink(dut, "o", clk, 0.0, sp.seed + 2)
        self.feed: deque = deque()      # (arrival cycle, rid, index, request)
        self.batches: dict[int, dict] = {}
        self.tags: dict[int, tuple[int, int, int]] = {}  # tag -> (rid, index, acceptance number)
        self.requests: list[int] = []
        self.responses: list[int | None] = []
        self._seen = 0
        self._done: list[Completion] = []
        self.busy_cycles = 0
        cocotb.start_soon(self._feeder())

    def submit(self, t, rid, ops) -> None:
        arr = self.clock.cycle(t)
        self.batches[rid] = {"arr": arr, "n": len(ops), "got": 0, "resps": [None] * len(ops),
                             "lat": [0] * len(ops), "last": arr}
        for i, q in enumerate(ops):
            self.feed.append((arr, rid, i, q))

    @property
    def idle(self) -> bool:
        return not self.feed and not self.batches and not self._done

    async def _feeder(self):
        dut = self.dut
        while True:
            if self.feed and self.feed[0][0] <= self.clk.now and self.feed[0][3].tag not in self.tags:
                arr, rid, i, q = self.feed[0]
                word = pack_request(q)
                dut.i__valid.value = 1
                dut.i__payload.value = word
                await ReadOnly()
                taken = bool(dut.i__ready.value)
                await RisingEdge(dut.clk)
                if taken:
                    self.feed.popleft()
                    self.tags[q.tag] = (rid, i, len(self.requests))
                    self.requests.append(word)
                    self.responses.append(None)
                    dut.i__valid.value = 0
            else:
                dut.i__valid.value = 0
                await RisingEdge(dut.clk)

    def _collect(self) -> None:
        words, cycles = self.sink.words, self.sink.cycles
        while self._seen < len(words):
            w, cyc = words[self._seen], cycles[self._seen] + 1
            self._seen += 1
            r = unpack_response(w)
            if r.tag not in self.tags:
                raise AssertionError(f"cycle {cyc}: response with tag {r.tag} that no request in flight carries")
            rid, i, k = self.tags.pop(r.tag)
            self.responses[k] = w
            b = self.batches[rid]
            b["resps"][i] = r
            b["lat"][i] = cyc - b["arr"]
            b["got"] += 1
            b["last"] = max(b["last"], cyc)
            if b["got"] == b["n"]:
                del self.batches[rid]
                self.busy_cycles += b["last"] - b["arr"]
                self._done.append(Completion(rid, b["last"], self.clock.seconds(b["last"]), (b["resps"], b["lat"]),
                                             b["arr"]))

    async def advance(self, t_limit):
        lim = self.clock.floor_cycle(t_limit)
        while True:
            self._collect()
            if self._done:
                c0 = min(c.cycle for c in self._done)
                out = [c for c in self._done if c.cycle == c0]
                self._done = [c for c in self._done if c.cycle != c0]
                return out
            if self.clk.now >= lim:
                return []
            if not self.feed and not self.batches:
                if lim < (1 << 61):
                    await self.clk.goto(lim)
                return []
            await RisingEdge(self.dut.clk)


@cocotb.test()
async def kv_bridge(dut):
    cfg = inputs()
    sp = KVScenarioParams.from_dict(cfg["scenario"])
    clock = ClockMap(sp.f_clk_mhz * 1e6)
    period_ns = 1e3 / sp.f_clk_mhz
    assert abs(period_ns - round(period_ns)) < 1e-9, f"f_clk_mhz={sp.f_clk_mhz} needs an integer period in ns"
    dut.forward_en.value = int(sp.forward)
    dut.max_reads.value = sp.outstanding
    for name in ("i__valid", "i__payload", "o__ready", "mem_req__ready", "mem_rsp__valid", "mem_rsp__payload"):
        getattr(dut, name).value = 0
    clk = await reset_with_clock(dut, int(round(period_ns)))
    dev = KVRTLDevice(dut, clk, clock, sp)
    scn = KVScenario(sp)
    t0 = time.perf_counter()
    await co_simulate(scn, dev)
    wall = time.perf_counter() - t0
    res = scn.result()
    res.update({"wall_s": wall, "device_busy_cycles": dev.busy_cycles, "sim_cycles": clk.now,
                "mem_reads": dev.mem.reads, "mem_writes": dev.mem.writes,
                "dut_forwarded": int(dut.forwarded.value)})
    missing = sum(1 for r in dev.responses if r is None)
    write_metrics({"result": res, "transcript": {"requests": dev.requests, "responses": dev.responses,
                                                 "image": dev.mem.image().hex()}})
    assert missing == 0, f"{missing} accepted requests got no response"
    assert not dev.mem.errors, dev.mem.errors[:5]
    assert not dev.sink.protocol_errors, dev.sink.protocol_errors[:5]

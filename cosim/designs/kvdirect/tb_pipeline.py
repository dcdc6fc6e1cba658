"""cocotb testbench of the KV-Direct pipeline against :class:`hwcosim.models.kvdirect.rtl_model.RTLStore`.

Inputs (written by :func:`hwcosim.cosim.designs.kvdirect.pipeline.run_pipeline`), ``inputs.json``:

- ``params`` (:class:`PipelineParams`), ``requests`` (156-bit words, in order), ``expected``
  (golden 76-bit response words, same order), ``image`` (golden final bucket array, hex),
  ``traffic`` (golden reads / writes of the no-forwarding RTL);
- memory model: ``latency`` (cycles from accepting a read to offering its data), ``jitter``
  (extra 0..jitter cycles per read, so responses return out of order), ``outstanding`` (reads
  the memory accepts before it stops taking requests; the DUT's ``max_reads`` is set to it, as
  the DMA engine owns that many tags), ``p_mem_stall`` (probability the memory refuses a cycle);
- traffic: ``p_idle`` (idle cycles before a request), ``p_stall`` (response sink refuses),
  ``forward`` (the DUT's ``forward_en``), ``seed``.

The memory model applies a write when it accepts it and samples a read's data when it accepts
the read: an ordered port, as PCIe orders a read behind earlier posted writes. A request's tag
is reused only after its response arrived (a client keeps tags unique in flight). Every response
is compared field by field with the golden one of its request; at the end the memory image is
compared line by line with the golden store's. Writes ``metrics.json``.
"""

from __future__ import annotations

import heapq
import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from hwcosim.cosim.flow.runs import as_words
from hwcosim.cosim.tb.common import (
    CycleCounter,
    StreamSink,
    inputs,
    start_clock_and_reset,
    write_metrics,
    write_outputs,
)
from hwcosim.hdl.kvdirect.pipeline import COUNTERS
from hwcosim.models.kvdirect.rtl_model import PipelineParams, unpack_response

_M512 = (1 << 512) - 1


class MemoryModel:
    """64 B-line memory with a fixed latency (+ jitter), an outstanding-read limit and stalls."""

    def __init__(self, dut, p: PipelineParams, counter: CycleCounter, latency: int, jitter: int,
                 outstanding: int, p_stall: float, seed: int):
        self.dut, self.counter, self.clk = dut, counter, counter.clk
        self.lines = [0] * p.n_buckets
        self.latency, self.jitter, self.limit = latency, jitter, outstanding
        self.p_stall, self.rng = p_stall, random.Random(seed)
        self.E = p.entry_bits
        self.pending: list[tuple[int, int, int]] = []  # (due, seq, response word)
        self.outstanding = 0
        self.max_outstanding = 0
        self.reads = self.writes = 0
        self.errors: list[str] = []
        self._seq = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        dut = self.dut
        cur = None
        dut.mem_rsp__valid.value = 0
        while True:
            now = self.counter.now
            ready = self.outstanding < self.limit and not (self.p_stall and self.rng.random() < self.p_stall)
            dut.mem_req__ready.value = int(ready)
            if cur is None and self.pending and self.pending[0][0] <= now:
                cur = heapq.heappop(self.pending)[2]
            dut.mem_rsp__valid.value = int(cur is not None)
            if cur is not None:
                dut.mem_rsp__payload.value = cur
            await ReadOnly()
            if not dut.mem_req__valid.value.is_resolvable:
                raise AssertionError(f"cycle {now}: mem_req valid is {dut.mem_req__valid.value} (max_reads="
                                     f"{dut.max_reads.value}, rsp_ready={dut.mem_rsp__ready.value})")
            if ready and dut.mem_req__valid.value:
                self._accept(int(dut.mem_req__payload.value), now)
            if cur is not None and dut.mem_rsp__ready.value == 1:
                cur = None
                self.outstanding -= 1
            await RisingEdge(self.clk)

    def _accept(self, w: int, now: int):
        we, addr = w & 1, (w >> 1) & ((1 << 30) - 1)
        rid = (w >> 31) & ((1 << self.E) - 1)
        if addr >= len(self.lines):
            self.errors.append(f"cycle {now}: access to line {addr} beyond the {len(self.lines)} buckets")
            return
        if we:
            self.lines[addr] = (w >> (31 + self.E)) & _M512
            self.writes += 1
            return
        self.reads += 1
        self.outstanding += 1
        self.max_outstanding = max(self.max_outstanding, self.outstanding)
        due = now + self.latency + (self.rng.randint(0, self.jitter) if self.jitter else 0)
        self._seq += 1
        heapq.heappush(self.pending, (due, self._seq, rid | self.lines[addr] << self.E))

    def image(self) -> bytes:
        return b"".join(x.to_bytes(64, "little") for x in self.lines)


@cocotb.test()
async def pipeline_matches_golden(dut):
    cfg = inputs()
    p = PipelineParams.from_dict(cfg["params"])
    reqs = [int(x) for x in cfg["requests"]]
    want = [int(x) for x in cfg["expected"]]
    n = len(reqs)
    seed = int(cfg.get("seed", 1))
    rng = random.Random(seed)

    dut.forward_en.value = int(bool(cfg.get("forward", True)))
    dut.max_reads.value = int(cfg["outstanding"])
    for name in ("i__valid", "i__payload", "o__ready", "mem_req__ready", "mem_rsp__valid", "mem_rsp__payload"):
        getattr(dut, name).value = 0  # drive every input through reset (no X reaches the registers)
    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    mem = MemoryModel(dut, p, counter, int(cfg["latency"]), int(cfg.get("jitter", 0)), int(cfg["outstanding"]),
                      float(cfg.get("p_mem_stall", 0.0)), seed + 7)
    sink = StreamSink(dut, "o", counter, float(cfg.get("p_stall", 0.0)), seed + 2)

    in_flight: dict[int, int] = {}     # tag -> request index
    mismatches: list[str] = []
    rtl_resp = [-1] * n              # the RTL's response word to each request (-1: none came)
    done = 0
    first_in = None

    def collect():
        nonlocal done
        while done < len(sink.words):
            r = unpack_response(sink.words[done])
            done += 1
            if r.tag not in in_flight:
                mismatches.append(f"response with tag {r.tag} that no request in flight carries")
                continue
            idx = in_flight.pop(r.tag)
            rtl_resp[idx] = sink.words[done - 1]
            g = unpack_response(want[idx])
            if r != g:
                mismatches.append(f"request {idx}: rtl {r} != golden {g}")

    p_idle = float(cfg.get("p_idle", 0.0))
    for idx, word in enumerate(reqs):
        tag = word & 0xFF
        while True:
            collect()
            if tag not in in_flight:
                break
            dut.i__valid.value = 0
            await RisingEdge(dut.clk)
        while p_idle and rng.random() < p_idle:
            dut.i__valid.value = 0
            await RisingEdge(dut.clk)
        dut.i__valid.value = 1
        dut.i__payload.value = word
        while True:
            await ReadOnly()
            taken = bool(dut.i__ready.value)
            now = counter.now
            await RisingEdge(dut.clk)
            if taken:
                in_flight[tag] = idx
                first_in = now if first_in is None else first_in
                break
    dut.i__valid.value = 0

    budget = 200 * n + 50 * (int(cfg["latency"]) + int(cfg.get("jitter", 0))) + 1000
    await sink.wait_for(n, budget)
    collect()
    await ClockCycles(dut.clk, int(cfg["latency"]) + int(cfg.get("jitter", 0)) + 20)  # nothing more may come
    await ReadOnly()
    extra = len(sink.words) - n

    gimg = bytes.fromhex(cfg["image"])
    rimg = mem.image()
    bad_lines = [i for i in range(p.n_buckets) if rimg[64 * i:64 * i + 64] != gimg[64 * i:64 * i + 64]]
    cycles = sink.cycles[n - 1] - first_in + 1
    ctr = {f"dut_{c}": int(getattr(dut, c).value) for c in COUNTERS}
    metrics = {
        "n_ops": n, "cycles": int(cycles), "ops_per_cycle": n / cycles, "mismatches": len(mismatches),
        "bad_lines": len(bad_lines), "extra_responses": extra, "mem_reads": mem.reads, "mem_writes": mem.writes,
        "golden_reads": cfg["traffic"]["reads"], "golden_writes": cfg["traffic"]["writes"],
        "max_outstanding": mem.max_outstanding, "protocol_errors": sink.protocol_errors[:5],
        "memory_errors": mem.errors[:5], **ctr,
    }
    write_metrics(metrics)
    write_outputs(rtl_resp=as_words(rtl_resp),  # in request order; and the memory image, one word per line
                  rtl_image=as_words(int.from_bytes(rimg[64 * i:64 * i + 64], "little") for i in range(p.n_buckets)))
    assert not mismatches, f"{len(mismatches)} of {n} responses differ from the golden model: {mismatches[:6]}"
    assert not bad_lines, (f"{len(bad_lines)} of {p.n_buckets} bucket lines differ from the golden store's "
                           f"image, first {bad_lines[:8]}")
    assert extra == 0, f"{extra} responses after the last request's"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert not mem.errors, mem.errors[:5]
    assert mem.max_outstanding <= int(cfg["outstanding"])
    assert ctr["dut_ops_in"] == n and ctr["dut_ops_out"] == n, ctr
    assert ctr["dut_mem_reads"] == mem.reads and ctr["dut_mem_writes"] == mem.writes, (ctr, mem.reads, mem.writes)

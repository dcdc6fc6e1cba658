"""cocotb testbench of the AXI top level of the FSS GEMM engine (:class:`hwcosim.hdl.fss.axi_top.FSSAxiTop`),
driven only through cocotbext-axi bus functional models.

``AxiStreamSource`` loads the weights (``s_axis_w``, 32-bit words of
:func:`hwcosim.cosim.designs.fss.gemm.pack_axi_weight_words`) and sends activations (``s_axis_x``),
``AxiStreamSink`` takes results (``m_axis_y``, one frame per column tile by ``tlast``) and
``AxiLiteMaster`` programs and polls the registers. Idle and back-pressure come from seeded
random pause generators (``p_pause_in`` on both sources, ``p_pause_out`` on the sink). Every
result word of every run is compared with :func:`hwcosim.models.fss.gemm.gemm` (``expected<i>`` in
``arrays.npz``, written by :func:`hwcosim.cosim.designs.fss.gemm.run_gemm_axi`), and every frame must hold exactly
one tile (``tlast`` placement).

Tests (the runner picks one with ``testcase``):

- ``axi_fss_golden``: reset values and identification, START before loading refused, one load,
  then every run in ``arrays.npz`` on the same weights; the per-run counters against
  :class:`hwcosim.models.fss.gemm.CycleModel` (exact when nothing pauses).
- ``axi_fss_errors``: SLVERR on unmapped reads/writes and read-only writes, size writes out of
  range, LOAD restarting a partial load, extra weight words, commands while busy; the runs in
  between stay bit-exact.
- ``axi_fss_long_stall``: ``m_axis_y`` refused for 5,000 cycles after the first tile, then
  resumed: nothing lost, nothing duplicated, ``STALL_OUT`` counts the stall.
- ``axi_fss_resets``: SOFT_RESET and a hardware ``rst`` in the middle of a weight load and in the
  middle of a run (streams active); the documented state afterwards, then a full load + run
  bit-exact. The BFMs are flushed as a driver flushes its DMA engines.

Writes ``metrics.json`` with what was measured.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource
from hwcosim.cosim.designs.fss.gemm import pack_axi_weight_words
from hwcosim.cosim.tb.common import arrays, inputs, write_metrics, write_outputs
from hwcosim.cosim.tb.common import pauses as _pauses
from hwcosim.cosim.tb.common import to_bytes as _to_bytes
from hwcosim.hdl.bbs.axi_top import bytes_up
from hwcosim.hdl.fss.axi_top import CTRL, ERROR, REGS, STATUS, WEIGHT_LEAD, config_words
from hwcosim.models.fss.gemm import CycleModel, FSSParams, pack_act_beats, unpack_output_beats

OKAY, SLVERR = 0, 2
#: the RTL's result words of each run so far (``rtl<i>``, (rows, T)), kept in outputs.npz
_RTL: dict = {}
COUNTERS = ("CYCLES", "MAC_BEATS", "STALL_OUT", "STARVE_W", "RUN_CYCLES", "OUT_BEATS")


def _bit(sig) -> int:
    try:
        return int(sig.value)
    except ValueError:  # X/Z before the first reset
        return 0


class Monitor:
    """Cycle numbers of ``s_axis_w`` transfers and of SOFT_RESET writes (sampled as the BFMs sample)."""

    def __init__(self, dut):
        self.dut, self.cycle, self.w, self.soft = dut, 0, [], []
        cocotb.start_soon(self._run())

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if _bit(d.s_axis_w_tvalid) and _bit(d.s_axis_w_tready):
                self.w.append(self.cycle)
            if (_bit(d.s_axil_awvalid) and _bit(d.s_axil_wvalid) and _bit(d.s_axil_awready)
                    and _bit(d.s_axil_awaddr) >> 2 == REGS["CTRL"] >> 2 and _bit(d.s_axil_wdata) & CTRL["SOFT_RESET"]):
                self.soft.append(self.cycle)

    def words_after_soft_reset(self) -> int:
        return sum(c > self.soft[-1] for c in self.w)


class TB:
    """Clock, BFMs and register helpers around one :class:`FSSAxiTop`."""

    def __init__(self, dut, p: FSSParams, p_in: float = 0.0, p_out: float = 0.0, seed: int = 1):
        self.dut, self.p = dut, p
        self.p_in, self.p_out, self.seed = p_in, p_out, seed
        Clock(dut.clk, 10, unit="ns").start()
        dut.rst.value = 1
        self.wsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_w"), dut.clk, dut.rst)
        self.xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_x"), dut.clk, dut.rst)
        self.ysink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_y"), dut.clk, dut.rst)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.xbytes = bytes_up(p.r_w * p.pe_cols * p.act_fmt.width) // 8
        self.ybytes = bytes_up(p.out_lanes * p.out_fmt.width) // 8
        self.set_pauses(p_in, p_out)
        self.mon = Monitor(dut)

    def set_pauses(self, p_in: float, p_out: float):
        self.wsrc.set_pause_generator(_pauses(p_in, self.seed))
        self.xsrc.set_pause_generator(_pauses(p_in, self.seed + 1))
        self.ysink.set_pause_generator(_pauses(p_out, self.seed + 2))

    async def reset(self, cycles: int = 4):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    # -- registers ------------------------------------------------------------------------------
    async def read(self, addr: int) -> tuple[int, int]:
        r = await self.axil.read(addr, 4)
        return int.from_bytes(bytes(r.data), "little"), int(r.resp)

    async def write(self, addr: int, value: int) -> int:
        r = await self.axil.write(addr, int(value).to_bytes(4, "little"))
        return int(r.resp)

    async def rd(self, name: str) -> int:
        v, resp = await self.read(REGS[name])
        assert resp == OKAY, f"read of {name} answered {resp}"
        return v

    async def wr(self, name: str, value: int, resp: int = OKAY):
        got = await self.write(REGS[name], value)
        assert got == resp, f"write of {value:#x} to {name} answered {got}, expected {resp}"

    async def counters(self) -> dict[str, int]:
        return {k: await self.rd(k) for k in COUNTERS}

    async def wait_status(self, mask: int, want: int, polls: int, what: str) -> int:
        for _ in range(polls):
            st = await self.rd("STATUS")
            if st & mask == want:
                return st
        raise AssertionError(f"{what}: STATUS={st:#x} after {polls} polls")

    async def wait_reg(self, name: str, at_least: int, polls: int) -> int:
        for _ in range(polls):
            v = await self.rd(name)
            if v >= at_least:
                return v
        raise AssertionError(f"{name} stayed below {at_least} (last {v})")

    # -- streams --------------------------------------------------------------------------------
    async def load(self, words: list[int], extra: int = 0):
        """Send one weight load (and ``extra`` stray words) and wait until STATUS.loaded."""
        await self.wsrc.send(AxiStreamFrame(_to_bytes(list(words) + [0xDEADBEEF] * extra, 4)))
        await self.wsrc.wait()
        await self.wait_status(STATUS["LOADED"], STATUS["LOADED"], 50, "weights sent")

    def queue_x(self, x: np.ndarray):
        self.xsrc.send_nowait(AxiStreamFrame(_to_bytes(pack_act_beats(self.p, x), self.xbytes)))

    async def recv_tiles(self, n: int, row_groups: int, timeout_us: float) -> list[int]:
        """Receive ``n`` frames, check each is one tile (``tlast``), return the result words."""
        words = []
        for i in range(n):
            frame = await with_timeout(self.ysink.recv(), timeout_us, "us")
            data = bytes(frame.tdata)
            assert len(data) == row_groups * self.ybytes, \
                f"frame {i} holds {len(data)} bytes, a tile is {row_groups} x {self.ybytes} (tlast misplaced)"
            words += [int.from_bytes(data[j * self.ybytes:(j + 1) * self.ybytes], "little")
                      for j in range(row_groups)]
        return words

    def flush(self, *bfms):
        """What a driver does to its DMA engines with SOFT_RESET: drop queued and in-flight frames."""
        for b in bfms:
            b.clear()
            b.assert_reset()


class Job:
    """The shape and data of the runs in ``arrays.npz``."""

    def __init__(self, p: FSSParams, cfg: dict, a: dict):
        self.p = p
        self.rows, self.cols = int(cfg["rows"]), int(cfg["cols"])
        self.rg, self.kr = self.rows // p.rows_per_group, self.cols // p.r_w
        self.words = pack_axi_weight_words(p, a["values"], a["indices"])
        self.xs = [a[f"x{i}"] for i in range(int(cfg["runs"]))]
        self.expected = [a[f"expected{i}"] for i in range(int(cfg["runs"]))]


async def program(tb: TB, job: Job):
    await tb.wr("ROW_GROUPS", job.rg)
    await tb.wr("K_REGIONS", job.kr)


async def run_and_check(tb: TB, job: Job, i: int, *, queue_before_start: bool = True) -> dict:
    """One run of ``xs[i]`` on the loaded weights; every word compared. Returns its counters."""
    p, x, want = tb.p, job.xs[i], job.expected[i]
    t = x.shape[1]
    tiles = t // p.pe_cols
    model = CycleModel(p, weight_lead=WEIGHT_LEAD)
    await tb.wr("TILES", tiles)
    if queue_before_start:
        tb.queue_x(x)
    await tb.wr("CTRL", CTRL["START"])
    if not queue_before_start:
        tb.queue_x(x)
    budget_us = 0.01 * 50 * (model.expected(job.rows, job.cols, t) + 200)
    words = await tb.recv_tiles(tiles, job.rg, budget_us + 100)
    st = await tb.wait_status(STATUS["DONE"] | STATUS["BUSY"], STATUS["DONE"], 50, "run end")
    await ClockCycles(tb.dut.clk, 20)
    assert tb.ysink.empty(), "result beats after the last tile"
    got = unpack_output_beats(p, words, job.rows, t)
    _RTL[f"rtl{i}"] = got
    write_outputs(**_RTL)
    mism = np.argwhere(got != want)
    if len(mism):
        first = [(int(r), int(c), int(got[r, c]), int(want[r, c])) for r, c in mism[:8]]
        raise AssertionError(f"run {i}: {len(mism)} of {want.size} result words differ; "
                             f"(row, col, rtl, golden): {first}")
    ctr = await tb.counters()
    beats = model.weight_beats(job.rows, job.cols, t)
    assert ctr["MAC_BEATS"] == beats and ctr["OUT_BEATS"] == tiles * job.rg, (ctr, beats)
    assert ctr["CYCLES"] >= model.ideal(job.rows, job.cols, t) and ctr["RUN_CYCLES"] >= ctr["CYCLES"], ctr
    return {"status": st, "words_compared": int(want.size), "T": t,
            "expected_cycles": model.expected(job.rows, job.cols, t), **{k.lower(): v for k, v in ctr.items()}}


async def _start(dut):
    cfg = inputs()
    p = FSSParams.from_dict(cfg["params"])
    job = Job(p, cfg, arrays())
    tb = TB(dut, p, float(cfg.get("p_pause_in", 0.0)), float(cfg.get("p_pause_out", 0.0)), int(cfg.get("seed", 1)))
    await tb.reset()
    return tb, job


@cocotb.test()
async def axi_fss_golden(dut):
    tb, job = await _start(dut)
    p = tb.p
    for name, want in config_words(p).items():
        got = await tb.rd(name)
        assert got == want, f"{name}={got:#x}, expected {want:#x}"
    resets = {k: await tb.rd(k) for k in ("ROW_GROUPS", "K_REGIONS", "TILES", "STATUS", "ERROR", "W_WORDS")}
    assert resets == {"ROW_GROUPS": p.max_row_groups, "K_REGIONS": p.max_k_regions, "TILES": 1,
                      "STATUS": 0, "ERROR": 0, "W_WORDS": 0}, resets
    await tb.wr("CTRL", CTRL["START"])              # START before loading: refused, ERROR.START_UNLOADED
    err_unloaded, st = await tb.rd("ERROR"), await tb.rd("STATUS")
    assert err_unloaded == ERROR["START_UNLOADED"] and st == STATUS["ERROR"], (err_unloaded, st)
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    assert await tb.rd("ERROR") == 0

    await program(tb, job)
    await tb.load(job.words)
    assert await tb.rd("W_WORDS") == len(job.words) and await tb.rd("STATUS") == STATUS["LOADED"]
    runs = []
    for i in range(len(job.xs)):
        r = await run_and_check(tb, job, i)
        assert r["status"] == STATUS["LOADED"] | STATUS["DONE"], r
        if tb.p_in == tb.p_out == 0:
            # the wrapper adds no stage and the store reads ahead: the engine's cycle model holds
            assert r["cycles"] == r["run_cycles"] == r["expected_cycles"], r
            # (a one-column tile is loaded before the first weight beat arrives: WEIGHT_LEAD - 1 cycles)
            assert r["stall_out"] == 0 and r["starve_w"] == max(0, WEIGHT_LEAD - job.kr), r
        runs.append(r)
    assert await tb.rd("ERROR") == 0
    write_metrics({"err_start_unloaded": err_unloaded, "weight_words": len(job.words), "runs": runs,
                   "mismatches": 0})


@cocotb.test()
async def axi_fss_errors(dut):
    tb, job = await _start(dut)
    p = tb.p
    seen = {}
    # unmapped addresses and read-only registers: SLVERR, ERROR.BAD_ADDRESS
    for addr in (0x44, 0x80, 0xFC):
        v, resp = await tb.read(addr)
        assert (v, resp) == (0, SLVERR), (hex(addr), v, resp)
    assert await tb.rd("ERROR") == ERROR["BAD_ADDRESS"]
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    for addr in (0x44, 0xFC, REGS["STATUS"], REGS["CYCLES"], REGS["ID"]):
        assert await tb.write(addr, 0x1234) == SLVERR, hex(addr)
    seen["slverr_error"] = await tb.rd("ERROR")
    assert seen["slverr_error"] == ERROR["BAD_ADDRESS"] and await tb.rd("ID") == config_words(p)["ID"]
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    # sizes out of range: refused, the register keeps its value
    await program(tb, job)
    await tb.wr("TILES", 2)
    for name, bad in (("ROW_GROUPS", 0), ("ROW_GROUPS", p.max_row_groups + 1), ("K_REGIONS", 0),
                      ("K_REGIONS", p.max_k_regions + 1), ("K_REGIONS", 0x10000 + job.kr), ("TILES", 0)):
        await tb.wr(name, bad, resp=SLVERR)
    sizes = [await tb.rd(k) for k in ("ROW_GROUPS", "K_REGIONS", "TILES")]
    assert sizes == [job.rg, job.kr, 2], sizes
    assert await tb.rd("ERROR") == ERROR["BAD_SIZE"]
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    # START before loading
    await tb.wr("CTRL", CTRL["START"])
    assert await tb.rd("ERROR") == ERROR["START_UNLOADED"] and not await tb.rd("STATUS") & STATUS["BUSY"]
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    # a partial load, then LOAD restarts it
    half = len(job.words) // 2
    await tb.wsrc.send(AxiStreamFrame(_to_bytes(job.words[:half], 4)))
    await tb.wsrc.wait()
    await ClockCycles(tb.dut.clk, 4)
    seen["partial"] = (await tb.rd("STATUS"), await tb.rd("W_WORDS"))
    assert seen["partial"] == (STATUS["LOADING"], half), seen
    await tb.wr("CTRL", CTRL["LOAD"])
    assert (await tb.rd("STATUS"), await tb.rd("W_WORDS")) == (0, 0)
    # a full load with three stray words: loaded, ERROR.EXTRA_WEIGHTS, the run still exact
    await tb.load(job.words, extra=3)
    await ClockCycles(tb.dut.clk, 4)
    assert await tb.rd("ERROR") == ERROR["EXTRA_WEIGHTS"] and await tb.rd("W_WORDS") == len(job.words)
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    r0 = await run_and_check(tb, job, 0)
    # a size write restarts the load (STATUS.loaded falls); START then refused
    await tb.wr("K_REGIONS", job.kr)
    assert await tb.rd("STATUS") & STATUS["LOADED"] == 0 and await tb.rd("W_WORDS") == 0
    await tb.load(job.words)
    # commands while busy: ignored, ERROR.BUSY, SLVERR for the size write; LOAD+START together refused
    tb.ysink.clear_pause_generator()
    tb.ysink.pause = True
    x = job.xs[-1]
    await tb.wr("TILES", x.shape[1] // p.pe_cols)
    tb.queue_x(x)
    await tb.wr("CTRL", CTRL["START"])
    assert await tb.rd("STATUS") & STATUS["BUSY"]
    await tb.wr("ROW_GROUPS", 1, resp=SLVERR)
    await tb.wr("TILES", 1, resp=SLVERR)
    await tb.wr("CTRL", CTRL["START"])
    await tb.wr("CTRL", CTRL["LOAD"])
    seen["busy"] = (await tb.rd("ERROR"), await tb.rd("STATUS"), await tb.rd("ROW_GROUPS"))
    assert seen["busy"] == (ERROR["BUSY"], STATUS["BUSY"] | STATUS["LOADED"] | STATUS["ERROR"], job.rg), seen
    tb.ysink.pause = False
    tb.set_pauses(tb.p_in, tb.p_out)
    i = len(job.xs) - 1
    words = await tb.recv_tiles(x.shape[1] // p.pe_cols, job.rg, 1000)
    got = unpack_output_beats(p, words, job.rows, x.shape[1])
    assert (got == job.expected[i]).all(), f"{int((got != job.expected[i]).sum())} words differ after busy commands"
    await tb.wait_status(STATUS["BUSY"] | STATUS["DONE"], STATUS["DONE"], 50, "run end")
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    await tb.wr("CTRL", CTRL["LOAD"] | CTRL["START"])
    seen["load_start"] = (await tb.rd("ERROR"), await tb.rd("STATUS"))
    assert seen["load_start"] == (ERROR["START_UNLOADED"], STATUS["DONE"] | STATUS["ERROR"]), seen
    write_metrics({"errors": {k: list(v) if isinstance(v, tuple) else v for k, v in seen.items()},
                   "run0": r0, "mismatches": 0})


@cocotb.test()
async def axi_fss_long_stall(dut):
    tb, job = await _start(dut)
    p = tb.p
    stall = int(inputs().get("stall_cycles", 5000))
    x = job.xs[0]
    tiles = x.shape[1] // p.pe_cols
    assert tiles >= 2, "the long-stall test needs at least two column tiles"
    await program(tb, job)
    await tb.load(job.words)
    await tb.wr("TILES", tiles)
    tb.queue_x(x)
    await tb.wr("CTRL", CTRL["START"])
    words = await tb.recv_tiles(1, job.rg, 1000)
    tb.ysink.clear_pause_generator()
    tb.ysink.pause = True
    await ClockCycles(dut.clk, 50)
    before = await tb.counters()
    await ClockCycles(dut.clk, stall)
    await ReadOnly()
    held = int(dut.m_axis_y_tvalid.value)
    await RisingEdge(dut.clk)
    after = await tb.counters()
    assert held == 1 and await tb.rd("STATUS") & STATUS["BUSY"], "the engine should hold a result beat"
    assert after["OUT_BEATS"] == before["OUT_BEATS"] and after["MAC_BEATS"] == before["MAC_BEATS"], (before, after)
    assert after["STALL_OUT"] - before["STALL_OUT"] >= stall, (before, after)
    tb.ysink.pause = False
    tb.set_pauses(tb.p_in, tb.p_out)
    words += await tb.recv_tiles(tiles - 1, job.rg, 1000)
    await tb.wait_status(STATUS["BUSY"] | STATUS["DONE"], STATUS["DONE"], 50, "run end")
    await ClockCycles(dut.clk, 20)
    assert tb.ysink.empty()
    got = unpack_output_beats(p, words, job.rows, x.shape[1])
    n_bad = int((got != job.expected[0]).sum())
    ctr = await tb.counters()
    write_metrics({"stall_cycles": stall, "before": before, "after": after, "final": ctr, "mismatches": n_bad})
    assert n_bad == 0, f"{n_bad} result words differ after the long stall"
    assert ctr["OUT_BEATS"] == tiles * job.rg and ctr["STALL_OUT"] >= stall, ctr


async def _check_after_reset(tb: TB, job: Job, hard: bool, what: str) -> dict:
    """The documented state after SOFT_RESET (sizes, ERROR kept) or rst (everything at reset)."""
    p = tb.p
    st, err = await tb.rd("STATUS"), await tb.rd("ERROR")
    sizes = [await tb.rd(k) for k in ("ROW_GROUPS", "K_REGIONS")]
    ctr = await tb.counters()
    assert all(v == 0 for v in ctr.values()), (what, ctr)
    assert int(tb.dut.m_axis_y_tvalid.value) == 0 and int(tb.dut.s_axis_x_tready.value) == 0, what
    if hard:
        assert (st, err, sizes) == (0, 0, [p.max_row_groups, p.max_k_regions]), (what, st, err, sizes)
        assert await tb.rd("TILES") == 1 and await tb.rd("W_WORDS") == 0, what
    else:
        # ERROR and the sizes survive; the load is gone: the words that arrived after the
        # SOFT_RESET cycle (before the DMA flush) begin a new one, which LOAD discards
        assert st & (STATUS["BUSY"] | STATUS["DONE"] | STATUS["LOADED"]) == 0, (what, st)
        assert err == ERROR["BAD_ADDRESS"] and sizes == [job.rg, job.kr], (what, err, sizes)
        late = tb.mon.words_after_soft_reset()
        assert await tb.rd("W_WORDS") == late and bool(st & STATUS["LOADING"]) == (late > 0), (what, late, st)
        await tb.wr("CTRL", CTRL["LOAD"] | CTRL["CLEAR_ERROR"])
        assert (await tb.rd("STATUS"), await tb.rd("W_WORDS")) == (0, 0), what
    return {"status": st, "error": err, "sizes": sizes,
            "late_words": tb.mon.words_after_soft_reset() if not hard else 0}


@cocotb.test()
async def axi_fss_resets(dut):
    tb, job = await _start(dut)
    log = {}
    for hard in (False, True):
        kind = "rst" if hard else "soft_reset"
        for phase in ("load", "run"):
            what = f"{kind} during {phase}"
            await program(tb, job)
            await tb.read(0x44)                         # leave an ERROR bit that SOFT_RESET must keep
            if phase == "load":
                await tb.wsrc.send(AxiStreamFrame(_to_bytes(job.words, 4)))
                await tb.wait_reg("W_WORDS", len(job.words) // 2, 400)
            else:
                await tb.load(job.words)
                x = job.xs[0]
                await tb.wr("TILES", x.shape[1] // tb.p.pe_cols)
                tb.queue_x(x)
                await tb.wr("CTRL", CTRL["START"])
                await tb.wait_reg("OUT_BEATS", 1, 400)
                assert await tb.rd("STATUS") & STATUS["BUSY"], f"{what}: the run ended before the reset"
            if phase == "load":
                assert await tb.rd("STATUS") & STATUS["LOADING"], f"{what}: the load ended before the reset"
            if hard:
                await tb.reset(3)                       # the BFMs see rst and drop their frames
            else:
                await tb.wr("CTRL", CTRL["SOFT_RESET"])
            tb.flush(tb.wsrc, tb.xsrc, tb.ysink)        # and frames already received or queued
            await ClockCycles(dut.clk, 2)
            log[what] = await _check_after_reset(tb, job, hard, what)
            # recovery: a full load and a run, bit-exact
            await program(tb, job)
            await tb.load(job.words)
            log[what]["run"] = await run_and_check(tb, job, len(job.xs) - 1)
            await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    write_metrics({"resets": log, "mismatches": 0})

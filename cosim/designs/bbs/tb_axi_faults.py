"""cocotb testbench: faults at the interfaces of the BBS LSTM board top
(:class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop`), driven only through cocotbext-axi bus functional models.

The weights sit in an ``AxiRamRead`` memory model on ``m_axi`` (:class:`FaultyRam` can answer
SLVERR or DECERR for chosen byte addresses); ``s_axis_w``, ``s_axis_x`` and ``m_axis_h`` are
AXI4-Stream BFMs, ``s_axil`` an AXI4-Lite master. :class:`ReadMonitor` watches the read
channels on every clock edge and records every protocol violation (ARVALID/ARADDR/ARLEN not
held until ARREADY, a burst across 4 KiB or longer than the build's limit, a burst whose beat
count differs from ARLEN + 1), so that every test can check that the bursts in flight at a
fault were drained and that no burst was issued after it.

Scenarios beyond the read-master faults: ``axil_slverr`` (AXI4-Lite accesses outside the
register map and writes to read-only registers answer SLVERR, set ERROR.bad_address, change
nothing, in the middle of a LOAD_MM and of a run) and ``mm_read_timeout`` (the memory stops
answering R beats, or ARREADY, in the middle of a LOAD_MM; built with a short
``mm_timeout_cycles``: the timeout is reported, the late beats are discarded, and both
documented recoveries, a LOAD_MM at once or SOFT_RESET first, rerun bit-exact).

Each ``@cocotb.test`` is one scenario of ``tests/bbs/test_bbs_axi_faults.py`` (run alone with
``testcase=``); every run compares every hidden word with the golden model (``expected`` for
weight set A, ``expected_b`` for set B, in ``arrays.npz``) and writes what it checked to
``metrics.json``.
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiRamRead,
    AxiReadBus,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)
from hwcosim.cosim.tb.common import arrays, inputs, write_metrics
from hwcosim.cosim.tb.common import pauses as _pauses
from hwcosim.cosim.tb.common import to_bytes as _to_bytes
from hwcosim.hdl.bbs.axi_top import CTRL, ERROR, REGS, STATUS, bytes_up
from hwcosim.models.bbs.lstm import LSTMParams, pack_bias_beats, pack_x_beats, unpack_h_beats
from hwcosim.models.bbs.spmxv import pack_weight_beats

OKAY, SLVERR = 0, 2
RAM_SIZE = 1 << 16
BASE = 0x1_0000_0FB8            # above 4 GiB (WADDR_HI = 1), 72 bytes below a 4 KiB boundary
BASE_B = 0x2400                 # a second buffer (weight set B)
BASE_C = 0x5000                 # a good copy of set A, beside a region that stays bad


def _stall(start: int, length: int, p: float = 0.0, seed: int = 0):
    """Pause pattern: random with probability ``p``, and a solid stall of ``length`` cycles
    starting at cycle ``start`` (counted from when the generator is installed)."""
    rng = random.Random(seed)
    n = 0
    while True:
        yield int(start <= n < start + length or (p > 0 and rng.random() < p))
        n += 1


def load_words(p: LSTMParams, values, indices, bias) -> list[int]:
    """The ``s_axis_w`` / memory word list of a weight set (weights, then biases)."""
    bbs = p.bbs
    nw = -(-(bbs.pes * bbs.banks * bbs.lane_width) // 32)
    nb = -(-(p.pes * p.gate_fmt.width) // 32)
    words = [(int(b) >> (32 * i)) & 0xFFFFFFFF for b in pack_weight_beats(bbs, values, indices) for i in range(nw)]
    words += [(int(b) >> (32 * i)) & 0xFFFFFFFF for b in pack_bias_beats(p, bias) for i in range(nb)]
    return words


class FaultyRam(AxiRamRead):
    """``AxiRamRead`` that answers ``resp`` for every beat whose byte address lies in one of
    ``faults`` (``[(lo, hi, resp)]``, ``hi`` exclusive); the data of such a beat is still sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.faults: list[tuple[int, int, int]] = []
        self.bad_beats = 0
        self._addr = 0
        send = self.r_channel.send

        async def send_with_faults(r):
            for lo, hi, resp in self.faults:
                if lo <= self._addr < hi:
                    r.rresp = resp
                    self.bad_beats += 1
            await send(r)

        self.r_channel.send = send_with_faults

    async def _read(self, address, length):
        self._addr = address            # the beat about to be sent (full address, before % size)
        return await super()._read(address, length)


class ReadMonitor:
    """Protocol checker and counter on the ``m_axi`` read channels (samples at rising edges)."""

    def __init__(self, dut, max_burst: int, nbytes: int):
        self.dut, self.max_burst, self.nbytes = dut, max_burst, nbytes
        self.violations: list[str] = []
        self.cycle = 0
        self.reset_counts()
        cocotb.start_soon(self._run())

    def reset_counts(self):
        self.bursts: list[tuple[int, int, int]] = []      # accepted (cycle, addr, beats)
        self.open: list[list[int]] = []                   # beats still due per accepted burst
        self.r_beats = 0
        self.r_err_beats = 0
        self.ar_wait = 0                                  # cycles ARVALID waited for ARREADY
        self.r_wait = 0                                   # cycles RREADY waited for RVALID
        self.held = None

    @property
    def ar_beats(self) -> int:
        return sum(b for _, _, b in self.bursts)

    @property
    def outstanding(self) -> int:
        return self.ar_beats - self.r_beats

    def bursts_since(self, cycle: int) -> int:
        return sum(1 for c, _, _ in self.bursts if c >= cycle)

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if int(d.rst.value):
                self.reset_counts()
                continue
            arvalid, arready = int(d.m_axi_arvalid.value), int(d.m_axi_arready.value)
            if self.held is not None:
                now = (arvalid, int(d.m_axi_araddr.value), int(d.m_axi_arlen.value))
                if now != (1, *self.held):
                    self.violations.append(f"cycle {self.cycle}: AR {self.held} changed to {now} before ARREADY")
                self.held = None
            if arvalid:
                addr, beats = int(d.m_axi_araddr.value), int(d.m_axi_arlen.value) + 1
                if beats > self.max_burst:
                    self.violations.append(f"burst of {beats} beats > {self.max_burst}")
                if addr // 4096 != (addr + beats * self.nbytes - 1) // 4096:
                    self.violations.append(f"burst {addr:#x} + {beats} beats crosses 4 KiB")
                if int(d.m_axi_arsize.value) != self.nbytes.bit_length() - 1 or int(d.m_axi_arburst.value) != 1:
                    self.violations.append("ARSIZE/ARBURST wrong")
                if arready:
                    self.bursts.append((self.cycle, addr, beats))
                    self.open.append([beats])
                else:
                    self.held = (addr, beats - 1)
                    self.ar_wait += 1
            self.r_wait += int(d.m_axi_rready.value) and not int(d.m_axi_rvalid.value) and bool(self.open)
            if int(d.m_axi_rvalid.value) and int(d.m_axi_rready.value):
                self.r_beats += 1
                self.r_err_beats += int(d.m_axi_rresp.value) >= 2
                if not self.open:
                    self.violations.append(f"cycle {self.cycle}: R beat with no burst outstanding")
                    continue
                self.open[0][0] -= 1
                last = int(d.m_axi_rlast.value)
                if last != (self.open[0][0] == 0):
                    self.violations.append(f"cycle {self.cycle}: RLAST {last} with {self.open[0][0]} beats due")
                if self.open[0][0] == 0:
                    self.open.pop(0)


class TB:
    def __init__(self, dut):
        cfg = inputs()
        self.dut = dut
        self.p = p = LSTMParams.from_dict(cfg["params"])
        self.cfg = cfg
        a = arrays()
        self.a = a
        self.xs = a["xs"]
        self.n, self.T = self.xs.shape[0], self.xs.shape[1]
        self.words = load_words(p, a["values"], a["indices"], a["bias"])
        self.words_b = load_words(p, a["values_b"], a["indices_b"], a["bias_b"])
        self.dw = int(cfg["mm_data_width"])
        Clock(dut.clk, 10, unit="ns").start()
        self.wsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_w"), dut.clk, dut.rst)
        self.xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_x"), dut.clk, dut.rst)
        self.hsink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_h"), dut.clk, dut.rst)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.ram = FaultyRam(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=RAM_SIZE)
        self.mon = ReadMonitor(dut, int(cfg["mm_max_burst"]), self.dw // 8)
        self.xbytes = bytes_up(p.input_size * p.vec_fmt.width) // 8
        self.hbytes = bytes_up(p.units * p.vec_fmt.width) // 8
        self.put(BASE, self.words)
        self.put(BASE_B, self.words_b)
        self.metrics: dict = {}

    # --- plumbing -----------------------------------------------------------------------------
    def put(self, addr: int, words):
        data = _to_bytes(words, 4)
        data += bytes(-len(data) % (self.dw // 8))
        self.ram.write(addr % RAM_SIZE, data)

    def stalls(self, *, ar=None, r=None, w=None, x=None, h=None):
        """Install pause generators (``None``: leave as is)."""
        for chan, gen in ((self.ram.ar_channel, ar), (self.ram.r_channel, r), (self.wsrc, w), (self.xsrc, x),
                          (self.hsink, h)):
            if gen is not None:
                chan.set_pause_generator(gen)

    async def hw_reset(self, cycles: int = 4):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def rd(self, name: str) -> int:
        return await self.axil.read_dword(REGS[name])

    async def wr(self, name: str, value: int):
        await self.axil.write_dword(REGS[name], value)

    async def read(self, addr: int) -> tuple[int, int]:
        """A raw AXI4-Lite read: (data, RRESP)."""
        r = await self.axil.read(addr, 4)
        return int.from_bytes(bytes(r.data), "little"), int(r.resp)

    async def write(self, addr: int, value: int) -> int:
        """A raw AXI4-Lite write: BRESP."""
        r = await self.axil.write(addr, int(value).to_bytes(4, "little"))
        return int(r.resp)

    async def ctrl(self, *bits: str):
        await self.wr("CTRL", sum(CTRL[b] for b in bits))

    async def wait_status(self, mask: int, value: int, what: str, limit: int = 20000) -> int:
        for _ in range(limit):
            st = await self.rd("STATUS")
            if st & mask == value:
                return st
        raise AssertionError(f"STATUS never reached {what} (last {st:#x}); "
                             f"read protocol violations: {self.mon.violations[:3]}")

    async def set_waddr(self, addr: int):
        await self.wr("WADDR_LO", addr & 0xFFFFFFFF)
        await self.wr("WADDR_HI", addr >> 32)

    async def load_mm(self, addr: int = BASE):
        await self.set_waddr(addr)
        await self.ctrl("LOAD_MM")
        st = await self.wait_status(STATUS["LOADED"] | STATUS["LOADING"] | STATUS["MM_BUSY"], STATUS["LOADED"],
                                    "loaded after LOAD_MM")
        assert self.mon.outstanding == 0, f"{self.mon.outstanding} read beats outstanding after the load"
        return st

    async def load_mm_wait(self):
        """Wait for a LOAD_MM already given to finish (loaded, nothing in flight)."""
        st = await self.wait_status(STATUS["LOADED"] | STATUS["LOADING"] | STATUS["MM_BUSY"] | STATUS["MM_STALE"],
                                    STATUS["LOADED"], "loaded after LOAD_MM")
        assert self.mon.outstanding == 0, f"{self.mon.outstanding} read beats outstanding after the load"
        return st

    async def load_stream(self, words):
        await self.wsrc.send(AxiStreamFrame(_to_bytes(words, 4)))
        await self.wsrc.wait()
        return await self.wait_status(STATUS["LOADED"] | STATUS["LOADING"], STATUS["LOADED"], "loaded (stream)")

    def flush_streams(self):
        """What a driver does with its DMA channels at a SOFT_RESET: drop what is queued and in
        flight (a partial output frame included)."""
        for bfm in (self.wsrc, self.xsrc, self.hsink):
            bfm.clear()
            bfm.assert_reset()

    async def assert_idle_unloaded(self, err: int, what: str):
        """The documented state after a fault: not busy, not done, not loaded, nothing loading,
        ERROR == ``err``; ``s_axis_x`` refused, ``m_axis_h`` silent."""
        st = await self.wait_status(STATUS["MM_BUSY"] | STATUS["LOADING"], 0, f"{what}: loader idle")
        e = await self.rd("ERROR")
        want_st = STATUS["ERROR"] if err else 0
        assert st == want_st and e == err, f"{what}: STATUS {st:#x} (want {want_st:#x}), ERROR {e:#x} (want {err:#x})"
        for _ in range(20):
            await RisingEdge(self.dut.clk)
            assert not int(self.dut.s_axis_x_tready.value), f"{what}: s_axis_x_tready high while idle"
            assert not int(self.dut.m_axis_h_tvalid.value), f"{what}: m_axis_h_tvalid high while idle"
        assert self.mon.outstanding == 0, f"{what}: {self.mon.outstanding} read beats never drained"
        return st, e

    async def start_refused(self, what: str):
        e0 = await self.rd("ERROR")
        await self.ctrl("START")
        e = await self.rd("ERROR")
        st = await self.rd("STATUS")
        assert e == e0 | ERROR["START_UNLOADED"] and not st & STATUS["BUSY"], \
            f"{what}: START not refused (STATUS {st:#x}, ERROR {e:#x})"
        await ClockCycles(self.dut.clk, 20)
        assert self.hsink.empty(), f"{what}: hidden beats without a run"

    async def run(self, expected: np.ndarray, what: str, lo: int = 0, hi: int | None = None) -> dict:
        """START sequences ``lo:hi``, feed ``s_axis_x``, compare every hidden word."""
        hi = self.n if hi is None else hi
        p, T = self.p, self.T
        await self.wr("SEQ_LEN", T)
        await self.wr("NUM_SEQ", hi - lo)
        await self.ctrl("START")
        await self.xsrc.send(AxiStreamFrame(_to_bytes(pack_x_beats(p, self.xs[lo:hi]), self.xbytes)))
        words = []
        per_step = p.hidden // p.units
        for _ in range((hi - lo) * T):
            frame = await self.hsink.recv()
            data = bytes(frame.tdata)
            assert len(data) == per_step * self.hbytes, f"{what}: a step frame of {len(data)} bytes"
            words += [int.from_bytes(data[i * self.hbytes:(i + 1) * self.hbytes], "little") for i in range(per_step)]
        st = await self.wait_status(STATUS["BUSY"] | STATUS["DONE"], STATUS["DONE"], f"{what}: done")
        await ClockCycles(self.dut.clk, 20)
        assert self.hsink.empty(), f"{what}: hidden beats after the last step"
        h = unpack_h_beats(p, words)
        want = expected[lo:hi].reshape(-1)
        mism = np.flatnonzero(h != want)
        if mism.size:
            H = p.hidden
            first = [(int(i // (T * H)), int(i // H % T), int(i % H), int(h[i]), int(want[i])) for i in mism[:8]]
            raise AssertionError(f"{what}: {mism.size} of {want.size} hidden words differ; "
                                 f"(seq, step, unit, rtl, golden): {first}")
        regs = {k: await self.rd(k) for k in ("STEPS", "STALL_OUT", "RUN_CYCLES", "CYCLES", "ERROR")}
        assert regs["ERROR"] == 0, f"{what}: ERROR {regs['ERROR']:#x} after the run"
        return {"status": st, "words": int(want.size), **regs}

    def record(self, **kw):
        self.metrics.update(kw)
        write_metrics(self.metrics)

    def check_protocol(self):
        assert not self.mon.violations, f"AXI read protocol violations: {self.mon.violations[:5]}"


async def _setup(dut) -> TB:
    tb = TB(dut)
    await tb.hw_reset()
    return tb


@cocotb.test()
async def mm_load_with_random_stalls(dut):
    """LOAD_MM replaces stream-loaded weights; random AR/R/x/h stalls; bit-exact; reload."""
    tb = await _setup(dut)
    seed = int(tb.cfg.get("seed", 1))
    tb.stalls(ar=_pauses(0.7, seed), r=_pauses(0.5, seed + 1), w=_pauses(0.3, seed + 2),
              x=_pauses(0.3, seed + 3), h=_pauses(0.4, seed + 4))
    assert await tb.rd("LOAD_WORDS") == len(tb.words)
    # weight set B over the stream, run; then set A over m_axi, run: LOAD_MM really replaces them
    await tb.load_stream(tb.words_b)
    run_b = await tb.run(tb.a["expected_b"], "set B (stream)")
    st = await tb.load_mm(BASE)
    load_cycles = await tb.rd("LOAD_CYCLES")
    assert await tb.rd("WADDR_HI") == BASE >> 32 and await tb.rd("WADDR_LO") == BASE & 0xFFFFFFFF
    run_a = await tb.run(tb.a["expected"], "set A (LOAD_MM)", 0, tb.n - 1)
    run_a2 = await tb.run(tb.a["expected"], "set A, last sequence", tb.n - 1, tb.n)
    # reload from the second buffer while loaded, free-flowing memory
    tb.stalls(ar=_pauses(0.0, 0), r=_pauses(0.0, 0))
    await tb.load_mm(BASE_B)
    fast_cycles = await tb.rd("LOAD_CYCLES")
    run_b2 = await tb.run(tb.a["expected_b"], "set B (LOAD_MM reload)")
    tb.check_protocol()
    cut = [(a, b) for _, a, b in tb.mon.bursts if (a + b * tb.dw // 8) % 4096 == 0 and b < tb.mon.max_burst]
    assert cut, "no burst was cut at 4 KiB"
    assert tb.mon.ar_wait > 0 and tb.mon.r_wait > 0, (tb.mon.ar_wait, tb.mon.r_wait)
    tb.record(ar_wait=tb.mon.ar_wait, r_wait=tb.mon.r_wait, cut_bursts=len(cut))
    tb.record(status_loaded=st, load_cycles=load_cycles, load_cycles_fast=fast_cycles, run_b=run_b, run_a=run_a,
              run_a2=run_a2, run_b2=run_b2, bursts=len(tb.mon.bursts), r_beats=tb.mon.r_beats,
              max_burst_seen=max(b for _, _, b in tb.mon.bursts), words=len(tb.words))


@cocotb.test()
async def mm_read_errors(dut):
    """SLVERR then DECERR on chosen beats: ERROR, MM_ERR_* registers, drained bursts, START
    refused; CLEAR_ERROR + LOAD_MM from good memory + START is bit-exact. Refused LOAD_MMs."""
    tb = await _setup(dut)
    tb.stalls(ar=_pauses(0.3, 5), r=_pauses(0.3, 6), h=_pauses(0.2, 7))
    nb = tb.dw // 8
    out = {}
    # (name, response, failing word, where the good copy is)
    cases = [("slverr", 2, 37, None), ("decerr", 3, len(tb.words) - 1, BASE_C)]
    for name, resp, word, good in cases:
        bad = BASE + (word * 4 // nb) * nb                  # the bus beat holding that word
        tb.ram.faults = [(bad, bad + nb, resp)]
        if good is not None:
            tb.put(good, tb.words)                          # a good copy elsewhere
        await tb.set_waddr(BASE)
        burst0 = len(tb.mon.bursts)
        await tb.ctrl("LOAD_MM")
        await tb.assert_idle_unloaded(ERROR["MM_READ"], f"{name}: after the read error")
        got = {k: await tb.rd(k) for k in ("MM_ERR_RESP", "MM_ERR_ADDR_LO", "MM_ERR_ADDR_HI", "LOAD_CYCLES")}
        assert got["MM_ERR_RESP"] == resp, got
        assert got["MM_ERR_ADDR_LO"] | got["MM_ERR_ADDR_HI"] << 32 == bad, (got, hex(bad))
        assert got["LOAD_CYCLES"] == 0, got
        # issuing stopped: no burst starts after the failing beat's burst plus those in flight
        issued = sum(b for _, _, b in tb.mon.bursts[burst0:])
        limit = (bad - BASE) // nb + 1 + int(tb.cfg["mm_max_burst"]) * int(tb.cfg["mm_max_outstanding"])
        assert issued <= limit, f"{name}: {issued} beats issued after the error (limit {limit})"
        assert tb.ram.bad_beats >= 1 and tb.mon.r_err_beats >= 1
        await tb.start_refused(f"{name}: START after the read error")
        # a second error before CLEAR_ERROR does not overwrite the first record
        await tb.ctrl("LOAD_MM")
        await tb.assert_idle_unloaded(ERROR["MM_READ"] | ERROR["START_UNLOADED"], f"{name}: second error")
        assert await tb.rd("MM_ERR_RESP") == resp
        await tb.ctrl("CLEAR_ERROR")
        cleared = {k: await tb.rd(k) for k in ("ERROR", "MM_ERR_RESP", "MM_ERR_ADDR_LO", "MM_ERR_ADDR_HI")}
        assert not any(cleared.values()), cleared
        if good is None:
            tb.ram.faults = []                              # a transient error: retry the same buffer
            await tb.load_mm(BASE)
        else:
            await tb.load_mm(good)                          # the region stays bad: load the good copy
        out[name] = {"resp": resp, "addr": bad, "issued_beats": issued, **got,
                     "run": await tb.run(tb.a["expected"], f"{name}: after recovery")}
    tb.ram.faults = []
    # LOAD_MM refused: misaligned WADDR, and while a run is busy
    await tb.set_waddr(BASE + 2)
    ar0 = len(tb.mon.bursts)
    await tb.ctrl("LOAD_MM")
    e_unaligned = await tb.rd("ERROR")
    assert e_unaligned == ERROR["MM_UNALIGNED"] and len(tb.mon.bursts) == ar0, hex(e_unaligned)
    assert await tb.rd("STATUS") & STATUS["LOADED"], "a refused LOAD_MM must keep the weights"
    await tb.ctrl("CLEAR_ERROR")
    await tb.set_waddr(BASE)
    await tb.wr("SEQ_LEN", tb.T)
    await tb.wr("NUM_SEQ", tb.n)
    await tb.ctrl("START")
    await tb.ctrl("LOAD_MM")                                # busy: no x was sent, the run waits
    e_busy = await tb.rd("ERROR")
    assert e_busy == ERROR["LOAD_REFUSED"] and len(tb.mon.bursts) == ar0, hex(e_busy)
    await tb.ctrl("SOFT_RESET", "CLEAR_ERROR")
    assert await tb.rd("ERROR") == ERROR["ABANDONED"]
    tb.check_protocol()
    tb.record(cases=out, err_unaligned=e_unaligned, err_load_busy=e_busy, r_err_beats=tb.mon.r_err_beats)


@cocotb.test()
async def long_stalls(dut):
    """Thousands of cycles with ARREADY low, no R beat, no s_axis_w/x word, m_axis_h refused:
    nothing lost, bit-exact."""
    tb = await _setup(dut)
    AR_STALL, R_STALL, W_STALL, X_STALL, H_STALL = 2000, 3000, 2500, 2000, 4000
    tb.stalls(ar=_stall(0, AR_STALL, 0.2, 1), r=_stall(AR_STALL + 30, R_STALL, 0.2, 2))
    await tb.load_mm(BASE)
    load_cycles = await tb.rd("LOAD_CYCLES")
    assert load_cycles >= AR_STALL + R_STALL, load_cycles
    # x idle for 2000 cycles inside the run, then m_axis_h refused for 4000
    tb.stalls(x=_stall(0, X_STALL, 0.2, 3), h=_stall(X_STALL + 60, H_STALL, 0.3, 4))
    run = await tb.run(tb.a["expected"], "after the long stalls")
    assert run["STALL_OUT"] >= H_STALL and run["RUN_CYCLES"] >= X_STALL + H_STALL, run
    # the stream loader through a 2500-cycle gap (weights B), then a run
    await tb.ctrl("SOFT_RESET")
    tb.stalls(w=_stall(40, W_STALL, 0.1, 5), x=_pauses(0.0, 0), h=_pauses(0.0, 0))
    await tb.load_stream(tb.words_b)
    run_b = await tb.run(tb.a["expected_b"], "stream load through a long gap")
    tb.check_protocol()
    tb.record(load_cycles=load_cycles, run=run, run_b=run_b)


@cocotb.test()
async def soft_reset_mid_transfer(dut):
    """SOFT_RESET in the middle of a LOAD_MM fetch, a stream load and a run: documented state,
    then reload + run bit-exact."""
    tb = await _setup(dut)
    out = {}
    # 1. during LOAD_MM (reloading over loaded weights), with bursts in flight
    tb.stalls(r=_pauses(0.85, 11))
    await tb.load_mm(BASE)
    await tb.set_waddr(BASE_B)
    r0 = tb.mon.r_beats
    await tb.ctrl("LOAD_MM")
    for _ in range(3000):
        await RisingEdge(dut.clk)
        if tb.mon.r_beats - r0 >= 30 and tb.mon.outstanding > 0:
            break
    else:
        raise AssertionError("no read beats in flight to interrupt")
    tb.stalls(r=_stall(0, 10**9))                       # memory stops answering: the drain waits
    st_before = await tb.rd("STATUS")
    assert st_before & STATUS["LOADING"] and st_before & STATUS["MM_BUSY"], hex(st_before)
    await tb.ctrl("SOFT_RESET")
    cyc, in_flight = tb.mon.cycle, tb.mon.outstanding
    st_drain = await tb.rd("STATUS")
    assert st_drain == STATUS["LOADING"] | STATUS["MM_BUSY"] | STATUS["ERROR"], hex(st_drain)
    assert in_flight > 0
    await tb.ctrl("LOAD_MM")                            # refused while the drain is pending
    await ClockCycles(dut.clk, 200)
    tb.stalls(r=_pauses(0.5, 12))
    await tb.assert_idle_unloaded(ERROR["ABANDONED"] | ERROR["LOAD_REFUSED"], "SOFT_RESET in LOAD_MM")
    assert tb.mon.bursts_since(cyc) <= 1, "bursts issued after SOFT_RESET"
    await tb.start_refused("START after SOFT_RESET in LOAD_MM")
    await tb.ctrl("CLEAR_ERROR")
    await tb.load_mm(BASE)
    out["mm"] = {"status_before": st_before, "status_draining": st_drain, "in_flight_at_reset": in_flight,
                 "run": await tb.run(tb.a["expected"], "after SOFT_RESET in LOAD_MM")}

    # 2. during a stream load
    await tb.ctrl("SOFT_RESET")
    await tb.ctrl("CLEAR_ERROR")
    tb.stalls(w=_pauses(0.5, 13))
    tb.wsrc.send_nowait(AxiStreamFrame(_to_bytes(tb.words_b, 4)))
    await ClockCycles(dut.clk, len(tb.words) // 2)
    st_before = await tb.rd("STATUS")
    assert st_before == STATUS["LOADING"], hex(st_before)
    tb.wsrc.clear_pause_generator()
    tb.wsrc.pause = True
    await tb.ctrl("SOFT_RESET")
    tb.flush_streams()
    tb.wsrc.pause = False
    await tb.assert_idle_unloaded(ERROR["ABANDONED"], "SOFT_RESET in a stream load")
    await tb.ctrl("CLEAR_ERROR")
    await tb.load_stream(tb.words)
    out["stream"] = {"status_before": st_before,
                     "run": await tb.run(tb.a["expected"], "after SOFT_RESET in a stream load")}

    # 3. during a run (weights B loaded over m_axi), after two hidden steps are out
    await tb.ctrl("SOFT_RESET")
    await tb.ctrl("CLEAR_ERROR")
    await tb.load_mm(BASE_B)
    tb.stalls(h=_pauses(0.5, 14))
    await tb.wr("SEQ_LEN", tb.T)
    await tb.wr("NUM_SEQ", tb.n)
    await tb.ctrl("START")
    await tb.xsrc.send(AxiStreamFrame(_to_bytes(pack_x_beats(tb.p, tb.xs), tb.xbytes)))
    await tb.hsink.recv()
    await tb.hsink.recv()
    st_before = await tb.rd("STATUS")
    assert st_before & STATUS["BUSY"], hex(st_before)
    await tb.ctrl("SOFT_RESET")
    tb.flush_streams()
    await tb.assert_idle_unloaded(ERROR["ABANDONED"], "SOFT_RESET in a run")
    kept = {k: await tb.rd(k) for k in ("SEQ_LEN", "NUM_SEQ", "WADDR_LO", "WADDR_HI", "STEPS", "CYCLES")}
    assert kept == {"SEQ_LEN": tb.T, "NUM_SEQ": tb.n, "WADDR_LO": BASE_B & 0xFFFFFFFF, "WADDR_HI": BASE_B >> 32,
                    "STEPS": 0, "CYCLES": 0}, kept
    await tb.start_refused("START after SOFT_RESET in a run")
    await tb.ctrl("CLEAR_ERROR")
    await tb.load_mm(BASE_B)
    run = await tb.run(tb.a["expected_b"], "after SOFT_RESET in a run")
    assert run["STEPS"] == tb.n * tb.T, run
    out["run"] = {"status_before": st_before, "kept": kept, "run": run}
    tb.check_protocol()
    tb.record(**out)


@cocotb.test()
async def hw_reset_mid_transfer(dut):
    """The hardware reset in the middle of a LOAD_MM fetch, a stream load and a run: every
    register at its power-up value, then reload + run bit-exact."""
    tb = await _setup(dut)
    power_up = {"STATUS": 0, "ERROR": 0, "SEQ_LEN": 0, "NUM_SEQ": 0, "WADDR_LO": 0, "WADDR_HI": 0,
                "MM_ERR_RESP": 0, "MM_ERR_ADDR_LO": 0, "LOAD_CYCLES": 0, "STEPS": 0, "CYCLES": 0, "RUN_CYCLES": 0}

    async def after_reset(what):
        got = {k: await tb.rd(k) for k in power_up}
        assert got == power_up, f"{what}: {got}"
        await tb.assert_idle_unloaded(0, what)
        await tb.start_refused(what)
        await tb.ctrl("CLEAR_ERROR")

    out = {}
    # 1. LOAD_MM with bursts in flight; an error on record before it, to see it cleared
    tb.stalls(r=_pauses(0.8, 21))
    bad = BASE + 8 * tb.dw // 8
    tb.ram.faults = [(bad, bad + tb.dw // 8, 2)]
    await tb.set_waddr(BASE)
    await tb.ctrl("LOAD_MM")
    await tb.wait_status(STATUS["MM_BUSY"], 0, "drained after SLVERR")
    assert await tb.rd("MM_ERR_RESP") == 2
    tb.ram.faults = []
    await tb.wr("SEQ_LEN", tb.T)
    r0 = tb.mon.r_beats
    await tb.ctrl("LOAD_MM")
    for _ in range(3000):
        await RisingEdge(dut.clk)
        if tb.mon.r_beats - r0 >= 20 and tb.mon.outstanding > 0:
            break
    else:
        raise AssertionError("no read beats in flight to interrupt")
    out["mm_in_flight"] = tb.mon.outstanding
    await tb.hw_reset()
    await after_reset("rst in LOAD_MM")
    tb.stalls(r=_pauses(0.2, 22))
    await tb.load_mm(BASE)
    out["mm_run"] = await tb.run(tb.a["expected"], "after rst in LOAD_MM")

    # 2. a stream load
    await tb.hw_reset()
    tb.stalls(w=_pauses(0.5, 23))
    tb.wsrc.send_nowait(AxiStreamFrame(_to_bytes(tb.words_b, 4)))
    await ClockCycles(dut.clk, len(tb.words) // 2)
    assert await tb.rd("STATUS") == STATUS["LOADING"]
    await tb.hw_reset()                                 # the source is reset with the block
    await after_reset("rst in a stream load")
    await tb.load_stream(tb.words_b)
    out["stream_run"] = await tb.run(tb.a["expected_b"], "after rst in a stream load")

    # 3. a run
    tb.stalls(h=_pauses(0.5, 24))
    await tb.wr("SEQ_LEN", tb.T)
    await tb.wr("NUM_SEQ", tb.n)
    await tb.ctrl("START")
    await tb.xsrc.send(AxiStreamFrame(_to_bytes(pack_x_beats(tb.p, tb.xs), tb.xbytes)))
    await tb.hsink.recv()
    assert await tb.rd("STATUS") & STATUS["BUSY"]
    await tb.hw_reset()
    tb.hsink.clear()                                    # frames the sink took before the reset
    await after_reset("rst in a run")
    await tb.load_mm(BASE)
    out["run_run"] = await tb.run(tb.a["expected"], "after rst in a run")
    tb.check_protocol()
    tb.record(**out)


@cocotb.test()
async def axil_slverr(dut):
    """Unmapped reads and writes, and writes to read-only registers: SLVERR, data 0, nothing
    changed, ERROR.bad_address; mapped accesses stay OKAY; issued in the middle of a LOAD_MM and
    of a run, which complete bit-exact."""
    from hwcosim.hdl.bbs.axi_top import WRITABLE

    tb = await _setup(dut)
    unmapped = [a for a in range(0, 0x100, 4) if a not in REGS.values()]
    read_only = [a for n, a in REGS.items() if n not in WRITABLE]
    assert unmapped[0] == 0x48 and len(unmapped) == 64 - len(REGS)
    out = {}
    # every unmapped address reads 0 with SLVERR
    bad_reads = {a: await tb.read(a) for a in unmapped}
    wrong = {hex(a): v for a, v in bad_reads.items() if v != (0, SLVERR)}
    assert not wrong, wrong
    assert await tb.read(REGS["CTRL"]) == (0, OKAY), "CTRL is mapped (write-only, reads 0)"
    out["err_after_reads"] = await tb.rd("ERROR")
    assert out["err_after_reads"] == ERROR["BAD_ADDRESS"], hex(out["err_after_reads"])
    await tb.ctrl("CLEAR_ERROR")
    assert await tb.rd("ERROR") == 0
    # every mapped address reads OKAY
    for name, a in REGS.items():
        assert (await tb.read(a))[1] == OKAY, name
    assert await tb.rd("ERROR") == 0
    # writes to read-only registers and to unmapped addresses: SLVERR, nothing changes
    before = {n: await tb.rd(n) for n in REGS if n not in WRITABLE}
    for a in read_only + unmapped[::7] + [0xFC]:
        assert await tb.write(a, 0xFFFFFFFF) == SLVERR, hex(a)
    after = {n: await tb.rd(n) for n in REGS if n not in WRITABLE}
    before["ERROR"] = ERROR["BAD_ADDRESS"]
    before["STATUS"] |= STATUS["ERROR"]
    assert after == before, (before, after)
    # writable registers answer OKAY (and hold what was written)
    for name, v in (("SEQ_LEN", tb.T), ("NUM_SEQ", tb.n), ("WADDR_LO", BASE & 0xFFFFFFFF), ("WADDR_HI", BASE >> 32)):
        assert await tb.write(REGS[name], v) == OKAY and await tb.rd(name) == v, name
    assert await tb.write(REGS["CTRL"], CTRL["CLEAR_ERROR"]) == OKAY and await tb.rd("ERROR") == 0
    # bad accesses in the middle of a LOAD_MM (slow memory) ...
    tb.stalls(r=_pauses(0.7, 31), ar=_pauses(0.5, 32))
    await tb.ctrl("LOAD_MM")
    mid = []
    for a in (0x48, REGS["STATUS"], 0xFC):
        mid.append((await tb.read(a))[1])
        mid.append(await tb.write(a, 0x5A5A5A5A))
    assert mid == [SLVERR, SLVERR, OKAY, SLVERR, SLVERR, SLVERR], mid
    await tb.wait_status(STATUS["LOADED"] | STATUS["LOADING"] | STATUS["MM_BUSY"], STATUS["LOADED"],
                         "loaded after LOAD_MM with bad accesses")
    assert await tb.rd("ERROR") == ERROR["BAD_ADDRESS"]
    await tb.ctrl("CLEAR_ERROR")
    tb.stalls(r=_pauses(0.0, 0), ar=_pauses(0.0, 0), h=_pauses(0.6, 33))
    # ... and of a run (the hidden stream paused), then the run compared word for word
    await tb.wr("SEQ_LEN", tb.T)
    await tb.wr("NUM_SEQ", tb.n)
    await tb.ctrl("START")
    assert await tb.rd("STATUS") & STATUS["BUSY"]
    assert await tb.write(0x80, CTRL["SOFT_RESET"]) == SLVERR, "a bad write must not act as CTRL"
    assert await tb.write(REGS["STATUS"], 0) == SLVERR
    assert await tb.read(0xC0) == (0, SLVERR)
    await tb.xsrc.send(AxiStreamFrame(_to_bytes(pack_x_beats(tb.p, tb.xs), tb.xbytes)))
    words = []
    per_step = tb.p.hidden // tb.p.units
    for _ in range(tb.n * tb.T):
        data = bytes((await tb.hsink.recv()).tdata)
        words += [int.from_bytes(data[i * tb.hbytes:(i + 1) * tb.hbytes], "little") for i in range(per_step)]
    await tb.wait_status(STATUS["BUSY"] | STATUS["DONE"], STATUS["DONE"], "done after bad accesses")
    h = unpack_h_beats(tb.p, words)
    mism = int(np.count_nonzero(h != tb.a["expected"].reshape(-1)))
    assert mism == 0, f"{mism} hidden words differ after bad accesses"
    out["err_after_run"] = await tb.rd("ERROR")
    assert out["err_after_run"] == ERROR["BAD_ADDRESS"] and await tb.rd("STEPS") == tb.n * tb.T
    await tb.ctrl("CLEAR_ERROR")
    out["run2"] = await tb.run(tb.a["expected"], "a second run after bad accesses")
    tb.check_protocol()
    tb.record(unmapped=len(unmapped), read_only=len(read_only), mid_load=mid, **out)


async def _stuck_mid_load(tb: TB, addr: int, *, ar: bool, beats: int = 30):
    """Start a LOAD_MM from ``addr`` and make the memory stop answering after ``beats`` R beats:
    no more R beats, or (``ar``) no more AR handshakes, so that the bursts in flight complete
    and the reader ends waiting on a burst presented and never accepted. Returns the monitor's
    R beat count before the fetch."""
    tb.stalls(r=_pauses(0.3, 41), ar=_pauses(0.3, 42))
    await tb.set_waddr(addr)
    r0 = tb.mon.r_beats
    await tb.ctrl("LOAD_MM")
    for _ in range(5000):
        await RisingEdge(tb.dut.clk)
        if tb.mon.r_beats - r0 >= beats:
            break
    else:
        raise AssertionError("the fetch did not get going")
    if ar:
        tb.stalls(ar=_stall(0, 10**9))
    else:
        tb.stalls(r=_stall(0, 10**9))
    return r0


async def _timed_out(tb: TB, addr: int, r0: int, err: int, what: str) -> dict:
    """The documented state after a read timeout: loader idle, not loaded, ERROR ``err``,
    MM_ERR_RESP 4 at the first beat not received, mm_stale while bursts are owed; START
    refused."""
    T = int(tb.cfg["mm_timeout_cycles"])
    c0 = tb.mon.cycle
    st = await tb.wait_status(STATUS["MM_BUSY"] | STATUS["LOADING"], 0, f"{what}: loader idle after the timeout")
    waited = tb.mon.cycle - c0
    got = {k: await tb.rd(k) for k in ("ERROR", "MM_ERR_RESP", "MM_ERR_ADDR_LO", "MM_ERR_ADDR_HI", "LOAD_CYCLES")}
    received = tb.mon.r_beats - r0
    assert got["ERROR"] == err, f"{what}: ERROR {got['ERROR']:#x}, want {err:#x}"
    assert got["MM_ERR_RESP"] == 4 and got["LOAD_CYCLES"] == 0, (what, got)
    assert got["MM_ERR_ADDR_LO"] | got["MM_ERR_ADDR_HI"] << 32 == addr + received * tb.dw // 8, (what, got, received)
    owed = tb.mon.outstanding > 0 or int(tb.dut.m_axi_arvalid.value)
    assert owed, f"{what}: nothing was owed at the timeout"
    assert st == STATUS["ERROR"] | STATUS["MM_STALE"], f"{what}: STATUS {st:#x}"
    ar0 = len(tb.mon.bursts)
    await ClockCycles(tb.dut.clk, 2 * T)                  # still stuck: nothing issued, nothing moves
    assert len(tb.mon.bursts) == ar0 and await tb.rd("STATUS") == st, f"{what}: activity while stuck"
    await tb.start_refused(f"{what}: START after the timeout")
    return {"waited": waited, "received": received, "owed_beats": tb.mon.outstanding, **got}


@cocotb.test()
async def mm_read_timeout(dut):
    """The memory stops answering in the middle of LOAD_MM: the read timeout is reported
    (ERROR.mm_timeout, MM_ERR_RESP 4, the first missing beat's address, mm_stale); recovery
    by CLEAR_ERROR + LOAD_MM at once (behind the stale bursts), by SOFT_RESET after the memory
    came back, and after a SOFT_RESET whose drain timed out; every rerun bit-exact."""
    tb = await _setup(dut)
    T = int(tb.cfg["mm_timeout_cycles"])
    out = {}
    await tb.load_mm(BASE)
    out["run0"] = await tb.run(tb.a["expected"], "before the timeouts")

    # 1. R beats stop mid-fetch (reloading set B over A); LOAD_MM of set A given at once
    r0 = await _stuck_mid_load(tb, BASE_B, ar=False)
    out["r_stuck"] = await _timed_out(tb, BASE_B, r0, ERROR["MM_TIMEOUT"], "R stuck")
    await tb.ctrl("CLEAR_ERROR")
    stale_beats = tb.mon.outstanding
    await tb.set_waddr(BASE)
    await tb.ctrl("LOAD_MM")                                # accepted: issued behind the stale bursts
    await ClockCycles(dut.clk, T // 2)
    st = await tb.rd("STATUS")
    assert st & STATUS["MM_BUSY"] and st & STATUS["MM_STALE"] and st & STATUS["LOADING"], hex(st)
    tb.stalls(r=_pauses(0.3, 43))                           # the memory comes back
    await tb.load_mm_wait()
    out["r_stuck"]["stale_beats"] = stale_beats
    out["r_stuck"]["run"] = await tb.run(tb.a["expected"], "after R stuck: LOAD_MM behind the stale bursts")

    # 2. ARREADY stops mid-fetch (a burst stays presented); the memory comes back; SOFT_RESET,
    #    reload set B
    r0 = await _stuck_mid_load(tb, BASE_B, ar=True)
    out["ar_stuck"] = await _timed_out(tb, BASE_B, r0, ERROR["MM_TIMEOUT"], "AR stuck")
    out["ar_stuck"]["arvalid_held"] = int(dut.m_axi_arvalid.value)
    tb.stalls(r=_pauses(0.3, 44), ar=_pauses(0.3, 45))
    await tb.wait_status(STATUS["MM_STALE"], 0, "stale bursts drained")
    assert tb.mon.outstanding == 0
    await tb.ctrl("SOFT_RESET", "CLEAR_ERROR")
    assert await tb.rd("ERROR") == 0, "nothing was abandoned: the timeout had ended the fetch"
    await tb.load_mm(BASE_B)
    out["ar_stuck"]["run"] = await tb.run(tb.a["expected_b"], "after AR stuck: SOFT_RESET, reload")

    # 3. SOFT_RESET while the memory is stuck: the drain times out too
    r0 = await _stuck_mid_load(tb, BASE, ar=False)
    await tb.ctrl("SOFT_RESET")
    out["soft_stuck"] = await _timed_out(tb, BASE, r0, ERROR["ABANDONED"] | ERROR["MM_TIMEOUT"],
                                         "SOFT_RESET, drain stuck")
    tb.stalls(r=_pauses(0.3, 46))
    await tb.wait_status(STATUS["MM_STALE"], 0, "stale bursts drained after SOFT_RESET")
    await tb.ctrl("CLEAR_ERROR")
    await tb.load_mm(BASE)
    out["soft_stuck"]["run"] = await tb.run(tb.a["expected"], "after a timed-out SOFT_RESET drain")
    assert all(out[k]["waited"] <= T + 200 for k in ("r_stuck", "ar_stuck", "soft_stuck")), out
    tb.check_protocol()
    tb.record(timeout_cycles=T, **out)

"""UART 8N1 (:mod:`hwcosim.hdl.common.uart`) in Amaranth's simulator.

RX: random bytes sent back to back (one stop bit, the tightest case) by a sender whose bit time is
off by -3 %, 0 and +3 % are all received, with no framing error; at 8 % off they are not (the
check can fail). A low pulse shorter than half a bit is ignored. A byte not taken in time is
counted as an overrun. TX: the line, sampled every cycle, is exactly start bit, data LSB first,
stop bit, ``divisor`` cycles each, bytes back to back; and TX -> RX loops back.
"""

import random

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator
from hwcosim.hdl.common.uart import UartRx, UartTx

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

DIV = 16


def _line_bits(data: bytes) -> list[int]:
    return [bit for b in data for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]]


def _rx_run(data: bytes, err: float, take: bool = True, glitch: int = 0):
    dut = UartRx(DIV)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = []
    counts = {}
    bit_cycles = DIV * (1.0 + err)

    async def sender(ctx):
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(5)
        if glitch:
            ctx.set(dut.rx, 0)
            await ctx.tick().repeat(glitch)
            ctx.set(dut.rx, 1)
            await ctx.tick().repeat(3 * DIV)
        bits = _line_bits(data)
        t = 0
        for i, bit in enumerate(bits):  # bit i lasts until round((i + 1) * bit_cycles)
            ctx.set(dut.rx, bit)
            end = round((i + 1) * bit_cycles)
            await ctx.tick().repeat(end - t)
            t = end
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(3 * DIV)
        counts["frame"] = ctx.get(dut.frame_errors)
        counts["overrun"] = ctx.get(dut.overruns)

    async def sink(ctx):
        ctx.set(dut.o.ready, 1 if take else 0)
        async for _, _, valid, payload in ctx.tick().sample(dut.o.valid, dut.o.payload):
            if valid and take:
                got.append(payload)

    sim.add_testbench(sender)
    sim.add_process(sink)
    sim.run_until(1e-8 * (10 * DIV * 1.1 * (len(data) + 2) + 200 + glitch))
    return bytes(got), counts


@pytest.mark.parametrize("err", [-0.03, 0.0, 0.03])
def test_rx_at_rate_tolerance(err):
    data = bytes(random.Random(int(err * 100) + 7).randrange(256) for _ in range(40)) + b"\x00\xff\x55\xaa"
    got, counts = _rx_run(data, err)
    assert got == data
    assert counts == {"frame": 0, "overrun": 0}


@pytest.mark.parametrize("err", [-0.08, 0.08])
def test_rx_fails_far_off_rate(err):
    data = bytes(random.Random(3).randrange(256) for _ in range(40))
    got, counts = _rx_run(data, err)
    assert got != data


def test_rx_ignores_a_glitch():
    got, counts = _rx_run(b"\x42\x81", 0.0, glitch=DIV // 2 - 3)
    assert got == b"\x42\x81" and counts["frame"] == 0


def test_rx_counts_overruns():
    _, counts = _rx_run(b"\x01\x02\x03", 0.0, take=False)
    assert counts["overrun"] == 2 and counts["frame"] == 0


def test_tx_line_and_loopback():
    data = bytes([0x00, 0xFF, 0xA5, 0x5A, 0x01, 0x80])

    class Loop(wiring.Component):
        def __init__(self):
            super().__init__({})

        def elaborate(self, platform):
            m = Module()
            m.submodules.tx, m.submodules.rx = self.tx, self.rx
            m.d.comb += self.rx.rx.eq(self.tx.tx)
            return m

    top = Loop()
    top.tx, top.rx = UartTx(DIV), UartRx(DIV)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    line, got = [], []

    async def feed(ctx):
        for b in data:
            ctx.set(top.tx.i.valid, 1)
            ctx.set(top.tx.i.payload, b)
            while True:
                ready = ctx.get(top.tx.i.ready)
                await ctx.tick()
                if ready:
                    break
        ctx.set(top.tx.i.valid, 0)

    async def watch(ctx):
        ctx.set(top.rx.o.ready, 1)
        async for _, _, tx, valid, payload in ctx.tick().sample(top.tx.tx, top.rx.o.valid, top.rx.o.payload):
            line.append(tx)
            if valid:
                got.append(payload)

    sim.add_testbench(feed)
    sim.add_process(watch)
    sim.run_until(1e-8 * (10 * DIV * (len(data) + 2)))
    assert bytes(got) == data
    first = line.index(0)
    want = [bit for bit in _line_bits(data) for _ in range(DIV)]
    assert line[first:first + len(want)] == want            # back to back, DIV cycles per bit
    assert all(v == 1 for v in line[first + len(want):])


def test_wrong_divisor():
    with pytest.raises(ValueError, match="divisor"):
        UartRx(3)
    with pytest.raises(ValueError, match="divisor"):
        UartTx(2.5)

"""Skid buffer (:class:`hwcosim.hdl.common.skid.SkidBuffer`) in Amaranth's simulator: random producer
and consumer stalls; every word arrives once and in order, ``i.ready`` depends on no input of
the same cycle, the output holds while stalled, and with the buffer empty the data passes in
the same cycle."""

import random

import pytest
from amaranth.sim import Simulator
from hwcosim.hdl.common.skid import SkidBuffer


@pytest.mark.parametrize("width", [0, -1, True, 2.0])
def test_bad_width(width):
    with pytest.raises(ValueError, match="positive integer"):
        SkidBuffer(width)


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("p_in,p_out", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.4), (0.8, 0.2)])
def test_random_stalls_keep_order(p_in, p_out, eager):
    dut = SkidBuffer(16, eager=eager)
    rng = random.Random(hash((p_in, p_out)) & 0xFFFF)
    words = [rng.randrange(1 << 16) for _ in range(300)]
    got, log = [], []

    async def bench(ctx):
        k = 0
        held = None
        for _ in range(2000):
            offer = k < len(words) and rng.random() >= p_in
            take = rng.random() >= p_out
            ctx.set(dut.i.valid, int(offer))
            ctx.set(dut.i.payload, words[k] if offer else 0)
            ctx.set(dut.o.ready, int(take))
            ready_before = ctx.get(dut.i.ready)
            full_before = ctx.get(dut.full)
            assert ready_before == 1 - full_before            # registered: the flag alone
            ov, op = ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            if held is not None:                              # a stalled output holds
                assert (ov, op) == (1, held)
            if offer and not full_before:                      # empty: passes through at once
                assert ov == 1
            await ctx.tick()
            log.append((offer, ready_before))
            if offer and ready_before:
                k += 1
            if ov and take:
                got.append(op)
                held = None
            elif ov:
                held = op
            if len(got) == len(words):
                break
        assert got == words

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(got) == len(words)


@pytest.mark.parametrize("p_in,p_out", [(0.0, 0.0), (0.4, 0.4), (0.8, 0.2)])
def test_register_slice_keeps_order_one_cycle_late(p_in, p_out):
    from hwcosim.hdl.common.skid import RegisterSlice

    dut = RegisterSlice(12)
    rng = random.Random(7)
    words = [rng.randrange(1 << 12) for _ in range(200)]
    got = []

    async def bench(ctx):
        k, prev_fire = 0, None
        for _ in range(3000):
            offer = k < len(words) and rng.random() >= p_in
            take = rng.random() >= p_out
            ctx.set(dut.i.valid, int(offer))
            ctx.set(dut.i.payload, words[k] if offer else 0)
            ctx.set(dut.o.ready, int(take))
            ov, op = ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            if prev_fire is not None:                     # a word offered and taken shows up next cycle
                assert (ov, op) == (1, prev_fire)
            fire_in = offer and ctx.get(dut.i.ready)
            await ctx.tick()
            if ov and take:
                got.append(op)
            prev_fire = words[k] if fire_in else None
            if fire_in:
                k += 1
            if len(got) == len(words):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == words

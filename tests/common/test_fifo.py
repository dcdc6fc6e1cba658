"""Staged FIFO (:class:`hwcosim.hdl.common.fifo.StagedFIFO`) in Amaranth's simulator against a Python
model, cycle by cycle: staging without committing changes nothing visible and is overwritten by
the next staging, a commit appends the last staged word, both are refused while full; and with
``w_stage`` and ``w_commit`` tied together it behaves exactly as Amaranth's ``SyncFIFO``."""

import random

import pytest
from amaranth import Module
from amaranth.lib import fifo
from amaranth.sim import Simulator
from hwcosim.hdl.common.fifo import StagedFIFO


@pytest.mark.parametrize("kw", [{"width": 0, "depth": 4}, {"width": 8, "depth": 0},
                                {"width": True, "depth": 4}, {"width": 8, "depth": 2.0}])
def test_bad_shape(kw):
    with pytest.raises(ValueError, match="positive integer"):
        StagedFIFO(**kw)


class _Model:
    def __init__(self, depth):
        self.depth, self.words, self.slot = depth, [], None

    def step(self, data, stage, commit, r_en):
        """One clock edge; returns the popped word or None."""
        full = len(self.words) == self.depth
        popped = self.words.pop(0) if r_en and self.words else None
        if stage and not full:
            self.slot = data
        if commit and not full:
            assert self.slot is not None, "stimulus commits a slot never staged"
            self.words.append(self.slot)
            self.slot = None          # the next write slot holds whatever it held before
        return popped


@pytest.mark.parametrize("depth", [1, 3, 4, 8])
@pytest.mark.parametrize("p_stage,p_commit,p_read", [(0.7, 0.5, 0.5), (0.9, 0.9, 0.2), (0.5, 0.3, 0.9)])
def test_random_against_model(depth, p_stage, p_commit, p_read):
    dut = StagedFIFO(width=12, depth=depth)
    model = _Model(depth)
    rng = random.Random(depth * 1000 + int(p_stage * 100) + int(p_read * 10))
    seen = {"commit_only": 0, "refused": 0, "overwritten": 0}

    async def bench(ctx):
        for _ in range(1500):
            data = rng.randrange(1 << 12)
            stage = rng.random() < p_stage
            pending = model.slot is not None
            commit = (stage or pending) and rng.random() < p_commit
            r_en = rng.random() < p_read
            ctx.set(dut.w_data, data)
            ctx.set(dut.w_stage, int(stage))
            ctx.set(dut.w_commit, int(commit))
            ctx.set(dut.r_en, int(r_en))
            n = len(model.words)
            assert ctx.get(dut.level) == n
            assert ctx.get(dut.w_rdy) == int(n < depth)
            assert ctx.get(dut.r_rdy) == int(n > 0)
            if n:
                assert ctx.get(dut.r_data) == model.words[0]
            full = n == depth
            seen["refused"] += (stage or commit) and full
            seen["commit_only"] += commit and not stage and not full
            seen["overwritten"] += stage and pending and not full
            model.step(data, stage, commit, r_en)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # the stimulus reached each case the FIFO distinguishes (it fills only if reads are rarer)
    assert seen["commit_only"] and seen["overwritten"], seen
    if p_read < 0.5:
        assert seen["refused"], seen


@pytest.mark.parametrize("depth", [1, 4, 5])
def test_tied_write_matches_syncfifo(depth):
    m = Module()
    m.submodules.ours = ours = StagedFIFO(width=10, depth=depth)
    m.submodules.ref = ref = fifo.SyncFIFO(width=10, depth=depth)
    rng = random.Random(depth)

    async def bench(ctx):
        for _ in range(800):
            w, r, data = rng.random() < 0.6, rng.random() < 0.5, rng.randrange(1024)
            for p, v in ((ours.w_data, data), (ref.w_data, data), (ours.w_stage, w), (ours.w_commit, w),
                         (ref.w_en, w), (ours.r_en, r), (ref.r_en, r)):
                ctx.set(p, int(v))
            assert ctx.get(ours.level) == ctx.get(ref.level)
            assert ctx.get(ours.w_rdy) == ctx.get(ref.w_rdy)
            assert ctx.get(ours.r_rdy) == ctx.get(ref.r_rdy)
            if ctx.get(ref.r_rdy):
                assert ctx.get(ours.r_data) == ctx.get(ref.r_data)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

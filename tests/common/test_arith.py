"""hdl.common.arith.requantize_parallel: the same words as the golden requantisation."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from hdl.common.arith import requantize_parallel
from hdl.common.fixed import requantize as requantize_rtl
from models.fixedpoint import Q, requantize


@pytest.mark.parametrize("width, src_frac, fmt", [
    (12, 6, Q(3, 2)),      # shift 4, saturates both ways
    (10, 3, Q(2, 3)),      # no shift: plain saturation
    (9, 2, Q(6, 4)),       # left shift
    (13, 8, Q(8, 3)),      # shift 5, wide output: never saturates
])
def test_requantize_parallel_matches_the_model(width, src_frac, fmt):
    """Every input of a narrow word (both limits, every rounding tie) gives the model's word,
    and the plain RTL requantisation's."""
    m = Module()
    x = Signal(signed(width))
    got_p, got_s = Signal(signed(fmt.width)), Signal(signed(fmt.width))
    m.d.comb += [got_p.eq(requantize_parallel(x, src_frac, fmt)), got_s.eq(requantize_rtl(x, src_frac, fmt))]
    values = np.arange(-(1 << (width - 1)), 1 << (width - 1), dtype=np.int64)
    out_p, out_s = [], []

    async def tb(ctx):
        for v in values:
            ctx.set(x, int(v))
            out_p.append(ctx.get(got_p))
            out_s.append(ctx.get(got_s))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    want = requantize(values, src_frac, fmt)
    assert np.array_equal(np.array(out_p), want)
    assert np.array_equal(np.array(out_s), want)

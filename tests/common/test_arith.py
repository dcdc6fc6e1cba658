"""hwcosim.hdl.common.arith.requantize_parallel: the same words as the golden requantisation."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator
from hwcosim.hdl.common.arith import requantize_parallel
from hwcosim.hdl.common.fixed import requantize as requantize_rtl
from hwcosim.models.fixedpoint import Q, requantize


@pytest.mark.parametrize("width, src_frac, fmt", [
    (12, 6, Q(3, 2)),      # shift 4, saturates both ways
    (10, 3, Q(2, 3)),      # no shift: plain saturation
    (9, 2, Q(6, 4)),       # left shift
    (13, 8, Q(8, 3)),      # shift 5, wide output: never saturates
    (6, 2, Q(6, 2)),       # no shift, narrower input: never saturates (sign-extended)
    (9, 4, Q(2, 4)),       # no shift, saturates by 2 top bits (the LSTM gate sum's case)
    (8, 1, Q(1, 3)),       # left shift that saturates
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


@pytest.mark.parametrize("width, fmt", [(6, Q(2, 1)), (4, Q(4, 1)), (5, Q(3, 1))])
def test_saturate_unsigned_input(width, fmt):
    """An unsigned word clips at the format's maximum only (the bit test reads no sign bit)."""
    m = Module()
    x = Signal(width)
    got = Signal(signed(fmt.width))
    m.d.comb += got.eq(requantize_rtl(x, fmt.frac_bits, fmt))
    values = np.arange(0, 1 << width, dtype=np.int64)
    out = []

    async def tb(ctx):
        for v in values:
            ctx.set(x, int(v))
            out.append(ctx.get(got))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert np.array_equal(np.array(out), requantize(values, fmt.frac_bits, fmt))


def test_saturate_keeps_the_format_width():
    """The expression is exactly fmt.width bits wide whatever the input width (callers Cat it)."""
    from hwcosim.hdl.common.fixed import saturate
    fmt = Q(3, 2)
    for shape in (signed(3), signed(5), signed(9), 3, 5, 9):
        v = Signal(shape)
        e = saturate(v, fmt)
        assert len(e) == fmt.width and e.shape().signed, shape

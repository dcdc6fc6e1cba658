"""The RTL PLAN activations (:func:`hwcosim.hdl.bbs.lstm.plan_from_abs`, the form the element-wise unit
uses: sign and magnitude in, the tanh offset folded in) against the golden model
(:func:`hwcosim.models.bbs.lstm.plan_sigmoid`, :func:`~models.bbs.lstm.plan_tanh`) on every input of
the default gate and cell formats, as the element-wise unit assigns them (into ``Q(2, A)``)."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.hdl import Mux, Signal, signed
from amaranth.sim import Simulator
from hwcosim.hdl.bbs.lstm import plan_from_abs
from hwcosim.models.bbs.lstm import plan_sigmoid, plan_tanh


@pytest.mark.parametrize("width,x_frac,A", [(16, 10, 10), (12, 8, 8), (10, 4, 6)])
def test_plan_from_abs_every_input(width, x_frac, A):
    m = Module()
    x = Signal(signed(width))
    neg, a = Signal(), Signal(width)
    sig, tnh = Signal(signed(A + 3)), Signal(signed(A + 3))
    m.d.comb += [neg.eq(x < 0), a.eq(Mux(x < 0, -x, x)),
                 sig.eq(plan_from_abs(neg, a, x_frac, A)),
                 tnh.eq(plan_from_abs(neg, a, x_frac - 1, A + 1, minus=1 << A))]
    xs = np.arange(-(1 << (width - 1)) + 1, 1 << (width - 1), max(1, (1 << width) // 4096))
    xs = np.union1d(xs, [-(1 << (width - 1)) + 1, -1, 0, 1, (1 << (width - 1)) - 1])
    got_s, got_t = [], []

    async def bench(ctx):
        for v in xs:
            ctx.set(x, int(v))
            got_s.append(ctx.get(sig))
            got_t.append(ctx.get(tnh))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(got_s, plan_sigmoid(xs, x_frac, A))
    np.testing.assert_array_equal(got_t, plan_tanh(xs, x_frac, A))

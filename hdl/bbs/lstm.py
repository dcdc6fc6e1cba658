"""BBS LSTM layer engine in Amaranth: SpMxV + element-wise unit + vector builder + weight replay.

Cao et al., "Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity", FPGA 2019.
The golden model, the hardware layout (interleaved banks, gate-interleaved rows) and the
fixed-point rules are in :mod:`hwcosim.models.bbs.lstm`; this block meets them bit for bit.

Blocks
------
- **Weight memory + replay.** ``rows/P * k`` CSB words of ``P * B`` lanes, loaded once over the
  ``wload`` stream, then read in a loop (one word per cycle through the block RAM's read and a
  register on its output, where prefetched words wait) into the SpMxV weight port: every time
  step replays the whole matrix.
- **SpMxV** (:class:`hwcosim.hdl.bbs.spmxv.SpMxV`, unchanged): ``P`` PEs x ``B`` banks, double-buffered
  vector memory; latency ``params.bbs.latency``.
- **Element-wise unit** (:class:`ElementWise`): per output beat of the SpMxV (the four gates of
  ``U = P/4`` units), adds the bias, evaluates PLAN sigmoid/tanh (shifts and adds only),
  updates the cell state (a ``4H/P``-deep memory of ``U`` cells) and produces ``U`` hidden values.
  Fully pipelined, one beat per cycle, latency :data:`hwcosim.models.bbs.lstm.EW_LATENCY` = 13
  (operands, gate sums, ``|z|``, activations, products ``f*c`` and ``i*g``, their sum, the cell
  update rounded then clipped, ``|c_t|``, ``tanh(c_t)``, ``o * tanh(c_t)``, ``h`` rounded then
  clipped): no stage holds more than two carry chains or one multiplier, where the 4-stage unit
  it replaces had bias add, saturation, PLAN, two multipliers, the cell requantisation and tanh
  in a row (far from 100 MHz on an LFE5U-85F).
- **Vector builder.** Writes the next step's vector into the SpMxV's idle vector buffer as
  ``x_pad/B`` input beats (taken from the ``x`` stream, one beat per time step) followed by
  ``H/B`` hidden beats: zeros at the first step of a sequence, otherwise ``h_{t-1}`` taken from
  the feedback FIFO (which holds one hidden vector) through a ``U -> B`` width converter.

Overlap and throughput. The input part of step ``t+1``'s vector loads while step ``t``
computes; its hidden part is written as ``h_t`` leaves the element-wise unit; the first step of
the next sequence loads and starts with no gap. Consecutive steps of one sequence are separated
by :data:`hwcosim.models.bbs.lstm.STEP_GAP` cycles (the recurrence; it cannot overlap at batch 1), so
a step costs ``rows/P * k + STEP_GAP`` cycles (:class:`hwcosim.models.bbs.lstm.LSTMCycleModel`).

Resources. SpMxV (``P*B`` multipliers, ``P*B`` vector memories) + weight memory
(``rows/P*k`` x ``P*B*(W+I)`` bits) + ``3 U`` small multipliers (f*c, i*g, o*tanh) + ``U``
PLAN units (comparators, shifters, adders) + bias (``4H x GW``) and cell (``H x CW``) memories
+ a ``H/U``-entry feedback FIFO.

Back-pressure. The ``h`` output stalls the element-wise pipeline, which stalls the SpMxV
output, which stalls the weight replay; nothing is lost. A zero-latency skid buffer
(:class:`hwcosim.hdl.common.skid.SkidBuffer`) sits between the SpMxV and the element-wise unit: it
takes the one beat the SpMxV hands over in the first cycle of a stall, so the SpMxV sees the
stall a cycle later through a register and the element-wise unit's stall net never reaches the
SpMxV and replay enables in the same cycle (without it that net was the critical path on an
LFE5U-85F). The cycle schedule is unchanged.

Counters (saturating 32 bit): ``cycles`` (cycles with a step accepted and not finished, counted a cycle late),
``mac_beats`` (weight beats consumed), ``steps`` (hidden vectors produced), ``stall_out``
(``h`` refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Module
from amaranth.hdl import Array, Cat, Const, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.bbs.spmxv import COUNTER_BITS, SpMxV, weight_layout
from hwcosim.hdl.common.arith import count_saturating, requantize_parallel
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.hdl.common.fixed import requantize, round_to, saturate
from hwcosim.hdl.common.skid import SkidBuffer
from hwcosim.models.bbs.lstm import EW_LATENCY, LSTMParams
from hwcosim.models.bbs.lstm_delta import check_budget, delta_fmt, mem_bits
from hwcosim.models.bbs.spmxv import BBSParams
from hwcosim.models.fixedpoint import Q, acc_bits

__all__ = ["plan_sigmoid", "plan_tanh", "plan_from_abs", "ElementWise", "LSTMLayer", "h_out_layout"]


def plan_sigmoid(x: Value, x_frac: int, out_frac: int) -> Value:
    """PLAN sigmoid of signed ``x`` (``x_frac`` fraction bits) with ``out_frac`` fraction bits;
    mirrors :func:`hwcosim.models.bbs.lstm.plan_sigmoid`."""
    neg = x < 0
    return plan_from_abs(neg, Mux(neg, -x, x), x_frac, out_frac)


def plan_from_abs(neg: Value, a: Value, x_frac: int, out_frac: int, minus: int = 0) -> Value:
    """:func:`plan_sigmoid` of ``x`` given as its sign ``neg = x < 0`` and magnitude ``a = |x|``
    (so that a pipeline register can sit between the absolute value and the rest), minus the
    constant ``minus``. With ``(x_frac - 1, out_frac + 1)`` and ``minus = 2**(out_frac - 1)`` of
    the caller's formats it is :func:`plan_tanh`.

    Every segment's result, sign fold included (``(1 - minus) - y`` or ``y - minus``), is one
    adder on the shifted ``|x|`` with the constants folded; the four run in parallel with the
    segment comparisons, and two levels of multiplexers pick one (timing: the fold after the
    selection was the critical path of the element-wise unit on an LFE5U-85F)."""
    one = 1 << out_frac

    def shifted(s):
        sh = x_frac + s - out_frac
        return (a >> sh) if sh >= 0 else (a << -sh)

    def folded(t, off):
        """The segment ``t + off`` after the sign fold."""
        return Mux(neg, (one - minus - off) - t, t + (off - minus))

    def lin(s, off32):
        return folded(shifted(s), (off32 << out_frac) >> 5)

    sat = Mux(neg, Const(-minus, signed(max(minus, 1).bit_length() + 1)),
              Const(one - minus, signed((one - minus).bit_length() + 1)))
    return Mux(a >= (5 << x_frac), sat,
               Mux(a >= (19 << (x_frac - 3)), lin(5, 27),
                   Mux(a >= (1 << x_frac), lin(3, 20), lin(2, 16))))


def plan_tanh(x: Value, x_frac: int, out_frac: int) -> Value:
    return plan_sigmoid(x, x_frac - 1, out_frac + 1) - (1 << out_frac)


def h_out_layout(p: LSTMParams) -> data.ArrayLayout:
    return data.ArrayLayout(signed(p.vec_fmt.width), p.units)


def _counter(m, ctr, cond):
    count_saturating(m, [(ctr, cond)])


class ElementWise(wiring.Component):
    """Bias, activations and state update for ``U = P/4`` hidden units per cycle.

    Attributes
    ----------
    y : In(stream of P gate values)  -- SpMxV output beats, physical row order (4u + q).
    bload : In(stream of P gate values)  -- bias, ``4H/P`` beats, loaded once.
    o : Out(stream of {h: U values, fb: 1})  -- ``fb`` = 0 on the last step of a sequence.
    seq_len : In(16)
    bias_loaded : Out(1)

    With ``delta_y_width`` (delta mode, :mod:`hwcosim.models.bbs.lstm_delta`): ``y`` carries the exact,
    unrounded SpMxV products ``W d_sel`` (``delta_y_width`` bits, ``acc_frac`` fractional bits),
    accumulated into the pre-activation memory ``M`` (``4H/P`` words of ``P`` values of
    :func:`hwcosim.models.bbs.lstm_delta.mem_bits` bits, cleared at a sequence's first step); the gates
    are ``sat(requantize(M) + bias)``. Same pipeline, same latency (stage 2 then also holds
    ``M + y`` and its requantisation, so the delta mode's clock is not the one measured for the
    plain layer).

    Latency :data:`hwcosim.models.bbs.lstm.EW_LATENCY` (13) from a ``y`` beat to its ``o`` beat, one beat
    per cycle; ``o`` back-pressure stalls every stage. A row group's cell is read as its ``y`` beat
    enters and written back from stage 8, so the same group of the next step of a sequence must
    not enter within 8 beats: in the layer the recurrence keeps them :data:`hwcosim.models.bbs.lstm.STEP_GAP`
    cycles apart (a step needs all of ``h_{t-1}``).
    """

    def __init__(self, params: LSTMParams, delta_y_width: int | None = None):
        self.params = p = params
        self.delta_y_width = delta_y_width
        gl = data.ArrayLayout(signed(p.gate_fmt.width), p.pes)
        yl = gl if delta_y_width is None else data.ArrayLayout(signed(delta_y_width), p.pes)
        super().__init__({
            "y": In(stream.Signature(yl)),
            "bload": In(stream.Signature(gl)),
            "o": Out(stream.Signature(data.StructLayout({"h": h_out_layout(p), "fb": 1}))),
            "seq_len": In(16),
            "bias_loaded": Out(1),
        })

    def elaborate(self, platform):
        p = self.params
        m = Module()
        P, U, G = p.pes, p.units, p.rows // p.pes
        gw, cw, A = p.gate_fmt.width, p.cell_fmt.width, p.act_frac
        gf, cf = p.gate_fmt.frac_bits, p.cell_fmt.frac_bits
        aw = A + 2

        # bias memory, loaded once
        m.submodules.bmem = bmem = Memory(shape=unsigned(gw * P), depth=G, init=[])
        bwp, brp = bmem.write_port(), bmem.read_port()
        bl_cnt = Signal(range(G))
        m.d.comb += [self.bload.ready.eq(~self.bias_loaded), bwp.addr.eq(bl_cnt),
                     bwp.data.eq(self.bload.payload.as_value()),
                     bwp.en.eq(self.bload.valid & ~self.bias_loaded)]
        with m.If(self.bload.valid & ~self.bias_loaded):
            m.d.sync += bl_cnt.eq(bl_cnt + 1)
            with m.If(bl_cnt == G - 1):
                m.d.sync += [bl_cnt.eq(0), self.bias_loaded.eq(1)]

        # cell memory: U cells per group
        m.submodules.cmem = cmem = Memory(shape=unsigned(cw * U), depth=G, init=[])
        cwp, crp = cmem.write_port(), cmem.read_port()

        adv = Signal()
        m.d.comb += [adv.eq(~self.o.valid | self.o.ready), self.y.ready.eq(adv & self.bias_loaded)]
        yfire = self.y.valid & self.y.ready
        gcnt = Signal(range(G))
        scnt = Signal(16)
        m.d.comb += [brp.addr.eq(gcnt), brp.en.eq(adv), crp.addr.eq(gcnt), crp.en.eq(adv)]
        with m.If(yfire):
            m.d.sync += gcnt.eq(gcnt + 1)
            with m.If(gcnt == G - 1):
                m.d.sync += [gcnt.eq(0), scnt.eq(Mux(scnt + 1 >= self.seq_len, 0, scnt + 1))]

        # The pipeline: EW_LATENCY register stages, no more than two carry chains or one multiplier
        # between two of them (comparators against constants run beside an adder). Stage i's valid
        # bit and 'last step of the sequence' flag are v<i> / last<i> (the formal harness finds
        # them by name); the output register is stage EW_LATENCY.
        #   1 operands (y; bias and previous cell read from memory)
        #   2 gate sums z = sat(y + bias); previous cell (0 at a sequence's first step)
        #   3 |z| and its sign                   4 PLAN sigmoid/tanh from |z|: i, f, g, o
        #   5 products f*c and i*g               6 the exact sum f*c + i*g
        #   7 f*c + i*g rounded (one adder)      8 c_t = the rounded sum clipped (a bit test), written back
        #   9 |c_t| and its sign                10 PLAN tanh(c_t)
        #  11 o * tanh(c_t)                     12 the product rounded (one adder, from the DSP)
        #  13 h = the rounded product clipped (output register)
        # Rounding and clipping were one stage each for c_t and h (requantize_parallel: a carry
        # chain beside two comparators and a multiplexer); the routes from the DSP output and from
        # the sum's register in front of that chain limited the LFE5U-85F build.
        NST = EW_LATENCY - 1
        v = [Signal(name=f"v{i}") for i in range(1, NST + 1)]
        last = [Signal(name=f"last{i}") for i in range(1, NST + 1)]
        first1 = Signal(name="first1")
        gidx = [Signal(range(G), name=f"g{i}") for i in range(1, 9)]      # row group, stages 1..8
        yA = Signal(data.ArrayLayout(signed(gw if self.delta_y_width is None else self.delta_y_width), P))
        z2 = [Signal(signed(gw), name=f"z{r}") for r in range(P)]
        zneg3 = [Signal(name=f"zneg{r}") for r in range(P)]
        zabs3 = [Signal(gw, name=f"zabs{r}") for r in range(P)]
        act = [[Signal(signed(aw), name=f"act{u}_{q}") for q in range(4)] for u in range(U)]
        F = A + max(cf, A)
        c8 = [Signal(signed(cw), name=f"cnew{u}") for u in range(U)]
        cneg9 = [Signal(name=f"cneg{u}") for u in range(U)]
        cabs9 = [Signal(cw, name=f"cabs{u}") for u in range(U)]
        tc10 = [Signal(signed(aw), name=f"tanhc{u}") for u in range(U)]
        # the previous cell (stages 2..4) and o (stages 5..10) travel beside the pipeline
        cprev = {i: [Signal(signed(cw), name=f"cprev{i}_{u}") for u in range(U)] for i in range(2, 5)}
        o_d = {i: [Signal(signed(aw), name=f"o{i}_{u}") for u in range(U)] for i in range(5, 11)}
        # 5: the two products f*c and i*g; 11: o * tanh(c_t) (registered products, in the DSP block's
        # output register on an ECP5 build: hdl.common.dsp)
        fc5 = [registered_mul(m, act[u][1], cprev[4][u], en=adv, name=f"fc{u}") for u in range(U)]
        ig5 = [registered_mul(m, act[u][0], act[u][2], en=adv, name=f"ig{u}") for u in range(U)]
        otc11 = [registered_mul(m, o_d[10][u], tc10[u], en=adv, name=f"otc{u}") for u in range(U)]

        m.d.comb += [cwp.addr.eq(gidx[7]), cwp.data.eq(Cat(*c8)), cwp.en.eq(adv & v[7])]

        if self.delta_y_width is None:
            def gate_sum(r, bias_r):
                return yA[r] + bias_r
        else:
            # delta mode: M[g] += y (exact, cannot overflow: M = W vhat, see models.bbs.lstm_delta)
            mw = mem_bits(p)
            m.submodules.mmem = mmem = Memory(shape=unsigned(mw * P), depth=G, init=[])
            mwp, mrp = mmem.write_port(), mmem.read_port()
            m.d.comb += [mrp.addr.eq(gcnt), mrp.en.eq(adv)]
            mnew = []
            for r in range(P):
                mr = Signal(signed(mw), name=f"mnew{r}")
                mold = Mux(first1, 0, mrp.data.word_select(r, mw).as_signed())
                m.d.comb += mr.eq(mold + yA[r])
                mnew.append(mr)
            m.d.comb += [mwp.addr.eq(gidx[0]), mwp.data.eq(Cat(*mnew)), mwp.en.eq(adv & v[0])]

            def gate_sum(r, bias_r):
                return requantize_parallel(mnew[r], p.bbs.acc_frac, p.gate_fmt) + bias_r

        with m.If(adv):
            m.d.sync += [v[0].eq(yfire), first1.eq(scnt == 0), last[0].eq(scnt + 1 >= self.seq_len),
                         gidx[0].eq(gcnt), yA.eq(self.y.payload)]
            m.d.sync += [v[i].eq(v[i - 1]) for i in range(1, NST)]
            m.d.sync += [last[i].eq(last[i - 1]) for i in range(1, NST)]
            m.d.sync += [gidx[i].eq(gidx[i - 1]) for i in range(1, len(gidx))]
            m.d.sync += [self.o.valid.eq(v[NST - 1]), self.o.payload.fb.eq(~last[NST - 1])]
            bias = brp.data
            cold = crp.data
            for r in range(P):
                q = r % 4
                # 2: gate sum, saturated (a requantisation without a shift: adder + comparators)
                m.d.sync += z2[r].eq(requantize(gate_sum(r, bias.word_select(r, gw).as_signed()), gf, p.gate_fmt))
                # 3: |z|; 4: PLAN activation (tanh(x) = 2 sigmoid(2x) - 1 for the g gate)
                m.d.sync += [zneg3[r].eq(z2[r] < 0), zabs3[r].eq(Mux(z2[r] < 0, -z2[r], z2[r]))]
                if q == 2:
                    a_ = plan_from_abs(zneg3[r], zabs3[r], gf - 1, A + 1, minus=1 << A)
                else:
                    a_ = plan_from_abs(zneg3[r], zabs3[r], gf, A)
                m.d.sync += act[r // 4][q].eq(a_)
            for u in range(U):
                o_ = act[u][3]
                m.d.sync += cprev[2][u].eq(Mux(first1, 0, cold.word_select(u, cw).as_signed()))
                m.d.sync += [cprev[3][u].eq(cprev[2][u]), cprev[4][u].eq(cprev[3][u])]
                # 5: the two products (above), alone between registers
                m.d.sync += o_d[5][u].eq(o_)
                # 6: the exact sum (one adder); 7: rounded (one adder); 8: clipped, the new cell state
                fcig = (fc5[u] << (F - A - cf)) + (ig5[u] << (F - 2 * A))
                sum6 = Signal(fcig.shape(), name=f"fcig{u}")
                m.d.sync += [sum6.eq(fcig), o_d[6][u].eq(o_d[5][u])]
                rc = round_to(sum6, F, p.cell_fmt)
                rc7 = Signal(rc.shape(), name=f"cround{u}")
                m.d.sync += [rc7.eq(rc), o_d[7][u].eq(o_d[6][u])]
                m.d.sync += [c8[u].eq(saturate(rc7, p.cell_fmt)), o_d[8][u].eq(o_d[7][u])]
                # 9: |c_t|; 10: tanh(c_t)
                m.d.sync += [cneg9[u].eq(c8[u] < 0), cabs9[u].eq(Mux(c8[u] < 0, -c8[u], c8[u])),
                             o_d[9][u].eq(o_d[8][u])]
                m.d.sync += [tc10[u].eq(plan_from_abs(cneg9[u], cabs9[u], cf - 1, A + 1, minus=1 << A)),
                             o_d[10][u].eq(o_d[9][u])]
                # 11: o * tanh(c_t) (above); 12: rounded; 13: h clipped into the output register
                rh = round_to(otc11[u], 2 * A, p.vec_fmt)
                rh12 = Signal(rh.shape(), name=f"hround{u}")
                m.d.sync += [rh12.eq(rh), self.o.payload.h[u].eq(saturate(rh12, p.vec_fmt))]
        return m


class LSTMLayer(wiring.Component):
    """A whole BBS LSTM layer: runs sequences of ``seq_len`` steps, one hidden vector per step.

    Parameters
    ----------
    params : LSTMParams

    Attributes
    ----------
    wload : In(stream of CSB weight beats)  -- ``rows/P * k`` beats (layout of :mod:`hwcosim.models.bbs.spmxv`),
        physical order of :mod:`hwcosim.models.bbs.lstm`; loaded once after reset.
    bload : In(stream of P gate_fmt biases)  -- ``4H/P`` beats.
    x : In(stream of I vec_fmt values)  -- one beat per time step, sequences back to back.
    h : Out(stream of U vec_fmt values)  -- ``H/U`` beats per step, units in order.
    seq_len : In(16)  -- steps per sequence (>= 1), held constant while running.
    loaded : Out(1)
    cycles, mac_beats, steps, stall_out : Out(32)

    Delta mode (``delta_budget=J``; off by default, and then the Verilog is unchanged)
    ------------------------------------------------------------------------------------
    Temporal sparsity as specified in :mod:`hwcosim.models.bbs.lstm_delta` (read its docstring for the
    rule and why it is bank-balanced). Extra ports: ``delta_theta : In(vec width)`` (the raw
    threshold, held constant while running), counters ``delta_selected`` (columns selected) and
    ``delta_candidates`` (columns over the threshold), summed over steps. Hardware:

    - *Vector builder*: per vector beat (address ``t``, one element per bank) the exact delta
      ``v - vhat[t]`` goes to the SpMxV (``vec_fmt`` + 1 bit); per bank a sorted list of the
      ``J`` largest candidates is updated (``J`` comparators per bank); at the vector's last beat
      the list is frozen (double-buffered like the SpMxV's vector memory), ``vhat`` (``cols``
      registers) takes the selected elements, and ``J_t = max(1, max_b |list_b|)`` is fixed.
    - *Weight replay*: the ``k`` slots of a row group are read in one cycle (``k`` memories of
      ``rows/P`` words); beat ``j' < J_t`` puts in lane (p, b) the slot whose in-bank index equals
      bank ``b``'s ``j'``-th selected address (``k`` comparators per lane), else 0; the SpMxV runs
      with ``J_t`` beats per row group (``runtime_k``), exact output, no rounding.
    - *Element-wise unit*: ``M += y`` per row group, gates from ``M`` (see :class:`ElementWise`).

    Cost: ``rows/P * J_t`` weight cycles per step instead of ``rows/P * k`` (the recurrence gap
    is unchanged); ``cols`` vector registers, ``B J`` list entries, ``P B k`` index comparators,
    a ``4H x mem_bits`` memory; the weight memory is read ``k`` slots wide. On the digits layer
    (P = B = 8, k = 2, H = 64, ``delta_budget=2``) Yosys estimates about twice the LUTs, more
    flip-flops and the same DSPs (``--synth xcup``; the recorded figures: ``CHANGELOG.md``).
    """

    def __init__(self, params: LSTMParams, delta_budget: int | None = None):
        if not isinstance(params, LSTMParams):
            raise TypeError(f"LSTMLayer takes a models.bbs.lstm.LSTMParams, not {params!r}")
        self.params = p = params
        self.delta_budget = None if delta_budget is None else check_budget(p, delta_budget)
        gl = data.ArrayLayout(signed(p.gate_fmt.width), p.pes)
        ports = {
            "wload": In(stream.Signature(weight_layout(p.bbs))),
            "bload": In(stream.Signature(gl)),
            "x": In(stream.Signature(data.ArrayLayout(signed(p.vec_fmt.width), p.input_size))),
            "h": Out(stream.Signature(h_out_layout(p))),
            "seq_len": In(16),
            "loaded": Out(1),
            "cycles": Out(COUNTER_BITS),
            "mac_beats": Out(COUNTER_BITS),
            "steps": Out(COUNTER_BITS),
            "stall_out": Out(COUNTER_BITS),
        }
        if self.delta_budget is not None:
            ports.update({"delta_theta": In(p.vec_fmt.width), "delta_selected": Out(COUNTER_BITS),
                          "delta_candidates": Out(COUNTER_BITS)})
        super().__init__(ports)

    @property
    def delta_bbs(self) -> BBSParams:
        """The SpMxV's parameters in delta mode: ``J`` beats per row group at most, delta-width
        vector, unrounded output (its full accumulator)."""
        p, J = self.params, self.delta_budget
        df = delta_fmt(p)
        frac = p.weight_fmt.frac_bits + df.frac_bits
        ow = acc_bits(p.weight_fmt, df, p.banks * J)
        return BBSParams(rows=p.rows, cols=p.cols, banks=p.banks, k=J, pes=p.pes, weight_fmt=p.weight_fmt,
                         vec_fmt=df, out_fmt=Q(ow - frac, frac), out_stage=p.out_stage, mul_stage=p.mul_stage)

    def elaborate(self, platform):
        p = self.params
        bbs = p.bbs
        m = Module()
        P, B, U, H = p.pes, p.banks, p.units, p.hidden
        vw = p.vec_fmt.width
        WB = bbs.weight_beats
        wwidth = P * B * bbs.lane_width
        delta = self.delta_budget is not None

        if delta:
            m.submodules.spmxv = mx = SpMxV(self.delta_bbs, runtime_k=True)
            m.submodules.ew = ew = ElementWise(p, delta_y_width=self.delta_bbs.out_fmt.width)
        else:
            m.submodules.spmxv = mx = SpMxV(bbs)
            m.submodules.ew = ew = ElementWise(p)
        m.d.comb += ew.seq_len.eq(self.seq_len)
        wiring.connect(m, wiring.flipped(self.bload), ew.bload)
        # a zero-latency skid buffer: the SpMxV's y.ready is a register, so the element-wise
        # unit's stall net (h.ready -> its advance) does not reach the SpMxV's and the weight
        # replay's enables in the same cycle (the critical path on an LFE5U-85F without it)
        if p.skid:
            m.submodules.yskid = yskid = SkidBuffer(len(mx.y.payload.as_value()), eager=True)
            m.d.comb += [yskid.i.valid.eq(mx.y.valid), yskid.i.payload.eq(mx.y.payload.as_value()),
                         mx.y.ready.eq(yskid.i.ready),
                         ew.y.valid.eq(yskid.o.valid), ew.y.payload.as_value().eq(yskid.o.payload),
                         yskid.o.ready.eq(ew.y.ready)]
        else:
            wiring.connect(m, mx.y, ew.y)

        if delta:
            dv = self._delta_replay(m, mx, ew)
        else:
            self._replay(m, mx, ew, WB, wwidth)

        # --- outputs and feedback FIFO -----------------------------------------------------------
        m.submodules.fb = fifo = SyncFIFOBuffered(width=U * vw, depth=H // U + 1)
        m.d.comb += [self.h.valid.eq(ew.o.valid), self.h.payload.eq(ew.o.payload.h),
                     ew.o.ready.eq(self.h.ready)]
        h_fire = self.h.valid & self.h.ready
        m.d.comb += [fifo.w_data.eq(ew.o.payload.h.as_value()), fifo.w_en.eq(h_fire & ew.o.payload.fb)]

        # --- vector builder ------------------------------------------------------------------------
        vx = mx.x
        NXB, NHB = p.x_beats, p.h_beats
        in_h = Signal()
        xb = Signal(range(max(NXB, 2)))
        hb = Signal(range(max(NHB, 2)))
        bs = Signal(16)
        bs0 = Signal(init=1)        # bs == 0, as a register (timing: the vector write enables hang off it)
        vfire = vx.valid & vx.ready
        xpad = Cat(self.x.payload.as_value(), Const(0, (p.x_pad - p.input_size) * vw))
        # the vector beat: straight to the SpMxV, or (delta mode) through the delta unit
        vpay = Signal(B * vw) if delta else vx.payload.as_value()

        with m.If(~in_h):
            m.d.comb += [vx.valid.eq(self.x.valid), vpay.eq(xpad.word_select(xb, B * vw)),
                         self.x.ready.eq(vx.ready & (xb == NXB - 1))]
            with m.If(vfire):
                m.d.sync += xb.eq(Mux(xb == NXB - 1, 0, xb + 1))
                with m.If(xb == NXB - 1):
                    m.d.sync += in_h.eq(1)
        with m.Else():
            with m.If(bs0):
                m.d.comb += [vx.valid.eq(1), vpay.eq(0)]
            with m.Else():
                if U >= B:
                    R = U // B
                    sub = Signal(range(max(R, 2)))
                    beat = fifo.r_data.word_select(sub, B * vw) if R > 1 else fifo.r_data
                    m.d.comb += [vx.valid.eq(fifo.r_rdy), vpay.eq(beat),
                                 fifo.r_en.eq(vx.ready & (sub == R - 1))]
                    with m.If(vfire):
                        m.d.sync += sub.eq(Mux(sub == R - 1, 0, sub + 1))
                else:
                    R = B // U
                    hold = [Signal(U * vw, name=f"hold{i}") for i in range(R - 1)]
                    cnt = Signal(range(R))
                    with m.If(cnt < R - 1):
                        m.d.comb += fifo.r_en.eq(1)
                        with m.If(fifo.r_rdy):
                            m.d.sync += cnt.eq(cnt + 1)
                            with m.Switch(cnt):
                                for i in range(R - 1):
                                    with m.Case(i):
                                        m.d.sync += hold[i].eq(fifo.r_data)
                    with m.Else():
                        m.d.comb += [vx.valid.eq(fifo.r_rdy), vpay.eq(Cat(*hold, fifo.r_data)),
                                     fifo.r_en.eq(vx.ready)]
                        with m.If(vfire):
                            m.d.sync += cnt.eq(0)
            with m.If(vfire):
                m.d.sync += hb.eq(Mux(hb == NHB - 1, 0, hb + 1))
                with m.If(hb == NHB - 1):
                    wrap = bs + 1 >= self.seq_len
                    m.d.sync += [in_h.eq(0), bs.eq(Mux(wrap, 0, bs + 1)), bs0.eq(wrap)]
        if delta:
            self._delta_vector(m, mx, dv, vpay, addr=Mux(in_h, NXB + hb, xb), first=bs0,
                               last=vfire & in_h & (hb == NHB - 1))

        # --- counters ----------------------------------------------------------------------------
        x_fire = self.x.valid & self.x.ready
        hcnt = Signal(range(max(H // U, 2)))
        step_done = Signal()
        with m.If(h_fire):
            m.d.sync += hcnt.eq(Mux(hcnt == H // U - 1, 0, hcnt + 1))
        m.d.comb += step_done.eq(h_fire & (hcnt == H // U - 1))
        # the busy-cycle count from x_fire and step_done a cycle late: the same total, one cycle
        # later (x.ready comes from the SpMxV's vector buffers through the vector builder; into the
        # 32-bit counters it was bbs-lstm-axi's critical path on one seed)
        xq, sq = Signal(name="x_fire_q"), Signal(name="step_done_q")
        m.d.sync += [xq.eq(x_fire), sq.eq(step_done)]
        pending = Signal(32)
        with m.If(xq & ~sq):
            m.d.sync += pending.eq(pending + 1)
        with m.Elif(sq & ~xq):
            m.d.sync += pending.eq(pending - 1)
        _counter(m, self.cycles, (pending != 0) | xq)
        _counter(m, self.mac_beats, mx.w.valid & mx.w.ready)
        _counter(m, self.steps, step_done)
        _counter(m, self.stall_out, self.h.valid & ~self.h.ready)
        return m

    def _replay(self, m, mx, ew, WB, wwidth):
        # --- weight memory: load once, replay forever ------------------------------------------
        m.submodules.wmem = wmem = Memory(shape=unsigned(wwidth), depth=WB, init=[])
        wwp, wrp = wmem.write_port(), wmem.read_port()
        w_loaded = Signal()
        wl_cnt = Signal(range(WB))
        wl_fire = self.wload.valid & ~w_loaded
        m.d.comb += [self.wload.ready.eq(~w_loaded), wwp.addr.eq(wl_cnt),
                     wwp.data.eq(self.wload.payload.as_value()), wwp.en.eq(wl_fire)]
        with m.If(wl_fire):
            m.d.sync += wl_cnt.eq(wl_cnt + 1)
            with m.If(wl_cnt == WB - 1):
                m.d.sync += [wl_cnt.eq(0), w_loaded.eq(1)]
        m.d.comb += self.loaded.eq(w_loaded & ew.bias_loaded)

        # two stages that advance together: the block RAM's read (rvalid: its output holds a word)
        # and a register on its output (wq), so that no logic follows the RAM's clock-to-output
        # (5.6 ns on an ECP5; the SpMxV uses the word's indices as vector-memory addresses)
        ra = Signal(range(WB))
        rvalid = Signal()
        wq_valid = Signal(name="wq_valid")
        wq = Signal(wwidth, name="wq")
        # and a zero-latency skid buffer into the SpMxV: the read enable (a net to every block RAM
        # of the matrix) hangs off a register instead of the SpMxV's stall net (the critical path
        # on one of three seeds on an LFE5U-85F)
        if self.params.skid:
            m.submodules.wskid = wskid = SkidBuffer(wwidth, eager=True)
            ren = ~wq_valid | wskid.i.ready
            m.d.comb += [wskid.i.valid.eq(wq_valid), wskid.i.payload.eq(wq),
                         mx.w.valid.eq(wskid.o.valid), mx.w.payload.as_value().eq(wskid.o.payload),
                         wskid.o.ready.eq(mx.w.ready)]
        else:
            ren = ~wq_valid | mx.w.ready
            m.d.comb += [mx.w.valid.eq(wq_valid), mx.w.payload.as_value().eq(wq)]
        m.d.comb += [wrp.addr.eq(ra), wrp.en.eq(ren)]
        with m.If(ren):
            m.d.sync += [rvalid.eq(self.loaded), wq_valid.eq(rvalid), wq.eq(wrp.data)]
            with m.If(self.loaded):
                m.d.sync += ra.eq(Mux(ra == WB - 1, 0, ra + 1))


    # --- delta mode ----------------------------------------------------------------------------

    def _delta_replay(self, m, mx, ew):
        """``k`` slot memories, replay of ``J_t`` beats per row group built from the selected
        columns. Returns the shared selection state (double-buffered lists, ``J_t``, selects)."""
        p, J, K = self.params, self.delta_budget, self.params.k
        P, B, G = p.pes, p.banks, p.rows // p.pes
        ib, lw, wv = p.bbs.index_bits, p.bbs.lane_width, p.weight_fmt.width
        dv = _DeltaState(
            sel_v=[[[Signal(name=f"dsel_v{s}_{b}_{i}") for i in range(J)] for b in range(B)] for s in range(2)],
            sel_a=[[[Signal(ib, name=f"dsel_a{s}_{b}_{i}") for i in range(J)] for b in range(B)] for s in range(2)],
            jt=[Signal(range(J + 1), name=f"jt{s}", init=1) for s in range(2)],
            wsel=Signal(name="dwsel"), rsel=Signal(name="drsel"))

        slots = []
        for j in range(K):
            m.submodules[f"wslot{j}"] = mem = Memory(shape=unsigned(P * B * lw), depth=G, init=[])
            slots.append((mem.write_port(), mem.read_port()))
        w_loaded = Signal()
        lg, lj = Signal(range(max(G, 2))), Signal(range(max(K, 2)))
        wl_fire = self.wload.valid & ~w_loaded
        m.d.comb += self.wload.ready.eq(~w_loaded)
        for j, (wp, _) in enumerate(slots):
            m.d.comb += [wp.addr.eq(lg), wp.data.eq(self.wload.payload.as_value()), wp.en.eq(wl_fire & (lj == j))]
        with m.If(wl_fire):
            m.d.sync += lj.eq(Mux(lj == K - 1, 0, lj + 1))
            with m.If(lj == K - 1):
                m.d.sync += lg.eq(Mux(lg == G - 1, 0, lg + 1))
                with m.If(lg == G - 1):
                    m.d.sync += w_loaded.eq(1)
        m.d.comb += self.loaded.eq(w_loaded & ew.bias_loaded)

        ra, rg = Signal(range(max(G, 2))), Signal(range(max(G, 2)))
        rvalid = Signal()
        jj = Signal(range(max(J, 2)))
        k_run = Signal(range(J + 1))
        m.d.comb += [k_run.eq(Mux(dv.rsel, dv.jt[1], dv.jt[0])), mx.k_run.eq(k_run)]
        last_sub = jj == k_run - 1
        ren = ~rvalid | (mx.w.ready & last_sub)
        for _, rp in slots:
            m.d.comb += [rp.addr.eq(ra), rp.en.eq(ren)]
        m.d.comb += mx.w.valid.eq(rvalid)
        with m.If(ren):
            m.d.sync += rvalid.eq(self.loaded)
            with m.If(self.loaded):
                m.d.sync += [ra.eq(Mux(ra == G - 1, 0, ra + 1)), rg.eq(ra)]
        with m.If(mx.w.valid & mx.w.ready):
            m.d.sync += jj.eq(Mux(last_sub, 0, jj + 1))
            with m.If(last_sub & (rg == G - 1)):
                m.d.sync += dv.rsel.eq(~dv.rsel)

        # beat jj: lane (pe, b) = the weight of its row at bank b's jj-th selected column, or 0
        pick = dv.rsel * J + jj
        for b in range(B):
            col, colv = Signal(ib, name=f"dcol{b}"), Signal(name=f"dcolv{b}")
            m.d.comb += [col.eq(Array([dv.sel_a[s][b][i] for s in range(2) for i in range(J)])[pick]),
                         colv.eq(Array([dv.sel_v[s][b][i] for s in range(2) for i in range(J)])[pick])]
            for pe in range(P):
                lane = pe * B + b
                val = Const(0, wv)
                for _, rp in slots:  # a row keeps distinct in-bank indices: at most one slot matches
                    word = rp.data.word_select(lane, lw)
                    val = Mux(colv & (word[wv:wv + ib] == col), word[:wv], val)
                m.d.comb += [mx.w.payload[lane].value.eq(val), mx.w.payload[lane].index.eq(col)]
        return dv

    def _delta_vector(self, m, mx, dv, vpay, addr, first, last):
        """Delta of each vector beat, per-bank top-``J`` candidate lists, reference update."""
        p, J = self.params, self.delta_budget
        B, S, vw, ib = p.banks, p.bank_size, p.vec_fmt.width, p.bbs.index_bits
        dw = delta_fmt(p).width
        vfire = mx.x.valid & mx.x.ready
        vhat = [[Signal(signed(vw), name=f"vhat{t}_{b}") for b in range(B)] for t in range(S)]
        counts, cands = [], []
        for b in range(B):
            lv = [Signal(name=f"lv{b}_{i}") for i in range(J)]
            lmag = [Signal(dw, name=f"lmag{b}_{i}") for i in range(J)]
            lad = [Signal(ib, name=f"lad{b}_{i}") for i in range(J)]
            lval = [Signal(signed(vw), name=f"lval{b}_{i}") for i in range(J)]
            v = vpay.word_select(b, vw).as_signed()
            ref = Mux(first, 0, Array([vhat[t][b] for t in range(S)])[addr])
            d = Signal(signed(dw), name=f"delta{b}")
            mag = Signal(dw, name=f"dmag{b}")
            cand = Signal(name=f"dcand{b}")
            m.d.comb += [d.eq(v - ref), mx.x.payload[b].eq(d), mag.eq(Mux(d < 0, -d, d)),
                         cand.eq(mag > self.delta_theta)]
            cands.append(cand)
            # sorted insert: strictly larger magnitudes go first, so ties keep the lower address
            gt = [Signal(name=f"dgt{b}_{i}") for i in range(J)]
            m.d.comb += [gt[i].eq(cand & (~lv[i] | (mag > lmag[i]))) for i in range(J)]
            nv, nad, nval, nmag = [], [], [], []
            for i in range(J):
                here = gt[i] if i == 0 else gt[i] & ~gt[i - 1]
                down = Const(0, 1) if i == 0 else gt[i] & gt[i - 1]
                prev = (lv[i - 1], lmag[i - 1], lad[i - 1], lval[i - 1]) if i else (0, 0, 0, 0)
                sigs = []
                for name, new, old, keep in (("v", 1, prev[0], lv[i]), ("mag", mag, prev[1], lmag[i]),
                                             ("ad", addr, prev[2], lad[i]), ("val", v, prev[3], lval[i])):
                    s = Signal.like(keep, name=f"n{name}{b}_{i}")
                    m.d.comb += s.eq(Mux(here, new, Mux(down, old, keep)))
                    sigs.append(s)
                nv.append(sigs[0])
                nmag.append(sigs[1])
                nad.append(sigs[2])
                nval.append(sigs[3])
            with m.If(vfire):
                with m.If(last):
                    m.d.sync += [s.eq(0) for s in lv]
                    for i in range(J):
                        for s in range(2):
                            with m.If(dv.wsel == s):
                                m.d.sync += [dv.sel_v[s][b][i].eq(nv[i]), dv.sel_a[s][b][i].eq(nad[i])]
                    for t in range(S):
                        hit = Const(0, 1)
                        val = vhat[t][b]
                        for i in reversed(range(J)):
                            match = nv[i] & (nad[i] == t)
                            hit = hit | match
                            val = Mux(match, nval[i], val)
                        m.d.sync += vhat[t][b].eq(Mux(hit, val, Mux(first, 0, vhat[t][b])))
                with m.Else():
                    m.d.sync += [lv[i].eq(nv[i]) for i in range(J)]
                    m.d.sync += [lmag[i].eq(nmag[i]) for i in range(J)]
                    m.d.sync += [lad[i].eq(nad[i]) for i in range(J)]
                    m.d.sync += [lval[i].eq(nval[i]) for i in range(J)]
            cnt = Signal(range(J + 1), name=f"dcount{b}")
            m.d.comb += cnt.eq(sum(nv))
            counts.append(cnt)

        jt_new = Const(1, range(J + 1))
        for cnt in counts:
            jt_new = Mux(cnt > jt_new, cnt, jt_new)
        with m.If(vfire & last):
            m.d.sync += dv.wsel.eq(~dv.wsel)
            for s in range(2):
                with m.If(dv.wsel == s):
                    m.d.sync += dv.jt[s].eq(jt_new)
        _add_saturating(m, self.delta_selected, vfire & last, sum(counts))
        _add_saturating(m, self.delta_candidates, vfire, sum(cands))


@dataclass
class _DeltaState:
    sel_v: list
    sel_a: list
    jt: list
    wsel: Signal
    rsel: Signal


def _add_saturating(m, ctr, cond, inc):
    top = (1 << len(ctr)) - 1
    s = ctr + inc
    with m.If(cond):
        m.d.sync += ctr.eq(Mux(s > top, top, s))

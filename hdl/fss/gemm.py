"""FSS sparse GEMM engine in Amaranth: FSS-sparse weights x dense activations.

Zhang et al., "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference", IEEE TCAD
44(7), 2025. The golden model, the stream word layouts and the cycle model are in
:mod:`hwcosim.models.fss.gemm`; this block meets them bit for bit. The micro-architecture is ours.

Architecture. A ``PR x PC`` array of PEs, each with ``N`` multipliers. PE ``(a, t)`` computes the
``r_h`` output rows of region row ``g * PR + a`` for activation column ``t`` of the current
column tile. Because every FSS region holds exactly ``N`` weights ("global regularity"), all PE
rows consume one region per cycle and stay in lock-step on the same region column ``c``, so a
single read of the activation staging buffer per cycle feeds the whole array. The buffer is
banked ``r_w * PC`` ways (one memory per in-region column ``b`` and PE column ``t``, two tiles
deep: double-buffered), so the read of address ``c`` returns the ``r_w`` activations of region
column ``c`` for every PE column at once. Inside a PE, slot ``j``'s in-region index selects its
operand through an ``r_w``-way multiplexer ("local randomness": any placement, no bank
conflicts, no stalls) and its output row ``idx // r_w``; per-row masked adder trees reduce the
``N`` products into ``r_h`` accumulators. After ``cols / r_w`` weight beats a row group is done;
its ``PR * r_h * PC`` requantised results leave as one output beat. In the dense configuration
(``n == r_h * r_w``) slot ``j`` is position ``j``: no index bits, no multiplexers, no masks.

Throughput and latency. One weight beat per cycle while an activation tile is loaded and the
output queue has room: ``T/PC * rows/(r_h PR) * cols/r_w`` cycles per GEMM, the ideal for
``PR * PC * N`` multipliers (each does a stored weight every cycle). Activation tile ``tau + 1``
(``cols / r_w`` beats) loads while tile ``tau`` computes. Latency from a weight beat to its row
group's output is :data:`hwcosim.models.fss.gemm.PIPELINE_LATENCY` = 9 cycles when the output queue is
empty, one register stage each: buffer read, buffer data (a block RAM output drives only a
flip-flop), operand select, multiply (flip-flop -> multiplier -> flip-flop), the adder trees' first
level (slot pairs), the rest of the trees, accumulate, round (one carry chain), clip (a bit test,
:func:`hwcosim.hdl.common.fixed.saturate`) into the output queue. Every path is at most one of those
steps, for the clock (the 4-stage version was far from 100 MHz on an LFE5U-85F, its critical
path block RAM read -> operand multiplexer -> multiplier).

Back-pressure. The pipeline never stalls: every stage register loads every cycle and the
stage-valid bits say which hold a beat. Results wait in an output queue of ``out_depth`` beats
(distributed RAM, default 16); ``y`` is its head. A weight beat is taken only while fewer than
``out_depth`` row groups are owed (last beat taken, result not yet left), so the queue never
overflows; ``w.ready`` is two flip-flops (tile loaded, queue room) and no output handshake
reaches the stage registers (the global stall enable this replaced limited fss-gemm's clock).
With ``out_depth > PIPELINE_LATENCY``, an output that is always ready never holds a weight beat
back, even with one region column per tile (a result every cycle).

Resources. ``PR * PC * N`` multipliers of ``W x XW`` bits (DSPs); ``r_w * PC`` memories of
``2 * 2**ceil(log2(max_cols / r_w))`` x ``XW`` bits (shared by all PE rows: the activation
storage does not grow with ``PR``); ``PR * PC * N`` operand multiplexers of ``r_w`` inputs;
``PR * PC * r_h`` masked adder trees of ``N`` inputs and accumulators of ``acc_width`` bits;
pipeline registers for the operands, products and partial sums; a write register (enable,
address and one activation beat) in front of the buffer and two bypass registers behind it; the
output queue (``out_depth`` x ``PR * r_h * PC * OW`` bits).
When ``r_w`` is a power of two the operand multiplexer is ``r_w``-way on the index's low bits,
otherwise ``r_h * r_w``-way.

Configuration. ``cfg_k_regions`` (= cols / r_w) and ``cfg_row_groups`` (= rows / (r_h PR)) set
the layer shape at run time; hold them stable while the engine holds work.

Counters (saturating at 2**32 - 1): ``cycles`` counts cycles in which the engine holds work;
``mac_beats`` accepted weight beats; ``stall_out`` cycles the output was refused; ``starve_w``
cycles a loaded tile waited for a weight beat.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Array, Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.arith import count_saturating
from hwcosim.hdl.common.arith import tree_sum as _tree_sum
from hwcosim.hdl.common.dsp import register_copies, registered_mul
from hwcosim.hdl.common.fixed import round_to, saturate
from hwcosim.models.errors import UsageError
from hwcosim.models.fss.gemm import PIPELINE_LATENCY, FSSParams

__all__ = ["FSSGemm", "OUT_DEPTH", "weight_layout"]

COUNTER_BITS = 32
#: pipeline stages between the accepted weight beat and the output queue's write
STAGES = PIPELINE_LATENCY - 1
#: result beats the output queue holds (default): at least PIPELINE_LATENCY + 1, so that one
#: region column per tile (a result beat every cycle) never waits for a slot
OUT_DEPTH = 16


def weight_layout(p: FSSParams) -> data.ArrayLayout:
    """``PR * N`` lanes of {value: signed(W), index: unsigned(I)} (value only when dense)."""
    fields = {"value": signed(p.weight_fmt.width)}
    if p.index_bits:
        fields["index"] = unsigned(p.index_bits)
    return data.ArrayLayout(data.StructLayout(fields), p.pe_rows * p.n)


class FSSGemm(wiring.Component):
    """Fine-grained structured sparse GEMM engine.

    Parameters
    ----------
    params : FSSParams
        Region shape, nonzeros per region, PE array, maximum layer shape, fixed-point formats.
    out_depth : int
        Result beats the output queue holds (a power of two; default :data:`OUT_DEPTH`).

    Attributes
    ----------
    w : In(stream.Signature(weight_layout(params)))
        FSS weight beats, one region per PE row; order tile, row group, region column.
    x : In(stream.Signature(ArrayLayout(signed(XW), r_w * PC)))
        Activation beats, ``cols / r_w`` per column tile.
    y : Out(stream.Signature(ArrayLayout(signed(OW), PR * r_h * PC)))
        Results, one beat per (tile, row group).
    cfg_k_regions, cfg_row_groups : In
        Layer shape: region columns and row groups.
    cycles, mac_beats, stall_out, starve_w : Out(32)
        Performance counters.
    """

    def __init__(self, params: FSSParams, out_depth: int = OUT_DEPTH):
        if not isinstance(params, FSSParams):
            raise TypeError(f"FSSGemm takes a models.fss.gemm.FSSParams, not {params!r}")
        if not (isinstance(out_depth, int) and out_depth >= 1 and out_depth & (out_depth - 1) == 0):
            raise UsageError(f"out_depth must be a power of two >= 1, not {out_depth!r}")
        self.params = p = params
        self.out_depth = out_depth
        super().__init__({
            "w": In(stream.Signature(weight_layout(p))),
            "x": In(stream.Signature(data.ArrayLayout(signed(p.act_fmt.width), p.r_w * p.pe_cols))),
            "y": Out(stream.Signature(data.ArrayLayout(signed(p.out_fmt.width), p.out_lanes))),
            "cfg_k_regions": In(range(p.max_k_regions + 1)),
            "cfg_row_groups": In(range(p.max_row_groups + 1)),
            "cycles": Out(COUNTER_BITS),
            "mac_beats": Out(COUNTER_BITS),
            "stall_out": Out(COUNTER_BITS),
            "starve_w": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        p = self.params
        m = Module()
        PR, PC, N, RH, RW = p.pe_rows, p.pe_cols, p.n, p.r_h, p.r_w
        KMAX, GMAX = p.max_k_regions, p.max_row_groups
        abits = max(1, (KMAX - 1).bit_length())
        kr, rg = self.cfg_k_regions, self.cfg_row_groups

        # --- activation staging buffer: r_w * PC banks, two tiles --------------------------
        full = Signal(2)
        wr_sel, rd_sel = Signal(), Signal()
        wr_cnt = Signal(range(max(2, KMAX)))
        x_fire = self.x.valid & self.x.ready
        m.d.comb += self.x.ready.eq(~full.bit_select(wr_sel, 1))
        # The write is registered: the memories' write enable, address and data come straight from
        # flip-flops (the enable fans out to every bank; computed from the x handshake it was the
        # critical path of fss-axi). A tile still counts as loaded in the cycle after its
        # last beat, as before, when that beat is only being written; a read of it in that cycle
        # (only possible when a tile is one region column) is bypassed: the hit and the written
        # word are registered beside the read and travel with its data into stage 2, where a
        # multiplexer in front of the operand select picks the word (so a block RAM's output
        # still drives only a flip-flop: a multiplexer right after it limited fss-gemm). A
        # transparent read port does the same with one comparator on the read path, shared by
        # every bank (slower on fss-axi).
        wq_en = Signal()
        wq_addr = Signal(abits + 1)
        xa = p.act_fmt.width
        wq_x = Signal(len(self.x.payload.as_value()), name="wq_x", reset_less=True)   # the beat being written
        byp_x = Signal(len(wq_x), name="byp_x", reset_less=True)                     # it, as a read hit it
        m.d.sync += [wq_en.eq(x_fire), wq_addr.eq(Cat(wr_cnt[:abits], wr_sel)), wq_x.eq(self.x.payload.as_value())]
        hit = Signal()
        rd = [[None] * RW for _ in range(PC)]  # rd[t][b]: read data of bank (b, t)
        rports = []
        for t in range(PC):
            for b in range(RW):
                mem = Memory(shape=signed(xa), depth=2 << abits, init=[])
                m.submodules[f"abuf_{t}_{b}"] = mem
                wp, rp = mem.write_port(), mem.read_port()
                m.d.comb += [wp.addr.eq(wq_addr), wp.data.eq(wq_x.word_select(t * RW + b, xa)), wp.en.eq(wq_en)]
                rd[t][b] = rp.data
                rports.append(rp)
        with m.If(x_fire):
            with m.If(wr_cnt == kr - 1):
                m.d.sync += [wr_cnt.eq(0), wr_sel.eq(~wr_sel), full.bit_select(wr_sel, 1).eq(1)]
            with m.Else():
                m.d.sync += wr_cnt.eq(wr_cnt + 1)

        # --- sequencing: region column c, row group g; the pipeline never stalls ---------------
        # A weight beat is taken while its tile is loaded and the output queue has a slot for
        # every row group in flight (``room``): both are flip-flops, so no output handshake
        # reaches the pipeline's registers (a global stall enable from y.ready limited fss-gemm
        # and fss-axi, 9-12 ns of routing to every stage register).
        D = self.out_depth
        room = Signal(init=1)
        c = Signal(range(max(2, KMAX)))
        g = Signal(range(max(2, GMAX)))
        w_fire = self.w.valid & self.w.ready
        loaded = full.bit_select(rd_sel, 1)
        m.d.comb += self.w.ready.eq(loaded & room)
        raddr = Cat(c[:abits], rd_sel)
        for rp in rports:
            m.d.comb += rp.addr.eq(raddr)
        m.d.sync += [hit.eq(wq_en & (wq_addr == raddr)), byp_x.eq(wq_x)]
        # c == kr - 1 and g == rg - 1 as flip-flops (the subtractions from the configuration and
        # the comparators fed the output queue's room flag through the owed count: fss-axi's
        # critical path). Each is loaded with one of two comparisons made beside the
        # beat's handshake - the flag for the value c (g) takes if a beat is taken, and for the value
        # it keeps - so the handshake only selects between them (one LUT after the w_fire net, whose
        # fan-out is the long route). The configuration is stable while a tile is held, and no beat
        # can be taken in the cycle after reset (no tile is loaded), so the flags are exact
        # whenever they are used.
        c_last, g_last = Signal(name="c_last"), Signal(name="g_last")
        c_last_step = Mux(c_last, kr == 1, c + 2 == kr)      # c_last after a beat: c -> 0 or c + 1
        g_last_step = Mux(g_last, rg == 1, g + 2 == rg)      # g_last after a row group's last beat
        m.d.sync += [c_last.eq(Mux(w_fire, c_last_step, c == kr - 1)),
                     g_last.eq(Mux(w_fire & c_last, g_last_step, g == rg - 1))]
        with m.If(w_fire):
            with m.If(c_last):
                m.d.sync += c.eq(0)
                with m.If(g_last):
                    m.d.sync += [g.eq(0), rd_sel.eq(~rd_sel), full.bit_select(rd_sel, 1).eq(0)]
                with m.Else():
                    m.d.sync += g.eq(g + 1)
            with m.Else():
                m.d.sync += c.eq(c + 1)

        lanes = self.w.payload
        W, XW = p.weight_fmt.width, p.act_fmt.width
        rbits = max(1, (RH - 1).bit_length())
        S = STAGES

        # stage-valid and last-beat bits of stages 1..S (named: the formal harness finds them);
        # stage 0 is the weight beat being accepted
        sv = [None] + [Signal(name=f"s{k}_valid") for k in range(1, S + 1)]
        sl = [None] + [Signal(name=f"s{k}_last") for k in range(1, S + 1)]
        sf = [None] + [Signal(name=f"s{k}_first") for k in range(1, S + 1)]

        def regs(name, shape, *dims):
            """Nested lists of datapath registers ``name{i}_{j}...`` over ``dims``. They have no reset
            (``reset_less``): every use is gated by the stage-valid bits, and a reset net to all of
            them (the AXI top resets the engine at every START) was the critical path of fss-axi."""
            if not dims:
                return Signal(shape, name=name, reset_less=True)
            sep = "_" if name[-1].isdigit() else ""
            return [regs(f"{name}{sep}{i}", shape, *dims[1:]) for i in range(dims[0])]

        ibits = max(1, p.index_bits)
        # s1: the weight beat waits for the (synchronous) buffer read
        s1_w, s1_i = regs("s1_w", signed(W), PR, N), regs("s1_i", unsigned(ibits), PR, N)
        # s2: the buffer's read data registered (a block RAM output drives one flip-flop each)
        s2_x = regs("s2_x", signed(XW), PC, RW)
        s2_w, s2_i = regs("s2_w", signed(W), PR, N), regs("s2_i", unsigned(ibits), PR, N)
        # ... and the bypassed word of a read that hit the buffer's pending write (see above)
        s2_byp = regs("s2_byp", signed(XW), PC, RW)
        # (one copy of the hit per bank on the ECP5: the single flip-flop's route to the ~500
        # multiplexers it drives was 8-9 ns of fss-gemm's and fss-axi's critical path)
        s2_hit = register_copies(m, hit, PC * RW, name="s2_bypass_hit")
        x2 = [[Mux(s2_hit[t * RW + b], s2_byp[t][b], s2_x[t][b]) for b in range(RW)] for t in range(PC)]
        # s3: every slot's operand selected (r_w-way multiplexer) and its output row
        s3_op = regs("s3_op", signed(XW), PR, PC, N)
        s3_row = regs("s3_row", unsigned(rbits), PR, N)
        # the slot's weight, one copy per PE column on the ECP5 (a register driving the four
        # multipliers of a PE row was a 6.9 ns route on fss-axi): s3_w[a][j][t]
        s3_w = [[register_copies(m, s2_w[a][j], PC, name=f"s3_w{a}_{j}") for j in range(N)] for a in range(PR)]
        # s4: products (flip-flop -> multiplier -> flip-flop; on the ECP5 the product register is
        # the DSP's own output register, so no route from the multiplier to the fabric is timed
        # in the same cycle: that route was the critical path of fss-axi)
        s4_prod = [[[registered_mul(m, s3_w[a][j][t], s3_op[a][t][j], en=1, name=f"s4_p{a}_{t}_{j}")
                     for j in range(N)] for t in range(PC)] for a in range(PR)]
        s4_row = regs("s4_row", unsigned(rbits), PR, N)
        # s5: per-row masked sums of slot pairs (the adder trees' first level)
        npair = (N + 1) // 2
        s5_part = regs("s5_s", signed(W + XW + 1), PR, PC, RH, npair)
        # s6: per-row sums (the rest of the trees)
        nmax_row = min(N, RW)
        sum_w = W + XW + max(1, (nmax_row - 1).bit_length())
        s6_sum = regs("s6_s", signed(sum_w), PR, PC, RH)
        # s7: accumulators
        acc = regs("acc", signed(p.acc_width), PR, PC, RH)
        # s8: the accumulators rounded to the output format (the clip follows, into the queue)
        s8_r = [[[Signal.like(round_to(acc[a][t][i], p.acc_frac, p.out_fmt), name=f"s8_r{a}_{t}_{i}",
                              reset_less=True) for i in range(RH)] for t in range(PC)] for a in range(PR)]

        # every stage register loads every cycle: validity travels in the stage-valid bits
        m.d.sync += [sv[1].eq(w_fire), sf[1].eq(c == 0), sl[1].eq(c_last)]
        for k in range(2, S + 1):
            m.d.sync += [sv[k].eq(sv[k - 1]), sf[k].eq(sf[k - 1]), sl[k].eq(sl[k - 1])]
        for a in range(PR):
            for j in range(N):
                m.d.sync += [s1_w[a][j].eq(lanes[a * N + j].value), s2_w[a][j].eq(s1_w[a][j]),
                             s4_row[a][j].eq(s3_row[a][j])]
                if p.index_bits:
                    m.d.sync += [s1_i[a][j].eq(lanes[a * N + j].index), s2_i[a][j].eq(s1_i[a][j])]
        for t in range(PC):
            for b in range(RW):
                m.d.sync += [s2_x[t][b].eq(rd[t][b]), s2_byp[t][b].eq(byp_x.word_select(t * RW + b, XW))]
        # operand select (r_w-way multiplexer per slot) and output row
        for a in range(PR):
            for j in range(N):
                idx = s2_i[a][j]
                if p.dense:
                    m.d.sync += s3_row[a][j].eq(j // RW)
                else:
                    # idx // r_w as a sum of comparisons (no constant table: Icarus leaves a
                    # case-statement lookup at X until its input first changes)
                    m.d.sync += s3_row[a][j].eq(_tree_sum([idx >= i * RW for i in range(1, RH)])
                                                if RH > 1 else 0)
                for t in range(PC):
                    if p.dense:
                        operand = x2[t][j % RW]
                    elif RW & (RW - 1) == 0 and RW > 1:   # idx % r_w is the low index bits
                        operand = Array(x2[t])[idx[:(RW - 1).bit_length()]]
                    elif RW == 1:
                        operand = x2[t][0]
                    else:
                        operand = Array([x2[t][k % RW] for k in range(p.region_size)])[idx]
                    m.d.sync += s3_op[a][t][j].eq(operand)
        # per-row masked adder trees: slot pairs, then the rest
        for a in range(PR):
            for t in range(PC):
                for i in range(RH):
                    if p.dense:
                        terms = [s4_prod[a][t][j] if j // RW == i else 0 for j in range(N)]
                    elif RH == 1:
                        terms = list(s4_prod[a][t])
                    else:
                        terms = [Mux(s4_row[a][j] == i, s4_prod[a][t][j], 0) for j in range(N)]
                    for q in range(npair):
                        pair = [v for v in terms[2 * q:2 * q + 2] if not isinstance(v, int)]
                        m.d.sync += s5_part[a][t][i][q].eq(_tree_sum(pair) if pair else 0)
                    m.d.sync += s6_sum[a][t][i].eq(_tree_sum(list(s5_part[a][t][i])))
        # accumulate; a finished group's sums are rounded in the next cycle (acc holds them; the
        # next group's first beat overwrites acc only after) and clipped into the output queue
        for a in range(PR):
            for t in range(PC):
                for i in range(RH):
                    with m.If(sv[6]):
                        m.d.sync += acc[a][t][i].eq(s6_sum[a][t][i] + Mux(sf[6], 0, acc[a][t][i]))
                    m.d.sync += s8_r[a][t][i].eq(round_to(acc[a][t][i], p.acc_frac, p.out_fmt))

        # --- output queue: D result beats --------------------------------------------------------
        # ``owed`` counts the row groups whose last weight beat was taken and whose result has not
        # left; a weight beat is taken only while owed < D (``room``), so the queue never overflows
        # and, with D > PIPELINE_LATENCY, a result every cycle never waits for a slot.
        qbits = max(1, (D - 1).bit_length())
        oq = Memory(shape=len(self.y.payload.as_value()), depth=D, init=[])
        m.submodules.out_queue = oq
        oq_w, oq_r = oq.write_port(), oq.read_port(domain="comb")
        oq_we = Signal(name="oq_we")
        oq_head = Signal(qbits, name="oq_head")          # next slot to read
        oq_tail = Signal(qbits, name="oq_tail")          # next slot to write
        oq_level = Signal(range(D + 1), name="oq_level")
        owed = Signal(range(D + 1), name="oq_owed")
        y_fire = self.y.valid & self.y.ready
        m.d.comb += oq_we.eq(sv[S] & sl[S])
        m.d.comb += [oq_w.en.eq(oq_we), oq_w.addr.eq(oq_tail if D > 1 else 0),
                     oq_w.data.eq(Cat(*[saturate(s8_r[a][t][i], p.out_fmt)
                                        for a in range(PR) for i in range(RH) for t in range(PC)])),
                     oq_r.addr.eq(oq_head if D > 1 else 0),
                     self.y.valid.eq(oq_level != 0), self.y.payload.eq(oq_r.data)]
        with m.If(oq_we):
            m.d.sync += oq_tail.eq(oq_tail + 1)
        with m.If(y_fire):
            m.d.sync += oq_head.eq(oq_head + 1)
        m.d.sync += oq_level.eq(oq_level + oq_we - y_fire)
        owed_next = owed + (w_fire & c_last) - y_fire
        m.d.sync += [owed.eq(owed_next), room.eq(owed_next < D)]

        # --- performance counters ------------------------------------------------------------
        busy = Signal()
        m.d.comb += busy.eq(full.any() | (wr_cnt != 0) | x_fire | Cat(*sv[1:]).any() | self.y.valid)
        count_saturating(m, ((self.cycles, busy), (self.mac_beats, w_fire),
                          (self.stall_out, self.y.valid & ~self.y.ready),
                          (self.starve_w, loaded & room & ~self.w.valid)))
        return m

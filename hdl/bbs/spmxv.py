"""BBS sparse matrix-vector engine (SpMxV) in Amaranth.

Cao et al., "Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity", FPGA 2019.
The golden model and the stream word layouts are in :mod:`hwcosim.models.bbs.spmxv`; this block meets them
bit for bit.

Architecture. ``P`` processing elements (PEs) each own a private copy of the input vector split
into ``B`` bank memories (one per bank: ``P * B`` simple dual-port memories of
``2 * 2**I`` words, two vector buffers). A weight beat carries one CSB word per PE (``B``
(value, index) lanes); the index addresses the bank memory directly, so all ``P * B``
multipliers get an operand every cycle with no conflicts and no decoding. Each PE reduces its
``B`` products through an adder tree and accumulates ``k`` beats into a row result, requantised
to ``out_fmt``. Row ``r`` belongs to PE ``r % P``; the ``P`` results of a row group leave
together as one output beat.

Throughput and latency. One weight beat per cycle when the output is not back-pressured and a
vector is loaded: ``rows / P * k`` cycles per product, the ideal for ``P * B`` multipliers.
The vector memory is double-buffered: vector ``n + 1`` (``bank_size`` beats, one element per
bank per beat) loads while vector ``n`` computes. Latency from a weight beat to its row-group's
result is :data:`hwcosim.models.bbs.spmxv.PIPELINE_LATENCY` cycles (read, multiply, adder tree, accumulate).

Back-pressure. The pipeline advances as a whole: when the output register holds a beat that
``y.ready`` does not take, every stage holds (the bank-memory reads are enabled by the same
signal), so nothing is lost and ``y.payload`` stays stable while it waits.

Resources. ``P * B`` multipliers of ``W x XW`` bits (DSPs), ``P * B`` memories of
``2**(I+1) x XW`` bits, ``P`` adder trees of ``B`` inputs and ``P`` accumulators of
``acc_width`` bits; a write register (enable, address, one vector beat) in front of the
memories, a bypass register and a hit flag behind each memory.

Counters (saturating at 2**32 - 1): ``cycles`` counts cycles in which the engine holds work
(a loaded vector, a vector being loaded, a beat in the pipeline or an output waiting);
``mac_beats`` counts accepted weight beats; ``stall_out`` cycles the output was refused;
``starve_w`` cycles a loaded vector waited for a weight beat.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.arith import count_saturating, requantize_parallel
from hwcosim.hdl.common.arith import tree_sum as _tree_sum
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.models.bbs.spmxv import BBSParams

__all__ = ["SpMxV", "weight_layout"]

COUNTER_BITS = 32


def weight_layout(p: BBSParams) -> data.ArrayLayout:
    """P*B lanes of {value: signed(W), index: unsigned(I)}, lane p*B+b at the low end first."""
    lane = data.StructLayout({"value": signed(p.weight_fmt.width), "index": unsigned(p.index_bits)})
    return data.ArrayLayout(lane, p.pes * p.banks)


class SpMxV(wiring.Component):
    """Bank-balanced sparse matrix x vector engine.

    Parameters
    ----------
    params : BBSParams
        Matrix shape, banks B, nonzeros per bank k, PEs P and fixed-point formats.

    Attributes
    ----------
    w : In(stream.Signature(weight_layout(params)))
        CSB weight beats, ``rows / P * k`` per product (row group, then slot order).
    x : In(stream.Signature(ArrayLayout(signed(XW), B)))
        Vector beats, ``bank_size`` per product; element b of beat t is x[b * bank_size + t].
    y : Out(stream.Signature(ArrayLayout(signed(OW), P)))
        Results, one beat per row group.
    cycles, mac_beats, stall_out, starve_w : Out(32)
        Performance counters.
    k_run : In(range(k + 1))
        Only with ``runtime_k=True``: beats per row group of the product being computed
        (``1 <= k_run <= k``), held constant from a product's first weight beat to its last. Used
        by the delta mode of :class:`hwcosim.hdl.bbs.lstm.LSTMLayer`; without it the Verilog is unchanged.
    """

    def __init__(self, params: BBSParams, runtime_k: bool = False):
        if not isinstance(params, BBSParams):
            raise TypeError(f"SpMxV takes a models.bbs.spmxv.BBSParams, not {params!r}")
        self.params = params
        self.runtime_k = bool(runtime_k)
        p = params
        ports = {
            "w": In(stream.Signature(weight_layout(p))),
            "x": In(stream.Signature(data.ArrayLayout(signed(p.vec_fmt.width), p.banks))),
            "y": Out(stream.Signature(data.ArrayLayout(signed(p.out_fmt.width), p.pes))),
            "cycles": Out(COUNTER_BITS),
            "mac_beats": Out(COUNTER_BITS),
            "stall_out": Out(COUNTER_BITS),
            "starve_w": Out(COUNTER_BITS),
        }
        if self.runtime_k:
            ports["k_run"] = In(range(p.k + 1))
        super().__init__(ports)

    def elaborate(self, platform):
        p = self.params
        m = Module()
        P, B, S, K, G = p.pes, p.banks, p.bank_size, p.k, p.row_groups
        ibits = p.index_bits

        # --- vector loader: fills the buffer wr_sel, one element per bank per beat ----------
        full = Signal(2)                      # buffer n holds a complete vector
        wr_sel = Signal()
        wr_cnt = Signal(range(S))
        rd_sel = Signal()

        mems = [[Memory(shape=signed(p.vec_fmt.width), depth=2 << ibits, init=[]) for _ in range(B)]
                for _ in range(P)]
        wports, rports = [], []
        for pe in range(P):
            for b in range(B):
                m.submodules[f"vmem_{pe}_{b}"] = mem = mems[pe][b]
                wp, rp = mem.write_port(), mem.read_port()
                wports.append((b, wp))
                rports.append(rp)

        x_fire = self.x.valid & self.x.ready
        m.d.comb += self.x.ready.eq(~full.bit_select(wr_sel, 1))
        # The write is registered: every memory's write enable, address and data come from
        # flip-flops (the enable fans out to all P * B memories; computed from the x handshake it
        # was a critical path of bbs-lstm). A vector still counts as complete in the cycle
        # after its last beat, as before, when that beat is only being written: a read of it in that
        # cycle is bypassed. Each read port's hit is a register (its address compared with the write
        # register as it reads) and a multiplexer after the port picks the written element, so the
        # read data sees it as it did when the write was a cycle earlier.
        wq_en = Signal()
        wq_addr = Signal(len(Cat(wr_cnt, wr_sel)))
        wq_data = [Signal(signed(p.vec_fmt.width), name=f"wq_x{b}", reset_less=True) for b in range(B)]
        m.d.sync += [wq_en.eq(x_fire), wq_addr.eq(Cat(wr_cnt, wr_sel))]
        m.d.sync += [wq_data[b].eq(self.x.payload[b]) for b in range(B)]
        for b, wp in wports:
            m.d.comb += [wp.addr.eq(wq_addr), wp.data.eq(wq_data[b]), wp.en.eq(wq_en)]
        with m.If(x_fire):
            with m.If(wr_cnt == S - 1):
                m.d.sync += [wr_cnt.eq(0), wr_sel.eq(~wr_sel), full.bit_select(wr_sel, 1).eq(1)]
            with m.Else():
                m.d.sync += wr_cnt.eq(wr_cnt + 1)

        # --- compute pipeline, advancing as a whole (adv) ----------------------------------
        adv = Signal()
        m.d.comb += adv.eq(~self.y.valid | self.y.ready)

        j = Signal(range(K))
        g = Signal(range(G))
        w_fire = self.w.valid & self.w.ready
        m.d.comb += self.w.ready.eq(adv & full.bit_select(rd_sel, 1))

        lanes = self.w.payload
        hit = [Signal(name=f"vbyp_hit{i}") for i in range(P * B)]
        # one bypass register per port, beside its multiplexer (one per bank, shared by the P
        # memories of a bank, was routed across the chip to the multipliers: a bbs-lstm critical path)
        byp = [Signal(signed(p.vec_fmt.width), name=f"vbyp_x{i}", reset_less=True) for i in range(P * B)]
        rdata = []
        for i, rp in enumerate(rports):
            m.d.comb += [rp.addr.eq(Cat(lanes[i].index, rd_sel)), rp.en.eq(adv)]
            rdata.append(Mux(hit[i], byp[i], rp.data))
        # (each takes the written word only when its own port hits: registers with the same input
        # and enable would be merged back into one by synthesis)
        with m.If(adv):     # the ports hold their data while the pipeline holds: so does the bypass
            for i, rp in enumerate(rports):
                hit_now = wq_en & (wq_addr == rp.addr)
                m.d.sync += hit[i].eq(hit_now)
                with m.If(hit_now):
                    m.d.sync += byp[i].eq(wq_data[i % B])

        k_last = (j == self.k_run - 1) if self.runtime_k else (j == K - 1)
        with m.If(w_fire):
            with m.If(k_last):
                m.d.sync += j.eq(0)
                with m.If(g == G - 1):
                    m.d.sync += [g.eq(0), rd_sel.eq(~rd_sel), full.bit_select(rd_sel, 1).eq(0)]
                with m.Else():
                    m.d.sync += g.eq(g + 1)
            with m.Else():
                m.d.sync += j.eq(j + 1)

        # stage 1: weight values wait one cycle for the synchronous memory read
        s1_valid, s1_first, s1_last = Signal(), Signal(), Signal()
        s1_w = [Signal(signed(p.weight_fmt.width), name=f"s1_w{i}") for i in range(P * B)]
        # stage 2: products
        # stage 1b (mul_stage only): the products, registered a first time
        sb_valid, sb_first, sb_last = Signal(), Signal(), Signal()
        s2_valid, s2_first, s2_last = Signal(), Signal(), Signal()
        pw = p.weight_fmt.width + p.vec_fmt.width
        # stage 3: per-PE sums
        s3_valid, s3_first, s3_last = Signal(), Signal(), Signal()
        sum_w = pw + max(0, (B - 1).bit_length())
        s3_sum = [Signal(signed(sum_w), name=f"s3_sum{pe}") for pe in range(P)]
        acc = [Signal(signed(p.acc_width), name=f"acc{pe}") for pe in range(P)]
        # stage 4 (out_stage only): the accumulated sum waits a cycle in acc, then is requantised
        s4_valid, s4_last = Signal(), Signal()

        # stage 2's products. mul_stage: registered twice, first in the DSP block's output register
        # on an ECP5 build (hdl.common.dsp), then in the fabric beside the adder tree; otherwise once,
        # in the fabric (the DSP's register alone leaves its route to the tree in the tree's cycle)
        s2_prod = [Signal(signed(pw), name=f"s2_prod{i}") for i in range(P * B)]
        if p.mul_stage:
            sb_prod = [registered_mul(m, s1_w[i], rdata[i], en=adv, name=f"sb_prod{i}") for i in range(P * B)]
            assert all(len(x) == pw for x in sb_prod)

        with m.If(adv):
            m.d.sync += [
                s1_valid.eq(w_fire), s1_first.eq(j == 0), s1_last.eq(k_last),
                s3_valid.eq(s2_valid), s3_first.eq(s2_first), s3_last.eq(s2_last),
            ]
            m.d.sync += [s1_w[i].eq(lanes[i].value) for i in range(P * B)]
            if p.mul_stage:
                m.d.sync += [sb_valid.eq(s1_valid), sb_first.eq(s1_first), sb_last.eq(s1_last),
                             s2_valid.eq(sb_valid), s2_first.eq(sb_first), s2_last.eq(sb_last)]
                m.d.sync += [s2_prod[i].eq(sb_prod[i]) for i in range(P * B)]
            else:
                m.d.sync += [s2_valid.eq(s1_valid), s2_first.eq(s1_first), s2_last.eq(s1_last)]
                m.d.sync += [s2_prod[i].eq(s1_w[i] * rdata[i]) for i in range(P * B)]
            m.d.sync += [s3_sum[pe].eq(_tree_sum(s2_prod[pe * B:(pe + 1) * B])) for pe in range(P)]
            if p.out_stage:
                m.d.sync += [s4_valid.eq(s3_valid), s4_last.eq(s3_last), self.y.valid.eq(s4_valid & s4_last)]
            else:
                m.d.sync += self.y.valid.eq(s3_valid & s3_last)
            for pe in range(P):
                new = Signal(signed(p.acc_width), name=f"acc_next{pe}")
                m.d.comb += new.eq(s3_sum[pe] + Mux(s3_first, 0, acc[pe]))
                with m.If(s3_valid):
                    m.d.sync += acc[pe].eq(new)
                    if not p.out_stage:
                        with m.If(s3_last):
                            m.d.sync += self.y.payload[pe].eq(requantize_parallel(new, p.acc_frac, p.out_fmt))
                if p.out_stage:
                    # acc still holds the finished row here (a next group's first beat overwrites it
                    # in this same cycle, after this read)
                    with m.If(s4_valid & s4_last):
                        m.d.sync += self.y.payload[pe].eq(requantize_parallel(acc[pe], p.acc_frac, p.out_fmt))

        # --- performance counters ----------------------------------------------------------
        busy = Signal()
        m.d.comb += busy.eq(full.any() | (wr_cnt != 0) | x_fire | s1_valid | sb_valid | s2_valid | s3_valid | s4_valid
                            | self.y.valid)
        count_saturating(m, ((self.cycles, busy), (self.mac_beats, w_fire),
                          (self.stall_out, self.y.valid & ~self.y.ready),
                          (self.starve_w, adv & full.bit_select(rd_sel, 1) & ~self.w.valid)))
        return m

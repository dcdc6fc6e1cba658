"""Unbalanced row-wise CSR SpMxV engine (ESE-style): the baseline the BBS engine is measured against.

Golden model, stream word layouts and cycle model: :mod:`hwcosim.models.bbs.csr`.

Design. ``M`` processing elements (PEs), one multiplier each, the same multiplier count as a
BBS engine with ``P * B = M``. Rows are assigned statically and interleaved: row ``r`` belongs
to PE ``r % M`` (as ESE spreads rows over its PEs). Every PE walks its own list of CSR entries
``(value, column, last)``, one multiply-accumulate per cycle, the accumulator clearing after an
entry flagged ``last`` (the row's end; its requantised sum is written to the PE's result memory
at the PE's row counter). The ``M`` lists advance in lockstep, one entry per PE per weight beat:
this is the same schedule as ``M`` private weight memories with a shared read address, and it
keeps the weight port one stream like the BBS engine's. Lists differ in length because
unstructured pruning leaves rows (and so PEs) with different nonzero counts; a PE whose list has
ended receives bubbles (``valid = 0``) and its multiplier idles. **What stalls on the longest
row:** nothing inside a product stalls, but the product cannot end, and the next product (in an
LSTM: the next time step, which needs this one's output) cannot start its rows, until the most
loaded PE has worked through its list, so every product costs ``max_p load_p`` cycles instead
of ``nnz / M``. Multiplier utilisation is ``nnz / (M * max_p load_p)``.

Vector. Row-wise CSR needs any column in any PE in any cycle, so every PE holds a private copy
of the whole vector (``M`` memories of ``2 * cols`` words, double-buffered: vector ``n + 1``
loads, ``L`` elements per beat, while vector ``n`` computes). The BBS engine needs ``P * B``
memories of ``2 * cols / B`` words for the same multipliers: ``B`` times less vector storage.

Pipeline: vector read (1), multiply (1), accumulate (1), requantise + result-memory write (1),
then a double-buffered result memory (``2 * rows / M`` words per PE) from which ``rows / M``
output beats leave while the next product computes. The compute pipeline never stalls; the
weight port waits only for a loaded vector and for a free result buffer, so output
back-pressure reaches the weights through the result buffers.

Resources. ``M`` multipliers ``W x XW``, ``M`` accumulators of ``acc_width`` bits, ``M``
vector memories ``2 * cols x XW`` and ``M`` result memories ``2 * rows/M x OW``.

Counters (saturating 32 bit): ``cycles`` (cycles holding work), ``w_beats`` (weight beats
accepted), ``busy_lanes`` (entries accepted with ``valid``: multiplier-busy cycles),
``stall_out`` (output refused).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.bbs.spmxv import COUNTER_BITS, _tree_sum
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.hdl.common.fixed import requantize
from hwcosim.models.bbs.csr import CSRParams

__all__ = ["CSRSpMxV", "csr_weight_layout"]


def csr_weight_layout(p: CSRParams) -> data.StructLayout:
    """``M`` lanes of {value, col, last, valid} (lane 0 at the low end), then the ``end`` bit."""
    lane = data.StructLayout({"value": signed(p.weight_fmt.width), "col": unsigned(p.col_bits),
                              "last": 1, "valid": 1})
    return data.StructLayout({"lanes": data.ArrayLayout(lane, p.mults), "end": 1})


def _count(m, ctr, cond, inc=1):
    with m.If(cond & (ctr < (1 << COUNTER_BITS) - inc)):
        m.d.sync += ctr.eq(ctr + inc)


class CSRSpMxV(wiring.Component):
    """Row-wise CSR sparse matrix x vector engine with ``M`` single-multiplier PEs.

    Parameters
    ----------
    params : CSRParams

    Attributes
    ----------
    w : In(stream of :func:`csr_weight_layout`)  -- entry beats, ``end`` on the product's last.
    x : In(stream of L signed(XW))  -- ``cols / L`` beats per product, plain order.
    y : Out(stream of M signed(OW))  -- ``rows / M`` beats per product; beat g = rows g*M .. g*M+M-1.
    cycles, w_beats, busy_lanes, stall_out : Out(32)
    """

    def __init__(self, params: CSRParams):
        if not isinstance(params, CSRParams):
            raise TypeError(f"CSRSpMxV takes a models.bbs.csr.CSRParams, not {params!r}")
        self.params = p = params
        super().__init__({
            "w": In(stream.Signature(csr_weight_layout(p))),
            "x": In(stream.Signature(data.ArrayLayout(signed(p.vec_fmt.width), p.lanes))),
            "y": Out(stream.Signature(data.ArrayLayout(signed(p.out_fmt.width), p.mults))),
            "cycles": Out(COUNTER_BITS),
            "w_beats": Out(COUNTER_BITS),
            "busy_lanes": Out(COUNTER_BITS),
            "stall_out": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        p = self.params
        m = Module()
        M, L, V, G = p.mults, p.lanes, p.vector_beats, p.row_groups
        XW, OW = p.vec_fmt.width, p.out_fmt.width
        lbits = (L - 1).bit_length()
        vbits = max(1, (V - 1).bit_length())
        gbits = max(1, (G - 1).bit_length())

        # --- vector loader (double-buffered, as in hdl.bbs.spmxv) -------------------------------
        full = Signal(2)
        wr_sel, rd_sel = Signal(), Signal()
        wr_cnt = Signal(range(max(V, 2)))
        x_fire = self.x.valid & self.x.ready
        m.d.comb += self.x.ready.eq(~full.bit_select(wr_sel, 1))
        with m.If(x_fire):
            with m.If(wr_cnt == V - 1):
                m.d.sync += [wr_cnt.eq(0), wr_sel.eq(~wr_sel), full.bit_select(wr_sel, 1).eq(1)]
            with m.Else():
                m.d.sync += wr_cnt.eq(wr_cnt + 1)

        # --- weight acceptance: a loaded vector and a free result buffer --------------------------
        inflight = Signal(2)          # products accepted whose results have not all left
        w_fire = self.w.valid & self.w.ready
        w_end = w_fire & self.w.payload.end
        m.d.comb += self.w.ready.eq(full.bit_select(rd_sel, 1) & (inflight < 2))
        with m.If(w_end):
            m.d.sync += [rd_sel.eq(~rd_sel), full.bit_select(rd_sel, 1).eq(0)]
        lanes = self.w.payload.lanes

        # stage 1: operands wait for the vector read; stage 2: products
        s1_v, s1_end, s2_v, s2_end = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [s1_v.eq(w_fire), s1_end.eq(w_end), s2_v.eq(s1_v), s2_end.eq(s1_v & s1_end)]

        # --- result buffers and emitter -----------------------------------------------------------
        res_full = Signal(2)
        psel, osel = Signal(), Signal()
        ocnt = Signal(range(max(G, 2)))
        ren = ~self.y.valid | self.y.ready
        done_buf = Signal()
        m.d.comb += done_buf.eq(ren & res_full.bit_select(osel, 1) & (ocnt == G - 1))

        for pe in range(M):
            vmem = Memory(shape=unsigned(L * XW), depth=2 << vbits, init=[])
            rmem = Memory(shape=signed(OW), depth=2 << gbits, init=[])
            m.submodules[f"vmem{pe}"], m.submodules[f"rmem{pe}"] = vmem, rmem
            vwp, vrp = vmem.write_port(), vmem.read_port()
            rwp, rrp = rmem.write_port(), rmem.read_port()
            ln = lanes[pe]
            m.d.comb += [vwp.addr.eq(Cat(wr_cnt, wr_sel)), vwp.data.eq(self.x.payload.as_value()),
                         vwp.en.eq(x_fire),
                         vrp.addr.eq(Cat(ln.col[lbits:], rd_sel)), vrp.en.eq(1)]
            s1_w = Signal(signed(p.weight_fmt.width), name=f"s1_w{pe}")
            s1_l = Signal(max(1, lbits), name=f"s1_l{pe}")
            s1_last, s1_lv = Signal(name=f"s1_last{pe}"), Signal(name=f"s1_lv{pe}")
            m.d.sync += [s1_w.eq(ln.value), s1_l.eq(ln.col[:lbits] if lbits else 0),
                         s1_last.eq(ln.last), s1_lv.eq(w_fire & ln.valid)]
            xe = vrp.data.word_select(s1_l, XW).as_signed() if L > 1 else vrp.data.as_signed()
            # the product register is the DSP's own output register on an ECP5 (hdl.common.dsp): the
            # lane select -> multiplier -> fabric register was the critical path
            s2_prod = registered_mul(m, s1_w, xe, en=1, name=f"s2_prod{pe}")
            s2_last, s2_lv = Signal(name=f"s2_last{pe}"), Signal(name=f"s2_lv{pe}")
            m.d.sync += [s2_last.eq(s1_last), s2_lv.eq(s1_lv)]
            # stage 3: accumulate; a row's last entry writes its result
            acc = Signal(signed(p.acc_width), name=f"acc{pe}")
            fresh = Signal(init=1, name=f"fresh{pe}")
            row = Signal(range(max(G, 2)), name=f"row{pe}")
            new = Signal(signed(p.acc_width), name=f"acc_next{pe}")
            # stage 4: the row's sum (held in acc until the PE's next entry) requantised into the
            # result memory (accumulate, requantise and write in one cycle missed 100 MHz with 16
            # PEs on an LFE5U-85F: two carry chains in series)
            s4_we = Signal(name=f"s4_we{pe}")
            s4_addr = Signal(len(Cat(row, psel)), name=f"s4_addr{pe}")
            m.d.sync += [s4_we.eq(s2_lv & s2_last), s4_addr.eq(Cat(row, psel))]
            m.d.comb += [new.eq(s2_prod + Mux(fresh, 0, acc)),
                         rwp.addr.eq(s4_addr), rwp.data.eq(requantize(acc, p.acc_frac, p.out_fmt)),
                         rwp.en.eq(s4_we)]
            with m.If(s2_lv):
                m.d.sync += [acc.eq(new), fresh.eq(s2_last)]
                with m.If(s2_last):
                    m.d.sync += row.eq(Mux(row == G - 1, 0, row + 1))
            m.d.comb += [rrp.addr.eq(Cat(ocnt, osel)), rrp.en.eq(ren), self.y.payload[pe].eq(rrp.data)]

        # a product's result buffer is full once its last row is written, a cycle after its last
        # entry accumulates (stage 4); the rows of the next product already go to the other buffer
        s4_end, s4_sel = Signal(), Signal()
        m.d.sync += [s4_end.eq(s2_v & s2_end), s4_sel.eq(psel)]
        with m.If(s2_v & s2_end):
            m.d.sync += psel.eq(~psel)
        with m.If(s4_end):
            m.d.sync += res_full.bit_select(s4_sel, 1).eq(1)
        with m.If(ren):
            m.d.sync += self.y.valid.eq(res_full.bit_select(osel, 1))
            with m.If(res_full.bit_select(osel, 1)):
                m.d.sync += ocnt.eq(Mux(ocnt == G - 1, 0, ocnt + 1))
        with m.If(done_buf):
            m.d.sync += [osel.eq(~osel), res_full.bit_select(osel, 1).eq(0)]
        with m.If(w_end & ~done_buf):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(done_buf & ~w_end):
            m.d.sync += inflight.eq(inflight - 1)

        # --- counters -------------------------------------------------------------------------------
        busy = Signal()
        m.d.comb += busy.eq(full.any() | (wr_cnt != 0) | x_fire | (inflight != 0) | self.y.valid)
        nvalid = Signal(range(M + 1))
        m.d.comb += nvalid.eq(_tree_sum([lanes[pe].valid for pe in range(M)]) if M > 1 else lanes[0].valid)
        _count(m, self.cycles, busy)
        _count(m, self.w_beats, w_fire)
        _count(m, self.busy_lanes, w_fire, nvalid)
        _count(m, self.stall_out, self.y.valid & ~self.y.ready)
        return m

"""BeamRaster precoder datapath in Amaranth: K users' symbols -> M antenna samples per subcarrier.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019. The golden model, fixed-point rules and stream word layouts are in
:mod:`models.beamraster.datapath`; this block meets them bit for bit.

Architecture
------------
- **Coefficient loader** (stream ``c``): a coefficient set per frame, ``1 + groups * K`` beats
  (the ``K`` beam indices, then the pre-distortion rows). Two banks: set ``f + 1`` loads while
  frame ``f`` runs; a bank is released when the last row of its frame's last symbol has been
  read, so sets swap only at frame boundaries. The rows live in one memory of
  ``2 * groups * K`` words of ``2 K PW`` bits; the beams in registers.
- **Pre-distortion stage** (stream ``s``): a symbol beat (``K`` complex symbols) is held while
  the ``K`` rows of its group's ``P`` are read, one per cycle; ``K`` complex multipliers and an
  adder tree give ``s'_k = sum_j P[k, j] s_j`` (requantised to ``mid_fmt``), written with the
  user's beam into one of three ``s'`` buffers (registers), so the stage runs ahead of the beam
  stage by up to two symbols and covers its own 3-cycle latency.
- **Beam stage** (stream ``x``): for antenna group ``a`` (``L`` lanes) and user ``k`` per cycle,
  each lane computes its twiddle index ``((a L + l) (b_k XOR M/2)) mod M`` with shift-and-add
  (no multiplier), looks the twiddle up in an ``M``-entry table (the whole DFT beam bank),
  multiplies by ``s'_k`` and accumulates; after ``K`` cycles the ``L`` sums are requantised to
  ``out_fmt`` and leave as one beat. Four register stages (index, twiddle, product, output).

Throughput and latency. The beam stage bounds throughput: one subcarrier-symbol per
``K * M / L`` cycles (the pre-distortion stage needs ``K``). Latency from a symbol's acceptance
to its first output beat is ``K + 7`` cycles. See :class:`models.beamraster.datapath.CycleModel`.

Back-pressure. The beam stage's registers advance together only when the output register is
empty or taken (``~x.valid | x.ready``), so a stalled output holds its payload. The
pre-distortion stage never stalls mid-symbol: it accepts a symbol only when an ``s'`` buffer is
free and the frame's coefficient set is loaded.

Resources. ``4 (K + L)`` real multipliers of ``16 x 16`` bits (DSP slices), the row memory
(``2 * groups * K`` x ``2 K PW`` bits, block RAM), ``L`` twiddle look-ups of ``M`` entries
(LUTs), ``3 K`` buffered ``s'`` words, ``L`` complex accumulators of ``bm_acc_width`` bits.

Counters (saturating at 2**32 - 1): ``cycles`` (the engine holds work), ``sym_beats``,
``out_beats``, ``coef_beats`` (accepted beats), ``issues`` (beam-stage user-cycles: the
utilisation numerator), ``stall_out`` (output refused), ``starve_coef`` (a symbol waited for its
frame's coefficient set).
"""

from __future__ import annotations

import cmath
import math

from amaranth import Module
from amaranth.hdl import Const, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.common.arith import count_saturating
from hdl.common.arith import tree_sum as _tree_sum
from hdl.common.fixed import requantize
from models.beamraster.datapath import PrecoderParams, twiddles

__all__ = ["Precoder", "complex_layout", "S_BANKS"]

COUNTER_BITS = 32
#: s' buffers between the stages (three keep the beam stage fed when ``L = M``).
S_BANKS = 3


def complex_layout(width: int) -> data.StructLayout:
    """{re, im}: the real part in the low bits."""
    return data.StructLayout({"re": signed(width), "im": signed(width)})


def _mul_mod(var, const: int, bits: int):
    """``(var * const) mod 2**bits`` as shift-and-add (``const`` a non-negative integer)."""
    terms = [(var << i)[:bits] for i in range(bits) if (const >> i) & 1]
    if not terms:
        return Const(0, bits)
    return _tree_sum(terms)[:bits]


def _var_mul_mod(a, b, shift: int, bits: int):
    """``(a * b << shift) mod 2**bits`` for unsigned signals, as a sum of gated shifts of ``b``."""
    terms = [Mux(a[i], (b << (i + shift))[:bits], 0) for i in range(len(a)) if i + shift < bits]
    if not terms:
        return Const(0, bits)
    return _tree_sum(terms)[:bits]


def _pick(items: list, idx):
    """``items[idx]`` as a balanced tree of 2:1 muxes on the bits of ``idx``.

    The list is padded to a power of two with its last item. A mux tree becomes continuous
    assignments in Verilog; an ``Array`` becomes a ``case`` in an ``always @*`` block, which
    Icarus leaves at X until one of its inputs changes (here: possibly never).
    """
    items = list(items)
    n = 1 << max(0, (len(items) - 1).bit_length())
    items += [items[-1]] * (n - len(items))
    bit = 0
    while len(items) > 1:
        items = [Mux(idx[bit], items[i + 1], items[i]) for i in range(0, len(items), 2)]
        bit += 1
    return items[0]


def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


class Precoder(wiring.Component):
    """BeamRaster precoder datapath.

    Parameters
    ----------
    params : PrecoderParams

    Attributes
    ----------
    s : In(stream.Signature(ArrayLayout(complex(SW), K)))
        Symbols, one beat per subcarrier-symbol.
    c : In(stream.Signature(unsigned(coef_width)))
        Coefficient sets, ``1 + groups * K`` beats per frame.
    x : Out(stream.Signature(ArrayLayout(complex(OW), L)))
        Antenna samples, ``M / L`` beats per subcarrier-symbol.
    cycles, sym_beats, out_beats, coef_beats, issues, stall_out, starve_coef : Out(32)
        Performance counters.
    """

    def __init__(self, params: PrecoderParams):
        if not isinstance(params, PrecoderParams):
            raise TypeError(f"Precoder takes a models.beamraster.datapath.PrecoderParams, not {params!r}")
        self.params = p = params
        super().__init__({
            "s": In(stream.Signature(data.ArrayLayout(complex_layout(p.sym_fmt.width), p.K))),
            "c": In(stream.Signature(unsigned(p.coef_width))),
            "x": Out(stream.Signature(data.ArrayLayout(complex_layout(p.out_fmt.width), p.lanes))),
            **{name: Out(COUNTER_BITS) for name in ("cycles", "sym_beats", "out_beats", "coef_beats", "issues",
                                                     "stall_out", "starve_coef")},
        })

    def elaborate(self, platform):
        p = self.params
        m = Module()
        K, L, M, G = p.K, p.lanes, p.M, p.ant_groups
        BB, PW, MW = p.beam_bits, p.pd_fmt.width, p.mid_fmt.width
        GK = p.groups * K

        # ------------------------------------------------------------------ coefficient loader
        cfull = [Signal(name=f"cfull{b}") for b in range(2)]
        cwsel = Signal()
        cwcnt = Signal(range(p.coef_beats))
        beams = [[Signal(BB, name=f"beam{b}_{k}") for k in range(K)] for b in range(2)]
        m.submodules.pmem = pmem = Memory(shape=unsigned(2 * K * PW), depth=2 * GK, init=[])
        pw_port, pr_port = pmem.write_port(), pmem.read_port()

        c_fire = self.c.valid & self.c.ready
        m.d.comb += self.c.ready.eq(~Mux(cwsel, cfull[1], cfull[0]))
        m.d.comb += [pw_port.addr.eq(Mux(cwsel, GK, 0) + cwcnt - 1), pw_port.data.eq(self.c.payload[:2 * K * PW]),
                     pw_port.en.eq(c_fire & (cwcnt != 0))]
        c_set_done = Signal()
        m.d.comb += c_set_done.eq(c_fire & (cwcnt == p.coef_beats - 1))
        with m.If(c_fire):
            with m.If(cwcnt == 0):
                for b in range(2):
                    with m.If(cwsel == b):
                        m.d.sync += [beams[b][k].eq(self.c.payload[k * BB:(k + 1) * BB]) for k in range(K)]
            with m.If(c_set_done):
                m.d.sync += [cwcnt.eq(0), cwsel.eq(~cwsel)]
            with m.Else():
                m.d.sync += cwcnt.eq(cwcnt + 1)

        # ------------------------------------------------------------------ pre-distortion stage
        crd = Signal()                                    # coefficient bank of the next symbol
        sub = Signal(range(p.sc_per_group))               # position of the next symbol in its frame
        grp = Signal(range(p.groups))
        osym = Signal(range(p.symbols_per_frame))
        busy = Signal()
        k = Signal(range(K))
        ibank, igrp, ilast = Signal(), Signal(range(p.groups)), Signal()   # the symbol being issued
        sym = Signal(data.ArrayLayout(complex_layout(p.sym_fmt.width), K))
        sclaim = [Signal(name=f"sclaim{b}") for b in range(S_BANKS)]
        sready = [Signal(name=f"sready{b}") for b in range(S_BANKS)]
        swsel = Signal(range(S_BANKS))                    # s' buffer of the next symbol
        isb = Signal(range(S_BANKS))                      # s' buffer of the symbol being issued

        def nxt_bank(v):
            return Mux(v == S_BANKS - 1, 0, v + 1)

        last_issue = Signal()
        m.d.comb += last_issue.eq(busy & (k == K - 1))
        coef_ok = Mux(crd, cfull[1], cfull[0])
        sbuf_free = ~_pick(sclaim, swsel)
        can_take = (~busy | last_issue) & sbuf_free
        m.d.comb += self.s.ready.eq(can_take & coef_ok)
        s_fire = self.s.valid & self.s.ready
        frame_end = (sub == p.sc_per_group - 1) & (grp == p.groups - 1) & (osym == p.symbols_per_frame - 1)

        with m.If(last_issue):
            m.d.sync += busy.eq(0)
            with m.If(ilast):
                for b in range(2):
                    with m.If(ibank == b):
                        m.d.sync += cfull[b].eq(0)
        with m.Elif(busy):
            m.d.sync += k.eq(k + 1)
        for b in range(2):  # the loader fills a released bank only (never the one being read)
            with m.If(c_set_done & (cwsel == b)):
                m.d.sync += cfull[b].eq(1)

        with m.If(s_fire):
            m.d.sync += [busy.eq(1), k.eq(0), sym.eq(self.s.payload), ibank.eq(crd), igrp.eq(grp),
                         ilast.eq(frame_end), isb.eq(swsel), swsel.eq(nxt_bank(swsel))]
            for b in range(S_BANKS):
                with m.If(swsel == b):
                    m.d.sync += sclaim[b].eq(1)
            with m.If(sub == p.sc_per_group - 1):
                m.d.sync += sub.eq(0)
                with m.If(grp == p.groups - 1):
                    m.d.sync += grp.eq(0)
                    with m.If(osym == p.symbols_per_frame - 1):
                        m.d.sync += [osym.eq(0), crd.eq(~crd)]
                    with m.Else():
                        m.d.sync += osym.eq(osym + 1)
                with m.Else():
                    m.d.sync += grp.eq(grp + 1)
            with m.Else():
                m.d.sync += sub.eq(sub + 1)

        # issue: read row k of group igrp (bank ibank); stage a waits for the synchronous read
        m.d.comb += pr_port.addr.eq(Mux(ibank, GK, 0) + igrp * K + k)
        a_valid, a_last = Signal(), Signal()
        a_k, a_sb = Signal(range(K)), Signal(range(S_BANKS))
        a_beam = Signal(BB)
        a_sym = Signal.like(sym)
        m.d.sync += [a_valid.eq(busy), a_last.eq(last_issue), a_k.eq(k), a_sb.eq(isb), a_sym.eq(sym),
                     a_beam.eq(_pick([_pick(row, k) for row in beams], ibank))]
        # stage b: K complex products
        coef = data.ArrayLayout(complex_layout(PW), K)(pr_port.data)
        pwid = PW + p.sym_fmt.width + 1
        b_valid, b_last = Signal(), Signal()
        b_k, b_sb, b_beam = Signal(range(K)), Signal(range(S_BANKS)), Signal(BB)
        b_re = [Signal(signed(pwid), name=f"pd_re{j}") for j in range(K)]
        b_im = [Signal(signed(pwid), name=f"pd_im{j}") for j in range(K)]
        m.d.sync += [b_valid.eq(a_valid), b_last.eq(a_last), b_k.eq(a_k), b_sb.eq(a_sb), b_beam.eq(a_beam)]
        for j in range(K):
            re, im = _cmul(coef[j].re, coef[j].im, a_sym[j].re, a_sym[j].im)
            m.d.sync += [b_re[j].eq(re), b_im[j].eq(im)]
        # stage c: adder tree, requantise, write s' with the user's beam
        frac1 = p.pd_fmt.frac_bits + p.sym_fmt.frac_bits
        sp_re = Signal(signed(MW))
        sp_im = Signal(signed(MW))
        m.d.comb += [sp_re.eq(requantize(_tree_sum(b_re), frac1, p.mid_fmt)),
                     sp_im.eq(requantize(_tree_sum(b_im), frac1, p.mid_fmt))]
        sb_re = [[Signal(signed(MW), name=f"sb{b}_re{j}") for j in range(K)] for b in range(S_BANKS)]
        sb_im = [[Signal(signed(MW), name=f"sb{b}_im{j}") for j in range(K)] for b in range(S_BANKS)]
        sb_beam = [[Signal(BB, name=f"sb{b}_beam{j}") for j in range(K)] for b in range(S_BANKS)]
        for b in range(S_BANKS):
            for j in range(K):
                with m.If(b_valid & (b_sb == b) & (b_k == j)):
                    m.d.sync += [sb_re[b][j].eq(sp_re), sb_im[b][j].eq(sp_im), sb_beam[b][j].eq(b_beam)]
            with m.If(b_valid & b_last & (b_sb == b)):
                m.d.sync += sready[b].eq(1)

        # ------------------------------------------------------------------ beam stage
        rb = Signal(range(S_BANKS))
        ag = Signal(range(G))
        uk = Signal(range(K))
        adv = Signal()
        m.d.comb += adv.eq(~self.x.valid | self.x.ready)
        issue = Signal()
        m.d.comb += issue.eq(adv & _pick(sready, rb))
        done_bank = issue & (uk == K - 1) & (ag == G - 1)
        with m.If(issue):
            with m.If(uk == K - 1):
                m.d.sync += uk.eq(0)
                with m.If(ag == G - 1):
                    m.d.sync += [ag.eq(0), rb.eq(nxt_bank(rb))]
                with m.Else():
                    m.d.sync += ag.eq(ag + 1)
            with m.Else():
                m.d.sync += uk.eq(uk + 1)
        for b in range(S_BANKS):
            with m.If(done_bank & (rb == b)):
                m.d.sync += [sready[b].eq(0), sclaim[b].eq(0)]

        # S1: twiddle indices ((a L + l) * (b XOR M/2)) mod M, and s'_k
        bx = Signal(BB)
        m.d.comb += bx.eq(_pick([_pick(row, uk) for row in sb_beam], rb) ^ (M // 2))
        base = Signal(BB)
        m.d.comb += base.eq(_var_mul_mod(ag, bx, int(L).bit_length() - 1, BB) if G > 1 else 0)
        t_valid, t_first, t_last = Signal(), Signal(), Signal()
        t_sr, t_si = Signal(signed(MW)), Signal(signed(MW))
        t_idx = [Signal(BB, name=f"tidx{l}") for l in range(L)]
        # S2: twiddles
        twr, twi = twiddles(p)
        TW = p.tw_fmt.width
        rom_re = [Const(int(v), signed(TW)) for v in twr]
        rom_im = [Const(int(v), signed(TW)) for v in twi]
        u_valid, u_first, u_last = Signal(), Signal(), Signal()
        u_sr, u_si = Signal(signed(MW)), Signal(signed(MW))
        u_cr = [Signal(signed(TW), name=f"twr{l}") for l in range(L)]
        u_ci = [Signal(signed(TW), name=f"twi{l}") for l in range(L)]
        # S3: products
        vw = TW + MW + 1
        v_valid, v_first, v_last = Signal(), Signal(), Signal()
        v_re = [Signal(signed(vw), name=f"bm_re{l}") for l in range(L)]
        v_im = [Signal(signed(vw), name=f"bm_im{l}") for l in range(L)]
        acc_re = [Signal(signed(p.bm_acc_width), name=f"acc_re{l}") for l in range(L)]
        acc_im = [Signal(signed(p.bm_acc_width), name=f"acc_im{l}") for l in range(L)]
        frac2 = p.tw_fmt.frac_bits + p.mid_fmt.frac_bits
        with m.If(adv):
            m.d.sync += [t_valid.eq(issue), t_first.eq(uk == 0), t_last.eq(uk == K - 1),
                         t_sr.eq(_pick([_pick(r, uk) for r in sb_re], rb)),
                         t_si.eq(_pick([_pick(r, uk) for r in sb_im], rb))]
            m.d.sync += [t_idx[l].eq((base + _mul_mod(bx, l, BB))[:BB]) for l in range(L)]
            m.d.sync += [u_valid.eq(t_valid), u_first.eq(t_first), u_last.eq(t_last), u_sr.eq(t_sr), u_si.eq(t_si)]
            m.d.sync += [u_cr[l].eq(_pick(rom_re, t_idx[l])) for l in range(L)]
            m.d.sync += [u_ci[l].eq(_pick(rom_im, t_idx[l])) for l in range(L)]
            m.d.sync += [v_valid.eq(u_valid), v_first.eq(u_first), v_last.eq(u_last)]
            for l in range(L):
                re, im = _cmul(u_cr[l], u_ci[l], u_sr, u_si)
                m.d.sync += [v_re[l].eq(re), v_im[l].eq(im)]
            m.d.sync += self.x.valid.eq(v_valid & v_last)
            for l in range(L):
                nre = Signal(signed(p.bm_acc_width), name=f"nacc_re{l}")
                nim = Signal(signed(p.bm_acc_width), name=f"nacc_im{l}")
                m.d.comb += [nre.eq(v_re[l] + Mux(v_first, 0, acc_re[l])),
                             nim.eq(v_im[l] + Mux(v_first, 0, acc_im[l]))]
                with m.If(v_valid):
                    m.d.sync += [acc_re[l].eq(nre), acc_im[l].eq(nim)]
                    with m.If(v_last):
                        m.d.sync += [self.x.payload[l].re.eq(requantize(nre, frac2, p.out_fmt)),
                                     self.x.payload[l].im.eq(requantize(nim, frac2, p.out_fmt))]

        # ------------------------------------------------------------------ counters
        work = Signal()
        m.d.comb += work.eq(busy | a_valid | b_valid | t_valid | u_valid | v_valid | self.x.valid
                            | _pick(sready, rb) | (self.s.valid & can_take & ~coef_ok))
        count_saturating(m, ((self.cycles, work), (self.sym_beats, s_fire), (self.coef_beats, c_fire),
                          (self.out_beats, self.x.valid & self.x.ready), (self.issues, issue),
                          (self.stall_out, self.x.valid & ~self.x.ready),
                          (self.starve_coef, self.s.valid & can_take & ~coef_ok)))
        return m


def twiddle_check(p: PrecoderParams) -> float:
    """Largest error of the quantised twiddles against ``exp(2j pi i / M)`` (for reports)."""
    tr, ti = twiddles(p)
    return max(abs(complex(r, i) * p.tw_fmt.lsb - cmath.exp(2j * math.pi * n / p.M))
               for n, (r, i) in enumerate(zip(tr, ti)))

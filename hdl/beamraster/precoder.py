"""BeamRaster precoder datapath in Amaranth: K users' symbols -> M antenna samples per subcarrier.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019. The golden model, fixed-point rules and stream word layouts are in
:mod:`hwcosim.models.beamraster.datapath`; this block meets them bit for bit.

Architecture
------------
- **Coefficient loader** (stream ``c``): a coefficient set per frame, ``1 + groups * K`` beats
  (the ``K`` beam indices, then the pre-distortion rows). Two banks: set ``f + 1`` loads while
  frame ``f`` runs; a bank is released when the last row of its frame's last symbol has been
  read, so sets swap only at frame boundaries. The rows live in one memory of
  ``2 * groups * K`` words of ``2 K PW`` bits; the beams in registers.
- **Pre-distortion stage** (stream ``s``): a symbol beat (``K`` complex symbols) is held while
  the ``K`` rows of its group's ``P`` are read, one per cycle; the read row is registered, ``K``
  complex multipliers (four real products each, registered twice) and a pipelined adder tree (a
  register every two adder levels) give ``s'_k = sum_j P[k, j] s_j`` (requantised to
  ``mid_fmt``), written with the user's beam into one of ``S_BANKS = 4`` ``s'`` buffers
  (registers), so the stage runs ahead of the beam stage by up to three symbols and covers its
  own latency (:func:`hwcosim.models.beamraster.datapath.pd_latency`: 8 cycles for ``3 <= K <= 8``).
- **Beam stage** (stream ``x``): for antenna group ``a`` (``L`` lanes) and user ``k`` per cycle,
  each lane computes its twiddle index ``((a L + l) (b_k XOR M/2)) mod M`` with shift-and-add
  (no multiplier), looks the twiddle up in an ``M``-entry table (the whole DFT beam bank),
  multiplies by ``s'_k`` (four registered real products per lane) and accumulates; after ``K``
  cycles the ``L`` sums are requantised to ``out_fmt`` and leave as one beat. Six register
  stages (beam and ``s'`` picked from their buffer, index, twiddle, products, accumulator, output).

Timing. Every block-RAM output is registered before logic, every multiplier output is
registered before its adder, and adder trees have a register every two levels, so that no
cycle holds more than one multiplier or two carry chains (for 100 MHz on an ECP5 speed 6).

Throughput and latency. The beam stage bounds throughput: one subcarrier-symbol per
``K * M / L`` cycles (the pre-distortion stage needs ``K``). Latency from a symbol's acceptance
to its first output beat is ``K + pd_latency(K) + 6`` cycles (``K + 14`` for ``3 <= K <= 8``). See
:class:`hwcosim.models.beamraster.datapath.CycleModel`.

Boards. The default ``M = 64, K = 8, L = 64`` needs 288 multipliers; an ECP5-85F has 156
MULT18X18D. :func:`hwcosim.models.beamraster.datapath.ecp5_params` keeps 64 antennas and 8 users and
folds the beam stage over ``L = 16`` lanes (96 multipliers, 32 cycles per subcarrier-symbol).

Back-pressure. The beam stage's registers advance together only when the output register is
empty or taken (``~x.valid | x.ready``), so a stalled output holds its payload. The
pre-distortion stage never stalls mid-symbol: it accepts a symbol only when an ``s'`` buffer is
free and the frame's coefficient set is loaded.

Resources. ``4 (K + L)`` real multipliers of ``16 x 16`` bits (DSP slices), the row memory
(``2 * groups * K`` x ``2 K PW`` bits, block RAM), ``L`` twiddle look-ups of ``M`` entries
(LUTs), ``S_BANKS K`` buffered ``s'`` words, ``L`` complex accumulators of ``bm_acc_width``
bits, and the pipeline registers (``4 (K + L)`` products, the adder-tree stages).

Counters (saturating at 2**32 - 1): ``cycles`` (the engine holds work), ``sym_beats``,
``out_beats``, ``coef_beats`` (accepted beats), ``issues`` (beam-stage user-cycles: the
utilisation numerator), ``stall_out`` (output refused), ``starve_coef`` (a symbol waited for its
frame's coefficient set).
"""

from __future__ import annotations

import cmath
import math

from amaranth import Module
from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.arith import count_saturating, requantize_parallel
from hwcosim.hdl.common.arith import tree_sum as _tree_sum
from hwcosim.hdl.common.dsp import registered_mul
from hwcosim.models.beamraster.datapath import S_BANKS, PrecoderParams, pd_tree_stages, twiddles

__all__ = ["Precoder", "complex_layout", "S_BANKS"]

COUNTER_BITS = 32


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


def _pipelined_sum(m, terms: list, name: str):
    """Sum of ``terms`` (signed values, each already one adder level deep) as an adder tree with
    a register after every two levels and on the result: ``(registered sum, register stages)``."""
    depth, stages = 1, 0
    while True:
        if len(terms) == 1 or depth == 2:
            regs = [Signal(t.shape(), name=f"{name}_s{stages}_{i}") for i, t in enumerate(terms)]
            m.d.sync += [r.eq(t) for r, t in zip(regs, terms)]
            terms, depth, stages = regs, 0, stages + 1
            if len(terms) == 1:
                return terms[0], stages
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms, depth = nxt, depth + 1


def _delay(m, sigs, n: int, name: str):
    """``sigs`` delayed by ``n`` register stages (``n >= 1``): ``(delayed sigs, the first signal
    at every stage)``."""
    cur = list(sigs)
    valids = []
    for d in range(n):
        nxt = [Signal.like(s, name=f"{name}_d{d}_{i}") for i, s in enumerate(cur)]
        m.d.sync += [a.eq(b) for a, b in zip(nxt, cur)]
        valids.append(nxt[0])
        cur = nxt
    return cur, valids


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

        # issue: read row k of group igrp (bank ibank); the read data is registered before any
        # logic (a block RAM's clock-to-output leaves no room for a multiplier in the cycle)
        m.d.comb += pr_port.addr.eq(Mux(ibank, GK, 0) + igrp * K + k)
        a_valid, a_last = Signal(), Signal()
        a_k, a_sb = Signal(range(K)), Signal(range(S_BANKS))
        a_beam = Signal(BB)
        a_sym = Signal.like(sym)
        m.d.sync += [a_valid.eq(busy), a_last.eq(last_issue), a_k.eq(k), a_sb.eq(isb), a_sym.eq(sym),
                     a_beam.eq(_pick([_pick(row, k) for row in beams], ibank))]
        coef_q = Signal(2 * K * PW, name="pd_coef")
        q_sym = Signal.like(sym, name="pd_sym")
        m.d.sync += [coef_q.eq(pr_port.data), q_sym.eq(a_sym)]
        # the 4 K real products, registered
        coef = data.ArrayLayout(complex_layout(PW), K)(coef_q)
        # registered twice: in the DSP block's output register on an ECP5 build (hdl.common.dsp),
        # then in the fabric beside the adder tree (the route from the DSP rows in the tree's first
        # cycle missed 100 MHz on a seed on an LFE5U-85F)
        pp0 = [[registered_mul(m, x, y, en=1, name=f"pd_{n}{j}")
                for n, x, y in (("rr", coef[j].re, q_sym[j].re), ("ii", coef[j].im, q_sym[j].im),
                                ("ri", coef[j].re, q_sym[j].im), ("ir", coef[j].im, q_sym[j].re))]
               for j in range(K)]
        assert all(len(x) == PW + p.sym_fmt.width for row in pp0 for x in row)
        pp = [[Signal.like(x, name=f"{x.name}_q") for x in row] for row in pp0]
        m.d.sync += [q.eq(x) for row, row0 in zip(pp, pp0) for q, x in zip(row, row0)]
        # adder tree (first level: re*re - im*im, re*im + im*re), a register every two levels
        t_re, n_stages = _pipelined_sum(m, [pp[j][0] - pp[j][1] for j in range(K)], "pd_re")
        t_im, _ = _pipelined_sum(m, [pp[j][2] + pp[j][3] for j in range(K)], "pd_im")
        assert n_stages == pd_tree_stages(K)
        # the row's meta follows: issue -> read -> registered read -> products (twice) -> tree
        # stages -> requantised sum
        (f_valid, f_last, f_k, f_sb, f_beam), pd_valids = _delay(m, (a_valid, a_last, a_k, a_sb, a_beam),
                                                                 4 + n_stages, "pd")
        # requantise into a register (rounding adder and saturation compares side by side: one
        # carry chain; the S_BANKS * K buffers it fans out to are spread over the die), then write
        # s' with the user's beam
        frac1 = p.pd_fmt.frac_bits + p.sym_fmt.frac_bits
        sp_re = Signal(signed(MW), name="sp_re")
        sp_im = Signal(signed(MW), name="sp_im")
        m.d.sync += [sp_re.eq(requantize_parallel(t_re, frac1, p.mid_fmt)),
                     sp_im.eq(requantize_parallel(t_im, frac1, p.mid_fmt))]
        sb_re = [[Signal(signed(MW), name=f"sb{b}_re{j}") for j in range(K)] for b in range(S_BANKS)]
        sb_im = [[Signal(signed(MW), name=f"sb{b}_im{j}") for j in range(K)] for b in range(S_BANKS)]
        sb_beam = [[Signal(BB, name=f"sb{b}_beam{j}") for j in range(K)] for b in range(S_BANKS)]
        for b in range(S_BANKS):
            for j in range(K):
                with m.If(f_valid & (f_sb == b) & (f_k == j)):
                    m.d.sync += [sb_re[b][j].eq(sp_re), sb_im[b][j].eq(sp_im), sb_beam[b][j].eq(f_beam)]
            with m.If(f_valid & f_last & (f_sb == b)):
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

        # S0: user uk's beam (XOR M/2) and s'_k picked from buffer rb into registers (a 4 K : 1
        # multiplexer: in front of the twiddle index it made a slow cycle on an LFE5U-85F)
        s_valid, s_first, s_last = Signal(name="bm_s_valid"), Signal(name="bm_s_first"), Signal(name="bm_s_last")
        bx = Signal(BB, name="bm_bx")
        s_ag = Signal(range(G), name="bm_ag")
        s_sr, s_si = Signal(signed(MW), name="bm_sr"), Signal(signed(MW), name="bm_si")
        # S1: twiddle indices ((a L + l) * (b XOR M/2)) mod M
        base = Signal(BB)
        m.d.comb += base.eq(_var_mul_mod(s_ag, bx, int(L).bit_length() - 1, BB) if G > 1 else 0)
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
        # S3: the four real products of each lane; then accumulate re*re - im*im (im*re + re*im)
        # over the K users; the finished sums are requantised into the output register a cycle later
        vw = TW + MW
        v_valid, v_first, v_last = Signal(), Signal(), Signal()
        # (in the DSP block's output register on an ECP5 build: hdl.common.dsp)
        v_pp = [[registered_mul(m, x, y, en=adv, name=f"bm_{n}{l}")
                 for n, x, y in (("rr", u_cr[l], u_sr), ("ii", u_ci[l], u_si), ("ri", u_cr[l], u_si),
                                 ("ir", u_ci[l], u_sr))] for l in range(L)]
        assert all(len(x) == vw for row in v_pp for x in row)
        acc_re = [Signal(signed(p.bm_acc_width), name=f"acc_re{l}") for l in range(L)]
        acc_im = [Signal(signed(p.bm_acc_width), name=f"acc_im{l}") for l in range(L)]
        w_last = Signal()                   # the accumulators hold finished sums
        frac2 = p.tw_fmt.frac_bits + p.mid_fmt.frac_bits
        with m.If(adv):
            m.d.sync += [s_valid.eq(issue), s_first.eq(uk == 0), s_last.eq(uk == K - 1), s_ag.eq(ag),
                         bx.eq(_pick([_pick(row, uk) for row in sb_beam], rb) ^ (M // 2)),
                         s_sr.eq(_pick([_pick(r, uk) for r in sb_re], rb)),
                         s_si.eq(_pick([_pick(r, uk) for r in sb_im], rb))]
            m.d.sync += [t_valid.eq(s_valid), t_first.eq(s_first), t_last.eq(s_last), t_sr.eq(s_sr), t_si.eq(s_si)]
            m.d.sync += [t_idx[l].eq((base + _mul_mod(bx, l, BB))[:BB]) for l in range(L)]
            m.d.sync += [u_valid.eq(t_valid), u_first.eq(t_first), u_last.eq(t_last), u_sr.eq(t_sr), u_si.eq(t_si)]
            m.d.sync += [u_cr[l].eq(_pick(rom_re, t_idx[l])) for l in range(L)]
            m.d.sync += [u_ci[l].eq(_pick(rom_im, t_idx[l])) for l in range(L)]
            m.d.sync += [v_valid.eq(u_valid), v_first.eq(u_first), v_last.eq(u_last)]
            m.d.sync += [w_last.eq(v_valid & v_last), self.x.valid.eq(w_last)]
            for l in range(L):
                nre = Signal(signed(p.bm_acc_width), name=f"nacc_re{l}")
                nim = Signal(signed(p.bm_acc_width), name=f"nacc_im{l}")
                m.d.comb += [nre.eq(v_pp[l][0] - v_pp[l][1] + Mux(v_first, 0, acc_re[l])),
                             nim.eq(v_pp[l][2] + v_pp[l][3] + Mux(v_first, 0, acc_im[l]))]
                with m.If(v_valid):
                    m.d.sync += [acc_re[l].eq(nre), acc_im[l].eq(nim)]
                with m.If(w_last):
                    m.d.sync += [self.x.payload[l].re.eq(requantize_parallel(acc_re[l], frac2, p.out_fmt)),
                                 self.x.payload[l].im.eq(requantize_parallel(acc_im[l], frac2, p.out_fmt))]

        # ------------------------------------------------------------------ counters
        pd_busy = Signal()
        m.d.comb += pd_busy.eq(a_valid | Cat(*pd_valids).any())
        work = Signal()
        m.d.comb += work.eq(busy | pd_busy | s_valid | t_valid | u_valid | v_valid | w_last | self.x.valid
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

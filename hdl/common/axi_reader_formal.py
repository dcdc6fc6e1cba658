"""Formal properties of the AXI4 read master (:class:`hwcosim.hdl.common.axi_reader.AxiReader`).

:class:`AxiReaderFormal` wraps the reader in a harness with the same ports (every input is a
free variable of the solver). The memory is a free environment that obeys AXI4; the harness
keeps the slave's view of the bursts it accepted (a queue of address, length and whether the
burst belongs to the current transfer) and assumes:

Assumptions
    Reset is not re-asserted after the initial (reset) state. ``ARREADY``, ``RVALID`` and
    ``o.ready`` are free; R beats come only for an accepted, not yet completed burst, in order;
    ``RLAST`` is high exactly on each burst's last beat; ``RVALID``, ``RDATA``, ``RRESP`` and
    ``RLAST`` hold until ``RREADY``; ``RRESP`` is free (OKAY, EXOKAY, SLVERR, DECERR). The
    memory holds its own address in every beat: ``RDATA`` is the beat's byte address, so the
    order of the output stream is visible in its payload. ``start``, ``base``, ``length`` and
    ``abort`` are free, except that a transfer does not wrap past the top of the address space.

Assertions, by group
    ``ar_hold``     ``ARVALID``, ``ARADDR``, ``ARLEN``, ``ARSIZE`` and ``ARBURST`` hold until
                    ``ARREADY``.
    ``ar_live``     no AR without a started transfer: a burst is presented only for the current
                    transfer, before any abort, failing beat or timeout of it, and only while
                    beats are left to request; its address continues the previous burst's (the
                    bursts tile the buffer from ``base`` in order).
    ``ar_4k``       a burst never crosses a 4 KiB boundary, is at most ``max_burst`` beats,
                    ``ARSIZE`` is the bus width and ``ARBURST`` is INCR.
    ``outstanding`` bursts presented or accepted and not completed never exceed
                    ``max_outstanding``.
    ``conserve``    the beats requested never exceed ``length``, the beats delivered on ``o``
                    never exceed it, and when a transfer ends without abort, error or timeout
                    both equal ``length`` (busy falls only then).
    ``order``       every beat on ``o`` belongs to a burst of the current transfer (never a
                    stale or an earlier transfer's beat), carries no error response, and is the
                    next in address order: its payload is ``base + n * bytes`` for the ``n``-th
                    beat delivered.
    ``o_hold``      ``o.valid`` and ``o.payload`` hold until ``o.ready``, except in the cycle of
                    an ``abort`` (documented: ``o.valid`` falls at once).
    ``busy``        ``busy`` rises only in the cycle after an accepted ``start`` (of a non-zero
                    length) and then always does; it falls once per transfer.
    ``error``       a beat of the current transfer with ``RRESP`` = SLVERR/DECERR, before any
                    abort or earlier failure, is reported in the next cycle: ``err_strobe``,
                    ``error`` = its ``RRESP``, ``err_addr`` = its address; ``err_strobe`` never
                    rises otherwise (except for a timeout) and ``error`` changes only with it or
                    at ``start``.
    ``timeout``     the watchdog fires (``err_strobe`` with ``error`` = 4) only after
                    ``timeout_cycles`` consecutive busy cycles without an AR handshake or an R
                    beat, with the address of the first beat not received; and ``busy`` never
                    lasts ``timeout_cycles + 1`` such cycles.
    ``stale``       ``stale`` is high exactly while a burst of an earlier transfer (abandoned by
                    a timeout) is presented or outstanding.
    ``internal``    white-box invariants tying the harness's queue and counters to the reader's
                    registers (``inflight``, ``stale_n``, ``to_issue``, ``next_addr``,
                    ``rx_addr``, ``stop``, ``wd``): true in every reachable state, they make the
                    groups above k-inductive.

Covers: a transfer ends cleanly after a burst cut at 4 KiB; two bursts outstanding; an error
reported; a timeout; a transfer that completes cleanly although stale bursts were owed at its
start.

:func:`formal_checks` lists the checks for :mod:`hwcosim.cosim.flow.formal`: k-induction of every group on
a tiny reader (13-bit addresses, so two 4 KiB pages; bursts of up to 4 beats; 2 outstanding;
transfers of up to 15 beats; timeout 3 cycles), BMC, covers and the broken variants
(:data:`MUTANTS`) that must fail.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cat, Const, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from hwcosim.hdl.common.axi_reader import ERR_TIMEOUT, AxiReader
from hwcosim.hdl.common.formal import Props, internals, mutant_checks, past
from hwcosim.models.errors import UsageError

__all__ = ["AxiReaderFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params"]

PROPERTIES = ("ar_hold", "ar_live", "ar_4k", "outstanding", "conserve", "order", "o_hold", "busy", "error",
              "timeout", "stale", "internal")
_WHERE = "hdl/common/axi_reader_formal.py"
_REGS = ("inflight", "stale_n", "to_issue", "to_issue_nz", "next_addr", "rx_addr", "stop", "wd", "r4", "blen")


def formal_params(**kw) -> dict:
    """A tiny reader: 13-bit addresses (two 4 KiB pages), 32-bit data, bursts of up to 4 beats,
    2 outstanding, transfers of up to 15 beats, a 3-cycle timeout."""
    p = dict(addr_width=13, data_width=32, max_burst=4, max_outstanding=2, len_width=4, timeout_cycles=3)
    p.update(kw)
    return p


class AxiReaderFormal(wiring.Component):
    """Formal harness: :class:`AxiReader` (or a broken subclass) with its AXI4 read-master
    properties.

    Parameters
    ----------
    params : dict
        :class:`AxiReader` keyword arguments (:func:`formal_params`); ``timeout_cycles`` must
        not be ``None``.
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    """

    def __init__(self, params: dict, dut_class: type = AxiReader, props=None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown AxiReader properties {sorted(unknown)}; choose from {PROPERTIES}")
        if params.get("timeout_cycles") is None:
            self._MustUse__silence = True
            raise UsageError("the AxiReader harness needs a timeout_cycles (a small one)")
        self.props = props
        self.params = dict(params)
        self.dut = dut_class(**params)
        super().__init__(dict(self.dut.signature.members))

    def elaborate(self, platform):
        P = self.params
        AW, DW, MB, Q, T = P["addr_width"], P["data_width"], P["max_burst"], P["max_outstanding"], P["timeout_cycles"]
        NB = DW // 8
        SZ = NB.bit_length() - 1
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        for name, member in self.signature.members.items():
            if name == "o":
                wiring.connect(m, dut.o, wiring.flipped(self.o))
            elif member.flow == In:
                m.d.comb += getattr(dut, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(dut, name))
        chk = Props(m, PROPERTIES, self.props, "AxiReader")
        iv = internals(frag, _REGS, "AxiReader", _WHERE) if "internal" in chk else None
        if iv is not None:
            chk(iv["to_issue_nz"] == (iv["to_issue"] != 0), "internal: to_issue_nz != (to_issue != 0)")

        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        ar_fire, r_fire, o_fire = Signal(), Signal(), Signal()
        m.d.comb += [ar_fire.eq(self.arvalid & self.arready), r_fire.eq(self.rvalid & self.rready),
                     o_fire.eq(self.o.valid & self.o.ready)]
        acc_start = Signal()
        m.d.comb += acc_start.eq(self.start & ~self.busy & ~self.abort)
        beats = Signal(9)
        m.d.comb += beats.eq(self.arlen + 1)

        # --- the slave's view: accepted bursts, oldest first --------------------------------------
        QD = Q + 1                                   # one spare entry: an overflow is asserted, not lost
        qa = [Signal(AW, name=f"q{i}_addr") for i in range(QD)]
        ql = [Signal(9, name=f"q{i}_len") for i in range(QD)]
        qr = [Signal(name=f"q{i}_cur") for i in range(QD)]      # owed to the current transfer
        qn = Signal(range(QD + 1))
        hb = Signal(8)                               # beats of the head burst already returned
        pres_cur = Signal()                          # the presented AR belongs to the current transfer
        pav, par = past(m, self.arvalid, "past_arvalid"), past(m, self.arready, "past_arready")
        new_pres = Signal()                          # an AR presented for the first time
        m.d.comb += new_pres.eq(self.arvalid & ~(has_past & pav & ~par))
        # busy falls with bursts of the transfer still owed only at a timeout: they are abandoned
        # (stale) from that cycle on; at the other ends of a transfer none is owed
        busy_fell = Signal()
        past_busy = past(m, self.busy, "past_busy")
        m.d.comb += busy_fell.eq(has_past & past_busy & ~self.busy)
        qc = [Signal(name=f"q{i}_live") for i in range(QD)]
        m.d.comb += [qc[i].eq(qr[i] & ~busy_fell) for i in range(QD)]
        pcur = Signal()                             # the AR on the bus is owed to the current transfer
        m.d.comb += pcur.eq((new_pres | pres_cur) & ~busy_fell)
        head_addr = Signal(AW)
        m.d.comb += head_addr.eq(qa[0] + (hb << SZ))
        head_cur = Signal()
        m.d.comb += head_cur.eq((qn != 0) & qc[0])
        pop = Signal()
        m.d.comb += pop.eq(r_fire & self.rlast)

        # environment: AXI4 R channel rules and the memory's contents
        with m.If(self.rvalid):
            m.d.comb += [Assume(qn != 0), Assume(self.rlast == (hb == ql[0] - 1)),
                         Assume(self.rdata == head_addr)]
        pv, pr = past(m, self.rvalid, "past_rvalid"), past(m, self.rready, "past_rready")
        pd = past(m, Cat(self.rdata, self.rresp, self.rlast), "past_r")
        with m.If(has_past & pv & ~pr):
            m.d.comb += Assume(self.rvalid & (Cat(self.rdata, self.rresp, self.rlast) == pd))
        # a transfer does not wrap past the top of the address space
        m.d.comb += Assume(((self.base >> SZ) + self.length) <= (1 << (AW - SZ)))

        with m.If(pop):
            for i in range(QD - 1):
                m.d.sync += [qa[i].eq(qa[i + 1]), ql[i].eq(ql[i + 1]), qr[i].eq(qc[i + 1])]
            m.d.sync += qr[QD - 1].eq(0)
        with m.Else():
            m.d.sync += [qr[i].eq(qc[i]) for i in range(QD)]
        with m.If(acc_start):
            m.d.sync += [c.eq(0) for c in qr]
        with m.If(ar_fire):
            with m.Switch(qn - pop):
                for i in range(QD):
                    with m.Case(i):
                        m.d.sync += [qa[i].eq(self.araddr), ql[i].eq(beats), qr[i].eq(pcur & ~acc_start)]
        m.d.sync += qn.eq(qn + ar_fire - pop)
        with m.If(r_fire):
            m.d.sync += hb.eq(Mux(self.rlast, 0, hb + 1))

        # --- the current transfer ---------------------------------------------------------------
        t_base, t_len = Signal(AW), Signal(P["len_width"])
        t_req = Signal(P["len_width"] + 1)          # beats presented, up to the previous cycle
        t_out = Signal(P["len_width"] + 1)          # beats delivered on o
        t_rx = Signal(P["len_width"] + 1)           # beats of the current transfer's bursts received
        t_live = Signal()                           # no abort, failing beat or timeout since start
        t_act = Signal()                            # started (length != 0) and busy not yet fallen

        def at(n):
            """Byte address of beat ``n`` of the current transfer."""
            return (t_base + (n << SZ))[:AW]

        live = Signal()
        m.d.comb += live.eq(t_live & ~self.err_strobe)
        req_now = Signal(P["len_width"] + 2)
        m.d.comb += req_now.eq(t_req + Mux(new_pres, beats, 0))
        err_beat = Signal()                         # a failing beat of the live current transfer
        m.d.comb += err_beat.eq(r_fire & head_cur & self.rresp[1] & live)
        with m.If(new_pres):
            m.d.sync += [t_req.eq(req_now), pres_cur.eq(1)]
        with m.If(busy_fell):
            m.d.sync += pres_cur.eq(0)
        with m.If(o_fire):
            m.d.sync += t_out.eq(t_out + 1)
        with m.If(r_fire & head_cur):
            m.d.sync += t_rx.eq(t_rx + 1)
        with m.If(self.abort | err_beat | self.err_strobe):
            m.d.sync += t_live.eq(0)
        with m.If(busy_fell):
            m.d.sync += t_act.eq(0)
        with m.If(acc_start):
            m.d.sync += [t_base.eq(self.base & ~(NB - 1)), t_len.eq(self.length), t_req.eq(0), t_out.eq(0),
                         t_rx.eq(0), t_live.eq(1), t_act.eq(self.length != 0), pres_cur.eq(0)]

        # --- ar_hold ------------------------------------------------------------------------------
        ar_all = Cat(self.araddr, self.arlen, self.arsize, self.arburst)
        pa = past(m, ar_all, "past_ar")
        with m.If(has_past & pav & ~par):
            chk(self.arvalid, "ar_hold: ARVALID fell before ARREADY")
            chk(ar_all == pa, "ar_hold: AR payload changed before ARREADY")

        # --- ar_live / ar_4k --------------------------------------------------------------------
        with m.If(new_pres):
            chk(live & t_act, "ar_live: a burst presented without a live transfer")
            chk(req_now <= t_len, "ar_live: more beats requested than length")
            chk(self.araddr == at(t_req), "ar_live: the burst does not continue the previous one")
        with m.If(self.arvalid):
            end = self.araddr + (beats << SZ) - 1
            chk(self.araddr[12:] == end[12:], "ar_4k: a burst crosses a 4 KiB boundary")
            chk((beats <= MB), "ar_4k: a burst longer than max_burst")
            chk((self.arsize == SZ) & (self.arburst == 1), "ar_4k: ARSIZE or ARBURST wrong")

        # --- outstanding --------------------------------------------------------------------------
        chk(qn + self.arvalid <= Q, "outstanding: more bursts in flight than max_outstanding")

        # --- conserve -----------------------------------------------------------------------------
        chk(t_req <= t_len, "conserve: more beats requested than length")
        chk(t_out <= t_len, "conserve: more beats delivered than length")
        with m.If(busy_fell & live):
            chk((t_req == t_len) & (t_out == t_len), "conserve: a clean transfer ended short")

        # --- order --------------------------------------------------------------------------------
        with m.If(self.o.valid):
            chk(head_cur, "order: a beat of a stale or earlier burst forwarded")
            chk(~self.rresp[1], "order: a failing beat forwarded")
            chk(self.o.payload == at(t_out), "order: a beat out of address order")

        # --- o_hold -------------------------------------------------------------------------------
        ov, orr = past(m, self.o.valid, "past_o_valid"), past(m, self.o.ready, "past_o_ready")
        op = past(m, self.o.payload, "past_o_payload")
        with m.If(has_past & ov & ~orr & ~self.abort):
            chk(self.o.valid, "o_hold: o.valid fell without o.ready")
            chk(self.o.payload == op, "o_hold: o.payload changed while waiting")

        # --- busy ---------------------------------------------------------------------------------
        p_acc = past(m, acc_start & (self.length != 0), "past_acc_start")
        with m.If(has_past & ~past_busy & self.busy):
            chk(p_acc, "busy: busy rose without an accepted start")
        with m.If(has_past & p_acc):
            chk(self.busy, "busy: an accepted start did not raise busy")
        with m.If(busy_fell):
            chk(t_act, "busy: busy fell twice for one transfer")
        with m.If(self.busy):
            chk(t_act, "busy: busy outside a transfer")

        # --- error --------------------------------------------------------------------------------
        p_err = past(m, err_beat, "past_err_beat")
        p_resp = past(m, self.rresp, "past_rresp")
        p_eaddr = past(m, head_addr, "past_err_addr")
        p_err_now = past(m, self.error, "past_error")
        with m.If(has_past & p_err):
            chk(self.err_strobe & (self.error == p_resp) & (self.err_addr == p_eaddr),
                "error: a failing beat not reported with its RRESP and address")
        # quiet: consecutive busy cycles without an AR handshake or an R beat (up to the last one)
        quiet = Signal(range(T + 3))
        with m.If(self.busy & ~ar_fire & ~self.rvalid):
            m.d.sync += quiet.eq(Mux(quiet == T + 2, quiet, quiet + 1))
        with m.Else():
            m.d.sync += quiet.eq(0)
        with m.If(self.err_strobe):
            chk(has_past & (p_err | ((self.error == ERR_TIMEOUT) & (quiet >= T))),
                "error: err_strobe without a failing beat or a timeout")
        with m.If(has_past & ~self.err_strobe & ~past(m, acc_start, "past_acc")):
            chk(self.error == p_err_now, "error: error changed without err_strobe or start")
        chk((self.error == 0) | (self.error == 2) | (self.error == 3) | (self.error == ERR_TIMEOUT),
            "error: an undefined error code")

        # --- timeout ------------------------------------------------------------------------------
        p_rx = past(m, at(t_rx), "past_rx_addr")
        with m.If(self.err_strobe & (self.error == ERR_TIMEOUT)):
            chk(quiet >= T, "timeout: fired before timeout_cycles cycles without progress")
            chk(self.err_addr == p_rx, "timeout: err_addr is not the first beat not received")
        chk(~(self.busy & (quiet >= T + 1)), "timeout: busy lasted timeout_cycles + 1 cycles without progress")

        # --- stale --------------------------------------------------------------------------------
        n_old = Signal(range(QD + 2))
        m.d.comb += n_old.eq(sum((Const(i, range(QD + 1)) < qn) & ~qc[i] for i in range(QD))
                             + (self.arvalid & ~pcur))
        chk(self.stale == (n_old != 0), "stale: the stale flag differs from the bursts owed to earlier transfers")

        # --- internal -----------------------------------------------------------------------------
        if iv is not None:
            chk(iv["inflight"] == qn + self.arvalid, "internal: inflight != accepted + presented bursts")
            chk(iv["stale_n"] == n_old, "internal: stale_n != bursts of earlier transfers")
            for i in range(QD - 1):
                with m.If((i + 1 < qn) & qc[i]):
                    chk(qc[i + 1], "internal: a stale burst behind a current one")
                with m.If((i + 1 < qn) & qc[i] & qc[i + 1]):
                    chk(qa[i + 1] == (qa[i] + (ql[i] << SZ))[:AW], "internal: current bursts not contiguous")
            for i in range(QD):
                with m.If(i < qn):
                    chk((ql[i] >= 1) & (ql[i] <= MB), "internal: a queued burst of a bad length")
            with m.If(self.arvalid & ~pcur):
                chk(~Cat(*[(Const(i, range(QD + 1)) < qn) & qc[i] for i in range(QD)]).any(),
                    "internal: a stale burst presented behind a current one")
            with m.If(qn == 0):
                chk(hb == 0, "internal: beats counted with no burst")
            with m.Else():
                chk(hb < ql[0], "internal: head beat count beyond the burst")
            with m.If(head_cur):
                chk(head_addr == at(t_rx), "internal: head beat address != next beat of the transfer")
            for i in range(1, QD):
                with m.If((i < qn) & qc[i] & ~qc[i - 1]):
                    chk(qa[i] == at(t_rx), "internal: the first current burst does not start at the next beat")
            # the newest current burst ends where the requests of the transfer end
            last_end = Signal(AW)
            cur_any = Signal()
            for i in range(QD):
                with m.If((i < qn) & qc[i]):
                    m.d.comb += [last_end.eq((qa[i] + (ql[i] << SZ))[:AW]), cur_any.eq(1)]
            with m.If(self.arvalid & pcur):
                chk((self.araddr + (beats << SZ))[:AW] == at(req_now),
                    "internal: the presented burst does not end at the requests")
                with m.If(cur_any):
                    chk(last_end == self.araddr, "internal: the presented burst does not follow the queue")
                with m.Else():
                    chk(self.araddr == at(t_rx), "internal: the presented burst does not start at the next beat")
            with m.Elif(cur_any):
                chk(last_end == at(t_req), "internal: the queue does not end at the requests")
            with m.If(self.busy & ~cur_any & ~(self.arvalid & pcur)):
                chk(t_rx == t_req, "internal: beats owed with no current burst")
            chk(iv["to_issue"] + req_now == t_len, "internal: to_issue != length - requested")
            chk(iv["next_addr"] == at(req_now), "internal: next_addr != base + requested")
            to_4k = Signal(range((4096 >> SZ) + 1))
            m.d.comb += to_4k.eq((4096 - iv["next_addr"][:12]) >> SZ)
            chk(iv["r4"] == to_4k, "internal: r4 != beats from next_addr to the 4 KiB boundary")
            lim = Mux(to_4k < MB, to_4k, MB)
            chk(iv["blen"] == Mux(iv["to_issue"] < lim, iv["to_issue"], lim),
                "internal: blen != min(to_issue, max_burst, beats to the boundary)")
            chk(iv["rx_addr"] == at(t_rx), "internal: rx_addr != base + received")
            chk(t_rx <= t_req, "internal: more beats received than requested")
            chk(t_out <= t_rx, "internal: more beats delivered than received")
            with m.If(live):
                chk(t_out == t_rx, "internal: a beat of a live transfer received but not delivered")
                chk(self.error == 0, "internal: an error recorded in a live transfer")
            with m.If(t_act):
                chk(iv["stop"] == ~live, "internal: stop != the transfer is dead")
            with m.Else():
                chk(~self.busy, "internal: busy without a transfer")
                chk((iv["inflight"] == iv["stale_n"]) & ((iv["to_issue"] == 0) | iv["stop"]),
                    "internal: own work left after the transfer ended")
            with m.If(~t_live):
                chk(iv["stop"] | ~t_act, "internal: a dead transfer still issuing")
            chk(iv["wd"] <= quiet, "internal: watchdog ahead of the quiet cycles")
            with m.If(self.busy & (quiet != 0)):
                chk(iv["wd"] + 1 >= quiet, "internal: watchdog behind the quiet cycles")
            chk((t_base >> SZ) + t_len <= (1 << (AW - SZ)), "internal: the transfer wraps")
            chk(t_base[:SZ] == 0, "internal: unaligned base")

        # --- covers -------------------------------------------------------------------------------
        cut = Signal()
        with m.If(new_pres & ((self.araddr + (beats << SZ))[:12] == 0) & (beats < MB) & (req_now < t_len)):
            m.d.sync += cut.eq(1)
        with m.If(acc_start):
            m.d.sync += cut.eq(0)
        stale_at_start = Signal()
        with m.If(acc_start):
            m.d.sync += stale_at_start.eq(self.stale)
        m.d.comb += [Cover(busy_fell & live & cut), Cover(qn == Q),
                     Cover(self.err_strobe & self.error[1]), Cover(self.err_strobe & (self.error == ERR_TIMEOUT)),
                     Cover(busy_fell & live & stale_at_start & (t_len > 1))]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

def _iv(m, *names):
    return internals(m, names, "AxiReader", _WHERE)


class ArSlipReader(AxiReader):
    """Broken: ``ARADDR`` moves on while the burst waits for ``ARREADY`` (when an R beat arrives)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.arvalid & ~self.arready & self.rvalid):
            m.d.sync += self.araddr.eq(self.araddr + (1 << self.size))
        return m


class Cross4kReader(AxiReader):
    """Broken: the burst length ignores the 4 KiB boundary."""

    def burst_len(self, left, r4, r4_full):
        return Mux(left < self.max_burst, left, self.max_burst)

    def next_burst_len(self, to_issue, r4, blen, left, r4_left, r4_wrap):
        return self.burst_len(left, r4_left, r4_wrap)


class OverIssueReader(AxiReader):
    """Broken: one more burst in flight than ``max_outstanding``."""

    def __init__(self, *, max_outstanding: int = 2, **kw):
        super().__init__(max_outstanding=max_outstanding + 1, **kw)
        self.max_outstanding = max_outstanding

    def elaborate(self, platform):
        self.max_outstanding += 1
        try:
            return super().elaborate(platform)
        finally:
            self.max_outstanding -= 1


class ForwardStaleReader(AxiReader):
    """Broken: after a timeout, the late beats of the abandoned bursts are forwarded to the next
    transfer."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _iv(m, "stop", "inflight")
        drop = iv["stop"] | self.abort | self.rresp[1] | (iv["inflight"] == 0)
        m.d.comb += [self.o.valid.eq(self.rvalid & ~drop), self.rready.eq(drop | self.o.ready)]
        return m


class EarlyTimeoutReader(AxiReader):
    """Broken: the watchdog fires one cycle early."""

    def __init__(self, *, timeout_cycles: int = 3, **kw):
        super().__init__(timeout_cycles=timeout_cycles - 1, **kw)


class ShortReader(AxiReader):
    """Broken: a transfer of more than one beat requests one beat too few."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _iv(m, "to_issue", "blen")
        with m.If(self.start & ~self.busy & ~self.abort & (self.length > 1)):
            r4 = (-self.base[self.size:12])[:12 - self.size]
            m.d.sync += [iv["to_issue"].eq(self.length - 1),
                         iv["blen"].eq(self.burst_len(self.length - 1, r4, r4 == 0))]
        return m


_BLACKBOX = PROPERTIES[:-1]

#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "ar-slip": (ArSlipReader, "bmc", 10, _BLACKBOX, "ar_hold: AR payload changed"),
    "cross-4k": (Cross4kReader, "bmc", 6, _BLACKBOX, "ar_4k: a burst crosses"),
    "over-issue": (OverIssueReader, "bmc", 8, _BLACKBOX, "outstanding:"),
    "forward-stale": (ForwardStaleReader, "bmc", 14, _BLACKBOX, "order: a beat of a stale"),
    "early-timeout": (EarlyTimeoutReader, "bmc", 10, ("timeout",), "timeout: fired before"),
    "short": (ShortReader, "bmc", 10, _BLACKBOX, "conserve: a clean transfer ended short"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`: k-induction of every property group on the tiny reader
    of :func:`formal_params`, a BMC, a cover run and the broken variants. ``full`` adds one
    outstanding burst with 64-bit data, three outstanding bursts of up to 8 beats, and deeper
    BMC."""
    prm = formal_params()
    out = [
        dict(name="b4o2-prove", build=lambda: AxiReaderFormal(prm), mode="prove", depth=3,
             doc="every property, bursts <= 4, 2 outstanding, timeout 3: k-induction (unbounded)"),
        dict(name="b4o2-bmc", build=lambda: AxiReaderFormal(prm), mode="bmc", depth=6,
             doc="every property: BMC"),
        dict(name="b4o2-cover", build=lambda: AxiReaderFormal(prm), mode="cover", depth=14,
             doc="reachable: clean end after a 4 KiB cut, 2 outstanding, an error, a timeout, "
                 "a clean transfer behind stale bursts"),
    ]
    if full:
        prm1 = formal_params(data_width=64, max_burst=2, max_outstanding=1, timeout_cycles=2)
        prm3 = formal_params(max_burst=8, max_outstanding=3, len_width=5, timeout_cycles=4)
        out += [
            dict(name="d64o1-prove", build=lambda: AxiReaderFormal(prm1), mode="prove", depth=4,
                 doc="every property, 64-bit data, 1 outstanding, timeout 2: k-induction"),
            dict(name="b8o3-prove", build=lambda: AxiReaderFormal(prm3), mode="prove", depth=5,
                 doc="every property, bursts <= 8, 3 outstanding, timeout 4: k-induction"),
            dict(name="b4o2-bmc12", build=lambda: AxiReaderFormal(prm), mode="bmc", depth=12,
                 doc="every property: deeper BMC"),
        ]
    out += mutant_checks(MUTANTS, lambda cls, props: AxiReaderFormal(prm, cls, props))
    return out

"""AXI4 memory-mapped read master (a DMA reader): a block of memory out on a stream.

:class:`AxiReader` reads ``length`` data-width beats starting at byte address ``base`` with AXI4
INCR bursts on the read channels (AR, R) and hands every beat, in address order, to its ``o``
stream. It is the weight-fetch engine of the board tops (``LOAD_MM`` of
:class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop`), and reusable wherever a block must pull a buffer from DDR,
HBM or host memory through an AXI interconnect.

Bursts. Each burst is ``min(remaining, max_burst, beats left before the next 4 KiB boundary)``
beats long (``ARLEN`` = beats - 1, ``ARSIZE`` = log2 of the bus width in bytes, ``ARBURST`` =
INCR): no burst crosses a 4 KiB boundary, as AXI4 requires. The length of the next burst is
kept in a register (computed at ``start`` and, on each issue, from the one issued), so no
cycle holds both the burst arithmetic and the address adder. ``ARVALID`` and the burst's
``ARADDR``/``ARLEN`` are held until ``ARREADY``; the next burst may be presented in the cycle
after the handshake, so back-to-back bursts need no idle cycle. At most ``max_outstanding``
bursts are in flight (address accepted or presented, last beat not yet received). All bursts
use ID 0, so the R beats return in order and the address of every beat is known without a
per-burst table.

Throughput and latency. ``RREADY`` is ``o.ready`` (no internal buffer, zero added latency on
the data path): when the slave returns a beat every cycle and the consumer takes it, the reader
moves one beat per cycle. With ``max_outstanding = 1`` every burst waits for the previous one's
last beat, so each burst also pays the slave's read latency; ``max_outstanding * max_burst``
beats in flight hide a latency of that many cycles. A transfer starts issuing in the cycle after
``start`` and ``busy`` falls in the cycle after its last beat.

Errors. A beat with ``RRESP`` = SLVERR (2) or DECERR (3) is not forwarded; the reader records
the response code in ``error`` and that beat's byte address in ``err_addr`` (held until the
next ``start``), pulses ``err_strobe`` for one cycle as they change, stops issuing new bursts
(none is issued in the cycle of the failing beat either), and drains
(accepts and drops, with ``RREADY`` high) every beat of the bursts already in flight, as AXI
requires of a master: a burst cannot be cancelled. A presented but not yet accepted burst is
still handed over and drained. ``busy`` falls once the last outstanding beat is in. Beats
before the failing one have already been forwarded; a consumer that needs all-or-nothing
discards them on ``err_strobe``. EXOKAY (1) is treated as OKAY.

Abort. ``abort`` (one-cycle pulse) stops a transfer the same way, without recording an error:
``o.valid`` falls at once (the consumer is expected to be resetting as well), outstanding beats
are drained and ``busy`` falls after the last one. This is the only safe way to stop: resetting
the reader with bursts in flight would leave their beats to the next transfer.

Timeout (a memory that stops answering). With ``timeout_cycles = T`` (default ``2**16``;
``None`` removes the watchdog), the reader counts consecutive cycles in which it is ``busy``
and waits on the memory: no AR handshake, no R handshake, no new burst presented, and no R
beat waiting for the consumer (a stall of ``o.ready`` is the consumer's, not the memory's, and
never times out). In the ``T``-th such cycle the transfer ends: issuing stops (as after an
error), ``error`` becomes :data:`ERR_TIMEOUT` (4) with ``err_addr`` the byte address of the
first beat not received, unless an error was already recorded for this transfer (a drain
after SLVERR/DECERR that stalls keeps that code; a stalled drain after ``abort`` records the
timeout), ``err_strobe`` pulses when the code changes, and ``busy`` falls in the next cycle.
AXI cannot cancel a burst, so the bursts still in flight then, including one presented and not
yet accepted (``ARVALID`` stays high until ``ARREADY``, as the protocol requires), become
*stale*: ``stale`` is high while any is outstanding. Their beats, if they ever come, are
accepted with ``RREADY`` high and discarded (never forwarded, their ``RRESP`` ignored), and
each one's ``RLAST`` retires it. This is the recoverable state: a new ``start`` is accepted at
once, its bursts are issued behind the stale ones (they share ID 0, so their beats return
after the stale beats, which are dropped first) and count against ``max_outstanding`` with
them; the new transfer ends normally once the memory answers again, or times out again. If the
memory side is reset and forgets the stale bursts, reset the reader with it (hardware reset):
otherwise it would take the next transfer's first beats for stale ones.

Limits. ``base`` must be aligned to the bus width (its low ``log2(data_width/8)`` bits are
ignored); ``length`` = 0 reads nothing; ``start`` while ``busy`` is ignored; a transfer may not
wrap past the top of the address space. Resources: three address-sized registers (next burst,
next beat, failing beat), the beat and burst counters, the next burst's length and the beats
left to the 4 KiB boundary, two ``min`` of three values; no memory; with the watchdog, a
``log2(T)``-bit counter and a stale-burst counter.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Const, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError

__all__ = ["AxiReader", "RESP_OKAY", "RESP_EXOKAY", "RESP_SLVERR", "RESP_DECERR", "ERR_TIMEOUT",
           "DEFAULT_TIMEOUT"]

RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = 0, 1, 2, 3
#: ``error`` code of a transfer ended by the watchdog (not an ``RRESP`` value)
ERR_TIMEOUT = 4
#: default ``timeout_cycles``
DEFAULT_TIMEOUT = 1 << 16


class AxiReader(wiring.Component):
    """AXI4 read master: ``length`` beats from ``base`` onto the ``o`` stream.

    Parameters
    ----------
    addr_width : int
        ``ARADDR`` width, 12 to 64 bits.
    data_width : int
        ``RDATA`` width: 32, 64, 128, 256 or 512 bits.
    max_burst : int
        Longest burst in beats, 1 to 256 (AXI4 INCR).
    max_outstanding : int
        Bursts in flight at once, 1 to 64.
    len_width : int
        Width of the ``length`` input (beats), 1 to 32 bits.
    timeout_cycles : int or None
        Cycles without progress from the memory after which a transfer ends with
        :data:`ERR_TIMEOUT`, 2 to ``2**32``; ``None`` for no watchdog (default ``2**16``).

    Attributes
    ----------
    start : In(1)
        Latch ``base`` and ``length`` and begin (ignored while ``busy``).
    base : In(addr_width)
        Byte address of the first beat.
    length : In(len_width)
        Beats to read.
    abort : In(1)
        Stop issuing, drain the bursts in flight, forward nothing more.
    busy : Out(1)
        A transfer is issuing or draining.
    error : Out(3)
        The first failure of the last transfer: 0 none, 2 SLVERR, 3 DECERR (the ``RRESP`` of the
        failing beat), 4 :data:`ERR_TIMEOUT`.
    err_addr : Out(addr_width)
        Byte address of the failing beat (for a timeout: of the first beat not received).
    err_strobe : Out(1)
        High for one cycle, the first in which ``error`` and ``err_addr`` show a new failure
        (the cycle after the failing beat was accepted).
    stale : Out(1)
        Bursts abandoned by a timeout are still outstanding (their beats will be discarded).
    o : Out(stream.Signature(data_width))
        The data, in address order.
    araddr, arlen, arsize, arburst, arvalid, arready, rdata, rresp, rlast, rvalid, rready
        The AXI4 read channels (ID 0; the caller ties ``ARID`` and ignores ``RID``).

    Raises
    ------
    ValueError
        On a parameter out of range.
    """

    def __init__(self, *, addr_width: int = 32, data_width: int = 32, max_burst: int = 16,
                 max_outstanding: int = 2, len_width: int = 24, timeout_cycles: int | None = DEFAULT_TIMEOUT):
        self.check_params(addr_width=addr_width, data_width=data_width, max_burst=max_burst,
                          max_outstanding=max_outstanding, len_width=len_width, timeout_cycles=timeout_cycles)
        self.timeout_cycles = timeout_cycles
        self.addr_width, self.data_width = addr_width, data_width
        self.max_burst, self.max_outstanding, self.len_width = max_burst, max_outstanding, len_width
        self.size = (data_width // 8).bit_length() - 1          # ARSIZE: log2(bytes per beat)
        super().__init__({
            "start": In(1), "base": In(addr_width), "length": In(len_width), "abort": In(1),
            "busy": Out(1), "error": Out(3), "err_addr": Out(addr_width), "err_strobe": Out(1),
            "stale": Out(1),
            "o": Out(stream.Signature(data_width)),
            "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
            "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "rvalid": In(1), "rready": Out(1),
        })

    @staticmethod
    def check_params(*, addr_width: int, data_width: int, max_burst: int, max_outstanding: int,
                     len_width: int, timeout_cycles: int | None = DEFAULT_TIMEOUT) -> None:
        """Raise ``ValueError`` for a parameter out of range (for wrappers that check their
        arguments before building anything)."""
        if not 12 <= addr_width <= 64:
            raise UsageError(f"Address width must be 12 to 64 bits, not {addr_width}")
        if data_width not in (32, 64, 128, 256, 512):
            raise UsageError(f"Data width must be 32, 64, 128, 256 or 512 bits, not {data_width}")
        if not 1 <= max_burst <= 256:
            raise UsageError(f"Burst length must be 1 to 256 beats (AXI4 INCR), not {max_burst}")
        if not 1 <= max_outstanding <= 64:
            raise UsageError(f"Outstanding bursts must be 1 to 64, not {max_outstanding}")
        if not 1 <= len_width <= 32:
            raise UsageError(f"Length width must be 1 to 32 bits, not {len_width}")
        if timeout_cycles is not None and (isinstance(timeout_cycles, bool) or not isinstance(timeout_cycles, int)
                                           or not 2 <= timeout_cycles <= 1 << 32):
            raise UsageError(f"Timeout must be None or 2 to 2**32 cycles, not {timeout_cycles!r}")

    def elaborate(self, platform):
        m = Module()
        sz, aw = self.size, self.addr_width
        nbytes = 1 << sz

        next_addr = Signal(aw)                      # byte address of the next burst to issue
        to_issue = Signal(self.len_width)           # beats not yet covered by an issued burst
        rx_addr = Signal(aw)                        # byte address of the next R beat of this transfer
        inflight = Signal(range(self.max_outstanding + 1))  # presented or accepted, last beat not in
        stale_n = Signal(range(self.max_outstanding + 1))   # of those, abandoned by a timeout (the oldest)
        stop = Signal()                             # error, abort or timeout seen: issue nothing more
        # to_issue != 0, a flip-flop loaded with to_issue (timing: the 32-bit zero test fed ``busy``
        # and, through the board top's LOAD decode, the clear of its register slice: bbs-lstm-axi's
        # critical path on one seed)
        to_issue_nz = Signal(name="to_issue_nz")

        # --- burst length: min(remaining, max_burst, beats to the 4 KiB boundary) ---------------
        # Registered (timing: the 4 KiB arithmetic, two minimums and the address adder were one
        # cycle): ``r4`` counts the beats from ``next_addr`` to the boundary and ``blen`` always
        # holds the length of the next burst for the current ``to_issue``/``r4``. On an issue the
        # next length is computed from this one's (speculatively, in parallel with the address
        # adder); on ``start`` from ``base`` and ``length``.
        full = 4096 >> sz
        r4 = Signal(range(full + 1), init=full)
        blen = Signal(range(max(self.max_burst, 2) + 1))
        # --- R channel state used by the AR side: a failing beat of this transfer ---------------
        # (beats of stale bursts come first, as they were issued first: they are dropped)
        r_fire = self.rvalid & self.rready
        retire = r_fire & self.rlast & (inflight != 0)
        old = stale_n != 0
        r_err = self.rresp[1]
        first_err = r_fire & r_err & ~stop & (inflight != 0) & ~old

        # --- AR channel: a burst is counted in flight from the cycle it is presented -----------
        # (no burst is issued in the cycle of a failing beat, an abort or the timeout)
        can_present = ~self.arvalid | self.arready
        issue = (can_present & ~stop & ~self.abort & ~first_err & to_issue_nz
                 & (inflight < self.max_outstanding))
        m.d.comb += [self.arsize.eq(sz), self.arburst.eq(1)]
        # (the next values are computed outside the If: only the final select waits for issue)
        left, r4_left = Signal.like(to_issue), Signal.like(r4)
        m.d.comb += [left.eq(to_issue - blen), r4_left.eq(r4 - blen)]
        r4_wrap = Signal()                          # this burst ends at the boundary: r4_left == 0
        m.d.comb += r4_wrap.eq(r4 == blen)
        with m.If(issue):
            r4_next = Mux(r4_wrap, full, r4_left)
            m.d.sync += [self.arvalid.eq(1), self.araddr.eq(next_addr), self.arlen.eq(blen - 1),
                         next_addr.eq(next_addr + (blen << sz)), to_issue.eq(left), to_issue_nz.eq(left != 0),
                         r4.eq(r4_next),
                         blen.eq(self.next_burst_len(to_issue, r4, blen, left, r4_left, r4_wrap))]
        with m.Elif(self.arready):
            m.d.sync += self.arvalid.eq(0)
        with m.If(issue & ~retire):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(retire & ~issue):
            m.d.sync += inflight.eq(inflight - 1)

        # --- R channel: forward OKAY beats, drop and record the first SLVERR/DECERR -------------
        drop = stop | self.abort | r_err | (inflight == 0) | old
        m.d.comb += [self.o.valid.eq(self.rvalid & ~drop), self.o.payload.eq(self.rdata),
                     self.rready.eq(drop | self.o.ready), self.stale.eq(old)]
        with m.If(r_fire & ~old):
            m.d.sync += rx_addr.eq(rx_addr + nbytes)
        with m.If(retire & old):
            m.d.sync += stale_n.eq(stale_n - 1)
        strobe = Signal()
        m.d.sync += self.err_strobe.eq(strobe)
        m.d.comb += strobe.eq(first_err)
        with m.If(first_err):
            m.d.sync += [stop.eq(1), self.error.eq(self.rresp), self.err_addr.eq(rx_addr)]
        with m.If(self.abort):
            m.d.sync += stop.eq(1)

        m.d.comb += self.busy.eq((to_issue_nz & ~stop) | (inflight != stale_n))

        # --- watchdog: T cycles busy without progress from the memory end the transfer ----------
        if self.timeout_cycles is not None:
            T = self.timeout_cycles
            wd = Signal(range(T))
            waiting = self.busy & ~(self.arvalid & self.arready) & ~self.rvalid & ~issue
            with m.If(waiting):
                m.d.sync += wd.eq(wd + 1)
            with m.Else():
                m.d.sync += wd.eq(0)
            with m.If(waiting & (wd == T - 1)):
                # no beat or issue this cycle: every burst in flight becomes stale
                m.d.sync += [stop.eq(1), stale_n.eq(inflight), wd.eq(0)]
                with m.If(self.error == 0):
                    m.d.comb += strobe.eq(1)
                    m.d.sync += [self.error.eq(ERR_TIMEOUT), self.err_addr.eq(rx_addr)]

        # (the start values are computed outside the If: only the final select waits for busy)
        base = Signal(aw)
        r4_base = Signal(range(full))                          # beats to the boundary, 0 for a whole page
        m.d.comb += [base.eq(self.base & ~(nbytes - 1)), r4_base.eq(-base[sz:12])]
        with m.If(self.start & ~self.busy & ~self.abort):
            m.d.sync += [next_addr.eq(base), rx_addr.eq(base), to_issue.eq(self.length),
                         to_issue_nz.eq(self.length != 0), stop.eq(0),
                         self.error.eq(0), self.err_addr.eq(0), r4.eq(Mux(r4_base == 0, full, r4_base)),
                         blen.eq(self.burst_len(self.length, r4_base, r4_base == 0))]
        return m

    def next_burst_len(self, to_issue, r4, blen, left, r4_left, r4_wrap):
        """:meth:`burst_len` of ``(left, r4_left, r4_wrap)`` (what is left after the burst of
        ``blen`` beats being issued), with every comparison made on the registers themselves
        rather than on the differences: as ``blen <= to_issue`` and ``blen <= r4``,
        ``left < r4_left`` iff ``to_issue < r4``, ``left < x`` iff ``to_issue < x + blen`` and
        ``r4_left < mb`` iff ``r4 < mb + blen`` (``blen`` is a few bits wide). The subtractions
        run beside the comparisons and feed only the final select: one carry chain on the path
        from ``blen`` back to ``blen``, where there were two in series (a critical path of bbs-lstm-axi)."""
        mb, full = self.max_burst, 4096 >> self.size
        return self._min3(left, a_lt_b=Mux(r4_wrap, to_issue < blen + full, to_issue < r4),
                          a_lt_mb=to_issue < blen + mb, b=Mux(r4_wrap, Const(full), r4_left),
                          b_lt_mb=Mux(r4_wrap, full < mb, r4 < blen + mb))

    def _min3(self, a, *, a_lt_b, a_lt_mb, b, b_lt_mb):
        """``min(a, b, max_burst)`` from the three comparisons, two levels of select."""
        mb = self.max_burst
        return Mux(Mux(b_lt_mb, a_lt_b, a_lt_mb), a, Mux(b_lt_mb, b, mb))

    def burst_len(self, left, r4, r4_full):
        """The length of a burst: ``min(left, max_burst, beats to the 4 KiB boundary)``, the last
        being ``r4`` or, when ``r4_full``, a whole page. The comparisons run in parallel on the
        raw operands (``r4_full`` instead of a multiplexed ``r4``), then two levels of select."""
        mb, full = self.max_burst, 4096 >> self.size
        return self._min3(left, a_lt_b=Mux(r4_full, left < full, left < r4), a_lt_mb=left < mb,
                          b=Mux(r4_full, Const(full), r4),
                          b_lt_mb=Mux(r4_full, full < mb, r4 < mb))   # the boundary is nearer than max_burst

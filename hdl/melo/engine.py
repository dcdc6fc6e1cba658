"""Receiver-side MELO engine in Amaranth: metadata table, shared bits pool, linked free list.

Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter", APNet
2017. The golden model, the design choices (aligned blocks, chains, LIFO free list threaded
through the next pointers, drop-and-NACK when a packet does not fit) and the stream words are in
:mod:`hwcosim.models.melo.engine`; this block meets them bit for bit at its interface.

Interface
---------
``i``  (in)  event words ``{psn, conn, open}`` (:func:`hwcosim.models.melo.engine.pack_event`): a data
       packet, or (``open=1``) setting the expected PSN of an idle connection.
``d``  (out) one beat ``{psn, conn}`` per released PSN, in delivery order.
``r``  (out) one beat per data packet: the packed :class:`~models.melo.engine.MeloResponse`
       with the pool occupancy after the transaction above it.
Status: ``free_count``, ``blocks_in_use``, ``idle`` (no transaction in flight, both outputs
empty, initialisation done) and saturating 32-bit counters (``packets``, ``acks``, ``sacks``,
``dups``, ``nack_pool``, ``nack_window``, ``allocs``, ``frees``, ``delivered``, ``peak_blocks``,
``rejected``, ``cycles``, ``stall_d``, ``stall_r``). ``peak_blocks`` is not a counter but the
highest occupancy seen.

Architecture
------------
Three ``amaranth.lib.memory.Memory`` blocks, each with one synchronous read and one write port:

- metadata: ``n_conns`` x ``{epsn, head, tail, count, ooo}`` (``metadata_bits``);
- bits: ``pool_blocks`` x ``block_bits`` reorder bitmaps;
- next: ``pool_blocks`` x ``ptr_bits`` chain / free-list pointers (the golden model's pool entry
  is bits + next; two memories hold the same bits and let a pointer change without a
  read-modify-write of the bitmap).

The allocator is two registers, ``free_head`` and ``free_count``. Events pass through two slots:

- slot 1 holds an accepted event while its metadata entry is read: the read is issued in the
  accept cycle, the data is captured into ``meta_q`` in the next (MWAIT) and waits there;
- META classifies slot 1 against ``meta_q`` (PSN difference, block distance, window, chain
  length and pool checks, all in parallel) into registered flags, moves the event to slot 2 and
  takes the next event into slot 1;
- DECIDE acts on the flags. An in-order packet on a connection without blocks, a duplicate
  behind ``epsn``, a NACK and an ``open`` are finished there (entry written back, response sent)
  and the event in slot 1 enters META in the next cycle; everything else runs a multi-cycle
  FSM (the chain is walked or extended, the bitmap is tested and set or scanned, released PSNs
  leave on ``d``) that ends in FINISH with the write-back and the response.

Hazards: the metadata read of the event in slot 1 is issued before the entry of the packet ahead
of it is written back. ``meta_q`` is therefore forwarded, never stalled: a write in the cycle
the read is issued is registered (``meta_fwd``) and replaces the read data; a write in a later
cycle while the event waits replaces ``meta_q`` directly. The slow path writes the metadata
only in FINISH, so back-to-back packets of one connection need no bubble.

Every memory read is registered once after the RAM: the metadata read port is deliberately not
transparent (Yosys emits a transparent port as an address register and an asynchronous read and
then merges the next register into the block RAM, which put the RAM's 5.8 ns clock-to-output in
front of the 24-bit PSN compare), and ``next_q``/``bits_q`` capture the pointer and bitmap reads.
The buffered run of an in-order packet is released one PSN per cycle by testing one bit of the
head block's bitmap (a ``block_bits``:1 multiplexer), not by a barrel shifter and priority
encoder.

After reset an initialisation pass writes every metadata entry to zero and ``next[i] = i + 1``
(``max(n_conns, pool_blocks)`` cycles, ``i.ready`` low), so a reset restores the golden model's
initial state without relying on memory initial contents.

Latency and throughput
----------------------
Cycles a data packet occupies the engine back to back with free-flowing streams (META to the
write-back; the next packet's accept and metadata read overlap them, so no cycle is lost
between packets):

============================================  ==========================================
in order, connection holds no blocks (ACK)    2
old duplicate (DUP) or dropped (NACK)         2
out of order into chain position ``k`` held   5 + 2 k  (k next-pointer reads, one bitmap read;
                                              also a duplicate found in the bitmap)
out of order needing ``n`` new blocks (SACK)  3 + 3 n
in order with a buffered run behind it        3 + per block visited: 2 (scan, bitmap read)
                                              (+2 if the head block is freed, +3 if the run
                                              goes on in the next block) + 1 per released
                                              PSN (+1 if the run ends in the block)
============================================  ==========================================

Loss-free in-order traffic therefore runs at 1/2 packet per cycle (any mix of connections,
including back-to-back packets of one connection); the measured figure under loss, reordering
and duplication is reported by ``bench_melo_engine``. An ``open`` event takes 2 cycles. A packet
offered to an idle engine gets its response beat 3 cycles after its row of the table (accept,
metadata read wait, output register). Responses and releases leave through output registers; a
stalled output holds the FSM (nothing is dropped) and the stall is counted.
``hwcosim.models.melo.cycles.packet_cycles`` and ``model_cycles`` replay this table.

Out of context on an LFE5U-85F speed 6 (default parameters, nextpnr, 3 seeds; the figures are in
``docs/boards/results.json``, so in-order packets/s = Fmax / 2) what limits it on every seed is
the metadata block RAM's 5.8 ns clock-to-output into ``meta_q`` (no logic between them but the
forwarding multiplexer). Earlier versions were slower (``CHANGELOG.md``): the forwarding
multiplexer waited for DECIDE's write decision (through the ``d``/``r`` back-pressure), which
the forwarding of what slot 2 writes back (below) removed, and the run-bit look-ahead went
through an adder on ``e`` (bit ``e + 1`` of the block is now bit ``e`` of ``cur[1:]``), and
before the two slots an in-order packet took three cycles.

Resources
---------
Memories: ``n_conns * metadata_bits + pool_blocks * (block_bits + ptr_bits)`` bits. Logic: one
``psn_bits`` subtractor and comparator set, a ``block_bits``:1 bit multiplexer and a bit-clear
decoder for the in-order scan, three read-data registers plus a forwarded metadata entry, the
slot-1 event and the registered flags, and 32-bit status counters.

Inputs outside the contract (``conn >= n_conns``, or ``open`` on a connection that holds
blocks) are dropped without output and counted in ``rejected`` (the golden model raises).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Const, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError
from hwcosim.models.melo.engine import ACK, DUP, NACK, SACK, MeloEngineParams

__all__ = ["MeloEngineRTL", "event_layout", "delivery_layout", "response_layout", "metadata_layout"]

COUNTER_BITS = 32
_COUNTERS = ("packets", "acks", "sacks", "dups", "nack_pool", "nack_window", "allocs", "frees", "delivered",
             "rejected", "cycles", "stall_d", "stall_r")


def event_layout(p: MeloEngineParams) -> data.StructLayout:
    return data.StructLayout({"psn": unsigned(p.psn_bits), "conn": unsigned(p.conn_bits), "open": unsigned(1)})


def delivery_layout(p: MeloEngineParams) -> data.StructLayout:
    return data.StructLayout({"psn": unsigned(p.psn_bits), "conn": unsigned(p.conn_bits)})


def response_layout(p: MeloEngineParams) -> data.StructLayout:
    return data.StructLayout({"kind": unsigned(2), "conn": unsigned(p.conn_bits), "cum_psn": unsigned(p.psn_bits),
                              "psn": unsigned(p.psn_bits), "used": unsigned(p.used_bits)})


def metadata_layout(p: MeloEngineParams) -> data.StructLayout:
    return data.StructLayout({"epsn": unsigned(p.psn_bits), "head": unsigned(p.ptr_bits),
                              "tail": unsigned(p.ptr_bits), "count": unsigned(p.count_bits),
                              "ooo": unsigned(p.ooo_bits)})


class MeloEngineRTL(wiring.Component):
    """The MELO receiver engine (see the module docstring for interface, timing and resources).

    Parameters
    ----------
    params : MeloEngineParams
        Connections, PSN width, block size, pool size and window (validated by the dataclass).

    Raises
    ------
    ValueError
        If ``params`` is not a :class:`hwcosim.models.melo.engine.MeloEngineParams`.
    """

    def __init__(self, params: MeloEngineParams):
        if not isinstance(params, MeloEngineParams):
            self._MustUse__silence = True  # a rejected object is not an unused design
            raise UsageError(f"MeloEngineRTL takes a models.melo.engine.MeloEngineParams, not {params!r}")
        self.params = p = params
        sig = {
            "i": In(stream.Signature(event_layout(p))),
            "d": Out(stream.Signature(delivery_layout(p))),
            "r": Out(stream.Signature(response_layout(p))),
            "free_count": Out(range(p.pool_blocks + 1)),
            "blocks_in_use": Out(range(p.pool_blocks + 1)),
            "peak_blocks": Out(range(p.pool_blocks + 1)),
            "idle": Out(1),
        }
        sig.update({name: Out(COUNTER_BITS) for name in _COUNTERS})
        super().__init__(sig)

    def elaborate(self, platform):
        p = self.params
        m = Module()
        N, P, BB, LB = p.n_conns, p.pool_blocks, p.block_bits, p.block_shift
        PB, CB = p.psn_bits, p.count_bits

        # ---- memories ---------------------------------------------------------------------------
        m.submodules.meta = meta = Memory(shape=metadata_layout(p), depth=N, init=[])
        m.submodules.bits = bits = Memory(shape=unsigned(BB), depth=P, init=[])
        m.submodules.nxt = nxt = Memory(shape=unsigned(p.ptr_bits), depth=P, init=[])
        # The metadata read port is not transparent: a transparent port is emitted as an address
        # register in front of an asynchronous read, and Yosys then merges the register after it
        # (meta_q) into the block RAM, so the RAM's 5.8 ns clock-to-output would feed the
        # classification. Writes the read misses are forwarded into meta_q instead (below).
        meta_w, meta_r = meta.write_port(), meta.read_port()
        bits_w, bits_r = bits.write_port(), bits.read_port()
        nxt_w, nxt_r = nxt.write_port(), nxt.read_port()

        # ---- registers --------------------------------------------------------------------------
        free_head = Signal(p.ptr_bits)
        free_count = Signal(range(P + 1), init=P)
        used_q = Signal(range(P + 1), name="used_q")     # pool_blocks - free_count, kept as a register
        # slot 1: the accepted event whose metadata is being read (MWAIT) or waits in meta_q
        pend = Signal(name="pend")
        c_in = Signal(p.conn_bits, name="c_in")
        psn_in = Signal(PB, name="psn_in")
        open_in = Signal(name="open_in")
        # slot 2: the packet in DECIDE and the multi-cycle states
        c = Signal(p.conn_bits)
        psn = Signal(PB)
        is_open = Signal()
        e = Signal(PB)
        e_inc = Signal(PB, name="e_inc")   # e + 1, computed in META
        head = Signal(p.ptr_bits, name="head")
        tail = Signal(p.ptr_bits, name="tail")
        b = Signal(p.ptr_bits, name="b")
        count = Signal(CB)
        ooo = Signal(p.ooo_bits)
        k = Signal(PB - LB)            # chain steps left (walk)
        need = Signal(CB + 1)          # blocks still to allocate
        kind = Signal(2)
        # the classification of slot 2, registered at the end of META
        f_bad, f_ack, f_dup = Signal(name="f_bad"), Signal(name="f_ack"), Signal(name="f_dup")
        f_nackw, f_alloc = Signal(name="f_nackw"), Signal(name="f_alloc")
        f_nackp, f_k0 = Signal(name="f_nackp"), Signal(name="f_k0")
        init_i = Signal(range(max(N, P) + 1))
        peak = Signal(range(P + 1))
        # Memory read data, registered: no logic follows a block RAM's output but the one-LUT
        # forwarding multiplexer of meta_q.
        rd = Signal(metadata_layout(p), name="meta_q")
        fwd = Signal(name="meta_fwd")                       # the read issued last cycle missed a write
        fwd_data = Signal(metadata_layout(p), name="meta_fwd_data")
        nq = Signal(p.ptr_bits, name="next_q")
        bq = Signal(BB, name="bits_q")
        m.d.sync += [nq.eq(nxt_r.data), bq.eq(bits_r.data)]
        wb = Signal(BB, name="run_bits")   # bitmap of the head block while its run is released
        first = Signal(name="run_first")   # RUN's first cycle: the bitmap is still on bits_q
        rbit = Signal(name="run_bit")      # the bit at e of the run's block, registered one cycle ahead

        onehot = Signal(BB)
        m.d.comb += onehot.eq((Const(1, BB) << psn[:LB])[:BB])

        # ---- output registers -------------------------------------------------------------------
        d_can = ~self.d.valid | self.d.ready
        r_can = ~self.r.valid | self.r.ready
        with m.If(self.d.ready):
            m.d.sync += self.d.valid.eq(0)
        with m.If(self.r.ready):
            m.d.sync += self.r.valid.eq(0)

        def release(psn_value):
            m.d.sync += [self.d.valid.eq(1), self.d.payload.conn.eq(c), self.d.payload.psn.eq(psn_value)]

        def count_up(ctr, amount=1):
            top = (1 << COUNTER_BITS) - 1
            m.d.sync += ctr.eq(Mux(ctr > top - amount, top, ctr + amount))

        # ---- metadata read and forwarding -------------------------------------------------------
        # the read address always follows the offered event; the data is captured into meta_q the
        # cycle after the accept (``capture``), and a held meta_q snoops later writes to its entry
        # the bitmap read port follows the head block unless a state reads another block, so the
        # head's bitmap is on bits_q one cycle earlier than an explicit read would put it there
        m.d.comb += [meta_r.addr.eq(self.i.payload.conn), meta_w.addr.eq(c), bits_r.addr.eq(head)]
        capture = Signal()
        hit = Signal()
        take_ram = Signal()
        other = Signal(metadata_layout(p))
        snoop = Signal(metadata_layout(p), name="meta_snoop")     # what slot 2 writes back (below)
        m.d.comb += [take_ram.eq(capture & ~hit & ~fwd),
                     other.eq(Mux(hit, snoop, Mux(capture, fwd_data, rd)))]
        m.d.sync += [rd.eq(Mux(take_ram, meta_r.data, other)),
                     fwd.eq(meta_w.en & (meta_w.addr == self.i.payload.conn)), fwd_data.eq(meta_w.data)]

        def accept(then=None):
            # slot 1 is free: take the offered event (its metadata read is issued this cycle)
            m.d.comb += self.i.ready.eq(1)
            with m.If(self.i.valid):
                m.d.sync += [c_in.eq(self.i.payload.conn), psn_in.eq(self.i.payload.psn),
                             open_in.eq(self.i.payload.open), pend.eq(1)]
                if then is not None:
                    m.next = then

        def done():
            # slot 2 is finished: the waiting event enters META, or a new one is taken
            with m.If(pend):
                m.next = "META"
            with m.Else():
                m.next = "IDLE"
                accept("MWAIT")

        def finish(kind_v, epsn_v, cnt_v, fc_v, used):
            # write the entry back, send the response, count (the peak occupancy is updated by the
            # allocations themselves, in POP2)
            m.d.comb += [meta_w.en.eq(1), meta_w.data.epsn.eq(epsn_v),
                         meta_w.data.head.eq(head), meta_w.data.tail.eq(tail), meta_w.data.count.eq(cnt_v),
                         meta_w.data.ooo.eq(ooo)]
            m.d.sync += [free_count.eq(fc_v), used_q.eq(used), self.r.valid.eq(1), self.r.payload.kind.eq(kind_v),
                         self.r.payload.conn.eq(c), self.r.payload.cum_psn.eq(epsn_v), self.r.payload.psn.eq(psn),
                         self.r.payload.used.eq(used)]
            count_up(self.packets)
            for kd, ctr in ((ACK, self.acks), (SACK, self.sacks), (DUP, self.dups)):
                with m.If(kind_v == kd):
                    count_up(ctr)
            done()

        # META: the classification against the captured entry, all in parallel
        diff = Signal(PB)
        kk = Signal(PB - LB)
        kkl = Signal(CB)                       # kk where it matters (inside the window: kk < 2**CB)
        nd = Signal(CB + 1)
        m.d.comb += [diff.eq(psn_in - rd.epsn), kk.eq((psn_in >> LB) - (rd.epsn >> LB)), kkl.eq(kk[:CB]),
                     nd.eq(kkl + 1 - rd.count)]
        if N < 1 << p.conn_bits:
            bad_conn = c_in >= N
        else:
            bad_conn = Const(0)

        # FINISH's splice of a whole chain, precomputed every cycle (see FINISH)
        chain_q = Signal(name="chain_q")
        free_chain = Signal(name="free_chain")
        cnt_new = Signal(CB, name="count_new")   # the count FINISH writes back
        m.d.comb += [free_chain.eq((kind == ACK) & chain_q), cnt_new.eq(Mux(free_chain, 0, count))]
        fc_chain = Signal(range(P + 1), name="fc_chain")
        used_chain = Signal(range(P + 1), name="used_chain")
        m.d.sync += [chain_q.eq((ooo == 0) & (count != 0)), fc_chain.eq(free_count + count),
                     used_chain.eq(used_q - count)]

        with m.FSM(init="INIT") as fsm:
            with m.State("INIT"):
                with m.If(init_i < N):
                    m.d.comb += [meta_w.addr.eq(init_i), meta_w.data.eq(0), meta_w.en.eq(1)]
                with m.If(init_i < P):
                    m.d.comb += [nxt_w.addr.eq(init_i), nxt_w.data.eq(init_i + 1), nxt_w.en.eq(1)]
                m.d.sync += init_i.eq(init_i + 1)
                with m.If(init_i == max(N, P) - 1):
                    m.next = "IDLE"

            with m.State("IDLE"):
                accept("MWAIT")

            with m.State("MWAIT"):
                # the entry of conn c_in is on the read port: capture it (forwarded if it missed a write)
                m.d.comb += capture.eq(1)
                m.next = "META"

            with m.State("META"):
                # classify slot 1 against meta_q into registered flags; move it to slot 2; take the
                # next event into slot 1 (its metadata read overlaps DECIDE)
                ep = rd.epsn
                m.d.sync += [c.eq(c_in), psn.eq(psn_in), is_open.eq(open_in), e.eq(ep), e_inc.eq(ep + 1),
                             head.eq(rd.head), tail.eq(rd.tail), count.eq(rd.count), ooo.eq(rd.ooo), b.eq(rd.head),
                             f_bad.eq(bad_conn | (open_in & (rd.count != 0))),
                             f_ack.eq(psn_in == ep), f_dup.eq(diff[PB - 1]),
                             f_nackw.eq(kk >= p.max_blocks_per_conn), f_alloc.eq(kkl >= rd.count),
                             f_nackp.eq(nd > free_count), f_k0.eq(kkl == 0),
                             need.eq(nd), k.eq(kkl - 1), pend.eq(0)]
                m.next = "DECIDE"
                accept()

            with m.State("DECIDE"):
                # act on the flags; a waiting slot-1 event has its metadata on the read port now
                m.d.comb += capture.eq(pend)
                with m.If(f_bad):
                    count_up(self.rejected)
                    done()
                with m.Elif(is_open):
                    m.d.comb += [meta_w.en.eq(1), meta_w.data.epsn.eq(psn), meta_w.data.head.eq(head),
                                 meta_w.data.tail.eq(tail)]
                    done()
                with m.Elif(f_ack):
                    m.d.sync += kind.eq(ACK)
                    with m.If(d_can):
                        release(e)
                        m.d.sync += e.eq(e_inc)
                        with m.If(count != 0):
                            m.next = "SCAN"
                        with m.Elif(r_can):
                            finish(ACK, e_inc, count, free_count, used_q)
                        with m.Else():
                            m.next = "FINISH"
                    with m.Else():
                        m.next = "DELIV"
                with m.Elif(f_dup | f_nackw | (f_alloc & f_nackp)):
                    kd = Mux(f_dup, DUP, NACK)
                    m.d.sync += kind.eq(kd)
                    with m.If(~f_dup & f_nackw):
                        count_up(self.nack_window)
                    with m.If(~f_dup & ~f_nackw):
                        count_up(self.nack_pool)
                    with m.If(r_can):
                        finish(kd, e, count, free_count, used_q)
                    with m.Else():
                        m.next = "FINISH"
                with m.Elif(f_alloc):
                    m.d.sync += kind.eq(SACK)
                    m.next = "POP"
                with m.Elif(f_k0):
                    m.d.comb += bits_r.addr.eq(head)
                    m.next = "BWAIT"
                with m.Else():
                    m.d.comb += nxt_r.addr.eq(head)
                    m.next = "WALKW"

            with m.State("DELIV"):
                # the in-order packet itself, when d was stalled in DECIDE
                with m.If(d_can):
                    release(e)
                    m.d.sync += e.eq(e + 1)
                    with m.If(count == 0):
                        m.next = "FINISH"
                    with m.Else():
                        m.next = "SCAN"

            with m.State("WALKW"):
                m.next = "WALK"

            with m.State("WALK"):
                # next_q = next block of the chain
                m.d.sync += b.eq(nq)
                with m.If(k == 0):
                    m.d.comb += bits_r.addr.eq(nq)
                    m.next = "BWAIT"
                with m.Else():
                    m.d.comb += nxt_r.addr.eq(nq)
                    m.d.sync += k.eq(k - 1)
                    m.next = "WALKW"

            with m.State("BWAIT"):
                m.next = "BITCHK"

            with m.State("BITCHK"):
                with m.If(bq.bit_select(psn[:LB], 1)):
                    m.d.sync += kind.eq(DUP)
                with m.Else():
                    m.d.comb += [bits_w.addr.eq(b), bits_w.data.eq(bq | onehot), bits_w.en.eq(1)]
                    m.d.sync += [kind.eq(SACK), ooo.eq(ooo + 1)]
                m.next = "FINISH"

            with m.State("POP"):
                # take free_head; its old next pointer is the new free_head (read now, used in POP2)
                m.d.comb += [nxt_r.addr.eq(free_head),
                             bits_w.addr.eq(free_head), bits_w.data.eq(Mux(need == 1, onehot, 0)), bits_w.en.eq(1)]
                with m.If(count == 0):
                    m.d.sync += head.eq(free_head)
                with m.Else():
                    m.d.comb += [nxt_w.addr.eq(tail), nxt_w.data.eq(free_head), nxt_w.en.eq(1)]
                m.d.sync += [tail.eq(free_head), count.eq(count + 1), free_count.eq(free_count - 1),
                             used_q.eq(used_q + 1), need.eq(need - 1)]
                count_up(self.allocs)
                m.next = "POPW"

            with m.State("POPW"):
                m.next = "POP2"

            with m.State("POP2"):
                m.d.sync += free_head.eq(nq)
                with m.If(used_q > peak):
                    m.d.sync += peak.eq(used_q)
                with m.If(need == 0):
                    m.d.sync += ooo.eq(ooo + 1)
                    m.next = "FINISH"
                with m.Else():
                    m.next = "POP"

            with m.State("SCAN"):
                with m.If(e[:LB] == 0):
                    # the head block covers only released PSNs: push it on the free stack (the
                    # read returns its old next pointer: read before write)
                    m.d.comb += [nxt_r.addr.eq(head), nxt_w.addr.eq(head), nxt_w.data.eq(free_head), nxt_w.en.eq(1)]
                    m.d.sync += [free_head.eq(head), free_count.eq(free_count + 1), used_q.eq(used_q - 1),
                                 count.eq(count - 1)]
                    count_up(self.frees)
                    m.next = "FREEW"
                with m.Else():
                    m.d.comb += bits_r.addr.eq(head)
                    m.next = "RUNW"

            with m.State("FREEW"):
                m.next = "FREEHEAD"

            with m.State("FREEHEAD"):
                m.d.sync += head.eq(nq)
                with m.If(count == 0):
                    m.next = "FINISH"
                with m.Else():
                    m.d.comb += bits_r.addr.eq(nq)
                    m.next = "NEXTW"

            with m.State("NEXTW"):
                # the new head's bitmap is being read
                m.next = "RUNW"

            with m.State("RUNW"):
                # bits_q holds the head's bitmap: register the bit at e for RUN's first test
                m.d.sync += [first.eq(1), rbit.eq(bq.bit_select(e[:LB], 1))]
                m.next = "RUN"

            with m.State("RUN"):
                # release the buffered run at e one PSN per cycle, clearing its bits; the test bit
                # (run_bit) was registered a cycle ahead, the next one is looked up now: bit e + 1
                # of the block is bit e of cur[1:], with no adder on e (at the block's last bit the
                # run moves on to SCAN, and RUNW registers the next block's bit afresh)
                off = e[:LB]
                cur = Signal(BB)
                cleared = Signal(BB)
                m.d.comb += [cur.eq(Mux(first, bq, wb)),
                             cleared.eq(cur & ~(Const(1, BB) << off)[:BB])]
                with m.If(~rbit):
                    # end of the run inside this block
                    m.d.comb += [bits_w.addr.eq(head), bits_w.data.eq(cur), bits_w.en.eq(1)]
                    m.next = "FINISH"
                with m.Elif(d_can):
                    release(e)
                    m.d.sync += [e.eq(e + 1), ooo.eq(ooo - 1), wb.eq(cleared), first.eq(0),
                                 rbit.eq(cur[1:].bit_select(off, 1))]
                    with m.If(off == BB - 1):
                        # the run reaches the end of the block: on to the next one
                        m.d.comb += [bits_w.addr.eq(head), bits_w.data.eq(cleared), bits_w.en.eq(1)]
                        m.next = "SCAN"
                with m.Else():
                    m.d.sync += [wb.eq(cur), first.eq(0)]

            with m.State("FINISH"):
                # the chain test and both sums come from registers (chain_q, fc_chain, used_chain)
                # computed in the cycle before: an ACK reaches FINISH with count != 0 only from
                # RUN's end-of-run branch or FINISH itself, which change none of their inputs
                fc_new = Signal(range(P + 1))
                used_new = Signal(range(P + 1))
                m.d.comb += [fc_new.eq(Mux(free_chain, fc_chain, free_count)),
                             used_new.eq(Mux(free_chain, used_chain, used_q))]
                with m.If(r_can):
                    with m.If(free_chain):
                        # splice the whole chain onto the free stack: next[tail] = free_head
                        m.d.comb += [nxt_w.addr.eq(tail), nxt_w.data.eq(free_head), nxt_w.en.eq(1)]
                        m.d.sync += free_head.eq(head)
                        count_up(self.frees, count)
                    finish(kind, e, cnt_new, fc_new, used_new)

        # ---- forwarding into meta_q (slot 1) ------------------------------------------------------
        # The entry slot 2 writes back is forwarded to a waiting slot 1 of the same connection in
        # every DECIDE and FINISH cycle, whether or not that cycle writes: what DECIDE writes
        # depends on registered flags only, and a DECIDE that does not write (a rejected event
        # aside) always ends in FINISH, which forwards what it writes in each of its cycles and
        # writes before slot 1 moves on. So the forwarding multiplexer does not wait for the
        # decision (through d/r back-pressure) that enables the write.
        in_decide = fsm.ongoing("DECIDE")
        m.d.comb += [hit.eq(((in_decide & ~f_bad) | fsm.ongoing("FINISH")) & pend & (c == c_in)),
                     snoop.epsn.eq(Mux(in_decide, Mux(is_open, psn, Mux(f_ack, e_inc, e)), e)),
                     snoop.head.eq(head), snoop.tail.eq(tail),
                     snoop.count.eq(Mux(in_decide, Mux(is_open, 0, count), cnt_new)),
                     snoop.ooo.eq(Mux(in_decide & is_open, 0, ooo))]

        # ---- status -----------------------------------------------------------------------------
        with m.If(self.d.valid & self.d.ready):
            count_up(self.delivered)
        with m.If(self.d.valid & ~self.d.ready):
            count_up(self.stall_d)
        with m.If(self.r.valid & ~self.r.ready):
            count_up(self.stall_r)
        busy = ~fsm.ongoing("IDLE") & ~fsm.ongoing("INIT") | self.d.valid | self.r.valid
        with m.If(busy):
            count_up(self.cycles)
        m.d.comb += [self.idle.eq(~busy & ~fsm.ongoing("INIT")), self.free_count.eq(free_count),
                     self.blocks_in_use.eq(used_q),
                     self.peak_blocks.eq(peak)]
        return m

"""Receiver-side MELO engine in Amaranth: metadata table, shared bits pool, linked free list.

Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter", APNet
2017. The golden model, the design choices (aligned blocks, chains, LIFO free list threaded
through the next pointers, drop-and-NACK when a packet does not fit) and the stream words are in
:mod:`models.melo.engine`; this block meets them bit for bit at its interface.

Interface
---------
``i``  (in)  event words ``{psn, conn, open}`` (:func:`models.melo.engine.pack_event`): a data
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

- metadata: ``n_conns`` x ``{epsn, head, tail, count, ooo}`` (``metadata_bits``), read port
  transparent to the write port so a packet accepted in the cycle its predecessor writes back
  sees the new entry;
- bits: ``pool_blocks`` x ``block_bits`` reorder bitmaps;
- next: ``pool_blocks`` x ``ptr_bits`` chain / free-list pointers (the golden model's pool entry
  is bits + next; two memories hold the same bits and let a pointer change without a
  read-modify-write of the bitmap).

The allocator is two registers, ``free_head`` and ``free_count``. A multi-cycle FSM handles one
packet at a time: the entry is read, the packet is classified, the chain is walked or extended,
the bitmap is tested and set or scanned, released PSNs leave on ``d``, and the entry is written
back while the response leaves on ``r`` and the next event is accepted.

Every memory read takes two cycles: the address, then a wait state in which the read data is
captured in a register (``meta_q``, ``next_q``, ``bits_q``); no logic follows a block RAM's
output directly. On an ECP5 a DP16KD's clock-to-output alone is 5.8 ns, so a RAM output feeding
the classification or the bitmap scan in the same cycle cannot close at 100 MHz. The buffered
run of an in-order packet is released one PSN per cycle by testing one bit of the head block's
bitmap (a ``block_bits``:1 multiplexer), not by a barrel shifter and priority encoder.

After reset an initialisation pass writes every metadata entry to zero and ``next[i] = i + 1``
(``max(n_conns, pool_blocks)`` cycles, ``i.ready`` low), so a reset restores the golden model's
initial state without relying on memory initial contents.

Latency and throughput
----------------------
Cycles per data packet with free-flowing streams (from the cycle after the engine accepts the
event to the cycle it writes the entry back and takes the next event; no cycle is lost between
packets):

============================================  ==========================================
in order, connection holds no blocks (ACK)    3
old duplicate (DUP) or dropped (NACK)         3
out of order into chain position ``k`` held   5 + 2 k  (k next-pointer reads, one bitmap read)
out of order needing ``n`` new blocks (SACK)  3 + 3 n
in order with a buffered run behind it        3 + per block visited: 2 (scan, bitmap read)
                                              (+2 if the head block is freed) + 1 per
                                              released PSN (+1 if the run ends in the block)
============================================  ==========================================

Loss-free in-order traffic therefore runs at 1/3 packet per cycle; the measured figure under
loss, reordering and duplication is reported by ``bench_melo_engine``. The ``open`` event takes
3 cycles. Responses and releases leave through output registers; a stalled output holds the
FSM (nothing is dropped) and the stall is counted. ``cosim.designs.melo.bridge.model_cycles`` replays
this table.

Resources
---------
Memories: ``n_conns * metadata_bits + pool_blocks * (block_bits + ptr_bits)`` bits. Logic: one
``psn_bits`` subtractor and comparator set, a ``block_bits``:1 bit multiplexer and a bit-clear
decoder for the in-order scan, three read-data registers, and 32-bit status counters.

Inputs outside the contract (``conn >= n_conns``, or ``open`` on a connection that holds
blocks) are dropped without output and counted in ``rejected`` (the golden model raises).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Const, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from models.melo.engine import ACK, DUP, NACK, SACK, MeloEngineParams

__all__ = ["MeloEngine", "event_layout", "delivery_layout", "response_layout", "metadata_layout"]

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


class MeloEngine(wiring.Component):
    """The MELO receiver engine (see the module docstring for interface, timing and resources).

    Parameters
    ----------
    params : MeloEngineParams
        Connections, PSN width, block size, pool size and window (validated by the dataclass).

    Raises
    ------
    ValueError
        If ``params`` is not a :class:`models.melo.engine.MeloEngineParams`.
    """

    def __init__(self, params: MeloEngineParams):
        if not isinstance(params, MeloEngineParams):
            self._MustUse__silence = True  # a rejected object is not an unused design
            raise ValueError(f"MeloEngine takes a models.melo.engine.MeloEngineParams, not {params!r}")
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
        PB = p.psn_bits

        # ---- memories ---------------------------------------------------------------------------
        m.submodules.meta = meta = Memory(shape=metadata_layout(p), depth=N, init=[])
        m.submodules.bits = bits = Memory(shape=unsigned(BB), depth=P, init=[])
        m.submodules.nxt = nxt = Memory(shape=unsigned(p.ptr_bits), depth=P, init=[])
        meta_w = meta.write_port()
        meta_r = meta.read_port(transparent_for=(meta_w,))
        bits_w, bits_r = bits.write_port(), bits.read_port()
        nxt_w, nxt_r = nxt.write_port(), nxt.read_port()

        # ---- registers --------------------------------------------------------------------------
        free_head = Signal(p.ptr_bits)
        free_count = Signal(range(P + 1), init=P)
        c = Signal(p.conn_bits)
        psn = Signal(PB)
        is_open = Signal()
        e = Signal(PB)
        head = Signal(p.ptr_bits, name="head")
        tail = Signal(p.ptr_bits, name="tail")
        b = Signal(p.ptr_bits, name="b")
        count = Signal(p.count_bits)
        ooo = Signal(p.ooo_bits)
        k = Signal(PB - LB)            # chain steps left (walk)
        need = Signal(p.count_bits)    # blocks still to allocate
        kind = Signal(2)
        init_i = Signal(range(max(N, P) + 1))
        peak = Signal(range(P + 1))
        # Memory read data, registered. A block RAM's clock-to-output (5.8 ns on an ECP5 DP16KD)
        # leaves no room for logic in a 10 ns cycle, so every read takes two cycles (the address,
        # then a wait state in which the data is captured here) and no logic follows a RAM.
        rd = Signal(metadata_layout(p), name="meta_q")
        nq = Signal(p.ptr_bits, name="next_q")
        bq = Signal(BB, name="bits_q")
        m.d.sync += [nq.eq(nxt_r.data), bq.eq(bits_r.data)]
        wb = Signal(BB, name="run_bits")   # bitmap of the head block while its run is released
        first = Signal(name="run_first")   # RUN's first cycle: the bitmap is still on bits_q

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

        # input: the metadata read address always follows the offered event
        m.d.comb += meta_r.addr.eq(self.i.payload.conn)

        def accept():
            m.d.comb += self.i.ready.eq(1)
            with m.If(self.i.valid):
                m.d.sync += [c.eq(self.i.payload.conn), psn.eq(self.i.payload.psn), is_open.eq(self.i.payload.open)]
                m.next = "MWAIT"

        diff = Signal(PB)
        kk = Signal(PB - LB)
        m.d.comb += [diff.eq(psn - rd.epsn), kk.eq((psn >> LB) - (rd.epsn >> LB))]

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
                accept()

            with m.State("MWAIT"):
                # the entry of conn c is on the read port (transparent to the write-back of the
                # packet before); capture it
                m.d.sync += rd.eq(meta_r.data)
                m.next = "META"

            with m.State("META"):
                # classify the packet against the captured entry; keep a working copy
                m.d.sync += [e.eq(rd.epsn), head.eq(rd.head), tail.eq(rd.tail), count.eq(rd.count), ooo.eq(rd.ooo),
                             b.eq(rd.head)]
                if N < 1 << p.conn_bits:
                    bad_conn = c >= N
                else:
                    bad_conn = Const(0)
                with m.If(bad_conn | (is_open & (rd.count != 0))):
                    count_up(self.rejected)
                    m.next = "IDLE"
                with m.Elif(is_open):
                    m.d.comb += [meta_w.addr.eq(c), meta_w.en.eq(1), meta_w.data.epsn.eq(psn),
                                 meta_w.data.head.eq(rd.head), meta_w.data.tail.eq(rd.tail)]
                    m.next = "IDLE"
                with m.Elif(diff == 0):
                    m.d.sync += kind.eq(ACK)
                    with m.If(d_can):
                        release(rd.epsn)
                        m.d.sync += e.eq(rd.epsn + 1)
                        with m.If(rd.count == 0):
                            m.next = "FINISH"
                        with m.Else():
                            m.next = "SCAN"
                    with m.Else():
                        m.next = "DELIV"
                with m.Elif(diff[PB - 1]):
                    m.d.sync += kind.eq(DUP)
                    m.next = "FINISH"
                with m.Elif(kk >= p.max_blocks_per_conn):
                    m.d.sync += kind.eq(NACK)
                    count_up(self.nack_window)
                    m.next = "FINISH"
                with m.Elif(kk >= rd.count):
                    nd = Signal(p.count_bits + 1)
                    m.d.comb += nd.eq(kk + 1 - rd.count)
                    with m.If(nd > free_count):
                        m.d.sync += kind.eq(NACK)
                        count_up(self.nack_pool)
                        m.next = "FINISH"
                    with m.Else():
                        m.d.sync += [need.eq(nd), kind.eq(SACK)]
                        m.next = "POP"
                with m.Elif(kk == 0):
                    m.d.comb += bits_r.addr.eq(rd.head)
                    m.next = "BWAIT"
                with m.Else():
                    m.d.comb += nxt_r.addr.eq(rd.head)
                    m.d.sync += k.eq(kk - 1)
                    m.next = "WALKW"

            with m.State("DELIV"):
                # the in-order packet itself, when d was stalled in META
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
                             need.eq(need - 1)]
                count_up(self.allocs)
                m.next = "POPW"

            with m.State("POPW"):
                m.next = "POP2"

            with m.State("POP2"):
                m.d.sync += free_head.eq(nq)
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
                    m.d.sync += [free_head.eq(head), free_count.eq(free_count + 1), count.eq(count - 1)]
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
                    m.next = "RUNW"

            with m.State("RUNW"):
                m.d.sync += first.eq(1)
                m.next = "RUN"

            with m.State("RUN"):
                # release the buffered run at e one PSN per cycle, clearing its bits
                off = e[:LB]
                cur = Signal(BB)
                cleared = Signal(BB)
                m.d.comb += [cur.eq(Mux(first, bq, wb)),
                             cleared.eq(cur & ~(Const(1, BB) << off)[:BB])]
                with m.If(~cur.bit_select(off, 1)):
                    # end of the run inside this block
                    m.d.comb += [bits_w.addr.eq(head), bits_w.data.eq(cur), bits_w.en.eq(1)]
                    m.next = "FINISH"
                with m.Elif(d_can):
                    release(e)
                    m.d.sync += [e.eq(e + 1), ooo.eq(ooo - 1), wb.eq(cleared), first.eq(0)]
                    with m.If(off == BB - 1):
                        # the run reaches the end of the block: on to the next one
                        m.d.comb += [bits_w.addr.eq(head), bits_w.data.eq(cleared), bits_w.en.eq(1)]
                        m.next = "SCAN"
                with m.Else():
                    m.d.sync += [wb.eq(cur), first.eq(0)]

            with m.State("FINISH"):
                free_chain = Signal()
                fc_new = Signal(range(P + 1))
                cnt_new = Signal(p.count_bits)
                m.d.comb += [free_chain.eq((kind == ACK) & (ooo == 0) & (count != 0)),
                             fc_new.eq(free_count + Mux(free_chain, count, 0)),
                             cnt_new.eq(Mux(free_chain, 0, count))]
                with m.If(r_can):
                    m.d.comb += [meta_w.addr.eq(c), meta_w.en.eq(1), meta_w.data.epsn.eq(e),
                                 meta_w.data.head.eq(head), meta_w.data.tail.eq(tail), meta_w.data.count.eq(cnt_new),
                                 meta_w.data.ooo.eq(ooo)]
                    with m.If(free_chain):
                        # splice the whole chain onto the free stack: next[tail] = free_head
                        m.d.comb += [nxt_w.addr.eq(tail), nxt_w.data.eq(free_head), nxt_w.en.eq(1)]
                        m.d.sync += free_head.eq(head)
                        count_up(self.frees, count)
                    m.d.sync += [free_count.eq(fc_new), self.r.valid.eq(1), self.r.payload.kind.eq(kind),
                                 self.r.payload.conn.eq(c), self.r.payload.cum_psn.eq(e), self.r.payload.psn.eq(psn),
                                 self.r.payload.used.eq(P - fc_new)]
                    with m.If(P - fc_new > peak):
                        m.d.sync += peak.eq(P - fc_new)
                    count_up(self.packets)
                    for kd, ctr in ((ACK, self.acks), (SACK, self.sacks), (DUP, self.dups)):
                        with m.If(kind == kd):
                            count_up(ctr)
                    m.next = "IDLE"
                    accept()


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
                     self.blocks_in_use.eq(P - free_count),
                     self.peak_blocks.eq(peak)]
        return m

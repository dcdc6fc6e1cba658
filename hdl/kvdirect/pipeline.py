"""KV-Direct processing pipeline in Amaranth: decode, hash, reservation station, memory engine.

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, SOSP 2017 (sections on the
out-of-order execution engine and the hash table). This block serves the request / response /
memory-port interface of :mod:`models.kvdirect` for inline 8 B keys and 8 B values, GET, PUT,
DELETE and ATOMIC (``func_id`` 0..7: add, sub, min, max, and, or, xor, swap on a signed 64-bit
value). Its golden model is :class:`models.kvdirect.rtl_model.RTLStore` (the store without bucket
chaining: a PUT that finds no room in the key's bucket answers FULL).

Blocks, in the order a request meets them::

    i --> decode + hash (3 stages) --> tail read --> dispatch --> reservation station --+--> memory engine --> mem_req
                                                                   ^  (chains, tails)  |       ^ writes first
                                                                   |                   v       |
    o <-- response FIFO <------ execute (4 stages, one op/cycle) <-- mem_rsp (any order, by id)
                                   | forward the new bucket to the next op of the chain

- **Decode + hash.** The 156-bit request is registered with its key's
  ``fmix32(CRC-32(key || 8))`` (:mod:`hdl.kvdirect.hash`); the bucket index is the top
  ``log2(n_buckets)`` bits. A fourth stage registers the bucket index while the tail table
  (a block RAM with a registered read) is read for it; a dispatch in the cycle of that read is
  bypassed. The four stages advance together; ``i.ready`` drops only when the reservation
  station has no free entry.
- **Reservation station.** ``entries`` op slots (request, bucket, next pointer) and a table of
  ``rs_slots`` chain tails indexed by the low bits of the bucket index. The dependency unit is
  the *bucket*, not the key: two keys in one bucket read-modify-write the same 64 B line, so
  they must be ordered (the model's ``hash & 0x3FF`` OoO slot would miss that dependency
  between different keys of one bucket; we key the table on the bucket). An op whose slot has
  a live tail is appended to that chain and waits; otherwise it is a chain head and asks for
  its bucket. Different buckets sharing a slot are a false dependency: serialised, never
  forwarded. Free entries come from a free list (a FIFO of entry numbers, all of them at
  reset), so allocation needs no priority encoder over the ``entries`` live bits.
- **Execute.** Four register stages, one op entering per cycle, no stall: x1 holds the request
  (read from the request store as the op issues) and the 512-bit bucket; stage A compares the
  key with the 7 inline-KV starts (slot boundaries with type 1 and a bitmap start bit); stage
  B picks the first match, the old value, the first run of 4 free slots once the old copy is
  cleared, the status and whether the op writes; stage C is the 64-bit atomic ALU; at x4 the
  new bucket is composed exactly as the golden store lays it out and the op retires (response,
  write-back, successor). An op issues only while the response and write-back FIFOs have room
  for every op in the stages (credits), so retirement never waits. If the retiring op's
  successor in the chain is on the same bucket and ``forward_en`` is high, the successor
  issues next, on the new bucket, with no memory access (the paper's forwarding; one
  write-back when the chain drains): a forwarded chain runs at one op per 4 cycles. Otherwise
  the bucket is written back (if any op of the run changed it) and the successor, if any, asks
  for its own read. An op that finds the retiring op as its slot's tail in that very cycle is
  not chained to it: it heads a new chain and reads its bucket after the write-back.
- **Memory engine.** One ordered request stream (reads and whole-line writes) with write-backs
  served before reads, so a read never passes a write to the same line (the PCIe rule that a
  read does not pass a posted write); at most ``max_reads`` reads are in flight (the DMA tags
  the host link grants, at most ``entries``); read responses carry the entry id and may
  return in any order. A request offered on ``mem_req`` is held (valid and payload) until
  ``mem_req.ready``, as on an AXI address channel.

Throughput: one op per cycle at the execute stage (with response and write-back FIFOs of at
least 6; the default is 8); memory-bound at ``min(max_reads, entries) / round_trip`` chain
heads per cycle; a same-bucket chain runs at one op per 4 cycles with forwarding and one op per
round trip without (:func:`models.kvdirect.rtl_model.predict_ops_per_cycle`,
:func:`models.kvdirect.cycles.simulate_cycles`). Latency of an op that heads its chain: 3
(hash) + 1 (tail read) + 1 (dispatch) + queueing + memory round trip + 4 (execute) + 1
(response FIFO) cycles.

Timing (the reason for the stages): the single-cycle execute of the first version closed at
26.8 MHz on an LFE5U-85F (speed 6, nextpnr, out of context); its critical path ran from the
executing entry number through the request store's asynchronous read, the key comparators,
the priority multiplexers and the ALU back into the bucket register (51 steps, 31 ns of it
routing). This version closes at 46.7 MHz (1 seed; 10,405 LUT4, 6 DP16KD): its critical
path starts at the tail table's block RAM read (5.8 ns clock-to-out: the read is not
registered in the RAM's output register) and runs through the chain test (``live`` and
bucket of the tail entry, 64-way multiplexers) to the ``chained`` counter and next-pointer
enables (23 steps, 13 ns routing). Registering the tail read (one more stage, a two-cycle
bypass) is the next step (``docs/boards/results.json`` holds the measured figures).

Resources: ``entries x 156`` bits of request store (registered read), ``rs_slots x
log2(entries)`` bits of tail table (registered read: one block RAM), the free list,
``entries x (bucket bits + log2(entries) + 3)`` flip-flops, four 512-bit stage registers, the
execute logic (7 x 64-bit key comparators, a 64-bit ALU, 512-bit multiplexers), two 32x32
multipliers for the hash, and the FIFOs.

Counters (saturating, 32 bits): ``cycles`` (cycles with work in the block), ``ops_in``,
``ops_out``, ``mem_reads``, ``mem_writes``, ``forwarded`` (ops executed on a forwarded bucket),
``chained`` (ops that found their slot busy), ``stall_full`` (cycles a hashed op waited for a
free entry).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.common.arith import count_saturating
from models.kvdirect.rtl_model import (
    ATOMIC,
    DELETE,
    ERROR,
    FULL,
    GET,
    LINE_ADDR_BITS,
    NOT_FOUND,
    OK,
    PUT,
    PipelineParams,
)

from .hash import KeyHash

__all__ = ["Pipeline", "REQUEST", "RESPONSE", "mem_req_layout", "mem_rsp_layout", "COUNTERS"]

COUNTER_BITS = 32
COUNTERS = ("cycles", "ops_in", "ops_out", "mem_reads", "mem_writes", "forwarded", "chained", "stall_full")

REQUEST = data.StructLayout({"tag": 8, "opcode": 3, "func_id": 8, "pad": 9, "key": 64, "operand": 64})
RESPONSE = data.StructLayout({"tag": 8, "status": 2, "existed": 1, "pad": 1, "value": 64})

_KV_SLOTS = 4          # an 18 B inline KV (2 + 8 + 8) takes 4 slots of 5 B
_STARTS = range(7)     # a 4-slot run can start at slots 0..6 of 10


def mem_req_layout(p: PipelineParams) -> data.StructLayout:
    """Memory request: ``we`` (1 = write), line ``addr``, read ``id``, write ``data``."""
    return data.StructLayout({"we": 1, "addr": LINE_ADDR_BITS, "id": p.entry_bits, "data": 512})


def mem_rsp_layout(p: PipelineParams) -> data.StructLayout:
    """Read response: ``id`` of the read, line ``data`` (byte 0 in bits 0..7)."""
    return data.StructLayout({"id": p.entry_bits, "data": 512})


def _bits(lo: int, n: int) -> int:
    return ((1 << n) - 1) << lo


def _kv_masks(s: int) -> dict[str, int]:
    """Bucket bit masks of an inline 8+8 B KV starting at slot ``s`` (layout.py)."""
    o = 5 * s
    return {
        "clear": _bits(8 * o, 8 * 5 * _KV_SLOTS) | _bits(400 + 3 * s, 3 * _KV_SLOTS)
        | (1 << (430 + o)) | (1 << (430 + o + 17)),
        "header": (8 | 8 << 8) << (8 * o) | sum(1 << (400 + 3 * t) for t in range(s, s + _KV_SLOTS))
        | (1 << (430 + o)) | (1 << (430 + o + 17)),
        "key_lo": 8 * (o + 2),
        "val_lo": 8 * (o + 10),
        "len_lo": 8 * o,
    }


def _or_each(values):
    """OR of a list of values (a balanced tree)."""
    values = list(values)
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k] for k in range(0, len(values), 2)]
    return values[0]


def _sat_inc(m: Module, ctr, cond):
    count_saturating(m, [(ctr, cond)])


class Pipeline(wiring.Component):
    """KV-Direct key-value processing pipeline (see the module docstring).

    Parameters
    ----------
    params : PipelineParams

    Attributes
    ----------
    i : In(stream.Signature(REQUEST))
        Requests (the 156-bit record of :mod:`models.kvdirect`).
    o : Out(stream.Signature(RESPONSE))
        Responses (76 bits), possibly reordered across buckets; the tag matches them.
    mem_req : Out(stream.Signature(mem_req_layout(params)))
        Ordered memory requests to the 64 B-line memory (reads and whole-line writes).
    mem_rsp : In(stream.Signature(mem_rsp_layout(params)))
        Read responses, any order, matched by ``id``.
    forward_en : In(1)
        1: same-bucket ops execute back to back on the forwarded bucket; 0: each op of a chain
        waits for its own memory round trip (the paper's "stalled" baseline).
    max_reads : In(range(entries + 1))
        Reads allowed in flight (DMA tags); 0 stops all reads.
    cycles, ops_in, ops_out, mem_reads, mem_writes, forwarded, chained, stall_full : Out(32)
    """

    def __init__(self, params: PipelineParams):
        if not isinstance(params, PipelineParams):
            raise TypeError(f"Pipeline takes a models.kvdirect.rtl_model.PipelineParams, not {params!r}")
        self.params = params
        sig = {
            "i": In(stream.Signature(REQUEST)),
            "o": Out(stream.Signature(RESPONSE)),
            "mem_req": Out(stream.Signature(mem_req_layout(params))),
            "mem_rsp": In(stream.Signature(mem_rsp_layout(params))),
            "forward_en": In(1),
            "max_reads": In(range(params.entries + 1)),
        }
        sig.update({c: Out(COUNTER_BITS) for c in COUNTERS})
        super().__init__(sig)

    # --- the execute pipeline's stages ------------------------------------------------------
    @staticmethod
    def _stage_match(m: Module, req, bucket):
        """Stage A: which inline KVs hold ``req.key`` (``match``) and which hold exactly what a
        PUT of ``req`` there would write (``same``: header, key, value, padding, slot types and
        bitmap bits under the KV's clear mask)."""
        match = Signal(len(_STARTS), name="xa_match")
        same = Signal(len(_STARTS), name="xa_same")
        key, opnd = req.key, req.operand
        for s in _STARTS:
            mk = _kv_masks(s)
            o = 5 * s
            start = (bucket[400 + 3 * s:403 + 3 * s] == 1) & bucket[430 + o]
            hit = start & (bucket[mk["len_lo"]:mk["len_lo"] + 8] == 8) & (bucket[mk["key_lo"]:mk["key_lo"] + 64] == key)
            rest = ((bucket[8 * o + 8:8 * o + 16] == 8) & (bucket[mk["val_lo"]:mk["val_lo"] + 64] == opnd)
                    & (bucket[8 * (o + 18):8 * (o + 20)] == 0) & bucket[430 + o + 17])
            for t in range(s + 1, s + _KV_SLOTS):
                rest = rest & (bucket[400 + 3 * t:403 + 3 * t] == 1)
            m.d.comb += [match[s].eq(hit), same[s].eq(hit & rest)]
        return match, same

    @staticmethod
    def _stage_decide(m: Module, req, bucket, match, same):
        """Stage B: the first match ``mf`` (one-hot), the old value, the first run of 4 free slots
        once the old copy is cleared ``ff`` (one-hot), and the op's status, ``existed`` and
        write flag (a PUT writes unless it finds its key at its first free run with the same
        bytes: ``same``)."""
        n = len(_STARTS)
        mf = Signal(n, name="xb_mf")
        ff = Signal(n, name="xb_ff")
        free = Signal(n, name="xb_free")
        m.d.comb += mf.eq(match & ~(match << 1 | match << 2 | match << 3 | match << 4 | match << 5 | match << 6)[:n])
        found = match.any()
        old = Signal(64, name="xb_old")
        m.d.comb += old.eq(_or_each([Mux(mf[s], bucket[8 * (5 * s + 10):8 * (5 * s + 10) + 64], 0) for s in _STARTS]))
        covered = [_or_each([mf[s] for s in _STARTS if s <= t < s + _KV_SLOTS]) for t in range(10)]
        for s in _STARTS:
            ok = Const(1, 1)
            for t in range(s, s + _KV_SLOTS):
                ok = ok & ((bucket[400 + 3 * t:403 + 3 * t] == 0) | covered[t])
            m.d.comb += free[s].eq(ok)
        m.d.comb += ff.eq(free & ~(free << 1 | free << 2 | free << 3 | free << 4 | free << 5 | free << 6)[:n])
        has_room = free.any()
        put_same = found & (mf & ff & same).any()
        status = Signal(2, name="xb_status")
        existed = Signal(name="xb_existed")
        wr = Signal(name="xb_write")
        kind = Signal(2, name="xb_kind")       # new bucket: 0 unchanged, 1 PUT, 2 cleared (DELETE), 3 ATOMIC
        use_old = Signal(name="xb_use_old")    # the response carries the old value
        func = req.func_id
        with m.Switch(req.opcode):
            with m.Case(GET):
                m.d.comb += [status.eq(Mux(found, OK, NOT_FOUND)), use_old.eq(found)]
            with m.Case(PUT):
                with m.If(found | has_room):
                    m.d.comb += [status.eq(OK), existed.eq(found), kind.eq(1), wr.eq(~put_same)]
                with m.Else():
                    m.d.comb += status.eq(FULL)
            with m.Case(DELETE):
                m.d.comb += [status.eq(Mux(found, OK, NOT_FOUND)), existed.eq(found), wr.eq(found), kind.eq(2)]
            with m.Case(ATOMIC):
                with m.If(func >= 8):
                    m.d.comb += status.eq(ERROR)
                with m.Elif(found):
                    m.d.comb += [status.eq(OK), use_old.eq(1), wr.eq(1), kind.eq(3)]
                with m.Else():
                    m.d.comb += status.eq(NOT_FOUND)
            with m.Default():
                m.d.comb += status.eq(ERROR)
        return mf, ff, old, status, existed, wr, kind, use_old

    @staticmethod
    def _stage_alu(m: Module, func, old, opnd):
        """Stage C: the 64-bit atomic ALU (``func_id`` 0..7) on the old value."""
        new_val = Signal(64, name="xc_new_value")
        so, sp = old.as_signed(), opnd.as_signed()
        with m.Switch(func[:3]):
            with m.Case(0):
                m.d.comb += new_val.eq(old + opnd)
            with m.Case(1):
                m.d.comb += new_val.eq(old - opnd)
            with m.Case(2):
                m.d.comb += new_val.eq(Mux(so < sp, old, opnd))
            with m.Case(3):
                m.d.comb += new_val.eq(Mux(so > sp, old, opnd))
            with m.Case(4):
                m.d.comb += new_val.eq(old & opnd)
            with m.Case(5):
                m.d.comb += new_val.eq(old | opnd)
            with m.Case(6):
                m.d.comb += new_val.eq(old ^ opnd)
            with m.Case(7):
                m.d.comb += new_val.eq(opnd)
        return new_val

    @staticmethod
    def _stage_compose(m: Module, req, bucket, mf, ff, kind, new_val):
        """Stage D (combinational, at retirement): the new 512-bit bucket."""
        masks = [_kv_masks(s) for s in _STARTS]
        clr = _or_each([Mux(mf[s], Const(masks[s]["clear"], 512), 0) for s in _STARTS])
        pairs = list(zip(_STARTS, masks, strict=True))
        ins = _or_each([Mux(ff[s], Const(mk["header"], 512) | (req.key << mk["key_lo"])
                            | (req.operand << mk["val_lo"]), 0) for s, mk in pairs])
        vmask = _or_each([Mux(mf[s], Const(_bits(mk["val_lo"], 64), 512), 0) for s, mk in pairs])
        vins = _or_each([Mux(mf[s], new_val << mk["val_lo"], 0) for s, mk in pairs])
        new = Signal(512, name="xd_new_bucket")
        with m.Switch(kind):
            with m.Case(0):
                m.d.comb += new.eq(bucket)
            with m.Case(1):
                m.d.comb += new.eq((bucket & ~clr) | ins)
            with m.Case(2):
                m.d.comb += new.eq(bucket & ~clr)
            with m.Case(3):
                m.d.comb += new.eq((bucket & ~vmask) | vins)
        return new

    def elaborate(self, platform):
        p = self.params
        m = Module()
        N, E = p.entries, p.entry_bits
        BB = max(1, p.bucket_bits)
        SB = p.slot_bits

        def slot_of(b):
            return b[:min(len(b), SB)] if SB else Const(0, 1)

        # --- decode + hash: four stages advancing together -----------------------------------
        # stages 1..3: the key hash; stage 4 registers the bucket index and reads the tail table
        m.submodules.hash = kh = KeyHash()
        s_valid = [Signal(name=f"h{k}_valid") for k in (1, 2, 3, 4)]
        s_req = [Signal(REQUEST, name=f"h{k}_req") for k in (1, 2, 3, 4)]
        disp_fire = Signal()
        adv = Signal()
        m.d.comb += [adv.eq(~s_valid[3] | disp_fire), self.i.ready.eq(adv),
                     kh.en.eq(adv), kh.key.eq(self.i.payload.key)]
        h_bkt = Signal(BB, name="h3_bucket")
        m.d.comb += h_bkt.eq(kh.h[32 - p.bucket_bits:] if p.bucket_bits else 0)
        d_req = s_req[3]
        d_bkt = Signal(BB, name="d_bucket")
        with m.If(adv):
            m.d.sync += [s_valid[0].eq(self.i.valid), s_req[0].eq(self.i.payload)]
            m.d.sync += [s_valid[k].eq(s_valid[k - 1]) for k in (1, 2, 3)]
            m.d.sync += [s_req[k].eq(s_req[k - 1]) for k in (1, 2, 3)]
            m.d.sync += d_bkt.eq(h_bkt)

        # --- reservation station state -----------------------------------------------------
        live = Signal(N)
        has_next = Signal(N)
        nxt = Array(Signal(E, name=f"next{k}") for k in range(N))
        same_next = Signal(N)                  # the successor is on the same bucket (not just slot)
        ebkt = Array(Signal(BB, name=f"bucket{k}") for k in range(N))
        m.submodules.req_store = req_store = Memory(shape=REQUEST, depth=N, init=[])
        rs_w = req_store.write_port()
        rs_r = req_store.read_port(domain="sync")
        # the tail table is read as the op enters stage 4 (a block RAM with a registered read)
        m.submodules.tails = tails = Memory(shape=E, depth=p.rs_slots, init=[])
        tl_w = tails.write_port()
        tl_r = tails.read_port(domain="sync")
        # free entries, in the order they were freed (all of them at reset)
        m.submodules.free_list = free_list = Memory(shape=E, depth=N, init=list(range(N)))
        fl_w = free_list.write_port()
        fl_r = free_list.read_port(domain="comb")
        fl_head, fl_tail = Signal(E, name="fl_head"), Signal(E, name="fl_tail")
        fl_count = Signal(range(N + 1), name="fl_count", init=N)

        m.submodules.dq = dq = fifo.SyncFIFO(width=E, depth=N)      # new chain heads to read
        m.submodules.xq = xq = fifo.SyncFIFO(width=E, depth=N)      # chain successors to read
        m.submodules.wf = wf = fifo.SyncFIFO(width=BB + 512, depth=p.write_fifo_depth)
        m.submodules.rf = rf = fifo.SyncFIFO(width=RESPONSE.size, depth=p.resp_fifo_depth)

        # execute pipeline registers: x1 (issued: request and bucket), x2, x3, x4 (retires)
        xv = [Signal(name=f"x{k}_valid") for k in (1, 2, 3, 4)]
        xe = [Signal(E, name=f"x{k}_e") for k in (1, 2, 3, 4)]
        xb = [Signal(512, name=f"x{k}_bucket") for k in (1, 2, 3, 4)]
        xd = [Signal(name=f"x{k}_dirty") for k in (1, 2, 3, 4)]
        xr = [rs_r.data] + [Signal(REQUEST, name=f"x{k}_req") for k in (2, 3, 4)]

        # --- dispatch: allocate an entry, chain or issue --------------------------------------
        has_free = fl_count != 0
        e_new = Signal(E, name="e_new")
        m.d.comb += [fl_r.addr.eq(fl_head), e_new.eq(fl_r.data)]
        slot = slot_of(d_bkt)
        # the tail read a cycle ago misses the dispatch of that cycle: bypass it
        byp, byp_e = Signal(name="d_tail_bypass"), Signal(E, name="d_tail_bypass_e")
        with m.If(adv):
            m.d.sync += [byp.eq(disp_fire & (slot_of(d_bkt) == slot_of(h_bkt))), byp_e.eq(e_new)]
        m.d.comb += [tl_r.addr.eq(slot_of(h_bkt)), tl_r.en.eq(adv)]
        t = Signal(E, name="d_tail")
        busy = Signal(name="d_busy")
        d_same = Signal(name="d_same")
        # The op retiring this cycle (x4) takes no new successor: an op that finds it as its
        # slot's tail becomes a chain head and reads its bucket after the retiring op's write-back.
        m.d.comb += [t.eq(Mux(byp, byp_e, tl_r.data)),
                     busy.eq(live.bit_select(t, 1) & (slot_of(ebkt[t]) == slot) & ~(xv[3] & (xe[3] == t))),
                     d_same.eq(ebkt[t] == d_bkt),
                     disp_fire.eq(s_valid[3] & has_free)]
        m.d.comb += [rs_w.addr.eq(e_new), rs_w.data.eq(d_req), rs_w.en.eq(disp_fire),
                     tl_w.addr.eq(slot), tl_w.data.eq(e_new), tl_w.en.eq(disp_fire),
                     dq.w_data.eq(e_new), dq.w_en.eq(disp_fire & ~busy)]
        m.d.comb += [fl_w.addr.eq(fl_tail), fl_w.data.eq(xe[3]), fl_w.en.eq(xv[3])]
        m.d.sync += [fl_head.eq(fl_head + disp_fire), fl_tail.eq(fl_tail + xv[3]),
                     fl_count.eq(fl_count + xv[3] - disp_fire)]
        set_live = Signal(N)
        set_next = Signal(N)
        with m.If(disp_fire):
            m.d.comb += set_live.eq(Const(1, N) << e_new)
            m.d.sync += ebkt[e_new].eq(d_bkt)
            with m.If(busy):
                m.d.comb += set_next.eq(Const(1, N) << t)
                m.d.sync += [nxt[t].eq(e_new), same_next.bit_select(t, 1).eq(d_same)]

        # --- execute: four stages, one op per cycle, no stall -------------------------------
        # An op enters x1 only when the response FIFO and the write-back FIFO have room for one
        # entry per op in the execute stages (credits), so x4 always retires.
        n_in = Signal(3, name="x_count")
        m.d.comb += n_in.eq(xv[0] + xv[1] + xv[2] + xv[3])
        room = Signal(name="x_room")
        m.d.comb += room.eq((rf.level + n_in < rf.depth) & (wf.level + n_in < wf.depth))

        # stage A (x1 -> x2)
        match, same = self._stage_match(m, xr[0], xb[0])
        x2_match = Signal.like(match, name="x2_match")
        x2_same = Signal.like(same, name="x2_same")
        x2_addr = Signal(BB, name="x2_addr")
        m.d.sync += [x2_match.eq(match), x2_same.eq(same), x2_addr.eq(ebkt[xe[0]])]
        # stage B (x2 -> x3)
        mf, ff, old, status, existed, wr, kind, use_old = self._stage_decide(m, xr[1], xb[1], x2_match, x2_same)
        x3 = {n: Signal.like(v, name=f"x3_{n}") for n, v in (("mf", mf), ("ff", ff), ("old", old), ("status", status),
              ("existed", existed), ("wr", wr), ("kind", kind), ("use_old", use_old), ("addr", x2_addr))}
        m.d.sync += [x3["mf"].eq(mf), x3["ff"].eq(ff), x3["old"].eq(old), x3["status"].eq(status),
                     x3["existed"].eq(existed), x3["wr"].eq(wr), x3["kind"].eq(kind), x3["use_old"].eq(use_old),
                     x3["addr"].eq(x2_addr)]
        # stage C (x3 -> x4), and what x4 will need of its successor: an op appended to x3's
        # entry this very cycle is its successor too
        new_val = self._stage_alu(m, xr[2].func_id, x3["old"], xr[2].operand)
        x4 = {n: Signal.like(v, name=f"x4_{n}") for n, v in x3.items()}
        x4_new_val = Signal(64, name="x4_new_value")
        m.d.sync += [x4[n].eq(v) for n, v in x3.items()] + [x4_new_val.eq(new_val)]
        app = Signal(name="x_append")
        x4_has, x4_succ, x4_same = Signal(name="x4_has_next"), Signal(E, name="x4_succ"), Signal(name="x4_same")
        m.d.comb += app.eq(disp_fire & busy & xv[2] & (t == xe[2]))
        m.d.sync += [x4_has.eq(has_next.bit_select(xe[2], 1) | app),
                     x4_succ.eq(Mux(app, e_new, nxt[xe[2]])),
                     x4_same.eq(Mux(app, d_same, same_next.bit_select(xe[2], 1)))]
        for k in (1, 2):
            m.d.sync += [xv[k + 1].eq(xv[k]), xe[k + 1].eq(xe[k]), xb[k + 1].eq(xb[k]), xd[k + 1].eq(xd[k]),
                         xr[k + 1].eq(xr[k])]
        m.d.sync += [xv[1].eq(xv[0]), xe[1].eq(xe[0]), xb[1].eq(xb[0]), xd[1].eq(xd[0]), xr[1].eq(xr[0])]
        # stage D (x4, combinational): new bucket, response, successor, write-back
        new_b = self._stage_compose(m, xr[3], xb[3], x4["mf"], x4["ff"], x4["kind"], x4_new_val)
        fwd_want, fwd, need_wr = Signal(name="x_fwd_want"), Signal(name="x_fwd"), Signal(name="x_need_wr")
        m.d.comb += [
            fwd_want.eq(xv[3] & x4_has & x4_same & self.forward_en),
            fwd.eq(fwd_want & room),
            need_wr.eq(xv[3] & ~fwd & (xd[3] | x4["wr"])),
        ]
        resp = Signal(RESPONSE)
        m.d.comb += [resp.tag.eq(xr[3].tag), resp.status.eq(x4["status"]), resp.existed.eq(x4["existed"]),
                     resp.value.eq(Mux(x4["use_old"], x4["old"], 0)),
                     rf.w_data.eq(resp), rf.w_en.eq(xv[3]),
                     wf.w_data.eq(Cat(x4["addr"], new_b)), wf.w_en.eq(need_wr),
                     xq.w_data.eq(x4_succ), xq.w_en.eq(xv[3] & ~fwd & x4_has)]
        clr_live = Signal(N)
        with m.If(xv[3]):
            m.d.comb += clr_live.eq(Const(1, N) << xe[3])
        m.d.sync += [live.eq((live | set_live) & ~clr_live), has_next.eq((has_next | set_next) & ~set_live)]

        # issue into x1: the forwarded successor first, else a read response
        rsp_take = Signal()
        m.d.comb += [rsp_take.eq(room & ~fwd_want), self.mem_rsp.ready.eq(rsp_take)]
        rsp_fire = self.mem_rsp.valid & rsp_take
        m.d.comb += rs_r.addr.eq(Mux(fwd_want, x4_succ, self.mem_rsp.payload.id))
        m.d.sync += xv[0].eq(fwd | rsp_fire)
        with m.If(fwd):
            m.d.sync += [xe[0].eq(x4_succ), xb[0].eq(new_b), xd[0].eq(xd[3] | x4["wr"])]
        with m.Else():
            m.d.sync += [xe[0].eq(self.mem_rsp.payload.id), xb[0].eq(self.mem_rsp.payload.data), xd[0].eq(0)]

        # --- memory engine: write-backs first, then successor reads, then new heads ----------
        reads_out = Signal(range(N + 1))
        rd_ok = reads_out < self.max_reads
        # A request offered and refused stays offered (stream rule: valid and payload hold
        # until ready): the source chosen is held while mem_req.valid & ~mem_req.ready, so a
        # write-back or successor read that turns up meanwhile waits its turn. The held read
        # cannot lose its rd_ok (reads_out only falls while it waits), and a write-back that
        # turns up meanwhile is never for the held read's bucket (that bucket's ops are chained
        # behind the held op), so a read still never passes a write to its line.
        held, held_w, held_x = Signal(name="mq_held"), Signal(name="mq_held_w"), Signal(name="mq_held_x")
        free_w = wf.r_rdy
        free_x = ~free_w & rd_ok & xq.r_rdy
        free_d = ~free_w & rd_ok & ~xq.r_rdy & dq.r_rdy
        sel_w = Mux(held, held_w, free_w)
        sel_x = Mux(held, held_x, free_x)
        sel_d = Mux(held, ~held_w & ~held_x, free_d)
        rid = Mux(sel_x, xq.r_data, dq.r_data)
        mq = self.mem_req
        m.d.comb += [
            mq.valid.eq(sel_w | sel_x | sel_d),
            mq.payload.we.eq(sel_w),
            mq.payload.addr.eq(Mux(sel_w, wf.r_data[:BB], ebkt[rid])),
            mq.payload.id.eq(Mux(sel_w, 0, rid)),
            mq.payload.data.eq(Mux(sel_w, wf.r_data[BB:], 0)),
            wf.r_en.eq(mq.ready & sel_w),
            xq.r_en.eq(mq.ready & sel_x),
            dq.r_en.eq(mq.ready & sel_d),
        ]
        m.d.sync += [held.eq(mq.valid & ~mq.ready), held_w.eq(sel_w), held_x.eq(sel_x)]
        rd_issue = mq.valid & mq.ready & ~sel_w
        m.d.sync += reads_out.eq(reads_out + rd_issue - rsp_fire)

        # --- responses -----------------------------------------------------------------------
        m.d.comb += [self.o.valid.eq(rf.r_rdy), self.o.payload.eq(rf.r_data), rf.r_en.eq(self.o.ready)]

        # --- counters ------------------------------------------------------------------------
        work = live.any() | Cat(*s_valid).any() | rf.r_rdy | wf.r_rdy | Cat(*xv).any()
        _sat_inc(m, self.cycles, work)
        _sat_inc(m, self.ops_in, self.i.valid & self.i.ready)
        _sat_inc(m, self.ops_out, self.o.valid & self.o.ready)
        _sat_inc(m, self.mem_reads, rd_issue)
        _sat_inc(m, self.mem_writes, mq.valid & mq.ready & sel_w)
        _sat_inc(m, self.forwarded, fwd)
        _sat_inc(m, self.chained, disp_fire & busy)
        _sat_inc(m, self.stall_full, s_valid[3] & ~has_free)
        return m

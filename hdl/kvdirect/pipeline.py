"""KV-Direct processing pipeline in Amaranth: decode, hash, reservation station, memory engine.

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, SOSP 2017 (sections on the
out-of-order execution engine and the hash table). This block serves the request / response /
memory-port interface of :mod:`models.kvdirect` for inline 8 B keys and 8 B values, GET, PUT,
DELETE and ATOMIC (``func_id`` 0..7: add, sub, min, max, and, or, xor, swap on a signed 64-bit
value). Its golden model is :class:`models.kvdirect.rtl_model.RTLStore` (the store without bucket
chaining: a PUT that finds no room in the key's bucket answers FULL).

Blocks, in the order a request meets them::

    i --> decode + hash (3 stages) --> dispatch --> reservation station --+--> memory engine --> mem_req
                                                      ^  (chains, tails)  |       ^ writes first
                                                      |                   v       |
    o <-- response FIFO <------------- execute (one op/cycle) <-- mem_rsp (any order, by id)
                                          | forward the new bucket to the next op of the chain

- **Decode + hash.** The 156-bit request is registered with its key's
  ``fmix32(CRC-32(key || 8))`` (:mod:`hdl.kvdirect.hash`); the bucket index is the top
  ``log2(n_buckets)`` bits. The three stages advance together; ``i.ready`` drops only when
  the reservation station has no free entry.
- **Reservation station.** ``entries`` op slots (request, bucket, next pointer) and a table of
  ``rs_slots`` chain tails indexed by the low bits of the bucket index. The dependency unit is
  the *bucket*, not the key: two keys in one bucket read-modify-write the same 64 B line, so
  they must be ordered (the model's ``hash & 0x3FF`` OoO slot would miss that dependency
  between different keys of one bucket; we key the table on the bucket). An op whose slot has
  a live tail is appended to that chain and waits; otherwise it is a chain head and asks for
  its bucket. Different buckets sharing a slot are a false dependency: serialised, never
  forwarded.
- **Execute.** One op per cycle on (request, 512-bit bucket): find the key among the inline
  KVs (slot boundaries with type 1 and a bitmap start bit), compute the response and the new
  bucket exactly as the golden store lays it out (clear, first run of 4 free slots, atomic
  ALU). Then, if the op's successor in the chain is on the same bucket and ``forward_en`` is
  high, the successor executes next cycle on the new bucket with no memory access (the paper's
  forwarding; one write-back when the chain drains); otherwise the bucket is written back (if
  any op of the run changed it) and the successor, if any, asks for its own read.
- **Memory engine.** One ordered request stream (reads and whole-line writes) with write-backs
  served before reads, so a read never passes a write to the same line (the PCIe rule that a
  read does not pass a posted write); at most ``max_reads`` reads are in flight (the DMA tags
  the host link grants, at most ``entries``); read responses carry the entry id and may
  return in any order. A request offered on ``mem_req`` is held (valid and payload) until
  ``mem_req.ready``, as on an AXI address channel.

Throughput: one op per cycle at the execute stage; memory-bound at
``min(max_reads, entries) / round_trip`` chain heads per cycle; a same-bucket chain runs at one
op per cycle with forwarding and one op per round trip without
(:func:`models.kvdirect.rtl_model.predict_ops_per_cycle`). Latency of an op that heads its
chain: 3 (hash) + 1 (dispatch) + queueing + memory round trip + 1 (execute) + 1 (response FIFO)
cycles.

Resources: ``entries x 156`` bits of request store and ``rs_slots x log2(entries)`` bits of
tail table (both small RAMs with asynchronous reads), ``entries x (bucket bits + log2(entries)
+ 2)`` flip-flops, a 512-bit bucket register, the execute logic (7 x 64-bit key comparators,
a 64-bit ALU, 512-bit multiplexers), two 32x32 multipliers for the hash, and the FIFOs.

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


def _first(conds, values, default):
    """Value of the first true condition (a priority multiplexer)."""
    out = default
    for c, v in reversed(list(zip(conds, values, strict=True))):
        out = Mux(c, v, out)
    return out


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

    # --- the execute stage's combinational datapath ----------------------------------------
    def _execute(self, m: Module, req, bucket):
        """Response fields, new bucket and write flag of ``req`` on ``bucket`` (512 bits)."""
        masks = [_kv_masks(s) for s in _STARTS]
        key, opnd = req.key, req.operand
        match = Signal(len(_STARTS), name="ex_match")
        for s, mk in zip(_STARTS, masks, strict=True):
            start = (bucket[400 + 3 * s:403 + 3 * s] == 1) & bucket[430 + 5 * s]
            m.d.comb += match[s].eq(start & (bucket[mk["len_lo"]:mk["len_lo"] + 8] == 8)
                                    & (bucket[mk["key_lo"]:mk["key_lo"] + 64] == key))
        found = match.any()
        old = Signal(64, name="ex_old")
        clr = Signal(512, name="ex_clear_mask")
        vmask = Signal(512, name="ex_value_mask")
        vlo = [mk["val_lo"] for mk in masks]
        m.d.comb += [
            old.eq(_first(list(match), [bucket[v:v + 64] for v in vlo], Const(0, 64))),
            clr.eq(_first(list(match), [Const(mk["clear"], 512) for mk in masks], Const(0, 512))),
        ]
        cleared = Signal(512, name="ex_cleared")
        m.d.comb += cleared.eq(bucket & ~clr)

        # PUT: the first run of 4 empty slots in the bucket with the old copy removed
        free = Signal(len(_STARTS), name="ex_free")
        for s in _STARTS:
            m.d.comb += free[s].eq(cleared[400 + 3 * s:400 + 3 * (s + _KV_SLOTS)] == 0)
        ins = [Const(mk["header"], 512) | (key << mk["key_lo"]) | (opnd << mk["val_lo"])
               for mk in masks]
        put_b = Signal(512, name="ex_put_bucket")
        m.d.comb += put_b.eq(cleared | _first(list(free), ins, Const(0, 512)))
        has_room = free.any()

        # ATOMIC: the 64-bit ALU on the found value
        func = req.func_id
        new_val = Signal(64, name="ex_new_value")
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
        m.d.comb += vmask.eq(_first(list(match), [Const(_bits(v, 64), 512) for v in vlo], Const(0, 512)))
        atom_b = Signal(512, name="ex_atomic_bucket")
        m.d.comb += atom_b.eq((bucket & ~vmask) | _first(list(match), [new_val << v for v in vlo], Const(0, 512)))

        status = Signal(2, name="ex_status")
        existed = Signal(name="ex_existed")
        value = Signal(64, name="ex_value")
        new = Signal(512, name="ex_new_bucket")
        wr = Signal(name="ex_write")
        m.d.comb += new.eq(bucket)
        with m.Switch(req.opcode):
            with m.Case(GET):
                m.d.comb += [status.eq(Mux(found, OK, NOT_FOUND)), value.eq(Mux(found, old, 0))]
            with m.Case(PUT):
                with m.If(found | has_room):
                    m.d.comb += [status.eq(OK), existed.eq(found), new.eq(put_b), wr.eq(put_b != bucket)]
                with m.Else():
                    m.d.comb += status.eq(FULL)
            with m.Case(DELETE):
                m.d.comb += [status.eq(Mux(found, OK, NOT_FOUND)), existed.eq(found), wr.eq(found),
                             new.eq(cleared)]
            with m.Case(ATOMIC):
                with m.If(func >= 8):
                    m.d.comb += status.eq(ERROR)
                with m.Elif(found):
                    m.d.comb += [status.eq(OK), value.eq(old), wr.eq(1), new.eq(atom_b)]
                with m.Else():
                    m.d.comb += status.eq(NOT_FOUND)
            with m.Default():
                m.d.comb += status.eq(ERROR)
        return status, existed, value, new, wr

    def elaborate(self, platform):
        p = self.params
        m = Module()
        N, E = p.entries, p.entry_bits
        BB = max(1, p.bucket_bits)
        SB = p.slot_bits

        def slot_of(b):
            return b[:min(len(b), SB)] if SB else Const(0, 1)

        # --- decode + hash: three stages advancing together ----------------------------------
        m.submodules.hash = kh = KeyHash()
        s_valid = [Signal(name=f"h{k}_valid") for k in (1, 2, 3)]
        s_req = [Signal(REQUEST, name=f"h{k}_req") for k in (1, 2, 3)]
        disp_fire = Signal()
        adv = Signal()
        m.d.comb += [adv.eq(~s_valid[2] | disp_fire), self.i.ready.eq(adv),
                     kh.en.eq(adv), kh.key.eq(self.i.payload.key)]
        with m.If(adv):
            m.d.sync += [s_valid[0].eq(self.i.valid), s_req[0].eq(self.i.payload),
                         s_valid[1].eq(s_valid[0]), s_req[1].eq(s_req[0]),
                         s_valid[2].eq(s_valid[1]), s_req[2].eq(s_req[1])]
        d_req = s_req[2]
        d_bkt = Signal(BB, name="d_bucket")
        m.d.comb += d_bkt.eq(kh.h[32 - p.bucket_bits:] if p.bucket_bits else 0)

        # --- reservation station state -----------------------------------------------------
        live = Signal(N)
        has_next = Signal(N)
        nxt = Array(Signal(E, name=f"next{k}") for k in range(N))
        ebkt = Array(Signal(BB, name=f"bucket{k}") for k in range(N))
        m.submodules.req_store = req_store = Memory(shape=REQUEST, depth=N, init=[])
        rs_w = req_store.write_port()
        rs_r = req_store.read_port(domain="comb")
        m.submodules.tails = tails = Memory(shape=E, depth=p.rs_slots, init=[])
        tl_w = tails.write_port()
        tl_r = tails.read_port(domain="comb")

        m.submodules.dq = dq = fifo.SyncFIFO(width=E, depth=N)      # new chain heads to read
        m.submodules.xq = xq = fifo.SyncFIFO(width=E, depth=N)      # chain successors to read
        m.submodules.wf = wf = fifo.SyncFIFO(width=BB + 512, depth=p.write_fifo_depth)
        m.submodules.rf = rf = fifo.SyncFIFO(width=RESPONSE.size, depth=p.resp_fifo_depth)

        # --- dispatch: allocate an entry, chain or issue --------------------------------------
        free_v = ~live
        has_free = free_v.any()
        e_new = Signal(E, name="e_new")
        m.d.comb += e_new.eq(_first([free_v[k] for k in range(N)], [Const(k, E) for k in range(N)], Const(0, E)))
        slot = slot_of(d_bkt)
        t = Signal(E, name="d_tail")
        busy = Signal(name="d_busy")
        m.d.comb += [tl_r.addr.eq(slot), t.eq(tl_r.data),
                     busy.eq(live.bit_select(t, 1) & (slot_of(ebkt[t]) == slot)),
                     disp_fire.eq(s_valid[2] & has_free)]
        m.d.comb += [rs_w.addr.eq(e_new), rs_w.data.eq(d_req), rs_w.en.eq(disp_fire),
                     tl_w.addr.eq(slot), tl_w.data.eq(e_new), tl_w.en.eq(disp_fire),
                     dq.w_data.eq(e_new), dq.w_en.eq(disp_fire & ~busy)]
        set_live = Signal(N)
        set_next = Signal(N)
        with m.If(disp_fire):
            m.d.comb += set_live.eq(Const(1, N) << e_new)
            m.d.sync += ebkt[e_new].eq(d_bkt)
            with m.If(busy):
                m.d.comb += set_next.eq(Const(1, N) << t)
                m.d.sync += nxt[t].eq(e_new)

        # --- execute -----------------------------------------------------------------------
        ex_valid = Signal()
        ex_e = Signal(E)
        ex_b = Signal(512)
        ex_dirty = Signal()
        m.d.comb += rs_r.addr.eq(ex_e)
        ex_req = rs_r.data
        ex_addr = ebkt[ex_e]
        status, existed, value, new_b, wr = self._execute(m, ex_req, ex_b)

        app = Signal(name="ex_append")         # dispatch appends to the op executing now
        succ_has, succ, succ_bkt = Signal(), Signal(E), Signal(BB)
        fwd, need_wr, ex_fire = Signal(), Signal(), Signal()
        m.d.comb += [
            app.eq(disp_fire & busy & (t == ex_e)),
            succ_has.eq(has_next.bit_select(ex_e, 1) | app),
            succ.eq(Mux(app, e_new, nxt[ex_e])),
            succ_bkt.eq(Mux(app, d_bkt, ebkt[nxt[ex_e]])),
            fwd.eq(succ_has & self.forward_en & (succ_bkt == ex_addr)),
            need_wr.eq(~fwd & (ex_dirty | wr)),
            ex_fire.eq(ex_valid & rf.w_rdy & (~need_wr | wf.w_rdy)),
        ]
        resp = Signal(RESPONSE)
        m.d.comb += [resp.tag.eq(ex_req.tag), resp.status.eq(status), resp.existed.eq(existed),
                     resp.value.eq(value),
                     rf.w_data.eq(resp), rf.w_en.eq(ex_fire),
                     wf.w_data.eq(Cat(ex_addr, new_b)), wf.w_en.eq(ex_fire & need_wr),
                     xq.w_data.eq(succ), xq.w_en.eq(ex_fire & ~fwd & succ_has)]
        clr_live = Signal(N)
        with m.If(ex_fire):
            m.d.comb += clr_live.eq(Const(1, N) << ex_e)
        m.d.sync += [live.eq((live | set_live) & ~clr_live), has_next.eq((has_next | set_next) & ~set_live)]

        rsp_take = Signal()
        m.d.comb += [rsp_take.eq(~ex_valid | (ex_fire & ~fwd)), self.mem_rsp.ready.eq(rsp_take)]
        rsp_fire = self.mem_rsp.valid & rsp_take
        with m.If(ex_fire & fwd):
            m.d.sync += [ex_e.eq(succ), ex_b.eq(new_b), ex_dirty.eq(ex_dirty | wr)]
        with m.Elif(rsp_take):
            m.d.sync += [ex_valid.eq(self.mem_rsp.valid), ex_e.eq(self.mem_rsp.payload.id),
                         ex_b.eq(self.mem_rsp.payload.data), ex_dirty.eq(0)]

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
        work = live.any() | Cat(*s_valid).any() | rf.r_rdy | wf.r_rdy | ex_valid
        _sat_inc(m, self.cycles, work)
        _sat_inc(m, self.ops_in, self.i.valid & self.i.ready)
        _sat_inc(m, self.ops_out, self.o.valid & self.o.ready)
        _sat_inc(m, self.mem_reads, rd_issue)
        _sat_inc(m, self.mem_writes, mq.valid & mq.ready & sel_w)
        _sat_inc(m, self.forwarded, ex_fire & fwd)
        _sat_inc(m, self.chained, disp_fire & busy)
        _sat_inc(m, self.stall_full, s_valid[2] & ~has_free)
        return m

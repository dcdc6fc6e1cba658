"""Formal properties of the BBS SpMxV engine (:class:`hwcosim.hdl.bbs.SpMxV`), beside the design.

:class:`SpMxVFormal` wraps the engine in a harness with the same ports (so every input is a
free variable of the solver) and adds:

Assumptions (the environment obeys the stream rules)
    ``w`` and ``x``: once ``valid`` is raised, ``valid`` and ``payload`` hold until ``ready``.
    ``y.ready`` is unconstrained. Reset is not re-asserted after the initial state (the initial
    state is the reset state).

Assertions (what the engine promises)
    ``y_hold``       ``y.valid`` and ``y.payload`` hold while ``y.valid & ~y.ready``.
    ``y_no_phantom`` no ``y`` beat without input: a ``y`` beat only when more row groups have
                     been completed by accepted ``w`` beats (``k`` beats per group) than ``y``
                     beats have left; the groups in flight never exceed the pipeline depth.
    ``y_drain``      conservation: after ``PIPELINE_LATENCY`` cycles with no ``w`` beat and
                     ``y.ready`` high, every completed group has left as exactly one ``y`` beat
                     (``y`` beats == accepted ``w`` beats // k), and ``y.valid`` is low.
    ``latency``      in a free-flowing pipeline (``y.ready`` high) the result beat of a group
                     (all ``P`` PE results together, so every PE finishes its row in the same
                     cycle) is valid exactly ``PIPELINE_LATENCY`` cycles after the group's last
                     ``w`` beat, i.e. ``k - 1 + PIPELINE_LATENCY`` cycles after its first beat
                     when its ``k`` beats come back to back; and at no other time.
    ``w_needs_x``    no ``w`` beat without a complete vector: ``w`` beats of a pass are only taken
                     while a fully loaded vector (``bank_size`` ``x`` beats) is unconsumed; at most
                     two vectors are held (double buffer) and ``x.ready`` is low when both are.
    ``mac_beats``    equals the number of accepted ``w`` beats (saturating).
    ``counters``     every counter moves by 0 or +1 per cycle and sticks at ``2**32 - 1``: it never
                     wraps.

    ``internal``     white-box invariants tying the harness's counters to the engine's
                     registers (``j``, ``g``, ``full``, ``wr_sel``/``rd_sel``, ``wr_cnt`` and the
                     stage-valid bits): true in every reachable state (BMC checks them too), they
                     make the properties above k-inductive. :func:`spmxv_internals` finds those
                     registers in the elaborated engine without changing ``spmxv.py``.

Covers: a ``y`` beat leaves; two vectors are loaded at once; a ``y`` beat waits under
back-pressure.

:func:`formal_checks` lists the checks that :mod:`hwcosim.cosim.flow.formal` runs (BMC and k-induction on
tiny parameter sets) and the deliberately broken variants (:data:`MUTANTS`) that must fail.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assert, Assume, Cover, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from hwcosim.hdl.bbs.spmxv import COUNTER_BITS, SpMxV
from hwcosim.hdl.common.formal import sync_assigns
from hwcosim.models.bbs.spmxv import PIPELINE_LATENCY, BBSParams
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q

__all__ = ["SpMxVFormal", "PROPERTIES", "MUTANTS", "formal_checks", "formal_params", "spmxv_internals"]

_MAX = (1 << COUNTER_BITS) - 1
_COUNTERS = ("cycles", "mac_beats", "stall_out", "starve_w")

#: property groups of :class:`SpMxVFormal` (all by default)
PROPERTIES = ("y_hold", "y_no_phantom", "y_drain", "latency", "w_needs_x", "mac_beats", "counters", "internal")


def spmxv_internals(frag, dut) -> dict:
    """The engine's pipeline state, found in its elaborated fragment (white-box invariants).

    Named signals are looked up by name; the anonymous stage-valid bits are traced from the
    ``y.valid`` assignment backwards. Raises ``LookupError`` naming what moved when the RTL
    changes shape (only the ``internal`` property group and k-induction depend on this).
    """
    from amaranth.hdl._ast import Operator
    from amaranth.hdl._ast import Signal as _Sig

    assigns = sync_assigns(frag)
    pairs = [(a.lhs, a.rhs) for a in assigns]
    by_name = {}
    for a in assigns:
        for sig in a._lhs_signals():
            by_name.setdefault(sig.name, sig)
    out = {}
    for name in ("j", "g", "full", "wr_cnt", "wr_sel", "rd_sel", "s1_last", "s2_last", "s3_last"):
        if name not in by_name:
            raise LookupError(f"SpMxV internals changed: no register named {name!r}; update "
                              "hdl/bbs/spmxv_formal.py (property group 'internal')")
        out[name] = by_name[name]
    try:
        s3 = next(op for lhs, rhs in pairs if lhs is dut.y.valid and isinstance(rhs, Operator)
                  for op in rhs.operands if isinstance(op, _Sig) and op is not out["s3_last"])
        s2 = next(rhs for lhs, rhs in pairs if lhs is s3 and isinstance(rhs, _Sig))
        s1 = next(rhs for lhs, rhs in pairs if lhs is s2 and isinstance(rhs, _Sig))
    except StopIteration:
        raise LookupError("SpMxV internals changed: cannot trace the stage-valid chain from y.valid; "
                          "update hdl/bbs/spmxv_formal.py (property group 'internal')") from None
    out.update(s1_valid=s1, s2_valid=s2, s3_valid=s3)
    return out


def formal_params(pes: int = 1, k: int = 1, rows: int = 2, cols: int = 4, banks: int = 2) -> BBSParams:
    """A tiny parameter set with narrow fixed-point formats, so the solver stays fast."""
    return BBSParams(rows=rows, cols=cols, banks=banks, k=k, pes=pes,
                     weight_fmt=Q(2, 2), vec_fmt=Q(2, 2), out_fmt=Q(3, 2))


class SpMxVFormal(wiring.Component):
    """Formal harness: :class:`SpMxV` (or a subclass) with its stream and counter properties.

    Parameters
    ----------
    params : BBSParams
    dut_class : type
        The engine class to check; a broken subclass from :data:`MUTANTS` must fail.
    props : iterable of str, optional
        Property groups to assert (:data:`PROPERTIES`; default all). Assumptions and covers
        are always present.
    """

    def __init__(self, params: BBSParams, dut_class: type = SpMxV, props=None):
        unknown = set(props or ()) - set(PROPERTIES)
        if unknown:
            self._MustUse__silence = True
            raise UsageError(f"unknown SpMxV properties {sorted(unknown)}; choose from {PROPERTIES}")
        self.props = frozenset(props) if props else frozenset(PROPERTIES)
        self.params = params
        self.dut = dut_class(params)
        super().__init__(dict(self.dut.signature.members))

    def elaborate(self, platform):
        p = self.params
        m = Module()
        dut = self.dut
        frag = Fragment.get(dut, platform)
        m.submodules.dut = frag
        iv = spmxv_internals(frag, dut) if "internal" in self.props else None
        for name in ("w", "x"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(dut, name))
        wiring.connect(m, dut.y, wiring.flipped(self.y))
        for name in _COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(dut, name))

        K, L, S, G = p.k, PIPELINE_LATENCY, p.bank_size, p.row_groups
        w, x, y = self.w, self.x, self.y
        w_fire = Signal()
        x_fire = Signal()
        y_fire = Signal()
        m.d.comb += [w_fire.eq(w.valid & w.ready), x_fire.eq(x.valid & x.ready), y_fire.eq(y.valid & y.ready)]

        # The initial state is the reset state; reset is not pulsed again.
        m.d.comb += Assume(~ResetSignal())

        def chk(cond, msg):
            """An assertion of the property group named by the message's first word."""
            group = msg.split(":")[0]
            assert group in PROPERTIES, group
            if group in self.props:
                m.d.comb += Assert(cond, msg)

        has_past = Signal()
        m.d.sync += has_past.eq(1)

        # --- environment: input streams hold valid and payload until ready --------------------
        for sname, s in (("w", w), ("x", x)):
            pv = Signal(name=f"past_{sname}_valid")
            pr = Signal(name=f"past_{sname}_ready")
            pp = Signal(len(s.payload.as_value()), name=f"past_{sname}_payload")
            m.d.sync += [pv.eq(s.valid), pr.eq(s.ready), pp.eq(s.payload.as_value())]
            with m.If(has_past & pv & ~pr):
                m.d.comb += Assume(s.valid & (s.payload.as_value() == pp))

        # --- y_hold: the output stream obeys the same rule --------------------------------------
        py_valid, py_ready = Signal(), Signal()
        py_payload = Signal(len(y.payload.as_value()))
        m.d.sync += [py_valid.eq(y.valid), py_ready.eq(y.ready), py_payload.eq(y.payload.as_value())]
        with m.If(has_past & py_valid & ~py_ready):
            chk(y.valid, "y_hold: y.valid fell without y.ready")
            chk(y.payload.as_value() == py_payload, "y_hold: y.payload changed while waiting")

        # --- y_no_phantom / y_drain: count groups in and beats out ---------------------------------
        wpos = Signal(range(K))                       # w beats into the current group
        group_done = Signal()
        m.d.comb += group_done.eq(w_fire & (wpos == K - 1))
        with m.If(w_fire):
            m.d.sync += wpos.eq(_step(wpos == K - 1, wpos + 1))
        owed = Signal(range(L + 2))                   # completed groups not yet out as y beats
        m.d.sync += owed.eq(owed + group_done - y_fire)
        chk(~y_fire | (owed > 0), "y_no_phantom: a y beat without a completed row group")
        chk(owed <= L, "y_no_phantom: more groups in flight than pipeline stages")
        quiet = Signal(range(L + 1))                  # cycles without w beats and with y.ready high
        with m.If(w_fire | ~y.ready):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != L):
            m.d.sync += quiet.eq(quiet + 1)
        with m.If(quiet == L):
            chk((owed == 0) & ~y.valid, "y_drain: the drained pipeline owes a y beat")

        # --- latency: free-flowing pipeline, result exactly L cycles after the last beat ---------
        H = K - 1 + L
        rdy_hist = Signal(H)      # bit i: y.ready i+1 cycles ago (0 before the start)
        done_hist = Signal(H)     # bit i: a group's last w beat i+1 cycles ago
        first_hist = Signal(H)    # bit i: a group's first w beat i+1 cycles ago
        fire_hist = Signal(H)     # bit i: a w beat i+1 cycles ago
        m.d.sync += [rdy_hist.eq((rdy_hist << 1) | y.ready), done_hist.eq((done_hist << 1) | group_done),
                     first_hist.eq((first_hist << 1) | (w_fire & (wpos == 0))),
                     fire_hist.eq((fire_hist << 1) | w_fire)]
        flowing = rdy_hist[:L].all()
        with m.If(flowing):
            chk(y.valid == done_hist[L - 1],
                               "latency: y.valid is not exactly PIPELINE_LATENCY cycles after a group's last beat")
        with m.If(flowing & first_hist[H - 1] & fire_hist[L - 1:H].all()):
            chk(y.valid, "latency: a back-to-back group's result is late")

        # --- w_needs_x: double-buffered vectors ---------------------------------------------------
        xpos = Signal(range(S))
        vec_done = Signal()
        m.d.comb += vec_done.eq(x_fire & (xpos == S - 1))
        with m.If(x_fire):
            m.d.sync += xpos.eq(_step(xpos == S - 1, xpos + 1))
        wpass = Signal(range(G * K))
        pass_done = Signal()
        m.d.comb += pass_done.eq(w_fire & (wpass == G * K - 1))
        with m.If(w_fire):
            m.d.sync += wpass.eq(_step(wpass == G * K - 1, wpass + 1))
        vecs = Signal(range(4))
        m.d.sync += vecs.eq(vecs + vec_done - pass_done)
        chk(~w_fire | (vecs > 0), "w_needs_x: a w beat taken without a loaded vector")
        chk(vecs <= 2, "w_needs_x: more than two vectors held")
        chk(~((vecs == 2) & x.ready), "w_needs_x: x.ready while both vector buffers are full")

        # --- counters ---------------------------------------------------------------------------------
        my_w = Signal(COUNTER_BITS)
        with m.If(w_fire & (my_w != _MAX)):
            m.d.sync += my_w.eq(my_w + 1)
        chk(dut.mac_beats == my_w, "mac_beats: differs from the accepted w beats")
        for name in _COUNTERS:
            ctr = getattr(dut, name)
            prev = Signal(COUNTER_BITS, name=f"past_{name}")
            m.d.sync += prev.eq(ctr)
            with m.If(has_past):
                chk((ctr == prev) | (ctr == prev + 1), f"counters: {name} jumped or wrapped")
                chk((prev != _MAX) | (ctr == _MAX), f"counters: {name} left saturation")

        # --- internal: white-box invariants that make the properties above inductive -------------
        if iv is not None:
            full, rd, wr = iv["full"], iv["rd_sel"], iv["wr_sel"]
            chk(wpos == iv["j"], "internal: harness group position != j")
            chk(wpass == iv["g"] * K + iv["j"], "internal: harness pass position != g*k+j")
            chk(xpos == iv["wr_cnt"], "internal: harness vector position != wr_cnt")
            chk(vecs == full[0] + full[1], "internal: vectors held != full buffers")
            chk((full != 0) | (wr == rd),
                "internal: empty buffers but wr_sel != rd_sel")
            chk((full != 3) | (wr == rd), "internal: both buffers full but wr_sel != rd_sel")
            chk(~((full == 1) | (full == 2)) | (full.bit_select(rd, 1) & (wr != rd)),
                "internal: one full buffer that is not the read buffer")
            stages = [iv["s1_valid"] & iv["s1_last"], iv["s2_valid"] & iv["s2_last"],
                      iv["s3_valid"] & iv["s3_last"], y.valid]
            chk(owed == stages[0] + stages[1] + stages[2] + stages[3],
                "internal: groups owed != last beats in the pipeline")
            for i, sv in enumerate((iv["s1_valid"], iv["s2_valid"], iv["s3_valid"])):
                with m.If(quiet > i):
                    chk(~sv, f"internal: stage {i + 1} busy after {i + 1} quiet cycles")
            for i in range(L):
                with m.If(rdy_hist[:i + 1].all()):
                    chk(stages[i] == done_hist[i], f"internal: stage {i + 1} out of step with the w beats")

        # --- covers -------------------------------------------------------------------------------------
        m.d.comb += [Cover(y_fire), Cover(vecs == 2), Cover(py_valid & ~py_ready & y.valid)]
        return m


def _step(wrap, nxt):
    """``0`` when ``wrap``, else ``nxt`` (a modular counter step)."""
    return Mux(wrap, 0, nxt)


# --- deliberately broken variants: each must FAIL with a counterexample -----------------------------

class DropValidSpMxV(SpMxV):
    """Broken: ``y.valid`` falls without ``y.ready`` when a vector beat arrives during a stall."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.y.valid & ~self.y.ready & self.x.valid):
            m.d.sync += self.y.valid.eq(0)
        return m


class PayloadSlipSpMxV(SpMxV):
    """Broken: the output register's enable ignores back-pressure (``y.payload`` changes while
    ``y.valid & ~y.ready``), as if ``adv`` were dropped from its enable."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.y.valid & ~self.y.ready & self.w.valid):
            m.d.sync += self.y.payload[0].eq(~self.y.payload[0])
        return m


class PhantomSpMxV(SpMxV):
    """Broken: a result beat appears when a vector finishes loading, without any weight beat."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.x.valid & self.x.ready & ~self.y.valid):
            m.d.sync += self.y.valid.eq(1)
        return m


class WrapSpMxV(SpMxV):
    """Broken: ``mac_beats`` wraps at ``2**32`` instead of saturating (only k-induction reaches it)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.w.valid & self.w.ready):
            m.d.sync += self.mac_beats.eq(self.mac_beats + 1)
        return m


#: name -> (broken class, mode that finds it, property groups checked, expected failure message)
MUTANTS: dict[str, tuple[type, str, tuple[str, ...], str]] = {
    "drop-valid": (DropValidSpMxV, "bmc", PROPERTIES[:-1], "y_hold: y.valid fell"),
    "payload-slip": (PayloadSlipSpMxV, "bmc", PROPERTIES[:-1], "y_hold: y.payload changed"),
    "phantom": (PhantomSpMxV, "bmc", PROPERTIES[:-1], "y_no_phantom"),
    "wrap": (WrapSpMxV, "prove", ("mac_beats", "counters"), "counters: mac_beats"),
}

#: (pes, k) of the fast set; the full set adds P=2 k=2 and 4-row matrices
_FAST_SHAPES = [(1, 1), (2, 1), (1, 2)]


def formal_checks(full: bool = False) -> list[dict]:
    """Checks for :mod:`hwcosim.cosim.flow.formal` (see its docstring for the keys).

    Fast set (CI): k-induction of every property (black-box ones plus the ``internal``
    invariants that make them inductive) for three tiny shapes, a depth-20 BMC of one shape, a
    cover run and the broken variants. ``full`` adds P=2 k=2, 4-row matrices and BMC of every
    shape to depth 30.
    """
    out = []
    shapes = _FAST_SHAPES + ([(2, 2)] if full else [])
    for pes, k in shapes:
        for rows in ((2, 4) if full else (2,)):
            prm = formal_params(pes=pes, k=k, rows=rows if rows % pes == 0 else 2 * pes)
            tag = f"r{rows}p{pes}k{k}"
            out.append(dict(name=f"{tag}-prove", build=lambda prm=prm: SpMxVFormal(prm), mode="prove",
                            depth=k + PIPELINE_LATENCY + 1,
                            doc=f"every property, rows={prm.rows} P={pes} k={k}: k-induction (unbounded)"))
            if full or (pes, k) == (1, 1):
                depth = 30 if full else 20
                out.append(dict(name=f"{tag}-bmc", build=lambda prm=prm: SpMxVFormal(prm), mode="bmc",
                                depth=depth, doc=f"every property, rows={prm.rows} P={pes} k={k}: BMC"))
    prm = formal_params()
    out.append(dict(name="r2p1k1-cover", build=lambda: SpMxVFormal(prm), mode="cover", depth=12,
                    doc="reachable: a y beat, two vectors held, a y beat waiting"))
    for name, (cls, mode, props, msg) in MUTANTS.items():
        out.append(dict(name=f"mutant-{name}", build=lambda cls=cls, props=props: SpMxVFormal(prm, cls, props),
                        mode=mode, depth=12 if mode == "bmc" else 3, expect="fail", fails_with=msg,
                        doc="broken: " + " ".join((cls.__doc__ or "").split()).removeprefix("Broken: ")))
    return out

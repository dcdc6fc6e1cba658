"""The key that lets a netlist (or a formal verdict) be reused without elaborating the design again
(:mod:`hwcosim.cosim.flow.elabkey`): equal for equal constructions, different for anything that changes
the netlist (parameters, a patched module constant or function, the sources), absent for what it
cannot see; ``runner.to_verilog`` returns the same text from it, and the formal record skips an
unchanged harness by it."""

from __future__ import annotations

import warnings

import pytest
from amaranth import Elaboratable, Module, Signal
from hwcosim.cosim.flow import elabkey, formal, runner
from hwcosim.hdl.bbs import SpMxV
from hwcosim.models.bbs.spmxv import BBSParams

P = BBSParams(rows=8, cols=16, banks=4, k=2, pes=2)


def _key(design, *extra):
    """design_key of a design built only to be keyed (marked used: never elaborated here)."""
    k = elabkey.design_key(design, *extra)
    elabkey.mark_used(design)
    return k


def test_equal_constructions_equal_keys_and_parameters_change_them():
    k = _key(SpMxV(P), "top")
    assert k is not None and k == _key(SpMxV(P), "top")
    assert k != _key(SpMxV(BBSParams(rows=8, cols=16, banks=4, k=2, pes=4)), "top")
    assert k != _key(SpMxV(P), "other_top")


def test_patched_module_state_changes_the_key(monkeypatch):
    import hwcosim.hdl.bbs.board_csr as hb
    import hwcosim.hdl.bbs.spmxv as hs

    k = _key(SpMxV(P), "top")
    monkeypatch.setattr(hb, "OUTPUTS", (("y", 4),))               # a test's smaller FIFO
    assert _key(SpMxV(P), "top") != k
    monkeypatch.undo()
    assert _key(SpMxV(P), "top") == k
    import hwcosim.hdl.bbs.board as bb

    monkeypatch.setitem(bb.CTRL, "START", 64)                       # a table edited in place
    assert _key(SpMxV(P), "top") != k
    monkeypatch.undo()
    name = next(n for n, v in vars(hs).items() if isinstance(v, type) and v.__module__ == hs.__name__
                and any(callable(f) for f in vars(v).values()))
    cls = getattr(hs, name)
    meth = next(n for n, f in vars(cls).items() if callable(f) and not n.startswith("__"))
    monkeypatch.setattr(cls, meth, lambda self, *a, **kw: None)     # a method replaced
    assert _key(SpMxV(P), "top") != k


def test_the_dsp_target_is_in_the_key():
    """``dsp_target("ecp5")`` (a context variable) makes the same construction elaborate MULT18X18D
    primitives: another netlist, another key."""
    from hwcosim.hdl.common.dsp import dsp_target

    k = _key(SpMxV(P), "top")
    with dsp_target("ecp5"):
        assert _key(SpMxV(P), "top") != k
    assert _key(SpMxV(P), "top") == k


def test_what_else_a_process_imported_does_not_change_the_key():
    """Keys are compared across processes (the formal record, other test workers): importing a module
    outside the fixed list, which also becomes an attribute of its listed package, changes nothing."""
    import importlib
    import sys

    k = _key(SpMxV(P), "top")
    extra = [m for m in ("hwcosim.models.kvdirect.study", "hwcosim.models.kvdirect.mops") if m not in sys.modules]
    for m in extra:
        importlib.import_module(m)
    assert _key(SpMxV(P), "top") == k


def test_the_key_does_not_name_the_checkout_folder():
    """Amaranth objects record where they were created (absolute paths): a key holding them would differ
    between the checkout that wrote the formal record and a fresh clone (it did, and every harness was
    elaborated again); only paths-free state enters it."""
    import json
    import re

    c = next(c for c in formal.checks("bbs-lstm") if c.name == "mutant-wrap")
    for design in (SpMxV(P), c.build()):
        text = json.dumps(elabkey._canon(design, {}, [0]))
        elabkey.mark_used(design)
        assert not re.findall(r"'(/[^'\\]*)'", text)


def test_sources_are_in_the_key(monkeypatch):
    k = _key(SpMxV(P), "top")
    monkeypatch.setattr(elabkey, "source_digest", lambda: "another source tree")
    assert _key(SpMxV(P), "top") != k


class _Holds(Elaboratable):
    def __init__(self, thing):
        self.thing = thing
        self.o = Signal(4)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(3)
        return m


def test_what_it_cannot_see_gets_no_key():
    n = 3
    assert _key(_Holds(lambda: n)) is None                 # a closure
    assert _key(_Holds(object())) is None                  # an object of no known kind
    assert _key(_Holds((1, "a", range(4)))) is not None


def test_to_verilog_reuses_the_netlist_by_key(tmp_path, monkeypatch):
    from amaranth.back import rtlil, verilog

    monkeypatch.setenv("HWCOSIM_BUILD", str(tmp_path))
    first = runner.to_verilog(SpMxV(P), "bbs_spmxv")
    assert first == verilog.convert(SpMxV(P), name="bbs_spmxv", emit_src=False)
    assert len(list((tmp_path / "sim" / "verilog" / "by-design").glob("bbs_spmxv-*.v"))) == 1

    def no_elaboration(*a, **kw):
        raise AssertionError("elaborated although the key was known")

    monkeypatch.setattr(rtlil, "convert", no_elaboration)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the reused design counts as used: no UnusedElaboratable
        d = SpMxV(P)
        assert runner.to_verilog(d, "bbs_spmxv") == first
        del d
    other = SpMxV(BBSParams(rows=8, cols=16, banks=4, k=2, pes=4))
    with pytest.raises(AssertionError, match="elaborated"):   # another configuration is elaborated
        runner.to_verilog(other, "bbs_spmxv")
    elabkey.mark_used(other)


def test_formal_record_skips_an_unchanged_harness_by_its_key(monkeypatch):
    c = next(c for c in formal.checks("bbs-spmxv") if c.expect == "pass")
    fp = formal.fingerprint(c)
    key = formal.source_key(c)
    assert key is not None and key == formal.source_key(c)
    rec = {"checks": {c.id: {"ok": True, "fingerprint": fp, "source_key": key}}}
    assert formal.recorded(c, rec) is not None
    monkeypatch.setattr(formal, "harness_rtlil", lambda check: (_ for _ in ()).throw(AssertionError("elaborated")))
    assert formal.recorded(c, rec) is not None                      # by the key: no elaboration
    rec["checks"][c.id]["source_key"] = "0" * 64                    # another source state: the fingerprint decides
    with pytest.raises(AssertionError, match="elaborated"):
        formal.recorded(c, rec)
    monkeypatch.undo()
    assert formal.recorded(c, rec) is not None                      # the RTLIL is unchanged
    rec["checks"][c.id]["fingerprint"] = "1" * 64
    assert formal.recorded(c, rec) is None

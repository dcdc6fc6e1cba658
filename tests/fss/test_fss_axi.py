"""AXI top level of the FSS GEMM engine (design ``fss-axi``) under cocotbext-axi BFMs: weights over
AXI4-Stream into the on-chip store, activations in and results out over AXI4-Stream with idle and
back-pressure, AXI4-Lite control/status/errors/counters, SOFT_RESET and rst recovery. Every result
word is compared with :func:`hwcosim.models.fss.gemm.gemm`. Two engine configurations (two Verilator builds,
reused by every test), one run on Icarus."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hwcosim.hdl.fss.axi_top import WEIGHT_LEAD
from hwcosim.models.fss.gemm import CycleModel, FSSParams, pack_weight_beats

sys.path.insert(0, str(Path(__file__).parent))
from test_fss_gemm_sim import _case  # noqa: E402

# A: 96-bit weight beats (3 whole words), 2 x 2 PEs; B: r_h = 3, 120-bit beats (4 words, 8 bits
# unused), a single PE column
ENGINES = {
    "A": FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=32, max_cols=64),
    "B": FSSParams(region=(3, 4), n=5, pe_rows=2, pe_cols=1, max_rows=24, max_cols=24),
}
# (rows, cols, [T of each run]): a layer smaller than the maximum, several tiles per run
JOBS = {"A": (16, 48, [6, 4]), "B": (18, 24, [3, 2])}


def _job(name, seed=1):
    p = ENGINES[name]
    rows, cols, ts = JOBS[name]
    m, x = _case(p, rows, cols, sum(ts), seed)
    xs, lo = [], 0
    for t in ts:
        xs.append(x[:, lo:lo + t])
        lo += t
    return p, m, xs


def _run(name, testcase, tmp_path, **kw):
    from hwcosim.cosim.designs.fss.gemm import run_gemm_axi

    p, m, xs = _job(name, kw.pop("job_seed", 1))
    return p, run_gemm_axi(p, m.values, m.indices, xs, testcase=testcase, test_dir=tmp_path, **kw).metrics


def test_init_and_register_map():
    from hwcosim.cosim.registry import get_design
    from hwcosim.hdl.fss.axi_top import CTRL, ERROR, FSS_ID, REGS, STATUS, FSSAxiTop, config_words

    d = get_design("fss-axi")
    top = d.build(d.default_params())
    assert isinstance(top, FSSAxiTop) and d.top == "fss_axi"
    assert top.weight_words == 6 and top.store_beats == 1024  # PR4 N4: 16 lanes x 12 bits; 32 x 32 beats
    assert len(set(REGS.values())) == len(REGS) and all(v % 4 == 0 and v < 256 for v in REGS.values())
    for bits in (CTRL, STATUS, ERROR):
        assert sorted(bits.values()) == [1 << i for i in range(len(bits))]
    assert config_words(ENGINES["A"]) == {"CONFIG0": 2 | 8 << 8 | 4 << 16 | 2 << 24,
                                          "CONFIG1": 2 | 8 << 8 | 16 << 16 | 16 << 24,
                                          "CONFIG2": 8 | 8 << 16, "ID": FSS_ID}
    with pytest.raises(TypeError, match="FSSParams"):
        FSSAxiTop(object())


def test_wrong_params():
    from hwcosim.hdl.fss.axi_top import FSSAxiTop

    with pytest.raises(ValueError, match="pe_cols must fit the 8-bit CONFIG field, not 256"):
        FSSAxiTop(FSSParams(pe_cols=256))
    with pytest.raises(ValueError, match="max_k_regions must fit the 16-bit CONFIG2 field"):
        FSSAxiTop(FSSParams(region=(1, 2), n=1, max_cols=2 * 65536))


@pytest.mark.parametrize("name", list(ENGINES))
def test_pack_axi_weight_words(name):
    """32-bit words, least significant first, reassemble to the engine's weight beats."""
    from hwcosim.cosim.designs.fss.gemm import pack_axi_weight_words

    p, m, _ = _job(name)
    words = pack_axi_weight_words(p, m.values, m.indices)
    beats = pack_weight_beats(p, m.values, m.indices)
    nw = -(-p.weight_beat_bits // 32)
    assert len(words) == len(beats) * nw and all(0 <= w < 1 << 32 for w in words)
    again = [sum(words[b * nw + i] << (32 * i) for i in range(nw)) for b in range(len(beats))]
    assert again == beats


@pytest.mark.sim
@pytest.mark.parametrize("p_in,p_out", [(0.0, 0.0), (0.3, 0.5)])
@pytest.mark.parametrize("name", list(ENGINES))
def test_axi_fss_golden(tmp_path, name, p_in, p_out):
    p, mt = _run(name, "axi_fss_golden", tmp_path, p_pause_in=p_in, p_pause_out=p_out, seed=3)
    rows, cols, ts = JOBS[name]
    assert mt["mismatches"] == 0 and mt["err_start_unloaded"] == 1 and len(mt["runs"]) == len(ts)
    model = CycleModel(p, weight_lead=WEIGHT_LEAD)
    for r, t in zip(mt["runs"], ts):
        assert r["words_compared"] == rows * t and r["mac_beats"] == model.weight_beats(rows, cols, t)
        if p_in == p_out == 0:
            # no stage added, weights read ahead: the engine's cycle model holds behind the AXI interfaces
            assert r["run_cycles"] == r["cycles"] == model.expected(rows, cols, t), r
            assert r["stall_out"] == r["starve_w"] == 0
        else:
            assert r["stall_out"] > 0 and r["cycles"] > model.expected(rows, cols, t), r


@pytest.mark.sim
def test_axi_fss_errors(tmp_path):
    _, mt = _run("A", "axi_fss_errors", tmp_path, p_pause_in=0.2, p_pause_out=0.3, seed=5)
    assert mt["mismatches"] == 0 and mt["errors"]["slverr_error"] == 16


@pytest.mark.sim
def test_axi_fss_long_stall(tmp_path):
    p, mt = _run("B", "axi_fss_long_stall", tmp_path, p_pause_in=0.2, seed=7)
    assert mt["mismatches"] == 0 and mt["after"]["STALL_OUT"] - mt["before"]["STALL_OUT"] >= 5000
    assert mt["final"]["MAC_BEATS"] == CycleModel(p).weight_beats(18, 24, 3)


@pytest.mark.sim
@pytest.mark.parametrize("name", list(ENGINES))
def test_axi_fss_resets(tmp_path, name):
    _, mt = _run(name, "axi_fss_resets", tmp_path, p_pause_in=0.3, p_pause_out=0.3, seed=11)
    assert mt["mismatches"] == 0
    assert set(mt["resets"]) == {f"{k} during {ph}" for k in ("soft_reset", "rst") for ph in ("load", "run")}


@pytest.mark.sim
def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    """The comparison is real: corrupt one expected word of the second run and the run must fail."""
    import hwcosim.cosim.designs.fss.gemm as cf
    from hwcosim.cosim.flow.runner import SimFailure

    real = cf.gemm
    calls = []

    def off_by_one(*a, **k):
        y = real(*a, **k).copy()
        calls.append(1)
        if len(calls) == 2:
            y[5, 1] += 1
        return y

    monkeypatch.setattr(cf, "gemm", off_by_one)
    with pytest.raises(SimFailure, match=r"run 1: 1 of 64 result words differ; \(row, col, rtl, golden\): \[\(5, 1,"):
        _run("A", "axi_fss_golden", tmp_path)


@pytest.mark.sim
@pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None,
                    reason="Icarus Verilog (iverilog) is not installed")
def test_axi_fss_on_icarus(tmp_path):
    _, mt = _run("A", "axi_fss_golden", tmp_path, p_pause_in=0.3, p_pause_out=0.5, seed=3, sim="icarus")
    assert mt["mismatches"] == 0 and np.all([r["words_compared"] > 0 for r in mt["runs"]])


@pytest.mark.sim
def test_axi_fss_ecp5_dsp_netlist(tmp_path):
    """The netlist ``hwcosim build`` makes for an ECP5 part (every product in a MULT18X18D output
    register, bypass-hit and weight copies in TRELLIS_FF cells, simulated with hdl.common.dsp's
    models of both): SOFT_RESET / rst in the middle of a load
    and of a run, under idle and back-pressure, then a full load and run bit-exact (neither the DSP
    registers nor the reset-less datapath registers are cleared by the engine's reset; the valid
    pipeline that is cleared must keep their stale words out); then a one-region-column layer, whose
    tiles are read in the cycle after their last activation beat is written (the bypass)."""
    testcase = "axi_fss_resets"
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.hdl.common.dsp import dsp_target
    from hwcosim.hdl.fss.axi_top import FSSAxiTop

    p = ENGINES["A"]
    with dsp_target("ecp5"):
        v = to_verilog(FSSAxiTop(p), "fss_axi")
        assert v.count("MULT18X18D #(") == p.pe_rows * p.pe_cols * p.n
        # a bypass-hit copy per buffer bank, a weight copy per multiplier
        assert v.count("TRELLIS_FF #(") == p.pe_cols * p.r_w + p.multipliers * p.weight_fmt.width
        _, mt = _run("A", testcase, tmp_path, p_pause_in=0.3, p_pause_out=0.3, seed=5)
        assert mt["mismatches"] == 0
        # one region column and one row group: each tile is read in the cycle after its activation
        # beat is written, through the bypass-hit copies (a copy stuck at 0 fails this run)
        from hwcosim.cosim.designs.fss.gemm import run_gemm_axi

        m, x = _case(p, p.rows_per_group, p.r_w, 12, seed=11)
        mt = run_gemm_axi(p, m.values, m.indices, [x[:, :8], x[:, 8:]], testcase="axi_fss_golden",
                          test_dir=tmp_path / "one_column").metrics
    assert mt["mismatches"] == 0 and sum(r["words_compared"] for r in mt["runs"]) == p.rows_per_group * 12, mt

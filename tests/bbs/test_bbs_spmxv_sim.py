"""RTL simulation of the BBS SpMxV engine vs the golden model, every output word compared."""

import dataclasses
import json

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.bbs.spmxv import BBSParams, CycleModel
from hwcosim.models.fixedpoint import Q
from hwcosim.pruning.formats.csb import encode

pytestmark = pytest.mark.sim


def _case(rows, cols, banks, pes, sparsity, n_vec, seed, wfmt=Q(2, 6)):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.6, size=(rows, cols))
    m = encode(w, banks, sparsity, fmt=wfmt)
    p = BBSParams(rows=rows, cols=cols, banks=banks, k=m.k, pes=pes, weight_fmt=m.fmt)
    # full-range vectors, including the extremes, so saturation and rounding are exercised
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n_vec, cols))
    xs[0, :4] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw, 0, -1]
    return p, m, xs


def _report(tmp_path, name, p, metrics):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    rec = {"case": name, **p.to_dict(), **metrics}
    (out / f"bbs_spmxv_{name}.json").write_text(json.dumps(rec, indent=1))
    print(f"\n{name}: P={p.pes} B={p.banks} k={p.k} cycles={metrics['cycles']} ideal={metrics['ideal']} "
          f"expected={metrics['expected']} utilisation={metrics['utilisation']:.3f}")


CONFIGS = [
    # rows, cols, banks, pes, sparsity
    (16, 32, 4, 4, 0.5),
    (32, 64, 8, 2, 0.75),
    (24, 48, 2, 8, 0.875),
    (32, 128, 16, 4, 0.875),
    (8, 16, 4, 1, 0.0),
]


@pytest.mark.parametrize("rows,cols,banks,pes,sparsity", CONFIGS)
def test_spmxv_no_stalls_hits_cycle_model(tmp_path, rows, cols, banks, pes, sparsity):
    p, m, xs = _case(rows, cols, banks, pes, sparsity, n_vec=3, seed=rows + banks)
    res = run_spmxv(p, m.values, m.indices, xs, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0
    # streams that never stall: the RTL meets the cycle model exactly
    assert mt["cycles"] == CycleModel(p).expected(3), mt
    assert mt["dut_cycles"] == mt["cycles"]
    assert mt["dut_stall_out"] == 0 and mt["dut_starve_w"] == 0
    _report(tmp_path, f"P{pes}B{banks}s{sparsity}", p, mt)


@pytest.mark.parametrize("p_idle,p_stall", [(0.3, 0.0), (0.0, 0.5), (0.4, 0.6)])
@pytest.mark.parametrize("rows,cols,banks,pes,sparsity", CONFIGS[:4])
def test_spmxv_with_idle_and_backpressure(tmp_path, rows, cols, banks, pes, sparsity, p_idle, p_stall):
    p, m, xs = _case(rows, cols, banks, pes, sparsity, n_vec=4, seed=7 * rows + pes)
    res = run_spmxv(p, m.values, m.indices, xs, p_idle_w=p_idle, p_idle_x=p_idle, p_stall=p_stall,
                    seed=int(100 * p_idle + 10 * p_stall), test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0
    assert res.metrics["cycles"] >= CycleModel(p).ideal(4)
    if p_stall:
        assert res.metrics["dut_stall_out"] > 0


def test_spmxv_saturates_and_rounds_like_the_model(tmp_path):
    """A narrow output format forces saturation on most rows; the RTL must clip identically."""
    rng = np.random.default_rng(3)
    w = rng.normal(0, 1.0, size=(8, 32))
    m = encode(w, 4, 0.5, fmt=Q(2, 6))
    p = BBSParams(rows=8, cols=32, banks=4, k=m.k, pes=2, weight_fmt=m.fmt, out_fmt=Q(3, 2))
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(2, 32))
    res = run_spmxv(p, m.values, m.indices, xs, p_stall=0.3, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0


def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    """The comparison is real: corrupt one expected word and the run must fail."""
    import hwcosim.cosim.designs.bbs.spmxv as cb

    p, m, xs = _case(16, 32, 4, 4, 0.5, n_vec=1, seed=5)
    real = cb.spmxv

    def off_by_one(*a, **k):
        y = real(*a, **k).copy()
        y[0, 5] += 1
        return y

    monkeypatch.setattr(cb, "spmxv", off_by_one)
    with pytest.raises(SimFailure, match="1 of 16 result words differ"):
        run_spmxv(p, m.values, m.indices, xs, test_dir=tmp_path)


@pytest.mark.sim
@pytest.mark.parametrize("stages", [("out_stage",), ("mul_stage",), ("out_stage", "mul_stage")])
@pytest.mark.parametrize("p_idle,p_stall", [(0.0, 0.0), (0.3, 0.5)])
def test_pipeline_stages_are_bit_exact_and_one_cycle_each(tmp_path, p_idle, p_stall, stages):
    """out_stage registers the sum before requantising, mul_stage the products a second time (for the
    clock): the same words, one cycle of latency each."""
    import dataclasses

    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.models.fixedpoint import quantize
    from hwcosim.pruning.formats.csb import encode

    rng = np.random.default_rng(11)
    m = encode(rng.normal(0, 0.5, size=(32, 64)), 8, 0.75)
    base = BBSParams(rows=32, cols=64, banks=8, k=m.k, pes=4, weight_fmt=m.fmt)
    p = dataclasses.replace(base, **{name: True for name in stages})
    assert p.latency == base.latency + len(stages)
    xs = quantize(rng.uniform(-1, 1, size=(3, 64)), p.vec_fmt)
    res = run_spmxv(p, m.values, m.indices, xs, p_idle_w=p_idle, p_idle_x=p_idle, p_stall=p_stall,
                    seed=5, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0
    if p_idle == 0.0 and p_stall == 0.0:
        assert res.metrics["cycles"] == CycleModel(p).expected(3) == CycleModel(base).expected(3) + len(stages)


def test_spmxv_ecp5_dsp_netlist_bit_exact_under_stalls(tmp_path):
    """The netlist ``hwcosim build`` makes for an ECP5 part (every product in a MULT18X18D output
    register, simulated with hdl.common.dsp's model of it) against the golden model, stalls on both
    streams and the output."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.hdl.bbs import SpMxV
    from hwcosim.hdl.common.dsp import dsp_target

    p, m, xs = _case(16, 32, 4, 4, 0.5, n_vec=3, seed=7)
    p = dataclasses.replace(p, mul_stage=True)        # the products in the DSP block's register
    with dsp_target("ecp5"):
        assert to_verilog(SpMxV(p), "bbs_spmxv").count("MULT18X18D #(") == p.pes * p.banks
        res = run_spmxv(p, m.values, m.indices, xs, p_idle_w=0.3, p_idle_x=0.2, p_stall=0.5, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0

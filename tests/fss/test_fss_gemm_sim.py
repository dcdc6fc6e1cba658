"""RTL simulation of the FSS sparse GEMM engine vs the golden model, every output word compared."""

import json

import numpy as np
import pytest
from hwcosim.cosim.designs.fss.gemm import run_gemm
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.fss.gemm import CycleModel, FSSParams
from hwcosim.pruning.formats.fss import encode

pytestmark = pytest.mark.sim

# (name, params): a few engine configurations (each one Verilator build, reused by every test)
ENGINES = {
    "fss2x8n4_pe2x2": FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=32, max_cols=64),
    "fss4x4n2_pe1x3": FSSParams(region=(4, 4), n=2, pe_rows=1, pe_cols=3, max_rows=16, max_cols=32),
    "fss3x4n5_pe2x1": FSSParams(region=(3, 4), n=5, pe_rows=2, pe_cols=1, max_rows=24, max_cols=24),
    "nm2of8_pe2x2": FSSParams(region=(1, 8), n=2, pe_rows=2, pe_cols=2, max_rows=16, max_cols=32),
    "dense1x4_pe2x2": FSSParams(region=(1, 4), n=4, pe_rows=2, pe_cols=2, max_rows=16, max_cols=32),
}


def _case(p, rows, cols, t, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.6, size=(rows, cols))
    m = encode(w, p.region, n=p.n, fmt=p.weight_fmt)
    # full-range activations including the extremes, so rounding and saturation are exercised
    x = rng.integers(p.act_fmt.min_raw, p.act_fmt.max_raw + 1, size=(cols, t))
    x[:4, 0] = [p.act_fmt.min_raw, p.act_fmt.max_raw, 0, -1]
    return m, x


def _report(tmp_path, name, p, metrics):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"fss_gemm_{name}.json").write_text(json.dumps({"case": name, **p.to_dict(), **metrics}, indent=1))
    print(f"\n{name}: cycles={metrics['cycles']} ideal={metrics['ideal']} expected={metrics['expected']} "
          f"utilisation={metrics['utilisation']:.3f}")


@pytest.mark.parametrize("name", list(ENGINES))
def test_gemm_no_stalls_hits_cycle_model(tmp_path, name):
    p = ENGINES[name]
    rows, cols, t = p.max_rows, p.max_cols // 2, 3 * p.pe_cols
    m, x = _case(p, rows, cols, t, seed=len(name))
    res = run_gemm(p, m.values, m.indices, x, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["words_compared"] == rows * t
    assert mt["cycles"] == CycleModel(p).expected(rows, cols, t), mt  # exact when nothing stalls
    assert mt["dut_cycles"] == mt["cycles"]
    assert mt["dut_stall_out"] == 0 and mt["dut_starve_w"] == 0
    _report(tmp_path, name, p, mt)


_TRAFFIC = [(0.3, 0.0), (0.0, 0.5), (0.4, 0.6)]
_FSS_ENGINES = ("fss2x8n4_pe2x2", "fss4x4n2_pe1x3", "fss3x4n5_pe2x1")


# every FSS engine under each pattern; the N:M and dense engines (no index bits in the dense one)
# under the combined idle + back-pressure pattern only, to keep the run cheap
@pytest.mark.parametrize("name,p_idle,p_stall", [(n, i, s) for n in _FSS_ENGINES for i, s in _TRAFFIC]
                         + [("nm2of8_pe2x2", 0.4, 0.6), ("dense1x4_pe2x2", 0.4, 0.6)])
def test_gemm_with_idle_and_backpressure(tmp_path, name, p_idle, p_stall):
    p = ENGINES[name]
    # 4 row groups x 2 tiles = 8 result beats: refusing each with p_stall leaves none refused
    # with probability p_stall ** -8 at most 1/256 (2 row groups left 1/16, and one seed hit it)
    rows, cols, t = p.rows_per_group * 4, p.max_cols, 2 * p.pe_cols
    m, x = _case(p, rows, cols, t, seed=int(100 * p_idle + 10 * p_stall))
    res = run_gemm(p, m.values, m.indices, x, p_idle_w=p_idle, p_idle_x=p_idle, p_stall=p_stall,
                   seed=int(100 * p_idle + 10 * p_stall) + 1, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0
    assert res.metrics["cycles"] >= CycleModel(p).ideal(rows, cols, t)
    if p_stall:
        assert res.metrics["dut_stall_out"] > 0


def test_one_build_runs_several_layer_shapes(tmp_path):
    """The layer shape is a run-time setting: the smallest and a non-square shape on one engine."""
    p = ENGINES["fss2x8n4_pe2x2"]
    for i, (rows, cols, t) in enumerate([(4, 8, 2), (28, 40, 4)]):
        m, x = _case(p, rows, cols, t, seed=40 + i)
        res = run_gemm(p, m.values, m.indices, x, p_stall=0.2, test_dir=tmp_path / f"s{i}")
        assert res.metrics["mismatches"] == 0


def test_gemm_saturates_like_the_model(tmp_path):
    """Extreme weights and activations drive most results into saturation; the RTL clips alike."""
    p = ENGINES["fss4x4n2_pe1x3"]
    rng = np.random.default_rng(9)
    m, _ = _case(p, 8, 32, 3, seed=9)
    values = np.where(rng.random(m.values.shape) < 0.5, p.weight_fmt.min_raw, p.weight_fmt.max_raw)
    x = np.where(rng.random((32, 3)) < 0.5, p.act_fmt.min_raw, p.act_fmt.max_raw)
    res = run_gemm(p, values, m.indices, x, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0


def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    """The comparison is real: corrupt one expected word and the run must fail."""
    import hwcosim.cosim.designs.fss.gemm as cf

    p = ENGINES["fss2x8n4_pe2x2"]
    m, x = _case(p, 8, 16, 2, seed=5)
    real = cf.gemm

    def off_by_one(*a, **k):
        y = real(*a, **k).copy()
        y[5, 1] += 1
        return y

    monkeypatch.setattr(cf, "gemm", off_by_one)
    with pytest.raises(SimFailure, match=r"1 of 16 result words differ; \(row, col, rtl, golden\): \[\(5, 1,"):
        run_gemm(p, m.values, m.indices, x, test_dir=tmp_path)


@pytest.mark.parametrize("p_idle,p_stall", [(0.0, 0.0), (0.4, 0.6)])
def test_region_width_not_a_power_of_two(tmp_path, p_idle, p_stall):
    """r_w = 3: the operand select indexes all r_h * r_w positions (not the index's low bits); bit-exact,
    and cycle-exact with the model when nothing stalls."""
    p = FSSParams(region=(2, 3), n=4, pe_rows=2, pe_cols=2, max_rows=16, max_cols=24)
    rows, cols, t = p.max_rows, p.max_cols, 2 * p.pe_cols
    m, x = _case(p, rows, cols, t, seed=7)
    res = run_gemm(p, m.values, m.indices, x, p_idle_w=p_idle, p_idle_x=p_idle, p_stall=p_stall, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["words_compared"] == rows * t
    if p_idle == 0.0 and p_stall == 0.0:
        assert mt["cycles"] == CycleModel(p).expected(rows, cols, t), mt

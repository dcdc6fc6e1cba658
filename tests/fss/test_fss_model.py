"""Unit tests of the FSS GEMM golden model, stream packing, cycle and HBM models (no simulator)."""

import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q, dequantize, quantize, requantize
from hwcosim.models.fss.gemm import (
    HBM,
    U280_HBM,
    CycleModel,
    FSSParams,
    gemm,
    gemm_float,
    layer_performance,
    pack_act_beats,
    pack_weight_beats,
    pad_layer,
    regions_to_dense,
    unpack_output_beats,
)
from hwcosim.pruning.formats.fss import encode


def _case(p, rows=16, cols=32, t=4, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.5, size=(rows, cols))
    m = encode(w, p.region, n=p.n, fmt=p.weight_fmt)
    x = rng.integers(p.act_fmt.min_raw, p.act_fmt.max_raw + 1, size=(cols, t))
    return m, x


def test_init_and_derived_sizes():
    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=3, max_rows=32, max_cols=64)
    assert p.index_bits == 4 and p.lane_width == 12 and p.multipliers == 24
    assert p.rows_per_group == 4 and p.max_k_regions == 8 and p.sparsity == 0.75
    assert FSSParams.from_dict(p.to_dict()) == p
    d = FSSParams(region=(1, 4), n=4, max_rows=8, max_cols=8)
    assert d.dense and d.index_bits == 0 and d.lane_width == 8


@pytest.mark.parametrize("kw,match", [
    ({"region": (1, 1)}, "1x1"), ({"n": 17}, "exceeds the region size"), ({"pe_rows": 0}, "pe_rows"),
    ({"max_cols": 60}, "multiple of the region width"), ({"max_rows": 30}, "multiple of r_h"),
    ({"region": (2,)}, "pair"), ({"n": 2.0}, "positive integer"), ({"out_fmt": "Q8.8"}, "fixedpoint.Q"),
])
def test_wrong_params_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        FSSParams(**kw)


def test_golden_equals_independent_dense_reference():
    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=32, max_cols=64)
    m, x = _case(p)
    want = requantize(m.to_dense_raw() @ x, p.acc_frac, p.out_fmt)  # pruning's decoder: another path
    assert np.array_equal(gemm(p, m.values, m.indices, x), want)
    assert np.array_equal(regions_to_dense(m.values, m.indices, p.region), m.to_dense_raw())


def test_error_vs_float_is_bounded_by_output_rounding():
    p = FSSParams(region=(4, 4), n=2, pe_rows=1, pe_cols=2, max_rows=16, max_cols=32)
    rng = np.random.default_rng(1)
    m, _ = _case(p, cols=32, seed=1)
    xf = rng.uniform(-1, 1, size=(32, 4))
    x = quantize(xf, p.act_fmt)
    y = dequantize(gemm(p, m.values, m.indices, x), p.out_fmt)
    ref = gemm_float(m.to_dense(), dequantize(x, p.act_fmt))
    assert np.abs(y - ref).max() <= p.out_fmt.lsb / 2 + 1e-12


def test_golden_saturates():
    p = FSSParams(region=(1, 4), n=2, pe_rows=1, pe_cols=1, max_rows=4, max_cols=64, out_fmt=Q(3, 2))
    v = np.full((4, 16, 2), p.weight_fmt.max_raw)
    i = np.tile([0, 3], (4, 16, 1))
    x = np.full((64, 1), p.act_fmt.max_raw)
    assert (gemm(p, v, i, x) == p.out_fmt.max_raw).all()
    assert (gemm(p, -v, i, x) == p.out_fmt.min_raw).all()


def test_wrong_inputs_are_refused():
    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=32, max_cols=64)
    m, x = _case(p)
    with pytest.raises(ValueError, match="increase strictly"):
        gemm(p, m.values, m.indices[..., ::-1], x)
    with pytest.raises(ValueError, match="activations must have shape"):
        gemm(p, m.values, m.indices, x[:-1])
    with pytest.raises(ValueError, match="fill tiles"):
        gemm(p, m.values, m.indices, x[:, :3])
    with pytest.raises(ValueError, match="exceeds the engine"):
        FSSParams(region=(2, 8), n=4, max_rows=16, max_cols=16).check_shape(16, 32)


def test_packing_round_trip_and_layout():
    p = FSSParams(region=(2, 4), n=3, pe_rows=2, pe_cols=2, max_rows=16, max_cols=16)
    m, x = _case(p, rows=8, cols=16, t=4, seed=3)
    words = pack_weight_beats(p, m.values, m.indices)
    assert len(words) == (8 // 4) * (16 // 4)
    # beat 1 = row group 0, region column 1; lane a*N+j = slot j of region (a, 1)
    lw = p.lane_width
    for a in range(2):
        for j in range(3):
            lane = (words[1] >> ((a * 3 + j) * lw)) & ((1 << lw) - 1)
            v = lane & 0xFF
            v = v - 256 if v >> 7 else v
            assert v == m.values[a, 1, j] and lane >> 8 == m.indices[a, 1, j]
    aw = pack_act_beats(p, x)
    assert len(aw) == 2 * 4  # tiles x region columns
    # beat (tau=1, c=2), element t*r_w+b = X[2*4+b, 1*2+t]
    e = (aw[1 * 4 + 2] >> ((1 * 4 + 3) * 16)) & 0xFFFF
    assert (e - 65536 if e >> 15 else e) == x[11, 3]
    # outputs: build words from a known Y and unpack
    y = np.arange(8 * 4).reshape(8, 4) - 16
    lanes = y.reshape(2, 4, 2, 2).transpose(2, 0, 1, 3).reshape(4, 8)  # (tau, g) x (row, t)
    words = [sum((int(v) & 0xFFFF) << (16 * i) for i, v in enumerate(row)) for row in lanes]
    assert np.array_equal(unpack_output_beats(p, words, 8, 4), y)


def test_cycle_model():
    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=64, max_cols=64)
    cm = CycleModel(p)
    assert cm.ideal(32, 64, 6) == 3 * 8 * 8
    assert cm.expected(32, 64, 6) == 8 + 3 * 64 + 9  # first tile load + compute + the 9-cycle pipeline
    # a first weight beat two cycles late (the AXI top's replay) hides behind a tile load of 2+ beats
    lead = CycleModel(p, weight_lead=2)
    assert lead.expected(32, 64, 6) == cm.expected(32, 64, 6)
    assert lead.expected(32, 16, 6) == cm.expected(32, 16, 6)
    assert lead.expected(32, 8, 6) == cm.expected(32, 8, 6) + 1 == 2 + 2 * 8 + 8 + 9
    # ideal = nonzero MACs / multipliers exactly
    assert cm.macs(32, 64, 6) == cm.ideal(32, 64, 6) * p.multipliers
    dense = FSSParams(region=(1, 4), n=4, pe_rows=2, pe_cols=2, max_rows=64, max_cols=64)
    assert CycleModel(dense).ideal(32, 64, 6) == 4 * cm.ideal(32, 64, 6)  # 75% sparse: 4x fewer


def test_pad_layer():
    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=3, max_rows=64, max_cols=64)
    w, x = pad_layer(p, np.ones((10, 20)), np.ones((20, 5)))
    assert w.shape == (12, 24) and x.shape == (24, 6)
    assert w[10:].sum() == 0 and x[:, 5:].sum() == 0


def test_hbm_roofline_bounds():
    assert U280_HBM.bytes_per_s == pytest.approx(460e9)
    p = FSSParams(region=(2, 8), n=4, pe_rows=16, pe_cols=16, max_rows=4096, max_cols=4096)
    # batch 16 = one column tile: weights are streamed once, every weight feeds only 16 MACs
    small = layer_performance(p, 4096, 4096, 16)
    big = layer_performance(p, 4096, 4096, 16, hbm=HBM(channels=1, gbps_per_channel=14.375))
    assert big["t_memory_s"] == pytest.approx(32 * small["t_memory_s"])
    assert big["bound"] == "memory"
    assert small["t_compute_s"] == pytest.approx(CycleModel(p).ideal(4096, 4096, 16) / 250e6)
    with pytest.raises(ValueError, match="bandwidth"):
        HBM(gbps_per_channel=0)


def test_hbm_weight_modes():
    """Streamed weights cross HBM once per column tile, resident weights once per layer."""
    p = FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=2, max_rows=64, max_cols=64)
    s = layer_performance(p, 64, 64, 8, weights="stream")
    r = layer_performance(p, 64, 64, 8, weights="resident")
    w = 64 * 64 // 16 * 4 * 12 / 8
    assert s["weight_bytes"] == 4 * w and r["weight_bytes"] == w  # T = 8 is 4 tiles of 2
    assert s["bytes"] - r["bytes"] == 3 * w and s["cycles"] == r["cycles"]
    assert s["macs_per_byte"] < r["macs_per_byte"]
    with pytest.raises(ValueError, match="weights must be one of stream, resident"):
        layer_performance(p, 64, 64, 8, weights="cached")


def test_gemm_compiled_path_equals_the_dense_product():
    """Above the size threshold gemm() uses the compiled integer COO product: identical words."""
    from hwcosim.models.fss import gemm as g

    p = g.FSSParams(max_rows=256, max_cols=512)
    rng = np.random.default_rng(5)
    rows, cols, T = 256, 512, 2 * p.pe_cols
    gr, gc, n = rows // p.r_h, cols // p.r_w, p.n
    idx = np.sort(np.argsort(rng.random((gr, gc, p.region_size)), axis=-1)[..., :n], axis=-1)
    val = rng.integers(p.weight_fmt.min_raw, p.weight_fmt.max_raw + 1, (gr, gc, n))
    x = rng.integers(p.act_fmt.min_raw, p.act_fmt.max_raw + 1, (cols, T))
    want = g.requantize(g.regions_to_dense(val, idx, p.region) @ x, p.acc_frac, p.out_fmt)
    old = g._COMPILED_FROM
    try:
        g._COMPILED_FROM = 0
        np.testing.assert_array_equal(g.gemm(p, val, idx, x), want)
    finally:
        g._COMPILED_FROM = old

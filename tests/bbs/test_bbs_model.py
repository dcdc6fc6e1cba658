import numpy as np
import pytest
from hwcosim.models.bbs.spmxv import (
    BBSParams,
    CycleModel,
    pack_vector_beats,
    pack_weight_beats,
    spmxv,
    spmxv_float,
    unpack_output_beats,
)
from hwcosim.models.fixedpoint import Q, dequantize, quantize, requantize
from hwcosim.pruning.formats.csb import encode


def _setup(rows=16, cols=64, banks=4, pes=4, sparsity=0.75, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.5, size=(rows, cols))
    m = encode(w, banks, sparsity, fmt=Q(2, 6))
    p = BBSParams(rows=rows, cols=cols, banks=banks, k=m.k, pes=pes, weight_fmt=m.fmt)
    return p, m, rng


def test_golden_equals_dense_integer_reference():
    p, m, rng = _setup()
    x = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(5, p.cols))
    acc = x @ m.to_dense_raw().T  # exact integer dense product, an independent path
    want = requantize(acc, p.acc_frac, p.out_fmt)
    assert np.array_equal(spmxv(p, m.values, m.indices, x), want)
    assert np.array_equal(spmxv(p, m.values, m.indices, x[0]), want[0])


def test_error_vs_float_is_bounded_by_quantisation():
    p, m, rng = _setup(seed=1)
    xf = rng.uniform(-1, 1, size=(4, p.cols))
    x = quantize(xf, p.vec_fmt)
    y = dequantize(spmxv(p, m.values, m.indices, x), p.out_fmt)
    ref = spmxv_float(m.to_dense(), dequantize(x, p.vec_fmt))
    assert np.abs(y - ref).max() <= p.out_fmt.lsb / 2 + 1e-12


def test_packing_roundtrip_and_layout():
    p, m, rng = _setup(rows=8, cols=16, banks=2, pes=2, sparsity=0.5)
    words = pack_weight_beats(p, m.values, m.indices)
    assert len(words) == p.row_groups * p.k
    lw = p.lane_width
    # beat (g=0, j=1), lane (pe=1, b=0) is row 1 slot 1 bank 0
    lane = (words[1] >> ((1 * p.banks + 0) * lw)) & ((1 << lw) - 1)
    assert lane >> p.weight_fmt.width == m.indices[1, 1, 0]
    assert (lane & 0xFF) == (m.values[1, 1, 0] & 0xFF)
    x = rng.integers(-100, 100, size=p.cols)
    vw = pack_vector_beats(p, x)
    assert (vw[3] >> p.vec_fmt.width) & 0xFFFF == x[p.bank_size + 3] & 0xFFFF
    y = np.array([-3, 5, 7, -32768])
    ow = p.out_fmt.width
    words_out = [(y[0] & 0xFFFF) | ((y[1] & 0xFFFF) << ow), (y[2] & 0xFFFF) | ((y[3] & 0xFFFF) << ow)]
    assert unpack_output_beats(p, words_out).tolist() == y.tolist()


def test_cycle_model():
    p, _, _ = _setup(rows=64, cols=128, banks=8, pes=8, sparsity=0.875)
    cm = CycleModel(p)
    assert cm.ideal(2) == 2 * 8 * 2
    assert cm.utilisation(cm.ideal(2), 2) == pytest.approx(1.0)


@pytest.mark.parametrize("kw,match", [
    (dict(rows=10, cols=16, banks=4, k=2, pes=4), "do not split over 4 PEs"),
    (dict(rows=8, cols=18, banks=4, k=2, pes=4), "do not split into 4 equal banks"),
    (dict(rows=8, cols=16, banks=4, k=5, pes=4), "exceeds the bank size"),
    (dict(rows=8, cols=16, banks=16, k=1, pes=4), "too small"),
    (dict(rows=0, cols=16, banks=4, k=1, pes=4), "positive integer"),
])
def test_wrong_params(kw, match):
    with pytest.raises(ValueError, match=match):
        BBSParams(**kw)


def test_golden_refuses_mismatched_inputs():
    p, m, _ = _setup()
    with pytest.raises(ValueError, match="does not match"):
        spmxv(p, m.values, m.indices, np.zeros(p.cols + 1, dtype=np.int64))
    with pytest.raises(ValueError, match="exceed the vector format"):
        spmxv(p, m.values, m.indices, np.full(p.cols, 1 << 20))

"""Golden model of the BBS LSTM delta (temporal-sparsity) mode: selection rule, exactness at
theta = 0, the memory invariant M = W vhat, float reference, cycle model (fast; no simulator)."""

import numpy as np
import pytest
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, column_perm, lstm_float, lstm_golden, prepare_weights
from hwcosim.models.bbs.lstm_delta import (
    DeltaCycleModel,
    _exact_spmxv,
    beat_skip_fraction,
    check_budget,
    delta_fmt,
    lstm_delta_float,
    lstm_delta_golden,
    mem_bits,
    select_columns,
)
from hwcosim.models.fixedpoint import Q, dequantize, quantize


def _case(seed=0, n=5, T=6, P=4, B=4, k=3, H=16, I=4):
    rng = np.random.default_rng(seed)
    p = LSTMParams(input_size=I, hidden=H, banks=B, k=k, pes=P)
    w = rng.normal(0, 0.6, size=(p.rows, I + H))
    b = rng.normal(0, 0.6, size=p.rows)
    wts = prepare_weights(p, w, b)
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, T, I))
    xs[0, 0, :2] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw]
    return p, wts, xs, w, b


def test_formats_and_budget_checks():
    p = LSTMParams(input_size=4, hidden=16, banks=4, k=3, pes=4)
    assert delta_fmt(p) == Q(3, 10) and mem_bits(p) == 8 + 12 + 4
    assert check_budget(p, 1) == 1 and check_budget(p, p.bank_size) == p.bank_size
    for bad in (0, p.bank_size + 1, 1.5, True):
        with pytest.raises(ValueError, match="delta budget"):
            check_budget(p, bad)
    # bank_size > rows/P: the next vector could not load within a one-beat-per-group step
    with pytest.raises(ValueError, match="bank_size"):
        check_budget(LSTMParams(input_size=4, hidden=16, banks=2, k=2, pes=16), 1)
    with pytest.raises(ValueError, match="theta"):
        lstm_delta_golden(p, prepare_weights(p, np.ones((p.rows, 20)), np.zeros(p.rows)),
                          np.zeros((1, 1, 4), dtype=np.int64), -1, 1)


def test_select_columns_threshold_budget_and_ties():
    p = LSTMParams(input_size=4, hidden=8, banks=4, k=2, pes=8)   # cols 12, S = 3, logical e -> bank e % 4
    d = np.zeros((1, p.cols), dtype=np.int64)
    d[0, [0, 4, 8]] = [5, -9, 9]     # bank 0: addresses 0, 1, 2 -> |d| 5, 9, 9 (tie: lower address first)
    d[0, [1, 5]] = [3, 2]            # bank 1
    d[0, 2] = 1                      # bank 2: at the threshold, not a candidate (strictly greater)
    s1 = select_columns(p, d, 1, 1)
    assert np.flatnonzero(s1[0]).tolist() == [1, 4]
    s2 = select_columns(p, d, 1, 2)
    assert np.flatnonzero(s2[0]).tolist() == [1, 4, 5, 8]
    s3 = select_columns(p, d, 0, 3)
    assert np.flatnonzero(s3[0]).tolist() == [0, 1, 2, 4, 5, 8]
    assert (select_columns(p, d, 100, 3) == 0).all()


def test_theta_zero_full_budget_is_bit_identical_to_non_delta():
    p, wts, xs, _, _ = _case()
    h0, c0 = lstm_golden(p, wts, xs)
    h1, c1, st = lstm_delta_golden(p, wts, xs, 0, p.bank_size, stats=True)
    assert np.array_equal(h0, h1) and np.array_equal(c0, c1)
    # every changed column is selected; step 0 of each sequence sees only x (h = 0)
    assert (st["selected"] == st["candidates"]).all()


def test_memory_is_exactly_w_times_reference_and_fits_its_width():
    p, wts, xs, _, _ = _case(seed=1)
    for theta, J in ((0, 2), (700, 1), (300, 3)):
        h, _, st = lstm_delta_golden(p, wts, xs, theta, J, stats=True)
        n, T = xs.shape[:2]
        # rebuild vhat by the rule and check M = W vhat at every step
        vhat = np.zeros((n, p.cols), dtype=np.int64)
        hprev = np.zeros((n, p.hidden), dtype=np.int64)
        for t in range(T):
            v = np.zeros((n, p.cols), dtype=np.int64)
            v[:, :p.input_size], v[:, p.x_pad:] = xs[:, t], hprev
            sel = select_columns(p, v - vhat, theta, J)
            vhat = np.where(sel, v, vhat)
            assert np.array_equal(st["mem"][:, t], _exact_spmxv(p, wts, vhat[:, column_perm(p)]))
            assert (st["selected"][:, t] == sel.sum(1)).all()
            assert (st["beats_per_group"][:, t] <= J).all() and (st["beats_per_group"][:, t] >= 1).all()
            hprev = h[:, t]
        lim = 1 << (mem_bits(p) - 1)
        assert np.abs(st["mem"]).max() < lim


def test_large_threshold_freezes_the_memory():
    p, wts, xs, _, _ = _case(seed=2, n=2, T=3)
    _, _, st = lstm_delta_golden(p, wts, xs, (1 << p.vec_fmt.width) - 1, 2, stats=True)
    assert (st["mem"] == 0).all() and (st["selected"] == 0).all() and (st["beats_per_group"] == 1).all()


def test_float_reference_matches_plain_lstm_at_theta_zero_and_tracks_golden():
    p, wts, _, _, b = _case(seed=3)
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(20, 6, p.input_size))
    hf, frac = lstm_delta_float(p, wts.w_float, b, x, 0.0, p.bank_size)
    assert np.allclose(hf, lstm_float(wts.w_float, b, x), atol=1e-12)
    assert frac == pytest.approx((6 * 20 - 16) / (6 * 20))  # all change but h_0 = 0 at step 0
    hq, _ = lstm_delta_golden(p, wts, quantize(x, p.vec_fmt), 100, 2)
    hfd, _ = lstm_delta_float(p, wts.w_float, b, x, 100 / 1024, 2)
    err = np.abs(dequantize(hq, p.vec_fmt) - hfd)
    assert err.mean() < 0.06, err.mean()


def test_cycle_model():
    p = LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8)
    m = DeltaCycleModel(p)
    base = LSTMCycleModel(p)
    full = np.full((2, 8), p.k)
    # J_t = k every step: exactly the non-delta engine's cycles
    assert m.expected(full) == base.expected(2, 8)
    one = np.ones((2, 8), dtype=np.int64)
    assert base.expected(2, 8) - m.expected(one) == 2 * 8 * 32
    assert m.steady_cycles(one) == 2 * 8 * 32 + 2 * 7 * base.step_gap()


def test_option_i_beat_skipping_needs_almost_all_columns_idle():
    p, wts, _, _, _ = _case(seed=4)
    act = np.zeros((1, p.cols), dtype=bool)
    assert beat_skip_fraction(p, wts, act) == 1.0
    act[0, 0] = True   # one active column already kills every beat with a lane on it
    f = beat_skip_fraction(p, wts, act)
    assert 0.0 < f < 1.0
    assert beat_skip_fraction(p, wts, np.ones((1, p.cols), dtype=bool)) == 0.0


def test_rtl_option_off_by_default_and_checked():
    from hwcosim.hdl.bbs.lstm import LSTMLayer

    p = LSTMParams(input_size=4, hidden=16, banks=4, k=3, pes=4)
    assert LSTMLayer(p).delta_budget is None
    assert "delta_theta" not in LSTMLayer(p).signature.members
    assert "delta_theta" in LSTMLayer(p, delta_budget=2).signature.members
    with pytest.raises(ValueError, match="delta budget"):
        LSTMLayer(p, delta_budget=0)
    lay = LSTMLayer(p, delta_budget=2)
    assert lay.delta_bbs.k == 2 and lay.delta_bbs.vec_fmt == delta_fmt(p)
    assert lay.delta_bbs.out_fmt.frac_bits == lay.delta_bbs.acc_frac


def test_exact_spmxv_equals_dense_int64_product():
    """The compiled CSB product of the delta golden against a dense int64 product of the same matrix."""
    p, wts, _, _, _ = _case(seed=3)
    v = np.random.default_rng(3).integers(-(1 << 14), 1 << 14, size=(5, p.cols))
    dense = np.zeros((p.rows, p.banks, p.bank_size), dtype=np.int64)
    np.put_along_axis(dense, wts.indices.transpose(0, 2, 1), wts.values.transpose(0, 2, 1).astype(np.int64), axis=-1)
    want = v @ dense.reshape(p.rows, p.cols).T
    assert np.array_equal(_exact_spmxv(p, wts, v), want) and np.abs(want).max() > 0

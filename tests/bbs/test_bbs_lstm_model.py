"""Golden model of the BBS LSTM layer: parameters, PLAN activations, layouts, float error bound,
cycle models (fast; no simulator)."""

import dataclasses

import numpy as np
import pytest
from hwcosim.models.bbs.lstm import (
    EW_LATENCY,
    SEQ_TAIL,
    STEP_GAP,
    LSTMCycleModel,
    LSTMParams,
    bbs_mask,
    column_perm,
    csr_step_cycles,
    elementwise,
    gops,
    lstm_float,
    lstm_golden,
    pack_x_beats,
    plan_sigmoid,
    plan_tanh,
    prepare_weights,
    to_logical,
    to_physical,
)
from hwcosim.models.bbs.spmxv import pack_vector_beats
from hwcosim.models.fixedpoint import Q, dequantize, quantize


def _p(**kw):
    d = dict(input_size=4, hidden=8, banks=4, k=2, pes=4)
    d.update(kw)
    return LSTMParams(**d)


def test_init_derived_shapes():
    p = _p()
    assert (p.x_pad, p.cols, p.rows, p.bank_size, p.units, p.x_beats, p.h_beats) == (4, 12, 32, 3, 1, 1, 2)
    p = LSTMParams(input_size=8, hidden=64, banks=16, k=1, pes=16)
    assert (p.x_pad, p.bank_size) == (16, 5)
    assert LSTMParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize("kw,msg", [({"pes": 6}, "multiple of 4"), ({"hidden": 10}, "divide by banks"),
                                    ({"k": 4}, "exceeds the bank size"), ({"act_frac": 3}, "act_frac"),
                                    ({"gate_fmt": Q(8, 2)}, "fractional bits"), ({"banks": 0}, "positive")])
def test_wrong_params(kw, msg):
    with pytest.raises(ValueError, match=msg):
        _p(**kw)


def test_plan_activations_error_bounds():
    z = np.arange(-12 * 1024, 12 * 1024)
    s = plan_sigmoid(z, 10, 10) / 1024
    t = plan_tanh(z, 10, 10) / 1024
    assert np.abs(s - 1 / (1 + np.exp(-z / 1024))).max() < 0.02
    assert np.abs(t - np.tanh(z / 1024)).max() < 0.04
    # PLAN is monotonic except a 0.004 step down at |x| = 2.375 (its segments do not meet there)
    assert np.diff(s).min() > -0.005 and s.min() >= 0 and s.max() == 1.0
    assert plan_sigmoid(np.array([0]), 10, 10)[0] == 512 and plan_tanh(np.array([0]), 10, 10)[0] == 0


def test_layouts_round_trip_and_beats_are_contiguous():
    p = LSTMParams(input_size=5, hidden=16, banks=4, k=2, pes=8)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(p.rows, p.input_size + p.hidden))
    assert np.array_equal(to_logical(p, to_physical(p, w)), w)
    # physical vector beat t of the SpMxV is the logical slice v[t*B:(t+1)*B]
    v = np.arange(p.cols)
    beats = pack_vector_beats(p.bbs, v[column_perm(p)])
    assert beats[1] & 0xFFF == 4 and (beats[1] >> 12) & 0xFFF == 5


def test_bbs_mask_is_balanced_on_hardware_banks():
    p = _p(hidden=16, banks=4, k=2)
    rng = np.random.default_rng(2)
    w = rng.normal(size=(p.rows, p.input_size + p.hidden))
    m = bbs_mask(p, w, 1 - p.k / p.bank_size)
    counts = to_physical(p, m.astype(float)).reshape(p.rows, p.banks, p.bank_size).sum(-1)
    assert (counts == p.k).all()
    with pytest.raises(ValueError, match="exactly k"):
        prepare_weights(p, w, np.zeros(p.rows), mask=np.ones_like(m))


def test_golden_tracks_float_reference_and_is_deterministic():
    p = LSTMParams(input_size=8, hidden=32, banks=8, k=3, pes=8)
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.3, size=(p.rows, p.input_size + p.hidden))
    b = rng.normal(0, 0.3, size=p.rows)
    wts = prepare_weights(p, w, b)
    x = rng.uniform(0, 1, size=(20, 6, 8))
    h, c = lstm_golden(p, wts, quantize(x, p.vec_fmt))
    hf = lstm_float(wts.w_float, b, x)
    err = np.abs(dequantize(h, p.vec_fmt) - hf)
    # PLAN activations (<= 0.019 / 0.038 abs error) and 8-bit weights, through 6 recurrent steps
    assert err.mean() < 0.03 and err.max() < 0.3, (err.mean(), err.max())
    h2, _ = lstm_golden(p, wts, quantize(x, p.vec_fmt))
    assert np.array_equal(h, h2)


def test_elementwise_saturates_cell():
    p = _p(cell_fmt=Q(2, 10))
    z = np.full((1, p.hidden, 4), 8 << 10)  # all gates saturated high: c -> c + 1 each step
    c = np.zeros((1, p.hidden), dtype=np.int64)
    for _ in range(4):
        h, c = elementwise(p, z, c)
    assert c.max() == Q(2, 10).max_raw
    assert pack_x_beats(p, np.zeros((1, 1, 4), dtype=np.int64)) == [0]


def test_cycle_model_and_gops():
    p = LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8)
    m = LSTMCycleModel(p)
    assert m.step_ideal == 64 and m.ideal(2, 8) == 1024
    # head (S - x_beats + 1), SpMxV (4) and element-wise (13) pipelines after the last beat, the beats
    assert m.expected(1, 1) == 9 - 1 + 1 + 4 + 13 + 64
    assert m.step_gap() == STEP_GAP == 4 + 13 + 2 and m.seq_tail() == SEQ_TAIL == 4 + 13 == EW_LATENCY + 4
    # the next sequence adds its steps and gaps only: its first vector loads during the last step
    assert m.expected(2, 8) - m.expected(1, 8) == 8 * 64 + 7 * m.step_gap()
    g = gops(p, 200.0, 64)
    assert g["effective_gops"] == pytest.approx(2 * 256 * 72 / (64 / 200e6) / 1e9)


def test_cycle_model_follows_the_spmxv_stages():
    """out_stage / mul_stage each add a SpMxV pipeline cycle to the recurrence gap and the tail."""
    base = LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8)
    m0 = LSTMCycleModel(base)
    for stages in ({"out_stage": True}, {"mul_stage": True}, {"out_stage": True, "mul_stage": True}):
        p = dataclasses.replace(base, **stages)
        m = LSTMCycleModel(p)
        assert p.bbs.latency == base.bbs.latency + len(stages)
        assert m.step_gap() == m0.step_gap() + len(stages) and m.seq_tail() == m0.seq_tail() + len(stages)
        assert m.expected(2, 3) == m0.expected(2, 3) + len(stages) * (1 + 2 * 2)
        assert LSTMParams.from_dict(p.to_dict()) == p


def test_csr_model_imbalance():
    mask = np.zeros((8, 16), dtype=bool)
    mask[0, :9] = True  # one heavy row
    mask[1:, 0] = True
    r = csr_step_cycles(mask, 4)
    assert r["cycles"] == 10 and r["ideal"] == 4 and r["utilisation"] == pytest.approx(16 / 40)

"""RTL simulation of the BBS LSTM delta (temporal-sparsity) mode vs its golden model: every hidden
word, the cycle count (free-flowing streams) and the DUT's counters; the trained digits LSTM.

Two RTL configurations only (builds are cached by Verilog hash): a small random layer with the
full budget J = bank_size (so theta = 0 is also checked against the non-delta golden model), and
the digits layer (P = B = 8, k = 2) with J = 2, where the per-bank budget really caps the
candidates."""

import dataclasses
import json

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.lstm import readout_accuracy, trained_pruned_lstm
from hwcosim.cosim.designs.bbs.lstm_delta import run_lstm_delta
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.bbs.lstm import LSTMParams, lstm_golden, prepare_weights
from hwcosim.models.bbs.lstm_delta import DeltaCycleModel, lstm_delta_golden
from hwcosim.models.fixedpoint import dequantize, quantize

pytestmark = pytest.mark.sim

SMALL = dict(input_size=4, hidden=16, banks=4, k=3, pes=4)   # S = 5, rows/P = 16, U = 1 < B = 4
SMALL_J = 5


def _small(n, T, seed):
    rng = np.random.default_rng(seed)
    p = LSTMParams(**SMALL)
    w = rng.normal(0, 0.6, size=(p.rows, p.input_size + p.hidden))
    b = rng.normal(0, 0.6, size=p.rows)
    wts = prepare_weights(p, w, b)
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, T, p.input_size))
    # slowly varying inputs, so that large thresholds leave some columns unchanged
    xs = np.cumsum(xs // 8, axis=1).clip(p.vec_fmt.min_raw, p.vec_fmt.max_raw)
    xs[0, 0, :2] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw]
    return p, wts, xs


def _report(tmp_path, name, rec):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    rec = {k: v for k, v in rec.items() if k != "h_rtl"}
    (out / f"bbs_lstm_delta_{name}.json").write_text(json.dumps(rec, indent=1))
    print(f"\n{name}: {rec}")


@pytest.mark.parametrize("theta", [0, 150, 600])
def test_delta_random_words_cycles_and_counters(tmp_path, theta):
    p, wts, xs = _small(n=3, T=4, seed=5)
    res = run_lstm_delta(p, wts, xs, theta, SMALL_J, test_dir=tmp_path)
    mt = res.metrics
    h_rtl = np.asarray(mt["h_rtl"], dtype=np.int64)
    h_gold, _, st = lstm_delta_golden(p, wts, xs, theta, SMALL_J, stats=True)
    assert mt["mismatches"] == 0 and np.array_equal(h_rtl, h_gold)
    assert mt["cycles"] == DeltaCycleModel(p).expected(st["beats_per_group"]) == mt["dut_cycles"], mt
    assert mt["dut_mac_beats"] == p.rows // p.pes * int(st["beats_per_group"].sum())
    assert mt["dut_delta_selected"] == int(st["selected"].sum())
    if theta == 0:  # full budget, zero threshold: the RTL equals the non-delta golden model
        assert np.array_equal(h_rtl, lstm_golden(p, wts, xs)[0])
    else:           # and a threshold really skips work
        assert mt["dut_mac_beats"] < p.rows // p.pes * p.bank_size * xs.shape[0] * xs.shape[1]
        at_zero = lstm_delta_golden(p, wts, xs, 0, SMALL_J, stats=True)[2]
        assert int(st["selected"].sum()) < int(at_zero["selected"].sum())
    _report(tmp_path, f"small_theta{theta}", {**p.to_dict(), **mt})


def test_delta_with_spmxv_stages(tmp_path):
    """The SpMxV's out_stage and mul_stage in delta mode (runtime beat count): the same words, and
    the delta cycle model follows the longer SpMxV pipeline."""
    p0, wts, xs = _small(n=2, T=3, seed=5)
    p = dataclasses.replace(p0, out_stage=True, mul_stage=True)
    res = run_lstm_delta(p, wts, xs, 150, SMALL_J, test_dir=tmp_path)
    mt = res.metrics
    h_gold, _, st = lstm_delta_golden(p, wts, xs, 150, SMALL_J, stats=True)
    assert mt["mismatches"] == 0 and np.array_equal(np.asarray(mt["h_rtl"], dtype=np.int64), h_gold)
    want = DeltaCycleModel(p).expected(st["beats_per_group"])
    assert mt["cycles"] == want == DeltaCycleModel(p0).expected(st["beats_per_group"]) + 2 * 5, mt
    assert mt["dut_cycles"] == mt["cycles"]


def test_delta_with_idle_and_backpressure(tmp_path):
    p, wts, xs = _small(n=2, T=4, seed=7)
    res = run_lstm_delta(p, wts, xs, 150, SMALL_J, p_idle=0.3, p_stall=0.5, seed=3, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["dut_stall_out"] > 0
    assert mt["cycles"] >= mt["model_cycles"]


def test_a_wrong_delta_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    import hwcosim.cosim.designs.bbs.lstm_delta as cbd

    p, wts, xs = _small(n=1, T=2, seed=4)
    real = cbd.lstm_delta_golden

    def off_by_one(*a, **k):
        h, c, st = real(*a, **k)
        h = h.copy()
        h[0, 1, 3] += 1
        return h, c, st

    monkeypatch.setattr(cbd, "lstm_delta_golden", off_by_one)
    with pytest.raises(SimFailure, match=r"1 of 32 hidden words differ.*\(0, 1, 3,"):
        run_lstm_delta(p, wts, xs, 150, SMALL_J, test_dir=tmp_path)


def test_delta_wrong_cycle_expectation_fails(tmp_path, monkeypatch):
    """The testbench checks the DUT's beat count against the model's J_t: a corrupted J_t fails."""
    import hwcosim.cosim.designs.bbs.lstm_delta as cbd

    p, wts, xs = _small(n=1, T=2, seed=4)
    real = cbd.lstm_delta_golden

    def more_beats(*a, **k):
        h, c, st = real(*a, **k)
        st = dict(st, beats_per_group=st["beats_per_group"] + 1)
        return h, c, st

    monkeypatch.setattr(cbd, "lstm_delta_golden", more_beats)
    with pytest.raises(SimFailure, match="dut_mac_beats"):
        run_lstm_delta(p, wts, xs, 150, SMALL_J, test_dir=tmp_path)


@pytest.mark.parametrize("theta", [0, 102])
def test_trained_digits_lstm_delta_mode(tmp_path, theta):
    """The trained, BBS-pruned digits LSTM (k = 2 of 9 per bank) in delta mode with J = 2 over real
    test images: every hidden word equals the delta golden model, cycles equal the delta cycle
    model, and the budget is active (fewer columns selected than over the threshold)."""
    p, model, ds, mask, info = trained_pruned_lstm(banks=8, k=2, pes=8)
    wts = prepare_weights(p, model.params["W"], model.params["b"], mask)
    n = 12
    xs = quantize(ds.x_test[:n], p.vec_fmt)
    res = run_lstm_delta(p, wts, xs, theta, 2, test_dir=tmp_path)
    mt = res.metrics
    h_rtl = np.asarray(mt["h_rtl"], dtype=np.int64)
    h_gold, _, st = lstm_delta_golden(p, wts, xs, theta, 2, stats=True)
    assert np.array_equal(h_rtl, h_gold)
    assert mt["cycles"] == DeltaCycleModel(p).expected(st["beats_per_group"]), mt
    assert mt["dut_delta_selected"] < mt["dut_delta_candidates"]
    acc_rtl = readout_accuracy(model, dequantize(h_rtl[:, -1], p.vec_fmt), ds.y_test[:n])
    _report(tmp_path, f"digits_theta{theta}", {**p.to_dict(), **mt, "acc_rtl_12": acc_rtl,
                                               "acc_dense_float_full_test": info["dense_test_accuracy"]})

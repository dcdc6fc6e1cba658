"""RTL simulation of the BBS LSTM layer engine vs the golden model, every hidden word compared;
end to end on the trained, BBS-pruned digits LSTM."""

import dataclasses
import json

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.lstm import readout_accuracy, run_lstm, trained_pruned_lstm
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, lstm_golden, prepare_weights
from hwcosim.models.fixedpoint import dequantize, quantize

pytestmark = pytest.mark.sim

# (pes, banks, k, hidden, input): U = P/4 vs B: equal-ish / U > B (1 -> 2 beats) / U < B (4 -> 1 beat)
CONFIGS = [(4, 4, 2, 8, 4), (16, 2, 2, 16, 4), (8, 8, 1, 16, 8)]


def _case(P, B, k, H, I, n, T, seed):
    rng = np.random.default_rng(seed)
    p = LSTMParams(input_size=I, hidden=H, banks=B, k=k, pes=P)
    w = rng.normal(0, 0.6, size=(4 * H, I + H))
    b = rng.normal(0, 0.6, size=4 * H)
    wts = prepare_weights(p, w, b)
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, T, I))
    xs[0, 0, :2] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw]
    return p, wts, xs


def _report(tmp_path, name, rec):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    rec = {k: v for k, v in rec.items() if k != "h_rtl"}
    (out / f"bbs_lstm_{name}.json").write_text(json.dumps(rec, indent=1))
    print(f"\n{name}: {rec}")


@pytest.mark.parametrize("P,B,k,H,I", CONFIGS)
def test_lstm_no_stalls_hits_cycle_model(tmp_path, P, B, k, H, I):
    p, wts, xs = _case(P, B, k, H, I, n=2, T=3, seed=P + B)
    res = run_lstm(p, wts, xs, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0
    assert mt["cycles"] == LSTMCycleModel(p).expected(2, 3), mt
    assert mt["dut_cycles"] == mt["cycles"] and mt["dut_stall_out"] == 0
    assert mt["dut_mac_beats"] == mt["ideal"]
    _report(tmp_path, f"P{P}B{B}k{k}H{H}", {**p.to_dict(), **mt})


@pytest.mark.parametrize("stages", [("out_stage",), ("out_stage", "mul_stage")])
def test_lstm_with_spmxv_stages_hits_cycle_model(tmp_path, stages):
    """The SpMxV's optional pipeline registers (for the clock): the same words, and the recurrence
    gap and the tail grow by one cycle per stage, as the cycle model says."""
    P, B, k, H, I = CONFIGS[1]
    p0, wts, xs = _case(P, B, k, H, I, n=2, T=3, seed=P + B)
    p = dataclasses.replace(p0, **{s: True for s in stages})
    res = run_lstm(p, wts, xs, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0
    assert mt["cycles"] == LSTMCycleModel(p).expected(2, 3) == LSTMCycleModel(p0).expected(2, 3) + 5 * len(stages), mt
    assert mt["dut_cycles"] == mt["cycles"] and mt["dut_mac_beats"] == mt["ideal"]


@pytest.mark.parametrize("p_idle,p_stall", [(0.3, 0.0), (0.0, 0.5), (0.4, 0.6)])
@pytest.mark.parametrize("P,B,k,H,I", CONFIGS[:2])
def test_lstm_with_idle_and_backpressure(tmp_path, P, B, k, H, I, p_idle, p_stall):
    p, wts, xs = _case(P, B, k, H, I, n=3, T=4, seed=int(10 * p_idle + 100 * p_stall))
    res = run_lstm(p, wts, xs, p_idle=p_idle, p_stall=p_stall, seed=int(100 * p_idle + 10 * p_stall),
                   test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0
    assert res.metrics["cycles"] >= LSTMCycleModel(p).expected(3, 4)
    if p_stall:
        assert res.metrics["dut_stall_out"] > 0


def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    import hwcosim.cosim.designs.bbs.lstm as cb

    p, wts, xs = _case(*CONFIGS[0], n=1, T=2, seed=4)
    real = cb.lstm_golden

    def off_by_one(*a, **k):
        h, c = real(*a, **k)
        h = h.copy()
        h[0, 1, 3] += 1
        return h, c

    monkeypatch.setattr(cb, "lstm_golden", off_by_one)
    with pytest.raises(SimFailure, match=r"1 of 16 hidden words differ.*\(0, 1, 3,"):
        run_lstm(p, wts, xs, test_dir=tmp_path)


def test_trained_bbs_lstm_end_to_end_on_digits(tmp_path):
    """The trained digits LSTM, BBS-pruned (k=2 of 9 per bank, 78%) and fine-tuned, runs on the RTL
    over real test images; every hidden word equals the golden model, so the RTL's task accuracy
    equals the golden model's; both are reported beside the dense float model's."""
    p, model, ds, mask, info = trained_pruned_lstm(banks=8, k=2, pes=8)
    wts = prepare_weights(p, model.params["W"], model.params["b"], mask)
    n = 12
    xs = quantize(ds.x_test[:n], p.vec_fmt)
    res = run_lstm(p, wts, xs, test_dir=tmp_path)
    mt = res.metrics
    h_rtl = np.asarray(mt["h_rtl"], dtype=np.int64)
    h_gold, _ = lstm_golden(p, wts, xs)
    assert np.array_equal(h_rtl, h_gold)
    assert mt["cycles"] == LSTMCycleModel(p).expected(n, 8)
    acc_rtl = readout_accuracy(model, dequantize(h_rtl[:, -1], p.vec_fmt), ds.y_test[:n])
    acc_gold = readout_accuracy(model, dequantize(h_gold[:, -1], p.vec_fmt), ds.y_test[:n])
    acc_dense = info["dense_test_accuracy"]
    assert acc_rtl == acc_gold and acc_rtl >= 0.75, (acc_rtl, acc_gold)
    _report(tmp_path, "digits_e2e", {**p.to_dict(), **mt, "acc_rtl": acc_rtl, "acc_golden": acc_gold,
                                     "acc_dense_float_full_test": acc_dense, "n_images": n})


def test_lstm_ecp5_dsp_netlist_bit_exact_under_stalls(tmp_path):
    """The netlist ``hwcosim build`` makes for an ECP5 part (the SpMxV's and the element-wise unit's
    products in MULT18X18D output registers, simulated with hdl.common.dsp's model) against the
    golden model, with idle input and a stalled output."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.hdl.bbs import LSTMLayer
    from hwcosim.hdl.common.dsp import dsp_target

    P, B, k, H, I = CONFIGS[0]
    p, wts, xs = _case(P, B, k, H, I, n=2, T=3, seed=11)
    # the SpMxV's products in the DSP block's register; the skid buffers of the board configuration
    p = dataclasses.replace(p, mul_stage=True, skid=True)
    with dsp_target("ecp5"):
        assert to_verilog(LSTMLayer(p), "bbs_lstm").count("MULT18X18D #(") == P * B + 3 * p.units
        res = run_lstm(p, wts, xs, p_idle=0.3, p_stall=0.5, seed=3, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0


@pytest.mark.parametrize("p_idle,p_stall", [(0.0, 0.0), (0.4, 0.6)])
def test_lstm_skid_buffers_change_no_word_and_no_cycle(tmp_path, p_idle, p_stall):
    """The board configuration's skid buffers (``skid``): the same words; with free-flowing streams
    the cycle model's count exactly; under idle input and a stalled output, still every word."""
    P, B, k, H, I = CONFIGS[1]
    p0, wts, xs = _case(P, B, k, H, I, n=2, T=3, seed=5)
    p = dataclasses.replace(p0, skid=True)
    res = run_lstm(p, wts, xs, p_idle=p_idle, p_stall=p_stall, seed=9, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0
    if not p_stall:
        assert mt["cycles"] == LSTMCycleModel(p0).expected(2, 3), mt

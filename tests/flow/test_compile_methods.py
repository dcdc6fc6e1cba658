"""``hwcosim.compile(..., method="wanda"|"obs")``: activation-aware pruning of every engine layer from
the float activations entering it on the calibration inputs, under the target's own pattern.

The MLP's inputs have channels of very different scales (log-normal, sigma 1), the case where the
input norms change which weights matter; errors are measured on held-out inputs of the same kind.
"""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.pruning.oneshot import output_error
from test_compile import mlp

import hwcosim


def _scaled_inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(128, 16)) * np.exp(rng.normal(0.0, 1.0, 16))
    return x[:64], x[64:]


def _obeys(m, target: str) -> None:
    """Every kept weight in the engine's pattern: <= k per bank (bbs), <= n per region (fss)."""
    for st in m.stages:
        p = st.params
        nz = np.zeros((p.rows, p.cols) if target == "bbs" else (p.max_rows, p.max_cols), dtype=bool)
        nz[:st.w_pruned.shape[0], :st.w_pruned.shape[1]] = st.w_pruned != 0
        if target == "bbs":
            assert nz.reshape(p.rows, p.banks, p.bank_size).sum(axis=2).max() <= p.k
        else:
            rh, rw = p.region
            r = nz.reshape(p.max_rows // rh, rh, p.max_cols // rw, rw).sum(axis=(1, 3))
            assert r.max() <= p.n


@pytest.mark.parametrize("target", ["bbs", "fss"])
def test_activation_aware_methods_beat_magnitude(target):
    cal, held = _scaled_inputs()
    err, layer_err = {}, {}
    for method in ("magnitude", "wanda", "obs"):
        m = hwcosim.compile(mlp(), target=target, sparsity=0.5, calibration=cal, method=method)
        _obeys(m, target)
        assert [d["method"] for d in m.report()["layers"]] == [method, method]
        assert m.options["method"] == method
        st = m.stages[0]
        layer_err[method] = output_error(st.layer.w, st.w_pruned, held)
        err[method] = float(np.abs(m.predict(held) - m.predict_float(held, pruned=False)).mean())
    # the first layer's relative output error (what both methods minimise) on held-out inputs
    assert layer_err["wanda"] < layer_err["magnitude"], layer_err
    assert layer_err["obs"] < layer_err["magnitude"], layer_err
    # the accelerator's output (softmax probabilities) vs the float network: OBS compensates
    assert err["obs"] <= err["magnitude"], err


def test_lstm_layers_say_they_were_pruned_by_magnitude():
    from test_compile import X_SEQ, lstm_model

    m = hwcosim.compile(lstm_model(), target="bbs", sparsity=0.5, calibration=X_SEQ, method="wanda")
    assert m.report()["layers"][0]["method"].startswith("magnitude (method wanda is not implemented")


def test_unknown_method_is_refused():
    cal, _ = _scaled_inputs()
    with pytest.raises(hwcosim.UsageError, match="unknown pruning method 'sgd'"):
        hwcosim.compile(mlp(), calibration=cal, method="sgd")

"""Run the BBS LSTM layer RTL on quantised weights and input sequences, compared with the golden model."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, LSTMWeights, lstm_golden
from hwcosim.models.errors import UsageError

__all__ = ["run_lstm", "trained_pruned_lstm", "readout_accuracy"]


def run_lstm(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray, *, p_idle: float = 0.0, p_stall: float = 0.0,
             seed: int = 1, test_dir: str | os.PathLike | None = None, sim: str | None = None,
             waves: bool | None = None) -> runner.SimResult:
    """Simulate ``LSTMLayer(p)`` on raw input sequences ``xs`` (N, T, I).

    Every hidden-state word is compared with :func:`hwcosim.models.bbs.lstm.lstm_golden` inside the
    testbench (raises :class:`hwcosim.cosim.flow.runner.SimFailure` on a mismatch). ``metrics["h_rtl"]`` holds
    the RTL's hidden states (N, T, H raw).
    """
    from hwcosim.hdl.bbs.lstm import LSTMLayer

    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3:
        raise UsageError(f"xs must have shape (N, T, I), got {xs.shape}")
    expected, _ = lstm_golden(p, wts, xs)
    res = runner.run(
        LSTMLayer(p), "bbs_lstm", "hwcosim.cosim.designs.bbs.tb_lstm",
        inputs={"params": p.to_dict(), "p_idle": p_idle, "p_stall": p_stall, "seed": seed},
        arrays={"values": wts.values, "indices": wts.indices, "bias": wts.bias, "xs": xs, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves)
    res.metrics.setdefault("ideal", LSTMCycleModel(p).ideal(len(xs), xs.shape[1]))
    return res


def trained_pruned_lstm(banks: int = 8, k: int = 2, pes: int = 8, finetune_epochs: int = 15, seed: int = 0,
                        pattern: str = "bbs"):
    """The trained digits LSTM (``hwcosim.models.nn.train.get_trained``), pruned and fine-tuned.

    ``pattern="bbs"``: bank-balanced on the engine's (interleaved) banks, ``k`` per bank;
    ``"unstructured"``: global magnitude pruning (:class:`hwcosim.pruning.patterns.unstructured.Unstructured`)
    of the same fused matrix to the same sparsity (the CSR baseline's weights).

    Returns ``(params, model, dataset, mask, info)``; ``model`` is a fine-tuned copy whose ``W``
    obeys ``mask`` (logical order); ``info`` has the dense model's test accuracy.
    """
    import copy

    from hwcosim.models.bbs.lstm import bbs_mask
    from hwcosim.models.fixedpoint import Q
    from hwcosim.models.nn.train import TrainConfig, get_trained, train
    from hwcosim.pruning.patterns.unstructured import Unstructured

    dense, ds, info = get_trained("lstm")
    cfg = dense.config
    w = dense.params["W"].astype(np.float64)
    p0 = LSTMParams(input_size=cfg.input_size, hidden=cfg.hidden, banks=banks, k=k, pes=pes)
    sparsity = 1 - k / p0.bank_size
    if pattern == "bbs":
        mask = bbs_mask(p0, w, sparsity)
    elif pattern == "unstructured":
        # same number of kept weights as the BBS engine stores (real columns only)
        mask = Unstructured(sparsity=1 - p0.rows * p0.k * p0.banks / w.size).mask(w)
    else:
        raise UsageError(f"pattern must be 'bbs' or 'unstructured', not {pattern!r}")
    model = copy.deepcopy(dense)
    if finetune_epochs:
        train(model, ds.x_train, ds.y_train, TrainConfig(epochs=finetune_epochs, lr=3e-3, lr_final=3e-4, seed=seed),
              masks={"W": mask})
    else:
        model.params["W"] = model.params["W"] * mask
    wmax = float(np.abs(model.params["W"]).max())
    p = LSTMParams(input_size=cfg.input_size, hidden=cfg.hidden, banks=banks, k=k, pes=pes,
                   weight_fmt=Q.fitting(wmax, 8))
    return p, model, ds, mask, {"dense_test_accuracy": info["test_accuracy"], "sparsity": sparsity}


def readout_accuracy(model, h_last: np.ndarray, y: np.ndarray) -> float:
    """Accuracy of the model's linear readout applied to last hidden states (float, (N, H))."""
    logits = h_last @ model.params["W_out"].T.astype(np.float64) + model.params["b_out"]
    return float((logits.argmax(axis=1) == y).mean())

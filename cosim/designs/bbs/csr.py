"""Run the row-wise CSR SpMxV baseline RTL and compare it with its golden model; measure it
against the BBS engine on the same layer."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.csr import CSRCycleModel, CSRParams, encode, spmxv_csr
from hwcosim.models.errors import UsageError

__all__ = ["run_csr"]


def run_csr(p: CSRParams, w: np.ndarray, xs: np.ndarray, *, p_idle: float = 0.0, p_stall: float = 0.0,
            seed: int = 1, test_dir: str | os.PathLike | None = None, sim: str | None = None,
            waves: bool | None = None) -> runner.SimResult:
    """Simulate ``CSRSpMxV(p)`` on the raw matrix ``w`` (rows, cols) and raw vectors ``xs``
    (n, cols). Every result word is compared with :func:`hwcosim.models.bbs.csr.spmxv_csr` in the
    testbench (:class:`hwcosim.cosim.flow.runner.SimFailure` on a mismatch)."""
    from hwcosim.hdl.bbs.csr import CSRSpMxV

    xs = np.atleast_2d(np.asarray(xs, dtype=np.int64))
    e = encode(p, w)
    expected = spmxv_csr(p, w, xs)
    res = runner.run(
        CSRSpMxV(p), "bbs_csr", "hwcosim.cosim.designs.bbs.tb_csr",
        inputs={"params": p.to_dict(), "p_idle": p_idle, "p_stall": p_stall, "seed": seed},
        arrays={"value": e.value, "col": e.col, "last": e.last, "valid": e.valid, "loads": e.loads,
                "nnz": np.int64(e.nnz), "xs": xs, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves)
    res.metrics.setdefault("expected", CSRCycleModel(p, e).expected(len(xs)))
    return res


def digits_layers(banks: int = 8, k: int = 2, pes: int = 8, finetune_epochs: int = 0, n_vectors: int = 4):
    """The trained digits LSTM's fused matrix, pruned twice to the same number of nonzeros:
    bank-balanced for the BBS engine and unstructured (:mod:`hwcosim.pruning.patterns` ``unstructured``)
    for the CSR engine, both quantised and in the engine's physical row/column order, plus
    ``n_vectors`` real engine input vectors ``[x_t; h_{t-1}]`` (test image 0, steps 0..).

    The masks (hence every cycle count) do not depend on ``finetune_epochs``; only the weights do.
    Returns ``(bbs_params, bbs_weights, csr_params, csr_matrix_raw, vectors_physical)``.
    """
    from hwcosim.cosim.designs.bbs.lstm import trained_pruned_lstm
    from hwcosim.models.bbs.lstm import column_perm, lstm_golden, prepare_weights, to_physical
    from hwcosim.models.fixedpoint import Q, quantize

    p, model, ds, mask, _ = trained_pruned_lstm(banks=banks, k=k, pes=pes, finetune_epochs=finetune_epochs)
    _, mu, _, mask_u, _ = trained_pruned_lstm(banks=banks, k=k, pes=pes, finetune_epochs=finetune_epochs,
                                              pattern="unstructured")
    wts = prepare_weights(p, model.params["W"], model.params["b"], mask)
    wu = np.where(mask_u, mu.params["W"], 0.0)
    fmt_u = Q.fitting(float(np.abs(wu).max()), p.weight_fmt.width)
    wq = quantize(to_physical(p, wu), fmt_u)
    cp = CSRParams(rows=p.rows, cols=p.cols, mults=p.pes * p.banks, lanes=p.banks, weight_fmt=fmt_u,
                   vec_fmt=p.vec_fmt, out_fmt=p.gate_fmt)
    xs = quantize(ds.x_test[:1], p.vec_fmt)                       # (1, T, I)
    h, _ = lstm_golden(p, wts, xs)
    T = xs.shape[1]
    v = np.zeros((n_vectors, p.cols), dtype=np.int64)
    for t in range(n_vectors):
        v[t, :p.input_size] = xs[0, t % T]
        if t % T:
            v[t, p.x_pad:] = h[0, t % T - 1]
    return p, wts, cp, wq, v[:, column_perm(p)]


def csr_vs_bbs_rtl(n_vectors: int = 4, finetune_epochs: int = 0, out_dir: str | os.PathLike | None = None,
                   sim: str | None = None) -> dict:
    """Both engines in RTL on the same trained digits layer with the same ``P * B`` multipliers.

    Runs the BBS SpMxV (CSB weights of the bank-balanced layer) and the CSR engine (the
    unstructured layer) on the same input vectors; both testbenches compare every result word
    with their golden models. Cycles per product are measured in RTL as the steady-state
    spacing of products (BBS: from runs of 1 and ``n_vectors`` vectors; CSR: between the last
    result beats of consecutive products); utilisation = stored nonzeros / (cycles x multipliers).
    """
    from pathlib import Path

    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.models.bbs.lstm import LSTMCycleModel
    from hwcosim.models.bbs.spmxv import CycleModel

    if n_vectors < 2:
        raise UsageError(f"n_vectors must be >= 2 to measure a product's spacing, not {n_vectors}")
    p, wts, cp, wq, v = digits_layers(finetune_epochs=finetune_epochs, n_vectors=n_vectors)
    d = Path(out_dir) if out_dir is not None else None
    sub = (lambda s: d / s) if d is not None else (lambda s: None)
    rb1 = run_spmxv(p.bbs, wts.values, wts.indices, v[:1], test_dir=sub("bbs1"), sim=sim)
    rbn = run_spmxv(p.bbs, wts.values, wts.indices, v, test_dir=sub("bbsn"), sim=sim)
    rc = run_csr(cp, wq, v, test_dir=sub("csr"), sim=sim)
    e = encode(cp, wq)
    mult = cp.mults
    bbs_per = (rbn.metrics["cycles"] - rb1.metrics["cycles"]) / (n_vectors - 1)
    iv = rc.metrics["product_intervals"]
    csr_per = float(np.mean(iv))
    nnz_bbs = p.rows * p.k * p.banks
    gap = LSTMCycleModel(p).step_gap()
    return {
        "layer": f"digits LSTM fused W {p.rows}x{p.input_size + p.hidden} (+pad to {p.cols})",
        "multipliers": mult, "bbs": {"P": p.pes, "B": p.banks, "k": p.k},
        "csr": {"M": mult, "lanes": cp.lanes, "depth_longest_pe_list": e.depth,
                "pe_load_min": int(e.loads.min()), "pe_load_mean": float(e.loads.mean()),
                "pe_load_max": int(e.loads.max()), "empty_rows": int((np.count_nonzero(wq, axis=1) == 0).sum())},
        "nnz_bbs": nnz_bbs, "nnz_csr": e.nnz,
        "bbs_cycles_per_product_rtl": bbs_per, "bbs_cycles_per_product_model": CycleModel(p.bbs).p.weight_beats,
        "csr_cycles_per_product_rtl": csr_per, "csr_product_intervals_rtl": iv,
        "csr_cycles_per_product_model": CSRCycleModel(cp, e).per_product(),
        "ideal_cycles_per_product": -(-nnz_bbs // mult),
        "csr_over_bbs_cycles": csr_per / bbs_per,
        "bbs_mult_utilisation_rtl": nnz_bbs / (bbs_per * mult),
        "csr_mult_utilisation_rtl": e.nnz / (csr_per * mult),
        "bbs_total_cycles_rtl": rbn.metrics["cycles"], "csr_total_cycles_rtl": rc.metrics["cycles"],
        "bbs_total_expected": rbn.metrics["expected"], "csr_total_expected": rc.metrics["expected"],
        "n_vectors": n_vectors, "mismatches": rbn.metrics["mismatches"] + rc.metrics["mismatches"],
        # per LSTM step (model): each engine's product plus the same recurrence drain (STEP_GAP)
        "bbs_step_cycles_model": bbs_per + gap, "csr_step_cycles_model": csr_per + gap,
        "step_ratio_model": (csr_per + gap) / (bbs_per + gap),
    }

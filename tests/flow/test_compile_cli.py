"""``hwcosim compile`` / ``hwcosim run``, ``CompiledModel.load`` and the FSS target (docs/compile.md).

- the folder ``compile`` writes loads back into a model whose ``predict`` equals the original's bit
  for bit; a changed or missing file is refused naming it; the folder holds the engine Verilog;
- ``run`` reports the four networks and never a latency without a measured Fmax (one read from a
  build.json of exactly that engine configuration is used; any other is not);
- bad input (an unsupported op, NaN, a target the model cannot map to, inputs or labels of the wrong
  shape): exit 2, one line, nothing written;
- the FSS target: a CNN (Conv + pooling on the host) and an MLP read as onnxruntime reads them,
  ``predict`` within the formats' rounding bound of the quantised float network; host pooling in
  fixed point equals the float pooling of the same words;
- RTL: one tiny MLP through ``hwcosim run --rtl`` (marked ``sim``); the FSS CNN's RTL (``slow``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.compile import CompiledModel, engine_config, engine_stem, im2col, pool_raw
from onnx import helper
from test_compile import X_MLP, X_SEQ, _model, lstm_model, mlp, mlp_weights, ort

import hwcosim

#: the build root as the suite starts (the working folder's build/ or $HWCOSIM_BUILD): shared Verilator builds
BUILD = Path(os.environ.get("HWCOSIM_BUILD", "build")).resolve()
RNG = np.random.default_rng(7)
X_IMG = np.random.default_rng(8).normal(size=(12, 1, 8, 8))


def cnn(seed=0):
    """(N, 1, 8, 8): Conv 3x3 pad 1 (4) -> Relu -> MaxPool 2 -> Conv 3x3 (8) -> Relu -> AveragePool 2
    -> Flatten -> Gemm (3)."""
    rng = np.random.default_rng(seed)
    inits = {"K1": rng.normal(0, 0.5, (4, 1, 3, 3)), "c1": rng.normal(0, .1, 4),
             "K2": rng.normal(0, 0.3, (8, 4, 3, 3)), "c2": rng.normal(0, .1, 8),
             "Wf": rng.normal(0, 0.3, (3, 8)), "bf": rng.normal(0, .1, 3)}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes = [helper.make_node("Conv", ["x", "K1", "c1"], ["h1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("MaxPool", ["a1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "K2", "c2"], ["h2"], name="conv2", strides=[1, 1]),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("AveragePool", ["a2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p2"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "Wf", "bf"], ["y"], name="fc", transB=1)]
    return _model(nodes, inits, ["N", 1, 8, 8], ["N", 3], "cnn")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """``hwcosim compile mlp.onnx --sparsity 0.5`` once (mlp.onnx, x.npy, y.npy, out/ in one folder)."""
    import onnx

    d = tmp_path_factory.mktemp("compiled")
    onnx.save(mlp(), d / "mlp.onnx")
    np.save(d / "x.npy", X_MLP)
    np.save(d / "y.npy", ort(mlp(), X_MLP).argmax(axis=1))
    rc = main(["compile", str(d / "mlp.onnx"), "--sparsity", "0.5", "--calibration", str(d / "x.npy"),
               "-o", str(d / "out")])
    assert rc == 0
    return d


@pytest.fixture
def files(compiled, tmp_path, monkeypatch):
    """A working folder with a copy of :func:`compiled`'s files."""
    import shutil

    monkeypatch.chdir(tmp_path)
    for f in compiled.iterdir():
        (shutil.copytree if f.is_dir() else shutil.copy)(f, tmp_path / f.name)
    return tmp_path


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- compile, load, run ------------------------------------------------------------------------------

def test_compile_writes_a_folder_that_loads_bit_exact(files, capsys):
    man = json.loads(Path("out/manifest.json").read_text())
    m0 = hwcosim.compile("mlp.onnx", sparsity=0.5, calibration=X_MLP)
    stems = {engine_stem(s.engine, s.params) for s in m0.stages}
    assert {f"{s}.v" for s in stems} | {f"{s}.toml" for s in stems} <= set(man["files"])
    s = m0.stages[1]   # the engine Verilog is the design API's at the layer's parameters
    assert Path(f"out/{engine_stem(s.engine, s.params)}.v").read_text() == hwcosim.design(s.engine, s.params).verilog()
    m = hwcosim.load_compiled("out")
    x = RNG.normal(size=(40, 16))
    assert np.array_equal(m.predict(x), m0.predict(x))
    assert np.array_equal(m.predict_float(x, pruned=False), m0.predict_float(x, pruned=False))
    r, r0 = m.report(), m0.report()
    assert r.pop("source").endswith("mlp.onnx") and r0.pop("source") == "mlp.onnx"
    assert r == r0


def test_load_refuses_a_changed_or_missing_file(files):
    out = files / "out"
    f = out / "layer01-fc2.npz"
    data = bytearray(f.read_bytes())
    data[-20] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(hwcosim.UsageError, match=r"layer01-fc2\.npz changed since it was compiled"):
        CompiledModel.load(out)
    f.unlink()
    with pytest.raises(hwcosim.UsageError, match=r"layer01-fc2\.npz is missing"):
        CompiledModel.load(out)


def test_lstm_folder_loads_bit_exact(tmp_path):
    m0 = hwcosim.compile(lstm_model(), sparsity=0.5, calibration=X_SEQ)
    m = CompiledModel.load(m0.save(tmp_path / "out"))
    assert np.array_equal(m.predict(X_SEQ), m0.predict(X_SEQ))


def test_run_reports_four_networks_and_no_unmeasured_clock(files, capsys):
    rc, out, _ = _cli(capsys, "run", "out", "--inputs", "x.npy", "--labels", "y.npy", "-o", "run")
    assert rc == 0
    for name in ("float", "quantised dense", "pruned (float)", "accelerator (golden)"):
        assert name in out
    assert "no measured clock: run `hwcosim build bbs-spmxv --ooc --params" in out and "latency 0" not in out
    res = json.loads(Path("run/run.json").read_text())
    acc = {v["variant"]: v["accuracy"] for v in res["variants"]}
    assert acc["float"] == 1.0          # the labels are the float network's own classes
    m = CompiledModel.load("out")
    assert acc["accelerator (golden)"] == (m.predict(X_MLP).argmax(1) == np.load("y.npy")).mean()
    assert res["latency_us"] is None and all(d["fmax_mhz"] is None for d in res["layers"])
    assert np.array_equal(np.load("run/inputs.npy"), X_MLP)
    assert np.array_equal(np.load("run/layer01-golden-words.npz")["outputs"], m._run(X_MLP, trace=True)[1][1][1])


def test_run_uses_only_the_measured_fmax_of_the_same_configuration(files, capsys):
    m = CompiledModel.load("out")
    fmax = {0: 91.5, 1: 123.25}    # a build.json per engine configuration, as hwcosim build --ooc writes it
    for i, st in enumerate(m.stages):
        d = Path("builds") / engine_stem(st.engine, st.params) / st.engine
        d.mkdir(parents=True)
        (d / "build.json").write_text(json.dumps({"design": st.engine, "params": st.params.to_dict(),
                                                   "mode": "out-of-context", "worst_fmax_mhz": fmax[i]}))
    other = json.loads((d / "build.json").read_text())   # another configuration of the same engine: not used
    other["params"]["k"] += 1
    other["worst_fmax_mhz"] = 999.0
    (Path("builds") / "other.json").mkdir()
    (Path("builds") / "other.json" / "build.json").write_text(json.dumps(other))
    rc, out, _ = _cli(capsys, "run", "out", "--inputs", "x.npy", "--builds", "builds", "--json")
    assert rc == 0
    res = json.loads(out)["result"]["run"]
    cyc = [d["cycles_expected"] for d in m.report()["layers"]]
    assert [d["fmax_mhz"] for d in res["layers"]] == [91.5, 123.25]
    assert res["latency_us"] == pytest.approx(cyc[0] / 91.5 + cyc[1] / 123.25)
    assert res["inferences_per_s"] == pytest.approx(1e6 / res["latency_us"])
    assert engine_config(m.stages[0].params) in res["layers"][0]["build_json"]
    assert res["clock_from"] == "each engine configuration out of context"
    # the model's ONE combined board top measured (hwcosim build OUT/): every layer at its clock, not the
    # engines' own (alone, out of context: optimistic for the whole top); another top's build is not used
    from hwcosim.cosim.compile_board import COMBINED, combined_config
    from hwcosim.cosim.flow.build import _jsonable

    cfg, _ = combined_config(m.stages)
    top = {"design": COMBINED.name, "params": _jsonable(cfg.to_dict()), "mode": "board", "worst_fmax_mhz": 48.5}
    (Path("builds") / "compiled-top").mkdir()
    (Path("builds") / "compiled-top" / "build.json").write_text(json.dumps(top))
    other_top = dict(top, worst_fmax_mhz=999.0, params={"engines": top["params"]["engines"][:1]})
    (Path("builds") / "compiled-other").mkdir()
    (Path("builds") / "compiled-other" / "build.json").write_text(json.dumps(other_top))
    rc, out, _ = _cli(capsys, "run", "out", "--inputs", "x.npy", "--builds", "builds")
    assert rc == 0 and "at the measured Fmax of the model's combined board top" in out
    rc, out, _ = _cli(capsys, "run", "out", "--inputs", "x.npy", "--builds", "builds", "--json")
    res = json.loads(out)["result"]["run"]
    assert [d["fmax_mhz"] for d in res["layers"]] == [48.5, 48.5]
    assert res["clock_from"] == "the model's combined board top"
    assert res["latency_us"] == pytest.approx(sum(cyc) / 48.5)


# -- bad input: exit 2, one line, nothing written -----------------------------------------------------

def _refused(capsys, argv, needle, never: str):
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2, (rc, out, err)
    line = err.strip()
    assert "\n" not in line and re.search(needle, line), line
    assert not Path(never).exists()


def test_compile_refuses_bad_input(files, capsys):
    import onnx

    onnx.save(_model([helper.make_node("Gather", ["x", "idx"], ["y"], name="pick")],
                     {"idx": np.array([0], dtype=np.int64)}, ["N", 16], ["N", 4]), "bad.onnx")
    w = mlp_weights()
    w["W1"][0, 0] = np.nan
    onnx.save(mlp(w), "nan.onnx")
    onnx.save(lstm_model(), "lstm.onnx")
    onnx.save(cnn(), "cnn.onnx")
    xn = X_MLP.copy()
    xn[3, 3] = np.nan
    np.save("xnan.npy", xn)
    np.save("xseq.npy", X_SEQ)
    np.save("img.npy", X_IMG)
    base = ["--calibration", "x.npy", "-o", "new"]
    _refused(capsys, ["compile", "bad.onnx", *base], r"'pick' \(Gather\)", "new")
    _refused(capsys, ["compile", "nan.onnx", *base], r"'W1' holds 1 NaN", "new")
    _refused(capsys, ["compile", "mlp.onnx", "--calibration", "xnan.npy", "-o", "new"], "NaN", "new")
    _refused(capsys, ["compile", "lstm.onnx", "--target", "fss", "--calibration", "xseq.npy", "-o", "new"],
             r"'lstm' \(lstm\) cannot map to the fss target; compile it with --target bbs", "new")
    _refused(capsys, ["compile", "cnn.onnx", "--target", "bbs", "--calibration", "img.npy", "-o", "new"],
             r"'conv1' \(conv\) cannot map to the bbs target; compile it with --target fss", "new")
    _refused(capsys, ["compile", "mlp.onnx", "--target", "tpu", *base], "target 'tpu'", "new")
    _refused(capsys, ["compile", "mlp.onnx", "--pattern", "nm", *base], "pattern 'nm'", "new")
    _refused(capsys, ["compile", "mlp.onnx", "--calibration", "img.npy", "-o", "new"], r"inputs of shape", "new")
    _refused(capsys, ["compile", "mlp.onnx", "-o", "new"], "calibration", "new")


def test_run_refuses_bad_input(files, capsys):
    np.save("x15.npy", X_MLP[:, :15])
    np.save("y63.npy", np.zeros(63, dtype=np.int64))
    np.save("y9.npy", np.full(64, 9))
    _refused(capsys, ["run", "out", "--inputs", "x15.npy", "-o", "run"], r"inputs of shape \[64, 15\]", "run")
    _refused(capsys, ["run", "out", "--inputs", "x.npy", "--labels", "y63.npy", "-o", "run"],
             r"--labels has shape \[63\]; .* shape \[64\]", "run")
    _refused(capsys, ["run", "out", "--inputs", "x.npy", "--labels", "y9.npy", "-o", "run"], "classes 9..9", "run")
    _refused(capsys, ["run", "out", "--inputs", "nope.npy", "-o", "run"], "no such file", "run")
    Path("out/report.json").write_text("{}")
    _refused(capsys, ["run", "out", "--inputs", "x.npy", "-o", "run"], "report.json changed", "run")


# -- the FSS target ---------------------------------------------------------------------------------

def _fss_bound(m: CompiledModel, x) -> tuple[np.ndarray, float]:
    """The network in float64 with the engines' own (dequantised) weights and biases, and a worst-case
    bound on |predict - it| from the formats: each engine layer carries the error in through its
    largest row sum of |W| and adds its input's and output's rounding (lsb/2 each); ReLU and max
    pooling are 1-Lipschitz, average pooling too, plus its own rounding (lsb/2); a residual add sums
    its branches' errors and the rounding of both into its format (lsb/2 each)."""
    from hwcosim.cosim.compile import _fss_dense_raw, conv_float, pool_float
    from hwcosim.models.fixedpoint import dequantize

    a, e, fmt = np.asarray(x, dtype=np.float64), 0.0, None
    slots = {}
    for pos, lay in enumerate(m.network.layers):
        st = m._by_layer.get(id(lay))
        if lay.kind == "skip":
            slots[lay.attrs["slot"]] = (a, e)
        elif lay.kind == "add":
            b, eb = slots.pop(lay.attrs["slot"])
            a, fmt = a + b, m.host_fmts[pos]
            e = e + eb + fmt.lsb
        elif st is not None:
            p = st.params
            o, i = lay.w.shape
            wq = dequantize(_fss_dense_raw(st), p.weight_fmt)[:o, :i]
            e = np.abs(wq).sum(axis=1).max() * (e + p.act_fmt.lsb / 2) + p.out_fmt.lsb / 2
            fmt = p.out_fmt
            if lay.kind == "conv":
                a = conv_float(a, wq, type(lay)("conv", lay.name, attrs=lay.attrs))
            else:
                a = a @ wq.T
            if st.bias_raw is not None:
                b = dequantize(st.bias_raw, p.out_fmt)
                a = a + (b[None, :, None, None] if lay.kind == "conv" else b)
        elif lay.kind == "relu":
            a = np.maximum(a, 0)
        elif lay.kind in ("maxpool", "avgpool"):
            a = pool_float(a, lay)
            e += fmt.lsb / 2 if lay.kind == "avgpool" else 0
        elif lay.kind == "flatten":
            a = a.reshape(a.shape[0], -1)
    return a, e


def test_fss_cnn_reads_like_onnxruntime_and_predicts_within_the_bound():
    model = cnn()
    m = hwcosim.compile(model, target="fss", sparsity=0.5, calibration=X_IMG)
    assert np.abs(m.predict_float(X_IMG, pruned=False) - ort(model, X_IMG)).max() < 1e-5
    ref, bound = _fss_bound(m, X_IMG)
    err = np.abs(m.predict(X_IMG) - ref).max()
    assert 0 < err <= bound < 0.05, (err, bound)
    r = m.report()
    assert [d["engine"] for d in r["layers"]] == ["fss-gemm"] * 3
    assert [d["padded_shape"] for d in r["layers"]] == [[4, 16], [8, 40], [4, 8]]
    assert all(d["sparsity"] == 0.5 and d["n"] == 8 for d in r["layers"])
    assert all(d["saturated_words"] == 0 for d in r["layers"])
    assert r["host_ops"] == ["relu", "maxpool", "relu", "avgpool", "flatten"]
    # per image: conv1 has 64 output positions (16 tiles of pe_cols=2), the FSS cycle model's ideal
    assert r["layers"][0]["cycles_ideal"] == 64 // 2 * (4 // 4) * (16 // 8)


def resnet(seed=3):
    """A residual block: Conv (stem) -> Relu -> [Conv -> Relu -> Conv] + skip -> Relu -> MaxPool -> Gemm."""
    rng = np.random.default_rng(seed)
    inits = {"K1": rng.normal(0, 0.5, (4, 1, 3, 3)), "K2": rng.normal(0, 0.3, (4, 4, 3, 3)), "c2": rng.normal(0, .1, 4),
             "K3": rng.normal(0, 0.3, (4, 4, 3, 3)), "Wf": rng.normal(0, 0.3, (3, 64)), "bf": rng.normal(0, .1, 3)}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes = [helper.make_node("Conv", ["x", "K1"], ["h1"], name="stem", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "K2", "c2"], ["h2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
             helper.make_node("Conv", ["a2", "K3"], ["h3"], name="conv3", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["h3", "a1"], ["r"], name="res"),
             helper.make_node("Relu", ["r"], ["ar"], name="relu3"),
             helper.make_node("MaxPool", ["ar"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "Wf", "bf"], ["y"], name="fc", transB=1)]
    return _model(nodes, inits, ["N", 1, 8, 8], ["N", 3], "res")


def test_fss_residual_block_adds_on_the_host():
    model = resnet()
    for s in (0.0, 0.5):
        m = hwcosim.compile(model, target="fss", sparsity=s, calibration=X_IMG)
        assert np.abs(m.predict_float(X_IMG, pruned=False) - ort(model, X_IMG)).max() < 1e-5
        ref, bound = _fss_bound(m, X_IMG)
        err = np.abs(m.predict(X_IMG) - ref).max()
        assert 0 < err <= bound, (s, err, bound)   # worst case: the stem's and both convs' row sums of |W| multiply
        assert m.report()["host_ops"] == ["relu", "skip", "relu", "add", "relu", "maxpool", "flatten"]
    # an Add of a tensor the chain did not branch from is refused, naming the node
    bad = [helper.make_node("Gemm", ["x", "W"], ["h"], name="fc", transB=1),
           helper.make_node("Add", ["h", "k"], ["y"], name="plus")]
    with pytest.raises(hwcosim.UsageError, match=r"'plus' \(Add\): only a residual Add"):
        hwcosim.compile(_model(bad, {"W": np.ones((4, 16), np.float32), "k": np.ones(4, np.float32)},
                               ["N", 16], ["N", 4]), target="fss", calibration=X_MLP)


def test_fss_mlp_dense_and_pruned_within_the_bound():
    model = mlp()
    for s in (0.0, 0.75):
        m = hwcosim.compile(model, target="fss", sparsity=s, calibration=X_MLP)
        ref, bound = _fss_bound(m, X_MLP)
        # the softmax carries at most half the logits' error (tests/flow/test_compile.py rounding_bound)
        logits = m.predict(X_MLP)
        e = np.exp(ref - ref.max(axis=1, keepdims=True))
        assert np.abs(logits - e / e.sum(axis=1, keepdims=True)).max() <= bound / 2
        assert [d["n"] for d in m.report()["layers"]] == [16 if s == 0 else 4] * 2


def test_host_pooling_in_fixed_point_equals_float_pooling_of_the_words():
    from hwcosim.cosim.compile import pool_float
    from hwcosim.pruning.frontends import Layer

    raw = RNG.integers(-2000, 2000, size=(2, 3, 6, 6))
    for kind in ("maxpool", "avgpool"):
        lay = Layer(kind, "p", attrs={"kernel": [2, 3], "strides": [2, 3]})
        got = pool_raw(raw, lay)
        want = pool_float(raw, lay)
        assert got.shape == (2, 3, 3, 2)
        assert (np.array_equal(got, want) if kind == "maxpool" else np.abs(got - want).max() <= 0.5)
    lay = Layer("conv", "c", attrs={"channels": 3, "kernel": [2, 2], "strides": [1, 1], "pads": [0, 0, 0, 0]})
    cols, shape = im2col(np.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4), lay)
    assert cols.shape == (12, 2 * 3 * 3) and shape == (2, 3, 3)
    assert list(cols[:, 0]) == [0, 1, 4, 5, 16, 17, 20, 21, 32, 33, 36, 37]


# -- RTL -------------------------------------------------------------------------------------------

@pytest.mark.sim
def test_run_rtl_equals_golden_in_every_word(files, capsys, monkeypatch):
    monkeypatch.setenv("HWCOSIM_BUILD", str(BUILD))   # the shared Verilator builds (files chdir'ed away)
    np.save("x3.npy", X_MLP[:3])
    rc, out, err = _cli(capsys, "run", "out", "--inputs", "x3.npy", "--rtl", "-o", "run")
    assert rc == 0, err
    assert re.search(r"RTL = golden in 100% of 108 words over 2 engine layers", out), out
    res = json.loads(Path("run/run.json").read_text())
    assert [Path(d["run_dir"]).is_dir() for d in res["rtl"]["layers"]] == [True, True]


@pytest.mark.slow
@pytest.mark.sim
def test_fss_cnn_simulate_equals_predict_in_every_word(tmp_path):
    m = hwcosim.compile(cnn(), target="fss", sparsity=0.5, calibration=X_IMG)
    r = m.simulate(X_IMG[:2], out=tmp_path)
    assert r["ok"] and [d["engine"] for d in r["layers"]] == ["fss-gemm"] * 3
    assert r["words"] == sum(w[1].size for w in m._run(X_IMG[:2], trace=True)[1])

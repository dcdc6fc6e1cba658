"""``hwcosim.compile``: a user's ONNX / npz network on the BBS engines (docs/compile.md).

- the front end reads what it claims (its float reference agrees with onnxruntime) and refuses the
  rest with one line naming the op and the node; NaN weights and calibration are refused;
- ``predict`` (the accelerator's golden model) is within a bound derived from the chosen formats of
  the float network; the report and the saved folder hold what they say;
- RTL (marked ``sim``): ``simulate`` equals ``predict`` in every word; a word planted into
  ``predict``'s layer output is reported with its layer, input and row;
- docs/compile.md runs as written.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from hwcosim.cosim.compile import CompiledModel
from hwcosim.cosim.compile import engine_config as hwcosim_config
from onnx import TensorProto, helper, numpy_helper

import hwcosim

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compile.md"
#: the PLAN approximations' max errors (hwcosim.models.bbs.lstm.plan_sigmoid: sigmoid 0.019, tanh 2x)
PLAN_SIGMOID, PLAN_TANH = 0.019, 0.038


def _model(nodes, inits, in_shape, out_shape, name="m"):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def mlp_weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"W1": rng.normal(0, 0.4, (32, 16)).astype(np.float32), "b1": rng.normal(0, 0.1, 32).astype(np.float32),
            "W2": rng.normal(0, 0.3, (32, 4)).astype(np.float32), "b2": rng.normal(0, 0.1, 4).astype(np.float32)}


def mlp(w=None):
    """16-32-4: Gemm (transB) -> Relu -> MatMul + Add -> Softmax."""
    w = mlp_weights() if w is None else w
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h1"], name="fc1", transB=1),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("MatMul", ["a1", "W2"], ["m2"], name="fc2"),
             helper.make_node("Add", ["m2", "b2"], ["h2"], name="fc2_bias"),
             helper.make_node("Softmax", ["h2"], ["y"], name="softmax", axis=-1)]
    return _model(nodes, w, ["N", 16], ["N", 4], "mlp")


def lstm_model(T=4, I=8, H=16, C=4, seed=0):
    """LSTM (H=16) on (T, N, I) -> Y_h -> Reshape (N, H) -> Gemm -> logits."""
    rng = np.random.default_rng(seed)
    inits = {"W": rng.normal(0, 0.4, (1, 4 * H, I)).astype(np.float32),
             "R": rng.normal(0, 0.25, (1, 4 * H, H)).astype(np.float32),
             "B": rng.normal(0, 0.1, (1, 8 * H)).astype(np.float32),
             "Wo": rng.normal(0, 0.4, (C, H)).astype(np.float32), "bo": rng.normal(0, 0.1, C).astype(np.float32),
             "shape": np.array([-1, H], dtype=np.int64)}
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["", "Y_h"], name="lstm", hidden_size=H),
             helper.make_node("Reshape", ["Y_h", "shape"], ["hf"], name="reshape"),
             helper.make_node("Gemm", ["hf", "Wo", "bo"], ["y"], name="out", transB=1)]
    return _model(nodes, inits, [T, "N", I], ["N", C], "lstm")


def ort(model, x):
    return ort_input(model, "x", x)


def ort_input(model, name, x):
    import onnxruntime as rt

    s = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {name: np.asarray(x, dtype=np.float32)})[0]


X_MLP = np.random.default_rng(1).normal(size=(64, 16))
X_SEQ = np.random.default_rng(2).normal(size=(4, 32, 8))   # (T, N, I)


def quantised_float(m: CompiledModel, x: np.ndarray) -> np.ndarray:
    """A dense chain in float64 with the engine's own weights and biases (dequantised) and exact
    activations: what ``predict`` computes, minus the rounding between layers and the PLAN
    approximations of sigmoid and tanh."""
    from hwcosim.cosim.compile import _dense_raw
    from hwcosim.models.fixedpoint import dequantize

    a = x
    for lay in m.network.layers:
        st = m._by_layer.get(id(lay))
        if st is not None:
            o, i = lay.w.shape
            a = a @ dequantize(_dense_raw(st), st.params.weight_fmt)[:o, :i].T
            if st.bias_raw is not None:
                a = a + dequantize(st.bias_raw, st.params.out_fmt)
        elif lay.kind == "relu":
            a = np.maximum(a, 0)
        elif lay.kind == "sigmoid":
            a = 1 / (1 + np.exp(-a))
        elif lay.kind == "tanh":
            a = np.tanh(a)
        elif lay.kind == "softmax":
            e = np.exp(a - a.max(axis=-1, keepdims=True))
            a = e / e.sum(axis=-1, keepdims=True)
    return a


def rounding_bound(m: CompiledModel) -> float:
    """Worst-case |predict - quantised_float| from the formats, layer by layer: the requantisation
    into an engine's vector format (lsb/2; the first is the input's rounding); the error carried
    through the engine (times its largest row sum of |W|) and its rounding of the result (lsb/2; the
    bias add is exact); ReLU is 1-Lipschitz; sigmoid and tanh carry 1/4 and 1 of the error in and add
    their PLAN error and one output lsb (the PLAN shifts truncate); softmax carries at most 1/2 (its
    Jacobian's rows sum to 2 p (1 - p) <= 1/2 in absolute value)."""
    from hwcosim.cosim.compile import ACT_FRAC, _dense_raw
    from hwcosim.models.fixedpoint import dequantize

    e = 0.0
    for lay in m.network.layers:
        st = m._by_layer.get(id(lay))
        if st is not None:
            w = np.abs(dequantize(_dense_raw(st), st.params.weight_fmt))
            e = w.sum(axis=1).max() * (e + st.params.vec_fmt.lsb / 2) + st.params.out_fmt.lsb / 2
        elif lay.kind == "sigmoid":
            e = e / 4 + PLAN_SIGMOID + 2.0 ** -ACT_FRAC
        elif lay.kind == "tanh":
            e = e + PLAN_TANH + 2.0 ** -ACT_FRAC
        elif lay.kind == "softmax":
            e = e / 2
    return e


# -- front end and golden model ------------------------------------------------------------------

@pytest.mark.parametrize("sparsity", [0.0, 0.5])
def test_mlp_predict_within_the_rounding_bound(sparsity):
    model = mlp()
    m = hwcosim.compile(model, target="bbs", sparsity=sparsity, calibration=X_MLP)
    ref = ort(model, X_MLP)
    assert np.abs(m.predict_float(X_MLP, pruned=False) - ref).max() < 1e-5   # the front end reads the model
    y = m.predict(X_MLP)
    bound = rounding_bound(m)
    err = np.abs(y - quantised_float(m, X_MLP)).max()
    assert 0 < err <= bound < 1e-2, (err, bound)
    # the weights' 8-bit rounding is the rest of the error vs the float network: the report's figure
    assert m.report()["output_max_abs_err_vs_float_pruned"] == np.abs(y - m.predict_float(X_MLP)).max()
    if sparsity == 0:
        assert (y.argmax(axis=1) == ref.argmax(axis=1)).mean() >= 0.95
    r = m.report()
    assert [d["engine"] for d in r["layers"]] == ["bbs-spmxv", "bbs-spmxv"]
    assert [d["sparsity"] for d in r["layers"]] == [sparsity, sparsity]
    assert all(d["saturated_words"] == 0 for d in r["layers"])
    assert r["layers"][0]["k"] == r["layers"][0]["bank_size"] * (1 - sparsity)
    assert r["host_ops"] == ["relu", "softmax"]


@pytest.mark.parametrize("sparsity", [0.0, 0.5])
def test_lstm_predict_close_to_float(sparsity):
    model = lstm_model()
    m = hwcosim.compile(model, sparsity=sparsity, calibration=X_SEQ)
    ref = ort(model, X_SEQ)
    assert np.abs(m.predict_float(X_SEQ, pruned=False) - ref).max() < 1e-5   # gate order (i,o,f,c) converted
    y = m.predict(X_SEQ)
    # the hidden state's error budget is one step's PLAN error (3 sigmoids and a tanh on the gates);
    # forget gates < 1 contract what earlier steps leave; the readout adds its own rounding
    out = m.stages[1]
    e_h = 3 * PLAN_SIGMOID + PLAN_TANH
    tol = (np.abs(out.w_pruned).sum(axis=1).max() * e_h + out.params.weight_fmt.lsb / 2 * out.w_pruned.shape[1]
           + 2 * out.params.out_fmt.lsb)
    assert np.abs(y - m.predict_float(X_SEQ)).max() <= tol
    if sparsity == 0:
        assert np.abs(y - ref).max() <= tol
    r = m.report()
    lay = r["layers"][0]
    assert lay["engine"] == "bbs-lstm" and lay["shape"] == [64, 24] and lay["pad_hidden"] == 0
    assert lay["cycles_per"] == "sequence of 4 steps" and lay["cycles_expected"] > lay["cycles_ideal"] > 0
    assert all(d["saturated_words"] == 0 for d in r["layers"])


def test_lstm_input_and_hidden_padding():
    model = lstm_model(I=5, H=10)            # 5 inputs and 10 units do not fill banks of 4
    x = np.random.default_rng(3).normal(size=(4, 16, 5))
    m = hwcosim.compile(model, sparsity=0.5, calibration=x)
    lay = m.report()["layers"][0]
    assert (lay["pad_input"], lay["pad_hidden"], lay["padded_shape"]) == (3, 2, [48, 20])
    assert np.abs(m.predict_float(x, pruned=False) - ort(model, x)).max() < 1e-5
    _, words, _ = m._run(x, trace=True)
    assert not words[0][1][..., 10:].any()   # the padded units stay exactly zero in the engine's words
    out = m.stages[1]
    tol = np.abs(out.w_pruned).sum(axis=1).max() * (3 * PLAN_SIGMOID + PLAN_TANH) + out.params.out_fmt.lsb
    assert np.abs(m.predict(x) - m.predict_float(x)).max() <= tol


def test_npz_and_toml_give_the_same_accelerator(tmp_path):
    w = mlp_weights()
    np.savez(tmp_path / "net.npz", **{"fc1.W": w["W1"], "fc1.b": w["b1"], "fc2.W": w["W2"].T, "fc2.b": w["b2"]})
    (tmp_path / "net.toml").write_text(
        '[[layer]]\nkind = "dense"\nname = "fc1"\nweight = "fc1.W"\nbias = "fc1.b"\nactivation = "relu"\n'
        '[[layer]]\nkind = "dense"\nname = "fc2"\nweight = "fc2.W"\nbias = "fc2.b"\nactivation = "softmax"\n')
    a = hwcosim.compile(tmp_path / "net.npz", sparsity=0.5, calibration=X_MLP)
    b = hwcosim.compile(mlp(w), sparsity=0.5, calibration=X_MLP)
    assert np.array_equal(a.predict(X_MLP), b.predict(X_MLP))
    (tmp_path / "bad.toml").write_text('[[layer]]\nkind = "conv"\nweight = "fc1.W"\n')
    with pytest.raises(hwcosim.UsageError, match="kind = 'conv'"):
        hwcosim.compile(tmp_path / "net.npz", description=tmp_path / "bad.toml", calibration=X_MLP)


def test_host_sigmoid_and_tanh_within_the_plan_bound(tmp_path):
    w = mlp_weights()
    np.savez(tmp_path / "net.npz", W1=w["W1"], b1=w["b1"], W2=w["W2"].T)
    (tmp_path / "net.toml").write_text('[[layer]]\nkind = "dense"\nweight = "W1"\nbias = "b1"\nactivation = "tanh"\n'
                                       '[[layer]]\nkind = "dense"\nweight = "W2"\nactivation = "sigmoid"\n')
    m = hwcosim.compile(tmp_path / "net.npz", sparsity=0.5, calibration=X_MLP)
    assert m.report()["host_ops"] == ["tanh", "sigmoid"]
    err = np.abs(m.predict(X_MLP) - quantised_float(m, X_MLP)).max()
    bound = rounding_bound(m)
    assert 0 < err <= bound < 0.5, (err, bound)


def test_saturations_are_counted():
    m = hwcosim.compile(mlp(), sparsity=0.5, calibration=X_MLP)
    assert m.saturations(X_MLP) == [0, 0] == [d["saturated_words"] for d in m.report()["layers"]]
    sat = m.saturations(8 * X_MLP)            # far beyond the calibration range
    assert sat[0] >= int((np.abs(8 * X_MLP) > m.input_fmt.max_value).sum()) > 0


def test_padding_is_reported():
    m = hwcosim.compile(mlp(), sparsity=0.0, calibration=X_MLP, banks=4, pes=8)
    fc2 = m.report()["layers"][1]
    assert fc2["shape"] == [4, 32] and fc2["padded_shape"] == [8, 32] and fc2["pad_rows"] == 4
    assert np.array_equal(m.predict(X_MLP).shape, (64, 4))


def test_save_writes_a_checked_folder(tmp_path):
    m = hwcosim.compile(mlp(), sparsity=0.5, calibration=X_MLP)
    out = m.save(tmp_path / "out")
    man = json.loads((out / "manifest.json").read_text())
    stems = {f"engine-{s.engine}-{hwcosim_config(s.params)}" for s in m.stages}
    assert set(man["files"]) == ({"layer00-fc1.npz", "layer01-fc2.npz", "report.json", "network.json", "network.npz",
                                  "calibration.npy"} | {f"{s}.v" for s in stems} | {f"{s}.toml" for s in stems})
    for name, digest in man["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(m.report()))
    z = np.load(out / "layer00-fc1.npz")
    assert np.array_equal(z["values"], m.stages[0].values)
    assert json.loads(z["params"].tobytes()) == m.stages[0].params.to_dict()


def _one_line(e: Exception) -> str:
    s = str(e)
    assert "\n" not in s, s
    return s


@pytest.mark.parametrize("node,needle", [
    (helper.make_node("Gather", ["x", "idx"], ["y"], name="pick"), r"'pick' \(Gather\)"),
    (helper.make_node("Conv", ["x", "K"], ["y"], name="conv1", group=2), r"'conv1' \(Conv\)"),
    (helper.make_node("Gemm", ["x", "K2"], ["y"], name="scaled", alpha=2.0), r"'scaled' \(Gemm\).*alpha"),
], ids=["gather", "conv", "gemm-alpha"])
def test_unsupported_ops_are_refused_with_one_line(node, needle):
    inits = {"idx": np.array([0], dtype=np.int64), "K": np.zeros((4, 1, 3, 3), np.float32),
             "K2": np.zeros((16, 4), np.float32)}
    inits = {k: v for k, v in inits.items() if k in node.input}
    model = _model([node], inits, ["N", 16], ["N", 4], "bad") if node.op_type != "Conv" else None
    if model is None:  # Conv: a 4-D input
        g = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(inits["K"], "K")])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(hwcosim.UsageError) as e:
        hwcosim.compile(model, calibration=X_MLP)
    assert re.search(needle, _one_line(e.value)), str(e.value)


def test_nan_weights_calibration_and_targets_are_refused():
    w = mlp_weights()
    w["W1"][3, 4] = np.nan
    with pytest.raises(hwcosim.UsageError, match="'W1' holds 1 NaN"):
        hwcosim.compile(mlp(w), calibration=X_MLP)
    bad = X_MLP.copy()
    bad[0, 0] = np.nan
    with pytest.raises(hwcosim.UsageError, match="NaN"):
        hwcosim.compile(mlp(), calibration=bad)
    with pytest.raises(hwcosim.UsageError, match="target 'tpu'"):
        hwcosim.compile(mlp(), target="tpu", calibration=X_MLP)
    with pytest.raises(hwcosim.UsageError, match="calibration"):
        hwcosim.compile(mlp())
    with pytest.raises(hwcosim.UsageError, match="takes"):
        hwcosim.compile(mlp(), calibration=X_MLP).predict(np.zeros((2, 15)))


# -- RTL -------------------------------------------------------------------------------------------

@pytest.mark.sim
@pytest.mark.parametrize("which,sparsity", [("mlp", 0.0), ("mlp", 0.5), ("lstm", 0.5)])
def test_simulate_equals_predict_in_every_word(which, sparsity, tmp_path):
    model, x = (mlp(), X_MLP) if which == "mlp" else (lstm_model(), X_SEQ)
    m = hwcosim.compile(model, sparsity=sparsity, calibration=x)
    xs = x[:3] if which == "mlp" else x[:2]   # LSTM: the first two steps of every sequence
    r = m.simulate(xs, out=tmp_path)
    assert r["ok"] and [d["engine"] for d in r["layers"]] == [s.engine for s in m.stages]
    _, words, _ = m._run(xs, trace=True)
    assert r["words"] == sum(w[1].size for w in words)
    for d in r["layers"]:
        assert d["cycles"] == d["expected"]   # the cycle models the report uses are exact here


@pytest.mark.sim
def test_a_planted_mismatch_names_its_layer(tmp_path, monkeypatch):
    m = hwcosim.compile(mlp(), sparsity=0.5, calibration=X_MLP)
    run = CompiledModel._run

    def planted(self, x, trace=False):
        out, words, stats = run(self, x, trace)
        if trace:
            words[1][1][1, 2] += 1   # layer 1 (fc2), input 1, row 2: one golden word off by one
        return out, words, stats

    monkeypatch.setattr(CompiledModel, "_run", planted)
    with pytest.raises(hwcosim.CheckFailed, match=r"layer 1 \('fc2', bbs-spmxv\): 1 of 12 words differ.*"
                                                  r"input 1, row 2"):
        m.simulate(X_MLP[:3], out=tmp_path)


# -- the page --------------------------------------------------------------------------------------

def _page() -> str:
    """The page up to the issue's examples (tests/flow/test_compile_examples.py runs those)."""
    return DOC.read_text().split("\n## Examples of the issue")[0]


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", _page(), flags=re.S | re.M)


def _commands() -> list[str]:
    """The ``hwcosim`` command lines of the page's ``sh`` blocks, in order."""
    blocks = re.findall(r"^```sh\n(.*?)^```", _page(), flags=re.S | re.M)
    return [line.strip() for b in blocks for line in b.splitlines() if line.strip().startswith("hwcosim ")]


def _run_commands(commands) -> None:
    import shlex

    from hwcosim.cosim.cli import main

    for line in commands:
        rc = main(shlex.split(line)[1:])
        assert rc == 0, f"{DOC.name}: `{line}` exited with {rc}"


def _run_blocks(blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{DOC.name} python block {i + 1}", "exec"), ns)  # noqa: S102
        except Exception as e:
            raise AssertionError(f"{DOC.name} python block {i + 1} failed: {e!r}\n{block}") from e
    return ns


def test_docs_example_runs_as_written(tmp_path, monkeypatch):
    blocks = _blocks()
    assert len(blocks) == 6 and "m.simulate(" in blocks[1]
    ns = _run_blocks([b for b in blocks if ".simulate(" not in b], tmp_path, monkeypatch)
    assert (tmp_path / "mlp-bbs" / "manifest.json").is_file()
    ref = ort(onnx.load(tmp_path / "mlp.onnx"), ns["x"])
    assert np.abs(ns["m"].predict_float(ns["x"], pruned=False) - ref).max() < 1e-5
    assert [d["method"] for d in ns["mm"].report()["layers"]] == ["obs", "obs"]
    assert ns["rep"]["kind"] == "bert" and ns["emb"].shape == (1, 32)
    images = ns["images"]
    assert np.abs(ns["cnn"].predict_float(images, pruned=False) - ort_input(onnx.load(tmp_path / "cnn.onnx"),
                                                                             "img", images)).max() < 1e-5
    commands = _commands()
    assert len(commands) == 3 and sum("--rtl" in c for c in commands) == 1
    _run_commands([c for c in commands if "--rtl" not in c])
    assert json.loads((tmp_path / "mlp-run" / "run.json").read_text())["n"] == len(ns["x"])


@pytest.mark.sim
def test_docs_page_runs_as_written_with_rtl(tmp_path, monkeypatch):
    from hwcosim.cosim.flow.runner import build_root

    monkeypatch.setenv("HWCOSIM_BUILD", str(build_root()))  # the shared Verilator builds, from any folder
    _run_blocks(_blocks(), tmp_path, monkeypatch)
    _run_commands(_commands())

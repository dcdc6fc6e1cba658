"""ONNX as a weight source and as the dense output of ``hwcosim prune``."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="package onnx not installed (pip install onnx)")
from hwcosim.pruning.io import WeightIOError, load_tensors  # noqa: E402
from hwcosim.pruning.onnx_io import OnnxIOError, consumers, load_onnx, write_onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def run(argv):
    """Through the one dispatcher (``hwcosim ...``): errors become exit status 2 (1 for a failed check)."""
    from hwcosim.cosim.cli import main

    return main(argv)


def mlp(path, rng=None):
    """x (n, 32) -> Gemm(W1 (16, 32), b1, transB=1) -> Relu -> MatMul(W2 (16, 8)) -> y (n, 8)."""
    rng = rng or np.random.default_rng(0)
    w = {
        "fc1.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "fc1.bias": rng.standard_normal(16).astype(np.float32),
        "fc2.weight": rng.standard_normal((16, 8)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "fc2.weight"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
        initializer=[numpy_helper.from_array(a, k) for k, a in w.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    model.ir_version = 8  # readable by older onnxruntime builds too
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return w


def forward(w, x):
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    return h @ w["fc2.weight"]


def test_load_initialisers(tmp_path):
    w = mlp(tmp_path / "m.onnx")
    got = load_tensors(tmp_path / "m.onnx")
    assert list(got) == list(w)
    for k in w:
        np.testing.assert_array_equal(got[k], w[k])
    assert consumers(tmp_path / "m.onnx") == {"fc1.weight": ["Gemm[1] transB"], "fc1.bias": ["Gemm[2]"],
                                              "fc2.weight": ["MatMul[1]"]}


def test_prune_onnx_round_trip(tmp_path):
    w = mlp(tmp_path / "m.onnx")
    out = tmp_path / "o"
    assert run(["prune", str(tmp_path / "m.onnx"), "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                "--tensors", "*.weight", "-o", str(out), "--dense-out"]) == 0
    src, dst = onnx.load(str(tmp_path / "m.onnx")), onnx.load(str(out / "m.pruned.onnx"))
    onnx.checker.check_model(dst)
    # the same graph: nodes, inputs, outputs, opsets
    assert [n.SerializeToString() for n in dst.graph.node] == [n.SerializeToString() for n in src.graph.node]
    assert dst.graph.input == src.graph.input and dst.graph.output == src.graph.output
    assert dst.opset_import == src.opset_import
    # initialisers: same names, shapes, dtypes; untouched bias bit for bit
    si = {i.name: i for i in src.graph.initializer}
    di = {i.name: i for i in dst.graph.initializer}
    assert list(si) == list(di)
    for k in si:
        assert list(si[k].dims) == list(di[k].dims) and si[k].data_type == di[k].data_type
    assert di["fc1.bias"].SerializeToString() == si["fc1.bias"].SerializeToString()
    pruned = {k: numpy_helper.to_array(v) for k, v in di.items()}
    for k in ("fc1.weight", "fc2.weight"):
        m = pruned[k] != 0
        assert (m.reshape(m.shape[0], 4, -1).sum(-1) == m.shape[1] // 8).all()  # bank-balanced, k = half a bank
        np.testing.assert_array_equal(pruned[k][m], w[k][m])
    man = json.loads((out / "manifest.json").read_text())
    assert man["dense"]["format"] == "onnx"
    assert [t["pruned"] for t in man["dense"]["tensors"]] == [True, False, True]

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed: the pruned model is not run")
    x = np.random.default_rng(5).uniform(-1, 1, (6, 32)).astype(np.float32)
    sess = ort.InferenceSession(str(out / "m.pruned.onnx"), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, forward(pruned, x), rtol=1e-5, atol=1e-5)
    # and pruning changed the function (so the comparison above is not vacuous)
    assert np.abs(y - forward(w, x)).max() > 1e-2


def test_write_onnx_checks_replacements(tmp_path):
    mlp(tmp_path / "m.onnx")
    with pytest.raises(OnnxIOError, match="no initialiser named 'nope'"):
        write_onnx(tmp_path / "m.onnx", tmp_path / "x.onnx", {"nope": np.zeros(3)})
    with pytest.raises(OnnxIOError, match="replacement has shape"):
        write_onnx(tmp_path / "m.onnx", tmp_path / "x.onnx", {"fc1.weight": np.zeros((32, 16))})
    assert not (tmp_path / "x.onnx").exists()


def test_bad_onnx_files(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"\x00\xffnot a protobuf" * 10)
    with pytest.raises(WeightIOError, match="not a readable ONNX model"):
        load_tensors(tmp_path / "bad.onnx")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph), str(tmp_path / "empty.onnx"))
    with pytest.raises(OnnxIOError, match="no initialisers"):
        load_onnx(tmp_path / "empty.onnx")


def test_cli_bad_onnx_is_one_error_line(tmp_path, capsys):
    (tmp_path / "bad.onnx").write_bytes(b"garbage")
    code = run(["prune", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "o")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and "ONNX" in err[0]

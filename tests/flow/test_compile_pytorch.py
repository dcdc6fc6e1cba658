"""``hwcosim.compile`` of LSTM classifiers exported the PyTorch way (``torch.onnx.export`` of
``nn.LSTM(batch_first=True)``), built here with the ``onnx`` helper in the node patterns torch emits
(its TorchScript exporter, opset 11+: ``aten::select`` is a ``Gather``; opset 9/10: ``Slice`` +
``Squeeze``):

- ``out, _ = lstm(x); fc(out[:, -1, :])``: ``Transpose(perm=[1, 0, 2])`` -> ``LSTM`` -> ``Y`` ->
  ``Squeeze(axes=[1])`` -> ``Transpose(perm=[1, 0, 2])`` -> ``Gather(axis=1, -1)`` -> ``Gemm``;
- ``_, (h, _) = lstm(x); fc(h[-1])``: ... -> ``Y_h`` -> ``Gather(axis=0, -1)`` -> ``Gemm``;

with the zero initial states torch passes (an initialiser, or with a dynamic batch the ``Shape`` ->
``Gather`` -> ``Unsqueeze`` -> ``Concat`` -> ``ConstantOfShape`` subgraph). Both compile; the float
reference agrees with onnxruntime; ``predict`` equals the time-major model's (tests/flow/test_compile.py
``lstm_model``, same weights) bit for bit on the same sequences; the RTL (marked ``sim``) equals the
golden model; a Transpose of another perm is refused naming its node; docs/compile.md's "PyTorch
exports" example runs as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_compile import X_SEQ, lstm_model, ort

import hwcosim

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compile.md"
X_NTI = X_SEQ.transpose(1, 0, 2)          # (N, T, I): what a batch_first model takes
H = 16


def _weights() -> dict:
    """The time-major model's weights (W, R, B, Wo, bo)."""
    return {i.name: numpy_helper.to_array(i) for i in lstm_model().graph.initializer if i.name != "shape"}


def torch_style(pattern: str, dynamic_batch: bool = False, opset: int = 14, perm=(1, 0, 2)) -> onnx.ModelProto:
    """An LSTM classifier in the node pattern ``torch.onnx.export`` gives ``nn.LSTM(batch_first=True)``:
    ``pattern`` "out" (``out[:, -1, :]``: Gather at opset 11+, Slice + Squeeze below; "out:" with a
    full-range Slice of the batch axis before the Gather) or "h" (``h[-1]``)."""
    w = _weights()
    inits = dict(w)
    inits["sq_axes"] = np.array([1], dtype=np.int64)
    inits["last"] = np.array(-1, dtype=np.int64)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="/lstm/Transpose", perm=list(perm))]
    if dynamic_batch:   # torch.zeros(1, x.size(0), H) of a dynamic batch, as the exporter leaves it
        inits.update(zero_idx=np.array(0, dtype=np.int64), one=np.array([1], dtype=np.int64),
                     hid=np.array([H], dtype=np.int64), u_axes=np.array([0], dtype=np.int64))
        nodes += [helper.make_node("Shape", ["x"], ["xs"], name="/Shape"),
                  helper.make_node("Gather", ["xs", "zero_idx"], ["n"], name="/Gather", axis=0),
                  helper.make_node("Unsqueeze", ["n", "u_axes"], ["n1"], name="/Unsqueeze"),
                  helper.make_node("Concat", ["one", "n1", "hid"], ["zshape"], name="/Concat", axis=0),
                  helper.make_node("ConstantOfShape", ["zshape"], ["h0"], name="/ConstantOfShape",
                                   value=numpy_helper.from_array(np.zeros(1, np.float32)))]
        states = ["h0", "h0"]
    else:
        inits["h0"] = np.zeros((1, 32, H), np.float32)
        states = ["h0", "h0"]
    y_out = ["Y", "", ""] if pattern.startswith("out") else ["", "Y_h", ""]
    nodes.append(helper.make_node("LSTM", ["xt", "W", "R", "B", ""] + states, y_out, name="/lstm/LSTM",
                                  hidden_size=H))
    if pattern.startswith("out"):
        nodes += [helper.make_node("Squeeze", ["Y", "sq_axes"], ["ys"], name="/lstm/Squeeze"),
                  helper.make_node("Transpose", ["ys"], ["yb"], name="/lstm/Transpose_1", perm=[1, 0, 2])]
        if pattern == "out:":   # a full-range Slice of the batch axis (out[:, ...] kept by the tracer)
            inits.update(s0=np.array([0], np.int64), s1=np.array([2 ** 63 - 1], np.int64),
                         s_ax=np.array([0], np.int64))
            nodes.append(helper.make_node("Slice", ["yb", "s0", "s1", "s_ax"], ["yb_all"], name="/Slice_all"))
            nodes.append(helper.make_node("Gather", ["yb_all", "last"], ["feat"], name="/Gather_1", axis=1))
        elif opset >= 11:
            nodes.append(helper.make_node("Gather", ["yb", "last"], ["feat"], name="/Gather_1", axis=1))
        else:
            inits.update(st=np.array([-1], np.int64), en=np.array([2 ** 63 - 1], np.int64),
                         ax=np.array([1], np.int64))
            nodes += [helper.make_node("Slice", ["yb", "st", "en", "ax"], ["sl"], name="/Slice"),
                      helper.make_node("Squeeze", ["sl", "ax"], ["feat"], name="/Squeeze_1")]
    else:
        nodes.append(helper.make_node("Gather", ["Y_h", "last"], ["feat"], name="/Gather_1", axis=0))
    nodes.append(helper.make_node("Gemm", ["feat", "Wo", "bo"], ["y"], name="/fc/Gemm", transB=1))
    g = helper.make_graph(nodes, "torch_lstm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N" if dynamic_batch else 32, 4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N" if dynamic_batch else 32, 4])],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", max(opset, 13))])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


CASES = [("out", False, 14), ("h", False, 17), ("out", True, 13), ("h", True, 14), ("out", False, 9),
         ("out:", False, 15)]


@pytest.fixture(scope="module")
def time_major():
    return hwcosim.compile(lstm_model(), target="bbs", sparsity=0.5, calibration=X_SEQ)


@pytest.mark.parametrize("pattern,dynamic,opset", CASES)
def test_pytorch_patterns_compile_and_predict_as_the_time_major_model(pattern, dynamic, opset, time_major):
    model = torch_style(pattern, dynamic, opset)
    m = hwcosim.compile(model, target="bbs", sparsity=0.5, calibration=X_NTI)
    assert [lay.kind for lay in m.network.layers] == ["lstm", "dense"]
    assert m.network.layers[0].attrs["layout"] == "nti" and m.seq_len == 4
    # the front end reads what onnxruntime runs
    assert np.abs(m.predict_float(X_NTI, pruned=False) - ort(model, X_NTI.astype(np.float32))).max() < 1e-5
    # the same weights, formats and words as the time-major model: bit for bit
    assert np.array_equal(m.predict(X_NTI), time_major.predict(X_SEQ))
    assert [s.params for s in m.stages] == [s.params for s in time_major.stages]
    with pytest.raises(hwcosim.UsageError, match=r"\(N, T, I\)"):
        m.predict(X_NTI[:, :, :5])


def test_the_folder_keeps_the_batch_first_layout(tmp_path):
    m = hwcosim.compile(torch_style("out"), target="bbs", sparsity=0.5, calibration=X_NTI)
    m.save(tmp_path / "out")
    back = hwcosim.load_compiled(tmp_path / "out")
    assert back.network.layers[0].attrs["layout"] == "nti"
    assert np.array_equal(back.predict(X_NTI[:5]), m.predict(X_NTI[:5]))


@pytest.mark.parametrize("perm,node", [((0, 2, 1), "/lstm/Transpose")])
def test_another_transpose_is_refused_naming_the_node(perm, node):
    with pytest.raises(hwcosim.UsageError, match=re.escape(f"ONNX node '{node}' (Transpose): perm=[0, 2, 1]")):
        hwcosim.compile(torch_style("out", perm=perm), calibration=X_NTI)


def test_the_whole_sequence_and_other_steps_are_refused():
    model = torch_style("out")
    gather = next(n for n in model.graph.node if n.name == "/Gather_1")
    model.graph.initializer.append(numpy_helper.from_array(np.array(0, np.int64), "first"))
    gather.input[1] = "first"    # out[:, 0, :]: the first step
    with pytest.raises(hwcosim.UsageError, match=r"'/Gather_1' \(Gather\): Gather of index 0 on axis 1 \(time\)"):
        hwcosim.compile(model, calibration=X_NTI)
    model = torch_style("h")
    model.graph.initializer.append(numpy_helper.from_array(np.ones((1, 32, H), np.float32), "h1"))
    lstm = next(n for n in model.graph.node if n.op_type == "LSTM")
    lstm.input[5] = "h1"         # a non-zero initial state
    with pytest.raises(hwcosim.UsageError, match=r"'/lstm/LSTM' \(LSTM\): input initial_h is not supported"):
        hwcosim.compile(model, calibration=X_NTI)


@pytest.mark.sim
def test_pytorch_export_run_rtl_equals_golden(tmp_path, capsys):
    """``hwcosim compile`` and ``hwcosim run --rtl`` of the ``h[-1]`` export on (N, T, I) inputs: the first
    two steps of every sequence (the engine configurations of test_compile's LSTM test: same builds)."""
    from hwcosim.cosim.cli import main

    onnx.save(torch_style("h"), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", X_NTI)
    np.save(tmp_path / "x2.npy", X_NTI[:, :2])
    assert main(["compile", str(tmp_path / "m.onnx"), "--sparsity", "0.5", "--calibration", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "out"), "--inputs", str(tmp_path / "x2.npy"), "--rtl",
                 "-o", str(tmp_path / "run")]) == 0
    assert "RTL = golden in 100% of" in capsys.readouterr().out
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    assert doc["n"] == 32 and [d["engine"] for d in doc["rtl"]["layers"]] == ["bbs-lstm", "bbs-spmxv"]
    assert main(["check", str(tmp_path / "run")]) == 0


# -- the page ---------------------------------------------------------------------------------------

def _section() -> str:
    text = DOC.read_text()
    start = text.index("\n## PyTorch exports")
    nxt = text.find("\n## ", start + 1)
    return text[start:nxt if nxt > 0 else len(text)]


def test_docs_pytorch_example_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"^```python\n(.*?)^```", _section(), flags=re.S | re.M)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    exec(compile(blocks[0], f"{DOC.name} PyTorch exports block", "exec"), ns)  # noqa: S102
    model = onnx.load(tmp_path / "torch-lstm.onnx")
    assert np.abs(ns["m"].predict_float(ns["x"], pruned=False) - ort(model, ns["x"].astype(np.float32))).max() < 1e-5

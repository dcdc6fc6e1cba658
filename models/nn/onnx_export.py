"""Export the numpy digits CNN (:class:`hwcosim.models.nn.cnn.CNN`) as an ONNX graph.

A trained model in the format users bring: ``hwcosim prune model.onnx --calibration x.npz``
then prunes its Conv and Gemm weights from onnxruntime activations, and the pruned graph
(``--dense-out``) runs in onnxruntime again, so the whole path is checked on a real trained
network rather than on random weights.

The graph is ``[Conv 3x3 pad 1 -> Relu (-> MaxPool 2x2)] x L -> Flatten -> Gemm (transB)``,
opset 17, with the initialiser names of the numpy parameters (``conv0.W``, ``fc.W`` ...). The
NCHW flatten order is the order :meth:`CNN.readout` reshapes in, so the logits match the numpy
model to float32 rounding. ``onnx`` is an optional dependency (``pip install hwcosim[onnx]``;
``make setup`` installs it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_bytes
from hwcosim.models.errors import UsageError

__all__ = ["cnn_to_onnx"]

OPSET = 17


def cnn_to_onnx(model, path: str | Path | None = None, batch: str | int = "N") -> bytes:
    """The ONNX bytes of ``model`` (a :class:`hwcosim.models.nn.cnn.CNN`); also written to ``path`` if given.

    The input is ``x`` of shape ``(batch, Cin, H, W)`` float32, the output ``logits`` ``(batch, classes)``.
    """
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:  # pragma: no cover - make setup installs onnx
        raise UsageError("exporting to ONNX needs the onnx package: pip install 'onnx>=1.16' (make setup does)") from e
    cfg = model.config
    f32 = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in model.params.items()}
    nodes, inits = [], []
    src = "x"
    for li in range(model.n_conv):
        w, b = f"conv{li}.W", f"conv{li}.b"
        inits += [numpy_helper.from_array(f32[w], w), numpy_helper.from_array(f32[b], b)]
        nodes.append(helper.make_node("Conv", [src, w, b], [f"z{li}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                      strides=[1, 1], name=f"conv{li}"))
        nodes.append(helper.make_node("Relu", [f"z{li}"], [f"r{li}"], name=f"relu{li}"))
        src = f"r{li}"
        if cfg.pool[li]:
            nodes.append(helper.make_node("MaxPool", [src], [f"p{li}"], kernel_shape=[2, 2], strides=[2, 2],
                                          name=f"pool{li}"))
            src = f"p{li}"
    nodes.append(helper.make_node("Flatten", [src], ["feat"], axis=1, name="flatten"))
    inits += [numpy_helper.from_array(f32["fc.W"], "fc.W"), numpy_helper.from_array(f32["fc.b"], "fc.b")]
    nodes.append(helper.make_node("Gemm", ["feat", "fc.W", "fc.b"], ["logits"], transB=1, name="fc"))
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, cfg.in_channels, cfg.height, cfg.width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, cfg.classes])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hwcosim")
    onnx.checker.check_model(m)
    data = m.SerializeToString()
    if path is not None:
        write_bytes(Path(path), data)
    return data

"""End to end on a real trained network in ONNX: the digits CNN exported by
:func:`hwcosim.models.nn.onnx_export.cnn_to_onnx`, pruned by ``hwcosim prune --calibration`` from
onnxruntime activations, written back with ``--dense-out`` and run in onnxruntime again."""

from __future__ import annotations

import json

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def cnn_onnx(tmp_path_factory):
    from hwcosim.models.nn.cnn import CNNConfig
    from hwcosim.models.nn.onnx_export import cnn_to_onnx
    from hwcosim.models.nn.train import TrainConfig, get_trained

    d = tmp_path_factory.mktemp("cnn")
    model, ds, info = get_trained("cnn", CNNConfig(channels=(8, 16)), TrainConfig(epochs=6), seed=0, cache_dir=d)
    cnn_to_onnx(model, d / "cnn.onnx")
    rng = np.random.default_rng(0)
    cal = ds.x_train[rng.choice(len(ds.x_train), 256, replace=False)].astype(np.float32)
    np.savez(d / "cal.npz", x=cal)
    return d, model, ds


def _accuracy(path, ds) -> float:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = s.run(None, {"x": ds.x_test.astype(np.float32)})[0]
    return float((logits.argmax(1) == ds.y_test).mean())


def test_exported_graph_matches_the_numpy_model(cnn_onnx):
    d, model, ds = cnn_onnx
    s = ort.InferenceSession(str(d / "cnn.onnx"), providers=["CPUExecutionProvider"])
    got = s.run(None, {"x": ds.x_test[:64].astype(np.float32)})[0]
    np.testing.assert_allclose(got, model.logits(ds.x_test[:64]), rtol=1e-4, atol=1e-4)
    assert _accuracy(d / "cnn.onnx", ds) == pytest.approx(model.accuracy(ds.x_test, ds.y_test), abs=1e-9)


def test_calibrated_pruning_of_the_trained_onnx_cnn(cnn_onnx, tmp_path):
    """BBS at 75% on the second Conv (8 banks per row = one bank of 9 weights per input channel): the pruned
    graph keeps the pattern exactly, runs in onnxruntime, and OBS keeps more accuracy than
    magnitude on the held-out test set (figures printed; the fidelity report names each layer)."""
    from hwcosim.cosim.cli import main

    d, model, ds = cnn_onnx
    dense = _accuracy(d / "cnn.onnx", ds)
    acc = {}
    for method in ("magnitude", "obs"):
        out = tmp_path / method
        argv = ["prune", str(d / "cnn.onnx"), "--pattern", "bbs", "--banks", "8", "--sparsity", "0.75",
                "--tensors", "conv1.W", "--method", method, "--dense-out", "-o", str(out)]
        if method != "magnitude":
            argv[argv.index("--method"):argv.index("--method")] = ["--calibration", str(d / "cal.npz"), "--report"]
        assert main(argv) == 0
        pruned = out / "cnn.pruned.onnx"
        m = onnx.load(str(pruned))
        w = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
        k = w["conv1.W"].reshape(w["conv1.W"].shape[0], -1)  # (16, 8*9): banks of 9 = one input channel
        nz = (k.reshape(k.shape[0], -1, 9) != 0).sum(axis=2)
        assert (nz == nz.flat[0]).all() and nz.flat[0] in (2, 3), nz  # every bank keeps the same count
        np.testing.assert_array_equal(w["conv0.W"], model.params["conv0.W"].astype(np.float32))  # not selected
        acc[method] = _accuracy(pruned, ds)
        if method == "obs":
            rep = json.loads((out / "fidelity.json").read_text())
            assert "conv1.W" in json.dumps(rep)
    print(f"digits CNN (ONNX) dense {dense:.3f}; conv1 BBS 75%: magnitude {acc['magnitude']:.3f}, "
          f"obs {acc['obs']:.3f}")
    assert acc["obs"] > acc["magnitude"]

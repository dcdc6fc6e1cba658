"""numpy networks: gradients vs finite differences, layouts vs brute force, training, masks."""

import numpy as np
import pytest
from hwcosim.models.nn import (
    CNN,
    MLP,
    CNNConfig,
    LSTMClassifier,
    LSTMConfig,
    MLPConfig,
    TrainConfig,
    get_trained,
    load_digits_images,
    load_digits_sequences,
    train,
)
from hwcosim.models.nn.data import load_digits_flat
from hwcosim.models.nn.layers import (
    col2im3,
    conv3_forward,
    im2col3,
    maxpool2_backward,
    maxpool2_forward,
    softmax_xent,
)


def numgrad(model, x, y, name, eps=1e-6):
    p = model.params[name]
    g = np.zeros_like(p)
    it = np.nditer(p, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = p[i]
        p[i] = old + eps
        lp = model.loss(x, y)
        p[i] = old - eps
        lm = model.loss(x, y)
        p[i] = old
        g[i] = (lp - lm) / (2 * eps)
    return g


def assert_grads(model, x, y, rtol=1e-5, atol=1e-7):
    _, grads = model.loss_grads(x, y)
    assert set(grads) == set(model.params)
    for name in model.params:
        ng = numgrad(model, x, y, name)
        np.testing.assert_allclose(grads[name], ng, rtol=rtol, atol=atol, err_msg=name)


def test_lstm_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    m = LSTMClassifier(LSTMConfig(input_size=3, hidden=4, classes=3, dtype="float64"), seed=2)
    m.params["W"] *= 3  # exercise saturating gates too
    x = rng.normal(size=(5, 4, 3))
    y = rng.integers(0, 3, 5)
    assert_grads(m, x, y)


def test_cnn_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    cfg = CNNConfig(in_channels=2, height=4, width=4, channels=(3, 2), pool=(True, False), classes=3,
                    dtype="float64")
    m = CNN(cfg, seed=4)
    for k in m.params:
        if k.endswith(".b"):
            m.params[k] = rng.normal(scale=0.1, size=m.params[k].shape)
    x = rng.normal(size=(3, 2, 4, 4))
    y = rng.integers(0, 3, 3)
    assert_grads(m, x, y, rtol=1e-4, atol=1e-6)


def test_mlp_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    m = MLP(MLPConfig(input_size=6, hidden=(5, 4), classes=3, dtype="float64"), seed=0)
    x = rng.normal(size=(7, 6))
    y = rng.integers(0, 3, 7)
    assert_grads(m, x, y)


def test_softmax_xent_hand_example():
    logits = np.array([[0.0, np.log(3.0)]])  # p = [1/4, 3/4]
    loss, d = softmax_xent(logits, np.array([1]))
    assert loss == pytest.approx(-np.log(0.75))
    np.testing.assert_allclose(d, [[0.25, -0.25]])


def test_lstm_forward_matches_per_gate_reference():
    """The fused (4H, I+H) layout: rows (i, f, g, o), columns [x_t; h_{t-1}]."""
    rng = np.random.default_rng(6)
    I, H = 3, 5
    m = LSTMClassifier(LSTMConfig(input_size=I, hidden=H, classes=2, dtype="float64"), seed=7)
    m.params["b"] = rng.normal(size=4 * H)
    x = rng.normal(size=(2, 6, I))
    W, b = m.params["W"], m.params["b"]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    for n in range(2):
        h, c = np.zeros(H), np.zeros(H)
        for t in range(6):
            gate = {}
            for k, name in enumerate("ifgo"):
                Wx, Wh = W[k * H:(k + 1) * H, :I], W[k * H:(k + 1) * H, I:]
                gate[name] = Wx @ x[n, t] + Wh @ h + b[k * H:(k + 1) * H]
            c = sig(gate["f"]) * c + sig(gate["i"]) * np.tanh(gate["g"])
            h = sig(gate["o"]) * np.tanh(c)
            np.testing.assert_allclose(m.forward(x)[n, t], h, rtol=1e-12, atol=1e-12)
    logits = m.forward(x)[:, -1] @ m.params["W_out"].T + m.params["b_out"]
    np.testing.assert_allclose(m.logits(x), logits)


def test_im2col_conv_matches_brute_force():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 3, 5, 4))
    w = rng.normal(size=(4, 3, 3, 3))
    b = rng.normal(size=4)
    out, _ = conv3_forward(x, w, b)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 4, 5, 4))
    for n in range(2):
        for co in range(4):
            for i in range(5):
                for j in range(4):
                    ref[n, co, i, j] = np.sum(xp[n, :, i:i + 3, j:j + 3] * w[co]) + b[co]
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


def test_col2im_is_adjoint_of_im2col():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 3, 4, 6))
    d = rng.normal(size=(2 * 4 * 6, 27))
    assert np.sum(im2col3(x) * d) == pytest.approx(np.sum(x * col2im3(d, x.shape)), rel=1e-12)


def test_maxpool_forward_backward_brute_force():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(2, 3, 4, 6))
    out, arg = maxpool2_forward(x)
    dout = rng.normal(size=out.shape)
    dx = maxpool2_backward(dout, arg)
    ref, dref = np.zeros_like(out), np.zeros_like(x)
    for idx in np.ndindex(out.shape):
        n, c, i, j = idx
        win = x[n, c, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
        ref[idx] = win.max()
        a, bb = np.unravel_index(win.argmax(), (2, 2))
        dref[n, c, 2 * i + a, 2 * j + bb] = dout[idx]
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(dx, dref)


def test_datasets_fixed_split_and_shapes():
    a, b = load_digits_sequences(), load_digits_sequences()
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert a.x_train.shape[1:] == (8, 8) and a.x_train.dtype == np.float32
    assert len(a.x_train) + len(a.x_test) == 1797 and len(a.x_test) == 360
    img = load_digits_images("float64")
    assert img.x_test.shape[1:] == (1, 8, 8) and img.x_test.dtype == np.float64
    np.testing.assert_array_equal(img.x_test[:, 0], a.x_test)  # same split in every view
    assert 0 <= a.x_train.min() and a.x_train.max() <= 1
    with pytest.raises(ValueError, match="float32 or float64"):
        load_digits_flat("int32")


def test_configs_reject_bad_values():
    with pytest.raises(ValueError, match="hidden"):
        LSTMConfig(hidden=0)
    with pytest.raises(ValueError, match="dtype"):
        LSTMConfig(dtype="float16")
    with pytest.raises(ValueError, match="pool"):
        CNNConfig(channels=(4, 4), pool=(True,))
    with pytest.raises(ValueError, match="even"):
        CNNConfig(height=6, width=6, channels=(2, 2, 2), pool=(True, True, True))
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=-1)


def test_masks_stay_exactly_zero_through_fine_tuning():
    ds = load_digits_flat()
    m = MLP(MLPConfig(hidden=(32,)), seed=0)
    rng = np.random.default_rng(99)  # not the init seed: that stream would pick only negative weights
    masks = {"fc0.W": rng.random(m.params["fc0.W"].shape) < 0.3,
             "fc1.W": rng.random(m.params["fc1.W"].shape) < 0.5}
    before = {k: v.copy() for k, v in m.params.items()}
    train(m, ds.x_train, ds.y_train, TrainConfig(epochs=6), masks=masks)
    for k, mk in masks.items():
        assert np.all(m.params[k][~mk] == 0.0)
        # the kept weights did train (a few inputs, e.g. always-blank corner pixels, get no gradient)
        assert np.mean(m.params[k][mk] != before[k][mk]) > 0.8
    assert m.accuracy(ds.x_test, ds.y_test) > 0.8  # learns (chance is 0.1) despite 70% of fc0 pruned
    with pytest.raises(ValueError, match="unknown parameter"):
        train(m, ds.x_train, ds.y_train, TrainConfig(epochs=1), masks={"nope": masks["fc0.W"]})
    with pytest.raises(ValueError, match="bool"):
        train(m, ds.x_train, ds.y_train, TrainConfig(epochs=1), masks={"fc0.W": masks["fc0.W"].astype(int)})


def test_training_is_deterministic():
    ds = load_digits_flat()
    a, b = MLP(seed=3), MLP(seed=3)
    train(a, ds.x_train, ds.y_train, TrainConfig(epochs=2, seed=5))
    train(b, ds.x_train, ds.y_train, TrainConfig(epochs=2, seed=5))
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])


def test_lstm_h64_reaches_95_percent_and_caches(tmp_path):
    m, ds, info = get_trained("lstm", LSTMConfig(hidden=64), TrainConfig(epochs=40), seed=0, cache_dir=tmp_path)
    assert info["test_accuracy"] >= 0.95
    assert not info["cached"]
    assert len(list(tmp_path.glob("lstm-*.safetensors"))) == 1
    m2, _, info2 = get_trained("lstm", LSTMConfig(hidden=64), TrainConfig(epochs=40), seed=0, cache_dir=tmp_path)
    assert info2["cached"] and info2["test_accuracy"] == info["test_accuracy"]
    for k in m.params:
        np.testing.assert_array_equal(m.params[k], m2.params[k])
    # per-step hidden states for an accelerator comparison
    h = m.forward(ds.x_test[:4])
    assert h.shape == (4, 8, 64) and h.dtype == np.float32

"""SeerNet: quantiser by hand, masks vs brute force, exactness of the computed outputs."""

import numpy as np
import pytest
from hwcosim.models.nn import CNNConfig, TrainConfig, get_trained
from hwcosim.models.nn.layers import conv3_forward
from hwcosim.pruning import seernet
from hwcosim.pruning.seernet import (
    conv_at,
    dense_conv_exact,
    needed_mask,
    predict_mask,
    quantize_symmetric,
    quantized_conv,
    seer_layer,
)


@pytest.fixture(scope="module")
def trained_cnn(tmp_path_factory):
    cnn, ds, info = get_trained("cnn", CNNConfig(channels=(8, 16)), TrainConfig(epochs=4), seed=0,
                                cache_dir=tmp_path_factory.mktemp("cache"))
    assert info["test_accuracy"] > 0.9
    return cnn, ds


def test_quantize_by_hand():
    x = np.array([-1.0, 0.5, 0.24, 1.0])
    q, s = quantize_symmetric(x, 2)  # levels {-1, 0, 1} * 1.0; 0.5 rounds to even (0)
    assert s == 1.0 and q.tolist() == [-1, 0, 0, 1]
    q, s = quantize_symmetric(x, 3)  # qmax 3, scale 1/3
    assert s == pytest.approx(1 / 3) and q.tolist() == [-3, 2, 1, 3]
    q, s = quantize_symmetric(np.array([-2.0, 0.0, 1.0]), 1)  # sign, scale = mean |nonzero|
    assert q.tolist() == [-1, 0, 1] and s == 1.5
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000)
    q, s = quantize_symmetric(x, 8)
    assert np.abs(q).max() == 127 and np.abs(q * s - x).max() <= s / 2 + 1e-12
    for bad in (0, 9, 2.5):
        with pytest.raises(ValueError, match="1..8"):
            quantize_symmetric(x, bad)


def test_quantized_conv_matches_brute_force_integer_conv():
    rng = np.random.default_rng(1)
    x, w, b = rng.normal(size=(2, 2, 4, 4)), rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3)
    qx, sx = quantize_symmetric(x, 4)
    qw, sw = quantize_symmetric(w, 4)
    ref, _ = conv3_forward(qx.astype(np.float64), qw.astype(np.float64), np.zeros(3))
    np.testing.assert_allclose(quantized_conv(x, w, b, 4), ref * sx * sw + b[None, :, None, None], rtol=1e-12)


def test_needed_mask_hand_example():
    z = np.array([[[[1.0, 3.0, -1.0, -2.0],
                    [2.0, 0.5, -3.0, -0.5],
                    [5.0, 5.0, 0.0, 0.0],
                    [1.0, 1.0, 0.0, 0.0]]]])
    nopool = needed_mask(z, pool=False)
    np.testing.assert_array_equal(nopool, z > 0)
    want = np.zeros_like(z, dtype=bool)
    want[0, 0, 0, 1] = True  # max 3 of the first window; the all-negative window needs nothing
    want[0, 0, 2, 0] = True  # a tie (5, 5): the first one
    np.testing.assert_array_equal(needed_mask(z, pool=True), want)


def test_conv_at_equals_dense_exactly_and_skips_the_rest():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4, 6, 6)).astype(np.float32)
    w = rng.normal(size=(5, 4, 3, 3)).astype(np.float32)
    b = rng.normal(size=5).astype(np.float32)
    mask = rng.random((3, 5, 6, 6)) < 0.3
    out = conv_at(x, w, b, mask)
    dense = dense_conv_exact(x, w, b)
    np.testing.assert_array_equal(out[mask], dense[mask])  # bit-exact at the computed positions
    assert np.all(out[~mask] == 0)
    np.testing.assert_allclose(dense, conv3_forward(x, w, b)[0], rtol=1e-5, atol=1e-5)


def test_k8_recall_near_one_and_exact_outputs(trained_cnn):
    cnn, ds = trained_cnn
    x = ds.x_test[:200]
    for li in range(cnn.n_conv):
        w, b, pool = cnn.conv_layer(li)
        r = seer_layer(x, w, b, pool, bits=8)
        st = r.stats(w[0].size)
        assert st["recall"] >= 0.98, (li, st)
        assert st["precision"] >= 0.85, (li, st)
        assert st["macs_skipped"] > 0.5  # ReLU + pooling discard most outputs
        z = conv_at(x, w, b, r.predicted)
        np.testing.assert_array_equal(z[r.predicted], dense_conv_exact(x, w, b)[r.predicted])
        # the dense layer through the model's own im2col matmul, to float rounding
        np.testing.assert_allclose(z[r.predicted], conv3_forward(x, w, b)[0][r.predicted], rtol=1e-4, atol=1e-5)
        x = np.maximum(conv3_forward(x, w, b)[0], 0)
        if pool:
            x = x.reshape(len(x), x.shape[1], x.shape[2] // 2, 2, x.shape[3] // 2, 2).max(axis=(3, 5))


def test_oracle_mask_reproduces_dense_network(trained_cnn):
    """If the predicted set covered every needed output, SeerNet's output equals the dense layer's."""
    cnn, ds = trained_cnn
    x = ds.x_test[:50]
    w, b, pool = cnn.conv_layer(0)
    z = dense_conv_exact(x, w, b)
    out = conv_at(x, w, b, needed_mask(z, pool))
    pooled = np.maximum(out, 0).reshape(50, -1, 4, 2, 4, 2).max(axis=(3, 5))
    ref = np.maximum(z, 0).reshape(50, -1, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(pooled, ref)


def test_evaluate_trends(trained_cnn):
    cnn, ds = trained_cnn
    res = seernet.evaluate(cnn, ds.x_test, ds.y_test, bits_list=[1, 4, 8])
    r = {e["bits"]: e for e in res["results"]}
    assert set(r[8]) >= {"accuracy", "accuracy_change", "agreement", "macs_skipped", "layers"}
    assert r[8]["agreement"] >= 0.98 and abs(r[8]["accuracy_change"]) <= 0.02
    assert r[8]["layers"][0]["recall"] > r[1]["layers"][0]["recall"]
    assert len(r[4]["layers"]) == 2
    assert 0 < r[8]["macs_skipped"] < 1


def test_predict_mask_high_bits_on_random_layer_without_pool():
    rng = np.random.default_rng(3)
    x = np.maximum(rng.normal(size=(4, 3, 8, 8)), 0)
    w, b = rng.normal(size=(6, 3, 3, 3)), rng.normal(scale=0.1, size=6)
    pred = predict_mask(x, w, b, 8, pool=False)
    need = needed_mask(conv3_forward(x, w, b)[0], pool=False)
    assert (pred & need).sum() / need.sum() > 0.98
    assert (pred & need).sum() / pred.sum() > 0.98

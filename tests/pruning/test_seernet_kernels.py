"""SeerNet's compiled kernels against the golden functions, and the timing bench's quick mode."""

import json

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.pruning.seernet import conv_at, dense_conv_exact, predict_mask
from hwcosim.pruning.seernet_kernels import (
    dense_conv_same,
    filters_channels_last,
    float_bound,
    im2col_conv,
    predict_mask_fast,
    quantize_filters,
    sparse_conv,
    to_channels_last,
)


def _layer(seed, n=2, cin=5, cout=4, h=6, w=6, relu_input=True):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, cin, h, w)).astype(np.float32)
    if relu_input:
        x = np.maximum(x, 0)  # exact zeros, as after a ReLU: the predictor skips them
    wt = rng.normal(size=(cout, cin, 3, 3)).astype(np.float32)
    b = rng.normal(size=cout).astype(np.float32)
    return x, wt, b


@pytest.mark.parametrize("pool", [False, True])
def test_predicted_mask_equals_golden_every_bit_width(pool):
    for seed, relu in ((0, True), (1, False)):
        x, w, b = _layer(seed, relu_input=relu)
        for k in range(1, 9):
            fast = predict_mask_fast(x, w, b, k, pool, quantize_filters(w, k) if k % 2 else None)
            np.testing.assert_array_equal(fast, predict_mask(x, w, b, k, pool), err_msg=f"k={k} pool={pool}")


def test_predicted_mask_pool_ties_kept():
    # a constant input gives equal pre-activations in a window's interior: every tie is kept
    x = np.ones((1, 1, 4, 4), dtype=np.float32)
    w = np.zeros((1, 1, 3, 3), dtype=np.float32)
    w[0, 0, 1, 1] = 1.0
    b = np.zeros(1, dtype=np.float32)
    m = predict_mask_fast(x, w, b, 4, True)
    assert m.all() and np.array_equal(m, predict_mask(x, w, b, 4, True))


def test_sparse_outputs_match_golden_within_the_float_bound_and_dense_bit_exactly():
    x, w, b = _layer(2, n=2, cin=7, cout=6, h=8, w=6)
    xp, wt = to_channels_last(x), filters_channels_last(w)
    mask = predict_mask(x, w, b, 3, pool=False)
    out, computed = sparse_conv(xp, wt, b, mask)
    assert computed == int(mask.sum()) > 0  # less work: exactly the kept outputs are computed
    assert np.all(out[~mask] == 0)
    golden = conv_at(x, w, b, mask)
    bound = float_bound(x, w, b)
    assert np.all(np.abs(out - golden)[mask] <= bound[mask])
    dense = dense_conv_same(xp, wt, b)
    np.testing.assert_array_equal(out[mask], dense[mask])  # same code path: bit-identical
    assert np.all(np.abs(dense - dense_conv_exact(x, w, b)) <= bound)
    assert np.all(np.abs(im2col_conv(x, w, b) - dense_conv_exact(x, w, b)) <= bound)
    _, all_computed = sparse_conv(xp, wt, b, None)
    assert all_computed == mask.size


def test_float64_path_and_bad_shapes():
    x, w, b = _layer(3)
    x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    dense = dense_conv_same(to_channels_last(x), filters_channels_last(w), b)
    np.testing.assert_allclose(dense, dense_conv_exact(x, w, b), rtol=1e-12, atol=1e-12)
    with pytest.raises(UsageError, match="sparse_conv needs"):
        sparse_conv(to_channels_last(x), filters_channels_last(w).astype(np.float32), b, None)
    with pytest.raises(UsageError, match="even height"):
        predict_mask_fast(x[:, :, :5], w, b, 4, True)
    with pytest.raises(UsageError, match="1..8"):
        predict_mask_fast(x, w, b, 9, False)


def test_timing_bench_quick_writes_json(tmp_path):
    from hwcosim.pruning.seernet_bench import run_seernet_timing

    run_seernet_timing(tmp_path / "out", quick=True, accuracy=False, cache_dir=tmp_path / "cache")
    res = json.loads((tmp_path / "out" / "seernet_timing.json").read_text())
    assert (tmp_path / "out" / "seernet_timing.png").stat().st_size > 0
    assert res["threads"] == 1 and res["bits"] == [1, 4] and res["paper"]["cite"].startswith("Cao")
    for lay in res["layers"]:
        for p in lay["per_bits"]:
            assert p["computed"] == round(p["kept"] * lay["outputs"]) and 0 <= p["recall"] <= 1
            assert p["seer_s"] == pytest.approx(p["predict_s"] + p["sparse_s"])
            assert p["speedup_vs_same"] == pytest.approx(lay["dense_same_s"] / p["seer_s"])
    assert {t["pool"] for t in res["totals"]} == {False, True} and res["band"]
    assert "accuracy" not in res
    tr = res["trained"]  # the trained-network section: a tiny CNN in quick mode, trained into the cache
    assert tr["note"] == "CNN trained here on digits upscaled to 56x56 (no pretrained weights reachable)"
    assert not tr["cached"] and tr["train_cpu_s"] > 0 and list((tmp_path / "cache").glob("cnn-*.safetensors"))
    assert tr["dense_test_accuracy"] > 0.3  # clearly above chance (0.1) even after the quick training
    for lay in tr["layers"]:
        assert [p["bits"] for p in lay["per_bits"]] == [1, 4]
        for p in lay["per_bits"]:
            assert p["computed"] == round(p["kept"] * lay["outputs"]) and 0 <= p["recall"] <= 1
    for t in tr["totals"]:
        assert 0 < t["kept"] <= 1 and set(t["kept_per_layer"]) == {str(li) for li in tr["timed_layers"]}
        assert t["speedup_vs_blas"] == pytest.approx(t["blas_s"] / t["seer_s"])
    accs = tr["accuracy"]["per_bits"]
    assert [a["bits"] for a in accs] == [1, 4] and all(0 <= a["accuracy"] <= 1 for a in accs)
    assert all(len(a["kept_per_layer"]) == 2 for a in accs)


def test_seer_logits_equal_golden_forward_image_by_image():
    from hwcosim.models.nn.cnn import CNN
    from hwcosim.pruning.seernet import seer_forward
    from hwcosim.pruning.seernet_bench import QUICK_TRAINED_CONFIG, seer_logits

    cnn = CNN(QUICK_TRAINED_CONFIG, seed=3)
    for li in range(cnn.n_conv):  # biases away from zero, so the masks are not trivially all-positive
        cnn.params[f"conv{li}.b"][:] = np.linspace(-0.3, 0.3, len(cnn.params[f"conv{li}.b"]))
    x = np.maximum(np.random.default_rng(1).normal(size=(3, 1, 8, 8)), 0).astype(np.float32)
    for k in (1, 4):
        fast, computed = seer_logits(cnn, x, k)
        gold = [seer_forward(cnn, x[i:i + 1], k) for i in range(len(x))]
        np.testing.assert_allclose(fast, np.concatenate([g[0] for g in gold]), rtol=1e-4, atol=1e-5)
        assert computed == [sum(g[1][li]["computed"] for g in gold) for li in range(cnn.n_conv)]


def test_upscale_nearest():
    from hwcosim.pruning.seernet_bench import upscale

    x = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    y = upscale(x, 6)
    assert y.shape == (2, 1, 6, 6) and (y[:, :, :3, :3] == x[:, :, :1, :1]).all() and (y[1, 0, 5, 5] == 7)
    with pytest.raises(UsageError, match="integer factor"):
        upscale(x, 5)

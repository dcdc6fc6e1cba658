"""Cubic schedule (Zhu & Gupta 2017) values by hand, gradual pruning of numpy and torch models."""

import numpy as np
import pytest
from hwcosim.models.nn import MLP, MLPConfig, TrainConfig
from hwcosim.models.nn.data import load_digits_flat
from hwcosim.pruning.base import get_pattern, pattern_names
from hwcosim.pruning.schedule import CubicSchedule, gradual_prune, pattern_for_sparsity, pattern_mask_fn


def test_cubic_values_by_hand():
    s = CubicSchedule(final=0.9, steps=4)
    # 0.9 - 0.9 * (1 - k/4)^3 for k = 0..4
    np.testing.assert_allclose(s.sparsity(np.arange(5)), [0.0, 0.5203125, 0.7875, 0.8859375, 0.9])
    assert s.sparsity(10) == 0.9
    s2 = CubicSchedule(final=0.9, initial=0.1, start=10, steps=4, interval=5)
    assert s2.sparsity(15) == pytest.approx(0.9 - 0.8 * 0.75 ** 3)  # 0.5625
    assert s2.sparsity(0) == pytest.approx(0.1) and s2.sparsity(30) == pytest.approx(0.9)
    np.testing.assert_array_equal(s2.prune_steps(), [15, 20, 25, 30])
    assert s2.end == 30 and s2.is_prune_step(20) and not s2.is_prune_step(21)


def test_schedule_rejects_bad_values():
    with pytest.raises(ValueError, match="final sparsity"):
        CubicSchedule(final=1.0)
    with pytest.raises(ValueError, match="initial"):
        CubicSchedule(final=0.5, initial=0.6)
    with pytest.raises(ValueError, match="steps"):
        CubicSchedule(final=0.5, steps=0)


def test_pattern_for_sparsity_maps_nm_and_sparsity_patterns():
    assert pattern_for_sparsity("bbs", 0.75, banks=4).sparsity == 0.75
    if "nm" in pattern_names():
        p = pattern_for_sparsity("nm", 0.75, m=8)
        assert (p.n, p.m) == (2, 8)
        assert pattern_for_sparsity("nm", 0.95, m=8).n == 1  # nearest reachable: 1:8
    with pytest.raises(ValueError, match="unknown sparsity pattern"):
        pattern_for_sparsity("no-such-pattern", 0.5)


def _local_unstructured(_name, w, s):
    k = int(round(w.size * (1 - s)))
    keep = np.zeros(w.size, bool)
    keep[np.argsort(-np.abs(w), axis=None, kind="stable")[:k]] = True
    return keep.reshape(w.shape)


@pytest.mark.parametrize("kind", ["bbs", "unstructured"])
def test_gradual_prune_numpy_mlp(kind):
    ds = load_digits_flat()
    m = MLP(MLPConfig(hidden=(32,)), seed=1)
    from hwcosim.models.nn import train
    train(m, ds.x_train, ds.y_train, TrainConfig(epochs=5))
    if kind == "bbs":
        fn, check = pattern_mask_fn("bbs", banks=4), get_pattern("bbs", banks=4, sparsity=0.75).check
    else:
        fn = pattern_mask_fn("unstructured") if "unstructured" in pattern_names() else _local_unstructured
        check = None
    sched = CubicSchedule(final=0.75, steps=3)
    masks, hist = gradual_prune(m, ds.x_train, ds.y_train, fn, ["fc0.W"], sched,
                                TrainConfig(epochs=1, lr=2e-3, lr_final=1e-3), final_epochs=2,
                                x_val=ds.x_test, y_val=ds.y_test)
    assert [h["step"] for h in hist] == [1, 2, 3]
    np.testing.assert_allclose([h["target"] for h in hist], sched.sparsity([1, 2, 3]))
    assert all(a["achieved"] <= b["achieved"] for a, b in zip(hist, hist[1:], strict=False))
    assert masks["fc0.W"].mean() == pytest.approx(0.25)
    assert np.all(m.params["fc0.W"][~masks["fc0.W"]] == 0.0)
    if check:
        check(masks["fc0.W"])
    assert hist[-1]["val_accuracy"] > 0.85


def test_gradual_prune_rejects_unknown_param():
    ds = load_digits_flat()
    with pytest.raises(ValueError, match="unknown parameters"):
        gradual_prune(MLP(), ds.x_train, ds.y_train, _local_unstructured, ["nope"], CubicSchedule(0.5))


def test_torch_gradual_pruner():
    torch = pytest.importorskip("torch")
    from hwcosim.pruning.schedule import TorchGradualPruner

    torch.manual_seed(0)
    ds = load_digits_flat()
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    sched = CubicSchedule(final=0.75, start=20, steps=4, interval=10)
    pruner = TorchGradualPruner(net, ["0.weight"], pattern_mask_fn("bbs", banks=4), sched)
    handle = pruner.attach(opt)
    x, y = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        idx = torch.randint(0, len(y), (64,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()
        if pruner.t == 30:
            assert pruner.sparsity() == pytest.approx(0.75 - 0.75 * 0.75 ** 3, abs=0.02)  # one of 4 intervals done
    handle.remove()
    w = net[0].weight.detach().numpy()
    get_pattern("bbs", banks=4, sparsity=0.75).check(w != 0)
    assert pruner.sparsity() == pytest.approx(0.75)
    with torch.no_grad():
        acc = (net(torch.as_tensor(ds.x_test)).argmax(1).numpy() == ds.y_test).mean()
    assert acc > 0.85

"""Accuracy and SeerNet studies: function results and the CLI (outputs, bad input)."""

import json

import numpy as np
import pytest
from hwcosim.pruning.base import get_pattern
from hwcosim.pruning.study import accuracy_study, default_specs


def cli(argv):
    """Through the one dispatcher (``hwcosim ...``): errors become exit status 2 (1 for a failed check)."""
    from hwcosim.cosim.cli import main

    return main(argv)


@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    return accuracy_study(sparsities=(0.5, 0.85), patterns=["bbs", "unstructured", "block"], hidden=32,
                          schedule_steps=1, epochs_per_step=1, final_epochs=1,
                          cache_dir=tmp_path_factory.mktemp("cache"))


def test_default_specs_cover_registered_patterns():
    from hwcosim.pruning.base import pattern_names
    specs = default_specs()
    assert {s["pattern"] for s in specs} == set(pattern_names())
    assert {"bbs-4banks", "bbs-8banks"} <= {s["label"] for s in specs}
    with pytest.raises(ValueError, match="unknown pattern"):
        default_specs(["nonsense"])


def test_accuracy_study_result(small_study):
    r = small_study
    assert set(r) >= {"dense_accuracy", "points", "claim", "model", "finetune", "pruned_params", "seconds"}
    assert r["model"]["W_shape"] == [128, 40] and r["model"]["W_out_shape"] == [10, 32]
    labels = {p["label"] for p in r["points"]}
    assert labels == {"bbs-4banks", "bbs-8banks", "unstructured", "block-4x4"}
    assert len(r["points"]) == 8
    by = {(p["label"], p["target"]): p for p in r["points"]}
    # 40 columns in 8 banks of 5 keep >= 1 of 5: 85% is impossible and is skipped, not clamped
    assert "skipped" in by[("bbs-8banks", 0.85)] and "bank" in by[("bbs-8banks", 0.85)]["skipped"]
    for p in r["points"]:
        if "skipped" in p:
            continue
        assert 0 <= p["accuracy_oneshot"] <= 1 and 0 <= p["accuracy_finetuned"] <= 1
        if p["label"] != "bbs-8banks":
            assert abs(p["achieved"] - p["target"]) < 0.1
    # banks of 5 (W, 40 columns) keep round(2.5) = 2, banks of 4 (W_out) keep 2: by hand
    assert by[("bbs-8banks", 0.5)]["achieved"] == pytest.approx(1 - (128 * 16 + 10 * 16) / (128 * 40 + 10 * 32))
    assert by[("unstructured", 0.5)]["achieved"] == pytest.approx(0.5)
    # fine-tuning recovers accuracy lost by one-shot pruning at high sparsity
    hi = by[("unstructured", 0.85)]
    assert hi["accuracy_finetuned"] > hi["accuracy_oneshot"]
    c = r["claim"]
    assert c["evaluated"] and c["sparsities"] == [0.5, 0.85]
    for k in ("oneshot", "finetuned"):
        assert len(c[k]["bbs_minus_block"]) == 2 and isinstance(c[k]["holds"], bool)
        a = by[("bbs-4banks", 0.5)][f"accuracy_{k}"] - by[("block-4x4", 0.5)][f"accuracy_{k}"]
        assert c[k]["bbs_minus_block"][0] == pytest.approx(a)


def test_one_shot_point_matches_direct_pruning(small_study, tmp_path):
    """Independent recomputation of one one-shot point from the cached dense model."""
    from hwcosim.models.nn import LSTMConfig, get_trained
    from hwcosim.pruning.recipes import LSTM_TRAIN
    r = accuracy_study(sparsities=(0.5,), patterns=["bbs-4banks"], hidden=16, finetune=False, cache_dir=tmp_path)
    m, ds, _ = get_trained("lstm", LSTMConfig(hidden=16), LSTM_TRAIN, 0, tmp_path)
    for p in ("W", "W_out"):
        m.params[p] = get_pattern("bbs", banks=4, sparsity=0.5).prune(m.params[p])
    assert r["points"][0]["accuracy_oneshot"] == m.accuracy(ds.x_test, ds.y_test)
    assert r["finetune"] is None and "accuracy_finetuned" not in r["points"][0]


def test_cli_accuracy_writes_json_and_png(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli(["study", "accuracy", "--quick", "--patterns", "bbs-4banks,unstructured", "--sparsities", "0.5",
              "--hidden", "16", "-o", str(out), "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    data = json.loads((out / "accuracy.json").read_text())
    assert {p["label"] for p in data["points"]} == {"bbs-4banks", "unstructured"}
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert "bbs-4banks" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    # the number lists are checked by the parser against cosim/cli/ranges.py LISTS, before any work
    (["study", "accuracy", "--sparsities", "1.5"], "--sparsities 1.5: out of range; allowed (0, 1)"),
    (["study", "accuracy", "--sparsities", "a,b"], "--sparsities 'a': not a number"),
    (["study", "accuracy", "--patterns", "nonsense"], "unknown pattern"),
    (["study", "seernet", "--bits", "0-9"], "--bits 0: out of range; allowed [1, 8]"),
    (["study", "seernet", "--bits", "x"], "--bits 'x': not a number"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, msg, capsys, tmp_path):
    code = cli([*argv, "-o", str(tmp_path), "--cache-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and msg in err[0]


def test_cli_seernet_writes_json_and_png(tmp_path):
    rc = cli(["study", "seernet", "--bits", "1,8", "--epochs", "2", "-o", str(tmp_path), "--cache-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "seernet.json").read_text())
    assert [r["bits"] for r in data["results"]] == [1, 8]
    lay = data["results"][1]["layers"]
    assert len(lay) == 2 and set(lay[0]) >= {"precision", "recall", "macs_skipped"}
    assert np.isfinite(data["dense_accuracy"])
    assert (tmp_path / "seernet.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_quick_study_all_patterns_under_90s(tmp_path):
    import time
    t = time.perf_counter()
    assert cli(["study", "accuracy", "--quick", "-o", str(tmp_path), "--cache-dir", str(tmp_path)]) == 0
    assert time.perf_counter() - t < 90  # includes training the dense LSTM (no cache)
    data = json.loads((tmp_path / "accuracy.json").read_text())
    assert data["dense_accuracy"] >= 0.95 and data["claim"]["evaluated"]

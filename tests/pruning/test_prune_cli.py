"""``hwcosim prune`` in-process and as a subprocess: exit codes, files, manifests, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q, quantize
from hwcosim.pruning.api import sanitize
from hwcosim.pruning.formats import csb, fss, nm, sparse


def run(argv):
    """Through the one dispatcher (``hwcosim ...``): errors become exit status 2 (1 for a failed check)."""
    from hwcosim.cosim.cli import main

    return main(argv)


def err_code(argv, capsys):
    code = run(argv)
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    return code, lines


@pytest.fixture
def weights(tmp_path):
    w = np.random.default_rng(0).standard_normal((32, 128)).astype(np.float32)
    np.save(tmp_path / "weights.npy", w)
    return w


def test_foundation_form_writes_csb(tmp_path, weights):
    out = tmp_path / "out"
    rc = run(
        [
            "prune",
            "--pattern",
            "bbs",
            "--banks",
            "16",
            "--sparsity",
            "0.875",
            str(tmp_path / "weights.npy"),
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    m = csb.load(out)  # the lead's reader finds exactly one CSB manifest in the folder
    assert m.shape == (32, 128) and m.banks == 16 and m.k == 1 and (out / "weights.hex").exists()
    mask = m.to_dense_raw() != 0
    assert (mask.reshape(32, 16, 8).sum(-1) <= 1).all()
    man = json.loads((out / "manifest.json").read_text())
    assert man["format"] == "hwcosim-prune-manifest"
    (entry,) = man["outputs"]
    assert entry["tensor"] == "weights" and entry["check"] == "ok" and entry["sparsity"] == 0.875
    assert {f["file"] for f in entry["files"]} == {"weights.npz", "weights.json", "weights.hex"}
    # relative reconstruction error recomputed independently
    deq = m.to_dense()
    assert entry["rel_error"] == pytest.approx(np.linalg.norm(weights - deq) / np.linalg.norm(weights))


def test_explicit_format(tmp_path, weights):
    run(
        [
            "prune",
            "--banks",
            "4",
            "--sparsity",
            "0.5",
            "--format",
            "Q2.6",
            str(tmp_path / "weights.npy"),
            "-o",
            str(tmp_path / "o"),
        ]
    )
    m = csb.load(tmp_path / "o")
    assert m.fmt == Q(2, 6)
    kept = m.to_dense_raw()
    assert (kept[kept != 0] == quantize(weights, Q(2, 6))[kept != 0]).all()


@pytest.mark.parametrize(
    "argv, reader, fmt_name",
    [
        (["--pattern", "nm", "--n", "2", "--m", "4"], nm.load, "hwcosim-nm"),
        (["--pattern", "fss", "--region", "2x8", "--n", "3"], fss.load, "hwcosim-fss"),
        (["--pattern", "balanced", "--block", "16", "--sparsity", "0.75"], csb.load, "hwcosim-csb"),
        (["--pattern", "block", "--block", "4x4", "--sparsity", "0.5"], sparse.load, "hwcosim-csr"),
        (["--pattern", "vector", "--length", "8", "--sparsity", "0.5"], sparse.load, "hwcosim-csr"),
        (["--pattern", "unstructured", "--sparsity", "0.9"], sparse.load, "hwcosim-csr"),
    ],
)
def test_whole_model_each_pattern(tmp_path, argv, reader, fmt_name, capsys):
    rng = np.random.default_rng(1)
    np.savez(
        tmp_path / "m.npz",
        **{
            "enc.weight": rng.standard_normal((16, 32)),
            "enc.bias": np.zeros(16),
            "conv.weight": rng.standard_normal((8, 2, 4, 4)),
        },
    )
    out = tmp_path / "out"
    assert run(["prune", *argv, str(tmp_path / "m.npz"), "-o", str(out), "--image", "both"]) == 0
    text = capsys.readouterr().out
    assert "enc.weight" in text and "skipped" in text
    man = json.loads((out / "manifest.json").read_text())
    assert [o["tensor"] for o in man["outputs"]] == ["enc.weight", "conv.weight"]
    assert man["skipped"] == [{"tensor": "enc.bias", "reason": "1-D"}]
    assert man["outputs"][1]["original_shape"] == [8, 2, 4, 4] and man["outputs"][1]["shape"] == [8, 32]
    for o in man["outputs"]:
        assert o["format"] == fmt_name and o["check"] == "ok"
        for f in o["files"]:
            assert (out / f["file"]).stat().st_size == f["bytes"]
        reader(out / f"{o['stem']}.json")


def test_tensors_glob_config_and_dry_run(tmp_path, capsys):
    rng = np.random.default_rng(2)
    np.savez(
        tmp_path / "m.npz",
        **{"a.weight": rng.standard_normal((8, 16)), "b.weight": rng.standard_normal((8, 16))},
    )
    out = tmp_path / "out"
    assert (
        run(
            [
                "prune",
                "--pattern",
                "nm",
                "--tensors",
                "b.*",
                str(tmp_path / "m.npz"),
                "-o",
                str(out),
                "--dry-run",
            ]
        )
        == 0
    )
    assert not out.exists()
    cfg = tmp_path / "c.toml"
    cfg.write_text("[[rule]]\ntensors='a.*'\npattern='fss'\nregion=[1,8]\nn=2\n")
    assert run(["prune", "--config", str(cfg), str(tmp_path / "m.npz"), "-o", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert [o["tensor"] for o in man["outputs"]] == ["a.weight"]
    assert man["skipped"] == [{"tensor": "b.weight", "reason": "no rule"}]
    assert fss.load(out / "a_weight.json").n == 2


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--pattern", "bbs", "--banks", "5"], "do not split into 5 equal banks"),
        (["--pattern", "nm", "--banks", "4"], "--banks does not apply"),
        (["--pattern", "zigzag"], "unknown pattern"),
        (["--pattern", "bbs", "--sparsity", "1.5"], "--sparsity 1.5: out of range"),
        (["--format", "Q9"], "fixed-point format"),
        (["--tensors", "nothing*"], "matches none"),
        (["--pattern", "balanced", "--block", "4x4"], "integer"),
        (["--config", "/nonexistent.toml"], "no such config"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, weights, capsys, argv, msg):
    code, lines = err_code(["prune", *argv, str(tmp_path / "weights.npy"), "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0]
    assert not (tmp_path / "o").exists()


def test_bad_weight_files(tmp_path, capsys):
    np.save(tmp_path / "b.npy", np.ones(5))
    code, lines = err_code(["prune", str(tmp_path / "b.npy")], capsys)
    assert code == 2 and "nothing to prune" in lines[0]
    w = np.ones((4, 8))
    w[0, 0] = np.nan
    np.save(tmp_path / "n.npy", w)
    code, lines = err_code(
        ["prune", "--banks", "2", str(tmp_path / "n.npy"), "-o", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "NaN" in lines[0]
    code, lines = err_code(["prune", str(tmp_path / "missing.npy")], capsys)
    assert code == 2 and "no such weight file" in lines[0]


def test_sanitize():
    assert sanitize("model.layers.0/attn.q_proj.weight") == "model_layers_0_attn_q_proj_weight"
    assert sanitize("...") == "tensor"


PROG = (
    "import sys; from cosim.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)


def test_subprocess(tmp_path, weights):
    ok = subprocess.run(
        [
            sys.executable,
            "-c",
            PROG,
            "prune",
            "--banks",
            "16",
            "--sparsity",
            "0.875",
            str(tmp_path / "weights.npy"),
            "-o",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "s" / "weights.npz").exists() and (tmp_path / "s" / "manifest.json").exists()
    bad = subprocess.run(
        [
            sys.executable,
            "-c",
            PROG,
            "prune",
            "--banks",
            "7",
            str(tmp_path / "weights.npy"),
            "-o",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert (
        bad.stderr.strip().count("\n") == 0
        and bad.stderr.startswith("error: ")
        and "Traceback" not in bad.stderr
    )
    help_ = subprocess.run([sys.executable, "-c", PROG, "prune", "--help"], capture_output=True, text=True)
    assert help_.returncode == 0 and "--pattern" in help_.stdout and "fss" in help_.stdout


def _npz(tmp_path):
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "model.npz", model=rng.standard_normal((16, 64)).astype(np.float32),
             fc=rng.standard_normal((16, 64)).astype(np.float32), other=np.arange(5))
    return tmp_path / "model.npz"


def test_prune_refuses_to_overwrite_its_input(tmp_path, capsys):
    src = _npz(tmp_path)
    before = src.read_bytes()
    code, lines = err_code(["prune", "--tensors", "model", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                            str(src), "-o", str(tmp_path)], capsys)
    assert code == 2 and len(lines) == 1 and "would overwrite the input" in lines[0]
    assert src.read_bytes() == before and not (tmp_path / "manifest.json").exists()


def test_prune_refuses_a_dense_out_that_is_one_of_its_outputs(tmp_path, capsys):
    src = _npz(tmp_path)
    out = tmp_path / "out"
    code, lines = err_code(["prune", "--tensors", "fc", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                            str(src), "-o", str(out), "--dense-out", str(out / "fc.npz")], capsys)
    assert code == 2 and "would overwrite fc.npz" in lines[0]
    assert not out.exists()


def test_prune_late_failure_leaves_nothing(tmp_path, capsys):
    """An unwritable --dense-out used to exit 2 after the CSB files were written (a folder with no manifest)."""
    src = _npz(tmp_path)
    out = tmp_path / "out"
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, lines = err_code(["prune", "--tensors", "fc", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                            str(src), "-o", str(out), "--dense-out", str(blocker / "dense.npz")], capsys)
    assert code == 2 and len(lines) == 1
    assert not out.exists() or not any(out.iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.staging")]

"""The pruning library under ``hwcosim prune``: keyword arguments in, results out, the same files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.models.errors import UsageError
from hwcosim.pruning.api import PruneOptions, prune_file, prune_tensors


def _w(shape=(16, 32), seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def test_prune_tensors_in_memory():
    results, skipped = prune_tensors({"fc": _w(), "bias": np.zeros(4)}, pattern="bbs", banks=4, sparsity=0.75)
    assert skipped == [("bias", "1-D")]
    (r,) = results
    assert r["tensor"] == "fc" and r["check"] == "ok" and r["format"] == "hwcosim-csb"
    assert r["mask"].shape == (16, 32) and r["mask"].mean() == pytest.approx(0.25) == 1 - r["sparsity"]
    assert np.all(r["dense"][~r["mask"]] == 0) and r["encoded"].to_dense().shape == (16, 32)


def test_prune_file_writes_what_the_command_writes(tmp_path):
    np.save(tmp_path / "w.npy", _w())
    man = prune_file(tmp_path / "w.npy", tmp_path / "lib", pattern="nm", n=2, m=4)
    assert main(["prune", str(tmp_path / "w.npy"), "--pattern", "nm", "--n", "2", "--m", "4",
                 "-o", str(tmp_path / "cli")]) == 0
    cli = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert [f["sha256"] for f in man["outputs"][0]["files"]] == [f["sha256"] for f in cli["outputs"][0]["files"]]
    dry = prune_file(tmp_path / "w.npy", tmp_path / "dry", pattern="nm", n=2, m=4, dry_run=True)
    assert not (tmp_path / "dry").exists() and dry["outputs"][0]["sparsity"] == 0.5


def test_prune_options_are_the_command_flags():
    from hwcosim.cosim.cli import build_parser

    args = build_parser().parse_args(["prune", "w.npy"])
    assert {f.name for f in PruneOptions.__dataclass_fields__.values()} <= set(vars(args))
    assert all(getattr(args, k) == v.default for k, v in PruneOptions.__dataclass_fields__.items()
               if k not in ("weights",))


@pytest.mark.parametrize("kw, text", [({"bogus": 1}, "unknown pruning option 'bogus'"),
                                      ({"calibration": "s.txt"}, "calibration needs the model file"),
                                      ({"pattern": "nope"}, "unknown pattern 'nope'")])
def test_bad_input_is_one_usage_error(kw, text):
    with pytest.raises(UsageError, match=text):
        prune_tensors({"fc": _w()}, **kw)

"""Run folders keep the evidence: hwcosim sim saves the RTL's words, hwcosim check re-verifies them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.flow.runs import write_manifest
from hwcosim.pruning.formats import csb


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    m = csb.encode(np.random.default_rng(5).normal(size=(16, 32)), 4, 0.5)
    csb.save(m, d / "w")
    assert main(["sim", "--csb", str(d / "w"), "--pes", "4", "--n", "3", "-o", str(d / "run")]) == 0
    return d / "run"


@pytest.mark.sim
def test_sim_keeps_rtl_words_and_check_agrees(run_dir, capsys):
    with np.load(run_dir / "outputs.npz") as z:
        assert z["rtl"].size == 3 * 16 and z["rtl_words"].size > 0
    man = json.loads((run_dir / "run.json").read_text())
    assert man["design"] == "bbs-spmxv" and {"inputs.json", "arrays.npz", "outputs.npz"} <= set(man["files"])
    assert main(["check", str(run_dir)]) == 0


@pytest.mark.sim
def test_check_refuses_a_changed_file(run_dir, tmp_path, capsys):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    with open(bad / "outputs.npz", "ab") as f:
        f.write(b"\0")
    assert main(["check", str(bad)]) == 2
    assert "sha256 differs" in capsys.readouterr().err


@pytest.mark.sim
def test_check_finds_a_wrong_rtl_word(run_dir, tmp_path, capsys):
    """One RTL word changed (and the manifest re-hashed): the recomputed golden model disagrees."""
    import shutil

    bad = tmp_path / "wrong"
    shutil.copytree(run_dir, bad)
    with np.load(bad / "outputs.npz") as z:
        out = {k: z[k] for k in z.files}
    out["rtl"] = out["rtl"].copy()
    out["rtl"].flat[5] += 1
    np.savez(bad / "outputs.npz", **out)
    write_manifest(bad, "bbs-spmxv")
    assert main(["check", str(bad)]) == 1
    assert "1 of 48 RTL words differ" in capsys.readouterr().err


def test_check_bad_folders(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope")]) == 2
    assert main(["check", str(tmp_path)]) == 2
    (tmp_path / "run.json").write_text("{not json")
    assert main(["check", str(tmp_path)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln]
    assert len(err) == 3 and all(e.startswith("error:") for e in err)

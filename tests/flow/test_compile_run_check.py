"""``hwcosim check RUN/`` of a folder written by ``hwcosim run -o`` (docs/compile.md).

- the run folder keeps the inputs, a copy of the compiled folder and every engine layer's words, all
  hashed in run.json; ``check`` recomputes every layer's words from the kept inputs and passes;
- an edited golden word, an edited input, an added file or a changed compiled model: exit 1, the
  message naming the first differing layer, row and word (or the file); a folder that is no run
  folder or misses a file: exit 2.

The run and check of a compiled BERT encoder: tests/flow/test_compile_examples.py (example (c)).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.compile import CompiledModel
from hwcosim.cosim.compile_run import is_compiled_run, run_compiled
from test_compile import X_MLP, mlp

import hwcosim


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """mlp.onnx compiled at 50 % and saved once; a run folder of it on X_MLP[:16] (golden words only)."""
    import onnx

    d = tmp_path_factory.mktemp("run-check")
    onnx.save(mlp(), d / "mlp.onnx")
    hwcosim.compile(str(d / "mlp.onnx"), target="bbs", sparsity=0.5, calibration=X_MLP).save(d / "out")
    run_compiled(CompiledModel.load(d / "out"), X_MLP[:16], out=d / "run")
    return d


@pytest.fixture
def run(compiled, tmp_path):
    shutil.copytree(compiled / "run", tmp_path / "run")
    return tmp_path / "run"


def _check(run_dir, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["check", str(run_dir)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_run_folder_rechecks(run, capsys):
    doc = json.loads((run / "run.json").read_text())
    assert is_compiled_run(run) and doc["n"] == 16
    names = set(doc["files"])
    assert {"inputs.npy", "golden_outputs.npy", "layer00-golden-words.npz", "layer01-golden-words.npz",
            "model/manifest.json", "model/report.json"} <= names
    rc, out = _check(run, capsys)
    assert rc == 0 and "mismatches" in out


def _edit(f: Path, key: str, index) -> None:
    z = dict(np.load(f))
    z[key][index] += 1
    np.savez(f, **z)


def test_an_edited_word_fails_naming_layer_row_and_word(run, capsys):
    _edit(run / "layer01-golden-words.npz", "outputs", (3, 2))
    rc, out = _check(run, capsys)
    assert rc == 1
    assert "layer 1 ('fc2', bbs-spmxv), golden output words in layer01-golden-words.npz: 1 of" in out
    assert "first at input 3, row 2" in out


def test_an_edited_input_fails(run, capsys):
    x = np.load(run / "inputs.npy")
    x[5, 7] += 0.5
    np.save(run / "inputs.npy", x)
    rc, out = _check(run, capsys)
    assert rc == 1 and "layer 0 ('fc1', bbs-spmxv), input words" in out and "input 5, row 7" in out


def test_an_added_file_or_a_changed_model_fails(run, capsys):
    (run / "extra.npy").write_bytes(b"x")
    rc, out = _check(run, capsys)
    assert rc == 1 and "extra.npy: not listed in run.json" in out
    (run / "extra.npy").unlink()
    rep = run / "model" / "report.json"
    rep.write_text(rep.read_text() + " ")
    rc, out = _check(run, capsys)
    assert rc == 1 and "model/report.json: sha256 differs" in out


def test_not_a_run_folder_or_an_incomplete_one_is_exit_2(run, compiled, capsys):
    rc, out = _check(compiled / "out", capsys)     # a compiled folder, not a run
    assert rc == 2 and "no run.json" in out
    (run / "layer00-golden-words.npz").unlink()
    rc, out = _check(run, capsys)
    assert rc == 2 and "layer00-golden-words.npz is missing" in out


def test_run_replaces_only_an_earlier_run_folder(compiled, run, tmp_path):
    """``-o`` an earlier run folder: replaced whole (no stale file is left to fail the check); a folder
    holding other files: refused (exit 2), nothing touched."""
    from hwcosim.models.errors import UsageError

    m = CompiledModel.load(compiled / "out")
    (run / "layer01-golden-words.npz").unlink()        # a damaged earlier run: replaced by the new one
    run_compiled(m, X_MLP[:4], out=run)
    assert json.loads((run / "run.json").read_text())["n"] == 4 and main(["check", str(run)]) == 0
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not a run folder of hwcosim run"):
        run_compiled(m, X_MLP[:4], out=other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]

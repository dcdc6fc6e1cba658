"""Every output folder is written whole or not at all; ``check`` covers every file of a run folder; the
sweep cache verifies each entry (issue 45, requirement 5). Each test runs in well under a second."""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hwcosim.models.atomic import staged_dir
from hwcosim.models.errors import CheckFailed, UsageError


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _prune(src: Path, out: Path, **kw):
    from hwcosim.pruning.api import prune_file
    from rich.console import Console

    return prune_file(src, out, console=Console(file=io.StringIO()), **{"pattern": "bbs", "banks": 4, "sparsity": 0.5,
                                                                        **kw})


@pytest.fixture
def weights(tmp_path) -> Path:
    src = tmp_path / "W.npz"
    np.savez(src, W=np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
    return src


def _fail_on(monkeypatch, name: str, n: int, when=lambda *a: True) -> list:
    """Make the ``n``-th call of ``os.<name>`` (among those ``when`` accepts) raise ENOSPC."""
    real, calls = getattr(os, name), []

    def fake(*a, **k):
        if when(*a):
            calls.append(a)
            if len(calls) == n:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(os, name, fake)
    return calls


# ---- prune: the whole export or nothing ----------------------------------------------------------------
def test_prune_failing_on_the_third_file_leaves_the_old_export_as_it_was(tmp_path, weights, monkeypatch):
    out = tmp_path / "exp"
    _prune(weights, out, sparsity=0.75)
    before = _tree(out)
    assert {"W.npz", "W.json", "W.hex", "manifest.json"} <= set(before)
    calls = _fail_on(monkeypatch, "replace", 3)  # the third file put in place (npz, hex, then json)
    with pytest.raises(UsageError, match="No space left"):  # a full disk is exit 2, one line
        _prune(weights, out)
    assert len(calls) == 3 and _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["W.npz", "exp"]  # no staging folder left


def test_prune_failing_at_any_rename_leaves_the_old_export_or_the_new_one_whole(tmp_path, weights, monkeypatch):
    """Every rename the command makes (files into the staging folder, the folder into place) fails in
    turn: each time the output folder is the old export, byte for byte, or (past the last) the new one."""
    out = tmp_path / "exp"
    _prune(weights, out, sparsity=0.75)
    before = _tree(out)
    _prune(weights, tmp_path / "want")
    want = _tree(tmp_path / "want")
    real = {"replace": os.replace, "rename": os.rename}
    for n in range(1, 20):
        calls = []

        def fake(*a, name, n=n, calls=calls, **k):
            calls.append(a)
            if len(calls) == n:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real[name](*a, **k)

        monkeypatch.setattr(os, "replace", lambda *a, **k: fake(*a, name="replace", **k))
        monkeypatch.setattr(os, "rename", lambda *a, **k: fake(*a, name="rename", **k))
        try:
            _prune(weights, out)
        except (OSError, UsageError):
            monkeypatch.undo()
            assert _tree(out) == before, f"failure at rename {n}: the old export changed"
            assert sorted(p.name for p in tmp_path.iterdir()) == ["W.npz", "exp", "want"], n
            continue
        monkeypatch.undo()
        break
    assert n > 3 and json.loads(_tree(out)["manifest.json"])["outputs"] == json.loads(want["manifest.json"])["outputs"]
    assert {k: v for k, v in _tree(out).items() if k != "manifest.json"} == {
        k: v for k, v in want.items() if k != "manifest.json"}


@pytest.mark.parametrize("swap", ["exchange", "two renames"])
def test_prune_failing_at_the_final_rename_leaves_the_old_export_as_it_was(tmp_path, weights, monkeypatch, swap):
    """The folder goes into place in one atomic exchange (Linux), else renamed aside and the new one in."""
    from hwcosim.models import atomic

    out = tmp_path / "exp"
    _prune(weights, out, sparsity=0.75)
    (out / "mine.txt").write_text("the user's own file")
    before = _tree(out)
    if swap == "exchange":
        calls = []

        def exchange(a, b):
            calls.append((a, b))
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(atomic, "_exchange", exchange)
    else:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
        calls = _fail_on(monkeypatch, "rename", 1, when=lambda src, dst: ".staging-" in str(src))
    with pytest.raises(OSError, match="No space"):
        _prune(weights, out)
    assert len(calls) == 1 and _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["W.npz", "exp"]
    monkeypatch.undo()
    _prune(weights, out, pattern="nm", n=2, m=4, banks=None, sparsity=None)  # another pattern replaces it whole
    man = json.loads((out / "manifest.json").read_text())
    listed = {f["file"] for r in man["outputs"] for f in r["files"]}
    assert set(_tree(out)) == listed | {"manifest.json", "mine.txt"}  # the old export's files gone, the user's kept
    assert (out / "mine.txt").read_text() == "the user's own file"


def _cli(argv, capsys):
    from hwcosim.cosim.cli import main

    rc = main(argv)
    return rc, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_dense_out_into_another_export_is_refused(tmp_path, weights, capsys):
    other = tmp_path / "other"
    _prune(weights, other)
    before = _tree(other)
    rc, err = _cli(["prune", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5", str(weights), "-o",
                    str(tmp_path / "new"), "--dense-out", str(other / "W.npz")], capsys)
    assert rc == 2 and len(err) == 1 and "another export" in err[0] and "manifest.json" in err[0], err
    assert _tree(other) == before and not (tmp_path / "new").exists()


def test_dense_out_onto_a_folder_is_refused(tmp_path, weights, capsys):
    (tmp_path / "dd").mkdir()
    rc, err = _cli(["prune", "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5", str(weights), "-o",
                    str(tmp_path / "new"), "--dense-out", str(tmp_path / "dd")], capsys)
    assert rc == 2 and len(err) == 1 and "is a folder" in err[0] and "Errno" not in err[0], err
    assert not (tmp_path / "new").exists() and list((tmp_path / "dd").iterdir()) == []


def test_dense_out_inside_the_own_export_is_part_of_it(tmp_path, weights):
    out = tmp_path / "exp"
    man = _prune(weights, out, dense_out=str(out / "W.pruned.npz"))
    assert (out / "W.pruned.npz").is_file() and man["dense"]["file"] == str(out / "W.pruned.npz")
    _prune(weights, out)  # the next export (without a dense model) drops the old one's dense file
    assert not (out / "W.pruned.npz").exists()


# ---- staged folders: merged or replaced, rolled back on failure ------------------------------------------
def test_a_merge_failing_half_way_puts_every_old_entry_back(tmp_path, monkeypatch):
    out = tmp_path / "bench"
    out.mkdir()
    for name in ("a.json", "b.png", "other.json"):
        (out / name).write_text(f"old {name}")
    before = _tree(out)
    calls = _fail_on(monkeypatch, "replace", 3, when=lambda src, dst: ".staging-" in str(src))
    with pytest.raises(OSError), staged_dir(out) as st:
        for name in ("a.json", "b.png", "c.json"):
            (st / name).write_text(f"new {name}")
    assert len(calls) == 3 and _tree(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


def test_replace_keeps_the_old_folder_whole_until_the_new_one_is_complete(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "old.txt").write_text("old")
    (out / "keep").mkdir()
    (out / "keep" / "k.txt").write_text("k")
    with staged_dir(out, replace=True, keep=lambda name: name != "old.txt") as st:
        (st / "new.txt").write_text("new")
        assert (out / "old.txt").read_text() == "old"  # nothing visible before the end
    assert _tree(out) == {"new.txt": b"new", "keep/k.txt": b"k"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


# ---- run folders: check covers every file --------------------------------------------------------------
def _run_folder(d: Path) -> Path:
    from hwcosim.cosim.flow.runs import save_npz, write_manifest

    d.mkdir()
    (d / "inputs.json").write_text(json.dumps({"params": {}}))
    save_npz(d / "arrays.npz", expected=np.arange(4))
    save_npz(d / "outputs.npz", rtl=np.arange(4))
    (d / "metrics.json").write_text(json.dumps({"cycles": 532, "mismatches": 0}))
    (d / "sim.log").write_text("log\n")
    write_manifest(d, "bbs-spmxv")
    return d


def test_run_manifest_covers_every_file(tmp_path):
    from hwcosim.cosim.flow.runs import load_run

    d = _run_folder(tmp_path / "run")
    man = json.loads((d / "run.json").read_text())
    assert set(man["files"]) | set(man["records"]) == {"inputs.json", "arrays.npz", "outputs.npz", "metrics.json",
                                                       "sim.log"}
    assert load_run(d)["manifest"]["design"] == "bbs-spmxv"
    (d / "sim.log").write_text("edited\n")
    with pytest.raises(UsageError, match="sim.log: sha256 differs"):
        load_run(d)


def test_check_fails_on_a_file_the_manifest_does_not_list(tmp_path, capsys):
    d = _run_folder(tmp_path / "run")
    man = json.loads((d / "run.json").read_text())
    del man["files"]["metrics.json"]  # an edited metrics.json, its entry taken out of the manifest
    (d / "run.json").write_text(json.dumps(man))
    (d / "metrics.json").write_text(json.dumps({"cycles": 99, "mismatches": 0}))
    rc, err = _cli(["check", str(d)], capsys)
    assert rc == 1 and len(err) == 1 and "metrics.json: not listed in run.json" in err[0], err
    d2 = _run_folder(tmp_path / "run2")
    (d2 / "sub").mkdir()
    (d2 / "sub" / "extra.npz").write_bytes(b"x")
    rc, err = _cli(["check", str(d2)], capsys)
    assert rc == 1 and "sub/extra.npz: not listed in run.json" in err[0], err


def test_a_new_run_replaces_the_old_run_folder_whole(tmp_path):
    from hwcosim.cosim.flow.runs import load_run, seal, staged_run

    d = _run_folder(tmp_path / "run")
    (d / "dump.vcd").write_text("old wave")  # a record of the old run, listed by a re-seal
    seal(d, "bbs-spmxv")
    (d / "notes.txt").write_text("the user's")  # not the run's: kept, and check names it
    with staged_run(d, "x") as (out, st):
        _run_folder(st / "r")
        for p in (st / "r").iterdir():
            p.rename(st / p.name)
        (st / "r").rmdir()
    assert not (d / "dump.vcd").exists() and (d / "notes.txt").read_text() == "the user's"
    with pytest.raises(CheckFailed, match="notes.txt: not listed"):
        load_run(d)


# ---- the sweep cache verifies its entries --------------------------------------------------------------
def test_a_tampered_sweep_cache_entry_is_recomputed_not_reported(tmp_path, monkeypatch):
    from hwcosim.cosim.flow import sweep
    from rich.console import Console

    calls = []

    def simulate(p, w, sim, test_dir):
        calls.append(p.pes)
        return {"cycles": 532, "ideal": 512, "utilisation": 512 / 532, "mismatches": 0}

    monkeypatch.setitem(sweep.ADAPTERS, "bbs-spmxv", dataclasses.replace(sweep.ADAPTERS["bbs-spmxv"],
                                                                         simulate=simulate))
    monkeypatch.setattr(sweep, "rtl_digest", lambda design, params: "rtl")  # no elaboration: a stand-in run
    spec = sweep.SweepSpec(design="bbs-spmxv", params={"rows": 16, "cols": 32, "banks": 4, "sparsity": 0.5},
                           grid={"pes": [2]}, name="t")
    kw = {"workers": 1, "processes": False, "progress": False, "plots": False}
    log = io.StringIO()
    rep = sweep.run_sweep(spec, tmp_path, console=Console(file=log), **kw)
    assert calls == [2] and rep["points"][0]["metrics"]["cycles"] == 532
    (entry,) = (tmp_path / "cache").glob("sim-*.json")
    doc = json.loads(entry.read_text())
    assert doc["checksum"] and doc["raw"]["cycles"] == 532
    doc["raw"]["cycles"] = 99
    entry.write_text(json.dumps(doc))
    log = io.StringIO()
    rep = sweep.run_sweep(spec, tmp_path, console=Console(file=log), **kw)
    assert calls == [2, 2] and rep["points"][0]["metrics"]["cycles"] == 532
    assert not rep["points"][0]["cached"]["sim"]
    assert f"cache entry {entry} does not match its checksum" in log.getvalue().replace("\n", "")
    assert json.loads(entry.read_text())["raw"]["cycles"] == 532  # rewritten
    sweep.run_sweep(spec, tmp_path, console=Console(file=io.StringIO()), **kw)
    assert calls == [2, 2]  # the rewritten entry verifies: served from the cache


def test_a_waveform_save_file_repointed_after_sealing_is_still_covered(tmp_path):
    from hwcosim.cosim.flow.runs import load_run, staged_run

    with staged_run(tmp_path / "run", "x") as (out, st):
        (st / "dump.vcd").write_text("wave")
        (st / "dump.gtkw").write_text(f'[dumpfile] "{st.resolve() / "dump.vcd"}"\n')
        _run_folder(st / "r")
        for p in (st / "r").iterdir():
            p.rename(st / p.name)
        (st / "r").rmdir()
        from hwcosim.cosim.flow.runs import seal

        seal(st, "bbs-spmxv")
    assert str(out.resolve()) in (out / "dump.gtkw").read_text()
    assert set(load_run(out)["manifest"]["records"]) == {"dump.vcd", "dump.gtkw", "sim.log"}

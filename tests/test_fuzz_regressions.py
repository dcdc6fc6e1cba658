"""Regression tests for reader crashes found by fuzzing (cosim.fuzz, fuzz/readers.py).

Every file in ``fuzz/regressions/<target>/`` is replayed through its target: the reader must
accept it or refuse it with its documented error. Inputs of bugs not fixed yet are strict
xfails (listed in :data:`OPEN`, and in ``cosim.fuzz.KNOWN_BUGS`` so the fuzzer looks past
them); when a fix lands the test XPASSes and fails: delete the entry from both lists.

The CLI tests show how each open bug reaches a user of ``hwcosim prune`` / ``hwcosim sim``: a
traceback where one ``error:`` line and exit status 2 are due.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main
from cosim.fuzz import KNOWN_BUGS, TARGETS, Crash, bundle, run_target, seeds

REGRESSIONS = Path(__file__).resolve().parent.parent / "fuzz" / "regressions"

#: "<target>/<file>": why it still crashes (owner: the reader's module)
OPEN: dict[str, str] = {}  # all reader crashes found so far are fixed; add new ones here

_FILES = sorted(f"{p.parent.name}/{p.name}" for p in REGRESSIONS.glob("*/*") if p.is_file())


def _param(key: str):
    marks = [pytest.mark.xfail(strict=True, raises=Crash, reason=OPEN[key])] if key in OPEN else []
    return pytest.param(key, marks=marks, id=key)


def test_regression_files_have_targets():
    assert _FILES, "fuzz/regressions/ is empty"
    for key in _FILES:
        assert key.split("/")[0] in TARGETS, key
    assert set(OPEN) <= set(_FILES)


def test_known_bugs_listed_for_fuzzer():
    """Every open bug's target is in KNOWN_BUGS (else the fuzzer stops on it at once)."""
    targets = {t for t, _ in KNOWN_BUGS}
    assert {k.split("/")[0] for k in OPEN} <= targets


@pytest.mark.parametrize("key", [_param(k) for k in _FILES])
def test_replay(key):
    target = key.split("/")[0]
    run_target(target, (REGRESSIONS / key).read_bytes())


# --- how the open bugs reach the command line ------------------------------------------------------

def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:   # pruning.cli._fail exits with status 2
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_refused(rc, err, out_dir: Path | None = None):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    if out_dir is not None:
        assert not out_dir.exists() or not any(out_dir.iterdir())


class _Reached(Exception):
    """The input was accepted: hwcosim sim got as far as starting the simulator."""


@pytest.fixture()
def no_sim(monkeypatch):
    import cosim.bbs

    def stop(*a, **k):
        raise _Reached()
    monkeypatch.setattr(cosim.bbs, "run_spmxv", stop)


def _csb_dir(tmp_path: Path, manifest: bytes | None = None) -> Path:
    d = tmp_path / "csb"
    d.mkdir()
    for name, content in bundle("csb").items():
        (d / name).write_bytes(manifest if (manifest is not None and name == "w.json") else content)
    return d


def test_cli_prune_npy_unclosed_header(tmp_path, capsys):
    f = tmp_path / "w.npy"
    f.write_bytes((REGRESSIONS / "npy/unclosed-header-dict.npy").read_bytes())
    out = tmp_path / "out"
    rc, _, err = _cli(["prune", str(f), "-o", str(out), "--pattern", "bbs", "--banks", "4",
                       "--sparsity", "0.5"], capsys)
    _assert_refused(rc, err, out)


def test_cli_prune_config_tensors_bool(tmp_path, capsys):
    w, c, out = tmp_path / "w.npy", tmp_path / "c.toml", tmp_path / "out"
    np.save(w, np.ones((8, 16), dtype=np.float32))
    c.write_bytes((REGRESSIONS / "config/tensors-bool.toml").read_bytes())
    rc, _, err = _cli(["prune", str(w), "-o", str(out), "--config", str(c)], capsys)
    _assert_refused(rc, err, out)


def test_cli_sim_empty_vector_file(tmp_path, capsys, no_sim):
    v = tmp_path / "x.npy"
    v.write_bytes(b"")
    rc, _, err = _cli(["sim", "--csb", str(_csb_dir(tmp_path)), "--pes", "1", "--vector", str(v)], capsys)
    _assert_refused(rc, err)


def test_cli_sim_vector_unclosed_header(tmp_path, capsys, no_sim):
    v = tmp_path / "x.npy"
    v.write_bytes((REGRESSIONS / "vectors/unclosed-header-dict.npy").read_bytes())
    rc, _, err = _cli(["sim", "--csb", str(_csb_dir(tmp_path)), "--pes", "1", "--vector", str(v)], capsys)
    _assert_refused(rc, err)


@pytest.mark.parametrize("key", [
    pytest.param(k, id=k)
    for k in ("csb-manifest/shape-empty.json", "csb-manifest/banks-infinity.json")])
def test_cli_sim_csb_manifest(key, tmp_path, capsys, no_sim):
    d = _csb_dir(tmp_path, (REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["sim", "--csb", str(d), "--pes", "1"], capsys)
    _assert_refused(rc, err)


def test_cli_sim_csb_checksum_refused(tmp_path, capsys, no_sim):
    """Control: a tampered CSB is refused cleanly (the harness above can pass)."""
    man = json.loads(bundle("csb")["w.json"])
    man["arrays"]["values"]["sha256"] = "0" * 64
    d = _csb_dir(tmp_path, json.dumps(man).encode())
    rc, _, err = _cli(["sim", "--csb", str(d), "--pes", "1"], capsys)
    _assert_refused(rc, err)
    assert "checksum" in err


def test_cli_sim_valid_csb_reaches_simulator(tmp_path, capsys, no_sim):
    """Control: the untouched bundle and vector seeds get past every reader."""
    v = tmp_path / "x.npy"
    v.write_bytes(seeds("vectors")[1])
    with pytest.raises(_Reached):
        main(["sim", "--csb", str(_csb_dir(tmp_path)), "--pes", "1", "--vector", str(v)])
    assert np.load(v).shape == (2, 16)

"""Regression tests for reader crashes found by fuzzing (cosim.flow.fuzz, fuzz/readers.py).

Every file in ``fuzz/regressions/<target>/`` is replayed through its target: the reader must
accept it or refuse it with its documented error. Inputs of bugs not fixed yet are strict
xfails (listed in :data:`OPEN`, and in ``hwcosim.cosim.flow.fuzz.KNOWN_BUGS`` so the fuzzer looks past
them); when a fix lands the test XPASSes and fails: delete the entry from both lists.

The CLI tests show how each open bug reaches a user of ``hwcosim prune`` / ``hwcosim sim``: a
traceback where one ``error:`` line and exit status 2 are due.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.flow.fuzz import KNOWN_BUGS, TARGETS, Crash, bundle, run_target, seeds

REGRESSIONS = Path(__file__).resolve().parents[2] / "fuzz" / "regressions"

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


class _Reached(BaseException):
    """The input was accepted: hwcosim sim got as far as starting the simulator. (Not an Exception:
    the dispatcher reports any Exception that reaches it as a bug, exit 70; this sentinel passes.)"""


@pytest.fixture()
def no_sim(monkeypatch):
    import hwcosim.cosim.designs.bbs.spmxv

    def stop(*a, **k):
        raise _Reached()
    monkeypatch.setattr(hwcosim.cosim.designs.bbs.spmxv, "run_spmxv", stop)


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


# --- what each new reader must do with its regression inputs (not just "no crash") -------------------------

#: "<target>/<file>" -> the outcome it must have (default for its target: "refused", the reader's error)
_OUTCOME = {
    "onnx/complex64.onnx": "accepted",                  # kept complex (prune skips it), not silently cast
    "jobcheck/not-utf8.py": "syntax", "jobcheck/unary-3000.py": "syntax",
    "jobcheck/attribute-chain-3000.py": "syntax", "jobcheck/binop-chain-3000.py": "syntax",
    "jobcheck/latin1-coding.py": "clean", "jobcheck/batch-size-inf.py": "clean",
    "jobcheck/attribute-chain-1500.py": "clean",
    "jobcheck/path-name-300.py": "path", "jobcheck/out-name-300.py": "permission",
}
_NEW = ("config-yaml", "onnx", "scenario", "sweep-spec", "sweep-cache", "jobcheck", "easyscale-checkpoint",
        "topology-csv")
_NEW_FILES = [k for k in _FILES if k.split("/")[0] in _NEW or "nested" in k or "5000-digits" in k]


@pytest.mark.parametrize("key", _NEW_FILES)
def test_replay_outcome(key):
    target = key.split("/")[0]
    res = run_target(target, (REGRESSIONS / key).read_bytes())
    want = _OUTCOME.get(key, "miss" if target == "sweep-cache" else "refused")
    if want == "refused":
        assert isinstance(res, Exception) and "\n" not in str(res), res
    elif want == "accepted":
        assert not isinstance(res, Exception), res
    elif want == "miss":
        assert res is None, res
    else:  # jobcheck: the findings of the static pass
        cats = {f.category for f in res[0]}
        assert cats == (set() if want == "clean" else {want}), [f.message for f in res[0]]


def test_yaml_config_semantics(tmp_path):
    """YAML configs read like TOML ones: no duplicate keys, skip is a boolean, no aliases."""
    from hwcosim.pruning.io import WeightIOError, load_config

    for name, msg in (("duplicate-key.yaml", "found the key 'pattern' twice"),
                      ("skip-quoted-no.yaml", "skip must be true or false, not 'no'"),
                      ("alias-bomb-9x9.yaml", "found an alias"),
                      ("tab-indent.yaml", "not valid YAML")):
        with pytest.raises(WeightIOError, match=msg):
            load_config(REGRESSIONS / "config-yaml" / name)
    ok = tmp_path / "ok.yaml"
    ok.write_text("format: Q2.6\nrule:\n  - {tensors: '*.bias', skip: true}\n"
                  "  - {tensors: '*', pattern: nm, n: 2, m: 4}\n")
    cfg = load_config(ok)
    assert cfg.rule_for("fc.bias").pattern is None and cfg.rule_for("fc.weight").pattern.name == "nm"


# --- the new readers through their commands: exit 2, one line, no traceback, nothing written ---------------

def _files(target: str) -> list:
    return [pytest.param(k, id=k) for k in _FILES if k.startswith(target + "/")]


@pytest.mark.parametrize("key", _files("onnx"))
def test_cli_prune_damaged_onnx(key, tmp_path, capsys):
    f, out = tmp_path / "m.onnx", tmp_path / "out"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["prune", str(f), "-o", str(out), "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                       "--dense-out"], capsys)
    _assert_refused(rc, err, out)


@pytest.mark.parametrize("key", _files("config-yaml"))
def test_cli_prune_damaged_yaml_config(key, tmp_path, capsys):
    w, c, out = tmp_path / "w.npy", tmp_path / "c.yaml", tmp_path / "out"
    np.save(w, np.ones((8, 16), dtype=np.float32))
    c.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["prune", str(w), "-o", str(out), "--config", str(c)], capsys)
    _assert_refused(rc, err, out)


@pytest.mark.parametrize("key", _files("scenario"))
def test_cli_cluster_run_damaged_scenario(key, tmp_path, capsys):
    f, out = tmp_path / "s.toml", tmp_path / "out"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["cluster", "run", str(f), "-o", str(out), "-q"], capsys)
    _assert_refused(rc, err, out)
    assert "Traceback" not in err


@pytest.mark.parametrize("key", _files("sweep-spec"))
def test_cli_sweep_damaged_spec(key, tmp_path, capsys):
    f, out = tmp_path / "s.toml", tmp_path / "out"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["sweep", str(f), "-o", str(out), "--no-progress"], capsys)
    _assert_refused(rc, err, out)


def test_cli_sweep_damaged_cache_entries_rerun(tmp_path, capsys, monkeypatch):
    """Damaged entries in ``--cache`` are misses: their points simulate again (a stand-in here), the
    entries are rewritten, exit 0, no traceback. One point per regression file, one rerun for all."""
    import dataclasses

    from hwcosim.cosim.flow import sweep

    calls = []

    def simulate(p, w, sim, test_dir):
        calls.append((p.pes, p.k))
        return {"cycles": 40, "ideal": 32, "utilisation": 0.8, "mismatches": 0}
    monkeypatch.setitem(sweep.ADAPTERS, "bbs-spmxv", dataclasses.replace(sweep.ADAPTERS["bbs-spmxv"],
                                                                         simulate=simulate))
    damaged = [k for k in _FILES if k.startswith("sweep-cache/")]
    spec, cache, out = tmp_path / "t.toml", tmp_path / "cache", tmp_path / "out"
    spec.write_text('design = "bbs-spmxv"\n[params]\nrows = 16\ncols = 32\nbanks = 4\n'
                    "[grid]\npes = [1, 2, 4, 8, 16]\nsparsity = [0.5, 0.75]\n")
    argv = ["sweep", str(spec), "-o", str(out), "--cache", str(cache), "--threads", "--workers", "1",
            "--no-progress"]
    assert _cli(argv, capsys)[0] == 0 and len(calls) == 10
    entries = sorted(cache.glob("sim-*.json"))
    assert len(entries) == 10 >= len(damaged)
    for entry, key in zip(entries, damaged):
        entry.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(argv, capsys)
    assert rc == 0 and "Traceback" not in err, err
    assert len(calls) == 10 + len(damaged)
    assert all(json.loads(e.read_text())["status"] == "ok" for e in entries)


@pytest.mark.parametrize("key", _files("jobcheck"))
def test_cli_jobcheck_malformed_scripts(key, tmp_path, capsys):
    """A script Python would refuse is a ``syntax`` finding (exit 1), never a traceback."""
    f, out = tmp_path / "train.py", tmp_path / "out"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    rc, _, err = _cli(["jobcheck", "--no-dry-run", "-o", str(out), str(f)], capsys)
    assert rc in (0, 1) and "Traceback" not in err and not err.strip(), (rc, err)
    rep = json.loads((out / "jobcheck_train.json").read_text())
    assert ("syntax" in {f["category"] for f in rep["findings"]}) == (_OUTCOME.get(key) == "syntax")


def test_cli_jobcheck_unreadable_script(tmp_path, capsys):
    (tmp_path / "train.py").mkdir()
    rc, _, err = _cli(["jobcheck", "--no-dry-run", "-o", str(tmp_path / "out"), str(tmp_path / "train.py")], capsys)
    _assert_refused(rc, err, tmp_path / "out")


@pytest.mark.parametrize("key", _files("easyscale-checkpoint"))
def test_easyscale_from_checkpoint_refuses(key, tmp_path):
    """No command reads checkpoints; the API refuses a damaged one in one line before starting workers."""
    import multiprocessing as mp

    from hwcosim.models.systems.elastic.easyscale import CheckpointError, EasyScaleTrainer

    f = tmp_path / "job.npz"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    with pytest.raises(CheckpointError) as ei:
        EasyScaleTrainer.from_checkpoint(f, physical=1, mp_context="fork")
    assert "\n" not in str(ei.value) and str(f) in str(ei.value)
    assert not mp.active_children()


@pytest.mark.parametrize("key", _files("topology-csv"))
def test_lingjun_topology_file_refused(key, tmp_path):
    """No command takes a topology path; lingjun_2023(path) refuses a damaged CSV in one line."""
    from hwcosim.models.systems.cluster.topology import TopologyError, lingjun_2023

    f = tmp_path / "topo.csv"
    f.write_bytes((REGRESSIONS / key).read_bytes())
    with pytest.raises(TopologyError) as ei:
        lingjun_2023(f)
    assert "\n" not in str(ei.value)


def test_dense_out_npz_with_a_damaged_unselected_member_is_refused(tmp_path):
    """Found by the mutation fuzzer in a fresh-clone run: a member whose central-directory name
    differs from its local header ('fc.bias/npy' vs 'fc.bias.npy') is never read by the pruner (it
    loads only the selected tensor) but the dense writer copies every member: a clean refusal."""
    import io

    from hwcosim.pruning.roundtrip import RoundTripError, write_dense

    buf = io.BytesIO()
    np.savez(buf, **{"fc.weight": np.ones((4, 4), np.float32), "fc.bias": np.zeros(4, np.float32)})
    data = bytearray(buf.getvalue())
    at = data.rfind(b"fc.bias.npy")  # the central directory's copy of the name (the last one)
    data[at:at + 11] = b"fc.bias/npy"
    src = tmp_path / "model.npz"
    src.write_bytes(bytes(data))
    with pytest.raises(RoundTripError, match="cannot read every array"):
        write_dense(src, tmp_path / "dense.npz", {"fc.weight": np.zeros((4, 4), np.float32)})
    assert not (tmp_path / "dense.npz").exists()

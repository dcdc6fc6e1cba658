"""Property tests (hypothesis) of every reader of user files, and of the CLI's refusal contract.

Readers (cosim.fuzz.TARGETS): weights (.npy/.npz/.safetensors/.pt via pruning.io), TOML
configs, ``hwcosim sim --vector`` files, and the CSB/FSS/N:M/CSR bundles (manifest and .npz).
Each must accept an input or refuse it with its documented error; through ``hwcosim prune`` /
``hwcosim sim`` a refusal is exit status 2 with one ``error:`` line and no output files.
Crashes already recorded as strict xfails (tests/test_fuzz_regressions.py, cosim.fuzz.KNOWN_BUGS)
are skipped here with ``assume`` so that these tests look for new ones.
"""

from __future__ import annotations

import importlib.util
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cosim import fuzz
from cosim.cli import main
from cosim.fuzz import TARGETS, Crash, bundle, known_bug, run_target, seeds

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
_NO_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                               reason="torch is an optional extra (pip install torch==2.13.0); its seeds need it")
_NAMES = [pytest.param(t, marks=_NO_TORCH) if t == "torch" else t for t in TARGETS]


def _run(target: str, data: bytes):
    """run_target, skipping (assume) the crashes already recorded as known bugs."""
    try:
        return run_target(target, data)
    except Crash as e:
        assume(not known_bug(target, e.__cause__))
        raise


@st.composite
def _mutated(draw, target: str):
    """A seed of ``target`` with a few byte-level edits: flips, truncation, insertion, splice."""
    base = bytearray(draw(st.sampled_from(seeds(target))))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if not base:
            break
        i = draw(st.integers(0, len(base) - 1))
        if op == "flip":
            base[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            base[i] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, ord("{"), ord("}"), ord(","), ord("9")]))
        elif op == "cut":
            del base[i:]
        elif op == "insert":
            base[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del base[i:i + draw(st.integers(1, 16))]
    return bytes(base)


# --- reader level ----------------------------------------------------------------------------------

@pytest.mark.parametrize("target", _NAMES)
def test_seeds_are_accepted(target):
    """The fuzzers start from valid files (else they would only explore the error paths)."""
    for s in seeds(target):
        res = run_target(target, s)
        assert not isinstance(res, Exception), res


def test_run_target_reports_crashes():
    """The oracle itself: an exception outside the documented error type is a Crash."""
    t = fuzz.Target("boom", fuzz._single(".bin"), lambda p: {}[p.name], (ValueError,))
    fuzz.TARGETS["boom"] = t
    try:
        with pytest.raises(Crash, match="KeyError"):
            run_target("boom", b"x")
    finally:
        dict.pop(fuzz.TARGETS, "boom")


@pytest.mark.parametrize("target", _NAMES)
@FAST
@given(data=st.data())
def test_reader_survives_mutations(target, data):
    _run(target, data.draw(_mutated(target)))


@pytest.mark.parametrize("target", ["npy", "npz", "safetensors", "torch", "config", "csb-manifest"])
@settings(max_examples=25, deadline=None)
@given(blob=st.binary(max_size=300))
def test_reader_survives_garbage(target, blob):
    _run(target, blob)


_WEIRD = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.lists(st.one_of(st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 5), max_size=2),
)


@st.composite
def _manifest(draw, kind: str):
    """A valid manifest of ``kind`` with one to three fields (possibly nested) replaced or removed."""
    man = json.loads(bundle(kind)["w.json"])
    for _ in range(draw(st.integers(1, 3))):
        obj = man
        key = draw(st.sampled_from(sorted(obj)))
        while isinstance(obj[key], dict) and obj[key] and draw(st.booleans()):
            obj = obj[key]
            key = draw(st.sampled_from(sorted(obj)))
        if draw(st.integers(0, 5)) == 0:
            del obj[key]
        else:
            obj[key] = draw(_WEIRD)
    return json.dumps(man, allow_nan=True).encode()


@pytest.mark.parametrize("kind", ["csb", "fss", "nm", "sparse"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_manifest_fields(kind, data):
    _run(f"{kind}-manifest", data.draw(_manifest(kind)))


def test_contract_check_can_fail():
    with pytest.raises(AssertionError):
        _check_contract(2, "error: one\ntwo\n", None)
    with pytest.raises(AssertionError):
        _check_contract(1, "error: x\n", None)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "partial.npz").write_bytes(b"")
        with pytest.raises(AssertionError):
            _check_contract(2, "error: x\n", Path(d))


# --- through the command line: exit 2, one line, no partial output ------------------------------------

def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:       # pruning.cli._fail
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _check_contract(rc, err, out_dir: Path | None):
    assert rc in (0, 2), (rc, err)
    assert "Traceback" not in err
    if rc == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        if out_dir is not None:
            assert not out_dir.exists() or not any(out_dir.iterdir()), sorted(out_dir.iterdir())


_PRUNE = ["--pattern", "bbs", "--banks", "4", "--sparsity", "0.5"]


@pytest.mark.parametrize("target,suffix", [("npy", ".npy"), ("npz", ".npz"), ("safetensors", ".safetensors"),
                                           pytest.param("torch", ".pt", marks=_NO_TORCH)])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cli_prune_damaged_weights(target, suffix, data, capsys):
    blob = data.draw(_mutated(target))
    with tempfile.TemporaryDirectory() as d:
        f, out = Path(d) / f"w{suffix}", Path(d) / "out"
        f.write_bytes(blob)
        try:
            rc, _, err = _cli(["prune", str(f), "-o", str(out), *_PRUNE], capsys)
        except Exception as e:  # noqa: BLE001
            assume(not known_bug(target, e))
            raise
        _check_contract(rc, err, out)


_DTYPES = st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.int32, np.uint8, np.bool_,
                           np.complex64])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9)))
def test_cli_prune_odd_arrays(a, capsys):
    """Well-formed files holding arrays prune cannot use (0-D, empty, NaN, bool, complex, odd
    shapes) are refused cleanly; usable ones are pruned."""
    with tempfile.TemporaryDirectory() as d:
        f, out = Path(d) / "w.npy", Path(d) / "out"
        np.save(f, a)
        rc, _, err = _cli(["prune", str(f), "-o", str(out), *_PRUNE], capsys)
        _check_contract(rc, err, out)
        if rc == 0:
            assert (out / "manifest.json").exists()


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


_TOML_VAL = st.one_of(st.booleans(), st.integers(-5, 70), st.sampled_from([0.0, 0.5, 0.875, 1.0, -0.1, 2.0]),
                      st.floats(allow_nan=True, allow_infinity=True, width=32),
                      st.sampled_from(["bbs", "nm", "fss", "block", "vector", "balanced", "unstructured",
                                       "Q1.7", "Q9.9", "auto", "4x4", "1x16", "x", "*", "w", "row", ""]),
                      st.lists(st.integers(0, 8), max_size=3))
_RULE_KEYS = ["tensors", "pattern", "banks", "sparsity", "n", "m", "region", "block", "length", "orient",
              "norm", "format", "skip", "bogus"]


@st.composite
def _config(draw) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(f"format = {_toml_value(draw(_TOML_VAL))}")
    for _ in range(draw(st.integers(0, 3))):
        lines.append("[[rule]]")
        keys = draw(st.lists(st.sampled_from(_RULE_KEYS), unique=True, max_size=6))
        if draw(st.integers(0, 3)):
            keys = ["tensors", "pattern", *keys]
        for k in dict.fromkeys(keys):
            v = draw(_TOML_VAL)
            if k == "tensors" and draw(st.booleans()):
                v = "w"
            if k == "pattern" and draw(st.booleans()):
                v = "bbs"
            lines.append(f"{k} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=_config())
def test_cli_prune_configs(cfg, capsys):
    with tempfile.TemporaryDirectory() as d:
        w, c, out = Path(d) / "w.npy", Path(d) / "c.toml", Path(d) / "out"
        np.save(w, np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
        c.write_text(cfg)
        try:
            rc, _, err = _cli(["prune", str(w), "-o", str(out), "--config", str(c)], capsys)
        except Exception as e:  # noqa: BLE001
            assume(not known_bug("config", e))
            raise
        _check_contract(rc, err, out)


class _Reached(Exception):
    pass


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cli_sim_damaged_inputs(data, capsys, monkeypatch):
    """hwcosim sim with a damaged CSB manifest or vector file: exit 2 and one line, or (when the
    damage is harmless) it gets as far as the simulator, which is stubbed out here."""
    import cosim.bbs

    def stop(*a, **k):
        raise _Reached()
    monkeypatch.setattr(cosim.bbs, "run_spmxv", stop)
    which = data.draw(st.sampled_from(["manifest", "vector"]))
    man = data.draw(_manifest("csb")) if which == "manifest" else bundle("csb")["w.json"]
    vec = data.draw(_mutated("vectors")) if which == "vector" else seeds("vectors")[0]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for name, content in bundle("csb").items():
            (d / name).write_bytes(man if name == "w.json" else content)
        (d / "x.npy").write_bytes(vec)
        try:
            rc, _, err = _cli(["sim", "--csb", str(d), "--pes", "1", "--vector", str(d / "x.npy")], capsys)
        except _Reached:
            capsys.readouterr()
            return
        except Exception as e:  # noqa: BLE001
            assume(not known_bug("csb-manifest" if which == "manifest" else "vectors", e))
            raise
        _check_contract(rc, err, None)

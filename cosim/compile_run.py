"""``hwcosim compile`` / ``hwcosim run``: the library behind the two commands (``docs/compile.md``).

- :func:`compile_to_folder`: read a model and its calibration inputs, compile
  (:func:`hwcosim.cosim.compile.compile_model`) and save the folder (manifest, weights, engine
  Verilog, report), every input checked before anything is written;
- :func:`run_compiled`: on the user's inputs (and labels), the accuracy (or output error vs the
  float network) of the float network, the quantised dense network (the same engines at sparsity
  0), the pruned float network and the accelerator's golden model, and with ``rtl`` the RTL of every
  engine layer compared word for word with the golden model; cycles per inference vs the ideal;
  latency and throughput only at an Fmax measured by ``hwcosim build DESIGN --ooc`` of each
  engine configuration (:func:`measured_fmax`), never an assumed clock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from hwcosim.cosim.compile import CompiledModel, compile_model, engine_stem
from hwcosim.models.errors import UsageError

__all__ = ["load_array", "compile_to_folder", "run_compiled", "measured_fmax", "build_command", "BUILDS"]

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

def measured_fmax(engine: str, params, roots=None) -> tuple[float, Path] | None:
    """The worst Fmax over seeds (MHz) that ``hwcosim build ENGINE --ooc`` measured for exactly this
    parameter set, and its ``build.json``; None when no build of it is cached under ``roots``
    (default :data:`BUILDS`). Several: the most recent file."""
    from hwcosim.cosim.flow.build import _jsonable

    want = _jsonable(params.to_dict())
    found = []
    for root in [Path(r) for r in (roots or [BUILDS])]:
        if not root.is_dir():
            continue
        for f in root.rglob("build.json"):
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            results = doc.get("results", [doc]) if isinstance(doc, dict) else []
            for r in results:
                if (isinstance(r, dict) and r.get("design") == engine and r.get("params") == want
                        and r.get("mode", "").startswith("out-of-context") and r.get("worst_fmax_mhz", 0) > 0):
                    found.append((f.stat().st_mtime, float(r["worst_fmax_mhz"]), f))
    if not found:
        return None
    _, fmax, f = max(found, key=lambda t: t[0])
    return fmax, f


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
    from hwcosim.models.atomic import check_out_dir

    if out is not None:
        check_out_dir(out)
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
    for st, d in zip(m.stages, rep["layers"]):
        row = {"index": st.index, "name": st.layer.name, "engine": st.engine, "engine_config": d["engine_config"],
               "cycles_expected": d["cycles_expected"], "cycles_ideal": d["cycles_ideal"],
               "cycles_per": d["cycles_per"]}
        hit = measured_fmax(st.engine, st.params, builds)
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
           "notes": ["cycles and latency per inference: batch 1, engine layers one after the other, streams that "
                     "never stall; host ops and weight loading are not counted",
                     "latency only at the Fmax hwcosim build --ooc measured for each engine configuration "
                     "(nextpnr, not vendor sign-off); no assumed clock"]}
    if not rtl and out is None:
        return res
    from hwcosim.models.atomic import staged_dir

    if out is None:
        res["rtl"] = m.simulate(x, sim=sim)
        return res
    with staged_dir(out) as st_dir:
        np.save(st_dir / "inputs.npy", x)
        if y is not None:
            np.save(st_dir / "labels.npy", y)
        np.save(st_dir / "golden_outputs.npy", golden)
        _, words, _ = m._run(x, trace=True)
        for st, (win, wout) in zip(m.stages, words):
            np.savez(st_dir / f"layer{st.index:02d}-golden-words.npz", inputs=win, outputs=wout)
        if rtl:
            res["rtl"] = m.simulate(x, out=st_dir / "rtl", sim=sim)
            for d in res["rtl"]["layers"]:
                d["run_dir"] = str(Path(out) / "rtl" / Path(d["run_dir"]).name)
        (st_dir / "run.json").write_text(json.dumps(res, indent=1))
    return res

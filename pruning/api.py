"""Pruning as a library: prune weight tensors with a sparsity pattern and write them in the pattern's
storage format, ready for the golden models and the RTL (``hwcosim prune`` is :mod:`hwcosim.cosim.cli.prune`
over these functions).

- :func:`prune_tensors`: prune in memory (a weight file or a ``{name: array}`` dict); returns one
  :class:`dict` per pruned tensor with its mask, the encoded object, the dense dequantised values and
  the figures the command prints.
- :func:`prune_file`: the whole command: prune, then write every output (pattern formats, optional
  dense model, ``manifest.json``) through a staging folder; returns the manifest's contents.

Both take the command's options as keyword arguments (the same names as its flags: ``pattern``,
``sparsity``, ``banks``, ``block``, ``n``, ``m``, ``region``, ``length``, ``orient``, ``norm``,
``format``, ``tensors``, ``config``, ``calibration``, ``method``, ...); bad input raises
:class:`~hwcosim.models.errors.UsageError`, a mask that breaks its pattern's invariant
:class:`~hwcosim.models.errors.CheckFailed` (:func:`prune_file`) or ``check == "FAILED"``
(:func:`prune_tensors`).

Output per pattern (stem = the tensor name, sanitised):

========================  ===========================================================
``bbs``, ``balanced``      CSB (:mod:`hwcosim.pruning.formats.csb`): ``.npz``, ``.json``, ``.hex``
``fss``                    FSS (:mod:`hwcosim.pruning.formats.fss`) + memory image
``nm``                     N:M compressed (:mod:`hwcosim.pruning.formats.nm`) + memory image
``block``                  BSR (:mod:`hwcosim.pruning.formats.sparse`)
``unstructured``, ``vector``  CSR (:mod:`hwcosim.pruning.formats.sparse`)
========================  ===========================================================

plus a top-level ``manifest.json`` listing every file written, with sha256 checksums.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_text
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.fixedpoint import Q
from hwcosim.models.tables import show
from hwcosim.pruning.base import PatternError, get_pattern, pattern_names
from hwcosim.pruning.formats import csb, fss, nm, sparse
from hwcosim.pruning.formats.csb import FormatError
from hwcosim.pruning.io import PruneConfig, Rule, WeightIOError, load_config, load_tensors, select
from hwcosim.pruning.roundtrip import DENSE_SUFFIXES, RoundTripError, default_dense_path, write_dense

__all__ = ["PruneOptions", "prune_file", "prune_tensors", "sanitize", "MANIFEST_FORMAT"]

MANIFEST_FORMAT = "hwcosim-prune-manifest"

#: flag -> pattern dataclass field (the flag is offered to a pattern that has that field).
_FLAGS = {
    "sparsity": "--sparsity",
    "banks": "--banks",
    "block": "--block",
    "n": "--n",
    "m": "--m",
    "region": "--region",
    "length": "--length",
    "orient": "--orient",
    "norm": "--norm",
}


def _fail(msg: str):
    raise UsageError(msg)


def sanitize(name: str) -> str:
    """A file stem from a tensor name: runs of characters other than ``[A-Za-z0-9_-]`` -> ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "tensor"


def _parse_int(text, flag):
    try:
        return int(text)
    except (TypeError, ValueError):
        _fail(f"{flag} takes an integer here, not {text!r}")


def _flag_values(opts, pattern: str) -> dict:
    """The pattern flags given on the command line, converted for ``pattern``."""
    out = {}
    for key, flag in _FLAGS.items():
        val = getattr(opts, key)
        if val is not None:
            out[key] = _parse_int(val, flag) if key == "block" and pattern == "balanced" else val
    return out


def _pattern_from_flags(opts):
    from hwcosim.pruning.base import _REGISTRY  # registry filled by pattern_names()

    name = opts.pattern or "bbs"
    names = pattern_names()
    if name not in names:
        _fail(f"unknown pattern {name!r}; choose one of: {', '.join(names)}")
    fields = {f.name for f in dataclasses.fields(_REGISTRY[name])}
    for key, flag in _FLAGS.items():
        if getattr(opts, key) is not None and key not in fields:
            takes = " ".join(_FLAGS[f] for f in _FLAGS if f in fields)
            _fail(f"{flag} does not apply to --pattern {name} (it takes: {takes})")
    try:
        return get_pattern(name, **_flag_values(opts, name))
    except PatternError as e:
        _fail(str(e))


def _config_with_flags(config: PruneConfig, opts) -> PruneConfig:
    """``config`` with the pattern flags of the command line applied over every rule's values (command
    line over file, :mod:`hwcosim.models.precedence`); a flag that applies to no rule's pattern is an error."""
    from hwcosim.models.precedence import layered

    if opts.pattern is not None:
        _fail(f"--pattern {opts.pattern} with --config: the config chooses the pattern of each tensor; "
              "drop --pattern (pattern flags such as --sparsity override the rules' values)")
    given = [k for k in _FLAGS if getattr(opts, k) is not None]
    if not given:
        return config
    used: set[str] = set()
    rules = []
    for i, r in enumerate(config.rules, 1):
        if r.pattern is None:
            rules.append(r)
            continue
        fields = {f.name for f in dataclasses.fields(r.pattern) if f.init}
        mine = {k: v for k, v in _flag_values(opts, r.pattern.name).items() if k in fields}
        used |= set(mine)
        params = layered((f"{config.source}: rule {i}", {f: getattr(r.pattern, f) for f in fields}),
                         ("command line", mine))
        try:
            rules.append(dataclasses.replace(r, pattern=get_pattern(r.pattern.name, **params)))
        except PatternError as e:
            _fail(f"{config.source}: rule {i} with the command line's flags: {e}")
    unused = [_FLAGS[k] for k in given if k not in used]
    if unused:
        pats = sorted({r.pattern.name for r in config.rules if r.pattern is not None})
        _fail(f"{unused[0]} applies to no rule of {config.source} (its patterns: {', '.join(pats) or 'none'}); "
              "drop it")
    return dataclasses.replace(config, rules=tuple(rules))


def _as_matrix(a: np.ndarray) -> np.ndarray:
    return a if a.ndim == 2 else a.reshape(a.shape[0], -1)


def _encode(pattern, w: np.ndarray, mask: np.ndarray, fmt: Q | None):
    """Encode ``w`` under ``mask``; returns (object, format name, dense dequantised, packed bytes)."""
    kept = np.abs(w[mask])
    if fmt is None:
        fmt = Q.fitting(float(kept.max()) if kept.size else 0.0, 8)
    rows, cols = w.shape
    name = pattern.name
    if name in ("bbs", "balanced"):
        banks = pattern.banks if name == "bbs" else pattern.banks(cols)
        m = csb.encode(w, banks, mask=mask, fmt=fmt)
        return m, csb.FORMAT_NAME, m.to_dense(), -(-m.values.size * (fmt.width + m.index_bits) // 8)
    if name == "fss":
        m = fss.encode(w, pattern.region, mask=mask, fmt=fmt)
        return m, fss.FORMAT_NAME, m.to_dense(), m.payload_bytes
    if name == "nm":
        m = nm.encode(w, pattern.n, pattern.m, mask=mask, fmt=fmt)
        return m, nm.FORMAT_NAME, m.to_dense(), m.payload_bytes
    nnz = int(mask.sum())
    if name == "block":
        a = sparse.to_bsr(w, mask, pattern.block)
        br, bc = pattern.block
        nb = nnz // (br * bc)
        bits = nb * (br * bc * fmt.width + max(1, (cols // bc - 1).bit_length())) + (rows // br + 1) * max(
            1, nb.bit_length()
        )
    else:
        a = sparse.to_csr(w, mask)
        bits = nnz * (fmt.width + max(1, (cols - 1).bit_length())) + (rows + 1) * max(1, nnz.bit_length())
    deq = np.zeros_like(w)
    from hwcosim.models.fixedpoint import dequantize, quantize

    deq[mask] = dequantize(quantize(w[mask], fmt), fmt)
    return (a, fmt), sparse.FORMAT_NAME, deq, -(-bits // 8)


def _save(obj, fmt_name: str, out: Path, stem: str, images, extra: dict) -> dict:
    if fmt_name == csb.FORMAT_NAME:
        man = csb.save(obj, out, stem, extra=extra)
        return {"manifest": man, "files": [f"{stem}.npz", f"{stem}.hex", f"{stem}.json"]}
    if fmt_name == fss.FORMAT_NAME:
        man = fss.save(obj, out, stem, images=images, extra=extra)
    elif fmt_name == nm.FORMAT_NAME:
        man = nm.save(obj, out, stem, images=images, extra=extra)
    else:
        a, q = obj
        man = sparse.save(a, out, stem, fmt=q, extra=extra)
    return {"manifest": man, "files": [f["file"] for f in man["files"].values()] + [f"{stem}.json"]}


def _plan(opts, tensors: dict) -> tuple[list, list]:
    """(name, matrix, pattern, fmt) for every tensor to prune, and (name, reason) skips."""
    try:
        default_fmt = None if opts.format == "auto" else Q.parse(opts.format)
    except ValueError as e:
        _fail(str(e))
    names = list(tensors)
    try:
        chosen = select(names, opts.tensors)
    except WeightIOError as e:
        _fail(str(e))
    config: PruneConfig | None = None
    if opts.config:
        try:
            config = load_config(opts.config)
        except WeightIOError as e:
            _fail(str(e))
        config = _config_with_flags(config, opts)
    cli_pattern = None if config else _pattern_from_flags(opts)
    plan, skipped = [], []
    for name in chosen:
        a = tensors[name]
        if a.ndim < 2:
            skipped.append((name, f"{a.ndim}-D"))
            continue
        if a.dtype.kind not in "fiu":
            skipped.append((name, f"dtype {a.dtype}"))
            continue
        if config is not None:
            rule: Rule | None = config.rule_for(name)
            if rule is None or rule.pattern is None:
                skipped.append((name, "no rule" if rule is None else "skip rule"))
                continue
            plan.append(
                # --format on the command line, else the rule's, else the config's
                (name, a, rule.pattern, default_fmt if opts.format != "auto" else (rule.fmt or config.fmt))
            )
        else:
            plan.append((name, a, cli_pattern, default_fmt))
    if not plan:
        _fail(
            f"nothing to prune in {opts.weights}: no 2-D tensor selected"
            + (f" (skipped: {', '.join(f'{n} ({r})' for n, r in skipped[:6])})" if skipped else "")
        )
    return plan, skipped


@dataclasses.dataclass
class PruneOptions:
    """Every option of a pruning run (the flags of ``hwcosim prune``, same names and defaults)."""

    weights: str | None = None
    out: str = "build/prune"
    pattern: str | None = None
    sparsity: float | None = None
    banks: int | None = None
    block: str | int | None = None
    n: int | None = None
    m: int | None = None
    region: str | None = None
    length: int | None = None
    orient: str | None = None
    norm: str | None = None
    format: str = "auto"
    tensors: str | None = None
    config: str | None = None
    image: str = "hex"
    dense_out: str | None = None
    dense_values: str = "masked"
    dry_run: bool = False
    calibration: str | None = None
    method: str = "magnitude"
    report: bool = False
    damp: float = 0.01
    blocksize: int = 128

    @classmethod
    def of(cls, **options) -> PruneOptions:
        """The options from keyword arguments; an unknown name is bad input."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise UsageError(f"unknown pruning option {unknown[0]!r}; the options are: {', '.join(sorted(names))}")
        return cls(**options)


def prune_tensors(weights, *, console=None, **options) -> tuple[list[dict], list[tuple[str, str]]]:
    """Prune ``weights`` (a weight file, a checkpoint folder, or a ``{name: array}`` dict) in memory.

    ``options`` are those of :class:`PruneOptions` (``pattern="bbs", banks=16, sparsity=0.875``,
    ``calibration="sentences.txt", method="wanda"``, ...). Returns ``(results, skipped)``: one dict
    per pruned tensor (``tensor``, ``shape``, ``pattern``, ``format``, ``value_format``, ``sparsity``,
    ``check``, ``rel_error``, ``bytes_before``, ``bytes_after``, and ``mask``, ``encoded`` (the format's
    object), ``dense`` (the dequantised pruned matrix) and ``weights`` (the matrix pruned)), and
    ``(name, reason)`` for every tensor left alone. Calibration needs a file (``weights`` a path).
    """
    opts = PruneOptions.of(**options)
    if isinstance(weights, dict):
        if opts.calibration is not None:
            raise UsageError("calibration needs the model file: give weights as a path, not a dict of arrays")
        opts.weights = "<arrays>"
        tensors = {str(k): np.asarray(v) for k, v in weights.items()}
    else:
        opts.weights = str(weights)
        tensors = None
    results, skipped, _ = _prune(opts, console, tensors)
    for r in results:
        r["mask"], r["encoded"], r["dense"], r["weights"] = r.pop("_mask"), r.pop("_obj"), r.pop("_deq"), r.pop("_w")
        r.pop("_dense")
    return results, skipped


def prune_file(weights, out: str = "build/prune", *, console=None, **options) -> dict:
    """Prune a weight file and write every output into ``out`` (what ``hwcosim prune`` does).

    ``options`` are those of :class:`PruneOptions`. The files are written into a staging folder
    beside ``out``, which replaces ``out`` in one step when all are complete (the old export's files
    go with the old folder; other files in it are kept): a failure leaves the old export as it was.
    Returns the manifest (``outputs``: one entry per pruned tensor with its files; ``skipped``;
    ``dense`` with ``dense_out``); with
    ``dry_run=True`` nothing is written and the manifest is returned without ``source``. Raises
    :class:`~hwcosim.models.errors.CheckFailed` when a mask breaks its pattern's invariant.
    """
    from rich.console import Console

    opts = PruneOptions.of(weights=str(weights), out=str(out), **options)
    console = console or Console()
    results, skipped, pre = _prune(opts, console)
    images = {"hex": ("hex",), "bin": ("bin",), "both": ("hex", "bin"), "none": ()}[opts.image]
    out = Path(opts.out)
    written = []
    dense_dst = None
    if opts.dense_out is not None:
        dense_dst = Path(opts.dense_out) if opts.dense_out else default_dense_path(opts.weights, out)
    if opts.dry_run:
        return _write_outputs(opts, console, results, skipped, images, out, out, dense_dst, written, pre)
    _check_collisions(opts, out, results, images, dense_dst)
    # every file is written into a staging folder beside the output, which then replaces the output
    # folder whole (one rename; the user's own files in it are kept): a failure at any point leaves the
    # old export as it was and nothing of the new one visible
    from hwcosim.models.atomic import check_out_dir, new_staging

    staging = new_staging(check_out_dir(out), replace=True)
    try:
        return _write_outputs(opts, console, results, skipped, images, staging, out, dense_dst, written, pre)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _not_in_old_export(out: Path):
    """``keep(name)`` for the output folder's old entries: those the old manifest lists are its files
    (dropped with it); anything else is the user's and stays."""
    listed = {"manifest.json"}
    try:
        man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        man = None
    if isinstance(man, dict) and man.get("format") == MANIFEST_FORMAT:
        for r in man.get("outputs") or []:
            for f in (r.get("files") or []) if isinstance(r, dict) else []:
                if isinstance(f, dict) and isinstance(f.get("file"), str):
                    listed.add(Path(f["file"]).parts[0] if Path(f["file"]).parts else f["file"])
        if isinstance(man.get("fidelity"), str):
            listed.add(man["fidelity"])
        dense = man.get("dense")
        if isinstance(dense, dict) and isinstance(dense.get("file"), str):
            with contextlib.suppress(OSError, ValueError):
                rel = Path(dense["file"]).resolve().relative_to(out.resolve())
                listed.add(rel.parts[0])
    else:
        listed.discard("manifest.json")  # not an export's: the user's file
    return lambda name: name not in listed


def _prune(opts: PruneOptions, console=None, tensors: dict | None = None) -> tuple[list, list, dict | None]:
    """(results, skipped, calibrated pruning or None): every selected tensor pruned and encoded."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console()
    if tensors is None:
        _resolve_folder(opts)
        if opts.dense_out is not None:
            _check_dense_out(opts)
        try:
            keep = None
            if str(opts.weights).lower().endswith(".npz") and opts.tensors:
                from hwcosim.pruning.io import npz_members

                keep = set(select(list(npz_members(opts.weights)), opts.tensors)).__contains__  # unpack only these
            tensors = load_tensors(opts.weights, keep)
        except WeightIOError as e:
            _fail(str(e))
    cm, pre, not_cal = _calibrate_open(opts, tensors)
    plan, skipped = _plan(opts, {n: a for n, a in tensors.items() if n not in not_cal})
    skipped += [(n, why) for n, why in not_cal.items()]
    if cm is not None:
        pre = _calibrate_run(opts, cm, plan, console)

    results, stems = [], set()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=len(plan) < 2,
    ) as progress:
        task = progress.add_task("pruning", total=len(plan))
        for name, a, pattern, fmt in plan:
            progress.update(task, description=f"pruning {name}")
            try:
                w = w0 = _as_matrix(a).astype(np.float64)
                if pre is not None:
                    w, mask = pre["weights"][name], pre["masks"][name]
                else:
                    mask = pattern.mask(w)
                obj, fmt_name, deq, packed = _encode(pattern, w, mask, fmt)
            except (PatternError, ValueError) as e:
                _fail(f"tensor {name!r} {tuple(a.shape)}: {e}")
            try:
                pattern.check(mask)
                ok = True
            except PatternError:
                ok = False
            norm = float(np.linalg.norm(w0))
            err = float(np.linalg.norm(w0 - deq)) / norm if norm > 0 else 0.0
            stem = sanitize(name)
            base, i = stem, 1
            while stem in stems:
                i += 1
                stem = f"{base}_{i}"
            stems.add(stem)
            qfmt = obj.fmt if hasattr(obj, "fmt") else obj[1]
            dense = None
            if opts.dense_out is not None:
                src = a if pre is None else w.reshape(a.shape).astype(a.dtype)  # obs updates kept weights
                dense = _dense(src, mask, deq, opts.dense_values, name)
            results.append(
                {
                    "tensor": name,
                    "stem": stem,
                    "shape": list(w.shape),
                    "original_shape": list(a.shape),
                    "pattern": pattern.describe(),
                    "format": fmt_name,
                    "value_format": str(qfmt),
                    "sparsity": float(1.0 - mask.mean()),
                    "check": "ok" if ok else "FAILED",
                    "rel_error": err,
                    "bytes_before": int(a.nbytes),
                    "bytes_after": int(packed),
                    "_obj": obj,
                    "_dense": dense,
                    "_mask": mask,
                    "_deq": deq,
                    "_w": w,
                }
            )
            progress.advance(task)
    return results, skipped, pre


def _skipped_line(skipped: list, listed: bool = True) -> str:
    """Up to 8 skipped tensors by name; more are counted per reason (the manifest lists them all)."""
    if len(skipped) <= 8:
        return "skipped: " + ", ".join(f"{n} ({why})" for n, why in skipped)
    by: dict[str, list[str]] = {}
    for n, why in skipped:
        by.setdefault(why, []).append(n)
    parts = [f"{len(ns)} {why} (e.g. {ns[0]})" for why, ns in sorted(by.items(), key=lambda kv: -len(kv[1]))]
    return f"skipped {len(skipped)} tensors: " + "; ".join(parts) + (" (manifest.json lists each)" if listed else "")


def _write_outputs(opts, console, results, skipped, images, out: Path, final_out: Path, dense_dst, written,
                   pre=None) -> dict:
    from rich.table import Table

    if not opts.dry_run:
        for r in results:
            extra = {
                "source": {
                    "file": str(opts.weights),
                    "tensor": r["tensor"],
                    "original_shape": r["original_shape"],
                },
                "pattern": r["pattern"],
                "rel_error": r["rel_error"],
            }
            try:
                saved = _save(r["_obj"], r["format"], out, r["stem"], images, extra)
            except (FormatError, OSError) as e:
                _fail(f"cannot write {r['stem']} to {out}: {e}")
            r["files"] = [
                {
                    "file": f,
                    "sha256": hashlib.sha256((out / f).read_bytes()).hexdigest(),
                    "bytes": (out / f).stat().st_size,
                }
                for f in saved["files"]
            ]
            written += saved["files"]
    dense_info = None
    if opts.dense_out is not None and not opts.dry_run:
        dense_info = _write_dense_out(opts, out / "_dense" / dense_dst.name, results, skipped)
        dense_info["file"] = str(dense_dst)
    for r in results:
        for k in ("_obj", "_dense", "_mask", "_deq", "_w"):
            r.pop(k)

    table = Table(
        title=f"hwcosim prune: {opts.weights}" + (" (dry run, nothing written)" if opts.dry_run else "")
    )
    name_w = min(40, max(len(r["tensor"]) for r in results))
    table.add_column("tensor", min_width=max(6, name_w), overflow="fold")
    table.add_column("shape", no_wrap=True)
    table.add_column("pattern", overflow="fold")
    table.add_column("value", overflow="fold")
    for col in ("sparsity", "check", "rel.err", "bytes in->out"):
        table.add_column(col, justify="right", overflow="fold")
    for r in results:
        table.add_row(
            r["tensor"],
            "x".join(map(str, r["shape"])),
            _short(r["pattern"]),
            f"{r['format'].removeprefix('hwcosim-')} {r['value_format']}",
            f"{r['sparsity']:.4f}",
            "[green]ok[/]" if r["check"] == "ok" else "[red]FAILED[/]",
            f"{r['rel_error']:.4f}",
            f"{r['bytes_before']}->{r['bytes_after']}",
        )
    show(table, console)
    if skipped:
        console.print(_skipped_line(skipped, listed=not opts.dry_run))

    manifest = {"format": MANIFEST_FORMAT, "version": 1, "tool": "hwcosim prune", "outputs": results,
                "skipped": [{"tensor": n, "reason": why} for n, why in skipped]}
    if not opts.dry_run:
        src = Path(opts.weights)
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": 1,
            "tool": "hwcosim prune",
            "source": {"file": str(src), "sha256": hashlib.sha256(src.read_bytes()).hexdigest()},
            "outputs": results,
            "skipped": [{"tensor": n, "reason": why} for n, why in skipped],
        }
        if dense_info is not None:
            manifest["dense"] = dense_info
        if pre is not None and opts.report:
            manifest["fidelity"] = "fidelity.json"
            write_text(out / "fidelity.json", json.dumps(pre["report"], indent=2) + "\n")
        write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        _commit(out, final_out, dense_dst)
        console.print(f"wrote {len(written) + 1} files to {final_out}/ (manifest.json lists them)")
        if dense_info is not None:
            n = sum(t["pruned"] for t in dense_info["tensors"])
            console.print(f"wrote {dense_info['file']}: {len(dense_info['tensors'])} tensors, {n} pruned "
                          f"({opts.dense_values} values), the others copied unchanged")
    if any(r["check"] != "ok" for r in results):
        raise CheckFailed("a pruned mask broke its pattern's invariant (see the check column)")
    return manifest


def _resolve_folder(opts) -> None:
    """A checkpoint folder stands for the ``model.safetensors`` inside it."""
    p = Path(opts.weights)
    if p.is_dir():
        for name in ("model.safetensors", "pytorch_model.pt", "model.onnx"):
            if (p / name).is_file():
                opts.weights = str(p / name)
                return
        _fail(f"{p} is a folder without model.safetensors (or model.onnx); give the weight file itself")


def _calibrate_open(opts, tensors: dict):
    """(CalibratedModel or None, None, {tensor: why not calibratable}) for ``--calibration``."""
    if opts.calibration is None:
        if opts.method != "magnitude":
            _fail(f"--method {opts.method} needs --calibration DATA (sentences.txt or inputs.npz)")
        if opts.report:
            _fail("--report needs --calibration DATA: the fidelity is measured on held-out calibration inputs")
        return None, None, {}
    if opts.config:
        _fail("--calibration works with --pattern and its flags, not with --config")
    if not 0 <= opts.damp < 10 or opts.blocksize < 1:
        _fail(f"--damp must lie in [0, 10) and --blocksize be >= 1 (got {opts.damp}, {opts.blocksize})")
    from hwcosim.pruning.oneshot import CalibratedModel

    try:
        cm = CalibratedModel(opts.weights, tensors, opts.calibration, holdout=opts.report)
    except UsageError as e:
        _fail(str(e))
    not_cal = {} if opts.tensors else dict(cm.why)  # explicit --tensors: refuse, do not skip
    return cm, None, not_cal


def _calibrate_run(opts, cm, plan, console) -> dict:
    from rich.table import Table

    try:
        pre = cm.prune({name: pattern for name, _, pattern, _ in plan}, opts.method, opts.damp, opts.blocksize)
    except (UsageError, PatternError) as e:
        _fail(str(e))
    if opts.report:
        rep = pre["report"]
        m = rep["model"]
        t = Table(title=f"fidelity ({opts.method}): {m['output']}, "
                        f"{'held-out' if m['held_out'] else 'calibration'} samples")
        for col in ("tensor", "tokens", "sparsity", "rel. output error", "seconds"):
            t.add_column(col, justify="left" if col == "tensor" else "right", overflow="fold")
        for name, r in rep["layers"].items():
            e = r.get("rel_output_error")
            t.add_row(name, str(r["tokens"]), f"{r['sparsity']:.4f}", "-" if e is None else f"{e:.4f}",
                      f"{r['seconds']:.3f}")
        show(t, console)
        console.print(f"model: cosine dense vs pruned = {m['cosine_mean']:.4f} (mean), {m['cosine_min']:.4f} (min) "
                      f"over {m.get('samples', 'the held-out')} samples; pruning took {rep['seconds']:.1f} s")
    return pre


def _dense(a: np.ndarray, mask: np.ndarray, deq: np.ndarray, values: str, name: str) -> np.ndarray:
    """The pruned tensor as a dense array of ``a``'s shape and dtype."""
    mask = mask.reshape(a.shape)
    if values == "masked":
        return np.where(mask, a, np.zeros((), dtype=a.dtype))  # kept values bit for bit
    if a.dtype.kind != "f":
        _fail(f"tensor {name!r} is {a.dtype}: --dense-values quantized needs floating-point tensors; "
              "use --dense-values masked")
    return np.where(mask, deq.reshape(a.shape), 0.0).astype(a.dtype)


def _check_dense_out(opts) -> None:
    """Refuse a ``--dense-out`` that cannot be written, before anything is pruned or written."""
    src = Path(opts.weights)
    suffix = src.suffix.lower()
    if suffix not in DENSE_SUFFIXES:
        _fail(f"--dense-out: cannot write {suffix!r} back; supported: {', '.join(DENSE_SUFFIXES)}")
    if opts.dense_out:
        dst = Path(opts.dense_out)
        if dst.is_dir():
            _fail(f"--dense-out {dst}: is a folder; give the file to write, like "
                  f"{dst / (src.stem + '.pruned' + suffix)}")
        same = {".pt", ".pth"} if suffix in (".pt", ".pth") else {suffix}
        if dst.suffix.lower() not in same:
            _fail(f"--dense-out {dst}: must end in {suffix} like the input {src.name}")
        if src.exists() and dst.exists() and dst.resolve() == src.resolve():
            _fail(f"--dense-out {dst}: would overwrite the input; choose another path")
        for parent in dst.absolute().parents:
            if parent.exists() and not parent.is_dir():
                _fail(f"--dense-out {dst}: {parent} is a file, not a folder; give a path in a folder")
        other = _export_holding(dst, Path(opts.out))
        if other is not None:
            _fail(f"--dense-out {dst}: {other} belongs to another export, which this file would break; "
                  "write the dense model elsewhere (or into -o)")


def _export_holding(path: Path, out: Path) -> Path | None:
    """The manifest of another export (a prune output folder, a run folder) whose folder would hold
    ``path``, or None. The output folder of this command (``out``) is not another export."""
    mine = out.absolute().resolve()
    for folder in Path(path).absolute().resolve().parents:
        if folder == mine:
            return None
        for name, fmt in (("manifest.json", MANIFEST_FORMAT), ("run.json", "hwcosim-run")):
            m = folder / name
            if m.is_file():
                try:
                    doc = json.loads(m.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, ValueError, RecursionError):
                    continue
                if isinstance(doc, dict) and doc.get("format") == fmt:
                    return m
    return None


def _check_collisions(opts, out: Path, results: list, images, dense_dst) -> None:
    """Refuse, before anything is written, outputs that would overwrite the input or each other."""
    src = Path(opts.weights).resolve()
    mine: dict[Path, str] = {}
    for r in results:
        suffixes = ["npz", "json", *(images or [])]
        if r["format"] == "csb" and "hex" not in suffixes:
            suffixes.append("hex")
        for suf in suffixes:
            mine.setdefault((out / f"{r['stem']}.{suf}").resolve(), f"{r['stem']}.{suf}")
    mine.setdefault((out / "manifest.json").resolve(), "manifest.json")
    for path, name in mine.items():
        if path == src:
            _fail(f"-o {out}: the output {name} would overwrite the input {opts.weights}; choose another folder")
    if dense_dst is not None:
        d = dense_dst.resolve()
        if d == src:
            _fail(f"--dense-out {dense_dst}: would overwrite the input; choose another path")
        if d in mine:
            _fail(f"--dense-out {dense_dst}: would overwrite {mine[d]}, which this command writes; choose another "
                  "name")


def _commit(staging: Path, out: Path, dense_dst) -> None:
    """Make the staging folder the output folder (:func:`hwcosim.models.atomic.replace_dir`: one rename,
    the user's own files kept, the old export's dropped) and put the dense model at its path. A dense
    model inside the output folder travels with it; one outside is renamed in just before the folder,
    and its old file put back if the folder cannot be."""
    from hwcosim.models.atomic import replace_dir

    keep = _not_in_old_export(out)
    dense_dir = staging / "_dense"
    outside = None
    if dense_dst is not None and dense_dir.exists():
        new = dense_dir / dense_dst.name
        rel = _inside(dense_dst, out)
        if rel is not None:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(new, staging / rel)
        else:
            dense_dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dense_dst.parent / f".{dense_dst.name}.{os.getpid()}.new"
            shutil.move(str(new), tmp)  # same file system as its destination: the rename below is one step
            outside = (tmp, dense_dst)
        shutil.rmtree(dense_dir)
    if outside is None:
        replace_dir(staging, out, keep=keep)
        return
    tmp, dst = outside
    old = dst.parent / f".{dst.name}.{os.getpid()}.old"
    had = dst.exists()
    try:
        if had:
            try:
                os.link(dst, old)
            except OSError:
                shutil.copy2(dst, old)
        os.replace(tmp, dst)
        try:
            replace_dir(staging, out, keep=keep)
        except BaseException:
            if had:
                os.replace(old, dst)
            else:
                dst.unlink()
            raise
    finally:
        for p in (tmp, old):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def _inside(path: Path, folder: Path) -> Path | None:
    """``path`` relative to ``folder`` when it lies inside it, else None."""
    try:
        return path.absolute().resolve().relative_to(folder.absolute().resolve())
    except ValueError:
        return None


def _write_dense_out(opts, dst: Path, results: list, skipped: list) -> dict:
    """Write the dense model (``--dense-out``) to ``dst`` and return the manifest's ``dense`` entry."""
    src = Path(opts.weights)
    dst.parent.mkdir(parents=True, exist_ok=True)
    repl = {r["tensor"]: r["_dense"] for r in results}
    try:
        info = write_dense(src, dst, repl)
    except (RoundTripError, OSError) as e:
        _fail(f"--dense-out: {e}")
    by_name = {r["tensor"]: r for r in results}
    why_skipped = dict(skipped)
    tensors = []
    for t in info["tensors"]:
        entry = {"tensor": t["name"], "shape": t["shape"], "dtype": t["dtype"], "pruned": t["replaced"]}
        r = by_name.get(t["name"])
        if r is not None:
            entry.update(pattern=r["pattern"], sparsity=r["sparsity"], check=r["check"], stem=r["stem"])
        else:
            entry["reason"] = why_skipped.get(t["name"], "not selected")
        tensors.append(entry)
    return {"file": info["file"], "format": info["format"], "sha256": info["sha256"], "bytes": info["bytes"],
            "values": opts.dense_values, "source": str(src), "tensors": tensors}


def _short(desc: dict) -> str:
    def fmt(v):
        return "x".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)

    return (
        desc["pattern"]
        + " "
        + " ".join(f"{k}={fmt(v)}" for k, v in desc.items() if k != "pattern" and v is not None)
    )


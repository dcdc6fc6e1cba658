"""``hwcosim prune``: prune weight tensors with a sparsity pattern and write them in the
pattern's storage format, ready for the golden models and the RTL.

The lead's dispatcher (:mod:`hwcosim.cosim.cli`) calls :func:`register` with its subparsers object;
the parsed namespace carries ``func`` (returns the exit status). Exit status: 0 success,
2 bad input (one ``error: ...`` line on stderr), 1 a failed invariant check.

Output per pattern (stem = the tensor name, sanitised):

========================  ===========================================================
``bbs``, ``balanced``      CSB (:mod:`hwcosim.pruning.formats.csb`): ``.npz``, ``.json``, ``.hex``
``fss``                    FSS (:mod:`hwcosim.pruning.formats.fss`) + memory image
``nm``                     N:M compressed (:mod:`hwcosim.pruning.formats.nm`) + memory image
``block``                  BSR (:mod:`hwcosim.pruning.formats.sparse`)
``unstructured``, ``vector``  CSR (:mod:`hwcosim.pruning.formats.sparse`)
========================  ===========================================================

plus a top-level ``manifest.json`` listing every file written, with sha256 checksums.

``--dense-out [PATH]`` also writes the whole model back as dense tensors in the input's own
format (:mod:`hwcosim.pruning.roundtrip`: ``.safetensors``, ``.npz``, ``.npy``, ``.pt``/``.pth``,
``.onnx``), the pruned tensors with their zeros in place and every other tensor copied bit for
bit; ``--dense-values`` chooses between the kept original values (``masked``) and the values
the hardware computes with (``quantized``). The manifest's ``dense`` entry lists every tensor of
that file, whether it was pruned, with which pattern and at what sparsity.

``--calibration DATA --method wanda|obs`` prunes activation-aware (:mod:`hwcosim.pruning.oneshot`): a
BERT-family checkpoint (a folder or ``.safetensors`` with ``config.json`` and ``vocab.txt`` /
``tokenizer.json`` beside it) takes ``sentences.txt``, run through :mod:`hwcosim.models.nn.bert`; an
``.onnx`` model takes an ``.npz`` of named input arrays, run with onnxruntime to capture the
inputs of every MatMul/Gemm/Conv weight. The masks obey the pattern exactly and the exports are
the same; with ``obs`` the kept values are updated (and ``--dense-out masked`` writes those).
``--report`` holds out every 4th calibration sample and writes ``fidelity.json`` (per-layer
relative output error, dense-vs-pruned output cosine).
"""

from __future__ import annotations

import argparse
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
from hwcosim.pruning.oneshot import METHODS
from hwcosim.pruning.roundtrip import DENSE_SUFFIXES, RoundTripError, default_dense_path, write_dense

__all__ = ["register", "run_prune", "sanitize"]

MANIFEST_FORMAT = "hwcosim-prune-manifest"

#: CLI flag -> pattern dataclass field (the flag is offered to a pattern that has that field).
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

EPILOG = """\
patterns and their parameters:
  bbs           --banks B --sparsity S      bank-balanced (Cao et al., FPGA 2019) -> CSB
  balanced      --block N --sparsity S      balanced sparsity (Yao et al., AAAI 2019) -> CSB
  fss           --region RxC (--n N | --sparsity S)   FSS (Zhang et al., TCAD 2025)
  nm            --n N --m M                 N:M, e.g. 2:4 (NVIDIA sparse tensor cores)
  block         --block RxC --sparsity S [--norm l2|l1]   -> BSR
  vector        --length V [--orient row|col] --sparsity S -> CSR
  unstructured  --sparsity S                global magnitude -> CSR

examples:
  hwcosim prune --pattern bbs --banks 16 --sparsity 0.875 weights.npy -o out/
  hwcosim prune --pattern nm --n 2 --m 4 model.safetensors --tensors '*.weight' -o out/
  hwcosim prune --config prune.toml model.pt --dry-run
  hwcosim prune --pattern nm --n 2 --m 4 model.onnx --tensors 'fc*' --dense-out -o out/
      (also writes out/model.pruned.onnx: the same graph with the pruned initialisers)
  hwcosim prune minilm/ --calibration sentences.txt --method obs --pattern bbs --banks 24 \
      --sparsity 0.5 --report -o out/     (BERT checkpoint folder; out/fidelity.json)
  hwcosim prune model.onnx --calibration inputs.npz --method wanda --pattern nm --n 2 --m 4 -o out/
"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``prune`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "prune",
        help="prune weights with a sparsity pattern and write CSB/FSS/N:M/CSR files",
        description="Prune the 2-D weight tensors of a .npy/.npz/.safetensors/.pt file with a sparsity "
        "pattern, quantise the kept values and write them in the pattern's format.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("weights", help="weight file: .npy, .npz, .safetensors, .pt/.pth (state dict), "
                   ".onnx (initialisers)")
    p.add_argument("-o", "--out", default="build/prune", help="output folder (default: build/prune)")
    p.add_argument(
        "--pattern", default=None, help=f"sparsity pattern: {', '.join(pattern_names())} (default bbs)"
    )
    p.add_argument("--sparsity", type=float, help="fraction of weights pruned, e.g. 0.875")
    p.add_argument("--banks", type=int, help="bbs: banks per row")
    p.add_argument("--block", help="balanced: block width (e.g. 32); block: tile RxC (e.g. 4x4)")
    p.add_argument("--n", type=int, help="nm / fss: nonzeros kept per group / region")
    p.add_argument("--m", type=int, help="nm: group length (e.g. 4 for 2:4)")
    p.add_argument("--region", help="fss: region RxC (e.g. 1x16, 4x4)")
    p.add_argument("--length", type=int, help="vector: vector length")
    p.add_argument("--orient", choices=("row", "col"), help="vector: 1 x v (row) or v x 1 (col)")
    p.add_argument("--norm", choices=("l2", "l1"), help="block / vector: score norm")
    p.add_argument(
        "--format",
        default="auto",
        help="value format Q<int>.<frac>, e.g. Q2.6 (default auto: 8 bits fitting max |w|)",
    )
    p.add_argument(
        "--tensors", help="comma-separated names/globs of the tensors to prune (default: all 2-D+)"
    )
    p.add_argument(
        "--config", help="per-tensor pattern config (.toml; .yaml with pyyaml); the pattern flags (--sparsity, "
        "--banks, ...) and --format given on the command line override its rules' values"
    )
    p.add_argument(
        "--image",
        choices=("hex", "bin", "both", "none"),
        default="hex",
        help="memory image(s) for fss/nm outputs (CSB always writes .hex)",
    )
    p.add_argument(
        "--dense-out",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="also write the pruned model as dense tensors in the input's format (same names, shapes, "
        "dtypes; other tensors copied bit for bit); default PATH: OUT/<input stem>.pruned<suffix>",
    )
    p.add_argument(
        "--dense-values",
        choices=("masked", "quantized"),
        default="masked",
        help="dense output values: masked = the original kept weights (default); quantized = the "
        "fixed-point values the hardware uses, as the tensor's dtype",
    )
    p.add_argument("--dry-run", action="store_true", help="prune and report, write no files")
    p.add_argument("--calibration", metavar="DATA",
                   help="calibration inputs: sentences.txt (one per line) for a BERT-family checkpoint "
                   "(folder or .safetensors with config.json and vocab.txt/tokenizer.json beside it), or an "
                   ".npz of named input arrays for an .onnx model")
    p.add_argument("--method", choices=METHODS, default="magnitude",
                   help="magnitude (|w|), wanda (|w| x input-channel norm, Sun et al. 2023) or obs "
                   "(SparseGPT-style OBS with weight updates, Frantar & Alistarh 2023); wanda/obs need "
                   "--calibration (default magnitude)")
    p.add_argument("--report", action="store_true",
                   help="with --calibration: hold out every 4th calibration sample and report per-layer "
                   "output error and the dense-vs-pruned output cosine (table + OUT/fidelity.json)")
    p.add_argument("--damp", type=float, default=0.01, help="obs: Hessian damping, fraction of its mean "
                   "diagonal (default 0.01)")
    p.add_argument("--blocksize", type=int, default=128, help="obs: columns per lazy-update block (default 128)")
    p.set_defaults(func=run_prune)
    return p



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


def _flag_values(args, pattern: str) -> dict:
    """The pattern flags given on the command line, converted for ``pattern``."""
    out = {}
    for key, flag in _FLAGS.items():
        val = getattr(args, key)
        if val is not None:
            out[key] = _parse_int(val, flag) if key == "block" and pattern == "balanced" else val
    return out


def _pattern_from_flags(args):
    from hwcosim.pruning.base import _REGISTRY  # registry filled by pattern_names()

    name = args.pattern or "bbs"
    names = pattern_names()
    if name not in names:
        _fail(f"unknown pattern {name!r}; choose one of: {', '.join(names)}")
    fields = {f.name for f in dataclasses.fields(_REGISTRY[name])}
    for key, flag in _FLAGS.items():
        if getattr(args, key) is not None and key not in fields:
            takes = " ".join(_FLAGS[f] for f in _FLAGS if f in fields)
            _fail(f"{flag} does not apply to --pattern {name} (it takes: {takes})")
    try:
        return get_pattern(name, **_flag_values(args, name))
    except PatternError as e:
        _fail(str(e))


def _config_with_flags(config: PruneConfig, args) -> PruneConfig:
    """``config`` with the pattern flags of the command line applied over every rule's values (command
    line over file, :mod:`hwcosim.models.precedence`); a flag that applies to no rule's pattern is an error."""
    from hwcosim.models.precedence import layered

    if args.pattern is not None:
        _fail(f"--pattern {args.pattern} with --config: the config chooses the pattern of each tensor; "
              "drop --pattern (pattern flags such as --sparsity override the rules' values)")
    given = [k for k in _FLAGS if getattr(args, k) is not None]
    if not given:
        return config
    used: set[str] = set()
    rules = []
    for i, r in enumerate(config.rules, 1):
        if r.pattern is None:
            rules.append(r)
            continue
        fields = {f.name for f in dataclasses.fields(r.pattern) if f.init}
        mine = {k: v for k, v in _flag_values(args, r.pattern.name).items() if k in fields}
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


def _plan(args, tensors: dict) -> tuple[list, list]:
    """(name, matrix, pattern, fmt) for every tensor to prune, and (name, reason) skips."""
    try:
        default_fmt = None if args.format == "auto" else Q.parse(args.format)
    except ValueError as e:
        _fail(str(e))
    names = list(tensors)
    try:
        chosen = select(names, args.tensors)
    except WeightIOError as e:
        _fail(str(e))
    config: PruneConfig | None = None
    if args.config:
        try:
            config = load_config(args.config)
        except WeightIOError as e:
            _fail(str(e))
        config = _config_with_flags(config, args)
    cli_pattern = None if config else _pattern_from_flags(args)
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
                (name, a, rule.pattern, default_fmt if args.format != "auto" else (rule.fmt or config.fmt))
            )
        else:
            plan.append((name, a, cli_pattern, default_fmt))
    if not plan:
        _fail(
            f"nothing to prune in {args.weights}: no 2-D tensor selected"
            + (f" (skipped: {', '.join(f'{n} ({r})' for n, r in skipped[:6])})" if skipped else "")
        )
    return plan, skipped


def run_prune(args) -> int:
    """Run ``hwcosim prune`` on a parsed namespace; returns the exit status."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console()
    _resolve_folder(args)
    if args.dense_out is not None:
        _check_dense_out(args)
    try:
        keep = None
        if str(args.weights).lower().endswith(".npz") and args.tensors:
            from hwcosim.pruning.io import npz_members

            keep = set(select(list(npz_members(args.weights)), args.tensors)).__contains__  # unpack only these
        tensors = load_tensors(args.weights, keep)
    except WeightIOError as e:
        _fail(str(e))
    cm, pre, not_cal = _calibrate_open(args, tensors)
    plan, skipped = _plan(args, {n: a for n, a in tensors.items() if n not in not_cal})
    skipped += [(n, why) for n, why in not_cal.items()]
    if cm is not None:
        pre = _calibrate_run(args, cm, plan, console)
    images = {"hex": ("hex",), "bin": ("bin",), "both": ("hex", "bin"), "none": ()}[args.image]

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
            w = w0 = _as_matrix(a).astype(np.float64)
            try:
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
            if args.dense_out is not None:
                src = a if pre is None else w.reshape(a.shape).astype(a.dtype)  # obs updates kept weights
                dense = _dense(src, mask, deq, args.dense_values, name)
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
                }
            )
            progress.advance(task)

    out = Path(args.out)
    written = []
    dense_dst = None
    if args.dense_out is not None:
        dense_dst = Path(args.dense_out) if args.dense_out else default_dense_path(args.weights, out)
    if not args.dry_run:
        _check_collisions(args, out, results, images, dense_dst)
    # everything is written into a staging folder beside the output and moved into place only when
    # every file is complete: a late failure leaves neither a half-written folder nor a stale manifest
    final_out = out
    staging = out.parent / f".{out.name}.staging-{os.getpid()}"
    if not args.dry_run:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        out = staging
    try:
        return _write_outputs(args, console, results, skipped, images, out, final_out, dense_dst, written, pre)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _skipped_line(skipped: list, listed: bool = True) -> str:
    """Up to 8 skipped tensors by name; more are counted per reason (the manifest lists them all)."""
    if len(skipped) <= 8:
        return "skipped: " + ", ".join(f"{n} ({why})" for n, why in skipped)
    by: dict[str, list[str]] = {}
    for n, why in skipped:
        by.setdefault(why, []).append(n)
    parts = [f"{len(ns)} {why} (e.g. {ns[0]})" for why, ns in sorted(by.items(), key=lambda kv: -len(kv[1]))]
    return f"skipped {len(skipped)} tensors: " + "; ".join(parts) + (" (manifest.json lists each)" if listed else "")


def _write_outputs(args, console, results, skipped, images, out: Path, final_out: Path, dense_dst, written,
                   pre=None) -> int:
    from rich.table import Table

    if not args.dry_run:
        for r in results:
            extra = {
                "source": {
                    "file": str(args.weights),
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
    if args.dense_out is not None and not args.dry_run:
        dense_info = _write_dense_out(args, out / "_dense" / dense_dst.name, results, skipped)
        dense_info["file"] = str(dense_dst)
    for r in results:
        r.pop("_obj")
        r.pop("_dense")

    table = Table(
        title=f"hwcosim prune: {args.weights}" + (" (dry run, nothing written)" if args.dry_run else "")
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
        console.print(_skipped_line(skipped, listed=not args.dry_run))

    if not args.dry_run:
        src = Path(args.weights)
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
        if pre is not None and args.report:
            manifest["fidelity"] = "fidelity.json"
            write_text(out / "fidelity.json", json.dumps(pre["report"], indent=2) + "\n")
        write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        _commit(out, final_out, dense_dst)
        console.print(f"wrote {len(written) + 1} files to {final_out}/ (manifest.json lists them)")
        if dense_info is not None:
            n = sum(t["pruned"] for t in dense_info["tensors"])
            console.print(f"wrote {dense_info['file']}: {len(dense_info['tensors'])} tensors, {n} pruned "
                          f"({args.dense_values} values), the others copied unchanged")
    if any(r["check"] != "ok" for r in results):
        raise CheckFailed("a pruned mask broke its pattern's invariant (see the check column)")
    return 0


def _resolve_folder(args) -> None:
    """A checkpoint folder stands for the ``model.safetensors`` inside it."""
    p = Path(args.weights)
    if p.is_dir():
        for name in ("model.safetensors", "pytorch_model.pt", "model.onnx"):
            if (p / name).is_file():
                args.weights = str(p / name)
                return
        _fail(f"{p} is a folder without model.safetensors (or model.onnx); give the weight file itself")


def _calibrate_open(args, tensors: dict):
    """(CalibratedModel or None, None, {tensor: why not calibratable}) for ``--calibration``."""
    if args.calibration is None:
        if args.method != "magnitude":
            _fail(f"--method {args.method} needs --calibration DATA (sentences.txt or inputs.npz)")
        if args.report:
            _fail("--report needs --calibration DATA: the fidelity is measured on held-out calibration inputs")
        return None, None, {}
    if args.config:
        _fail("--calibration works with --pattern and its flags, not with --config")
    if not 0 <= args.damp < 10 or args.blocksize < 1:
        _fail(f"--damp must lie in [0, 10) and --blocksize be >= 1 (got {args.damp}, {args.blocksize})")
    from hwcosim.pruning.oneshot import CalibratedModel

    try:
        cm = CalibratedModel(args.weights, tensors, args.calibration, holdout=args.report)
    except UsageError as e:
        _fail(str(e))
    not_cal = {} if args.tensors else dict(cm.why)  # explicit --tensors: refuse, do not skip
    return cm, None, not_cal


def _calibrate_run(args, cm, plan, console) -> dict:
    from rich.table import Table

    try:
        pre = cm.prune({name: pattern for name, _, pattern, _ in plan}, args.method, args.damp, args.blocksize)
    except (UsageError, PatternError) as e:
        _fail(str(e))
    if args.report:
        rep = pre["report"]
        m = rep["model"]
        t = Table(title=f"fidelity ({args.method}): {m['output']}, "
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


def _check_dense_out(args) -> None:
    """Refuse a ``--dense-out`` that cannot be written, before anything is pruned or written."""
    src = Path(args.weights)
    suffix = src.suffix.lower()
    if suffix not in DENSE_SUFFIXES:
        _fail(f"--dense-out: cannot write {suffix!r} back; supported: {', '.join(DENSE_SUFFIXES)}")
    if args.dense_out:
        dst = Path(args.dense_out)
        same = {".pt", ".pth"} if suffix in (".pt", ".pth") else {suffix}
        if dst.suffix.lower() not in same:
            _fail(f"--dense-out {dst}: must end in {suffix} like the input {src.name}")
        if src.exists() and dst.exists() and dst.resolve() == src.resolve():
            _fail(f"--dense-out {dst}: would overwrite the input; choose another path")


def _check_collisions(args, out: Path, results: list, images, dense_dst) -> None:
    """Refuse, before anything is written, outputs that would overwrite the input or each other."""
    src = Path(args.weights).resolve()
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
            _fail(f"-o {out}: the output {name} would overwrite the input {args.weights}; choose another folder")
    if dense_dst is not None:
        d = dense_dst.resolve()
        if d == src:
            _fail(f"--dense-out {dense_dst}: would overwrite the input; choose another path")
        if d in mine:
            _fail(f"--dense-out {dense_dst}: would overwrite {mine[d]}, which this command writes; choose another "
                  "name")


def _commit(staging: Path, out: Path, dense_dst) -> None:
    """Move the staged files into ``out`` (and the dense model to its path), the manifest last."""
    out.mkdir(parents=True, exist_ok=True)
    dense_dir = staging / "_dense"
    if dense_dst is not None and dense_dir.exists():
        dense_dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(dense_dir / dense_dst.name, dense_dst)
        shutil.rmtree(dense_dir, ignore_errors=True)
    names = sorted(p.name for p in staging.iterdir() if p.name != "manifest.json")
    for n in [*names, "manifest.json"]:
        if (staging / n).exists():
            os.replace(staging / n, out / n)


def _write_dense_out(args, dst: Path, results: list, skipped: list) -> dict:
    """Write the dense model (``--dense-out``) to ``dst`` and return the manifest's ``dense`` entry."""
    src = Path(args.weights)
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
            "values": args.dense_values, "source": str(src), "tensors": tensors}


def _short(desc: dict) -> str:
    def fmt(v):
        return "x".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)

    return (
        desc["pattern"]
        + " "
        + " ".join(f"{k}={fmt(v)}" for k, v in desc.items() if k != "pattern" and v is not None)
    )


"""``hwcosim prune``: parse the flags and call :func:`hwcosim.pruning.api.prune_file` (the library; its
docstring lists the files written per pattern; :func:`~hwcosim.pruning.api.prune_tensors` prunes in memory).
Exit status: 0 success, 2 bad input (one ``error: ...`` line on stderr), 1 a failed invariant check.
"""

from __future__ import annotations

import argparse
import dataclasses

from hwcosim.cosim.cli.util import add_options, command
from hwcosim.pruning.api import PruneOptions, prune_file
from hwcosim.pruning.base import pattern_names
from hwcosim.pruning.oneshot import METHODS

__all__ = ["register", "run_prune"]

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
    p = command(
        subparsers, "prune", run_prune, help_="prune weights with a sparsity pattern and write CSB/FSS/N:M/CSR files",
        description="Prune the 2-D weight tensors of a .npy/.npz/.safetensors/.pt file with a sparsity "
        "pattern, quantise the kept values and write them in the pattern's format.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(p, [
        ("weights", "weight file: .npy, .npz, .safetensors, .pt/.pth (state dict), .onnx (initialisers)"),
        ("-o --out", "output folder (default: build/prune)", dict(default="build/prune")),
        ("--pattern", f"sparsity pattern: {', '.join(pattern_names())} (default bbs)"),
        ("--sparsity", "fraction of weights pruned, e.g. 0.875", dict(type=float)),
        ("--banks", "bbs: banks per row", dict(type=int)),
        ("--block", "balanced: block width (e.g. 32); block: tile RxC (e.g. 4x4)"),
        ("--n", "nm / fss: nonzeros kept per group / region", dict(type=int)),
        ("--m", "nm: group length (e.g. 4 for 2:4)", dict(type=int)),
        ("--region", "fss: region RxC (e.g. 1x16, 4x4)"),
        ("--length", "vector: vector length", dict(type=int)),
        ("--orient", "vector: 1 x v (row) or v x 1 (col)", dict(choices=("row", "col"))),
        ("--norm", "block / vector: score norm", dict(choices=("l2", "l1"))),
        ("--format", "value format Q<int>.<frac>, e.g. Q2.6 (default auto: 8 bits fitting max |w|)",
         dict(default="auto")),
        ("--tensors", "comma-separated names/globs of the tensors to prune (default: all 2-D+)"),
        ("--config", "per-tensor pattern config (.toml; .yaml with pyyaml); the pattern flags (--sparsity, "
         "--banks, ...) and --format given on the command line override its rules' values"),
        ("--image", "memory image(s) for fss/nm outputs (CSB always writes .hex)",
         dict(choices=("hex", "bin", "both", "none"), default="hex")),
        ("--dense-out", "also write the pruned model as dense tensors in the input's format (same names, "
         "shapes, dtypes; other tensors copied bit for bit); default PATH: OUT/<input stem>.pruned<suffix>",
         dict(nargs="?", const="", default=None, metavar="PATH")),
        ("--dense-values", "dense output values: masked = the original kept weights (default); quantized = "
         "the fixed-point values the hardware uses, as the tensor's dtype",
         dict(choices=("masked", "quantized"), default="masked")),
        ("--dry-run", "prune and report, write no files", True),
        ("--calibration", "calibration inputs: sentences.txt (one per line) for a BERT-family checkpoint "
         "(folder or .safetensors with config.json and vocab.txt/tokenizer.json beside it), or an .npz of "
         "named input arrays for an .onnx model", dict(metavar="DATA")),
        ("--method", "magnitude (|w|), wanda (|w| x input-channel norm, Sun et al. 2023) or obs (SparseGPT-style "
         "OBS with weight updates, Frantar & Alistarh 2023); wanda/obs need --calibration (default magnitude)",
         dict(choices=METHODS, default="magnitude")),
        ("--report", "with --calibration: hold out every 4th calibration sample and report per-layer output "
         "error and the dense-vs-pruned output cosine (table + OUT/fidelity.json)", True),
        ("--damp", "obs: Hessian damping, fraction of its mean diagonal (default 0.01)",
         dict(type=float, default=0.01)),
        ("--blocksize", "obs: columns per lazy-update block (default 128)", dict(type=int, default=128))])
    return p


def run_prune(args) -> int:
    """``hwcosim prune`` on a parsed namespace: :func:`hwcosim.pruning.api.prune_file` with its flags."""
    opts = {f.name: getattr(args, f.name) for f in dataclasses.fields(PruneOptions)}
    prune_file(opts.pop("weights"), opts.pop("out"), **opts)
    return 0

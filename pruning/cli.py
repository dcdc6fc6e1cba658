"""``hwcosim prune``: prune weight tensors with a sparsity pattern and write them in the
pattern's storage format, ready for the golden models and the RTL. The command parses its flags
and calls :func:`hwcosim.pruning.api.prune_file` (the library; :func:`~hwcosim.pruning.api.prune_tensors`
prunes in memory).

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

from hwcosim.pruning.api import PruneOptions, prune_file, sanitize
from hwcosim.pruning.base import pattern_names
from hwcosim.pruning.oneshot import METHODS

__all__ = ["register", "run_prune", "sanitize"]

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


def run_prune(args) -> int:
    """Run ``hwcosim prune`` on a parsed namespace: :func:`hwcosim.pruning.api.prune_file` with its flags."""
    opts = {f.name: getattr(args, f.name) for f in dataclasses.fields(PruneOptions)}
    prune_file(opts.pop("weights"), opts.pop("out"), **opts)
    return 0

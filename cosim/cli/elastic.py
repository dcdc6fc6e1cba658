"""``hwcosim elasticbatch|easyscale|goldminer`` subcommands.

- ``hwcosim easyscale [--quick] [-o DIR] [--seed N] [--steps N]``: bitwise-equality check of N=4
  logical workers on 1, 2, 4 processes and 4 -> 2 -> 3 mid-run, then the cluster scheduler study.
- ``hwcosim elasticbatch [--quick] [-o DIR] [--seed N] [--gpu A100-40GB|H100-80GB]``: planner vs
  MIG disabled vs the exhaustive oracle.
- ``hwcosim goldminer [--quick] [-o DIR] [--seed N]``: pipeline speedup and the cluster sim.

Outputs (JSON + PNG) are written atomically under ``build/elastic`` by default; the studies are in
:mod:`hwcosim.models.systems.elastic.bench`.
"""

from __future__ import annotations

from pathlib import Path

from hwcosim.cosim.cli.util import entry, lazy, staged
from hwcosim.cosim.cli.util import fail as _fail
from hwcosim.cosim.cli.util import out_dir as _out_dir_base

__all__ = ["register", "main"]

_BENCH = "hwcosim.models.systems.elastic.bench"


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/elastic")


def register(subparsers) -> None:
    """Add ``elasticbatch``, ``easyscale`` and ``goldminer`` to a ``hwcosim`` subparser set."""
    def common(p):
        p.add_argument("--quick", action="store_true", help="small run, well under a minute")
        p.add_argument("-o", "--output", metavar="DIR", default=None, help="output folder (default build/elastic)")
        p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    p = subparsers.add_parser("easyscale", help="EasyScale (SC 2023): bitwise-consistent elastic training")
    common(p)
    p.add_argument("--steps", type=int, default=None, help="training steps (default 30, quick 15)")
    p.set_defaults(func=_cmd_easyscale)
    p = subparsers.add_parser("elasticbatch", help="ElasticBatch (TPDS 2024): MIG serving planner")
    common(p)
    p.add_argument("--gpu", default="A100-40GB", help="A100-40GB or H100-80GB")
    p.set_defaults(func=_cmd_elasticbatch)
    p = subparsers.add_parser("goldminer", help="GoldMiner (SIGMOD 2023): elastic data workers")
    common(p)
    p.set_defaults(func=_cmd_goldminer)


def _check_seed(args):
    if args.seed < 0:
        _fail(f"--seed must be >= 0, not {args.seed}")


def _cmd_easyscale(args) -> int:
    _check_seed(args)
    steps = args.steps if args.steps is not None else (15 if args.quick else 30)
    if steps < 3:
        _fail(f"--steps must be >= 3, not {steps}")
    staged(lazy(f"{_BENCH}:run_easyscale"), _out_dir(args.output), args.quick, args.seed, steps)
    return 0


def _cmd_elasticbatch(args) -> int:
    _check_seed(args)
    if args.gpu not in ("A100-40GB", "H100-80GB"):
        _fail(f"--gpu must be A100-40GB or H100-80GB, not {args.gpu!r}")
    staged(lazy(f"{_BENCH}:run_elasticbatch"), _out_dir(args.output), args.quick, args.seed, args.gpu)
    return 0


def _cmd_goldminer(args) -> int:
    _check_seed(args)
    staged(lazy(f"{_BENCH}:run_goldminer"), _out_dir(args.output), args.quick, args.seed)
    return 0


main = entry()

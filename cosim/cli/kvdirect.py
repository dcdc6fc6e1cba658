"""``hwcosim kvdirect study``: KV-Direct performance study (JSON + PNG + rich table).

The study is :mod:`hwcosim.models.kvdirect.study` (our model beside the paper's 180 / 114 Mops,
1.22 Gops, 4.3 / 5.4 us and 191x).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import entry
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["register", "main"]


def _run(args) -> int:
    if args.ops < 1000:
        raise UsageError(f"--ops must be >= 1000, not {args.ops}")
    if not 1 <= args.nics <= 64:
        raise UsageError(f"--nics must be 1..64, not {args.nics}")
    if not 0 <= args.theta <= 2:
        raise UsageError(f"--theta must be in [0, 2], not {args.theta}")
    from hwcosim.models.kvdirect.study import study, study_table, write_study

    res = study(seed=args.seed, n_ops=args.ops, n_nics=args.nics, theta=args.theta)
    js, png = write_study(res, Path(args.output))
    show(study_table(res))
    print(f"wrote {js} and {png}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``kvdirect`` (with subcommand ``study``) to an argparse subparsers object."""
    p = subparsers.add_parser("kvdirect", help="KV-Direct key-value store models",
                              description="KV-Direct (SOSP 2017) golden store and performance model.")
    sub = p.add_subparsers(dest="kvdirect_cmd", required=True)
    s = sub.add_parser("study", help="predict throughput, latency and atomic speedup vs the paper",
                       description="Throughput (1 and N NICs), latency and the single-key atomic speedup "
                                   "of KV-Direct from our model, beside the paper's figures.")
    s.add_argument("-o", "--output", default="build/kvdirect", help="output folder (default build/kvdirect)")
    s.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    s.add_argument("--ops", type=int, default=200_000, help="ops in the sampled key stream (default 200000)")
    s.add_argument("--nics", type=int, default=10, help="NICs in the multi-NIC case (default 10)")
    s.add_argument("--theta", type=float, default=0.99, help="Zipf skew, 0 = uniform (default 0.99)")
    s.set_defaults(func=_run)
    return p


main = entry()

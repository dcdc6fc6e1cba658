"""``hwcosim melo`` subcommands: the MELO loss-recovery study and single simulator runs.

MELO: Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter",
APNet 2017. The lead wires :func:`register` into ``cosim/cli/__init__.py``; :func:`main` runs it alone.

- ``hwcosim melo study [--quick] [-o DIR] [--seed N] [--jobs N]``: every sweep of
  :mod:`hwcosim.models.melo.study`, JSON + PNG plots under ``build/melo`` by default.
- ``hwcosim melo run --scheme melo --loss 0.01 ...``: one run of :mod:`hwcosim.models.melo.sim`, JSON.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hwcosim.cosim.cli.util import entry
from hwcosim.models.errors import UsageError

__all__ = ["register", "main"]


def _fail(msg: str):
    raise UsageError(msg)


def _out_dir(arg: str | None, default: str) -> Path:
    from hwcosim.models.atomic import check_out_dir

    return check_out_dir(arg if arg else default)


def _cmd_study(args) -> int:
    from rich.console import Console

    from hwcosim.models.melo.report import print_study
    from hwcosim.models.melo.study import run_study, write_study

    if args.jobs < 1:
        _fail(f"--jobs must be >= 1, not {args.jobs}")
    if args.seed < 0:
        _fail(f"--seed must be >= 0, not {args.seed}")
    out = _out_dir(args.output, "build/melo")
    con = Console(stderr=False)
    mode = "quick" if args.quick else "full"
    with con.status(f"MELO study ({mode}, {args.jobs} jobs) ...") as status:
        res = run_study(
            quick=args.quick,
            seed=args.seed,
            jobs=args.jobs,
            progress=lambda d, n: status.update(f"MELO study ({mode}): run {d}/{n}"),
        )
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:  # every file of the study appears at once, at the end
        paths = write_study(res, st)
    print_study(res, con)
    con.print(f"{len(paths)} files in {out} ({res['wall_s']:.1f} s)")
    return 0


def _cmd_run(args) -> int:
    from hwcosim.models.melo.report import run_one

    path = run_one(_out_dir(args.output, "build/melo"), scheme=args.scheme, n_conns=args.conns, link_gbps=args.gbps,
                   rtt_us=args.rtt_us, loss=args.loss, burst=args.burst, reorder_prob=args.reorder,
                   rto_us=args.rto_us, workload=args.workload, n_flows=args.flows, load=args.load,
                   duration_us=args.duration_us, pool_blocks=args.pool_blocks, block_bits=args.block_bits,
                   seed=args.seed)
    print(f"wrote {path}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``melo`` (with ``study`` and ``run``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "melo",
        help="MELO loss recovery (APNet 2017): simulator and study",
        description="MELO: memory-efficient loss recovery for hardware transports (Lu et al., APNet 2017).",
    )
    sub = p.add_subparsers(dest="melo_cmd", metavar="{study,run}")
    sub.required = True

    s = sub.add_parser(
        "study",
        help="go-back-N vs full-bitmap SR vs MELO: throughput, FCT, memory, pool size (JSON + PNG)",
        description="Run the MELO study and write melo_study.json and PNG plots.",
    )
    s.add_argument("--quick", action="store_true", help="the < 60 s setting (default: the full study)")
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/melo)")
    s.add_argument("--seed", type=int, default=0, help="seed of every run (default 0)")
    s.add_argument(
        "--jobs",
        type=int,
        default=min(8, os.cpu_count() or 1),
        help="worker processes (default: CPU count, at most 8)",
    )
    s.set_defaults(func=_cmd_study)

    r = sub.add_parser("run", help="one simulation run", description="Run one packet-level simulation.")
    r.add_argument("--scheme", default="melo", help="gbn, sr or melo (default melo)")
    r.add_argument("--conns", type=int, default=16, help="connections (default 16)")
    r.add_argument("--gbps", type=float, default=100.0, help="link rate (default 100)")
    r.add_argument("--rtt-us", type=float, default=8.0, help="base RTT in us (default 8)")
    r.add_argument("--loss", type=float, default=0.01, help="loss ratio (default 0.01)")
    r.add_argument("--burst", type=float, default=1.0, help="mean loss burst, 1 = i.i.d. (default 1)")
    r.add_argument("--reorder", type=float, default=0.0, help="fraction of packets reordered (default 0)")
    r.add_argument("--rto-us", type=float, default=100.0, help="retransmission timeout (default 100)")
    r.add_argument("--workload", default="backlogged", help="backlogged, websearch or datamining")
    r.add_argument("--flows", type=int, default=200, help="flows of a flow workload (default 200)")
    r.add_argument("--load", type=float, default=0.5, help="offered load of a flow workload (default 0.5)")
    r.add_argument("--duration-us", type=float, default=2000.0, help="backlogged duration / flow-run cap")
    r.add_argument("--pool-blocks", type=int, default=None, help="MELO pool blocks (default 8 BDP bits)")
    r.add_argument("--block-bits", type=int, default=32, help="MELO bits per block (default 32)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/melo)")
    r.set_defaults(func=_cmd_run)
    return p


main = entry("melo")

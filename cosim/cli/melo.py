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

from hwcosim.cosim.cli.util import command, entry, out_dir, staged

__all__ = ["register", "main"]


def _cmd_study(args) -> int:
    from hwcosim.models.melo.report import print_study
    from hwcosim.models.melo.study import run_study, write_study
    from rich.console import Console

    out = out_dir(args.output, "build/melo")  # --jobs and --seed: their ranges are checked by the parser
    con = Console(stderr=False)
    mode = "quick" if args.quick else "full"
    with con.status(f"MELO study ({mode}, {args.jobs} jobs) ...") as status:
        res = run_study(quick=args.quick, seed=args.seed, jobs=args.jobs,
                        progress=lambda d, n: status.update(f"MELO study ({mode}): run {d}/{n}"))
    paths = staged(lambda st: write_study(res, st), out)  # every file of the study appears at once, at the end
    print_study(res, con)
    con.print(f"{len(paths)} files in {out} ({res['wall_s']:.1f} s)")
    return 0


def _cmd_run(args) -> int:
    from hwcosim.models.melo.report import run_one

    path = run_one(out_dir(args.output, "build/melo"), scheme=args.scheme, n_conns=args.conns, link_gbps=args.gbps,
                   rtt_us=args.rtt_us, loss=args.loss, burst=args.burst, reorder_prob=args.reorder,
                   rto_us=args.rto_us, workload=args.workload, n_flows=args.flows, load=args.load,
                   duration_us=args.duration_us, pool_blocks=args.pool_blocks, block_bits=args.block_bits,
                   seed=args.seed)
    print(f"wrote {path}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``melo`` (with ``study`` and ``run``) to an argparse subparsers object."""
    p = subparsers.add_parser("melo", help="MELO loss recovery (APNet 2017): simulator and study",
                              description="MELO: memory-efficient loss recovery for hardware transports (Lu et al., "
                                          "APNet 2017).")
    sub = p.add_subparsers(dest="melo_cmd", metavar="{study,run}")
    sub.required = True

    command(sub, "study", _cmd_study, "go-back-N vs full-bitmap SR vs MELO: throughput, FCT, memory, pool size "
            "(JSON + PNG)", [
        ("--quick", "the < 60 s setting (default: the full study)", True),
        ("-o --output", "output folder (default build/melo)", dict(metavar="DIR")),
        ("--seed", "seed of every run (default 0)", dict(type=int, default=0)),
        ("--jobs", "worker processes (default: CPU count, at most 8)",
         dict(type=int, default=min(8, os.cpu_count() or 1)))],
            description="Run the MELO study and write melo_study.json and PNG plots.")
    command(sub, "run", _cmd_run, "one simulation run", [
        ("--scheme", "gbn, sr or melo (default melo)", dict(default="melo")),
        ("--conns", "connections (default 16)", dict(type=int, default=16)),
        ("--gbps", "link rate (default 100)", dict(type=float, default=100.0)),
        ("--rtt-us", "base RTT in us (default 8)", dict(type=float, default=8.0)),
        ("--loss", "loss ratio (default 0.01)", dict(type=float, default=0.01)),
        ("--burst", "mean loss burst, 1 = i.i.d. (default 1)", dict(type=float, default=1.0)),
        ("--reorder", "fraction of packets reordered (default 0)", dict(type=float, default=0.0)),
        ("--rto-us", "retransmission timeout (default 100)", dict(type=float, default=100.0)),
        ("--workload", "backlogged, websearch or datamining", dict(default="backlogged")),
        ("--flows", "flows of a flow workload (default 200)", dict(type=int, default=200)),
        ("--load", "offered load of a flow workload (default 0.5)", dict(type=float, default=0.5)),
        ("--duration-us", "backlogged duration / flow-run cap", dict(type=float, default=2000.0)),
        ("--pool-blocks", "MELO pool blocks (default 8 BDP bits)", dict(type=int, default=None)),
        ("--block-bits", "MELO bits per block (default 32)", dict(type=int, default=32)),
        ("--seed", None, dict(type=int, default=0)),
        ("-o --output", "output folder (default build/melo)", dict(metavar="DIR"))],
            description="Run one packet-level simulation.")
    return p


main = entry("melo")

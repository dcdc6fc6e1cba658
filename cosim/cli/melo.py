"""``hwcosim melo`` subcommands: the MELO loss-recovery study and single simulator runs.

MELO: Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter",
APNet 2017. The lead wires :func:`register` into ``cosim/cli/__init__.py``; :func:`main` runs it alone.

- ``hwcosim melo study [--quick] [-o DIR] [--seed N] [--jobs N]``: every sweep of
  :mod:`hwcosim.models.melo.study`, JSON + PNG plots under ``build/melo`` by default.
- ``hwcosim melo run --scheme melo --loss 0.01 ...``: one run of :mod:`hwcosim.models.melo.sim`, JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["register", "main"]


def _fail(msg: str):
    raise UsageError(msg)


def _fmt(x: float, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _out_dir(arg: str | None, default: str) -> Path:
    from hwcosim.models.atomic import check_out_dir

    return check_out_dir(arg if arg else default)


def _cmd_study(args) -> int:
    from rich.console import Console
    from rich.table import Table

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
    h = res["headline"]
    cfg = res["config"]

    t = Table(title="Goodput MELO / go-back-N (backlogged, i.i.d. loss)")
    t.add_column("loss %", justify="right")
    for n in cfg["tput_conns"]:
        t.add_column(f"{n} conns", justify="right")
    t.add_column(f"p99 FCT GBN/MELO ({cfg['fct_workloads'][0]})", justify="right")
    for loss in cfg["losses"]:
        row = [f"{100 * loss:g}"]
        row += [_fmt(h["tput_ratio_melo_over_gbn"][f"n={n}"][str(loss)]) + "x" for n in cfg["tput_conns"]]
        row.append(_fmt(h["p99_fct_ratio_gbn_over_melo"][cfg["fct_workloads"][0]][str(loss)]) + "x")
        t.add_row(*row)
    show(t, con)

    t = Table(title=f"On-chip receiver state, bytes per connection ({100 * cfg['conns_loss']:g}% loss)")
    for c in ("conns", "GBN B/conn", "SR full bitmap B/conn", "MELO avg B/conn", "MELO peak B/conn",
              "MELO provisioned B/conn"):
        t.add_column(c, justify="right")
    for n in cfg["conns"]:
        m = h["memory_B_per_conn"][f"n={n}"]
        t.add_row(str(n), *(_fmt(m[k]) for k in ("gbn", "sr", "melo_avg", "melo_peak", "melo_provisioned")))
    show(t, con)
    con.print(
        "paper: up to 14.02x goodput, 3.11x lower p99 FCT, ~23 B/conn; "
        f"ours: max {h['max_tput_ratio']:.2f}x goodput, "
        f"max {h['max_p99_fct_ratio']:.2f}x p99 FCT, MELO avg {h['melo_mem_avg_B_range'][0]:.1f}-"
        f"{h['melo_mem_avg_B_range'][1]:.1f} B/conn (see models/melo/study.py for why they differ)"
    )
    con.print(f"{len(paths)} files in {out} ({res['wall_s']:.1f} s)")
    return 0


def _cmd_run(args) -> int:
    from rich.table import Table

    from hwcosim.models.atomic import write_text
    from hwcosim.models.melo.sim import LossModel, SimParams, simulate

    out = _out_dir(args.output, "build/melo")
    try:
        p = SimParams(
            scheme=args.scheme,
            n_conns=args.conns,
            link_gbps=args.gbps,
            rtt_us=args.rtt_us,
            loss=LossModel(args.loss, args.burst),
            reorder_prob=args.reorder,
            rto_us=args.rto_us,
            workload=args.workload,
            n_flows=args.flows,
            load=args.load,
            duration_us=args.duration_us,
            pool_blocks=args.pool_blocks,
            block_bits=args.block_bits,
            seed=args.seed,
        )
    except ValueError as e:
        _fail(str(e))
    r = simulate(p)
    path = write_text(
        out / f"melo_run_{p.scheme}.json",
        json.dumps({"params": r.params, "summary": r.summary(), "fct_us": r.fct_us}, indent=1) + "\n",
    )
    t = Table(title=f"{p.scheme}: {p.n_conns} conns, {100 * p.loss.rate:g}% loss, {p.workload}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    s = r.summary()
    for k in (
        "goodput_gbps",
        "sent_pkts",
        "retx_pkts",
        "timeouts",
        "fct_p50_us",
        "fct_p99_us",
        "fct_p999_us",
        "mem_avg_B",
        "mem_peak_B",
        "mem_provisioned_B",
        "melo_nack_pool",
        "complete",
        "wall_s",
    ):
        v = s[k]
        t.add_row(k, _fmt(v) if isinstance(v, float) else str(v))
    show(t)
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


def main(argv=None) -> int:
    """Stand-alone entry, the same as ``hwcosim melo ...``: the one dispatcher reports errors."""
    from hwcosim.cosim.cli import main as hwcosim

    return hwcosim(["melo", *(sys.argv[1:] if argv is None else argv)])

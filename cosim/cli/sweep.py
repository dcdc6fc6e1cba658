"""``hwcosim sweep``: a parameter sweep of an RTL design on Dask (:mod:`hwcosim.cosim.flow.sweep`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import add_options, add_param_args, command
from hwcosim.models.tables import show


def register(sub) -> None:
    from hwcosim.cosim.flow.sweep import ADAPTERS

    ap = command(
        sub, "sweep", cmd_sweep,
        help_="sweep design parameters on Dask: cycles, resources, model metrics, Pareto plots",
        description="Run a parameter sweep of an RTL design: every point is simulated on a seeded workload "
                    "and checked against the golden model (a mismatch fails the point), optionally synthesised, "
                    "and summarised in sweep.json and Pareto plots. Points are cached, so a rerun skips done "
                    "points and an interrupted sweep resumes. Sweepable: " + ", ".join(ADAPTERS) + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(ap, [
        ("spec", "a sweep spec (.toml, e.g. cosim/flow/sweeps/bbs_small.toml) or a design name"),
        ("-o --output", "output folder (default build/sweep/<spec name>)"),
        ("--grid", "sweep a parameter or workload setting over values (repeatable)",
         dict(action="append", default=[], metavar="NAME=V1,V2")),
        ("--set", "fix a parameter or workload setting (repeatable)",
         dict(action="append", default=[], metavar="NAME=VALUE"))])
    add_param_args(ap, param_help="fix a design parameter (repeatable; the same channel as verilog/sim/build)",
                   params_help="design parameters from a TOML file of FIELD = VALUE lines (--param/--set win)")
    add_options(ap, [
        ("--scheduler", "a running Dask scheduler (tcp://host:8786); default: an embedded LocalCluster",
         dict(metavar="ADDRESS")),
        ("--workers", "workers of the embedded LocalCluster (default 2)", dict(type=int, default=2)),
        ("--threads", "embedded cluster with threads in this process instead of worker processes", True),
        ("--synth", "estimate resources with Yosys: xcup or cyclone10gx (default: the spec's, else none)",
         dict(metavar="TARGET")),
        ("--sim", "simulator (default $SIM or verilator)", dict(choices=("verilator", "icarus"))),
        ("--cache", "point cache folder (default <output>/cache)", dict(metavar="DIR")),
        ("--force", "ignore cached points (they are rewritten)", True),
        ("--no-progress", "plain lines instead of a progress bar", True)])


def spec_from_args(args):
    """The sweep spec of a parsed ``hwcosim sweep`` command line."""
    from hwcosim.cosim.flow.sweep import spec_from_options

    return spec_from_options(args.spec, settings=args.set, params=args.param, params_file=args.params,
                             grid=args.grid, synth=args.synth, sim=args.sim)


def cmd_sweep(args) -> int:
    from hwcosim.cosim.flow.sweep import ADAPTERS, point_label, results_table, run_sweep
    from rich.console import Console

    spec = spec_from_args(args)
    out = Path(args.output or Path("build") / "sweep" / spec.name)
    con = Console()
    if not con.is_terminal:
        con = Console(width=140)  # a log file or a pipe: do not squeeze the table to 80 columns
    report = run_sweep(spec, out, scheduler=args.scheduler, workers=args.workers, processes=not args.threads,
                       cache_dir=args.cache, force=args.force, progress=not args.no_progress, console=con)
    show(results_table(ADAPTERS[spec.design], report), con)
    for r in report["points"]:
        if r["status"] == "failed":
            con.print(f"[red]FAILED[/red] {point_label(r['point'])}: {r.get('error', '')[:300]}")
    con.print(f"{report['counts']['ok']} ok, {report['counts']['failed']} failed "
              f"({report['cached_points']} from the cache); '*' marks a point on a Pareto front")
    con.print(f"wrote {out / 'sweep.json'}" + "".join(f"\nwrote {out / p}" for p in report["plots"]))
    return 1 if report["counts"]["failed"] else 0

"""``hwcosim cluster`` subcommands (the studies are in :mod:`hwcosim.models.systems.cluster.bench`).

- ``hwcosim cluster run scenario.toml [-o DIR] [--seed N]``: a TOML scenario
  (:mod:`hwcosim.models.systems.cluster.scenario`): progress bar, table, ``scenario.json`` + ``scenario.png``.
- ``hwcosim cluster arnold|c4p|crux [--quick] [-o DIR] [--seed N]``: one study each, JSON + PNG +
  a table; outputs under ``build/cluster`` by default.
- ``hwcosim cluster speed [--gpus N] [--jobs N]``: simulated seconds per wall second on the
  Lingjun 2023 topology.
- ``hwcosim cluster trace [--workload W] [--seeds 42,43] [--quick] [-o DIR]``: FGD and five packing
  baselines on the real Alibaba GPU 2023 trace (:mod:`hwcosim.models.systems.cluster.fgd`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import entry, study_command
from hwcosim.cosim.cli.util import fail as _fail
from hwcosim.cosim.cli.util import out_dir as _out_dir_base

__all__ = ["register", "main"]

_BENCH = "hwcosim.models.systems.cluster.bench"


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/cluster")


def _cmd_run(args) -> int:
    from hwcosim.models.systems.cluster.bench import print_scenario, write_scenario
    from hwcosim.models.systems.cluster.scenario import MAX_SEED, ScenarioError, load_scenario, run_scenario
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        sc = load_scenario(args.scenario)
    except ScenarioError as e:
        _fail(str(e))
    if args.seed is not None:
        if not 0 <= args.seed <= MAX_SEED:
            _fail(f"--seed must be in 0..{MAX_SEED}, not {args.seed}")
    import dataclasses

    from hwcosim.models.precedence import layered

    sc = dataclasses.replace(sc, **layered(("scenario", {"seed": sc.seed}), ("--seed", {"seed": args.seed})))
    out = _out_dir(args.output or f"build/cluster/{sc.name}")
    total = sum(j.spec.iterations for j in sc.jobs)
    with Progress(TextColumn(f"[bold]{sc.name}"), BarColumn(), MofNCompleteColumn(), TextColumn("iterations"),
                  TimeElapsedColumn(), disable=args.quiet) as bar:
        task = bar.add_task("run", total=total)
        try:
            res = run_scenario(sc, progress=lambda d, t: bar.update(task, completed=d))
        except ScenarioError as e:
            bar.stop()
            _fail(f"{args.scenario}: {e}")
    write_scenario(out, res)
    print_scenario(res, sc.name, sc.seed)
    print(f"makespan {res['makespan_s']:.3f} s, cluster GPU utilisation {res['gpu_utilisation']:.3f}, "
          f"{res['events']} events in {res['wall_s']:.2f} s; wrote scenario.json + scenario.png to {out}/")
    return 0


# ---- argparse ------------------------------------------------------------------------------------
def _cmd_speed(args) -> int:
    if args.gpus < 8 or args.jobs < 1:
        _fail(f"--gpus must be >= 8 and --jobs >= 1, not {args.gpus} and {args.jobs}")
    from hwcosim.models.benchio import print_table, write_json
    from hwcosim.models.systems.cluster.bench import speed_run

    try:
        r = speed_run(args.gpus, args.jobs, args.iterations, args.seed)
    except ValueError as e:
        _fail(str(e))
    out = _out_dir(args.output)
    write_json(out / "cluster_speed.json", r)
    heads = {"gpus": "GPUs", "jobs": "jobs", "iterations": "iterations", "sim_s": "sim s", "wall_s": "wall s",
             "sim_s_per_wall_s": "sim s / wall s", "events": "events", "rate_recomputes": "rate recomputes (count)"}
    print_table("Cluster simulator speed", [heads.get(k, k) for k in r],
                [[f"{v:.3f}" if isinstance(v, float) else v for v in r.values()]])
    return 0


def _cmd_trace(args) -> int:
    from hwcosim.models.benchio import write_json
    from hwcosim.models.systems.cluster.fgd import format_report, run_fgd_study

    seeds = None if args.seeds is None else [int(s) for s in args.seeds.split(",") if s.strip()]
    out = _out_dir(args.output)
    res = run_fgd_study(args.workload, seeds=seeds, quick=args.quick, out_dir=out)
    write_json(out / f"fgd_{args.workload}.json", res)
    print(format_report(res))
    print(f"wrote fgd_{args.workload}.json + .png to {out}/")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cluster`` (arnold, c4p, crux, speed) to an argparse subparsers object."""
    p = subparsers.add_parser("cluster", help="GPU-cluster simulator studies: Arnold, C4P, Crux",
                              description="Flow-level GPU-cluster simulator and the Arnold, C4P and Crux studies.")
    sub = p.add_subparsers(dest="cluster_cmd", metavar="{run,arnold,c4p,crux,speed,trace}")
    sub.required = True
    for name, hlp in (("arnold", "Arnold MIP placement vs best-fit/random/packing/RB-FM"),
                      ("c4p", "C4P global path planning vs ECMP (busbw, iteration time)"),
                      ("crux", "Crux intensity scheduling vs ECMP, Sincronia-like and CASSINI-like")):
        s = sub.add_parser(name, help=hlp, description=hlp + "; writes JSON + PNG.")
        s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
        s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster)")
        s.add_argument("--seed", type=int, default=0, help="seed (default 0)")
        if name == "arnold":
            s.add_argument("--alpha", type=float, default=0.5, help="DP weight; beta = 1 - alpha (default 0.5)")
        if name == "crux":
            s.add_argument("--levels", type=int, default=8, help="hardware priority levels K (default 8)")
        s.set_defaults(func=study_command(f"{_BENCH}:bench_{name}", "build/cluster", {
            "alpha": (lambda v: 0 <= v <= 1, "in [0, 1]"), "levels": (lambda v: v >= 1, ">= 1")}))
    s = sub.add_parser("run", help="run a scenario .toml (topology, jobs, routing, failures)",
                       description="Run a TOML scenario (see models/systems/cluster/scenarios/*.toml and "
                                   "models/systems/cluster/scenario.py); writes scenario.json + scenario.png and a "
                                   "table.")
    s.add_argument("scenario", help="scenario file (.toml)")
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster/<name>)")
    s.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_run)
    s = sub.add_parser("speed", help="simulated seconds per wall second on the Lingjun topology")
    s.add_argument("--gpus", type=int, default=2048)
    s.add_argument("--jobs", type=int, default=16)
    s.add_argument("--iterations", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster)")
    s.set_defaults(func=_cmd_speed)
    s = sub.add_parser("trace", help="FGD vs packing schedulers on the real Alibaba GPU 2023 trace (ATC 2023)",
                       description="Tasks of the Alibaba GPU 2023 trace (data directory) arrive until 130%% of the "
                                   "cluster's GPU capacity; unallocated and fragmented GPUs per policy beside the "
                                   "paper's and its artifact's figures; writes JSON + PNG.")
    s.add_argument("--workload", choices=("default", "gpushare100", "gpuspec33", "multigpu50"), default="default",
                   help="trace variant (default: default)")
    s.add_argument("--seeds", default=None, help="comma-separated seeds (default 42..51, --quick: 42,43)")
    s.add_argument("--quick", action="store_true", help="1/8 of the nodes, 2 seeds: seconds (a smoke check)")
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster)")
    s.set_defaults(func=_cmd_trace)
    return p


main = entry("cluster")

"""``hwcosim cluster run|arnold|c4p|crux|speed|trace``: a TOML scenario, the studies of
:mod:`hwcosim.models.systems.cluster.bench`, the simulator's speed on the Lingjun 2023 topology, and FGD
on the Alibaba GPU 2023 trace (:mod:`hwcosim.models.systems.cluster.fgd`); outputs under ``build/cluster``."""

from __future__ import annotations

import argparse

from hwcosim.cosim.cli.util import add_study, command, entry, fail, out_dir

__all__ = ["register", "main"]

_OUT = ("-o --output", "output folder (default build/cluster)", dict(metavar="DIR"))


def _cmd_run(args) -> int:
    import dataclasses

    from hwcosim.models.precedence import layered
    from hwcosim.models.systems.cluster.bench import print_scenario, write_scenario
    from hwcosim.models.systems.cluster.scenario import ScenarioError, load_scenario, run_scenario
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        sc = load_scenario(args.scenario)
    except ScenarioError as e:
        fail(str(e))
    sc = dataclasses.replace(sc, **layered(("scenario", {"seed": sc.seed}), ("--seed", {"seed": args.seed})))
    out = out_dir(args.output, f"build/cluster/{sc.name}")
    with Progress(TextColumn(f"[bold]{sc.name}"), BarColumn(), MofNCompleteColumn(), TextColumn("iterations"),
                  TimeElapsedColumn(), disable=args.quiet) as bar:
        task = bar.add_task("run", total=sum(j.spec.iterations for j in sc.jobs))
        try:
            res = run_scenario(sc, progress=lambda d, t: bar.update(task, completed=d))
        except ScenarioError as e:
            bar.stop()
            fail(f"{args.scenario}: {e}")
    write_scenario(out, res)
    print_scenario(res, sc.name, sc.seed)
    print(f"makespan {res['makespan_s']:.3f} s, cluster GPU utilisation {res['gpu_utilisation']:.3f}, "
          f"{res['events']} events in {res['wall_s']:.2f} s; wrote scenario.json + scenario.png to {out}/")
    return 0


def _cmd_speed(args) -> int:
    from hwcosim.models.benchio import print_table, write_json
    from hwcosim.models.systems.cluster.bench import speed_run

    try:
        r = speed_run(args.gpus, args.jobs, args.iterations, args.seed)
    except ValueError as e:
        fail(str(e))
    write_json(out_dir(args.output, "build/cluster") / "cluster_speed.json", r)
    heads = {"gpus": "GPUs", "sim_s": "sim s", "wall_s": "wall s", "sim_s_per_wall_s": "sim s / wall s",
             "rate_recomputes": "rate recomputes (count)"}
    print_table("Cluster simulator speed", [heads.get(k, k) for k in r],
                [[f"{v:.3f}" if isinstance(v, float) else v for v in r.values()]])
    return 0


def _cmd_trace(args) -> int:
    from hwcosim.models.benchio import write_json
    from hwcosim.models.systems.cluster.fgd import format_report, run_fgd_study

    seeds = None if args.seeds is None else [int(s) for s in args.seeds.split(",") if s.strip()]
    out = out_dir(args.output, "build/cluster")
    res = run_fgd_study(args.workload, seeds=seeds, quick=args.quick, out_dir=out)
    write_json(out / f"fgd_{args.workload}.json", res)
    print(format_report(res))
    print(f"wrote fgd_{args.workload}.json + .png to {out}/")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cluster`` (run, arnold, c4p, crux, speed, trace) to an argparse subparsers object."""
    p = subparsers.add_parser("cluster", help="GPU-cluster simulator studies: Arnold, C4P, Crux",
                              description="Flow-level GPU-cluster simulator and the Arnold, C4P and Crux studies.")
    sub = p.add_subparsers(dest="cluster_cmd", metavar="{run,arnold,c4p,crux,speed,trace}")
    sub.required = True
    for name, hlp, rows in (
            ("arnold", "Arnold MIP placement vs best-fit/random/packing/RB-FM",
             [("--alpha", "DP weight; beta = 1 - alpha (default 0.5)", dict(type=float, default=0.5))]),
            ("c4p", "C4P global path planning vs ECMP (busbw, iteration time)", []),
            ("crux", "Crux intensity scheduling vs ECMP, Sincronia-like and CASSINI-like",
             [("--levels", "hardware priority levels K (default 8)", dict(type=int, default=8))])):
        add_study(sub, name, hlp, f"hwcosim.models.systems.cluster.bench:bench_{name}", "build/cluster", rows,
                  description=hlp + "; writes JSON + PNG.")
    command(sub, "run", _cmd_run, "run a scenario .toml (topology, jobs, routing, failures)", [
        ("scenario", "scenario file (.toml)"),
        ("-o --output", "output folder (default build/cluster/<name>)", dict(metavar="DIR")),
        ("--seed", "override the scenario's seed", dict(type=int, default=None)),
        ("-q --quiet", "no progress bar", True)],
            description="Run a TOML scenario (see models/systems/cluster/scenarios/*.toml and "
                        "models/systems/cluster/scenario.py); writes scenario.json + scenario.png and a table.")
    command(sub, "speed", _cmd_speed, "simulated seconds per wall second on the Lingjun topology", [
        ("--gpus", None, dict(type=int, default=2048)), ("--jobs", None, dict(type=int, default=16)),
        ("--iterations", None, dict(type=int, default=5)), ("--seed", None, dict(type=int, default=0)), _OUT])
    command(sub, "trace", _cmd_trace, "FGD vs packing schedulers on the real Alibaba GPU 2023 trace (ATC 2023)", [
        ("--workload", "trace variant (default: default)",
         dict(choices=("default", "gpushare100", "gpuspec33", "multigpu50"), default="default")),
        ("--seeds", "comma-separated seeds (default 42..51, --quick: 42,43)", dict(default=None)),
        ("--quick", "1/8 of the nodes, 2 seeds: seconds (a smoke check)", True), _OUT],
            description="Tasks of the Alibaba GPU 2023 trace (data directory) arrive until 130%% of the cluster's GPU "
                        "capacity; unallocated and fragmented GPUs per policy beside the paper's and its artifact's "
                        "figures; writes JSON + PNG.")
    return p


main = entry("cluster")

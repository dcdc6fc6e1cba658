"""``hwcosim jobcheck``: static + dry-run checks of a training script (exit 0 clean, 1 problems found, 2
bad input; ``--corpus`` runs the shipped corpus, ``--corpus real`` the real-failure study); ``hwcosim
cognn|cpualloc``: the studies of :mod:`hwcosim.models.systems.jobs.bench`. Outputs go under ``build/jobs`` by
default, written atomically."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import add_options, add_study, command, entry, fail, out_dir
from hwcosim.models.systems.jobs.jobcheck import TARGET_PYTHONS

__all__ = ["register", "main"]


def _cmd_jobcheck(args) -> int:
    from hwcosim.models.systems.jobs.bench import jobcheck_corpus, jobcheck_report
    from hwcosim.models.systems.jobs.jobcheck import CheckConfig, ScriptError, check

    if args.no_dry_run and args.run:
        fail("--run and --no-dry-run contradict each other; static checks are the default, --run adds the dry run")
    # the corpus scripts are our own: evaluating them runs them; a user's script runs only with --run
    execute = bool(args.run or args.corpus)
    cfg = CheckConfig(device_memory_bytes=args.device_memory * 2**30, timeout_s=args.timeout, dry_run=execute,
                      target_python=args.python)
    out = out_dir(args.output, "build/jobs")
    if args.corpus:
        if args.script:
            fail("--corpus takes no script")
        if args.corpus == "real":  # a study (misses expected): exit 0 once it ran
            from hwcosim.models.systems.jobs.bench import bench_jobcheck_real

            bench_jobcheck_real(out, quick=False, timeout_s=args.timeout)
            return 0
        res = jobcheck_corpus(out, cfg)
        return 0 if not res["missed"] and not res["false_positives"] else 1
    if not args.script:
        fail("give a training script (or --corpus)")
    script = Path(args.script)
    try:
        rep = check(script, args.args, cfg)
    except (FileNotFoundError, ScriptError) as e:
        fail(str(e))
    jobcheck_report(out, script, rep, execute, args.device_memory)
    return 0 if rep.ok else 1


def register(subparsers) -> None:
    """Add ``jobcheck``, ``cognn`` and ``cpualloc`` to an argparse subparsers object."""
    p = command(
        subparsers, "jobcheck", _cmd_jobcheck,
        help_="pre-flight checks of a training script (Philly failure categories)",
        description="Checks that catch, before a long run, the failure categories of Zhang et al. (ICSE 2020): "
                    "missing paths/modules, permissions, memory over the device, shape mismatches, NaN/Inf, API "
                    "misuse. By default only static checks run and the script is NOT executed. --run adds a dry "
                    "run that EXECUTES the script in a Linux sandbox (util-linux unshare; needs root): the working "
                    "folder, the script's folder and /tmp are private copy-on-write copies discarded at the end, "
                    "every other path is read-only, no network, every process it starts is killed at the end, "
                    "with CPU-time, address-space, file-size, process-count and wall-time limits; where the "
                    "sandbox cannot be guaranteed, --run is refused (exit 2). Dry-run convention: "
                    "the script sees HWCOSIM_DRYRUN=1, HWCOSIM_BATCH and HWCOSIM_STEPS; --batch-size/--epochs/"
                    "--steps options are rewritten. --corpus runs the shipped corpus scripts; --corpus real the "
                    "scripts reconstructed from public failure reports (precision/recall per category, the "
                    "fraction caught weighted by the study's frequencies beside its 48%). "
                    "Exit 0: clean; 1: problems found; 2: bad input.")
    add_options(p, [
        ("--device-memory", "device memory (default 16)", dict(type=float, default=16.0, metavar="GIB")),
        ("--timeout", "dry-run wall-time limit, (0, 3600] s (default 60)", dict(type=float, default=60.0, metavar="S")),
        ("--python", "the job's Python version: the script's syntax is also checked against its grammar",
         dict(choices=TARGET_PYTHONS, metavar="X.Y")),
        ("--run", "also EXECUTE the script in the sandboxed dry run (default: static checks only)", True),
        ("--no-dry-run", "static checks only (the default; kept for old scripts)", True),
        ("--corpus", "evaluate a corpus instead of a script: shipped (the default: one script per category) or "
                     "real (scripts reconstructed from public failure reports, scored against the ICSE 2020 study)",
         dict(nargs="?", const="shipped", choices=("shipped", "real"))),
        ("-o --output", "output folder (default build/jobs)", dict(metavar="DIR")),
        ("script", "training script", dict(nargs="?")), ("args", "its arguments", dict(nargs=argparse.REMAINDER))])
    bench = "hwcosim.models.systems.jobs.bench"
    add_study(subparsers, "cognn", "CoGNN: GNN memory cost functions and memory-aware task grouping",
              f"{bench}:bench_cognn", "build/jobs", [("--workers", "tasks per group at most (default 4)",
                                                      dict(type=int, default=4))], seed=None,
              description="CoGNN (SC 2022): per-operator memory estimates of GCN/GAT/GIN/GraphSAGE training validated "
                          "against tracemalloc, and grouping policies vs sequential and naive co-location; writes "
                          "JSON + PNG.")
    add_study(subparsers, "cpualloc", "CPU allocation for DL jobs: adaptive (CODA-like) vs static rules",
              f"{bench}:bench_cpualloc", "build/jobs",
              [("--workload", "trace (Alibaba GPU trace 2023), synthetic, or both (default)",
                dict(default="both", choices=("both", "trace", "synthetic")))], seed=None,
              description="Compares even-split, static and adaptive (learned) CPU allocation: on the Alibaba GPU "
                          "trace 2023 (real node types, requested cores, arrivals; static = the requested cores) "
                          "and on a synthetic heterogeneous cluster fed by a profiled real data-loading job; writes "
                          "JSON + PNG.")


main = entry()

"""``hwcosim jobcheck``, ``hwcosim cognn`` and ``hwcosim cpualloc``.

- ``hwcosim jobcheck [options] train.py [args ...]``: static + dry-run checks of a training
  script (exit 0 clean, 1 problems found, 2 bad input); ``hwcosim jobcheck --corpus`` runs the
  shipped corpus and reports detection rate and false positives.
- ``hwcosim cognn [--quick]`` and ``hwcosim cpualloc [--quick]``: the studies
  (:mod:`hwcosim.models.systems.jobs.bench`), JSON + PNG + table.

Outputs go under ``build/jobs`` by default, written atomically.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from hwcosim.cosim.cli.util import entry, study_command
from hwcosim.cosim.cli.util import fail as _fail
from hwcosim.cosim.cli.util import out_dir as _out_dir_base
from hwcosim.models.benchio import print_table

__all__ = ["register", "main"]

_table = functools.partial(print_table, justify=None)


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/jobs")


# ---- jobcheck ------------------------------------------------------------------------------------
def _cmd_jobcheck(args) -> int:
    from hwcosim.models.systems.jobs.bench import jobcheck_corpus, jobcheck_report
    from hwcosim.models.systems.jobs.jobcheck import CheckConfig, ScriptError, check

    if not 0 < args.device_memory <= 1 << 20:
        _fail(f"--device-memory must be in (0, 1048576] GiB, not {args.device_memory}")
    if not 0 < args.timeout <= 3600:
        _fail(f"--timeout must be in (0, 3600] s, not {args.timeout}")
    if args.no_dry_run and args.run:
        _fail("--run and --no-dry-run contradict each other; static checks are the default, --run adds the dry run")
    # the corpus scripts are our own: evaluating them runs them; a user's script runs only with --run
    execute = bool(args.run or args.corpus)
    cfg = CheckConfig(device_memory_bytes=args.device_memory * 2**30, timeout_s=args.timeout, dry_run=execute)
    out = _out_dir(args.output)
    if args.corpus:
        if args.script:
            _fail("--corpus takes no script")
        res = jobcheck_corpus(out, cfg)
        return 0 if not res["missed"] and not res["false_positives"] else 1
    if not args.script:
        _fail("give a training script (or --corpus)")
    script = Path(args.script)
    try:
        rep = check(script, args.args, cfg)
    except (FileNotFoundError, ScriptError) as e:
        _fail(str(e))
    jobcheck_report(out, script, rep, execute, args.device_memory)
    return 0 if rep.ok else 1


def register(subparsers) -> None:
    """Add ``jobcheck``, ``cognn`` and ``cpualloc`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "jobcheck", help="pre-flight checks of a training script (Philly failure categories)",
        description="Checks that catch, before a long run, the failure categories of Zhang et al. (ICSE 2020): "
                    "missing paths/modules, permissions, memory over the device, shape mismatches, NaN/Inf, API "
                    "misuse. By default only static checks run and the script is NOT executed. --run adds a dry "
                    "run that EXECUTES the script in a Linux sandbox (util-linux unshare; needs root): the working "
                    "folder, the script's folder and /tmp are private copy-on-write copies discarded at the end, "
                    "every other path is read-only, no network, every process it starts is killed at the end, "
                    "with CPU-time, address-space, file-size, process-count and wall-time limits; where the "
                    "sandbox cannot be guaranteed, --run is refused (exit 2). Dry-run convention: "
                    "the script sees HWCOSIM_DRYRUN=1, HWCOSIM_BATCH and HWCOSIM_STEPS; --batch-size/--epochs/"
                    "--steps options are rewritten. --corpus runs the shipped corpus scripts. "
                    "Exit 0: clean; 1: problems found; 2: bad input.")
    p.add_argument("--device-memory", type=float, default=16.0, metavar="GIB", help="device memory (default 16)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="dry-run wall-time limit, (0, 3600] s (default 60)")
    p.add_argument("--run", action="store_true",
                   help="also EXECUTE the script in the sandboxed dry run (default: static checks only)")
    p.add_argument("--no-dry-run", action="store_true", help="static checks only (the default; kept for old scripts)")
    p.add_argument("--corpus", action="store_true", help="evaluate the shipped corpus instead of a script")
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/jobs)")
    p.add_argument("script", nargs="?", help="training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(func=_cmd_jobcheck)
    _register_studies(subparsers)


def _register_studies(subparsers) -> None:
    s = subparsers.add_parser("cognn", help="CoGNN: GNN memory cost functions and memory-aware task grouping",
                              description="CoGNN (SC 2022): per-operator memory estimates of GCN/GAT/GIN/GraphSAGE "
                                          "training validated against tracemalloc, and grouping policies vs "
                                          "sequential and naive co-location; writes JSON + PNG.")
    s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
    s.add_argument("--workers", type=int, default=4, help="tasks per group at most (default 4)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/jobs)")
    s.set_defaults(func=study_command("hwcosim.models.systems.jobs.bench:bench_cognn", "build/jobs",
                                      {"workers": (lambda v: v >= 1, ">= 1")}))
    s = subparsers.add_parser("cpualloc", help="CPU allocation for DL jobs: adaptive (CODA-like) vs static rules",
                              description="Profiles a real CPU-bound data-loading job, fits throughput-vs-cores "
                                          "curves, and compares even-split, Kubeflow-style static and adaptive CPU "
                                          "allocation on a heterogeneous GPU cluster; writes JSON + PNG.")
    s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/jobs)")
    s.set_defaults(func=study_command("hwcosim.models.systems.jobs.bench:bench_cpualloc", "build/jobs"))


main = entry()

"""``hwcosim jobcheck``, ``hwcosim cognn`` and ``hwcosim cpualloc``.

- ``hwcosim jobcheck [options] train.py [args ...]``: static + dry-run checks of a training
  script (exit 0 clean, 1 problems found, 2 bad input); ``hwcosim jobcheck --corpus`` runs the
  shipped corpus and reports detection rate and false positives.
- ``hwcosim cognn [--quick]`` and ``hwcosim cpualloc [--quick]``: the studies, JSON + PNG + table.

Outputs go under ``build/jobs`` by default, written atomically.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from hwcosim.models.tables import emit, show

__all__ = ["register", "main", "bench_cognn", "bench_cpualloc"]


from hwcosim.cosim.cli.util import fail as _fail
from hwcosim.cosim.cli.util import out_dir as _out_dir_base
from hwcosim.cosim.cli.util import staged
from hwcosim.cosim.cli.util import write_json as _write_json


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/jobs")


def _table(title, cols, rows):
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    show(t)


def _png(path: Path, draw) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hwcosim.models.atomic import save_png

    fig, ax = plt.subplots(figsize=(7, 4))
    draw(ax)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


# ---- jobcheck ------------------------------------------------------------------------------------
def _cmd_jobcheck(args) -> int:
    from hwcosim.models.systems.jobs.jobcheck import CATEGORIES, CheckConfig, ScriptError, check, evaluate_corpus

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
        def progress(k, n, row):
            verdict = "ok" if row["correct"] else ("MISSED" if row["expect"] != "ok" else "FALSE POSITIVE")
            print(f"[{k}/{n}] {row['script']}: expected {row['expect']}, found {','.join(row['found']) or '-'} "
                  f"-> {verdict} ({row['seconds']:.1f} s)", file=sys.stderr, flush=True)

        res = evaluate_corpus(cfg, progress=progress)
        _write_json(out / "jobcheck_corpus.json", res)
        _table("jobcheck corpus", ["script", "expected", "found", "result"],
               [[r["script"], r["expect"], ",".join(r["found"]) or "-", "ok" if r["correct"] else "MISS/FP"]
                for r in res["rows"]])
        print(f"detection {res['detected']}/{res['broken']} ({res['detection_rate']:.0%}), false positives "
              f"{res['false_positives']}/{res['correct_scripts']}; wrote {out / 'jobcheck_corpus.json'}")
        return 0 if not res["missed"] and not res["false_positives"] else 1
    if not args.script:
        _fail("give a training script (or --corpus)")
    script = Path(args.script)
    try:
        rep = check(script, args.args, cfg)
    except (FileNotFoundError, ScriptError) as e:
        _fail(str(e))
    print(f"jobcheck {script}: " + ("static checks, then the script was EXECUTED in a sandbox (its own process "
                                    "group, a scratch working directory, CPU/memory/wall-time limits, no network)"
                                    if execute else "static checks only; the script was NOT executed "
                                    "(add --run for the sandboxed dry run)"))
    _write_json(out / f"jobcheck_{script.stem}.json", rep.to_dict())
    emit("report", rep.to_dict())
    if rep.findings:
        _table(f"jobcheck {script}", ["severity", "category", "line", "source", "finding"],
               [[f.severity, f.category, f.line or "-", f.source, f.message] for f in rep.findings])
        for c in sorted(rep.categories):
            print(f"  {c}: {CATEGORIES[c]}")
    else:
        print(f"jobcheck {script}: no problems found")
    if rep.memory_estimate_bytes is not None:
        print(f"memory estimate at batch {rep.full_batch}: {rep.memory_estimate_bytes / 2**30:.2f} GiB "
              f"(device {args.device_memory:g} GiB)")
    print(f"wrote {out / f'jobcheck_{script.stem}.json'}")
    return 0 if rep.ok else 1


def register(subparsers) -> None:
    """Add ``jobcheck``, ``cognn`` and ``cpualloc`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "jobcheck", help="pre-flight checks of a training script (Philly failure categories)",
        description="Checks that catch, before a long run, the failure categories of Zhang et al. (ICSE 2020): "
                    "missing paths/modules, permissions, memory over the device, shape mismatches, NaN/Inf, API "
                    "misuse. By default only static checks run and the script is NOT executed. --run adds a dry "
                    "run that EXECUTES the script: in a child interpreter in its own session and process group "
                    "(killed as a whole at the end, children included), in a scratch working directory, with "
                    "CPU-time, address-space and wall-time limits and the network blocked. Dry-run convention: "
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


def bench_cognn(out_dir: Path, quick: bool, seed: int = 0, workers: int = 4) -> dict:
    """CoGNN study: memory-model error, then scheduling of a tuning-task stream; JSON + PNG + tables."""
    from hwcosim.models.systems.jobs.cognn import MODELS, run_study

    res = run_study(quick=quick, seed=seed, workers=workers,
                    progress_cb=lambda m: print(f"\r{m}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    _write_json(out_dir / "cognn.json", res)
    _table(f"CoGNN memory cost functions vs tracemalloc peak ({len(res['validation'])} runs, {res['graph_source']})",
           ["model", "mean |error| (%)", "max |error| (%)", "bias (%)"],
           [[k, f"{v['mean_abs']:.1%}", f"{v['max_abs']:.1%}", f"{v['bias']:+.1%}"]
            for k, v in res["error_by_model"].items()])
    sc = res["schedule"]
    seq = sc["sequential"]
    se = res["stream_estimate_error"]
    print(f"stream tasks: estimate vs measured true peak {se['mean']:+.1%} mean (from {se['min']:+.1%} to "
          f"{se['max']:+.1%}, {se['measured_configurations']} configurations measured); OOM is judged on the true "
          f"peaks; policies group on estimates x (1 + {res['margin']:.0%}) (margin covering the worst validation "
          "under-estimate)")
    nm = res["schedule_no_margin"]
    _table(f"CoGNN scheduling: {res['tasks']} tasks, cap {res['cap_bytes'] / 2**20:.1f} MiB, {res['workers']} workers",
           ["mode", "makespan s", "mean JCT s", "mean queueing s", "JCT vs sequential", "OOM events",
            "OOM events without margin"],
           [[m, f"{v['makespan_s']:.0f}", f"{v['mean_jct_s']:.0f}", f"{v['mean_queue_s']:.0f}",
             f"{v['mean_jct_s'] / seq['mean_jct_s']:.2f}x", v["oom_events"],
             nm[m]["oom_events"] if m in nm else "-"] for m, v in sc.items()])

    def draw(ax):
        val = res["validation"]
        for k in MODELS:
            m = np.array([v["measured_bytes"] for v in val if v["model"] == k]) / 2**20
            e = np.array([v["estimated_bytes"] for v in val if v["model"] == k]) / 2**20
            ax.loglog(m, e, "o", label=k, alpha=0.7)
        lim = [min(v["measured_bytes"] for v in val) / 2**20, max(v["measured_bytes"] for v in val) / 2**20]
        ax.loglog(lim, lim, "k--", lw=0.8)
        ax.set_xlabel("measured peak (MiB, tracemalloc)")
        ax.set_ylabel("estimated peak (MiB)")
        ax.set_title("GNN training memory: cost functions vs measurement")
        ax.legend(fontsize=8)

    _png(out_dir / "cognn_memory.png", draw)

    def draw2(ax):
        names = list(sc)
        x = np.arange(len(names))
        ax.bar(x - 0.2, [sc[n]["mean_jct_s"] for n in names], 0.4, label="mean JCT")
        ax.bar(x + 0.2, [sc[n]["makespan_s"] for n in names], 0.4, label="makespan")
        ax.set_xticks(x, names, rotation=20, fontsize=8)
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
        ax.set_title("CoGNN grouping vs sequential and naive co-location")

    _png(out_dir / "cognn_schedule.png", draw2)
    for n in res["notes"]:
        print(f"note: {n}")
    print("paper (SC 2022) reports its gains on GPUs with PyTorch/DGL; ours are a simulation over numpy-measured "
          "task sizes (see models/systems/jobs/cognn.py)")
    return res


def bench_cpualloc(out_dir: Path, quick: bool, seed: int = 0) -> dict:
    """CPU allocation study: measured loader profile, then even / static / adaptive (learned) / oracle
    on a heterogeneous cluster; JSON + PNGs (utilisation, JCT, loader throughput vs cores) + tables."""
    from hwcosim.models.systems.jobs.cpualloc import POLICIES, run_study

    res = run_study(quick=quick, seed=seed)
    _write_json(out_dir / "cpualloc.json", res)
    pr, lf = res["profile"], res["loader_fit"]
    _table(f"Measured data-loading job (digits decode + augment, multiprocessing; this host: {pr['host_cpus']} CPUs, "
           f"load {pr['load_avg_1min']})", ["worker processes", "samples/s", "fit (samples/s)"],
           [[c, f"{t:.0f}", f"{lf['r'] * c ** lf['alpha']:.0f}" + (" (held out)" if lf["holdout"] and
                                                                      lf["holdout"]["cores"] == c else "")]
            for c, t in zip(pr["cores"], pr["samples_per_s"])])
    if lf["holdout"]:
        print(f"held-out point: {lf['holdout']['cores']} workers, fit error {100 * lf['holdout']['rel_error']:+.1f}%")
    for w in res["warnings"]:
        print(f"WARNING: {w}", file=sys.stderr)
    rs = res["results"]
    names = [*POLICIES, "adaptive+floor0.5", "oracle+floor0.5"]
    types = list(rs["even"]["utilisation_by_type"])
    ol = res["offered_load"]
    _table(f"CPU allocation on the cluster engine: {res['jobs']} jobs on V100 (4 cores/GPU), A100 (8, 2x speed), "
           f"T4 (6, 0.5x speed); offered load " + ", ".join(f"{t} {v:.2f}" for t, v in ol.items()),
           ["policy", "GPU util (allocated)", "GPU util (cluster)", *[f"util {t}" for t in types]],
           [[p, f"{rs[p]['gpu_utilisation']:.3f}", f"{rs[p]['cluster_gpu_utilisation']:.3f}",
             *[f"{rs[p]['utilisation_by_type'][t]:.3f}" for t in types]] for p in names])
    _table("Job completion time (hours)", ["policy", "mean JCT h", "p90 JCT h", "p90 run h (JCT - wait)",
                                           "mean wait h", "makespan h"],
           [[p, f"{rs[p]['mean_jct_h']:.2f}", f"{rs[p]['p90_jct_h']:.2f}", f"{rs[p]['p90_run_h']:.2f}",
             f"{rs[p]['mean_wait_h']:.2f}", f"{rs[p]['makespan_h']:.1f}"] for p in names])
    fe = rs["adaptive"]["fit_error"]
    print(f"learned curves ({fe['jobs']} jobs, 3 noisy profiled points each): throughput error vs true curve "
          f"mean {fe['curve_mean_abs_err']:.1%} (p90 {fe['curve_p90_abs_err']:.1%}), exponent error "
          f"{fe['alpha_mean_abs_err']:.2f}, cores-to-saturate bias {fe['saturation_cores_bias']:+.0%}")
    _table("Learned (adaptive) allocator: sensitivity", ["setting", "GPU util", "gain over even", "mean JCT h",
                                                          "curve error"],
           [[",".join(f"{k}={v}" for k, v in r["setting"].items()), f"{r['gpu_utilisation']:.3f}",
             f"{100 * r['gain_over_even']:+.1f}%", f"{r['mean_jct_h']:.2f}", f"{r['fit_curve_mean_abs_err']:.1%}"]
            for r in res["adaptive_sensitivity"]])
    g, go = res["adaptive_gain_over"], res["oracle_gain_over"]
    print(f"GPU utilisation of allocated GPUs: adaptive (learned) {100 * g['even']:+.1f}% over even, "
          f"{100 * g['static']:+.1f}% over static; oracle {100 * go['even']:+.1f}% / {100 * go['static']:+.1f}%. "
          "CODA (ICDCS 2020): +20.8% (see notes in cpualloc.json)")

    def draw(ax):
        x = np.arange(len(types) + 1)
        wd = 0.8 / len(POLICIES)
        for i, p in enumerate(POLICIES):
            ax.bar(x + (i - (len(POLICIES) - 1) / 2) * wd,
                   [rs[p]["gpu_utilisation"], *[rs[p]["utilisation_by_type"][t] for t in types]], wd, label=p)
        ax.set_xticks(x, ["all", *types])
        ax.set_ylabel("GPU utilisation (allocated GPUs)")
        ax.set_title("CPU allocation policies")
        ax.legend(fontsize=8)

    _png(out_dir / "cpualloc.png", draw)

    def draw_jct(ax):
        x = np.arange(len(names))
        for i, (k, lab) in enumerate((("mean_jct_h", "mean JCT"), ("p90_jct_h", "p90 JCT"),
                                      ("p90_run_h", "p90 run time (JCT - wait)"))):
            ax.bar(x + (i - 1) * 0.27, [rs[n][k] for n in names], 0.27, label=lab)
        ax.set_xticks(x, names, rotation=15, fontsize=8)
        ax.set_ylabel("hours")
        ax.set_title("Job completion time by CPU allocation policy")
        ax.legend(fontsize=8)

    _png(out_dir / "cpualloc_jct.png", draw_jct)

    def draw_loader(ax):
        c = np.array(pr["cores"], float)
        t = np.array(pr["samples_per_s"])
        cc = np.linspace(1, c.max(), 50)
        ax.plot(c, t, "o", label="measured")
        if lf["holdout"]:
            ax.plot([lf["holdout"]["cores"]], [lf["holdout"]["measured"]], "s", mfc="none", ms=12,
                    label="held out")
        ax.plot(cc, lf["r"] * cc ** lf["alpha_raw"], "-", label=f"fit r={lf['r']:.0f}, alpha={lf['alpha_raw']:.2f}"
                + (f" (used {lf['alpha']:.2f})" if lf["alpha"] != lf["alpha_raw"] else ""))
        ax.plot(cc, t[0] * cc / c[0], ":", color="grey", label="linear scaling")
        ax.set_xlabel("worker processes (cores)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"Real loader on this host ({pr['host_cpus']} CPUs, shared)"
                     + ("; WARNING: no growth with cores" if res["warnings"] else ""), fontsize=9)
        ax.legend(fontsize=8)

    _png(out_dir / "cpualloc_loader.png", draw_loader)
    return res


def _study(fn):
    def run(args) -> int:
        if args.seed < 0:
            _fail(f"--seed must be >= 0, not {args.seed}")
        if getattr(args, "workers", 1) < 1:
            _fail(f"--workers must be >= 1, not {args.workers}")
        out = _out_dir(args.output)
        t0 = time.monotonic()
        kw = {"workers": args.workers} if hasattr(args, "workers") else {}
        staged(fn, out, args.quick, seed=args.seed, **kw)
        print(f"wrote JSON + PNG to {out}/ ({time.monotonic() - t0:.1f} s)")
        return 0

    return run


def _register_studies(subparsers) -> None:
    s = subparsers.add_parser("cognn", help="CoGNN: GNN memory cost functions and memory-aware task grouping",
                              description="CoGNN (SC 2022): per-operator memory estimates of GCN/GAT/GIN/GraphSAGE "
                                          "training validated against tracemalloc, and grouping policies vs "
                                          "sequential and naive co-location; writes JSON + PNG.")
    s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
    s.add_argument("--workers", type=int, default=4, help="tasks per group at most (default 4)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/jobs)")
    s.set_defaults(func=_study(bench_cognn))
    s = subparsers.add_parser("cpualloc", help="CPU allocation for DL jobs: adaptive (CODA-like) vs static rules",
                              description="Profiles a real CPU-bound data-loading job, fits throughput-vs-cores "
                                          "curves, and compares even-split, Kubeflow-style static and adaptive CPU "
                                          "allocation on a heterogeneous GPU cluster; writes JSON + PNG.")
    s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/jobs)")
    s.set_defaults(func=_study(bench_cpualloc))


def main(argv=None) -> int:
    """Stand-alone entry, the same as ``hwcosim ...``: the one dispatcher reports errors."""
    from hwcosim.cosim.cli import main as hwcosim

    return hwcosim([*(sys.argv[1:] if argv is None else argv)])

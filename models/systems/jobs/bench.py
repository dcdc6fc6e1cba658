"""The job studies as benchmarks: CoGNN (GNN memory cost functions and task grouping), CPU allocation,
jobcheck on real failures.

Each ``bench_*`` is ``(out_dir, quick, seed=0, ...) -> dict``: it runs the study of
:mod:`hwcosim.models.systems.jobs`, writes its JSON + PNG to ``out_dir``, prints its tables and
returns the result (``hwcosim bench`` and ``hwcosim cognn|cpualloc`` call the same functions).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
from hwcosim.models.benchio import print_table
from hwcosim.models.benchio import write_json as _write_json

__all__ = ["bench_cognn", "bench_cpualloc", "bench_jobcheck_real", "JOBCHECK_REAL_QUICK"]

_table = functools.partial(print_table, justify=None)


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


def _jct_bars(ax, sc: dict, key: str, label: str, title: str) -> None:
    """Mean JCT beside ``sc[policy][key]`` for every policy of a CoGNN schedule, in seconds."""
    names = list(sc)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [sc[n]["mean_jct_s"] for n in names], 0.4, label="mean JCT")
    ax.bar(x + 0.2, [sc[n][key] for n in names], 0.4, label=label)
    ax.set_xticks(x, names, rotation=20, fontsize=8)
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)
    ax.set_title(title)


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

    _png(out_dir / "cognn_schedule.png", lambda ax: _jct_bars(ax, sc, "makespan_s", "makespan",
                                                               "CoGNN grouping vs sequential and naive co-location"))
    for n in res["notes"]:
        print(f"note: {n}")
    print("paper (SC 2022) reports its gains on GPUs with PyTorch/DGL; ours are a simulation over numpy-measured "
          "task sizes (see models/systems/jobs/cognn.py)")
    res["trace"] = _bench_cognn_trace(out_dir, quick, seed, workers)
    _write_json(out_dir / "cognn.json", res)
    return res


def _bench_cognn_trace(out_dir: Path, quick: bool, seed: int, workers: int) -> dict:
    """CoGNN with measured co-location on the Alibaba GPU trace 2023's arrivals (``cognn.run_trace_study``)."""
    from hwcosim.models.data import DatasetMissing
    from hwcosim.models.systems.jobs.cognn import run_trace_study

    try:
        tr = run_trace_study(quick=quick, seed=seed, workers=workers)
    except DatasetMissing as e:
        print(f"trace study skipped: {e}")
        return {"skipped": str(e)}
    c = tr["colocation"]
    _table(f"CoGNN: GNN training tasks run together on this machine ({c['graph']}, median of {c['reps']}, load "
           f"average {c['load_average'][0]:.1f} on {c['cpus']} CPUs)",
           ["tasks together (count)", "efficiency (x sequential)", "efficiency range (x)", "CPU-time inflation (x)",
            "wall efficiency (x)", "wall slowdown median (x)", "CPU per wall (fraction)"],
           [[k, f"{v['efficiency']:.2f}", f"{v['efficiency_range'][0]:.2f}..{v['efficiency_range'][1]:.2f}",
             f"{v['cpu_inflation_median']:.2f}", f"{v['efficiency_wall']:.2f}", f"{v['slowdown_median']:.2f}",
             f"{v['cpu_per_wall']:.2f}"] for k, v in c["by_k"].items()])
    sc = tr["schedule"]
    _table(f"CoGNN on the trace's GPU-sharing arrivals: {tr['tasks']} tasks, offered load {tr['offered_load']}, "
           f"cap {tr['cap_bytes'] / 2**20:.1f} MiB, {tr['workers']} workers, measured co-location",
           ["mode", "makespan s", "mean JCT s", "mean queueing s", "OOM events", "mean group (tasks)"],
           [[m, f"{v['makespan_s']:.0f}", f"{v['mean_jct_s']:.0f}", f"{v['mean_queue_s']:.0f}", v["oom_events"],
             f"{v['mean_group']:.2f}"] for m, v in sc.items()])
    g, b = tr["gains"], tr["sensitive_to"]["band"]
    print(f"CoGNN on the trace ({g['best_policy']}): mean JCT {100 * g['jct_vs_sequential']:+.1f}% shorter than "
          f"sequential, {100 * g['jct_vs_mps']:+.1f}% than MPS-like (naive), {100 * g['jct_vs_timeslice']:+.1f}% than "
          f"time-slicing, {100 * g['jct_vs_sjf']:+.1f}% than sequential shortest-first; makespan "
          f"{100 * g['makespan_vs_sequential']:+.1f}% vs sequential (paper: shorter completion and queueing, "
          "no single figure)")
    print(f"sensitive to: {tr['sensitive_to']['parameter']}: JCT gain vs sequential "
          f"{100 * b['jct_vs_sequential'][0]:+.1f}% .. {100 * b['jct_vs_sequential'][1]:+.1f}%, vs MPS-like "
          f"{100 * b['jct_vs_mps'][0]:+.1f}% .. {100 * b['jct_vs_mps'][1]:+.1f}%")

    _png(out_dir / "cognn_trace.png", lambda ax: _jct_bars(
        ax, sc, "mean_queue_s", "mean queueing", "CoGNN on the Alibaba 2023 trace's arrivals, measured co-location"))
    return tr


def _bench_cpualloc_trace(out_dir: Path, quick: bool, seed: int) -> dict:
    """The CPU-allocation study on the Alibaba GPU trace 2023 (requests, node types, arrivals)."""
    from hwcosim.models.systems.jobs.cpualloc import POLICIES, run_trace_study

    res = run_trace_study(quick=quick, seed=seed)
    _write_json(out_dir / "cpualloc_trace.json", res)
    rs = res["results"]
    rq = res["request_cores_per_gpu_percentiles"]
    _table(f"CPU allocation on the Alibaba GPU trace 2023: {res['jobs']} whole-GPU tasks on "
           f"{sum(n['count'] for n in res['nodes'])} nodes of {len(res['nodes'])} real node types; requested cores "
           f"per GPU p5/p50/p95 {rq['5']:.1f}/{rq['50']:.1f}/{rq['95']:.1f}; arrivals x{res['time_compression']:.4f}",
           ["policy", "GPU util (allocated)", "GPU util (cluster)", "mean JCT h", "mean wait h"],
           [[p, f"{rs[p]['gpu_utilisation']:.3f}", f"{rs[p]['cluster_gpu_utilisation']:.3f}",
             f"{rs[p]['mean_jct_h']:.2f}", f"{rs[p]['mean_wait_h']:.2f}"] for p in POLICIES])
    _table("Trace study: sensitivity to the true need / request ratio (not in the trace)",
           ["need/request median (ratio)", "need log-sd (sigma)", "static util (fraction)",
            "adaptive util (fraction)", "adaptive gain %"],
           [[f"{x['need_median']:.2f}", f"{x['need_sigma']:.2f}", f"{x['static']:.3f}", f"{x['adaptive']:.3f}",
             f"{100 * x['adaptive_gain_over_static']:+.1f}"] for x in res["sensitivity"]])
    g, go, b = res["adaptive_gain_over"], res["oracle_gain_over"], res["sensitive_to"]["band"]
    print(f"trace: adaptive (learned) {100 * g['static']:+.1f}% GPU utilisation over static (the trace's requested "
          f"cores), {100 * g['even']:+.1f}% over even; oracle {100 * go['static']:+.1f}% / {100 * go['even']:+.1f}%; "
          "paper (CODA, ICDCS 2020): +20.8% over static")
    print(f"sensitive to: {res['sensitive_to']['parameter']}: adaptive gain over static "
          f"{100 * b[0]:+.1f}% .. {100 * b[1]:+.1f}%")

    def draw(ax):
        x = np.arange(len(res["sensitivity"]) + 1)
        labels = ["default"] + [f"med {s['need_median']}, sd {s['need_sigma']}" for s in res["sensitivity"]]
        ax.bar(x - 0.2, [rs["static"]["gpu_utilisation"]] + [s["static"] for s in res["sensitivity"]], 0.4,
               label="static (trace request)")
        ax.bar(x + 0.2, [rs["adaptive"]["gpu_utilisation"]] + [s["adaptive"] for s in res["sensitivity"]], 0.4,
               label="adaptive (learned)")
        ax.set_xticks(x, labels, rotation=15, fontsize=7)
        ax.set_ylim(0.5, 1.0)
        ax.set_ylabel("GPU utilisation (allocated GPUs)")
        ax.set_title("CPU allocation on the Alibaba GPU trace 2023 (true need / request varied)", fontsize=9)
        ax.legend(fontsize=8)

    _png(out_dir / "cpualloc_trace.png", draw)
    return res


def bench_cpualloc(out_dir: Path, quick: bool, seed: int = 0, workload: str = "both") -> dict:
    """CPU allocation study: measured loader profile, then even / static / adaptive (learned) / oracle
    on a heterogeneous cluster; JSON + PNG (utilisation, JCT, loader throughput vs cores) + tables.
    ``workload``: ``synthetic`` (that study), ``trace`` (the Alibaba GPU trace 2023 study,
    ``cpualloc_trace.json``/``.png``) or ``both``."""
    from hwcosim.models.errors import UsageError
    from hwcosim.models.systems.jobs.cpualloc import POLICIES, run_study

    if workload not in ("both", "trace", "synthetic"):
        raise UsageError(f"cpualloc: workload must be both, trace or synthetic, not {workload!r}")
    from hwcosim.models.data import DatasetMissing

    trace = None
    if workload == "trace":
        return _bench_cpualloc_trace(out_dir, quick, seed)
    if workload == "both":
        try:
            trace = _bench_cpualloc_trace(out_dir, quick, seed)
        except DatasetMissing as e:
            print(f"trace study skipped: {e}")
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
    if trace is not None:
        res["trace"] = {k: trace[k] for k in ("adaptive_gain_over", "oracle_gain_over", "sensitive_to", "paper")}
    return res


def jobcheck_corpus(out: Path, cfg) -> dict:
    """Run the shipped jobcheck corpus under ``cfg`` (``CheckConfig``): progress on stderr, a table,
    ``jobcheck_corpus.json`` in ``out``; returns the evaluation (``missed``, ``false_positives``, ...)."""
    from hwcosim.models.systems.jobs.jobcheck import evaluate_corpus

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
    return res


def jobcheck_report(out: Path, script: Path, rep, execute: bool, device_memory_gib: float) -> None:
    """Print a jobcheck report ``rep`` of ``script`` and write ``jobcheck_<stem>.json`` into ``out``."""
    from hwcosim.models.systems.jobs.jobcheck import CATEGORIES
    from hwcosim.models.tables import emit

    print(f"jobcheck {script}: " + ("static checks, then the script was EXECUTED in a sandbox (Linux namespaces: "
                                    "the working folder, the script's folder and /tmp private copy-on-write copies "
                                    "discarded at the end, everything else read-only, no network, every process it "
                                    "started killed; CPU, memory, file-size, process-count and wall-time limits)"
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
              f"(device {device_memory_gib:g} GiB)")
    print(f"wrote {out / f'jobcheck_{script.stem}.json'}")


#: entries of the real-failure corpus the quick run checks: one or two per group of the study, failing and
#: healthy, chosen for short scripts (not for their verdicts)
JOBCHECK_REAL_QUICK = ("resume_missing_ckpt", "ckpt_trained", "module_renamed", "module_renamed_fixed",
                       "permission_output_dir", "cpu_oom_whole_dataset", "shape_checkpoint_classes",
                       "shape_latent_transpose_fixed", "key_config_json", "key_config_json_fixed",
                       "syntax_fstring_py35", "corrupt_empty_pickle", "encoding_list_file_fixed",
                       "null_shuffle_result")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}"


def bench_jobcheck_real(out_dir: Path, quick: bool, seed: int = 0, timeout_s: float = 60.0) -> dict:
    """jobcheck on the corpus of scripts reconstructed from public failure reports
    (:mod:`hwcosim.models.systems.jobs.jobcheck_real`): detection and false positives, precision and recall
    per category, the fraction caught weighted by the ICSE 2020 study's frequencies beside its 48.0%;
    ``jobcheck_real.json`` + ``.png``. ``quick`` checks :data:`JOBCHECK_REAL_QUICK` only. ``seed`` is
    unused (the corpus is fixed), kept for the bench signature."""
    from hwcosim.models.systems.jobs.jobcheck import CheckConfig
    from hwcosim.models.systems.jobs.jobcheck_real import PAPER, evaluate

    def progress(k, n, row):
        v = ("caught" if row["detected"] else "MISSED") if row["label"] == "failing" else \
            ("FALSE POSITIVE" if row["false_positive"] else "clean")
        print(f"[{k}/{n}] {row['id']}: {row['category']}, found {','.join(row['found']) or '-'} -> {v} "
              f"({row['seconds']:.1f} s)", file=sys.stderr, flush=True)

    res = evaluate(CheckConfig(timeout_s=timeout_s), ids=list(JOBCHECK_REAL_QUICK) if quick else None,
                   progress=progress)
    sc = res["score"]
    res["quick"] = bool(quick)
    _write_json(out_dir / "jobcheck_real.json", res)
    _table(f"jobcheck on {sc['failing']} failing and {sc['healthy']} healthy scripts reconstructed from public "
           "failure reports, by ICSE 2020 category",
           ["ICSE category", "group", "failing (scripts)", "caught (scripts)", "recall (%)",
            "recall, timing-faithful (%)", "healthy (scripts)", "false positives (scripts)"],
           [[c, v["group"], v["failing"], v["detected"], _pct(v["recall"]), _pct(v["recall_timing_faithful"]),
             v["healthy"], v["false_positives"]] for c, v in sc["per_icse_category"].items()])
    _table("jobcheck categories: reported vs expected (any finding counts)",
           ["jobcheck category", "TP (entries)", "FP (entries)", "FN (entries)", "precision (%)", "recall (%)"],
           [[c, v["tp"], v["fp"], v["fn"], _pct(v["precision"]), _pct(v["recall"])]
            for c, v in sc["per_jobcheck_category"].items()])
    w, wt = sc["weighted"], sc["weighted_timing_faithful"]
    print(f"caught {sc['detected']}/{sc['failing']} failing scripts ({_pct(sc['detection_rate'])}%), right category "
          f"{sc['right_category']}/{sc['failing']}; false positives {sc['false_positives']}/{sc['healthy']} healthy "
          f"scripts; missed {sc['missed']}; false positives {sc['false_positive_ids']}; caught by a warning only "
          f"{sc['caught_by_warning_only']} (run as root here: only the sandbox's read-only mounts refuse the write)")
    print(f"ours: {100 * w['central']:.1f}% of failures caught, weighted by the study's frequencies (band "
          f"{100 * w['band'][0]:.1f}-{100 * w['band'][1]:.1f}%); timing-faithful {100 * wt['central']:.1f}% (band "
          f"{100 * wt['band'][0]:.1f}-{100 * wt['band'][1]:.1f}%); resampling the scripts of each category: "
          f"{100 * sc['weighted_resampled']['p5']:.1f}-{100 * sc['weighted_resampled']['p95']:.1f}% (5th-95th "
          f"percentile); {sc['categories_covered']} of the study's "
          f"{sc['categories_in_study']} categories in the corpus")
    print(f"paper ({PAPER['study']}): {100 * PAPER['execution_environment_share']:.1f}% of {PAPER['failures']:,} "
          f"failures come from the execution environment (the share a pre-flight check aims at), "
          f"{100 * PAPER['dl_specific_share']:.1f}% are deep-learning specific")
    contrib = sorted(w["groups"].items(), key=lambda kv: -kv[1]["contribution"])
    print("sensitive to: the group shares (" + ", ".join(
        f"{g} {100 * v['share']:.1f}% x recall {_pct(v['recall_mean'])}% = {100 * v['contribution']:.1f} points"
        for g, v in contrib) + f"); the split inside each group (not in the abstract): band "
          f"{100 * w['band'][0]:.1f}-{100 * w['band'][1]:.1f}%; the dry run's step budget (failures reported after "
          f"step 2 counted only when caught statically): {100 * wt['central']:.1f}%")

    def draw(ax):
        import numpy as np
        from hwcosim.models.systems.jobs.jobcheck_real import ICSE_GROUPS
        from matplotlib.patches import Patch

        order = {c: k for k, c in enumerate(c for cs in ICSE_GROUPS.values() for c in cs)}
        cats = sorted((c for c, v in sc["per_icse_category"].items() if v["failing"]), key=order.get)
        groups = [sc["per_icse_category"][c]["group"] for c in cats]
        colours = {g: f"C{i}" for i, g in enumerate(ICSE_GROUPS)}
        y = np.arange(len(cats))
        ax.barh(y, [100 * sc["per_icse_category"][c]["recall"] for c in cats], color=[colours[g] for g in groups])
        ax.plot([100 * (sc["per_icse_category"][c]["recall_timing_faithful"] or 0) for c in cats], y, "k|", ms=12,
                label="timing-faithful")
        ax.set_yticks(y, [f"{c} ({sc['per_icse_category'][c]['failing']})" for c in cats], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 105)
        ax.set_xlabel("failing scripts caught (%)")
        handles = [Patch(color=col, label=g) for g, col in colours.items()]
        handles += ax.get_legend_handles_labels()[0]
        ax.set_title(f"jobcheck on real failures: {100 * w['central']:.0f}% weighted (band {100 * w['band'][0]:.0f}-"
                     f"{100 * w['band'][1]:.0f}%) vs the study's 48.0% environment share", fontsize=8)
        ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))

    _png(out_dir / "jobcheck_real.png", draw)
    return res

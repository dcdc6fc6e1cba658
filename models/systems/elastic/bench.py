"""The elastic-training and serving studies: EasyScale, ElasticBatch, GoldMiner, the latency predictor.

Each is ``(out, quick, ...) -> dict``: it runs the study of :mod:`hwcosim.models.systems.elastic`,
writes its JSON + PNG to ``out``, prints its tables and returns the result (``hwcosim easyscale``,
``elasticbatch``, ``goldminer`` and ``hwcosim bench elastic_predictor`` call the same functions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hwcosim.models.benchio import bar_png as _bar_png
from hwcosim.models.benchio import print_table as _table
from hwcosim.models.benchio import write_json as _write_json
from hwcosim.models.errors import UsageError

__all__ = ["run_easyscale", "run_elasticbatch", "run_goldminer", "bench_predictor"]


def _progress():
    from rich.progress import Progress

    return Progress(transient=True)


# -- EasyScale -------------------------------------------------------------------------------------
def run_easyscale(out: Path, quick: bool, seed: int, steps: int) -> dict:
    from hwcosim.models.systems.elastic.easyscale import EasyScaleConfig, EasyScaleTrainer, run_study

    cfg = EasyScaleConfig(seed=seed)
    res = {"config": cfg.__dict__, "steps": steps, "equality": {}}
    with _progress() as prog:
        task = prog.add_task("EasyScale training runs", total=5)
        with EasyScaleTrainer(cfg, physical=None) as t:
            t.train(steps)
            ref, acc = t.params.copy(), t.accuracy()
        prog.advance(task)
        for p in (1, 2, 4):
            with EasyScaleTrainer(cfg, physical=p) as t:
                t.train(steps)
                res["equality"][f"P={p}"] = bool(np.array_equal(t.params, ref))
            prog.advance(task)
        with EasyScaleTrainer(cfg, physical=4) as t:
            a = steps // 3
            t.train(a)
            t.scale(2)
            t.train(a)
            t.scale(3)
            t.train(steps - 2 * a)
            res["equality"]["4->2->3"] = bool(np.array_equal(t.params, ref))
        prog.advance(task)
        task2 = prog.add_task("cluster scheduler sim", total=1)
        study = run_study(quick=quick, seed=seed)
        prog.advance(task2)
    res["train_accuracy"] = acc
    res["cluster"] = study
    _write_json(out / "easyscale.json", res)
    m = study["mean"]
    _bar_png(out / "easyscale.png", ["utilisation", "allocation"],
             {p: [m[p]["utilisation"], m[p]["allocation"]] for p in m}, "fraction",
             "EasyScale vs fixed-size baseline (heterogeneous cluster)")
    _table(f"EasyScale: N=4 ESTs, {steps} steps, params bitwise equal to the inline reference",
           ["placement", "bitwise equal"], [[k, "yes" if v else "NO"] for k, v in res["equality"].items()])
    _table("EasyScale cluster sim (mean over seeds)", ["policy", "utilisation", "util. arrival window",
                                                       "allocation (fraction)", "mean JCT s", "makespan s"],
           [[p, f"{v['utilisation']:.3f}", f"{v['utilisation_window']:.3f}", f"{v['allocation']:.3f}",
             f"{v['mean_jct_s']:.0f}", f"{v['makespan_s']:.0f}"] for p, v in m.items()])
    print(f"utilisation gain {100 * study['utilisation_gain']:+.1f}% over the makespan, "
          f"{100 * study['utilisation_gain_window']:+.1f}% over the arrival window (paper: +62.1%); "
          f"JCT speedup {study['jct_speedup']:.2f}x")
    res["trace"] = _easyscale_trace(out, quick, seed)
    _write_json(out / "easyscale.json", res)
    return res


def _easyscale_trace(out: Path, quick: bool, seed: int) -> dict:
    """EasyScale's utilisation study on the Alibaba GPU trace 2023
    (:func:`~hwcosim.models.systems.elastic.easyscale.run_trace_study`), or ``{"skipped": reason}``."""
    from hwcosim.models.data import DatasetMissing
    from hwcosim.models.systems.elastic.easyscale import run_trace_study

    try:
        tr = run_trace_study(quick=quick, seed=seed)
    except DatasetMissing as e:
        print(f"trace study skipped: {e}")
        return {"skipped": str(e)}
    b, t = tr["base"], tr["trace"]
    _table(f"EasyScale on the Alibaba GPU trace 2023: {t['jobs']} of {t['tasks_in_trace']} whole-GPU tasks "
           f"({100 * t['multi_gpu_share']:.0f}% multi-GPU) on {t['nodes']} nodes "
           f"({', '.join(f'{v} {k}' for k, v in t['gpus_by_model'].items())}), offered load {b['load_reached']:.2f}",
           ["scheduler", "util. arrival window (fraction)", "utilisation (fraction)", "allocation (fraction)",
            "mean JCT s", "mean queueing s", "makespan s"],
           [[p, f"{v['utilisation_window']:.3f}", f"{v['utilisation']:.3f}", f"{v['allocation']:.3f}",
             f"{v['mean_jct_s']:.0f}", f"{v['mean_queue_s']:.0f}", f"{v['makespan_s']:.0f}"]
            for p, v in b["results"].items()])
    g, band = tr["utilisation_gain"], tr["sensitive_to"]["band"]
    print(f"EasyScale on the trace: utilisation over the arrival window {100 * g['fixed']:+.1f}% vs FIFO gangs, "
          f"{100 * g['fixed_backfill']:+.1f}% vs gangs with backfill (paper: +62.1%, idle GPUs of a serving cluster)")
    print(f"sensitive to: {tr['sensitive_to']['parameter']}: vs FIFO gangs {100 * band['fixed'][0]:+.1f}% .. "
          f"{100 * band['fixed'][1]:+.1f}%, vs backfill {100 * band['fixed_backfill'][0]:+.1f}% .. "
          f"{100 * band['fixed_backfill'][1]:+.1f}%")
    _bar_png(out / "easyscale_trace.png", ["util. arrival window", "allocation"],
             {p: [v["utilisation_window"], v["allocation"]] for p, v in b["results"].items()}, "fraction",
             "EasyScale on the Alibaba GPU trace 2023 vs gang scheduling")
    return tr


# -- ElasticBatch ----------------------------------------------------------------------------------
def run_elasticbatch(out: Path, quick: bool, seed: int, gpu: str) -> dict:
    from hwcosim.models.systems.elastic.elasticbatch import run_study

    with _progress() as prog:
        task = prog.add_task("ElasticBatch profiling, planning, serving sim", total=1)
        res = run_study(quick=quick, seed=seed, gpu_name=gpu)
        prog.advance(task)
    _write_json(out / "elasticbatch.json", res)
    modes = ("nomig", "elasticbatch", "oracle")
    _bar_png(out / "elasticbatch.png", [int(r["rate"]) for r in res["runs"]],
             {m: [r[m]["gpus"] for r in res["runs"]] for m in modes}, "GPUs",
             f"ElasticBatch on {res['gpu']}: GPUs needed vs request rate (req/s)")
    rows = []
    for r in res["runs"]:
        for m in modes:
            v = r[m]
            rows.append([int(r["rate"]), m, v["gpus"], v["instances"], f"{100 * v['slo_attainment']:.2f}%",
                         f"{1e3 * v['p99_latency_s']:.1f}", f"{v['utilisation']:.3f}", f"{v['flop_utilisation']:.3f}"])
    _table(f"ElasticBatch on {res['gpu']} ({res['layouts']} valid MIG layouts)",
           ["req/s", "scheduler", "GPUs", "instances", "SLO met %", "p99 ms", "slice util", "FLOP util"], rows)
    p = res["profiling"]
    print(f"profiling: {p['points']} points, {p['time_s']:.1f} s GPU time vs exhaustive {p['exhaustive_points']} "
          f"points, {p['exhaustive_time_s']:.1f} s; predictor mean/max error {100 * p['mean_rel_error']:.1f}%/"
          f"{100 * p['max_rel_error']:.1f}%")
    print(f"in-model GPU saving vs MIG disabled (synthetic traffic, analytical MIG model): "
          f"{100 * res['gpu_saving_vs_nomig']:.0f}% (paper: 50% fewer instances); the predictor's features are "
          "that model's terms, so its in-model error is exact by construction")
    pv = res["predictor_published"]
    _table(f"Latency predictor vs published BERT-Base FP16 latencies ({pv['source']}); fitted on batches "
           f"{pv['fit_batches']} x seq 128/384",
           ["device", "held-out (points)", "mean |error| %", "max |error| %"],
           [[d, v["held_out_points"], f"{100 * v['mean_abs_rel_err']:.1f}", f"{100 * v['max_abs_rel_err']:.1f}"]
            for d, v in pv["devices"].items()])
    c = pv["a100_fit_scaled_to_a30"]
    print(f"A100 fit scaled by SMs (108/56) predicting the A30 table: mean |error| {100 * c['mean_abs_rel_err']:.1f}%, "
          f"max {100 * c['max_abs_rel_err']:.1f}%")
    tr = res["trace"]
    if "skipped" in tr:
        print(f"trace study skipped: {tr['skipped']}")
        return res
    _table(f"MIG planner on the Alibaba GPU trace 2023: {tr['tasks']} of {tr['tasks_in_trace']} GPU-sharing tasks "
           f"({tr['gpu']})", ["share scale", "tasks (count)", "QoS", "MIG off GPUs", "ElasticBatch GPUs", "oracle GPUs",
                              "time-share bound GPUs", "saving vs MIG off %"],
           [[sc, v["tasks"], q, v["nomig"], v["elasticbatch"], v["oracle"], v["timeshare_bound"],
             f"{100 * v['saving_vs_nomig']:.1f}"] for sc, d in tr["by_scale"].items() for q, v in d.items()])
    b = tr["sensitive_to"]["band"]
    print(f"ElasticBatch on the trace: {100 * tr['saving_vs_nomig']:.0f}% fewer GPUs than MIG disabled "
          f"(paper: 50%)")
    print(f"sensitive to: {tr['sensitive_to']['parameter']}: band {100 * b[0]:.0f}% .. {100 * b[1]:.0f}%")
    _bar_png(out / "elasticbatch_trace.png", list(tr["by_scale"]),
             {m: [d["all"][m] for d in tr["by_scale"].values()] for m in ("nomig", "elasticbatch", "oracle",
                                                                         "timeshare_bound")},
             "GPUs", f"ElasticBatch on the Alibaba 2023 sharing tasks vs share scale ({tr['gpu']})")
    return res


# -- GoldMiner -------------------------------------------------------------------------------------
def run_goldminer(out: Path, quick: bool, seed: int) -> dict:
    try:
        from hwcosim.models.systems.elastic.goldminer import run_study
    except ImportError as e:  # pragma: no cover - until the module lands
        raise UsageError(f"GoldMiner is not available: {e}") from e
    with _progress() as prog:
        task = prog.add_task("GoldMiner pipeline + cluster sim", total=1)
        res = run_study(quick=quick, seed=seed)
        prog.advance(task)
    _write_json(out / "goldminer.json", res)
    m = res["mean"]
    _bar_png(out / "goldminer.png", ["GPU util (allocated)", "GPU util (cluster)",
                                                       "job speed (fraction)"],
             {p: [m[p]["gpu_util_allocated"], m[p]["gpu_util_cluster"], m[p]["job_speed_mean"]] for p in m},
             "fraction", "GoldMiner: static vs elastic data workers")
    sp = res["speedup"]
    _table("GoldMiner pipeline (sklearn digits augmentation, this machine)",
           ["samples", "in-process s", "data workers", "pool s", "speedup", "identical"],
           [[sp["samples"], f"{sp['inprocess_s']:.2f}", sp["workers"], f"{sp['pool_s']:.2f}",
             f"{sp['speedup']:.2f}x", sp["identical"]]])
    _table("GoldMiner cluster sim (mean over seeds)",
           ["data workers", "mean JCT s", "makespan s", "GPU util (allocated)", "GPU util (cluster)",
            "job speed (fraction)"],
           [[p, f"{v['mean_jct_s']:.0f}", f"{v['makespan_s']:.0f}", f"{v['gpu_util_allocated']:.3f}",
             f"{v['gpu_util_cluster']:.3f}", f"{v['job_speed_mean']:.2f}"] for p, v in m.items()])
    for line in res["print"]:
        print(line)
    res["trace"] = _goldminer_trace(out, quick, seed)
    _write_json(out / "goldminer.json", res)
    return res


def _goldminer_trace(out: Path, quick: bool, seed: int) -> dict:
    """GoldMiner on the Alibaba GPU trace 2023 (:func:`~hwcosim.models.systems.elastic.goldminer.run_trace_study`),
    or ``{"skipped": reason}`` without a data directory."""
    from hwcosim.models.data import DatasetMissing
    from hwcosim.models.systems.elastic.goldminer import run_trace_study

    try:
        tr = run_trace_study(quick=quick, seed=seed)
    except DatasetMissing as e:
        print(f"trace study skipped: {e}")
        return {"skipped": str(e)}
    pm = tr["pipelines"]
    _table(f"GoldMiner: measured preprocessing CPU per sample (median of {pm['reps']}, load average "
           f"{pm['load_average'][0]:.1f} on {pm['cpus']} CPUs)",
           ["pipeline", "CPU ms/sample", "GPU samples/s (assumed)", "cores/GPU needed"],
           [[k, f"{1e3 * v:.2f}", f"{tr['gpu_samples_per_s'][k]:.0f}", f"{v * tr['gpu_samples_per_s'][k]:.1f}"]
            for k, v in pm["cpu_s_per_sample"].items()])
    b, t = tr["base"], tr["trace"]
    _table(f"GoldMiner on the Alibaba GPU trace 2023: {t['jobs']} of {t['tasks_in_trace']} whole-GPU tasks, "
           f"{t['nodes']} nodes ({t['cluster_gpus']} GPUs, {t['cluster_cores']:.0f} cores), offered load "
           f"{b['load_reached']:.2f}; "
           f"{100 * b['starved_jobs']:.0f}% of jobs need more cores than they requested",
           ["data workers", "mean JCT s", "makespan s", "GPU util (held GPUs)", "GPU util (cluster)",
            "CPU util (fraction)", "CPU held (fraction)"],
           [[p, f"{v['mean_jct_s']:.0f}", f"{v['makespan_s']:.0f}", f"{v['gpu_util_allocated']:.3f}",
             f"{v['gpu_util']:.3f}", f"{v['cpu_util']:.3f}", f"{v['cpu_held']:.3f}"]
            for p, v in b["results"].items()])
    st = tr["sensitive_to"]
    print(f"GoldMiner on the trace: JCT static/elastic {tr['jct_ratio']:.2f}x (paper: up to 2.5x), GPU utilisation "
          f"of held GPUs {tr['gpu_util_ratio']:.2f}x (paper: up to 2.1x), throughput {b['throughput_ratio']:.2f}x")
    print(f"sensitive to: {st['parameter']}: JCT band {st['band'][0]:.2f}x .. {st['band'][1]:.2f}x, GPU utilisation "
          f"band {st['gpu_util_band'][0]:.2f}x .. {st['gpu_util_band'][1]:.2f}x")
    _bar_png(out / "goldminer_trace.png", ["GPU util (held)", "CPU util", "CPU held"],
             {p: [v["gpu_util_allocated"], v["cpu_util"], v["cpu_held"]] for p, v in b["results"].items()},
             "fraction", "GoldMiner on the Alibaba GPU trace 2023: static (requested cores) vs elastic data workers")
    return tr


def bench_predictor(out_dir, quick: bool) -> dict:
    """``hwcosim bench elastic_predictor``: JSON + PNG of measured vs predicted latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png
    from hwcosim.models.systems.elastic.measured import run_study

    res = run_study(quick=quick)
    _write_json(out_dir / "elastic_predictor.json", res)
    fig, axes = plt.subplots(1, len(res["devices"]), figsize=(5 * len(res["devices"]), 4))
    for ax, d in zip(np.atleast_1d(axes), res["devices"]):
        for s in sorted({r["size"] for r in d["rows"]}):
            rs = [r for r in d["rows"] if r["size"] == s]
            b = [r["batch"] for r in rs]
            line, = ax.plot(b, [r["measured_s"] * 1e3 for r in rs], ".", ms=4, label=f"measured, size {s}")
            ax.plot(b, [r["predicted_s"] * 1e3 for r in rs], "-", color=line.get_color(), lw=1)
        e = d["abs_rel_err"]
        ax.set_title(f"{d['device']}: held-out |error| median {100 * e['median']:.0f}%, p90 {100 * e['p90']:.0f}%",
                     fontsize=9)
        ax.set_xlabel("batch")
        ax.set_ylabel("latency (ms; lines: predictor)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, out_dir / "elastic_predictor.png")
    for d in res["devices"]:
        e = d["abs_rel_err"]
        print(f"{d['device']}: fitted on {len(d['fit_points'])} points, {d['held_out_points']} held-out points: "
              f"|relative error| mean {e['mean']:.1%}, median {e['median']:.1%}, p90 {e['p90']:.1%}, "
              f"max {e['max']:.1%}")
    print(f"load average {res['load_average']} on {res['cpus']} CPUs (shared machine)")
    return res

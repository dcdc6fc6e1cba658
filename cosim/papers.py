"""Ours beside the paper, one row per seed system: ``hwcosim papers`` and ``docs/papers.md``.

Each of the 21 seed systems has one :class:`System` here: its paper, the figure the paper states (from
``/work/shared/SPECS.md`` or the paper, cited), the study that measures ours, the study's own source files
and a ``headline`` adapter. The adapter **runs** the study (its normal size or a stated reduced one, each
well under a minute here) through the study's public functions and picks the headline figure, what the
figure is measured on (real data or synthetic), the clock it assumes (a throughput is quoted only at a
nextpnr Fmax read from ``docs/boards/*.json``, or marked assumed) and the band the study measured over
the parameter the figure is most sensitive to. Nothing here types a figure of ours.

:func:`refresh` writes ``docs/papers/<system>.json`` per system (atomically; one failing system keeps its
old JSON) with ``sources``: the sha256 of the study's own source files (listed per system) and of every
file it opened in the data directory. :func:`rows` reads the JSON back, :func:`stale` names the systems
whose sources changed since, :func:`render_markdown` is ``docs/papers.md`` and :func:`papers_table` the
terminal table. ``tests/flow/test_papers.py`` fails when a JSON is missing or stale, or the page differs
from the rendering.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["System", "SYSTEMS", "ROOT", "PAGE", "JSON_DIR", "refresh", "rows", "stale", "stale_systems",
           "render_markdown", "write_page", "papers_table", "papers", "marks", "sha256", "source_hashes", "system",
           "load"]

#: the checkout (``cosim/`` is one of its folders)
ROOT = Path(__file__).resolve().parents[1]
JSON_DIR = ROOT / "docs" / "papers"
PAGE = ROOT / "docs" / "papers.md"
#: JSON layout version
VERSION = 1


@dataclass(frozen=True)
class System:
    """One seed system: its paper, the paper's figure and the adapter that measures ours."""

    key: str  #: file name of its JSON (``docs/papers/<key>.json``) and the name ``--refresh`` takes
    name: str  #: as the table shows it
    paper: str  #: citation
    metric: str  #: what the headline figure is
    unit: str
    paper_figure: float | str  #: the paper's figure (a number in ``unit``, or text when it gives none)
    paper_source: str  #: where the paper's figure is from
    study: str  #: the command that runs the full study
    sources: tuple[str, ...]  #: the study's own source files, relative to the checkout
    headline: Callable[[Path], dict] = field(repr=False)  #: out_dir -> the measured part of the record


# ---------------------------------------------------------------------------------------------------------
# helpers of the adapters

def _quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with its tables and progress kept off the terminal (the refresh prints one
    line per system)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        return fn(*args, **kwargs)


def _band(lo: float, hi: float, scale: float = 1.0, fmt: str = "{:+.1f}") -> str:
    a, b = sorted((lo * scale, hi * scale))
    return f"{fmt.format(a)} .. {fmt.format(b)}"


def _rec(ours: float, workload: str, sensitive_to: str, clock: str = "n/a", size: str = "", **extra) -> dict:
    return {"ours": float(ours), "workload": workload, "clock": clock, "sensitive_to": sensitive_to, "size": size,
            **extra}


def _rel(path) -> str:
    """``path`` relative to the checkout when it is inside it."""
    p = Path(path).resolve()
    return p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else p.as_posix()


# ---------------------------------------------------------------------------------------------------------
# the adapters, one per system

def _bbs(out: Path) -> dict:
    from hwcosim.cosim.designs.bbs.lstm_bench import gops_1024

    g = gops_1024()
    meas = g["measured"]
    if "effective_gops_at_fmax" not in meas:
        raise UsageError(f"BBS: {meas.get('note')}")
    band = [gops_1024(sparsity=s)["measured"]["effective_gops_at_fmax"] for s in (0.75, 0.875, 0.9375)]
    return _rec(meas["effective_gops_at_fmax"],
                "synthetic: 1024-hidden LSTM layer, 87.5% bank-balanced sparsity, cycle model exact against the RTL",
                f"weight sparsity 0.75-0.9375 (dense-equivalent GOPS): {min(band):.1f} .. {max(band):.1f} GOPS; "
                f"scales with P x B = {g['multipliers']} multipliers (the paper needs ~"
                f"{g['paper_sparse_mac_per_cycle']:.0f} nonzero MAC/cycle)",
                clock=f"assumed: Fmax {meas['fmax_mhz']:.1f} MHz of the registered bbs-lstm layer on {meas['part']} "
                      f"(docs/boards/results.json); this {g['pes']}x{g['banks']} engine itself does not fit that part",
                size="the paper's layer size (1024 hidden), P = B = 16")


def _accuracy_study(out: Path) -> dict:
    """The pattern accuracy study (quick: 0.5/0.75/0.9, short fine-tuning), run once per refresh."""
    from hwcosim.pruning.study import run_accuracy

    key = "accuracy"
    if key not in _SHARED:
        _SHARED[key] = _quiet(run_accuracy, quick=True, patterns=["unstructured", "balanced", "fss"],
                              cache_dir=str(ROOT / "build" / "cache"), output=str(out / "accuracy"))
    return _SHARED[key]


#: the sparsity the accuracy headlines are read at (the study sweeps 0.5, 0.75, 0.9; all are in the band)
HEADLINE_SPARSITY = 0.75


def _pattern_gap(out: Path, label: str, what: str) -> dict:
    res = _accuracy_study(out)
    pts = {(p["label"], p["target"]): p for p in res["points"] if "skipped" not in p}
    gaps, acc = {}, {}
    for (lab, t), p in pts.items():
        u = pts.get(("unstructured", t))
        if lab == label and u is not None and "accuracy_finetuned" in p:
            gaps[t] = 100 * (p["accuracy_finetuned"] - u["accuracy_finetuned"])
            acc[str(t)] = {label: p["accuracy_finetuned"], "unstructured": u["accuracy_finetuned"]}
    if HEADLINE_SPARSITY not in gaps:
        raise UsageError(f"{label}: the accuracy study gave no fine-tuned point at {HEADLINE_SPARSITY} beside "
                         "unstructured")
    return _rec(gaps[HEADLINE_SPARSITY], f"real: scikit-learn digits, LSTM H={res['model']['hidden']} read row by "
                f"row ({what})",
                "target sparsity: " + ", ".join(f"{t:g}: {v:+.1f}" for t, v in sorted(gaps.items()))
                + " points (one seed); fine-tuned accuracy " + ", ".join(
                    f"at {t}: {a[label]:.3f} vs unstructured {a['unstructured']:.3f}" for t, a in acc.items()),
                size=f"quick accuracy study: sparsities {sorted(gaps)}, short fine-tuning; headline at "
                     f"{HEADLINE_SPARSITY:g}", accuracy_finetuned=acc, dense_accuracy=res["dense_accuracy"])


def _balanced(out: Path) -> dict:
    return _pattern_gap(out, "balanced-24", "balanced blocks of 24 vs unstructured, fine-tuned")


def _fss(out: Path) -> dict:
    return _pattern_gap(out, "fss-2x8", "FSS 2x8 regions vs unstructured, fine-tuned")


def _seernet(out: Path) -> dict:
    from hwcosim.pruning.seernet_bench import seernet_timing

    res = _quiet(seernet_timing, False, 0, [4], 2, False)
    tr = res["trained"]  # headline: the CNN trained here, its ResNet-18-sized layers, real activations
    tot = next(t for t in tr["totals"] if t["bits"] == 4)
    acc4 = next(p for p in tr["accuracy"]["per_bits"] if p["bits"] == 4)
    by_p: dict[float, list[float]] = {}
    for b in res["band"]:  # per layer and fraction of positive outputs: the same kernel / (predictor + sparse)
        acc = by_p.setdefault(b["positive"], [0.0, 0.0])
        acc[0] += b["dense_same_s"]
        acc[1] += b["per_bits"][0]["seer_s"]
    band = {p: a / c for p, (a, c) in sorted(by_p.items())}
    rnd = next(t for t in res["totals"] if t["bits"] == 4 and not t["pool"])
    return _rec(tot["speedup_vs_same"],
                f"real: {tr['note']}; layers {tr['timed_layers']} with test-image activations, batch 1, 1 thread",
                "fraction of outputs computed (trained layers: "
                + ", ".join(f"conv{li} {v:.2f}" for li, v in tot["kept_per_layer"].items())
                + "); random ResNet-18-shaped layers over the fraction of positive pre-activations: "
                + ", ".join(f"{p:g}: {v:.2f}x" for p, v in band.items()),
                size="k = 4 only, 2 timed rounds (the full study: k = 1..8, 7 rounds)",
                speedup_vs_blas=tot["speedup_vs_blas"], kept=tot["kept"],
                accuracy_change_k4=acc4["accuracy_change"], dense_accuracy=tr["accuracy"]["dense_accuracy"],
                random_layers_speedup_vs_same=rnd["speedup_vs_same"], load_average=list(os.getloadavg()))


def _kvdirect(out: Path) -> dict:
    from hwcosim.models.kvdirect.mops import mops_report

    res = _quiet(mops_report, str(ROOT / "docs" / "boards" / "results.json"), pipeline_ops=2000,
                 stream_ops=20000, store_ops=1000, seed=0, n_keys=None)
    get, put = (next(r for r in res["rows"] if r["mix"] == m) for m in ("GET", "PUT"))
    lo, hi = get["mops_band_memory_latency"]
    return _rec(get["mops"], "synthetic: YCSB-like Zipf 0.99 key stream, 10 B KVs, GET only",
                f"{res['sensitivity']}: GET {lo:.0f} .. {hi:.0f} Mops; binding limit: {get['bound']} "
                f"({get['pipeline_limit']})",
                clock=f"measured Fmax {res['fmax_mhz']:.1f} MHz, {res['build']['part']} (docs/boards/results.json, "
                      "kvdirect-pipeline)",
                size="2,000 ops through the cycle model (the full run: 20,000)",
                also=[{"metric": "PUT throughput at the measured Fmax", "ours": put["mops"], "paper": put["paper_mops"],
                       "unit": "Mops", "sensitive_to": "memory round trip: PUT "
                       f"{put['mops_band_memory_latency'][0]:.0f} .. {put['mops_band_memory_latency'][1]:.0f} Mops; "
                       f"binding limit: {put['pipeline_limit']}"}])


def _melo(out: Path) -> dict:
    from hwcosim.models.melo.study import run_study

    res = _quiet(run_study, quick=True, seed=0)
    h = res["headline"]
    tp = h["tput_ratio_melo_over_gbn"]
    best = max(((n, loss, v) for n, d in tp.items() for loss, v in d.items()), key=lambda t: t[2])
    one = tp.get("n=1", {})
    return _rec(h["max_tput_ratio"], "synthetic: backlogged flows, i.i.d. packet loss, packet-level simulator",
                f"loss ratio and connections: {best[0]} at {100 * float(best[1]):g}% loss gives the maximum; one "
                "connection " + ", ".join(f"{100 * float(k):g}%: {v:.2f}x" for k, v in one.items())
                + f"; with {max(tp, key=lambda n: int(n[2:]))}: at most "
                  f"{max(tp[max(tp, key=lambda n: int(n[2:]))].values()):.2f}x",
                size="quick study (shorter runs)",
                also=[{"metric": "p99 FCT go-back-N / MELO (max over loss, workload)", "ours": h["max_p99_fct_ratio"],
                       "paper": 3.11, "unit": "x"}])


def _beamraster(out: Path) -> dict:
    from hwcosim.models.beamraster.realtime import load_attempts, realtime_report

    folder = ROOT / "docs" / "boards"
    shipped = folder / "beamraster"
    res = _quiet(realtime_report, [str(folder / "results.json"), *map(str, sorted(shipped.glob("*.json")))],
                 attempts=load_attempts(sorted(map(str, shipped.glob("attempts/*")))))
    band = {r["K"]: r["realtime_fraction"] for r in res["users_band"]}
    b, c, eb = res["best"], res["cell"], res["ecp5_bound"]
    return _rec(100 * b["realtime_fraction"],
                f"synthetic: LTE 20 MHz cell, {c['antennas']} antennas, {c['users']} users, {c['subcarriers']} "
                "subcarriers x 14 k symbols/s",
                "users K (the paper's is not confirmed; the fraction scales as 1/K): "
                + ", ".join(f"K={k}: {100 * v:.0f}%" for k, v in sorted(band.items()))
                + f"; all {eb['mults']} multipliers of the part busy: at most {100 * eb['realtime_fraction_max']:.0f}%",
                clock=f"measured Fmax {b['fmax_mhz']:.1f} MHz, {b['part']} ({_rel(b['source'])}, "
                      f"{b['lanes']} lanes)",
                size="every shipped build; the best K = 8 build", lanes=b["lanes"],
                real_multipliers=b["real_multipliers"])


def _c4(out: Path) -> dict:
    from hwcosim.models.systems.cluster.bench import bench_c4p
    from hwcosim.models.systems.reliability.bench import bench_c4d

    d = _quiet(bench_c4d, out, True)
    cv = d["curves"]
    p = _quiet(bench_c4p, out, True)["fair"]
    lo, hi = p["band"]["comm_reduction_vs_nccl"]
    return _rec(100 * cv["base"], "synthetic: simulated fault stream at Llama 3's fault rate (30 days)",
                f"checkpoint interval, restart, timeout, slow-fault duration, fault rate: "
                f"{_band(*cv['band'], 100)}%", size="quick (30 simulated days, one seed)",
                also=[{"metric": "C4P communication cost reduction vs ECMP with NCCL port binding, TP/PP + DP mix",
                       "ours": 100 * p["comm_reduction_vs_nccl"], "paper": 100 * p["paper"]["communication_cost_"
                                                                                            "reduction"],
                       "unit": "%", "sensitive_to": f"{p['band']['parameters']}: {_band(lo, hi, 100)}%",
                       "workload": f"synthetic: jobs on {p['topology']['name']}"}])


def _arnold(out: Path) -> dict:
    """The study's end-to-end headline (:func:`~hwcosim.models.systems.cluster.arnold.run_calibrated_congestion`)
    for its 768-GPU job, reduced: one fragmentation draw, Arnold and best-fit only, three calibration points and
    one repetition (the full study: two draws, random-fit too, four points, two repetitions, alpha 0.8 too)."""
    from hwcosim.models.systems.cluster.arnold import run_calibrated_congestion

    c = _quiet(run_calibrated_congestion, "medium", draws=1, policies=("arnold", "best-fit"), calib_pairs=(30, 60, 90),
               compute_values=(0.25, 0.5, 1.0), alphas=(0.5, 0.2), calib_reps=1, time_limit=10.0)
    return _rec(100 * c["gain"]["best-fit"],
                f"real: Lingjun 2023 topology; synthetic: a {c['gpus']}-GPU job, background traffic calibrated to "
                "the paper's 17% / 70% slowdowns",
                f"{c['band']['parameters']}: {_band(*c['band']['gain_over_best_fit'], 100)}%",
                size=f"{c['gpus']} GPUs, one fragmentation draw, three calibration points",
                compute_s=c["headline_compute_s"])


def _mycroft(out: Path) -> dict:
    from hwcosim.models.systems.reliability.bench import bench_mycroft

    r = _quiet(bench_mycroft, out, True)
    sw = r["sensitivity_window_m"]
    return _rec(100 * r["frac_detect_15s"], f"synthetic: {len(r['trials'])} injected faults on the chunk-level "
                "transport",
                "failure window (x healthy collective time) " + ", ".join(f"{k}x: {100 * v:.0f}%" for k, v in
                                                                           sw.items()),
                size="quick", also=[{"metric": "root cause within 20 s", "ours": 100 * r["frac_rca_20s"],
                                      "paper": 100 * r["paper"]["rca_20s"], "unit": "% of faults"}])


def _byterobust(out: Path) -> dict:
    """The closed loop (faults played on the slice: detection delays and verdicts measured on the transport's
    telemetry) at Llama 3's fault rate; the event model (delays as inputs) beside it."""
    from hwcosim.models.systems.reliability.bench import bench_byterobust
    from hwcosim.models.systems.reliability.closedloop import run_study

    loop = _quiet(run_study, quick=True, seed=0)
    sm, cv = loop["summary"], loop["curve"]
    ev = _quiet(bench_byterobust, out, True)["curves"]
    lo, hi = cv["band"]["byterobust"]
    r97 = (cv.get("rate_at_97") or {}).get("byterobust")
    return _rec(100 * sm["byterobust"]["ettr_mean"],
                f"synthetic: a {loop['params']['n_gpus']:,}-GPU job for {loop['params']['days']:g} days at Llama 3's "
                "fault rate, each fault played on a simulated slice (closed loop)",
                f"warm standbys, checkpoint interval and the NaN notice time: {_band(lo, hi, 100, '{:.1f}')}%; the "
                f"fault rate: 97% holds up to {r97:.2g} faults per GPU-day (the Acme clusters' real "
                "rates, user errors included, are far above it)" if r97 else
                f"warm standbys, checkpoint interval and the NaN notice time: {_band(lo, hi, 100, '{:.1f}')}%",
                size="quick: one 7-day run",
                also=[{"metric": "ETTR requeue-everything (closed loop)", "ours": 100 * sm["requeue"]["ettr_mean"],
                       "paper": "-", "unit": "%"},
                      {"metric": "ETTR ByteRobust, event model (detection delays as inputs)",
                       "ours": 100 * ev["base"]["byterobust"], "paper": 97, "unit": "%"}])


def _crux(out: Path) -> dict:
    from hwcosim.models.systems.cluster.bench import bench_crux

    r = _quiet(bench_crux, out, True)
    b = r["band"]
    return _rec(100 * r["crux_gain_over"]["ecmp"], "synthetic: jobs on a 2:1 Clos",
                f"{b['parameters']}: priority effect {_band(*b['priority_effect'], 100)}%, path effect "
                f"{_band(*b['path_effect'], 100)}%", size="quick",
                path_effect=r["path_effect"], priority_effect=r["priority_effect"]["crux-paths"])


def _elasticbatch(out: Path) -> dict:
    from hwcosim.models.systems.elastic.bench import run_elasticbatch

    tr = _quiet(run_elasticbatch, out, True, 0, "A100-40GB")["trace"]
    if "skipped" in tr:
        raise UsageError(f"ElasticBatch trace study skipped: {tr['skipped']}")
    s = tr["sensitive_to"]
    return _rec(100 * tr["saving_vs_nomig"], f"real: Alibaba GPU trace 2023, {tr['tasks']} GPU-sharing tasks",
                f"{s['parameter']}: {_band(*s['band'], 100, '{:.0f}')}%", size="quick")


def _easyscale(out: Path) -> dict:
    from hwcosim.models.systems.elastic.easyscale import run_trace_study

    tr = _quiet(run_trace_study, quick=False, seed=0)
    g, band, t = tr["utilisation_gain"], tr["sensitive_to"]["band"], tr["trace"]
    return _rec(100 * g["fixed"], f"real: Alibaba GPU trace 2023, {t['jobs']} training tasks on {t['nodes']} of its "
                "nodes (arrival order and gaps kept, compressed to load 0.9; GPU speeds per model assumed)",
                f"{tr['sensitive_to']['parameter']}: {_band(*band['fixed'], 100)}% over FIFO gangs, "
                f"{_band(*band['fixed_backfill'], 100)}% over gangs with backfill (the stronger baseline, "
                f"{100 * g['fixed_backfill']:+.1f}% here)", size="5% of the trace's tasks",
                also=[{"metric": "utilisation gain over gangs with backfill", "ours": 100 * g["fixed_backfill"],
                       "paper": 62.1, "unit": "%"}])


def _goldminer(out: Path) -> dict:
    from hwcosim.models.systems.elastic.goldminer import run_trace_study

    tr = _quiet(run_trace_study, quick=True, seed=0)
    st, t = tr["sensitive_to"], tr["trace"]
    return _rec(tr["jct_ratio"], f"real: Alibaba GPU trace 2023, {t['jobs']} whole-GPU tasks; preprocessing CPU "
                "cost measured here, GPU samples/s assumed",
                f"{st['parameter']}: {st['band'][0]:.2f} .. {st['band'][1]:.2f}x", size="quick (1% of the trace)",
                also=[{"metric": "GPU utilisation of held GPUs, elastic / static", "ours": tr["gpu_util_ratio"],
                       "paper": tr["paper"]["gpu_util"], "unit": "x"}])


def _cognn(out: Path) -> dict:
    from hwcosim.models.systems.jobs.cognn import run_trace_study

    r = _quiet(run_trace_study, quick=True, seed=0)
    g, band = r["gains"], r["sensitive_to"]["band"]
    return _rec(100 * g["jct_vs_sequential"], f"synthetic: {r['tasks']} GNN training jobs arriving at the real "
                "Alibaba GPU trace 2023's GPU-sharing tasks' creation times, co-location measured with real GNN "
                "processes on this CPU",
                f"{r['sensitive_to']['parameter']}: {_band(*band['jct_vs_sequential'], 100)}% vs sequential; "
                f"vs shortest-first sequential (reordering alone) {100 * g['jct_vs_sjf']:+.1f}%, vs MPS-like "
                f"{100 * g['jct_vs_mps']:+.1f}%", size="quick (60 tasks)", policy=g["best_policy"],
                also=[{"metric": "mean JCT cut vs an MPS-like baseline", "ours": 100 * g["jct_vs_mps"],
                       "paper": "shorter (no number)", "unit": "%"}])


def _jobcheck(out: Path) -> dict:
    from hwcosim.models.systems.jobs.bench import bench_jobcheck_real

    r = _quiet(bench_jobcheck_real, out, False)
    sc = r["score"]
    w, wt = sc["weighted"], sc["weighted_timing_faithful"]
    return _rec(100 * w["central"], f"real: {sc['failing']} failing and {sc['healthy']} healthy scripts reconstructed "
                "from public failure reports (models/systems/jobs/corpus_real)",
                f"the weights inside each failure group: {_band(*w['band'], 100, '{:.1f}')}%; counting a failure the "
                f"real job reports after the dry run's steps only when the static pass caught it: "
                f"{100 * wt['central']:.1f}% ({_band(*wt['band'], 100, '{:.1f}')}%); false positives "
                f"{sc['false_positives']} of {sc['healthy']} healthy scripts",
                size="the whole corpus, static checks and the sandboxed dry run",
                missed=sc["missed"], false_positive_ids=sc["false_positive_ids"])


def _cpualloc(out: Path) -> dict:
    from hwcosim.models.systems.jobs.bench import bench_cpualloc

    r = _quiet(bench_cpualloc, out, True, workload="trace")
    tr = r.get("trace", r)
    s = tr["sensitive_to"]
    return _rec(100 * tr["adaptive_gain_over"]["static"],
                "real: Alibaba GPU trace 2023 whole-GPU tasks (true CPU need = request x an assumed factor)",
                f"{s['parameter']}: {_band(*s['band'], 100)}%", size="quick")


def _tux2(out: Path) -> dict:
    from hwcosim.models.systems.graph.tux2_algos import study

    r = _quiet(study, quick=True, seed=0, threads=False)
    sp = {(a, s): v["sim_time_speedup_vs_bsp"] for a, d in r["algos"].items() for s, v in d["runs"].items()
          if s != "0"}
    lr = r["algos"]["lr"]
    return _rec(sp[("lr", "2")], f"real: scikit-learn digits ({lr['data']['edges']} edges), logistic regression; "
                "time of the simulated worker model",
                "staleness s = 1..4 and the algorithm (MF, LR, LDA): " + ", ".join(
                    f"{a} {min(v for (b, _), v in sp.items() if b == a):.2f} .. "
                    f"{max(v for (b, _), v in sp.items() if b == a):.2f}x" for a in r["algos"]),
                size="quick, simulated worker model only (the bench also measures worker processes)",
                code_lines=r["line_counts"], also=_tux2_vs_gas())


def _tux2_vs_gas() -> list[dict]:
    """TuX2 (best staleness) against the same programs as GAS vertex programs, time to a common target loss,
    straggler step costs from a real PAI job (simulated executor: deterministic)."""
    from hwcosim.models.systems.graph.gas import gas_vs_tux2

    g = _quiet(gas_vs_tux2, quick=True, seed=0)
    return [{"metric": f"{a.upper()} time to target loss, GAS (PowerGraph model) / TuX2 best staleness "
                       "(simulated, PAI job 1 stragglers)", "ours": g["algos"][a]["runs"]["best_speedup_vs_gas"],
             "paper": "~10x vs PowerGraph/PowerLyra (abstract)", "unit": "x"} for a in ("mf", "lr")]


#: GraM's PageRank: one iteration over > 1 T edges in 140 s on 64 servers of 16 cores (SPECS.md)
GRAM_PAPER = {"edges": 1e12, "seconds": 140.0, "cores": 1024}


def _gram(out: Path) -> dict:
    from hwcosim.models.systems.graph.bench import gram_scaling_study

    res = _quiet(gram_scaling_study, False, 0, (1, 2), 18, 17, 10, 3)
    h, top = res["headline"], res["strong"][-1]
    lo, hi = h["edges_per_s_per_core_band"]
    return _rec(h["edges_per_s_per_core"] / 1e6, f"synthetic: Graph500 R-MAT scale {top['scale']} "
                f"({top['m'] / 1e6:.1f} M edges), PageRank on {top['workers']} Dask worker processes (GraM scale-out)",
                f"host load over the repeats: {lo / 1e6:.1f} .. {hi / 1e6:.1f} M edges/s/core; edges per core "
                f"({top['m'] * 1e-6 / top['workers']:.1f} M here vs ~1,000 M in the paper); speedup over 1 worker "
                f"{h['speedup_vs_1_worker']:.2f}x, {h['ratio_gram_to_compiled']:.2f}x the in-process compiled engine; "
                f"bytes per superstep {h['bytes_per_superstep'] / 1e6:.2f} MB = the cut "
                f"({h['cut_bytes_per_superstep'] / 1e6:.2f} MB)",
                size="strong scaling at R-MAT scale 18 on 1 and 2 workers, 10 iterations, 3 repeats (the bench: "
                "scale 20 on 1, 2, 4 workers)", host_load_avg_1m=res.get("load_avg_1m_end"))


def _gnn(out: Path) -> dict:
    """The rewrites against the fused SpMM baseline (:func:`~hwcosim.models.systems.graph.gnn.fused_study`'s
    comparison) on its main graph only, R-MAT scale 16 (1 M edges), 64 -> 16 features, one BLAS thread, the
    median of 3 interleaved runs: the full study adds scale 17, the width and density bands and all threads
    (minutes)."""
    import numpy as np
    from hwcosim.models.systems.graph.gnn import MODELS, GraphContext, evaluate, fused_baseline, rewrite
    from hwcosim.models.systems.graph.graph import RMATParams, rmat
    from threadpoolctl import threadpool_limits

    gr = rmat(RMATParams(scale=16, edge_factor=16, seed=0), weights=False)
    ctx = GraphContext(gr)
    x = np.random.default_rng(0).standard_normal((gr.n, 64))
    ratio, agree = {}, {}
    with threadpool_limits(1):
        for model in ("gcn", "sage", "gin"):
            orig = MODELS[model](x, 16, seed=0)
            new = rewrite(orig, ctx)
            impls = {"rewrite": lambda g=new: evaluate(g, ctx), "fused": lambda g=orig: fused_baseline(g, ctx)}
            ys = {k: f()[0] for k, f in impls.items()}  # warm-up (the CSR cache) and the equality check
            agree[model] = bool(np.allclose(ys["rewrite"], ys["fused"], rtol=1e-9,
                                            atol=1e-9 * float(np.abs(ys["fused"]).max())))
            t = {k: [] for k in impls}
            for r in range(3):
                for k in (("rewrite", "fused") if r % 2 == 0 else ("fused", "rewrite")):
                    t[k].append(impls[k]()[1]["seconds"])
            ratio[model] = float(np.median(t["fused"]) / np.median(t["rewrite"]))
    if not all(agree.values()):
        raise UsageError(f"GNN rewrite and fused baseline disagree: {agree}")
    return _rec(ratio["gcn"], f"synthetic: Graph500 R-MAT scale 16 ({ctx.e / 1e6:.1f} M edges), random features "
                "64 -> 16, 1 thread",
                "the model: " + ", ".join(f"{m.upper()} {v:.2f}x" for m, v in ratio.items())
                + "; BLAS threads, feature width and density not swept at this size (the full bench does)",
                size="R-MAT scale 16 only, 1 BLAS thread, median of 3 interleaved runs (the full bench: scales 16-17, "
                     "width and density bands, all threads, 5 runs)", speedup_vs_fused=ratio,
                load_average=list(os.getloadavg()))


#: results shared by several adapters within one refresh (the accuracy study serves two systems)
_SHARED: dict[str, dict] = {}


# ---------------------------------------------------------------------------------------------------------
# the 21 systems

_CL = "models/systems/cluster/"
_RL = "models/systems/reliability/"
_EL = "models/systems/elastic/"
_JB = "models/systems/jobs/"
_GR = "models/systems/graph/"
_ACC = ("pruning/study.py", "pruning/schedule.py", "pruning/base.py", "pruning/recipes.py", "models/nn/lstm.py",
        "models/nn/train.py")

SYSTEMS: tuple[System, ...] = (
    System("bbs", "BBS", "Cao et al., Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity, "
           "FPGA 2019",
           "effective (dense-equivalent) throughput, batch 1, 1024-hidden LSTM", "GOPS", 750.9,
           "SPECS.md: 750.9 GOPS at batch 1 on an Arria 10 (200 MHz)", "hwcosim bench --only bbs_lstm",
           ("cosim/designs/bbs/lstm_bench.py", "models/bbs/lstm.py", "cosim/flow/fmax.py", "docs/boards/results.json"),
           _bbs),
    System("balanced-sparsity", "Balanced Sparsity", "Yao, Cao, Xiao, Zhang, Nie, Balanced Sparsity for Efficient DNN "
           "Inference on GPU, AAAI 2019", "accuracy, balanced blocks minus unstructured, same sparsity, fine-tuned",
           "points", "equal to unstructured", "SPECS.md: accuracy equal to unstructured", "hwcosim study accuracy",
           (*_ACC, "pruning/patterns/balanced.py"), _balanced),
    System("fss", "FSS", "Zhang, Cao, Dai et al., Fine-Grained Structured Sparse Computing for FPGA-Based AI "
           "Inference, "
           "IEEE TCAD 44(7), 2025", "accuracy, FSS regions minus unstructured, same sparsity, fine-tuned", "points",
           "no figure retrieved", "SPECS.md gives no number; the search corpora hold none", "hwcosim study accuracy",
           (*_ACC, "pruning/patterns/fss.py"), _fss),
    System("seernet", "SeerNet", "Cao, Ma, Xiao et al., SeerNet: Predicting CNN Feature-Map Sparsity through Low-Bit "
           "Quantization, CVPR 2019", "wall-clock speedup, k = 4 predictor + sparse conv vs the same kernel on every "
           "output, CNN trained here (digits at 56x56)", "x",
           "no speedup figure retrieved (abstract: negligible accuracy drop)",
           "CVPR 2019 abstract (CVF open access); no table reachable", "hwcosim study seernet-timing",
           ("pruning/seernet_bench.py", "pruning/seernet_kernels.py", "pruning/seernet.py", "pruning/recipes.py"),
           _seernet),
    System("kv-direct", "KV-Direct", "Li, Ruan, Xiao et al., KV-Direct: High-Performance In-Memory Key-Value Store "
           "with "
           "Programmable NIC, SOSP 2017", "GET throughput of the RTL pipeline at its measured Fmax", "Mops", 180.0,
           "SPECS.md: 1 NIC GET 180 / PUT 114 Mops (YCSB, Zipf 0.99, 10 B KVs)", "hwcosim kvdirect mops",
           ("models/kvdirect/mops.py", "models/kvdirect/rtl_model.py", "models/kvdirect/perf.py",
            "models/kvdirect/workload.py", "models/kvdirect/cycles.py", "models/kvdirect/store.py",
            "docs/boards/results.json"), _kvdirect),
    System("melo", "MELO", "Lu, Chen, Ruan et al., Memory Efficient Loss Recovery for Hardware-based Transport in "
           "Datacenter, APNet 2017", "goodput MELO / go-back-N, maximum over loss ratio and connections", "x", 14.02,
           "SPECS.md: up to 14.02x throughput vs go-back-N", "hwcosim melo study",
           ("models/melo/study.py", "models/melo/sim.py", "models/melo/workloads.py"), _melo),
    System("beamraster", "BeamRaster", "Meng et al., BeamRaster: A Practical Fast Massive MU-MIMO System With "
           "Pre-Computed Precoders, IEEE TMC 18(5), 2019", "precoder throughput as a fraction of real time "
           "(best build)", "% of real time", 100.0, "TMC 2019 abstract: 64 antennas in real time on one Stratix V",
           "hwcosim beamraster realtime", ("models/beamraster/realtime.py", "models/beamraster/datapath.py",
                                           "docs/boards/results.json", "docs/boards/beamraster/lanes8-users8.json",
                                           "docs/boards/beamraster/lanes32-users4-router2.json"), _beamraster),
    System("c4", "C4 (C4D+C4P)", "Dong et al. (Alibaba), Enhancing Large-Scale AI Training Efficiency: The C4 "
           "Solution, HPCA 2025", "C4D error-induced overhead reduction vs timeout only", "%", 30.0,
           "SPECS.md: error overhead -30%; communication cost -15%",
           "hwcosim reliability c4d; hwcosim cluster c4p",
           (_RL + "bench.py", _RL + "c4d.py", _RL + "mycroft.py", _RL + "noise.py", _RL + "study.py", _RL + "sim.py",
            _RL + "faults.py", _RL + "rates.py", _CL + "bench.py", _CL + "c4p.py", _CL + "collectives.py",
            _CL + "engine.py", _CL + "job.py", _CL + "routing.py", _CL + "topology.py"), _c4),
    System("arnold", "Arnold", "ByteDance, Arnold (NeurIPS 2025, arXiv 2509.15940)",
           "end-to-end iteration-time gain over best-fit placement", "%", 5.7,
           "SPECS.md: production +5.7% at 208 GPUs, +10.6% at 9,600+", "hwcosim cluster arnold",
           (_CL + "bench.py", _CL + "arnold.py", _CL + "topology.py", _CL + "engine.py", _CL + "job.py"), _arnold),
    System("mycroft", "Mycroft", "ByteDance et al., Mycroft (SOSP 2025, arXiv 2509.03018)",
           "faults detected within 15 s", "% of faults", 90.0, "SPECS.md: detects within 15 s in 90% of cases",
           "hwcosim reliability mycroft", (_RL + "bench.py", _RL + "mycroft.py", _RL + "study.py", _RL + "sim.py",
                                           _RL + "faults.py", _RL + "telemetry.py"), _mycroft),
    System("byterobust", "ByteRobust", "ByteDance/HKU, ByteRobust (SOSP 2025, arXiv 2509.16293)",
           "ETTR of a 9,600-GPU job at Llama 3's fault rate", "%", 97.0,
           "SPECS.md: 97% ETTR over 3 months on 9,600 GPUs", "hwcosim reliability byterobust-loop",
           (_RL + "bench.py", _RL + "byterobust.py", _RL + "closedloop.py", _RL + "rates.py", _RL + "faults.py",
            _RL + "replay.py", _RL + "sim.py", _RL + "study.py", _CL + "job.py", _CL + "topology.py",
            _CL + "transport.py"), _byterobust),
    System("crux", "Crux", "Alibaba Cloud, Crux, SIGCOMM 2024", "GPU utilisation gain over ECMP", "%", "+8.3 .. +14.8",
           "SPECS.md: +8.3-14.8% utilisation on a 96-A100 testbed", "hwcosim cluster crux",
           (_CL + "bench.py", _CL + "crux.py", _CL + "engine.py", _CL + "job.py", _CL + "routing.py",
            _CL + "topology.py"), _crux),
    System("elasticbatch", "ElasticBatch", "ElasticBatch, IEEE TPDS 2024 (doi 10.1109/TPDS.2024.3431189)",
           "GPUs saved vs MIG disabled on the trace's GPU-sharing tasks", "%", 50.0,
           "SPECS.md: 50% fewer GPU instances than MIG disabled", "hwcosim elasticbatch",
           (_EL + "bench.py", _EL + "elasticbatch.py"), _elasticbatch),
    System("easyscale", "EasyScale", "EasyScale, SC 2023 (arXiv 2208.14228)",
           "cluster utilisation gain over FIFO gang scheduling (arrival window)", "%", 62.1,
           "SPECS.md: +62.1% cluster utilisation", "hwcosim easyscale", (_EL + "bench.py", _EL + "easyscale.py"),
           _easyscale),
    System("goldminer", "GoldMiner", "GoldMiner, SIGMOD 2023 (doi 10.1145/3589773)",
           "mean JCT, static / elastic data workers", "x", 2.5, "SPECS.md: 2.5x JCT (up to 12.1x job speed)",
           "hwcosim goldminer", (_EL + "goldminer.py",), _goldminer),
    System("cognn", "CoGNN", "Sun et al., CoGNN: Efficient Scheduling for Concurrent GNN Training on GPUs, SC 2022",
           "mean JCT cut of the best grouping policy vs sequential", "%",
           "shorter completion and queuing time (no number)", "SC 2022 abstract (SC22 proceedings page)",
           "hwcosim cognn", (_JB + "bench.py", _JB + "cognn.py"), _cognn),
    System("jobcheck", "DL job failures (jobcheck)", "Zhang, Xiao, Zhang, Liu, Lin, Yang, An Empirical Study on "
           "Program Failures of Deep Learning Jobs, ICSE 2020",
           "failures caught before the run, weighted by the study's failure-group shares", "%",
           "no detector in the paper: 48.0% of its 4,960 failures come from the execution environment (a share, "
           "not a catch rate)", "ICSE 2020 abstract", "hwcosim jobcheck --corpus real",
           (_JB + "bench.py", _JB + "jobcheck.py", _JB + "jobcheck_real.py", _JB + "sandbox.py", _JB + "_dryrun.py",
            _JB + "corpus_real/index.json"), _jobcheck),
    System("cpualloc", "CPU allocation", "seed abstract; nearest: CODA, ICDCS 2020",
           "GPU utilisation gain, adaptive over static allocation", "%", 20.8,
           "SPECS.md: CODA +20.8% GPU utilisation", "hwcosim cpualloc --workload trace",
           (_JB + "bench.py", _JB + "cpualloc.py", _CL + "engine.py"), _cpualloc),
    System("tux2", "TuX2", "Xiao et al., TuX2: Distributed Graph Computation for Machine Learning, NSDI 2017",
           "SSP (s = 2) speedup over BSP to the same loss", "x",
           "no SSP-vs-BSP figure (~10x faster than PowerGraph/PowerLyra end to end)", "SPECS.md",
           "hwcosim graph tux2-bench",
           (_GR + "tux2_algos.py", _GR + "tux2.py", _GR + "graph.py", _GR + "gas.py"), _tux2),
    System("gram", "GraM", "Wu et al., GraM: Scaling Graph Computation to the Trillions, SoCC 2015",
           "PageRank iteration throughput per core, partitions in worker processes exchanging messages",
           "M edges/s/core", round(GRAM_PAPER["edges"] / GRAM_PAPER["seconds"] / GRAM_PAPER["cores"] / 1e6, 2),
           "SPECS.md: one iteration over > 1 T edges in 140 s on 64 servers (1,024 cores); per core: our arithmetic",
           "hwcosim graph bench",
           (_GR + "bench.py", _GR + "gram_dask.py", _GR + "compiled.py", _GR + "partition.py", _GR + "algorithms.py",
            _GR + "graph.py"), _gram),
    System("gnn-algebraic", "GNN algebraic transformations", "seed paper unidentified; related: Cached Operator "
           "Reordering, arXiv 2308.12093", "GCN forward, algebraic rewrite vs a fused SpMM baseline", "x",
           "2.43 (related work, GCN, vs its own baseline)", "SPECS.md: Cached Operator Reordering, up to 2.43x on GCN",
           "hwcosim graph gnn", (_GR + "gnn.py", _GR + "graph.py"), _gnn),
)

_BY_KEY = {s.key: s for s in SYSTEMS}


# ---------------------------------------------------------------------------------------------------------
# sources and data files

def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: data files opened while an adapter runs (filled by the audit hook below)
_OPENED: set[str] | None = None
_HOOKED = False
DATA_PREFIX = "$HWCOSIM_DATA/"


def _hook(event: str, args) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], str | Path):
        _OPENED.add(str(args[0]))


@contextlib.contextmanager
def _recording():
    """The data files (under the data directory) opened inside the block: a set of paths relative to it."""
    global _OPENED, _HOOKED
    from hwcosim.models.data import data_dir

    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    seen: set[str] = set()
    _OPENED = seen
    found: dict[str, str] = {}
    try:
        yield found
    finally:
        _OPENED = None
        root = data_dir()
        if root is not None and root.is_dir():
            root = root.resolve()
            for p in seen:
                q = Path(p).resolve()
                if q.is_file() and q.is_relative_to(root):
                    found[q.relative_to(root).as_posix()] = sha256(q)


def source_hashes(system: System) -> dict[str, str]:
    return {rel: sha256(ROOT / rel) for rel in system.sources}


# ---------------------------------------------------------------------------------------------------------
# refresh, read, check

def system(key: str) -> System:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise UsageError(f"unknown system {key!r}; choose from {', '.join(_BY_KEY)}") from None


def _record(s: System, measured: dict, data: dict[str, str], seconds: float) -> dict:
    rec = {"version": VERSION, "system": s.name, "key": s.key, "paper": s.paper, "metric": s.metric, "unit": s.unit,
           "paper_figure": s.paper_figure, "paper_source": s.paper_source}
    for k in ("metric", "unit", "paper_figure", "paper_source"):
        if k in measured:  # an adapter may say what its figure is when the study decides it
            rec[k] = measured.pop(k)
    rec |= {"ours": measured.pop("ours"), "workload": measured.pop("workload"), "clock": measured.pop("clock"),
            "sensitive_to": measured.pop("sensitive_to"), "size": measured.pop("size", ""),
            "also": measured.pop("also", []), "details": measured,
            "command": f"hwcosim papers --refresh {s.key}", "study_command": s.study,
            "seconds": round(seconds, 1),
            "sources": {**source_hashes(s), **{DATA_PREFIX + k: v for k, v in sorted(data.items())}}}
    return rec


def refresh(keys=None, progress=print) -> tuple[dict[str, dict], dict[str, str]]:
    """Run the adapters of ``keys`` (default: all 21) and write ``docs/papers/<key>.json`` for each that
    succeeds, then ``docs/papers.md`` from every JSON. Returns ``(records, errors)``; a system that fails
    keeps its old JSON and its error is in ``errors``."""
    from hwcosim.models.benchio import write_json

    chosen = [system(k) for k in keys] if keys else list(SYSTEMS)
    _SHARED.clear()
    done: dict[str, dict] = {}
    errors: dict[str, str] = {}
    t_all = time.monotonic()
    for i, s in enumerate(chosen, 1):
        t0, c0 = time.monotonic(), time.process_time()
        try:
            with tempfile.TemporaryDirectory(prefix=f"papers-{s.key}-") as tmp, _recording() as data:
                measured = s.headline(Path(tmp))
            rec = _record(s, dict(measured), data, time.monotonic() - t0)
            write_json(JSON_DIR / f"{s.key}.json", rec)
            done[s.key] = rec
            progress(f"[{i}/{len(chosen)}] {s.key}: ours {_num(rec['ours'])} {rec['unit']} (paper "
                     f"{_num(rec['paper_figure'])}) in {time.monotonic() - t0:.1f} s ({time.process_time() - c0:.1f} "
                     "s of CPU in this process)")
        except Exception as e:  # one system failing leaves its old JSON; the others still run
            errors[s.key] = f"{type(e).__name__}: {e}"
            progress(f"[{i}/{len(chosen)}] {s.key}: FAILED after {time.monotonic() - t0:.1f} s ({errors[s.key]}); "
                     f"its old JSON is kept")
    _SHARED.clear()
    write_page()
    progress(f"refreshed {len(done)} of {len(chosen)} systems in {time.monotonic() - t_all:.0f} s; wrote "
             f"{_rel(PAGE)}")
    return done, errors


def write_page() -> Path:
    """Write ``docs/papers.md`` (:func:`render_markdown`) atomically."""
    from hwcosim.models.atomic import write_text

    return write_text(PAGE, render_markdown())


def load(key: str) -> dict | None:
    p = JSON_DIR / f"{key}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def stale(rec: dict, check_data: bool = True) -> list[str]:
    """The files of ``rec['sources']`` whose sha256 differs now (or that are gone); data files only when
    ``check_data`` and the data directory exists."""
    from hwcosim.models.data import data_dir

    root = data_dir()
    bad = []
    for rel, h in rec.get("sources", {}).items():
        if rel.startswith(DATA_PREFIX):
            if not check_data or root is None or not root.is_dir():
                continue
            p = root / rel[len(DATA_PREFIX):]
        else:
            p = ROOT / rel
        if not p.is_file() or sha256(p) != h:
            bad.append(rel)
    if rec.get("key") in _BY_KEY and set(_BY_KEY[rec["key"]].sources) - set(rec.get("sources", {})):
        bad += sorted(set(_BY_KEY[rec["key"]].sources) - set(rec.get("sources", {})))
    return bad


def stale_systems(keys=None) -> dict[str, list[str]]:
    """``{key: changed files}`` of the systems whose JSON is missing (``["no JSON"]``) or stale."""
    out = {}
    for s in ([system(k) for k in keys] if keys else SYSTEMS):
        rec = load(s.key)
        bad = ["no JSON"] if rec is None else stale(rec)
        if bad:
            out[s.key] = bad
    return out


def marks(rec: dict) -> str:
    """``c`` when the figure rests on an assumed clock, ``s`` when on a synthetic workload."""
    m = ""
    if str(rec.get("clock", "")).startswith("assumed"):
        m += "c"
    if "synthetic" in str(rec.get("workload", "")):
        m += "s"
    return m


def rows(keys=None) -> list[dict]:
    """One row per system (in :data:`SYSTEMS` order) read from ``docs/papers/<key>.json``; a system without a
    JSON has ``missing: True``."""
    out = []
    for s in ([system(k) for k in keys] if keys else SYSTEMS):
        rec = load(s.key)
        if rec is None:
            out.append({"system": s.name, "key": s.key, "missing": True,
                        "command": f"hwcosim papers --refresh {s.key}"})
        else:
            out.append(rec | {"marks": marks(rec)})
    return out


def papers(keys=None) -> list[dict]:
    """The Python API of ``hwcosim papers``: the rows (ours beside the paper per seed system)."""
    return rows(keys)


def _num(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"


COLUMNS = ("system", "metric", "ours (in unit)", "paper (in unit)", "unit", "workload", "clock", "sensitive to",
           "marks (c, s)")


def _cells(r: dict) -> list[str]:
    if r.get("missing"):
        return [r["system"], f"no JSON: run {r['command']}", "-", "-", "-", "-", "-", "-", "-"]
    return [r["system"], r["metric"], _num(r["ours"]), _num(r["paper_figure"]), r["unit"], r["workload"], r["clock"],
            r["sensitive_to"], r["marks"] or "-"]


def papers_table(keys=None):
    """The terminal table (rich) of :func:`rows`."""
    from hwcosim.models.tables import table

    return table("Ours beside the paper, one row per seed system (marks: c = assumed clock, s = synthetic "
                 "workload)", COLUMNS, [_cells(r) for r in rows(keys)])


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown() -> str:
    """``docs/papers.md``, rendered from ``docs/papers/*.json`` only."""
    rs = rows()
    out = ["# Ours beside the papers", "",
           "One row per seed system, rendered from `docs/papers/<system>.json` (written by "
           "`hwcosim papers --refresh`, which runs each study; `hwcosim papers` prints the same table). "
           "**Marks:** `c` = the figure rests on an assumed clock, not a measured Fmax; `s` = the workload is "
           "synthetic, not a real dataset. Each JSON records the sha256 of the study's source files and of the "
           "data files it read; `tests/flow/test_papers.py` fails when one of them changed since.", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(_md(c) for c in _cells(r)) + " |" for r in rs]
    out += ["", "## Details", ""]
    for r in rs:
        if r.get("missing"):
            continue
        out += [f"### {r['system']}", "", f"- Paper: {_md(r['paper'])}; its figure: {_md(_num(r['paper_figure']))} "
                f"{_md(r['unit'])} ({_md(r['paper_source'])}).",
                f"- Size of the run: {_md(r['size'] or 'the study default')}.",
                f"- Reproduce: `{r['command']}` (the full study: `{r['study_command']}`)."]
        for a in r.get("also", []):
            line = f"- Also: {_md(a['metric'])}: ours {_num(a['ours'])} {_md(a['unit'])}, paper {_md(_num(a['paper']))}"
            if a.get("sensitive_to"):
                line += f"; sensitive to {_md(a['sensitive_to'])}"
            out.append(line + ".")
        out.append("")
    return "\n".join(out).rstrip() + "\n"

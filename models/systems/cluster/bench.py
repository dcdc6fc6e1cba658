"""The cluster studies and benchmarks: Arnold, C4P, Crux, the simulator's speed, the mechanisms.

Each ``bench_*`` is ``(out_dir, quick, **options) -> dict``: it runs a study of
:mod:`hwcosim.models.systems.cluster`, writes its JSON + PNG to ``out_dir``, prints its tables and
returns the result (``hwcosim bench`` and ``hwcosim cluster ...`` call the same functions).
:func:`speed_run`, :func:`scale_run` and :func:`transport_run` measure one configuration;
:func:`write_scenario` and :func:`print_scenario` report a scenario run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from hwcosim.models.benchio import bar_png as _bar_png
from hwcosim.models.benchio import print_table as _table
from hwcosim.models.benchio import write_json as _write_json
from hwcosim.models.errors import UsageError

__all__ = ["bench_arnold", "bench_c4p", "bench_crux", "bench_cluster_speed", "bench_transport_speed",
           "bench_mechanisms", "speed_run", "scale_run", "transport_run", "write_scenario", "print_scenario"]


def _arnold_png(path: Path, res: dict, names: list[str]) -> Path:
    """Left: baseline / Arnold weighted max spread per setting (paper settings, then the real
    Lingjun topology); right: baseline / Arnold iteration time on the Lingjun topology."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    st = dict(res["settings"])
    for key, tag in (("lingjun", "lingjun"), ("lingjun_thin_core", "lingjun 64:1")):
        for j, v in res.get(key, {}).get("jobs", {}).items():
            if key == "lingjun":
                st[f"{tag}\n{j}"] = v
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(st))
    n = len(names)
    for i, p in enumerate(names):
        ax[0].bar(x + (i - (n - 1) / 2) * 0.8 / n, [v["ratio_mean"][p] for v in st.values()], 0.8 / n, label=p)
    ax[0].axhline(1.0, color="k", lw=0.8)
    ax[0].set_xticks(x, list(st), fontsize=8)
    ax[0].set_ylabel("weighted max spread / Arnold's (mean)")
    ax[0].set_title("spread (higher = Arnold better)")
    ax[0].legend(fontsize=7)
    sims = {}
    for key, tag in (("lingjun", ""), ("lingjun_thin_core", " 64:1")):
        for j, v in res.get(key, {}).get("jobs", {}).items():
            if v["iter_speedup_mean"]:
                sims[f"{j}{tag}"] = v["iter_speedup_mean"]
    x = np.arange(len(sims))
    for i, p in enumerate(names):
        ax[1].bar(x + (i - (n - 1) / 2) * 0.8 / n, [v[p] for v in sims.values()], 0.8 / n, label=p)
    ax[1].axhline(1.0, color="k", lw=0.8)
    vals = [v[p] for v in sims.values() for p in names] or [1.0]
    ax[1].set_ylim(min(min(vals), 1.0) - 0.03, max(max(vals), 1.0) + 0.03)
    ax[1].set_xticks(x, list(sims), fontsize=8)
    ax[1].set_ylabel("iteration time / Arnold's")
    ax[1].set_title("Lingjun 2023 flow simulation (>1 = Arnold faster)")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


def bench_arnold(out_dir: Path, quick: bool, seed: int = 0, alpha: float = 0.5) -> dict:
    from hwcosim.models.systems.cluster.arnold import POLICIES, run_study

    res = run_study(quick=quick, seed=seed, alpha=alpha, beta=1 - alpha, time_limit=10.0 if quick else 60.0)
    _write_json(out_dir / "arnold.json", res)
    names = [p for p in POLICIES if p != "arnold"]
    st = res["settings"]
    _arnold_png(out_dir / "arnold.png", res, names)
    rows = []
    for s, v in st.items():
        d0 = v["draws"][0]
        rows.append([s, f"{v['minipods']}/{v['free_nodes']}", *(f"{v['ratio_mean'][p]:.2f}/{v['ratio_max'][p]:.2f}"
                                                              for p in names),
                     f"{v['fits_one_fraction']:.0%}",
                     " ".join(f"{p}={d0[p]['iter_s']:.3f}" for p in POLICIES if "iter_s" in d0[p]) or "-"])
    _table(f"Arnold: baseline weighted max spread / Arnold's, mean/max over {res['draws']} draws "
           f"(alpha={res['alpha']})",
           ["setting", "minipods/free", *names, "jobs in 1 pod (%)", "iter s (draw 0)"], rows)
    for key in ("lingjun", "lingjun_thin_core"):
        lj = res.get(key)
        if not lj:
            continue
        rows = []
        for j, v in lj["jobs"].items():
            rows.append([f"{j} ({v['job']['gpus']} GPUs)",
                         *(f"{v['ratio_mean'][p]:.2f}/{v['ratio_max'][p]:.2f}" for p in names),
                         " ".join(f"{v['max_dp_spread_mean'][p]:.1f}" for p in POLICIES),
                         " ".join(f"{v['max_pp_spread_mean'][p]:.1f}" for p in POLICIES),
                         f"{v['fits_one_fraction']:.0%}",
                         " ".join(f"{v['iter_speedup_mean'][p]:.3f}" for p in names) or "-"])
        _table(f"Arnold on the real Lingjun 2023 topology (pods {lj['pod_hosts']} hosts, "
               f"{lj['core_oversub']:g}:1 agg-core): ratio mean/max over {lj['draws']} draws",
               ["job", *names, "mean max DP spread (A bf rf gp rb)", "mean max PP spread", "jobs in 1 pod (%)",
                "iter time / Arnold's (bf rf gp rb)"], rows)
    print("paper: up to 1.67x, mean 1.2x lower weighted max spread; all tie in the smallest setting; "
          "+5.7% (208 GPUs) and +10.6% (9,600+ GPUs) end to end in production")
    if "congestion" in res:
        print_arnold_congestion(res["congestion"])
    return res


def print_arnold_congestion(c: dict) -> None:
    """Arnold's calibrated congestion study: the calibration, the end-to-end gain beside the
    paper's, and its band (:func:`~hwcosim.models.systems.cluster.arnold.run_calibrated_congestion`)."""
    cal = c["calibration"]
    _table(f"Arnold link model calibration (Lingjun 2023, {c['core_oversub']:g}:1 agg-core): spread slowdown vs "
           "background cross-pod host pairs",
           ["background pairs (count)",
            f"collective spread slowdown (%, paper {100 * c['paper']['collective_slowdown_spread']:.0f})",
            f"P2P spread slowdown (%, paper {100 * c['paper']['p2p_slowdown_spread']:.0f})"],
           [[r["bg_pairs"], f"{100 * r['collective_slowdown']:.1f}", f"{100 * r['p2p_slowdown']:.1f}"]
            for r in cal["rows"]])
    print("calibrated background: " + ", ".join(
        f"{k} {100 * v['paper_slowdown']:.0f}% at {v['bg_pairs']:.0f} pairs" + ("" if v["reached"] else " (grid edge)")
        for k, v in cal["calibrated"].items()))
    base = list(next(iter(c["gain_by_setting"].values())))
    _table(f"Arnold end to end under calibrated congestion: {c['job']} job ({c['gpus']} GPUs), baseline iteration "
           "time / Arnold's - 1",
           ["background pairs x compute s", *[f"{p} (%)" for p in base]],
           [[k, *[f"{100 * v[p]:+.1f}" for p in base]] for k, v in c["gain_by_setting"].items()])
    if c.get("gain_by_alpha"):
        print("  best-fit vs Arnold placed with another DP weight (compute "
              f"{c['headline_compute_s']:g} s): " + ", ".join(f"alpha={a}: {100 * v['best-fit']:+.1f}%"
                                                            for a, v in c["gain_by_alpha"].items() if "best-fit" in v))
    sp = c["rows"][0]["spreads_dp_pp"] if c["rows"] else {}
    if sp:
        print("  max DP/PP spread (draw 0): " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sp.items()))
    if "best-fit" in c["gain"]:
        lo, hi = c["band"]["gain_over_best_fit"]
        print(f"Arnold end to end: ours {100 * c['gain']['best-fit']:+.1f}% over best-fit ({c['gpus']} GPUs, compute "
              f"{c['headline_compute_s']:g} s, both calibrated levels); paper +5.7% (208 GPUs), +10.6% (9,600+ GPUs) "
              "(Arnold, NeurIPS 2025)")
        print(f"sensitive to: {c['band']['parameters']}; band {100 * lo:+.1f}% .. {100 * hi:+.1f}%")


def _c4p_png(path: Path, res: dict) -> Path:
    """Left: healthy all-reduce bus bandwidth, ECMP vs C4P, per setting and job size; right:
    iteration time after the failure of used links (2 fabric links + 1 NIC port)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    labels, rows = [], []
    for name, st in res["settings"].items():
        for g, v in st["sizes"].items():
            labels.append(f"{name}\n{g} GPUs/job")
            rows.append(v)
    x = np.arange(len(labels))
    fig, ax = plt.subplots(1, 2, figsize=(15, 4.8))
    for i, (k, lab) in enumerate((("ecmp", "ECMP"), ("c4p", "C4P"))):
        ax[0].bar(x + (i - 0.5) * 0.4, [r["healthy"][f"busbw_{k}_GBps"] for r in rows], 0.4, label=lab)
        ax[1].bar(x + (i - 0.5) * 0.4, [1e3 * r["failure"][f"iter_after_{k}_s"] for r in rows], 0.4, label=lab)
    ax[0].set_ylabel("all-reduce bus bandwidth (GB/s per GPU)")
    ax[0].set_title("healthy fabric (line rate 50 GB/s)")
    ax[1].set_ylabel("iteration time after the failure (ms)")
    ax[1].set_title("2 used fabric links + 1 used NIC port down")
    for a in ax:
        a.set_xticks(x, labels, fontsize=7, rotation=45, ha="right")
        a.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


def bench_c4p(out_dir: Path, quick: bool, seed: int = 0) -> dict:
    from hwcosim.models.systems.cluster.c4p import run_study

    res = run_study(quick=quick, seed=seed)
    _write_json(out_dir / "c4p.json", res)
    sm = res["summary"]
    _c4p_png(out_dir / "c4p.png", res)
    _table(f"C4P vs ECMP (mean over {res['seeds']} seeds)",
           ["setting / GPUs per job / scenario", "busbw ECMP GB/s", "busbw ECMP NCCL-port GB/s", "busbw C4P GB/s",
            "comm time -%", "comm time -% vs NCCL-port", "iteration time -%", "iter after fail ECMP/C4P ms"],
           [[s, f"{v['busbw_ecmp_GBps']:.1f}",
             f"{v['busbw_ecmp_nccl_GBps']:.1f}" if "busbw_ecmp_nccl_GBps" in v else "-",
             f"{v['busbw_c4p_GBps']:.1f}", f"{100 * v['comm_reduction_mean']:.1f}",
             f"{100 * v['comm_reduction_vs_nccl_mean']:.1f}" if "comm_reduction_vs_nccl_mean" in v else "-",
             f"{100 * v['iter_reduction_mean']:.1f}",
             f"{1e3 * v['iter_after_ecmp_s']:.1f}/{1e3 * v['iter_after_c4p_s']:.1f}" if s.endswith("failure") else "-"]
            for s, v in sm.items()])
    cs = res["channels_sensitivity"]
    _table(f"Channels (QPs) per ring, {cs['setting']}, {cs['gpus_per_job']} GPUs per job, healthy",
           ["channels (QPs per ring)", "busbw ECMP GB/s", "busbw C4P GB/s", "comm time -%"],
           [[c, f"{v['busbw_ecmp_GBps']:.1f}", f"{v['busbw_c4p_GBps']:.1f}", f"{100 * v['comm_reduction_mean']:.1f}"]
            for c, v in cs["runs"].items()])
    print("paper: communication cost -15% (production jobs); why ours differs: the JSON 'notes' and "
          "models/systems/cluster/c4p.py")
    if "fair" in res:
        print_c4p_fair(res["fair"])
    return res


def print_c4p_fair(fr: dict) -> None:
    """The fair C4P comparison (:func:`~hwcosim.models.systems.cluster.c4p.run_fair_study`): ours
    beside the paper's, and the band over the parameters the figure depends on most."""
    _table(f"C4P vs ECMP on a production-like TP/PP + DP mix ({fr['topology']['name']}, mean over "
           f"{fr['seeds']} seeds)",
           ["QPs (count)", "TP NVLink counted", "scatter (fraction)", "comm vs ECMP (-%)",
            "comm vs NCCL ECMP (-%)", "fabric comm vs NCCL ECMP (-%)", "iteration vs NCCL ECMP (-%)"],
           [[b["channels"], "yes" if b["tp_traffic"] else "no", f"{b['scatter']:g}",
             f"{100 * b['comm_reduction']['ecmp']:.1f}", f"{100 * b['comm_reduction']['ecmp-nccl']:.1f}",
             f"{100 * b['fabric_comm_reduction']['ecmp-nccl']:.1f}", f"{100 * b['iter_reduction']['ecmp-nccl']:.1f}"]
            for b in fr["band_runs"]])
    lo, hi = fr["band"]["comm_reduction_vs_nccl"]
    print(f"C4P communication cost: ours -{100 * fr['comm_reduction_vs_nccl']:.1f}% vs ECMP with NCCL port binding "
          f"(first row), paper -{100 * fr['paper']['communication_cost_reduction']:.0f}% (C4, HPCA 2025)")
    print(f"sensitive to: {fr['band']['parameters']}; band -{100 * lo:.1f}% .. -{100 * hi:.1f}%")


def bench_crux(out_dir: Path, quick: bool, seed: int = 0, levels: int = 8) -> dict:
    from hwcosim.models.systems.cluster.crux import PLANNED, SCHEMES, run_study

    res = run_study(quick=quick, seed=seed, K=levels)
    _write_json(out_dir / "crux.json", res)
    runs = [(f"clos s{r['seed']}", r) for r in res["runs"]]
    runs += [(f"lingjun s{r['seed']}", r) for r in res.get("lingjun", {}).get("runs", [])]
    _bar_png(out_dir / "crux.png", [k for k, _ in runs], {sc: [r[sc] for _, r in runs] for sc in SCHEMES},
             "GPU utilisation", "Crux vs baselines (synthetic 2:1 Clos, real Lingjun 2023 topology)")
    for title, r in ((f"synthetic Clos, horizon {res['horizon_s']} s", res),
                     *(((f"real Lingjun 2023 topology, {res['lingjun']['runs'][0]['jobs']} jobs / "
                         f"{res['lingjun']['runs'][0]['gpus']} GPUs, horizon {res['lingjun']['horizon_s']} s",
                         res["lingjun"]),) if "lingjun" in res else ())):
        _table(f"Crux: GPU utilisation (K={levels}), {title}",
               ["scheme", "paths", "utilisation (fraction)", "Crux gain (%)", "utilisation, shift wait excluded"],
               [[sc, "planned" if sc in PLANNED or sc == "crux" else "ECMP hash", f"{r['mean_utilisation'][sc]:.3f}",
                 f"{100 * r['crux_gain_over'][sc]:+.1f}" if sc in r["crux_gain_over"] else "-",
                 f"{r['cassini_after_start'][sc]:.3f}" if sc in r.get("cassini_after_start", {}) else "-"]
                for sc in SCHEMES])
        print(f"  Crux priority effect (same planned paths, vs fair sharing): "
              f"{100 * r['priority_effect']['crux-paths']:+.1f}%; path-planning effect (planned vs ECMP paths, "
              f"both fair): {100 * r['path_effect']:+.1f}%; CASSINI's largest start shift "
              f"{r['cassini_shift_max_s']:.2f} s of {r['horizon_s']:g} s")
    print_crux_band(res)
    return res


def print_crux_band(res: dict) -> None:
    """Ours beside the paper's, and the band of the priority and path effects (Crux study)."""
    b = res["band"]
    _table(f"Crux sensitivity ({b['seeds']} seed(s), horizon {b['horizon_s']:g} s)",
           ["oversubscription (x:1)", "gradient scale (x)", "priority effect vs fair (%)",
            "vs Sincronia on planned (%)", "vs CASSINI on planned (%)", "path effect (%)"],
           [[f"{x['oversub']:g}", f"{x['grad_scale']:g}", f"{100 * x['priority_effect']['crux-paths']:+.1f}",
             f"{100 * x['priority_effect']['sincronia-planned']:+.1f}",
             f"{100 * x['priority_effect']['cassini-planned']:+.1f}", f"{100 * x['path_effect']:+.1f}"]
            for x in b["runs"]])
    pe, pa = b["priority_effect"], b["path_effect"]
    print(f"Crux: ours {100 * res['crux_gain_over']['ecmp']:+.1f}% over ECMP = path planning "
          f"{100 * res['path_effect']:+.1f}% and priorities {100 * res['priority_effect']['crux-paths']:+.1f}% "
          f"(same paths); paper +8.3-14.8% on a 96-GPU testbed, 13-23% over baselines in simulation "
          "(Crux, SIGCOMM 2024)")
    print(f"sensitive to: {b['parameters']}; band: priority effect {100 * pe[0]:+.1f}% .. {100 * pe[1]:+.1f}%, "
          f"path effect {100 * pa[0]:+.1f}% .. {100 * pa[1]:+.1f}%")


def speed_run(n_gpus: int = 2048, n_jobs: int = 16, iterations: int = 5, seed: int = 0) -> dict:
    """Simulated seconds per wall second: ``n_jobs`` DP x TP=8 jobs on random Lingjun hosts."""
    from hwcosim.models.systems.cluster.engine import Simulator
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import lingjun_2023

    topo = lingjun_2023()
    hosts_per_job = n_gpus // (8 * n_jobs)
    if hosts_per_job < 1 or n_gpus > topo.n_gpus:
        raise UsageError(f"--gpus {n_gpus} with --jobs {n_jobs}: need 8 * jobs <= gpus <= {topo.n_gpus}")
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(topo.n_hosts)
    sim = Simulator(topo, seed=seed)
    for k in range(n_jobs):
        h = np.sort(hosts[k * hosts_per_job:(k + 1) * hosts_per_job])
        spec = JobSpec(f"j{k}", dp=hosts_per_job, tp=8, compute_s=float(rng.uniform(0.05, 0.2)), grad_bytes=1e9,
                       iterations=iterations, channels=2)
        sim.add_job(spec, placement(spec, (h[:, None] * 8 + np.arange(8)).reshape(-1)))
    sim.run()
    return {"gpus": hosts_per_job * 8 * n_jobs, "jobs": n_jobs, "iterations": iterations, "sim_s": sim.now,
            "wall_s": sim.wall_s, "sim_s_per_wall_s": sim.now / sim.wall_s, "events": sim.events,
            "rate_recomputes": sim.net.recomputes}


def scale_run(n_gpus: int, n_jobs: int = 1, iterations: int = 100, placement_policy: str = "random",
              incremental: bool = True, seed: int = 0) -> dict:
    """``n_jobs`` DP x TP=8 jobs filling a synthetic Clos of ``n_gpus`` GPUs (16 hosts per ToR, up
    to 8 ToRs per pod, 8 GPUs per host, 2 x 200 Gb/s ports per GPU, non-blocking), ECMP, ring
    all-reduce of 1 GB per rank with 2 channels, compute 50-200 ms; ``iterations`` each.

    Returns wall time, simulated events (timed events + stream completions) per wall second and
    the rate recomputations; ``incremental=False`` solves max-min over all streams at every change
    (:mod:`hwcosim.models.systems.cluster.network`).
    """
    from hwcosim.models.systems.cluster.engine import Simulator
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import clos

    hosts = n_gpus // 8
    tors = max(1, -(-hosts // 16))
    pods = max(1, -(-tors // 8))
    if hosts < 1 or hosts % n_jobs or pods * (tors // pods) * (hosts // tors) != hosts:
        raise UsageError(f"{n_gpus} GPUs / {n_jobs} jobs: use GPUs = 128 * 2^k (>= 128) and jobs dividing hosts")
    topo = clos(pods, tors // pods, hosts // tors, gpus_per_host=8, nic_ports=2, aggs_per_pod=8, cores_per_plane=8)
    sim = Simulator(topo, seed=seed)
    sim.net.incremental = incremental
    rng = np.random.default_rng(seed)
    order = rng.permutation(topo.n_hosts) if placement_policy == "random" else np.arange(topo.n_hosts)
    hpj = hosts // n_jobs
    for k in range(n_jobs):
        h = np.sort(order[k * hpj:(k + 1) * hpj])
        spec = JobSpec(f"j{k}", dp=hpj, tp=8, compute_s=float(rng.uniform(0.05, 0.2)), grad_bytes=1e9,
                       iterations=iterations, channels=2)
        sim.add_job(spec, placement(spec, (h[:, None] * 8 + np.arange(8)).reshape(-1)))
    done = [0]
    orig = sim._stream_done

    def count(sid):
        done[0] += 1
        orig(sid)

    sim._stream_done = count
    sim.run()
    ev = sim.events + done[0]
    return {"gpus": n_gpus, "jobs": n_jobs, "placement": placement_policy, "incremental": incremental,
            "iterations": iterations, "links": topo.n_links, "streams": done[0], "events": ev,
            "sim_s": sim.now, "wall_s": sim.wall_s, "events_per_wall_s": ev / sim.wall_s,
            "rate_recomputes": sim.net.recomputes, "streams_solved": sim.net.streams_recomputed,
            "iter_end": [r.iter_end for r in sim.jobs.values()]}


def bench_cluster_speed(out_dir: Path, quick: bool) -> dict:
    res = [speed_run(1024, 8, 3 if quick else 5)]
    if not quick:
        res.append(speed_run(4096, 32, 5))
    iters = 20 if quick else 100
    scale = [scale_run(g, 1, iters) for g in ((1024, 2048) if quick else (1024, 2048, 4096, 8192))]
    inc = []  # max-min: full recompute vs incremental (component-wise), same process, alternating
    cases = [(1024, 1, iters, "random")] if quick else [(1024, 1, 100, "random"), (8192, 1, 100, "random"),
                                                         (8192, 32, 20, "packed"), (8192, 32, 20, "random")]
    reps = 1 if quick else 3  # the machine is shared: alternate the modes, keep each mode's fastest run
    for g, j, it, pol in cases:
        best: dict = {}
        for _ in range(reps):
            for mode in (False, True):
                r = scale_run(g, j, it, pol, mode)
                if mode not in best or r["wall_s"] < best[mode]["wall_s"]:
                    best[mode] = r
        inc += [best[False], best[True]]
    for a, b in zip(inc[::2], inc[1::2]):
        b["max_rel_diff_vs_full"] = max(abs(x - y) / x for A, B in zip(a["iter_end"], b["iter_end"])
                                        for x, y in zip(A, B))
        b["speedup_vs_full"] = a["wall_s"] / b["wall_s"]
    for r in scale + inc:
        r.pop("iter_end")
    _write_json(out_dir / "cluster_speed.json", {"runs": res, "scale": scale, "incremental": inc})
    _table("Cluster simulator speed (Lingjun 2023 topology, ECMP, ring all-reduce)",
           ["GPUs", "jobs", "sim s", "wall s", "sim s / wall s", "rate recomputes (count)"],
           [[r["gpus"], r["jobs"], f"{r['sim_s']:.3f}", f"{r['wall_s']:.2f}", f"{r['sim_s_per_wall_s']:.3f}",
             r["rate_recomputes"]] for r in res])
    _table(f"Scale: one DP x TP=8 job, {iters} iterations, synthetic Clos",
           ["GPUs", "links", "events", "wall s", "events / wall s", "wall s / 1k GPUs"],
           [[r["gpus"], r["links"], r["events"], f"{r['wall_s']:.2f}", f"{r['events_per_wall_s']:.0f}",
             f"{1024 * r['wall_s'] / r['gpus']:.2f}"] for r in scale])
    if inc:
        _table("Max-min recomputation: full vs incremental (default), synthetic Clos",
               ["GPUs", "jobs", "iterations", "placement", "mode", "events", "wall s", "events / wall s",
                "streams solved", "max rel diff"],
               [[r["gpus"], r["jobs"], r["iterations"], r["placement"], "incremental" if r["incremental"] else "full",
                 r["events"], f"{r['wall_s']:.2f}", f"{r['events_per_wall_s']:.0f}", r["streams_solved"],
                 f"{r.get('max_rel_diff_vs_full', 0.0):.1e}"] for r in inc])
    return {"runs": res, "scale": scale, "incremental": inc}


def transport_run(n_gpus: int = 8192, iterations: int = 100, seed: int = 0, record: bool = False) -> dict:
    """One Megatron-style job (TP 8 x PP 8 x DP ``n_gpus / 64``) on the chunk-level transport
    (:mod:`hwcosim.models.systems.cluster.transport`) over a synthetic non-blocking Clos (16 hosts per ToR, 8 ToRs
    per pod, 8 GPUs per host, 2 x 200 Gb/s per GPU), ECMP, 2 channels; wall time of the run."""
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import clos
    from hwcosim.models.systems.cluster.transport import TransportSim

    if n_gpus % 1024 or n_gpus < 1024:
        raise UsageError(f"--gpus {n_gpus}: use a multiple of 1024")
    hosts = n_gpus // 8
    tors = hosts // 16
    pods = max(1, tors // 8)
    topo = clos(pods, tors // pods, 16, gpus_per_host=8, nic_ports=2, aggs_per_pod=8, cores_per_plane=8)
    spec = JobSpec("big", dp=n_gpus // 64, tp=8, pp=8, compute_s=0.15, grad_bytes=2.5e8, act_bytes=5e7, tp_bytes=2e8,
                   iterations=iterations, channels=2)
    w0 = time.perf_counter()
    sim = TransportSim(topo, spec, placement(spec, np.arange(n_gpus)), seed=seed, record=record)
    w1 = time.perf_counter()
    sim.run()
    w2 = time.perf_counter()
    slots = sum(c.K for c in sim.colls) * len(sim.iter_end)
    return {"gpus": n_gpus, "iterations": len(sim.iter_end), "connections": {c.label: c.n for c in sim.colls},
            "slots_per_iteration": {c.label: c.K for c in sim.colls}, "build_s": w1 - w0, "run_s": w2 - w1,
            "wall_s": w2 - w0, "sim_s": sim.iter_end[-1], "mean_iter_s": float(np.mean(sim.iteration_times)),
            "chunk_steps": slots, "chunk_updates_per_s": slots * sum(c.n for c in sim.colls) / len(sim.colls)
            / (w2 - w1)}


def bench_transport_speed(out_dir: Path, quick: bool) -> dict:
    """Wall time of the chunk-level transport: 8,192 GPUs x 100 iterations (issue 24: < 60 s),
    and smaller jobs for the scaling; the flow-level engine's time on the same job shape as the
    baseline in the same process."""
    from hwcosim.models.systems.cluster.engine import Simulator
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import clos

    sizes = (1024, 2048) if quick else (1024, 2048, 4096, 8192)
    iters = 20 if quick else 100
    runs = [transport_run(g, iters) for g in sizes]
    # baseline: the flow-level engine on the largest job, fewer iterations (it costs more per iteration)
    g = sizes[-1]
    hosts = g // 8
    tors = hosts // 16
    pods = max(1, tors // 8)
    topo = clos(pods, tors // pods, 16, gpus_per_host=8, nic_ports=2, aggs_per_pod=8, cores_per_plane=8)
    it_flow = 3 if quick else 5
    spec = JobSpec("big", dp=g // 64, tp=8, pp=8, compute_s=0.15, grad_bytes=2.5e8, act_bytes=5e7, tp_bytes=2e8,
                   iterations=it_flow, channels=2)
    fs = Simulator(topo)
    fs.add_job(spec, placement(spec, np.arange(g)))
    fs.run()
    flow = {"gpus": g, "iterations": it_flow, "wall_s": fs.wall_s, "wall_s_per_iteration": fs.wall_s / it_flow,
            "mean_iter_s": float(np.mean(fs.jobs[0].iteration_times))}
    res = {"runs": runs, "flow_engine": flow, "limit_s": 60.0,
           "ratio_transport_vs_flow_per_iteration": runs[-1]["run_s"] / runs[-1]["iterations"]
           / flow["wall_s_per_iteration"]}
    _write_json(out_dir / "transport_speed.json", res)
    _bar_png(out_dir / "transport_speed.png", [str(r["gpus"]) for r in runs],
             {"wall s": [r["wall_s"] for r in runs]}, "wall seconds",
             f"chunk-level transport, TP8 x PP8 x DP, {iters} iterations (limit 60 s at 8,192 GPUs)")
    _table(f"Chunk-level transport speed ({iters} iterations, TP8 x PP8 x DP, synthetic Clos)",
           ["GPUs", "connections", "slots / iteration", "wall s", "mean iteration (sim s)"],
           [[r["gpus"], sum(r["connections"].values()), sum(r["slots_per_iteration"].values()), f"{r['wall_s']:.1f}",
             f"{r['mean_iter_s']:.4f}"] for r in runs])
    print(f"flow-level engine on the same {g}-GPU job: {flow['wall_s_per_iteration']:.2f} wall s per iteration, "
          f"mean iteration {flow['mean_iter_s']:.4f} sim s")
    return res


def bench_mechanisms(out_dir: Path, quick: bool) -> dict:
    """Isolation experiments for the mechanisms whose benefit the main studies barely show (issue 24):
    Arnold under cross-pod background congestion on the Lingjun topology, Crux's priorities on one
    shared link over intensity ratio and compute/communication balance (plus the study trace's
    contention statistics), CoGNN's co-location over queue length and memory room. Quick mode
    skips Arnold (each background-load run is minutes of flow simulation)."""
    from hwcosim.models.systems.cluster.arnold import run_congestion_study
    from hwcosim.models.systems.cluster.crux import run_intensity_study, trace_contention
    from hwcosim.models.systems.jobs.cognn import run_colocation_study

    res = {"crux": run_intensity_study(horizon=4.0 if quick else 10.0),
           "crux_trace": trace_contention(seeds=range(2) if quick else range(5)),
           "cognn": run_colocation_study(n_tasks=80 if quick else 200)}
    if not quick:
        res["arnold"] = run_congestion_study("medium", loads=(0.0, 0.5, 1.0), draws=2, time_limit=20.0)
    _write_json(out_dir / "mechanisms.json", res)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for cf in sorted({x["compute_over_comm"] for x in res["crux"]["rows"]}):
        rs = [x for x in res["crux"]["rows"] if x["compute_over_comm"] == cf]
        ax.plot([x["ratio"] for x in rs], [100 * x["gain_crux_over_fair"] for x in rs], "o-",
                label=f"compute/comm {cf}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("intensity ratio of the two jobs")
    ax.set_ylabel("Crux order vs fair sharing (% GPU utilisation)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for pol in ("ascending_small", "balanced"):
        for r in sorted({x["rate_per_s"] for x in res["cognn"]["rows"]}):
            rs = [x for x in res["cognn"]["rows"] if x["policy"] == pol and x["rate_per_s"] == r]
            ax.plot([x["cap_mult"] for x in rs], [100 * x["makespan_gain"] for x in rs], "o-",
                    label=f"{pol}, load {rs[0]['offered_load']:.1f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("memory cap / p90 task memory")
    ax.set_ylabel("makespan gain over sequential SJF (%)")
    ax.legend(fontsize=6)
    ax = axes[2]
    if "arnold" in res:
        sm = res["arnold"]["summary"]
        loads = sorted(sm, key=float)
        for p in next(iter(sm.values())):
            ax.plot([float(x) for x in loads], [sm[x][p]["iter_s_mean"] for x in loads], "o-", label=p)
        ax.set_xlabel("background load (share of busy hosts running cross-pod jobs)")
        ax.set_ylabel("target iteration time (s)")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "Arnold: full run only", ha="center")
    fig.tight_layout()
    save_png(fig, out_dir / "mechanisms.png")
    c = res["crux_trace"]
    print(f"Crux study trace: {100 * c['jobs_sharing_a_link']:.0f}% of jobs share a link; intensity ratio of sharing "
          f"pairs median {c['intensity_ratio']['median']:.1f}; comm share of an iteration alone median "
          f"{100 * c['comm_fraction_alone']['median']:.0f}%")
    return res


# ---- scenarios -----------------------------------------------------------------------------------
def _scenario_png(path: Path, res: dict) -> Path:
    """Three panels: iteration time per iteration, GPU utilisation per job, iteration-time spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    jobs = res["jobs"]
    names = [j["job"] for j in jobs]
    fig, ax = plt.subplots(1, 3, figsize=(13, 4))
    for j in jobs:
        ax[0].plot(np.arange(1, len(j["iteration_times_s"]) + 1), np.array(j["iteration_times_s"]) * 1e3,
                   marker=".", label=j["job"])
    ax[0].set_xlabel("iteration")
    ax[0].set_ylabel("iteration time (ms)")
    ax[0].legend(fontsize=7)
    ax[1].bar(names, [j["gpu_utilisation"] for j in jobs])
    ax[1].axhline(res["gpu_utilisation"], color="k", ls="--", lw=1, label="cluster")
    ax[1].set_ylim(0, 1)
    ax[1].set_ylabel("GPU utilisation (compute / allocated)")
    ax[1].legend(fontsize=7)
    ax[2].boxplot([np.array(j["iteration_times_s"]) * 1e3 for j in jobs])
    ax[2].set_xticks(np.arange(1, len(names) + 1), names)
    ax[2].set_ylabel("iteration time spread (ms)")
    for a in ax[1:]:
        a.tick_params(axis="x", labelrotation=30, labelsize=7)
    fig.suptitle(f"scenario {res['scenario']} ({res['routing']}, {res['topology']['name']})")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


def write_scenario(out: Path, res: dict) -> None:
    """``scenario.json`` + ``scenario.png`` of a scenario run into ``out`` (both appear together, at the end)."""
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:
        _write_json(st / "scenario.json", res)
        _scenario_png(st / "scenario.png", res)


def print_scenario(res: dict, name: str, seed: int) -> None:
    """The per-job table of a scenario run and its lossy links."""
    _table(f"scenario {name}: {res['topology']['name']}, {res['routing']}, seed {seed}, "
           f"{res['failures']} failure(s)",
           ["job", "GPUs", "iters", "mean iter ms", "p50 ms", "max ms", "spread max/min", "GPU util", "comm s (sum)"],
           [[j["job"], j["gpus"], j["iterations"], f"{1e3 * j['mean_iter_s']:.2f}", f"{1e3 * j['p50_iter_s']:.2f}",
             f"{1e3 * j['max_iter_s']:.2f}", f"{j['spread']:.3f}" if j["spread"] else "-",
             f"{j['gpu_utilisation']:.3f}", f"{sum(j['comm_s'].values()):.3f}"]
            for j in res["jobs"]])
    for lk in res.get("lossy", []):
        print(f"lossy {', '.join(lk['links'])} (loss {lk['loss']:g}): {lk['goodput_bytes'] / 1e9:.3f} GB delivered "
              f"through it, {lk['retransmitted_bytes'] / 1e9:.3f} GB resent")

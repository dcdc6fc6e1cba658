"""MELO study: go-back-N vs full-bitmap selective repeat vs MELO on the packet simulator.

Reproduces the *kind* of comparison in Lu et al., "Memory Efficient Loss Recovery for
Hardware-based Transport in Datacenter" (APNet 2017): throughput and flow completion time (FCT)
against the loss ratio and the number of connections, on-chip receiver state per connection, and
the sensitivity of MELO to the size of its shared pool. The paper reports up to 14.02x the
throughput of go-back-N and 3.11x lower p99 FCT "under certain loss ratio", with about 23 B of
extra on-chip state per connection on average. Its topology, rates, timeouts and workloads are not
given in what we read *(unconfirmed)*; ours are in :mod:`hwcosim.models.melo.sim` and :func:`study_config`.

Where we stand (full study, seed 0, ``hwcosim melo study``; quick numbers are close)
-----------------------------------------------------------------------------------
- **Throughput** (backlogged, i.i.d. loss). MELO's goodput equals full-bitmap SR's in every run
  (at the default pool of 8 BDP bits = 25 blocks it never ran dry; with an ample pool the two are
  identical by construction, which a test checks). MELO / go-back-N on one connection: 1.09x at
  0.1 %, 2.13x at 1 %, 3.40x at 2 %, 7.50x at 5 % loss; with 16 connections 1.07x at 1 % and
  1.51x at 5 %; with 64 connections at most 1.14x. The paper's 14.02x is not reached: go-back-N
  here wastes at most a window (2 BDP = 196 packets) per loss and a lost retransmission costs it
  one RTO of 100 us (RoCE's responder NACKs once per expected PSN); RoCE NICs default to
  millisecond timeouts and the paper's RTT/rate are unknown to us, either of which widens the
  gap. With many connections each has only a share of the BDP in flight, so a rewind is cheap
  and the ratio falls toward 1; bursty loss (Gilbert-Elliott, mean burst 4) also narrows it
  (1 connection, 5 %: 87.4 vs 27.5 Gb/s, 3.2x).
- **FCT** (16 connections, load 0.5, flows capped at 30 MB). Go-back-N / MELO p99 FCT: web search
  1.20x at 0.1 %, 2.23x at 1 %, 3.85x at 2 %, 13.3x at 5 %; data mining 2.69x at 1 %, 14.4x at
  5 %. The paper's 3.11x sits between our 1 % and 2 % points. Versus connection count (1 % loss,
  web search): 8.7x with one connection, 2.2-2.8x from 10 to 100,000.
- **Memory** (receiver on-chip state). Go-back-N 3.1 B (24-bit PSN + NACK flag); full-bitmap SR
  27.5 B (PSN + 196-bit window; it grows with the BDP); MELO's metadata entry is 5.9 B (24-bit
  PSN, two 5-bit pointers, 4-bit count, 9-bit ooo count) and the pool is shared, so the average
  in use is 5.9-6.5 B per connection from 10 to 100,000 connections and 15-23 B for one lonely
  connection at 1-5 % loss (peak 44 B); provisioned (table + pool) it is 17.6 B at 10 and 5.9 B at
  10,000 connections. The paper's ~23 B average likely counts more per-connection transport state
  than our reorder metadata; we report ours only.
- **Pool size** (64 connections, 5 % loss). 16 blocks (6.8 B/conn provisioned) reach the ample-pool
  goodput (95.0 Gb/s); 1 block still gives 87.0 Gb/s (9,766 packets dropped and NACKed, nothing
  lost), above go-back-N, because the fallback stays selective.

Timing: the quick study takes 19-35 s on 2 cores (load-dependent); the full one about 470 s of CPU (11.6 min
wall measured on a shared, loaded 2-core machine; about 4 min on 2 idle cores).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from hwcosim.models.errors import UsageError

from ..atomic import atomic_path, write_text
from .sim import SCHEMES, LossModel, SimParams, simulate

__all__ = ["study_config", "run_study", "write_study", "headline"]


def study_config(quick: bool = True) -> dict:
    """Every parameter of the study; ``quick`` is the < 60 s setting, otherwise the full one."""
    if quick:
        return {
            "losses": [0.0, 0.001, 0.005, 0.01, 0.02, 0.05],
            "tput_conns": [1, 16],
            "tput_duration_us": 2000.0,
            "fct_conns": 16,
            "fct_workloads": ["websearch"],
            "fct_flows": 200,
            "fct_load": 0.5,
            "fct_max_flow_bytes": 3e6,
            "conns": [1, 10, 100, 1000, 10000],
            "conns_loss": 0.01,
            "conns_duration_us": 2000.0,
            "conns_fct_flows": 150,
            "pool_conns": 64,
            "pool_loss": 0.05,
            "pool_blocks": [1, 2, 4, 8, 16, 32, 64],
            "pool_duration_us": 2000.0,
            "burst": 4.0,
        }
    return {
        "losses": [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05],
        "tput_conns": [1, 4, 16, 64],
        "tput_duration_us": 20000.0,
        "fct_conns": 16,
        "fct_workloads": ["websearch", "datamining"],
        "fct_flows": 1500,
        "fct_load": 0.5,
        "fct_max_flow_bytes": 30e6,
        "conns": [1, 10, 100, 1000, 10000, 100000],
        "conns_loss": 0.01,
        "conns_duration_us": 20000.0,
        "conns_fct_flows": 600,
        "pool_conns": 64,
        "pool_loss": 0.05,
        "pool_blocks": [1, 2, 4, 8, 16, 32, 64, 128],
        "pool_duration_us": 10000.0,
        "burst": 4.0,
    }


def _run(p: SimParams) -> dict:
    return simulate(p).summary()


def _plan(cfg: dict, seed: int) -> list[tuple[str, dict, SimParams]]:
    base = SimParams(seed=seed)
    runs = []
    for n in cfg["tput_conns"]:
        for loss in cfg["losses"]:
            for s in SCHEMES:
                p = replace(base, scheme=s, n_conns=n, loss=LossModel(loss), duration_us=cfg["tput_duration_us"])
                runs.append(("tput_vs_loss", {"n_conns": n, "loss": loss, "scheme": s}, p))
    for loss in cfg["losses"][1:]:
        for s in SCHEMES:
            p = replace(
                base,
                scheme=s,
                n_conns=1,
                loss=LossModel(loss, cfg["burst"]),
                duration_us=cfg["tput_duration_us"],
            )
            runs.append(("tput_vs_loss_bursty", {"n_conns": 1, "loss": loss, "scheme": s}, p))
    for wl in cfg["fct_workloads"]:
        for loss in cfg["losses"]:
            for s in SCHEMES:
                p = replace(
                    base,
                    scheme=s,
                    n_conns=cfg["fct_conns"],
                    loss=LossModel(loss),
                    workload=wl,
                    n_flows=cfg["fct_flows"],
                    load=cfg["fct_load"],
                    max_flow_bytes=cfg["fct_max_flow_bytes"],
                    duration_us=1e7,
                )
                runs.append(("fct_vs_loss", {"workload": wl, "loss": loss, "scheme": s}, p))
    for n in cfg["conns"]:
        for s in SCHEMES:
            p = replace(
                base,
                scheme=s,
                n_conns=n,
                loss=LossModel(cfg["conns_loss"]),
                duration_us=cfg["conns_duration_us"],
            )
            runs.append(("tput_vs_conns", {"n_conns": n, "scheme": s}, p))
            p = replace(
                base,
                scheme=s,
                n_conns=n,
                loss=LossModel(cfg["conns_loss"]),
                workload="websearch",
                n_flows=cfg["conns_fct_flows"],
                load=cfg["fct_load"],
                max_flow_bytes=cfg["fct_max_flow_bytes"],
                duration_us=1e7,
            )
            runs.append(("fct_vs_conns", {"n_conns": n, "scheme": s}, p))
    for pb in cfg["pool_blocks"]:
        p = replace(
            base,
            scheme="melo",
            n_conns=cfg["pool_conns"],
            loss=LossModel(cfg["pool_loss"]),
            pool_blocks=pb,
            duration_us=cfg["pool_duration_us"],
        )
        runs.append(("pool", {"pool_blocks": pb}, p))
    for s in ("gbn", "sr"):  # references for the pool plot
        p = replace(
            base,
            scheme=s,
            n_conns=cfg["pool_conns"],
            loss=LossModel(cfg["pool_loss"]),
            duration_us=cfg["pool_duration_us"],
        )
        runs.append(("pool_ref", {"scheme": s}, p))
    return runs


def run_study(quick: bool = True, seed: int = 0, jobs: int = 1, progress=None) -> dict:
    """Run every simulation of the study.

    Parameters
    ----------
    quick : bool
        The < 60 s setting (fewer, shorter runs) or the full one.
    seed : int
        Seed of every run (same seed, same numbers, whatever ``jobs``).
    jobs : int
        Worker processes.
    progress : callable or None
        Called as ``progress(done, total)`` after each run.

    Returns
    -------
    dict
        ``config``, ``runs`` (section -> list of run summaries with their keys), ``headline``
        (derived ratios and memory figures) and ``wall_s``.
    """
    if not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"jobs must be a positive int, not {jobs!r}")
    t0 = time.perf_counter()
    cfg = study_config(quick)
    plan = _plan(cfg, seed)
    params = [p for _, _, p in plan]
    out: list = []
    if jobs == 1:
        for i, p in enumerate(params):
            out.append(_run(p))
            if progress:
                progress(i + 1, len(params))
    else:
        # longest first keeps the workers busy to the end
        order = sorted(range(len(params)), key=lambda i: -_cost(params[i]))
        res: dict = {}
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            futs = {ex.submit(_run, params[i]): i for i in order}
            for k, f in enumerate(as_completed(futs)):
                res[futs[f]] = f.result()
                if progress:
                    progress(k + 1, len(params))
        out = [res[i] for i in range(len(params))]
    runs: dict[str, list] = {}
    for (section, key, _), summ in zip(plan, out, strict=True):
        runs.setdefault(section, []).append({**key, **summ})
    result = {
        "paper": "Lu et al., Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter, APNet 2017",
        "quick": quick,
        "seed": seed,
        "config": cfg,
        "defaults": SimParams(seed=seed).to_dict(),
        "runs": runs,
    }
    result["headline"] = headline(result)
    result["wall_s"] = time.perf_counter() - t0
    return result


def _cost(p: SimParams) -> float:
    if p.workload == "backlogged":
        return p.duration_us
    return p.n_flows * 50.0 * (1 + 20 * p.loss.rate)


def _get(rows, **kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    raise KeyError(kw)


def headline(result: dict) -> dict:
    """Derived figures: MELO/GBN goodput ratio, GBN/MELO p99 FCT ratio, memory per connection."""
    cfg, runs = result["config"], result["runs"]
    h: dict = {"tput_ratio_melo_over_gbn": {}, "p99_fct_ratio_gbn_over_melo": {}, "memory_B_per_conn": {}}
    for n in cfg["tput_conns"]:
        rows = runs["tput_vs_loss"]
        h["tput_ratio_melo_over_gbn"][f"n={n}"] = {
            str(loss): _get(rows, n_conns=n, loss=loss, scheme="melo")["goodput_gbps"]
            / max(1e-9, _get(rows, n_conns=n, loss=loss, scheme="gbn")["goodput_gbps"])
            for loss in cfg["losses"]
        }
    for wl in cfg["fct_workloads"]:
        rows = runs["fct_vs_loss"]
        h["p99_fct_ratio_gbn_over_melo"][wl] = {
            str(loss): _get(rows, workload=wl, loss=loss, scheme="gbn")["fct_p99_us"]
            / max(1e-9, _get(rows, workload=wl, loss=loss, scheme="melo")["fct_p99_us"])
            for loss in cfg["losses"]
        }
    rows = runs["tput_vs_conns"]
    for n in cfg["conns"]:
        g, s, m = (_get(rows, n_conns=n, scheme=x) for x in SCHEMES)
        h["memory_B_per_conn"][f"n={n}"] = {
            "gbn": g["mem_avg_B"],
            "sr": s["mem_avg_B"],
            "melo_avg": m["mem_avg_B"],
            "melo_peak": m["mem_peak_B"],
            "melo_provisioned": m["mem_provisioned_B"],
        }
    allm = [r for r in runs["tput_vs_loss"] + runs["tput_vs_conns"] if r["scheme"] == "melo"]
    h["melo_mem_avg_B_range"] = [min(r["mem_avg_B"] for r in allm), max(r["mem_avg_B"] for r in allm)]
    h["melo_mem_peak_B_range"] = [min(r["mem_peak_B"] for r in allm), max(r["mem_peak_B"] for r in allm)]
    h["max_tput_ratio"] = max(v for d in h["tput_ratio_melo_over_gbn"].values() for v in d.values())
    h["max_p99_fct_ratio"] = max(v for d in h["p99_fct_ratio_gbn_over_melo"].values() for v in d.values())
    return h


# ---- output ---------------------------------------------------------------------------------
_COL = {"gbn": "tab:red", "sr": "tab:blue", "melo": "tab:green"}


def _savefig(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")


def write_study(result: dict, out_dir: str | os.PathLike) -> list[Path]:
    """Write ``melo_study.json`` and PNG plots into ``out_dir``; return the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    cfg, runs = result["config"], result["runs"]
    paths = [write_text(out / "melo_study.json", json.dumps(result, indent=1, allow_nan=True) + "\n")]
    pct = [100 * x for x in cfg["losses"]]

    # goodput vs loss (i.i.d. per connection count, plus bursty for one connection)
    panels = [(f"{n} conn, i.i.d.", "tput_vs_loss", {"n_conns": n}) for n in cfg["tput_conns"]]
    panels.append((f"1 conn, bursty (mean {cfg['burst']:g})", "tput_vs_loss_bursty", {"n_conns": 1}))
    fig, axs = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False)
    for ax, (title, sec, kw) in zip(axs[0], panels, strict=True):
        losses = sorted({r["loss"] for r in runs[sec]})
        for s in SCHEMES:
            ax.plot(
                [100 * x for x in losses],
                [_get(runs[sec], loss=x, scheme=s, **kw)["goodput_gbps"] for x in losses],
                "o-",
                color=_COL[s],
                label=s,
            )
        ax.set(title=title, xlabel="loss ratio (%)", ylabel="goodput (Gb/s)", ylim=(0, None))
        ax.grid(alpha=0.3)
    axs[0][0].legend()
    _savefig(fig, out / "melo_throughput_vs_loss.png")
    paths.append(out / "melo_throughput_vs_loss.png")
    plt.close(fig)

    # FCT percentiles vs loss
    wls = cfg["fct_workloads"]
    fig, axs = plt.subplots(len(wls), 3, figsize=(12, 3.3 * len(wls)), squeeze=False)
    for i, wl in enumerate(wls):
        for j, (k, name) in enumerate((("fct_p50_us", "p50"), ("fct_p99_us", "p99"), ("fct_p999_us", "p99.9"))):
            ax = axs[i][j]
            for s in SCHEMES:
                ax.plot(
                    pct,
                    [_get(runs["fct_vs_loss"], workload=wl, loss=x, scheme=s)[k] for x in cfg["losses"]],
                    "o-",
                    color=_COL[s],
                    label=s,
                )
            ax.set(title=f"{wl}: {name} FCT", xlabel="loss ratio (%)", ylabel="FCT (us)", yscale="log")
            ax.grid(alpha=0.3)
    axs[0][0].legend()
    _savefig(fig, out / "melo_fct_vs_loss.png")
    paths.append(out / "melo_fct_vs_loss.png")
    plt.close(fig)

    # versus connection count: goodput, p99 FCT, memory per connection
    ns = cfg["conns"]
    fig, axs = plt.subplots(1, 3, figsize=(13, 3.5))
    for s in SCHEMES:
        axs[0].plot(
            ns,
            [_get(runs["tput_vs_conns"], n_conns=n, scheme=s)["goodput_gbps"] for n in ns],
            "o-",
            color=_COL[s],
            label=s,
        )
        axs[1].plot(
            ns,
            [_get(runs["fct_vs_conns"], n_conns=n, scheme=s)["fct_p99_us"] for n in ns],
            "o-",
            color=_COL[s],
            label=s,
        )
    axs[0].set(
        title=f"goodput, {100 * cfg['conns_loss']:g}% loss",
        xscale="log",
        xlabel="connections",
        ylabel="Gb/s",
        ylim=(0, None),
    )
    axs[1].set(title="p99 FCT (websearch)", xscale="log", yscale="log", xlabel="connections", ylabel="us")
    rows = runs["tput_vs_conns"]
    for label, s, k, style in (
        ("gbn", "gbn", "mem_avg_B", "o-"),
        ("sr (full bitmap)", "sr", "mem_avg_B", "o-"),
        ("melo avg in use", "melo", "mem_avg_B", "o-"),
        ("melo peak in use", "melo", "mem_peak_B", "s--"),
        ("melo provisioned", "melo", "mem_provisioned_B", "^:"),
    ):
        axs[2].plot(ns, [_get(rows, n_conns=n, scheme=s)[k] for n in ns], style, color=_COL[s], label=label)
    axs[2].set(
        title="on-chip receiver state",
        xscale="log",
        yscale="log",
        xlabel="connections",
        ylabel="bytes / connection",
    )
    axs[2].legend(fontsize=7)
    for ax in axs:
        ax.grid(alpha=0.3)
    axs[0].legend()
    _savefig(fig, out / "melo_vs_conns.png")
    paths.append(out / "melo_vs_conns.png")
    plt.close(fig)

    # pool-size sensitivity
    pbs = cfg["pool_blocks"]
    rows = runs["pool"]
    fig, axs = plt.subplots(1, 3, figsize=(13, 3.5))
    axs[0].plot(pbs, [_get(rows, pool_blocks=b)["goodput_gbps"] for b in pbs], "o-", color=_COL["melo"], label="melo")
    for s in ("gbn", "sr"):
        g = _get(runs["pool_ref"], scheme=s)["goodput_gbps"]
        axs[0].axhline(g, color=_COL[s], ls="--", label=f"{s} (no pool)")
    axs[0].legend(fontsize=7)
    axs[0].set(
        title=f"MELO goodput, {cfg['pool_conns']} conns, {100 * cfg['pool_loss']:g}% loss",
        xscale="log",
        xlabel="pool blocks",
        ylabel="Gb/s",
        ylim=(0, None),
    )
    axs[1].plot(pbs, [_get(rows, pool_blocks=b)["melo_nack_pool"] for b in pbs], "o-", color=_COL["melo"])
    axs[1].set(title="packets dropped for lack of blocks", xscale="log", xlabel="pool blocks")
    axs[2].plot(pbs, [_get(rows, pool_blocks=b)["mem_provisioned_B"] for b in pbs], "o-", color=_COL["melo"])
    axs[2].set(title="provisioned bytes / connection", xscale="log", xlabel="pool blocks")
    for ax in axs:
        ax.grid(alpha=0.3)
    _savefig(fig, out / "melo_pool.png")
    paths.append(out / "melo_pool.png")
    plt.close(fig)
    return paths

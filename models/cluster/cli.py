"""``hwcosim cluster`` subcommands and the cluster benchmarks.

- ``hwcosim cluster arnold|c4p|crux [--quick] [-o DIR] [--seed N]``: one study each, JSON + PNG +
  a table; outputs under ``build/cluster`` by default.
- ``hwcosim cluster speed [--gpus N] [--jobs N]``: simulated seconds per wall second on the
  Lingjun 2023 topology.

Benchmarks for ``hwcosim bench``: :func:`bench_cluster_speed`, :func:`bench_arnold`,
:func:`bench_c4p`, :func:`bench_crux` (``(out_dir, quick) -> dict``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["register", "main", "bench_cluster_speed", "bench_arnold", "bench_c4p", "bench_crux", "speed_run"]


def _fail(msg: str):
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def _out_dir(arg: str | None) -> Path:
    out = Path(arg if arg else "build/cluster")
    if out.exists() and not out.is_dir():
        _fail(f"output path {str(out)!r} exists and is not a directory; pass -o DIR")
    return out


def _write_json(path: Path, obj) -> Path:
    from ..atomic import write_text

    def conv(o):
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        raise TypeError(type(o))

    return write_text(path, json.dumps(obj, indent=1, default=conv) + "\n")


def _bar_png(path: Path, labels, groups: dict[str, list[float]], ylabel: str, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..atomic import atomic_path

    fig, ax = plt.subplots(figsize=(7, 4))
    n = len(groups)
    x = np.arange(len(labels))
    for i, (name, vals) in enumerate(groups.items()):
        ax.bar(x + (i - (n - 1) / 2) * 0.8 / n, vals, 0.8 / n, label=name)
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


def _table(title, cols, rows):
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    Console().print(t)


# ---- studies -------------------------------------------------------------------------------------
def bench_arnold(out_dir: Path, quick: bool, seed: int = 0, alpha: float = 0.5) -> dict:
    from .arnold import POLICIES, run_study

    res = run_study(quick=quick, seed=seed, alpha=alpha, beta=1 - alpha, time_limit=10.0 if quick else 60.0)
    _write_json(out_dir / "arnold.json", res)
    names = [p for p in POLICIES if p != "arnold"]
    st = res["settings"]
    _bar_png(out_dir / "arnold.png", list(st), {p: [st[s]["ratio_mean"][p] for s in st] for p in names},
             "weighted max spread / Arnold's (mean)", "Arnold vs baselines (higher = Arnold better)")
    rows = []
    for s, v in st.items():
        d0 = v["draws"][0]
        rows.append([s, f"{v['minipods']}/{v['free_nodes']}", *(f"{v['ratio_mean'][p]:.2f}/{v['ratio_max'][p]:.2f}"
                                                              for p in names),
                     f"{v['fits_one_fraction']:.0%}",
                     " ".join(f"{p}={d0[p]['iter_s']:.3f}" for p in POLICIES if "iter_s" in d0[p]) or "-"])
    _table(f"Arnold: baseline weighted max spread / Arnold's, mean/max over {res['draws']} draws "
           f"(alpha={res['alpha']})", ["setting", "minipods/free", *names, "job fits 1 pod", "iter s (draw 0)"], rows)
    print("paper: up to 1.67x, mean 1.2x lower; all tie in the smallest setting")
    return res


def bench_c4p(out_dir: Path, quick: bool, seed: int = 0) -> dict:
    from .c4p import run_study

    res = run_study(quick=quick, seed=seed)
    _write_json(out_dir / "c4p.json", res)
    sm = res["summary"]
    _bar_png(out_dir / "c4p.png", list(sm), {"ECMP": [sm[s]["busbw_ecmp_GBps"] for s in sm],
                                             "C4P": [sm[s]["busbw_c4p_GBps"] for s in sm]},
             "all-reduce bus bandwidth (GB/s per GPU)", f"C4P vs ECMP (line rate {res['line_busbw_GBps']:.0f} GB/s)")
    _table("C4P vs ECMP (mean over seeds)", ["scenario", "busbw ECMP GB/s", "busbw C4P GB/s",
                                             "comm time -%", "iteration time -%"],
           [[s, f"{v['busbw_ecmp_GBps']:.1f}", f"{v['busbw_c4p_GBps']:.1f}", f"{100 * v['comm_reduction_mean']:.1f}",
             f"{100 * v['iter_reduction_mean']:.1f}"] for s, v in sm.items()])
    print("paper: communication cost -15% (production jobs); see models/cluster/c4p.py for why ours differs")
    return res


def bench_crux(out_dir: Path, quick: bool, seed: int = 0, levels: int = 8) -> dict:
    from .crux import SCHEMES, run_study

    res = run_study(quick=quick, seed=seed, K=levels)
    _write_json(out_dir / "crux.json", res)
    _bar_png(out_dir / "crux.png", [f"seed {r['seed']}" for r in res["runs"]],
             {sc: [r[sc] for r in res["runs"]] for sc in SCHEMES}, "GPU utilisation", "Crux vs baselines")
    _table(f"Crux: GPU utilisation (K={levels}, horizon {res['horizon_s']} s)", ["scheme", "utilisation",
                                                                                "Crux gain"],
           [[sc, f"{res['mean_utilisation'][sc]:.3f}",
             f"{100 * res['crux_gain_over'][sc]:+.1f}%" if sc in res["crux_gain_over"] else "-"] for sc in SCHEMES])
    print("paper: +8.3-14.8% on 96 GPUs (testbed), 13-23% over baselines (simulation)")
    return res


def speed_run(n_gpus: int = 2048, n_jobs: int = 16, iterations: int = 5, seed: int = 0) -> dict:
    """Simulated seconds per wall second: ``n_jobs`` DP x TP=8 jobs on random Lingjun hosts."""
    from .engine import Simulator
    from .job import JobSpec, placement
    from .topology import lingjun_2023

    topo = lingjun_2023()
    hosts_per_job = n_gpus // (8 * n_jobs)
    if hosts_per_job < 1 or n_gpus > topo.n_gpus:
        raise ValueError(f"--gpus {n_gpus} with --jobs {n_jobs}: need 8 * jobs <= gpus <= {topo.n_gpus}")
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


def bench_cluster_speed(out_dir: Path, quick: bool) -> dict:
    res = [speed_run(1024, 8, 3 if quick else 5)]
    if not quick:
        res.append(speed_run(4096, 32, 5))
    _write_json(out_dir / "cluster_speed.json", {"runs": res})
    _table("Cluster simulator speed (Lingjun 2023 topology, ECMP, ring all-reduce)",
           ["GPUs", "jobs", "sim s", "wall s", "sim s / wall s", "rate recomputes"],
           [[r["gpus"], r["jobs"], f"{r['sim_s']:.3f}", f"{r['wall_s']:.2f}", f"{r['sim_s_per_wall_s']:.3f}",
             r["rate_recomputes"]] for r in res])
    return {"runs": res}


# ---- argparse ------------------------------------------------------------------------------------
def _study(fn):
    def run(args) -> int:
        if args.seed < 0:
            _fail(f"--seed must be >= 0, not {args.seed}")
        out = _out_dir(args.output)
        t0 = time.monotonic()
        extra = {}
        if getattr(args, "alpha", None) is not None:
            if not 0 <= args.alpha <= 1:
                _fail(f"--alpha must be in [0, 1], not {args.alpha}")
            extra["alpha"] = args.alpha
        if getattr(args, "levels", None) is not None:
            if args.levels < 1:
                _fail(f"--levels must be >= 1, not {args.levels}")
            extra["levels"] = args.levels
        fn(out, args.quick, seed=args.seed, **extra)
        print(f"wrote JSON + PNG to {out}/ ({time.monotonic() - t0:.1f} s)")
        return 0

    return run


def _cmd_speed(args) -> int:
    if args.gpus < 8 or args.jobs < 1:
        _fail(f"--gpus must be >= 8 and --jobs >= 1, not {args.gpus} and {args.jobs}")
    try:
        r = speed_run(args.gpus, args.jobs, args.iterations, args.seed)
    except ValueError as e:
        _fail(str(e))
    out = _out_dir(args.output)
    _write_json(out / "cluster_speed.json", r)
    _table("Cluster simulator speed", list(r), [[f"{v:.3f}" if isinstance(v, float) else v for v in r.values()]])
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cluster`` (arnold, c4p, crux, speed) to an argparse subparsers object."""
    p = subparsers.add_parser("cluster", help="GPU-cluster simulator studies: Arnold, C4P, Crux",
                              description="Flow-level GPU-cluster simulator and the Arnold, C4P and Crux studies.")
    sub = p.add_subparsers(dest="cluster_cmd", metavar="{arnold,c4p,crux,speed}")
    sub.required = True
    for name, fn, hlp in (("arnold", bench_arnold, "Arnold MIP placement vs best-fit/random/packing/RB-FM"),
                          ("c4p", bench_c4p, "C4P global path planning vs ECMP (busbw, iteration time)"),
                          ("crux", bench_crux, "Crux intensity scheduling vs ECMP and Sincronia-like")):
        s = sub.add_parser(name, help=hlp, description=hlp + "; writes JSON + PNG.")
        s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
        s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster)")
        s.add_argument("--seed", type=int, default=0, help="seed (default 0)")
        if name == "arnold":
            s.add_argument("--alpha", type=float, default=0.5, help="DP weight; beta = 1 - alpha (default 0.5)")
        if name == "crux":
            s.add_argument("--levels", type=int, default=8, help="hardware priority levels K (default 8)")
        s.set_defaults(func=_study(fn))
    s = sub.add_parser("speed", help="simulated seconds per wall second on the Lingjun topology")
    s.add_argument("--gpus", type=int, default=2048)
    s.add_argument("--jobs", type=int, default=16)
    s.add_argument("--iterations", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/cluster)")
    s.set_defaults(func=_cmd_speed)
    return p


def main(argv=None) -> int:
    """Stand-alone entry: ``python -m models.cluster.cli c4p --quick``."""
    ap = argparse.ArgumentParser(prog="hwcosim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    register(sub)
    args = ap.parse_args(["cluster", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

"""BeamRaster capacity study: sum rate vs SNR, users K and antennas M for every precoder; cost.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019. The paper's figures were not available to us *(unconfirmed)*; this study
measures our implementation (:mod:`models.beamraster.precoders`) on our channels
(:mod:`models.beamraster.channel`). Precoders: ZF, MMSE, MRT (conjugate), the plain DFT
codebook, BeamRaster with first-order pre-distortion (``beamraster``, what the RTL's coefficient
budget targets) and with exact pre-distortion (``beamraster-exact``, a ``K x K`` inverse).

Outputs: sum rate (bit/s/Hz, averaged over subcarriers and channel draws), the fraction of ZF's
sum rate each method keeps, the ZF closed form for i.i.d. Rayleigh beside the simulated ZF, and
per-update arithmetic cost (complex multiplies counted, and measured numpy time as a ratio to
ZF's in the same process).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..atomic import atomic_path, write_text
from .channel import ChannelParams, make_channel
from .precoders import PRECODERS, beamraster, sum_rate, update_cost, zf_sum_rate_closed_form

__all__ = ["METHODS", "study_config", "run_study", "write_study", "precoder"]

METHODS = ("zf", "mmse", "mrt", "codebook", "beamraster", "beamraster-exact")


def precoder(name: str, H: np.ndarray, snr: float) -> np.ndarray:
    if name == "beamraster-exact":
        return beamraster(H, snr, order=None)
    if name not in PRECODERS:
        raise ValueError(f"unknown precoder {name!r}; choose one of {', '.join(METHODS)}")
    return PRECODERS[name](H, snr)


def study_config(quick: bool = True) -> dict:
    """Every parameter of the study; ``quick`` runs in seconds."""
    return {
        "snr_db": [-5, 0, 5, 10, 15, 20, 25, 30] if not quick else [0, 10, 20, 30],
        "base": {"M": 64, "K": 8, "snr_db": 20},
        "K_list": [2, 4, 8, 16, 24, 32] if not quick else [4, 8, 16],
        "M_list": [16, 32, 64, 128, 256] if not quick else [16, 64, 128],
        "kinds": ["geometric", "rayleigh"],
        "n_sc": 16 if quick else 32,
        "draws": 3 if quick else 10,
        "cost_M_K": [[64, 8], [64, 16], [128, 16], [256, 32]],
        "timing_repeats": 3 if quick else 10,
        "seed": 0,
    }


def _rates(kind: str, M: int, K: int, snr_db: float, cfg: dict) -> dict:
    snr = 10 ** (snr_db / 10)
    acc = {m: [] for m in METHODS}
    for d in range(cfg["draws"]):
        H = make_channel(ChannelParams(M=M, K=K, n_sc=cfg["n_sc"], kind=kind, seed=cfg["seed"] + 1000 * d + M + K))
        for m in METHODS:
            acc[m].append(sum_rate(H, precoder(m, H, snr), snr))
    return {m: float(np.mean(v)) for m, v in acc.items()}


def _timing(M: int, K: int, repeats: int, seed: int) -> dict:
    H = make_channel(ChannelParams(M=M, K=K, n_sc=64, kind="geometric", seed=seed))
    out = {}
    for m in METHODS:
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            precoder(m, H, 100.0)
            best = min(best, time.perf_counter() - t0)
        out[m] = best
    return {m: out[m] / out["zf"] for m in METHODS} | {"zf_seconds_per_64_subcarriers": out["zf"]}


def run_study(quick: bool = True, progress=None) -> dict:
    cfg = study_config(quick)
    t0 = time.monotonic()
    b = cfg["base"]
    res: dict = {"config": cfg, "vs_snr": {}, "vs_K": {}, "vs_M": {}}
    steps = len(cfg["kinds"]) * (len(cfg["snr_db"]) + len(cfg["K_list"]) + len(cfg["M_list"]))
    done = 0

    def tick():
        nonlocal done
        done += 1
        if progress:
            progress(done, steps)

    for kind in cfg["kinds"]:
        res["vs_snr"][kind] = []
        for s in cfg["snr_db"]:
            r = _rates(kind, b["M"], b["K"], s, cfg)
            if kind == "rayleigh":
                r["zf_closed_form"] = zf_sum_rate_closed_form(b["M"], b["K"], 10 ** (s / 10))
            res["vs_snr"][kind].append({"snr_db": s, **r})
            tick()
        res["vs_K"][kind] = []
        for K in cfg["K_list"]:
            r = _rates(kind, b["M"], K, b["snr_db"], cfg)
            if kind == "rayleigh":
                r["zf_closed_form"] = zf_sum_rate_closed_form(b["M"], K, 10 ** (b["snr_db"] / 10))
            res["vs_K"][kind].append({"K": K, **r})
            tick()
        res["vs_M"][kind] = []
        for M in cfg["M_list"]:
            r = _rates(kind, M, b["K"], b["snr_db"], cfg)
            if kind == "rayleigh":
                r["zf_closed_form"] = zf_sum_rate_closed_form(M, b["K"], 10 ** (b["snr_db"] / 10))
            res["vs_M"][kind].append({"M": M, **r})
            tick()
    res["cost"] = []
    for M, K in cfg["cost_M_K"]:
        ops = {m: update_cost("beamraster" if m.startswith("beamraster") else m, M, K,
                              order=None if m == "beamraster-exact" else 1) for m in METHODS}
        res["cost"].append({"M": M, "K": K, "cmul_per_update": {m: ops[m]["cmul_per_update"] for m in METHODS},
                            "ops_per_frame": {m: ops[m]["ops_per_frame"] for m in METHODS},
                            "time_ratio_to_zf": _timing(M, K, cfg["timing_repeats"], cfg["seed"])})
    res["headline"] = _headline(res)
    res["wall_s"] = round(time.monotonic() - t0, 1)
    return res


def _headline(res: dict) -> dict:
    out = {}
    for kind in res["vs_snr"]:
        out[kind] = {
            m: {"fraction_of_zf_vs_snr": {str(r["snr_db"]): r[m] / r["zf"] for r in res["vs_snr"][kind]},
                "fraction_of_zf_vs_M": {str(r["M"]): r[m] / r["zf"] for r in res["vs_M"][kind]}}
            for m in METHODS if m != "zf"}
    ray = [r for sweep in ("vs_snr", "vs_K", "vs_M") for r in res[sweep].get("rayleigh", [])]
    out["zf_closed_form_max_rel_err"] = max(abs(r["zf"] / r["zf_closed_form"] - 1) for r in ray)
    return out


def write_study(res: dict, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    paths = [write_text(out_dir / "beamraster_study.json", json.dumps(res, indent=1) + "\n")]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = res["config"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for row, kind in enumerate(cfg["kinds"]):
        for col, (sweep, key, label) in enumerate((("vs_snr", "snr_db", "SNR (dB)"), ("vs_K", "K", "users K"),
                                                    ("vs_M", "M", "antennas M"))):
            ax = axes[row][col]
            rows = res[sweep][kind]
            xs = [r[key] for r in rows]
            for m in METHODS:
                ax.plot(xs, [r[m] for r in rows], "-o", ms=3, label=m)
            if kind == "rayleigh":
                ax.plot(xs, [r["zf_closed_form"] for r in rows], "k:", label="ZF closed form")
            if key == "M":
                ax.set_xscale("log", base=2)
            ax.set_xlabel(label)
            ax.set_ylabel("sum rate (bit/s/Hz)")
            b = cfg["base"]
            fixed = {"snr_db": f"M={b['M']}, K={b['K']}", "K": f"M={b['M']}, {b['snr_db']} dB",
                     "M": f"K={b['K']}, {b['snr_db']} dB"}[key]
            ax.set_title(f"{kind}: {fixed}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(out_dir / "beamraster_study.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    paths.append(out_dir / "beamraster_study.png")
    return paths

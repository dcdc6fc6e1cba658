"""BeamRaster capacity study: sum rate vs SNR, users K and antennas M for every precoder; cost.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019. The paper's figures were not available to us *(unconfirmed)*; this study
measures our implementation (:mod:`hwcosim.models.beamraster.precoders`) on our channels
(:mod:`hwcosim.models.beamraster.channel`). Precoders: ZF, MMSE, MRT (conjugate), the plain DFT
codebook, BeamRaster with first-order pre-distortion (``beamraster``, what the RTL's coefficient
budget targets) and with exact pre-distortion (``beamraster-exact``, a ``K x K`` inverse).

Outputs: sum rate (bit/s/Hz, averaged over subcarriers and channel draws), the fraction of ZF's
sum rate each method keeps (vs SNR, K and M), the ZF closed form for i.i.d. Rayleigh beside the
simulated ZF, and:

- ``cost``: per-update arithmetic (complex multiplies counted by
  :func:`hwcosim.models.beamraster.precoders.update_cost`, rule in ``cost_rule``) and the measured numpy
  time of *the same per-update work* (:data:`UPDATE_STEPS`: ZF/MMSE/MRT form ``W``; codebook
  and BeamRaster compute the grating table, BeamRaster then ``P``; beam selection, done once per
  frame, is timed apart as ``selection_ratio_to_zf``; BeamRaster's ``W`` is never formed, its
  datapath synthesises the beams). Timing: the methods run round-robin ``timing_repeats`` times
  on ``timing_n_sc`` subcarriers; each round gives every method's time over ZF's of the same
  round; we report the median ratio and its interquartile range.
- ``grouping``: the sum-rate loss of sharing one pre-distortion matrix per ``g`` subcarriers
  (the RTL loads one per 12, an LTE resource block; the other sweeps compute one per
  subcarrier), on the 1200 used subcarriers of a 2048-point OFDM symbol (20 MHz LTE-like:
  channel delays up to ``max_delay = 8`` samples of 1/30.72 MHz, 260 ns, **ours**).
- ``tracking``: channels changing over time (``c`` users move per update: their channel is
  redrawn, **ours**), the grating table updated incrementally
  (:class:`hwcosim.models.beamraster.precoders.GratingTable`), BeamRaster precoding from it; the table
  rows recomputed and the measured update time against a full recompute.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError

from ..atomic import save_png, write_text
from .channel import ChannelParams, make_channel
from .precoders import (
    COUNTING_RULE,
    PRECODERS,
    GratingTable,
    beamraster,
    beamraster_coefficients,
    dft_beams,
    grating_table,
    mmse,
    mrt,
    select_beams,
    strongest_beams,
    sum_rate,
    update_cost,
    zf,
    zf_sum_rate_closed_form,
)

__all__ = ["METHODS", "UPDATE_STEPS", "study_config", "run_study", "write_study", "precoder", "grouping_loss",
           "tracking"]

METHODS = ("zf", "mmse", "mrt", "codebook", "beamraster", "beamraster-exact")


def precoder(name: str, H: np.ndarray, snr: float) -> np.ndarray:
    if name == "beamraster-exact":
        return beamraster(H, snr, order=None)
    if name not in PRECODERS:
        raise UsageError(f"unknown precoder {name!r}; choose one of {', '.join(METHODS)}")
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
        "timing_repeats": 7 if quick else 31,
        "timing_n_sc": 64 if quick else 128,
        "grouping": {"M": 64, "K_list": [8, 16], "n_fft": 2048, "n_sc": 1200, "sizes": [1, 2, 4, 6, 12, 24, 48],
                     "draws": 2 if quick else 8, "snr_db": 20},
        "tracking": {"M": 64, "K": 16, "n_sc": 64 if quick else 256, "moved": [1, 2, 4, 8, 16],
                     "steps": 4 if quick else 12, "snr_db": 20},
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


#: The per-update work of each method, what ``update_cost`` counts: ``(H, snr, beams) -> coefficients``.
#: ``beams`` come from the once-per-frame selection (timed apart).
UPDATE_STEPS = {
    "zf": lambda H, snr, beams: zf(H),
    "mmse": lambda H, snr, beams: mmse(H, snr),
    "mrt": lambda H, snr, beams: mrt(H),
    "codebook": lambda H, snr, beams: grating_table(H),
    "beamraster": lambda H, snr, beams: beamraster_coefficients(grating_table(H), beams, 1),
    "beamraster-exact": lambda H, snr, beams: beamraster_coefficients(grating_table(H), beams, None),
}

TIMING_RULE = ("time_ratio_to_zf: numpy time of each method's per-update work (UPDATE_STEPS, the work "
               "cmul_per_update counts) over ZF's in the same round; methods run round-robin timing_repeats times "
               "on timing_n_sc subcarriers; median and interquartile range [q25, q75] of the per-round ratios. "
               "selection_ratio_to_zf: the once-per-frame wideband beam selection (beam power average + choice) "
               "over ZF's per-update time for all timing_n_sc subcarriers.")


def _quartiles(x) -> dict:
    q25, q50, q75 = np.percentile(np.asarray(x, dtype=np.float64), [25, 50, 75])
    return {"median": float(q50), "iqr": [float(q25), float(q75)]}


def _timing(M: int, K: int, repeats: int, n_sc: int, seed: int) -> dict:
    snr = 100.0
    H = make_channel(ChannelParams(M=M, K=K, n_sc=n_sc, kind="geometric", seed=seed))
    T = grating_table(H)
    beams = select_beams(np.mean(np.abs(T) ** 2, axis=0), 1.0 / snr)
    frame_steps = {"codebook": lambda: strongest_beams(np.mean(np.abs(T) ** 2, axis=0)),
                   "beamraster": lambda: select_beams(np.mean(np.abs(T) ** 2, axis=0), 1.0 / snr)}
    for m in METHODS:  # warm-up
        UPDATE_STEPS[m](H, snr, beams)
    t = {m: [] for m in METHODS}
    tf = {m: [] for m in frame_steps}
    for _ in range(repeats):
        for m in METHODS:
            t0 = time.perf_counter()
            UPDATE_STEPS[m](H, snr, beams)
            t[m].append(time.perf_counter() - t0)
        for m, fn in frame_steps.items():
            t0 = time.perf_counter()
            fn()
            tf[m].append(time.perf_counter() - t0)
    zf_t = np.asarray(t["zf"])
    out = {m: _quartiles(np.asarray(t[m]) / zf_t) for m in METHODS}
    sel = {m: _quartiles(np.asarray(tf[m]) / zf_t) for m in frame_steps}
    return {"time_ratio_to_zf": {m: out[m]["median"] for m in METHODS},
            "time_ratio_iqr": {m: out[m]["iqr"] for m in METHODS},
            "selection_ratio_to_zf": {m: sel[m]["median"] for m in sel},
            "zf_update_us_per_subcarrier": float(np.median(zf_t)) / n_sc * 1e6,
            "timing_n_sc": n_sc, "repeats": repeats}


def grouping_loss(cfg: dict) -> dict:
    """Sum-rate loss of one pre-distortion matrix per ``g`` subcarriers (geometric channels).

    Beams are the wideband selection (the same for every ``g``); the group's matrix is the one
    computed for its first subcarrier, as the host does for the RTL (:func:`datapath.scenario`).
    Rayleigh channels are i.i.d. per subcarrier (no coherence bandwidth), so grouping is not
    measured on them.
    """
    g = cfg["grouping"]
    snr = 10 ** (g["snr_db"] / 10)
    F = dft_beams(g["M"])
    out = []
    for K in g["K_list"]:
        acc = {order: {sz: [] for sz in g["sizes"]} for order in ("beamraster", "beamraster-exact")}
        zf_r = []
        for d in range(g["draws"]):
            H = make_channel(ChannelParams(M=g["M"], K=K, n_sc=g["n_fft"], kind="geometric",
                                           seed=cfg["seed"] + 7000 + 100 * d + K))[: g["n_sc"]]
            zf_r.append(sum_rate(H, zf(H), snr))
            for name, order in (("beamraster", 1), ("beamraster-exact", None)):
                _, beams, P = beamraster(H, snr, order=order, return_parts=True)
                Fb = F[:, beams]
                sc = np.arange(H.shape[0])
                for sz in g["sizes"]:
                    acc[name][sz].append(sum_rate(H, Fb @ P[(sc // sz) * sz], snr))
        row = {"M": g["M"], "K": K, "zf": float(np.mean(zf_r))}
        for name in acc:
            rates = {sz: float(np.mean(v)) for sz, v in acc[name].items()}
            row[name] = {"sum_rate": {str(sz): r for sz, r in rates.items()},
                         "loss_vs_per_subcarrier": {str(sz): 1 - r / rates[1] for sz, r in rates.items()}}
        out.append(row)
    return {"note": "one pre-distortion matrix per g subcarriers (from the group's first subcarrier) vs one per "
                    "subcarrier; geometric channels, 1200 used of 2048 subcarriers (path delays < 8 samples of "
                    "the 2048-point symbol); the RTL uses g = 12",
            "results": out}


def tracking(cfg: dict) -> dict:
    """Channels that change over time, the grating table updated incrementally.

    Per update ``c`` users move (their channel is redrawn, **ours**); :meth:`GratingTable.update`
    finds them by comparing channels and recomputes only their rows. BeamRaster then re-selects
    beams and recomputes ``P`` from the table. Recorded: rows recomputed against ``K`` for a
    full recompute, the measured table-update time over a full recompute's (median, IQR over
    updates), that the table equals a full recompute, and BeamRaster's fraction of ZF's sum rate.
    """
    g = cfg["tracking"]
    M, K, S = g["M"], g["K"], g["n_sc"]
    snr = 10 ** (g["snr_db"] / 10)
    out = []
    for c in g["moved"]:
        rng = np.random.default_rng(cfg["seed"] + 31 * c)
        H = make_channel(ChannelParams(M=M, K=K, n_sc=S, seed=cfg["seed"] + 5000 + c))
        gt = GratingTable(H)
        rows0 = gt.updates
        ratios, frac, err = [], [], 0.0
        for step in range(g["steps"]):
            moved = rng.choice(K, size=c, replace=False)
            Hn = H.copy()
            Hn[:, moved] = make_channel(ChannelParams(M=M, K=K, n_sc=S, seed=cfg["seed"] + 90000 + 1000 * c + step))[
                :, moved]
            H = Hn
            for _ in range(g.get("timing_repeats", 3)):  # alternate, one ratio per pair
                probe = gt.copy()  # the same state, to time the update on
                t0 = time.perf_counter()
                probe.update(H)
                t_inc = time.perf_counter() - t0
                t0 = time.perf_counter()
                full = grating_table(H)
                t_full = time.perf_counter() - t0
                ratios.append(t_inc / t_full)
            found = gt.update(H)
            if sorted(found.tolist()) != sorted(moved.tolist()):
                raise RuntimeError(f"grating table found users {found.tolist()} changed, not {sorted(moved.tolist())}")
            err = max(err, float(np.abs(gt.T - full).max()))
            _, beams, P = beamraster(H, snr, order=1, T=gt.T, return_parts=True)
            W = dft_beams(M)[:, beams] @ P
            frac.append(sum_rate(H, W, snr) / sum_rate(H, zf(H), snr))
        q = _quartiles(ratios)
        fft = (M // 2) * int(np.log2(M))
        out.append({"moved_per_update": c, "updates": g["steps"],
                    "rows_recomputed_per_update": (gt.updates - rows0) / g["steps"],
                    "rows_full_recompute": K,
                    "table_cmul_per_update": {"incremental": c * S * fft, "full": K * S * fft},
                    "time_ratio_incremental_over_full": q["median"], "time_ratio_iqr": q["iqr"],
                    "max_abs_diff_vs_full_recompute": err,
                    "beamraster_fraction_of_zf": float(np.mean(frac))})
    return {"M": M, "K": K, "n_sc": S, "snr_db": g["snr_db"],
            "note": "grating table = user x beam gains T = H F; cross-beam correlation of the selected beams "
                    "G = T[:, :, beams]; moved users are found by comparing channels and only their rows "
                    "recomputed", "results": out}


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
    res["cost_rule"] = COUNTING_RULE
    res["timing_rule"] = TIMING_RULE
    res["cost"] = []
    for M, K in cfg["cost_M_K"]:
        ops = {m: update_cost("beamraster" if m.startswith("beamraster") else m, M, K,
                              order=None if m == "beamraster-exact" else 1) for m in METHODS}
        res["cost"].append({"M": M, "K": K, "cmul_per_update": {m: ops[m]["cmul_per_update"] for m in METHODS},
                            "ops_per_frame": {m: ops[m]["ops_per_frame"] for m in METHODS},
                            "datapath_cmul_per_symbol": {m: ops[m]["datapath_cmul_per_symbol"] for m in METHODS},
                            **_timing(M, K, cfg["timing_repeats"], cfg["timing_n_sc"], cfg["seed"])})
    res["grouping"] = grouping_loss(cfg)
    res["tracking"] = tracking(cfg)
    res["headline"] = _headline(res)
    res["wall_s"] = round(time.monotonic() - t0, 1)
    return res


def _headline(res: dict) -> dict:
    out = {}
    for kind in res["vs_snr"]:
        out[kind] = {
            m: {"fraction_of_zf_vs_snr": {str(r["snr_db"]): r[m] / r["zf"] for r in res["vs_snr"][kind]},
                "fraction_of_zf_vs_K": {str(r["K"]): r[m] / r["zf"] for r in res["vs_K"][kind]},
                "fraction_of_zf_vs_M": {str(r["M"]): r[m] / r["zf"] for r in res["vs_M"][kind]}}
            for m in METHODS if m != "zf"}
    ray = [r for sweep in ("vs_snr", "vs_K", "vs_M") for r in res[sweep].get("rayleigh", [])]
    out["zf_closed_form_max_rel_err"] = max(abs(r["zf"] / r["zf_closed_form"] - 1) for r in ray)
    b = res["config"]["base"]
    base = [r for r in res["vs_K"].get("geometric", []) if r["K"] == b["K"]]
    if base:
        r = base[0]
        out["base_point"] = {"kind": "geometric", **b, "zf": r["zf"], "beamraster": r["beamraster"],
                             "beamraster-exact": r["beamraster-exact"],
                             "beamraster_fraction_of_zf": r["beamraster"] / r["zf"],
                             "beamraster-exact_fraction_of_zf": r["beamraster-exact"] / r["zf"]}
    if "grouping" in res:
        out["grouping_loss_12_subcarriers"] = {
            str(r["K"]): {m: r[m]["loss_vs_per_subcarrier"].get("12") for m in ("beamraster", "beamraster-exact")}
            for r in res["grouping"]["results"]}
    if "tracking" in res:
        out["tracking_time_ratio_incremental_over_full"] = {
            str(r["moved_per_update"]): r["time_ratio_incremental_over_full"] for r in res["tracking"]["results"]}
    return out


def _plot_cost(ax, res: dict) -> None:
    """Counted complex multiplies per update (bars) and measured time ratio to ZF (median, IQR)."""
    rows = res["cost"]
    x = np.arange(len(rows))
    w = 0.8 / len(METHODS)
    ax2 = ax.twinx()
    for i, m in enumerate(METHODS):
        ax.bar(x + i * w, [r["cmul_per_update"][m] / r["cmul_per_update"]["zf"] for r in rows], w, label=m, alpha=0.6)
        med = [r["time_ratio_to_zf"][m] for r in rows]
        lo = [med[j] - r["time_ratio_iqr"][m][0] for j, r in enumerate(rows)]
        hi = [r["time_ratio_iqr"][m][1] - med[j] for j, r in enumerate(rows)]
        ax2.errorbar(x + i * w, med, yerr=[lo, hi], fmt="k.", ms=4, capsize=2)
    ax.set_xticks(x + 0.4 - w / 2, [f"{r['M']}x{r['K']}" for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("counted cmul / ZF's (bars)")
    ax2.set_yscale("log")
    ax2.set_ylabel("numpy time / ZF's (dots, IQR)")
    ax.set_xlabel("M x K")
    ax.set_title("per-update cost vs ZF")
    ax.legend(fontsize=6)


def _plot_grouping(ax, res: dict) -> None:
    for r in res["grouping"]["results"]:
        for m, style in (("beamraster", "-o"), ("beamraster-exact", "--s")):
            d = r[m]["loss_vs_per_subcarrier"]
            ax.plot([int(k) for k in d], [100 * v for v in d.values()], style, ms=3, label=f"{m}, K={r['K']}")
    ax.axvline(12, color="k", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("subcarriers per pre-distortion matrix (RTL: 12)")
    ax.set_ylabel("sum-rate loss vs per-subcarrier P (%)")
    ax.set_title("grouping loss: geometric, M=64, 1200 of 2048 subcarriers")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _plot_tracking(ax, res: dict) -> None:
    tr = res["tracking"]
    rows = tr["results"]
    c = [r["moved_per_update"] for r in rows]
    med = [r["time_ratio_incremental_over_full"] for r in rows]
    err = [[m - r["time_ratio_iqr"][0] for m, r in zip(med, rows)],
           [r["time_ratio_iqr"][1] - m for m, r in zip(med, rows)]]
    ax.errorbar(c, med, yerr=err, fmt="-o", ms=3, capsize=2, label="measured time (median, IQR)")
    ax.plot(c, [r["rows_recomputed_per_update"] / r["rows_full_recompute"] for r in rows], "k--",
            label="rows recomputed / K")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("users moved per update")
    ax.set_ylabel("grating-table update / full recompute")
    ax.set_title(f"grating table tracking, M={tr['M']}, K={tr['K']}, {tr['n_sc']} subcarriers")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def write_study(res: dict, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    paths = [write_text(out_dir / "beamraster_study.json", json.dumps(res, indent=1) + "\n")]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = res["config"]
    fig, axes = plt.subplots(3, 3, figsize=(15, 12))
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
    _plot_cost(axes[2][0], res)
    _plot_grouping(axes[2][1], res)
    _plot_tracking(axes[2][2], res)
    fig.tight_layout()
    save_png(fig, out_dir / "beamraster_study.png", dpi=110)
    paths.append(out_dir / "beamraster_study.png")
    return paths

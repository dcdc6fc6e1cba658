"""Benchmarks of the FSS sparse GEMM engine (Zhang et al., IEEE TCAD 44(7), 2025).

- :func:`bench_fss_layers`: real layers (CNN conv via im2col, LSTM gate matrix, all-MiniLM-L6-v2
  linear layers) in RTL simulation at 50 / 75 / 87.5 % sparsity on four engines with the SAME
  number of multipliers (16): FSS (2x8 regions), N:M only with 1x16 and with 1x8 regions (the
  usual hardware N:M shape: 4:8 / 2:8 / 1:8) and dense (1x8 regions, all kept). Every result
  word is compared with the golden model; the table gives measured cycles vs the ideal, the
  speed-up over dense, the N:M / FSS cycle ratio, and the error against the dense float layer
  (global relative norm, per-row median relative error and cosine similarity). It also writes
  the U280-scale HBM roofline of the MiniLM layers (:func:`minilm_roofline`, model only) and
  checks the HBM model against RTL runs whose weight stream is throttled to the modelled
  bandwidth (:func:`hbm_validation`).
- :func:`bench_fss_synth`: Yosys resource estimates (``synth_xilinx -family xcup``) over engine
  configurations.

All write JSON (and PNG plots) into ``out_dir``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["bench_fss_layers", "bench_fss_synth", "ENGINE_KINDS", "SPARSITIES", "engine", "n_kept", "layer_rows",
           "minilm_roofline", "roofline_engines", "hbm_validation", "MINILM_SHAPES", "ROOFLINE_T"]

MULTIPLIERS = 16
PE_COLS = 2
ENGINE_KINDS = ("fss", "nm", "nm8", "dense")
SPARSITIES = (0.5, 0.75, 0.875)
#: region shape of each sparse engine kind (dense: ``(1, MULTIPLIERS // PE_COLS)``, all kept)
REGIONS = {"fss": (2, 8), "nm": (1, 16), "nm8": (1, 8)}
ENGINE_LABELS = {"fss": "FSS 2x8 regions", "nm": "N:M 1x16 regions", "nm8": "N:M 1x8 regions (4:8/2:8/1:8)",
                 "dense": f"dense 1x{MULTIPLIERS // PE_COLS} regions, all kept"}


def n_kept(kind: str, sparsity: float) -> int:
    """Nonzeros per region of engine ``kind`` at ``sparsity`` (e.g. ``nm8`` at 75 %: 2 of 8)."""
    if kind == "dense":
        return MULTIPLIERS // PE_COLS
    rh, rw = REGIONS[kind]
    n = round(rh * rw * (1.0 - sparsity))
    if n < 1 or abs(n - rh * rw * (1.0 - sparsity)) > 1e-9:
        raise UsageError(f"sparsity {sparsity} leaves no whole number of weights in a {rh}x{rw} region")
    return n


def engine(kind: str, n: int, max_rows: int, max_cols: int):
    """An engine with ``MULTIPLIERS`` multipliers: FSS 2x8 / N:M 1x16 / N:M 1x8 with ``n`` kept per
    region, or dense; ``pe_rows = MULTIPLIERS / (PE_COLS * n)``."""
    from hwcosim.cosim.designs.fss.layers import engine_formats
    from hwcosim.models.fss.gemm import FSSParams

    if kind not in ENGINE_KINDS:
        raise UsageError(f"engine kind must be one of {', '.join(ENGINE_KINDS)}, not {kind!r}")
    fm = engine_formats()
    per_pe = MULTIPLIERS // PE_COLS
    if kind == "dense":
        return FSSParams(region=(1, per_pe), n=per_pe, pe_rows=1, pe_cols=PE_COLS, max_rows=max_rows,
                         max_cols=max_cols, **fm)
    if per_pe % n:
        raise UsageError(f"{n} nonzeros per region do not divide the {per_pe} multipliers of a PE column")
    return FSSParams(region=REGIONS[kind], n=n, pe_rows=per_pe // n, pe_cols=PE_COLS, max_rows=max_rows,
                     max_cols=max_cols, **fm)


def _layers(quick: bool):
    from hwcosim.cosim.designs.fss.layers import cnn_conv_layer, lstm_gate_layer, minilm_layers

    out = [cnn_conv_layer(n_images=1 if quick else 2), lstm_gate_layer(n_cols=4 if quick else 8)]
    try:
        ml = minilm_layers(n_tokens=4 if quick else 8)
        if quick:
            out.append(ml["query"].sliced(rows=64))
        else:
            out += [ml["query"], ml["ffn_in"], ml["ffn_out"]]
    except ModuleNotFoundError as e:  # the weights package is missing: say so, run the rest
        print(f"skipping the transformer layers: {e}")
    return out


def layer_rows(layers, *, rtl: bool = True, sim: str | None = None, test_dir: Path | None = None) -> list[dict]:
    """Run every layer on every engine kind and sparsity; one dict per run, with the ratios.

    With ``rtl`` each run is an RTL simulation compared word by word with the golden model
    (``cycles`` measured); without, the golden model alone runs and ``cycles`` is the cycle
    model's expected count (``cycles_source`` says which).
    """
    from hwcosim.cosim.designs.fss.layers import run_layer
    from hwcosim.models.fss.gemm import U280_HBM, layer_performance

    max_rows = max(-(-lay.w.shape[0] // 16) * 16 for lay in layers)
    max_cols = max(-(-lay.w.shape[1] // 16) * 16 for lay in layers)
    rows = []
    for lay in layers:
        mine = []
        for kind in ENGINE_KINDS:
            for s in (0.0,) if kind == "dense" else SPARSITIES:
                p = engine(kind, n_kept(kind, s), max_rows, max_cols)
                t0 = time.monotonic()
                tdir = None if test_dir is None else Path(test_dir) / f"{lay.name}_{kind}_{p.n}"
                r = run_layer(lay, p, rtl=rtl, sim=sim, test_dir=tdir, p_stall=0.0)
                if not rtl:
                    r["cycles"] = r["expected"]
                r.update({"kind": kind, "target_sparsity": s, "cycles_source": "rtl" if rtl else "cycle model",
                          "sim_seconds": round(time.monotonic() - t0, 1)})
                r["cycles_over_ideal"] = r["cycles"] / r["ideal"]
                perf = layer_performance(p, *r["padded"], U280_HBM, cycles=r["cycles"])
                r["hbm_bound"] = perf["bound"]
                r["t_compute_us"] = perf["t_compute_s"] * 1e6
                r["t_memory_us"] = perf["t_memory_s"] * 1e6
                mine.append(r)
        dense = next(r for r in mine if r["kind"] == "dense")
        for r in mine:
            r["speedup_vs_dense"] = dense["cycles"] / r["cycles"]
            if r["kind"] == "fss":
                for other in ("nm", "nm8"):
                    o = next(x for x in mine if x["kind"] == other and x["target_sparsity"] == r["target_sparsity"])
                    r[f"{other}_cycles_over_fss"] = o["cycles"] / r["cycles"]
                    r[f"{other}_err_over_fss"] = o["rel_err_vs_dense_float"] / r["rel_err_vs_dense_float"]
        rows += mine
    return rows


def _measured(design: str) -> dict:
    """The Fmax make boards measured for ``design`` on an LFE5U-85F (nextpnr), or why there is none."""
    from hwcosim.cosim.flow.fmax import measured

    m = measured(design)
    return {"note": "no measured Fmax yet (run make boards)"} if m is None else \
        {"fmax_mhz": m.mhz, "part": m.part, "label": m.label, "params": m.params}


def bench_fss_layers(out_dir: Path, quick: bool = False) -> dict:
    from hwcosim.cosim.flow.runner import simulator
    from hwcosim.models.atomic import write_text
    from rich.table import Table

    out_dir = Path(out_dir)
    rows = layer_rows(_layers(quick))
    sim = simulator()
    out = {"multipliers": MULTIPLIERS, "pe_cols": PE_COLS, "simulator": sim, "hbm": "U280 32 x 14.375 GB/s",
           "clock_mhz": 250.0, "clock_note": "250 MHz ASSUMED (U280-class part, not targetable with open tools)",
           "measured_fmax": _measured("fss-gemm"),
           "quick": quick, "engines": ENGINE_LABELS,
           "error_metrics": "rel_err_vs_dense_float = ||Y - Y_dense||_F / ||Y_dense||_F over the whole "
                            "layer; median_row_* = median over output rows of the row's relative error / "
                            "cosine similarity (rows with an all-zero reference left out)",
           "hbm_note": "hbm_bound uses the 16-multiplier engines: at this size every layer is compute "
                       "bound; see fss_roofline.json for U280-scale engines",
           "results": rows}
    write_text(out_dir / "fss_layers.json", json.dumps(out, indent=2, default=float) + "\n")
    t = Table(title=f"FSS GEMM RTL on real layers, {MULTIPLIERS} multipliers each ({sim})")
    for c in ("layer", "engine", "sparsity", "cycles", "ideal cycles", "cyc/ideal", "vs dense", "N:M16/FSS cyc",
              "N:M8/FSS cyc", "rel err", "med row err", "med row cosine", "mismatches"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(r["layer"], r["kind"], f"{r['target_sparsity']:.1%}", str(r["cycles"]), str(r["ideal"]),
                  f"{r['cycles_over_ideal']:.3f}", f"{r['speedup_vs_dense']:.2f}x",
                  f"{r['nm_cycles_over_fss']:.3f}" if "nm_cycles_over_fss" in r else "",
                  f"{r['nm8_cycles_over_fss']:.3f}" if "nm8_cycles_over_fss" in r else "",
                  f"{r['rel_err_vs_dense_float']:.4f}", f"{r['median_row_rel_err_vs_dense_float']:.4f}",
                  f"{r['median_row_cosine_vs_dense_float']:.5f}", str(r["mismatches"]))
    show(t)
    _plot(rows, out_dir / "fss_layers.png")
    out["roofline"] = minilm_roofline(out_dir)
    out["hbm_validation"] = hbm_validation(out_dir, quick=quick)
    return out


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    names = list(dict.fromkeys(r["layer"] for r in rows))
    for kind, style in (("fss", "-o"), ("nm", "--s"), ("nm8", ":^")):
        for name in names:
            pts = sorted((r["target_sparsity"], r["speedup_vs_dense"], r["rel_err_vs_dense_float"]) for r in rows
                         if r["layer"] == name and r["kind"] == kind)
            if pts:
                s, sp, err = zip(*pts)
                a1.plot(s, sp, style, label=f"{name} {kind}")
                a2.plot(s, err, style, label=f"{name} {kind}")
    a1.set_xlabel("sparsity")
    a1.set_ylabel("measured speed-up over dense (equal multipliers)")
    a2.set_xlabel("sparsity")
    a2.set_ylabel("relative error vs dense float layer")
    a1.legend(fontsize=6)
    fig.suptitle("FSS GEMM engine: RTL cycles and output error on real layers")
    fig.tight_layout()
    save_png(fig, path, dpi=120)


# -- U280-scale HBM roofline of the MiniLM layers (model only) ---------------------------------
#: Linear-layer shapes (rows, cols) of one all-MiniLM-L6-v2 encoder layer: query, key, value and
#: the attention output are 384 x 384, the FFN 1536 x 384 and 384 x 1536 (hidden 384, FFN 1536).
MINILM_SHAPES = {"qkvo": (384, 384), "ffn_in": (1536, 384), "ffn_out": (384, 1536)}
#: Activation columns (tokens): decode of 1 / 4 / 8 sequences, prefill of 128 / 512 tokens.
ROOFLINE_T = (1, 4, 8, 128, 512)
ROOFLINE_MAX = 2048


def roofline_engines() -> dict:
    """Engines of 2048-4096 multipliers (U280 scale) at 75 % sparsity, plus a dense one.

    In the ``stream`` weight mode the weight bandwidth is ``multipliers * lane_width / pe_cols``
    bits per cycle, so the PE array's aspect decides the bound: 4096 multipliers need 1536 /
    768 / 384 / 96 GB/s at 1 / 2 / 4 / 16 PE columns (12-bit FSS lanes, 250 MHz), while T = 1
    uses only one of the ``pe_cols`` columns.
    """
    from hwcosim.cosim.designs.fss.layers import engine_formats
    from hwcosim.models.fss.gemm import FSSParams

    fm = engine_formats()

    def mk(region, n, pr, pc):
        return FSSParams(region=region, n=n, pe_rows=pr, pe_cols=pc, max_rows=ROOFLINE_MAX,
                         max_cols=ROOFLINE_MAX, **fm)

    # FSS / N:M labels: kept-per-region, then the PE array rows x columns
    return {"FSS 4/16 256x4": mk((2, 8), 4, 256, 4),
            "FSS 4/16 512x2": mk((2, 8), 4, 512, 2),
            "FSS 4/16 1024x1": mk((2, 8), 4, 1024, 1),
            "FSS 4/16 64x16": mk((2, 8), 4, 64, 16),
            "FSS 4/16 128x4": mk((2, 8), 4, 128, 4),
            "N:M 2:8 256x8": mk((1, 8), 2, 256, 8),
            "dense 128x4": mk((1, 8), 8, 128, 4)}


def roofline_rows(engines: dict | None = None, shapes: dict | None = None, ts=ROOFLINE_T, hbm=None,
                  clock_mhz: float = 250.0) -> list[dict]:
    """Roofline of every (engine, layer shape, T, weight mode) at the ideal cycle count.

    Layers are padded to the engine's tiling (padded rows and columns are streamed and computed
    like real ones); ``useful_gmacs`` and ``peak_fraction`` count only the MACs of the real
    layer's kept weights, so padding shows up as lost throughput.
    """
    from hwcosim.models.fss.gemm import U280_HBM, WEIGHT_MODES, CycleModel, layer_performance

    engines = roofline_engines() if engines is None else engines
    shapes = MINILM_SHAPES if shapes is None else shapes
    hbm = U280_HBM if hbm is None else hbm
    out = []
    for label, p in engines.items():
        peak = p.multipliers * clock_mhz * 1e6
        for sname, (rows, cols) in shapes.items():
            rp = -(-rows // p.rows_per_group) * p.rows_per_group
            cp = -(-cols // p.r_w) * p.r_w
            for t in ts:
                tp = -(-t // p.pe_cols) * p.pe_cols
                useful = rows * cols * p.n // p.region_size * t
                for mode in WEIGHT_MODES:
                    perf = layer_performance(p, rp, cp, tp, hbm, clock_mhz=clock_mhz, weights=mode)
                    out.append({"engine": label, "layer": sname, "rows": rows, "cols": cols, "T": t,
                                "padded": [rp, cp, tp], "weights": mode, "multipliers": p.multipliers,
                                "pe": [p.pe_rows, p.pe_cols], "region": list(p.region), "n": p.n,
                                "compute_cycles": perf["cycles"], "memory_cycles": perf["memory_cycles"],
                                "bound": perf["bound"], "time_us": perf["time_s"] * 1e6,
                                "hbm_bytes": perf["bytes"], "weight_bytes": perf["weight_bytes"],
                                "weight_stream_gbps": perf["weight_stream_gbps"],
                                "useful_macs_per_byte": useful / perf["bytes"],
                                "useful_gmacs": useful / perf["time_s"] / 1e9,
                                "peak_gmacs": peak / 1e9,
                                "peak_fraction": useful / perf["time_s"] / peak,
                                "ideal_cycles_unpadded": useful / p.multipliers,
                                "expected_cycles": CycleModel(p).expected(rp, cp, tp)})
    return out


def minilm_roofline(out_dir: Path | None = None, **kw) -> dict:
    """U280-scale roofline of the MiniLM linear layers: JSON, PNG and a terminal table."""
    from hwcosim.models.atomic import write_text
    from hwcosim.models.fss.gemm import PIPELINE_LATENCY, U280_HBM
    from rich.table import Table

    rows = roofline_rows(**kw)
    out = {"hbm": f"U280: {U280_HBM.channels} pseudo-channels x {U280_HBM.gbps_per_channel} GB/s = "
                  f"{U280_HBM.bytes_per_s / 1e9:.0f} GB/s peak (efficiency {U280_HBM.efficiency})",
           "clock_mhz": kw.get("clock_mhz", 250.0), "clock_note": "assumed, not a measured Fmax",
           "formats": "8-bit weights (+ index bits), 16-bit activations, 24-bit results",
           "weight_modes": {
               "stream": "weights re-streamed from HBM once per column tile of pe_cols activation columns, as "
                         "hwcosim.hdl.fss.FSSGemm consumes them: the weight bandwidth is one weight beat per cycle "
                         "whatever T is",
               "resident": "weights read from HBM once per layer and reused on chip across column tiles, as "
                           "hwcosim.hdl.fss.axi_top.FSSAxiTop does (it stores a layer's weights on chip); the stored "
                           "weights must fit on chip (MiniLM-L6 at 75 %: about 5.4 M kept weights x 12 bits, "
                           "~8 MB, vs ~43 MB of U280 BRAM+URAM)"},
           "cycles": "ideal (every multiplier busy); the RTL adds the first tile's activation load and "
                     f"a {PIPELINE_LATENCY}-cycle pipeline latency",
           "results": rows}
    if out_dir is not None:
        out_dir = Path(out_dir)
        write_text(out_dir / "fss_roofline.json", json.dumps(out, indent=2, default=float) + "\n")
        _plot_roofline(rows, out_dir / "fss_roofline.png")
    t = Table(title="FSS engines at U280 scale, MiniLM layers: HBM roofline (250 MHz, 460 GB/s)")
    for c in ("engine", "mults", "W GB/s", "layer", *(f"T={x}" for x in ROOFLINE_T)):
        t.add_column(c, justify="right")
    for e in dict.fromkeys(r["engine"] for r in rows):
        for sname in dict.fromkeys(r["layer"] for r in rows if r["engine"] == e):
            cells = []
            for x in ROOFLINE_T:
                c = {r["weights"]: r for r in rows if r["engine"] == e and r["layer"] == sname and r["T"] == x}
                cells.append(" ".join(f"{c[m]['bound'][0].upper()}{100 * c[m]['peak_fraction']:.0f}"
                                      for m in ("stream", "resident") if m in c))
            r0 = next(r for r in rows if r["engine"] == e)
            t.add_row(e, str(r0["multipliers"]), f"{r0['weight_stream_gbps']:.0f}", sname, *cells)
    show(t)
    print("cells: weights re-streamed per tile, then resident; M = memory bound, C = compute bound, "
          "number = useful MACs / peak, %")
    return out


def _plot_roofline(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from hwcosim.models.atomic import save_png
    from hwcosim.models.fss.gemm import U280_HBM

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    main = "FSS 4/16 512x2"  # the array whose bound turns with T and the weight mode
    mine = [r for r in rows if r["engine"] == main]
    if mine:
        peak = mine[0]["peak_gmacs"]
        xs = np.logspace(-1, 3, 200)
        a1.plot(xs, np.minimum(peak, U280_HBM.bytes_per_s / 1e9 * xs), "k-", lw=1,
                label=f"roof: {peak:.0f} GMAC/s, {U280_HBM.bytes_per_s / 1e9:.0f} GB/s")
        markers = dict(zip(dict.fromkeys(r["layer"] for r in mine), "os^"))
        for mode, kw in (("stream", {"facecolors": "none", "edgecolors": "tab:red", "s": 60}),
                         ("resident", {"color": "tab:blue", "s": 16})):
            for lay, mk in markers.items():
                pts = [(r["useful_macs_per_byte"], r["useful_gmacs"]) for r in mine
                       if r["weights"] == mode and r["layer"] == lay]
                a1.scatter(*zip(*pts), marker=mk, label=f"{lay}, weights {mode}", **kw)
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.set_xlabel("useful MACs per HBM byte")
        a1.set_ylabel("useful GMAC/s")
        a1.set_title(f"{main} ({mine[0]['multipliers']} mult.), MiniLM layers, T = {', '.join(map(str, ROOFLINE_T))}",
                     fontsize=9)
        a1.legend(fontsize=6)
    lay = "ffn_in"
    for i, e in enumerate(dict.fromkeys(r["engine"] for r in rows)):
        for mode, style in (("stream", "--"), ("resident", "-")):
            pts = sorted((r["T"], r["peak_fraction"]) for r in rows
                         if r["engine"] == e and r["layer"] == lay and r["weights"] == mode)
            if pts:
                a2.plot(*zip(*pts), style, marker="o", ms=3, color=f"C{i}", label=f"{e} ({mode})")
    a2.set_xscale("log")
    a2.set_xlabel("T (activation columns / tokens)")
    a2.set_ylabel("useful MACs / peak")
    a2.set_title(f"{lay}: solid weights resident, dashed re-streamed per tile", fontsize=9)
    a2.legend(fontsize=5)
    fig.suptitle("FSS GEMM engine at U280 scale: HBM roofline of all-MiniLM-L6-v2 linear layers (250 MHz assumed)")
    fig.tight_layout()
    save_png(fig, path, dpi=120)


# -- HBM model vs RTL with a throttled weight stream -------------------------------------------
#: Tolerance of the memory-bound prediction: the throttle is random (a geometric number of idle
#: cycles before each weight beat), so the measured cycles scatter by sqrt(p_idle / beats)
#: around the mean; 3 sigma of that plus the fixed overhead (first activation tile + pipeline).
def hbm_tolerance(p_idle: float, beats: int, overhead: int, predicted: float) -> float:
    return 3.0 * (p_idle / beats) ** 0.5 + overhead / predicted + 1e-9


def hbm_validation(out_dir: Path | None = None, quick: bool = False, bytes_per_cycle=None,
                   sim: str | None = None, test_dir: Path | None = None, layer=None) -> dict:
    """Check :func:`hwcosim.models.fss.gemm.layer_performance` against RTL runs starved by a modelled HBM.

    The 16-multiplier FSS engine of :func:`engine` (2x8 regions, 4 kept, PE 2x2) needs
    ``weight_beat_bits / 8`` bytes per cycle; an HBM of ``B`` bytes per cycle below that makes
    the layer memory bound (``bytes_per_cycle`` defaults to 16, 8 and 4: one compute-bound control
    and two memory-bound points). The model's memory time counts weights (re-streamed per column tile),
    activations and results, all at ``B``; in the RTL run the weight stream gets its share of
    ``B`` (idle cycles before weight beats with probability ``1 - share * B / beat_bytes``) and
    the other streams run free. The measured cycles must meet the model's memory-bound cycle
    count within :func:`hbm_tolerance`.
    """
    from hwcosim.cosim.designs.fss.gemm import run_gemm
    from hwcosim.cosim.designs.fss.layers import lstm_gate_layer, prepare
    from hwcosim.models.atomic import write_text
    from hwcosim.models.fss.gemm import HBM, CycleModel, layer_performance

    lay = lstm_gate_layer(n_cols=4 if quick else 8) if layer is None else layer
    if bytes_per_cycle is None:  # one compute-bound control, two memory-bound points
        bytes_per_cycle = (8.0,) if quick else (16.0, 8.0, 4.0)
    rows_p = -(-lay.w.shape[0] // 16) * 16
    cols_p = -(-lay.w.shape[1] // 16) * 16
    p = engine("fss", 4, rows_p, cols_p)
    d = prepare(lay, p)
    rows, cols = d["shape"]
    t = d["t_pad"]
    beat_bytes = p.weight_beat_bits / 8
    out_rows = []
    for i, bpc in enumerate(bytes_per_cycle):
        hbm = HBM(channels=1, gbps_per_channel=bpc * 0.25)  # B bytes per cycle at 250 MHz
        perf = layer_performance(p, rows, cols, t, hbm, clock_mhz=250.0)
        share = perf["weight_bytes"] / perf["bytes"]
        rate = share * bpc / beat_bytes  # weight beats per cycle
        if not rate > 0:
            raise UsageError(f"HBM bytes per cycle must be > 0, not {bpc}")
        p_idle = max(0.0, 1.0 - rate)  # 0: the weight stream keeps up, compute bound
        tdir = None if test_dir is None else Path(test_dir) / f"hbm{i}"
        res = run_gemm(p, d["values"], d["indices"], d["x"], p_idle_w=p_idle, seed=11 + i, sim=sim,
                       test_dir=tdir)
        mt = res.metrics
        beats = CycleModel(p).weight_beats(rows, cols, t)
        predicted = max(perf["cycles"], perf["memory_cycles"])
        overhead = CycleModel(p).expected(rows, cols, t) - perf["cycles"]
        tol = hbm_tolerance(p_idle, beats, overhead, predicted)
        dev = mt["cycles"] / predicted - 1.0
        out_rows.append({"hbm_bytes_per_cycle": bpc, "weight_beat_bytes": beat_bytes, "weight_share": share,
                         "p_idle_w": p_idle, "weight_beats": beats, "bound": perf["bound"],
                         "compute_cycles": perf["cycles"], "predicted_cycles": predicted,
                         "measured_cycles": mt["cycles"], "deviation": dev, "tolerance": tol,
                         "within_tolerance": abs(dev) <= tol, "mismatches": mt["mismatches"],
                         "dut_starve_w": mt["dut_starve_w"]})
    out = {"layer": lay.name, "padded": [rows, cols, t], "engine": p.to_dict(), "multipliers": p.multipliers,
           "weights": "stream (FSSGemm re-streams weights per column tile; FSSAxiTop would hold them on chip)",
           "method": "weight stream throttled to its share of the modelled HBM bytes per cycle by random idle "
                     "cycles (p_idle_w); activations and results unthrottled",
           "results": out_rows}
    if out_dir is not None:
        write_text(Path(out_dir) / "fss_hbm_validation.json", json.dumps(out, indent=2, default=float) + "\n")
    for r in out_rows:
        print(f"HBM check {lay.name}: {r['hbm_bytes_per_cycle']} B/cycle ({r['bound']} bound): "
              f"predicted {r['predicted_cycles']:.0f}, RTL {r['measured_cycles']} cycles, "
              f"deviation {r['deviation']:+.2%} (tolerance {r['tolerance']:.2%})")
    return out


def synth_configs(quick: bool):
    from hwcosim.models.fss.gemm import FSSParams

    base = dict(max_rows=1024, max_cols=1024)
    cfgs = [("fss 2x8 n=4 PE 2x2", FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, **base)),
            ("N:M 1x16 n=4 PE 2x2", FSSParams(region=(1, 16), n=4, pe_rows=2, pe_cols=2, **base)),
            ("dense 1x8 PE 1x2", FSSParams(region=(1, 8), n=8, pe_rows=1, pe_cols=2, **base))]
    if not quick:
        cfgs += [("fss 4x4 n=2 PE 4x2", FSSParams(region=(4, 4), n=2, pe_rows=4, pe_cols=2, **base)),
                 ("fss 2x8 n=2 PE 4x2", FSSParams(region=(2, 8), n=2, pe_rows=4, pe_cols=2, **base)),
                 ("fss 2x8 n=4 PE 4x4", FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, **base))]
    return cfgs


def bench_fss_synth(out_dir: Path, quick: bool = False) -> dict:
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.hdl.fss import FSSGemm
    from hwcosim.models.atomic import write_text
    from hwcosim.models.fss.gemm import FSSParams
    from rich.table import Table

    results = []
    for label, p in synth_configs(quick):
        t0 = time.monotonic()
        rep = synthesize(to_verilog(FSSGemm(p), "fss_gemm"), "fss_gemm", "xcup")
        results.append({"config": label, **p.to_dict(), "multipliers": p.multipliers, **rep["resources"],
                        "seconds": round(time.monotonic() - t0, 1)})
    from hwcosim.cosim.designs.fss.layers import engine_formats

    bench_fmt = {k: str(v) for k, v in engine_formats().items()}
    out = {"target": "xcup (synth_xilinx, Yosys estimate, not place-and-route)",
           "fmax": None,
           "fmax_note": "no Fmax: Yosys synthesis without place and route gives no timing; the benches' "
                        "times and the HBM roofline assume 250 MHz",
           "formats_note": f"these builds use the FSSParams default formats (weights {FSSParams().weight_fmt}, "
                           f"activations {FSSParams().act_fmt}, results {FSSParams().out_fmt}) and max_rows = "
                           f"max_cols = 1024; the engines benchmarked in fss_layers use {bench_fmt} and max sizes "
                           "fitted to the layers (16 multipliers), and the U280-scale roofline engines 2048-4096 "
                           "multipliers: resources of those differ from this table",
           "results": results}
    write_text(out_dir / "fss_synth.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="FSS GEMM engine resources (Yosys synth_xilinx -family xcup, estimate)")
    for c in ("config", "mults", "LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY"):
        t.add_column(c, justify="right")
    for r in results:
        cols = ("LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY")
        t.add_row(r["config"], str(r["multipliers"]), *(str(r[k]) for k in cols))
    show(t)
    print(out["fmax_note"])
    return out

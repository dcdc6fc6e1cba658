"""Benchmarks of the FSS sparse GEMM engine (Zhang et al., IEEE TCAD 44(7), 2025).

- :func:`bench_fss_layers`: real layers (CNN conv via im2col, LSTM gate matrix, all-MiniLM-L6-v2
  linear layers) in RTL simulation at 50 / 75 / 87.5 % sparsity on three engines with the SAME
  number of multipliers (16): FSS (2x8 regions), N:M only (1x16 regions) and dense (1x8 regions,
  all kept). Every result word is compared with the golden model; the table gives measured
  cycles vs the ideal, the speed-up over dense, the FSS / N:M cycle ratio, the error against the
  dense float layer, and the HBM roofline verdict (U280: 32 pseudo-channels, 460 GB/s).
- :func:`bench_fss_synth`: Yosys resource estimates (``synth_xilinx -family xcup``) over engine
  configurations.

Both write JSON (and the first a PNG) into ``out_dir``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

__all__ = ["bench_fss_layers", "bench_fss_synth", "ENGINE_KINDS", "engine"]

MULTIPLIERS = 16
PE_COLS = 2
ENGINE_KINDS = ("fss", "nm", "dense")


def engine(kind: str, n: int, max_rows: int, max_cols: int):
    """An engine with ``MULTIPLIERS`` multipliers: FSS 2x8 / N:M 1x16 with ``n`` kept, or dense."""
    from cosim.fss_layers import engine_formats
    from models.fss import FSSParams

    fm = engine_formats()
    per_pe = MULTIPLIERS // PE_COLS
    if kind == "dense":
        return FSSParams(region=(1, per_pe), n=per_pe, pe_rows=1, pe_cols=PE_COLS, max_rows=max_rows,
                         max_cols=max_cols, **fm)
    region = (2, 8) if kind == "fss" else (1, 16)
    return FSSParams(region=region, n=n, pe_rows=per_pe // n, pe_cols=PE_COLS, max_rows=max_rows,
                     max_cols=max_cols, **fm)


def _layers(quick: bool):
    from cosim.fss_layers import cnn_conv_layer, lstm_gate_layer, minilm_layers

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


def bench_fss_layers(out_dir: Path, quick: bool = False) -> dict:
    from rich.console import Console
    from rich.table import Table

    from cosim.fss_layers import run_layer
    from models.atomic import write_text
    from models.fss import U280_HBM, layer_performance

    layers = _layers(quick)
    max_rows = max(-(-lay.w.shape[0] // 16) * 16 for lay in layers)
    max_cols = max(-(-lay.w.shape[1] // 16) * 16 for lay in layers)
    sparsities = {0.5: 8, 0.75: 4, 0.875: 2}
    rows = []
    sim = None
    for lay in layers:
        dense = None
        for kind in ("dense", "fss", "nm"):
            for s, n in sparsities.items():
                if kind == "dense" and dense is not None:
                    continue
                p = engine(kind, n, max_rows, max_cols)
                t0 = time.monotonic()
                r = run_layer(lay, p, p_stall=0.0)
                r.update({"kind": kind, "target_sparsity": 0.0 if kind == "dense" else s,
                          "sim_seconds": round(time.monotonic() - t0, 1)})
                r["cycles_over_ideal"] = r["cycles"] / r["ideal"]
                perf = layer_performance(p, r["padded"][0], r["padded"][1], r["padded"][2], U280_HBM,
                                         cycles=r["cycles"])
                r["hbm_bound"] = perf["bound"]
                r["t_compute_us"] = perf["t_compute_s"] * 1e6
                r["t_memory_us"] = perf["t_memory_s"] * 1e6
                if kind == "dense":
                    dense = r
                rows.append(r)
        for r in rows:
            if r["layer"] == lay.name:
                r["speedup_vs_dense"] = dense["cycles"] / r["cycles"]
        for r in rows:
            if r["layer"] == lay.name and r["kind"] == "fss":
                nm = next(x for x in rows if x["layer"] == lay.name and x["kind"] == "nm" and x["n"] == r["n"])
                r["nm_cycles_over_fss"] = nm["cycles"] / r["cycles"]
                r["nm_err_over_fss"] = nm["rel_err_vs_dense_float"] / r["rel_err_vs_dense_float"]
    from cosim.runner import simulator

    sim = simulator()
    out = {"multipliers": MULTIPLIERS, "pe_cols": PE_COLS, "simulator": sim, "hbm": "U280 32 x 14.375 GB/s",
           "clock_mhz": 250.0, "engines": {"fss": "2x8 regions", "nm": "1x16 regions (N:M)",
                                           "dense": f"1x{MULTIPLIERS // PE_COLS} regions, all kept"},
           "results": rows}
    write_text(out_dir / "fss_layers.json", json.dumps(out, indent=2, default=float) + "\n")
    t = Table(title=f"FSS GEMM RTL on real layers, {MULTIPLIERS} multipliers each ({sim})")
    for c in ("layer", "engine", "sparsity", "cycles", "ideal", "cyc/ideal", "vs dense", "N:M/FSS cyc",
              "err vs dense float", "HBM", "mism"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(r["layer"], r["kind"], f"{r['target_sparsity']:.1%}", str(r["cycles"]), str(r["ideal"]),
                  f"{r['cycles_over_ideal']:.3f}", f"{r['speedup_vs_dense']:.2f}x",
                  f"{r['nm_cycles_over_fss']:.3f}" if "nm_cycles_over_fss" in r else "",
                  f"{r['rel_err_vs_dense_float']:.4f}", r["hbm_bound"], str(r["mismatches"]))
    Console().print(t)
    _plot(rows, out_dir / "fss_layers.png")
    return out


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from models.atomic import atomic_path

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    names = list(dict.fromkeys(r["layer"] for r in rows))
    for kind, style in (("fss", "-o"), ("nm", "--s")):
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
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def synth_configs(quick: bool):
    from models.fss import FSSParams

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
    from rich.console import Console
    from rich.table import Table

    from cosim.runner import to_verilog
    from cosim.synth import synthesize
    from hdl.fss import FSSGemm
    from models.atomic import write_text

    results = []
    for label, p in synth_configs(quick):
        t0 = time.monotonic()
        rep = synthesize(to_verilog(FSSGemm(p), "fss_gemm"), "fss_gemm", "xcup")
        results.append({"config": label, **p.to_dict(), "multipliers": p.multipliers, **rep["resources"],
                        "seconds": round(time.monotonic() - t0, 1)})
    out = {"target": "xcup (synth_xilinx, Yosys estimate, not place-and-route)", "results": results}
    write_text(out_dir / "fss_synth.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="FSS GEMM engine resources (Yosys synth_xilinx -family xcup, estimate)")
    for c in ("config", "mults", "LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY"):
        t.add_column(c, justify="right")
    for r in results:
        cols = ("LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY")
        t.add_row(r["config"], str(r["multipliers"]), *(str(r[k]) for k in cols))
    Console().print(t)
    return out

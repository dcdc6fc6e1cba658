"""Benchmark of the BBS LSTM engine: cycles per step vs ideal over (P, B), the ESE-style CSR
baseline on the same layer, effective GOPS of a 1024-hidden layer, and the end-to-end digits
accuracy of the RTL-run model.

``bench_bbs_lstm(out_dir, quick)`` writes ``bbs_lstm.json`` and ``bbs_lstm_util.png`` and, unless
``quick``, ``bbs_lstm_resources.json`` / ``bbs_lstm_resources.md`` (Yosys, UltraScale+ and
Arria 10 fabric, (P, B) up to 16 x 16). The cycle model (:class:`hwcosim.models.bbs.lstm.LSTMCycleModel`)
is exact against the RTL on the configurations of ``tests/bbs/test_bbs_lstm_sim.py`` and on the
(P, B) = 16 x 16 RTL runs of :func:`rtl_16x16` (H = 256: 275 cycles per step, 93.1%);
the (P, B) tables and the 1024-hidden figures use it. The CSR baseline figures come from
:func:`hwcosim.models.bbs.csr.cycles_from_mask` on the physical matrix, the same PE assignment as the
CSR RTL (:func:`hwcosim.cosim.designs.bbs.csr.csr_vs_bbs_rtl` measures it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_text
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, gops
from hwcosim.models.errors import UsageError

__all__ = ["bench_bbs_lstm", "pe_bank_table", "csr_vs_bbs", "gops_1024", "resource_table", "resource_markdown",
           "rtl_pb", "rtl_16x16", "quantisation_error", "bench_bbs_lstm_extra", "bench_bbs_lstm_delta"]

CLOCK_MHZ = 200.0  # ASSUMED: the Arria 10 clock Cao et al. report 750.9 GOPS at (SPECS.md arithmetic)
PAPER_GOPS = 750.9


def pe_bank_table(hidden: int, input_size: int, sparsity: float, pes=(4, 8, 16), banks=(4, 8, 16)) -> list[dict]:
    rows = []
    for P in pes:
        for B in banks:
            x_pad = -(-input_size // B) * B
            S = (x_pad + hidden) // B
            k = max(1, round(S * (1 - sparsity)))
            try:
                p = LSTMParams(input_size=input_size, hidden=hidden, banks=B, k=k, pes=P)
            except ValueError as e:
                rows.append({"P": P, "B": B, "skipped": str(e)})
                continue
            m = LSTMCycleModel(p)
            step = m.steady_step()
            rows.append({"P": P, "B": B, "k": k, "bank_size": S, "sparsity": 1 - k / S,
                         "step_ideal": m.step_ideal, "step_cycles": step,
                         "utilisation": m.step_ideal / step,
                         **{f"gops_{k_}": v for k_, v in gops(p, CLOCK_MHZ, step).items()
                            if k_ in ("effective_gops", "sparse_gops")}})
    return rows


def csr_vs_bbs(p: LSTMParams, w_unstructured_mask: np.ndarray, weights: str = "") -> dict:
    """Per-step cycles of the BBS engine and of the row-wise CSR engine (:mod:`hwcosim.models.bbs.csr`)
    with the same ``P * B`` multipliers on the same layer pruned unstructured to the same number
    of nonzeros. ``w_unstructured_mask`` is the logical (4H, I+H) keep-mask; it is laid out in
    the engine's physical order (gate-interleaved rows, interleaved columns: :func:`to_physical`)
    before rows are dealt to PEs, exactly as :func:`hwcosim.cosim.designs.bbs.csr.digits_layers` feeds the CSR
    RTL, so the CSR figure here equals the RTL's. Both engines pay the same recurrence gap
    (pipeline drain) per step."""
    from hwcosim.models.bbs.csr import CSRParams, cycles_from_mask
    from hwcosim.models.bbs.lstm import to_physical

    m = LSTMCycleModel(p)
    mult = p.pes * p.banks
    mp = to_physical(p, np.asarray(w_unstructured_mask, dtype=float)).astype(bool)
    cp = CSRParams(rows=p.rows, cols=p.cols, mults=mult, lanes=p.banks)
    csr = cycles_from_mask(cp, mp)
    gap = m.step_gap()
    bbs_step = m.steady_step()
    csr_step = csr["per_product"] + gap
    return {"weights": weights, "row_order": "physical (gate-interleaved rows 4u+q; row r on PE r % M)",
            "multipliers": mult, "nnz_bbs": p.rows * p.k * p.banks, "nnz_csr": csr["nnz"],
            "csr_pe_load_min": int(csr["loads"].min()), "csr_pe_load_max": csr["depth"],
            "bbs_compute_cycles": m.step_ideal, "csr_compute_cycles": csr["per_product"], "csr_ideal": csr["ideal"],
            "bbs_step_cycles": bbs_step, "csr_step_cycles": csr_step, "speedup_bbs_over_csr": csr_step / bbs_step,
            "compute_speedup": csr["per_product"] / m.step_ideal,
            "bbs_mult_utilisation_compute": p.rows * p.k * p.banks / (m.step_ideal * mult),
            "csr_mult_utilisation_compute": csr["utilisation"],
            "bbs_mult_utilisation_step": p.rows * p.k * p.banks / (bbs_step * mult),
            "csr_mult_utilisation_step": csr["nnz"] / (csr_step * mult)}


def gops_1024(pes: int = 16, banks: int = 16, sparsity: float = 0.875, input_size: int = 1024) -> dict:
    H = 1024
    S = (-(-input_size // banks) * banks + H) // banks
    k = max(1, round(S * (1 - sparsity)))
    p = LSTMParams(input_size=input_size, hidden=H, banks=banks, k=k, pes=pes)
    m = LSTMCycleModel(p)
    g = gops(p, CLOCK_MHZ, m.steady_step())
    # The paper's 750.9 GOPS is dense-equivalent ops/s: 375.5 G dense MAC/s = 1877 dense MAC/cycle at
    # 200 MHz; at 87.5% sparsity that is 1877 / 8 = 234.6 stored-nonzero MAC/cycle, i.e. ~235
    # multipliers at 100% utilisation.
    need = PAPER_GOPS * 1e9 / 2 / (CLOCK_MHZ * 1e6) * (1 - sparsity)
    out = {**g, "clock_note": f"{CLOCK_MHZ:g} MHz ASSUMED (the paper's clock on its Arria 10 GX1150)",
           "pes": pes, "banks": banks, "k": k, "bank_size": S, "multipliers": pes * banks,
           "utilisation": m.step_ideal / m.steady_step(), "paper_gops": PAPER_GOPS,
           "paper_part": "Intel Arria 10 GX1150 at 200 MHz",
           "paper_sparse_mac_per_cycle": need, "ratio_to_paper": g["effective_gops"] / PAPER_GOPS}
    out["measured"] = measured_clock(p, m.steady_step())
    return out


def measured_clock(p: LSTMParams, step_cycles: float) -> dict:
    """The same layer's throughput at the Fmax ``make boards`` measured for ``bbs-lstm`` (nextpnr,
    LFE5U-85F speed 6), with what was measured stated: the registered default layer, not this one."""
    from hwcosim.cosim.flow.fmax import measured

    meas = measured("bbs-lstm")
    mults = p.pes * p.banks  # the SpMxV's P*B multipliers alone (the element-wise unit adds a few)
    if meas is None:
        return {"note": "no measured Fmax yet (run make boards)"}
    g = gops(p, meas.mhz, step_cycles)
    return {"fmax_mhz": meas.mhz, "part": meas.part, "measured_params": meas.params,
            "effective_gops_at_fmax": g["effective_gops"], "ratio_to_paper_at_fmax": g["effective_gops"] / PAPER_GOPS,
            "fits_lfe5u_85f": mults <= 156,
            "note": (f"Fmax of the registered bbs-lstm layer ({meas.label}); this {p.pes}x{p.banks} engine "
                     f"needs at least {mults} multipliers, " + ("within" if mults <= 156 else "more than")
                     + " the LFE5U-85F's 156 MULT18X18D, so its own Fmax is "
                     + ("not yet measured" if mults <= 156 else "not measurable on that part"))}


def quantisation_error(h_golden: np.ndarray, h_float: np.ndarray) -> dict:
    """|h_golden - h_float| over all sequences, steps and units, and at the last step (the readout's
    input). ``h_golden`` dequantised, both (N, T, H)."""
    err = np.abs(np.asarray(h_golden, dtype=np.float64) - np.asarray(h_float, dtype=np.float64))
    return {"mean_abs": float(err.mean()), "max_abs": float(err.max()),
            "mean_abs_last_step": float(err[:, -1].mean()), "max_abs_last_step": float(err[:, -1].max()),
            "n_seq": int(err.shape[0]), "seq_len": int(err.shape[1]), "hidden": int(err.shape[2]),
            "reference": "float64 LSTM on the same pruned float weights and float inputs, exact sigmoid/tanh; "
                         "golden = quantised weights, Q2.10 x/h, PLAN activations"}


def bench_bbs_lstm(out_dir: Path, quick: bool) -> dict:
    from hwcosim.cosim.designs.bbs.lstm import readout_accuracy, trained_pruned_lstm
    from hwcosim.models.bbs.lstm import lstm_float, lstm_golden, prepare_weights
    from hwcosim.models.fixedpoint import dequantize, quantize

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res: dict = {"clock_mhz": CLOCK_MHZ}
    res["table_digits_h64"] = pe_bank_table(64, 8, 0.875)
    res["table_h256"] = pe_bank_table(256, 256, 0.875)
    res["table_h1024"] = pe_bank_table(1024, 1024, 0.875)
    res["gops_1024"] = gops_1024()

    # CSR baseline on the trained digits layer, same number of nonzeros, same multipliers
    p, model, ds, mask, info = trained_pruned_lstm(banks=8, k=2, pes=8)
    _, mu, _, mask_u, _ = trained_pruned_lstm(banks=8, k=2, pes=8, pattern="unstructured")
    res["csr_vs_bbs_digits"] = csr_vs_bbs(p, mask_u, "trained digits LSTM (I=8, H=64), unstructured magnitude "
                                                     "pruning of the trained fused W to the BBS nonzero count")
    rng = np.random.default_rng(0)
    big = LSTMParams(input_size=1024, hidden=1024, banks=16, k=16, pes=16)
    wr = rng.normal(size=(big.rows, 2048))
    from hwcosim.pruning.patterns.unstructured import Unstructured
    res["csr_vs_bbs_1024_random"] = csr_vs_bbs(
        big, Unstructured(sparsity=0.875).mask(wr),
        "RANDOM weights (i.i.d. normal, seed 0), not a trained layer: unstructured magnitude pruning to 87.5%; "
        "i.i.d. weights spread nonzeros evenly over rows, so this understates a trained layer's imbalance")

    # accuracy: dense float, pruned float, golden (fixed point), RTL on real test images
    wts = prepare_weights(p, model.params["W"], model.params["b"], mask)
    xs = quantize(ds.x_test, p.vec_fmt)
    hg, _ = lstm_golden(p, wts, xs)
    hf = lstm_float(wts.w_float, wts.b_float, ds.x_test)
    res["quantisation_error_digits"] = quantisation_error(dequantize(hg, p.vec_fmt), hf)
    acc = {"dense_float": info["dense_test_accuracy"],
           "bbs_pruned_float": readout_accuracy(model, hf[:, -1], ds.y_test),
           "bbs_golden_fixed": readout_accuracy(model, dequantize(hg[:, -1], p.vec_fmt), ds.y_test),
           "unstructured_pruned_float": readout_accuracy(
               mu, lstm_float(mu.params["W"], mu.params["b"], ds.x_test)[:, -1], ds.y_test),
           "sparsity": info["sparsity"], "n_test": int(len(ds.y_test))}
    n = 24 if quick else len(ds.y_test)
    try:
        from hwcosim.cosim.designs.bbs.lstm import run_lstm

        r = run_lstm(p, wts, xs[:n], test_dir=out_dir / "bbs_lstm_rtl")
        h_rtl = np.asarray(r.metrics["h_rtl"], dtype=np.int64)
        acc.update({"rtl_n_images": n, "rtl_equal_golden": bool(np.array_equal(h_rtl, hg[:n])),
                    "rtl": readout_accuracy(model, dequantize(h_rtl[:, -1], p.vec_fmt), ds.y_test[:n]),
                    "golden_same_images": readout_accuracy(model, dequantize(hg[:n, -1], p.vec_fmt), ds.y_test[:n]),
                    "rtl_cycles": r.metrics["cycles"], "model_cycles": LSTMCycleModel(p).expected(n, 8),
                    "rtl_utilisation": r.metrics["utilisation"]})
    except Exception as e:  # simulator missing: report, keep the model figures
        acc["rtl_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    res["digits_accuracy"] = acc
    res.update(bench_bbs_lstm_extra(out_dir, quick))

    write_text(out_dir / "bbs_lstm.json", json.dumps(res, indent=1, default=float))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for key, lab in (("table_digits_h64", "H=64"), ("table_h256", "H=256"), ("table_h1024", "H=1024")):
            rows = [r for r in res[key] if "utilisation" in r]
            ax.plot([f"{r['P']}x{r['B']}" for r in rows], [r["utilisation"] for r in rows], "o-", label=lab)
        ax.axhline(0.9, ls="--", c="grey")
        ax.set_xlabel("P x B")
        ax.set_ylabel("multiplier utilisation per step")
        ax.set_title("BBS LSTM, 87.5% sparsity, batch 1")
        ax.legend()
        plt.setp(ax.get_xticklabels(), rotation=45)
        fig.tight_layout()
        fig.savefig(out_dir / "bbs_lstm_util.png", dpi=100)
        plt.close(fig)
    except ImportError:
        pass
    return res


# --- additions: CSR baseline in RTL, resources vs (P, B), P x B = 16 x 16 in RTL ----------------

#: (P, B) points of the resource table: the digits-sized layer (H=64, I=8) up to 16 x 16.
RESOURCE_CONFIGS = ((4, 4), (8, 8), (16, 8), (16, 16))


def resource_table(configs=RESOURCE_CONFIGS, hidden: int = 64, input_size: int = 8,
                   sparsity: float = 0.875, targets=("xcup", "cyclone10gx"), out_dir=None) -> list[dict]:
    """Yosys resource estimates of the BBS LSTM layer (``LSTMLayer``) over (P, B) for UltraScale+
    (``xcup``) and the Arria 10 fabric (``cyclone10gx``). Estimates, not place-and-route results
    (see :mod:`hwcosim.cosim.flow.synth`). With ``out_dir``, writes ``bbs_lstm_resources.json`` (rows) and
    ``bbs_lstm_resources.md`` (:func:`resource_markdown`) there, atomically."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import check_targets, synthesize
    from hwcosim.hdl.bbs.lstm import LSTMLayer

    targets = check_targets(list(targets))
    rows = []
    for P, B in configs:
        x_pad = -(-input_size // B) * B
        S = (x_pad + hidden) // B
        k = max(1, round(S * (1 - sparsity)))
        p = LSTMParams(input_size=input_size, hidden=hidden, banks=B, k=k, pes=P)
        v = to_verilog(LSTMLayer(p), "bbs_lstm")
        for t in targets:
            r = synthesize(v, "bbs_lstm", t)
            rows.append({"P": P, "B": B, "k": k, "hidden": hidden, "input_size": input_size, "multipliers": P * B,
                         "target": t, "device": r.get("device", t), **r["resources"]})
    if out_dir is not None:
        out_dir = Path(out_dir)
        write_text(out_dir / "bbs_lstm_resources.json", json.dumps(rows, indent=1))
        write_text(out_dir / "bbs_lstm_resources.md",
                   f"# BBS LSTM layer resources vs (P, B): H={hidden}, I={input_size}, {sparsity:.1%} sparsity\n\n"
                   "Yosys estimates (synth_xilinx -family xcup; synth_intel_alm -family cyclone10gx, the Arria 10 "
                   "fabric), not place-and-route results.\n\n" + resource_markdown(rows) + "\n")
    return rows


def resource_markdown(rows: list[dict]) -> str:
    """One row per (P, B), one column group per target: LUT/ALM-LUT, FF, DSP, BRAM per target."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    by = {(r["P"], r["B"], r["target"]): r for r in rows}
    cols = ("LUT", "FF", "DSP", "BRAM")
    head = "| P | B | k | mult | " + " | ".join(f"{t} {c}" for t in targets for c in cols) + " |"
    sep = "|" + "---|" * (4 + len(targets) * len(cols))
    body = []
    for P, B, k, m in dict.fromkeys((r["P"], r["B"], r["k"], r["multipliers"]) for r in rows):
        cells = [str(by[(P, B, t)][c]) if (P, B, t) in by else "-" for t in targets for c in cols]
        body.append(f"| {P} | {B} | {k} | {m} | " + " | ".join(cells) + " |")
    return "\n".join([head, sep, *body])


def rtl_pb(pes: int, banks: int, hidden: int, input_size: int, k: int, out_dir=None, n_seq: int = 1,
           T: int = 3, seed: int = 16, sim=None) -> dict:
    """One (P, B) point of the BBS LSTM engine in RTL simulation, measured, not modelled.

    Random weights (bank-balanced, ``k`` per bank) and random inputs; every hidden-state word is
    compared with :func:`hwcosim.models.bbs.lstm.lstm_golden` in the testbench. Two runs on the same
    build, ``T`` and ``T - 1`` steps: their difference is the measured steady-state step
    (``rows/P * k`` weight beats plus the recurrence drain), so ``step_ideal / step`` is the
    measured multiplier utilisation per step; whole-run cycles are checked against
    :class:`LSTMCycleModel` too.
    """
    from hwcosim.cosim.designs.bbs.lstm import run_lstm
    from hwcosim.models.bbs.lstm import prepare_weights

    if T < 2:
        raise UsageError(f"T must be >= 2 to measure a step by difference, not {T}")
    p = LSTMParams(input_size=input_size, hidden=hidden, banks=banks, k=k, pes=pes)
    rng = np.random.default_rng(seed)
    wts = prepare_weights(p, rng.normal(0, 0.6, size=(p.rows, p.input_size + p.hidden)),
                          rng.normal(0, 0.6, size=p.rows))
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n_seq, T, p.input_size))
    tag = f"rtl_P{pes}xB{banks}_H{hidden}"
    sub = (lambda s: None) if out_dir is None else (lambda s: Path(out_dir) / tag / s)
    m = LSTMCycleModel(p)
    runs = {}
    for t in (T - 1, T):
        r = run_lstm(p, wts, xs[:, :t], test_dir=sub(f"T{t}"), sim=sim)
        runs[t] = ({k_: v for k_, v in r.metrics.items() if k_ != "h_rtl"}, r.seconds)
    mt, secs = runs[T]
    step = (mt["cycles"] - runs[T - 1][0]["cycles"]) / n_seq
    return {"P": pes, "B": banks, "k": k, "hidden": hidden, "input_size": input_size, "bank_size": p.bank_size,
            "sparsity": 1 - k / p.bank_size, "multipliers": pes * banks, "n_seq": n_seq, "seq_len": T,
            "weights": "random, bank-balanced",
            "rtl_cycles": mt["cycles"], "model_cycles": m.expected(n_seq, T), "ideal_cycles": m.ideal(n_seq, T),
            "cycles_equal_model": mt["cycles"] == m.expected(n_seq, T)
            and runs[T - 1][0]["cycles"] == m.expected(n_seq, T - 1),
            "mismatches": mt["mismatches"] + runs[T - 1][0]["mismatches"],
            "words_compared": 2 * n_seq * hidden * T - n_seq * hidden,
            "utilisation_run": mt["utilisation"],
            "step_cycles_rtl": step, "step_ideal": m.step_ideal, "step_cycles_model": m.steady_step(),
            "utilisation_step_rtl": m.step_ideal / step,
            "sim_seconds": secs + runs[T - 1][1]}


def rtl_16x16(out_dir=None, sim=None) -> dict:
    """(P, B) = 16 x 16 in RTL (256 multipliers), two layers at 87.5% target sparsity:

    - ``h256``: H = I = 256, k = 4 of 32 per bank: a step is 1024/16 * 4 = 256 weight beats +
      the 19-cycle recurrence drain (:data:`hwcosim.models.bbs.lstm.STEP_GAP`) = 275 cycles, 93.1%
      multiplier utilisation per step (266 cycles, 96.2%, with the earlier 4-stage
      element-wise unit, 272 with the 10-stage one, 273 with the 11-stage one);
    - ``h64``: the digits-sized H = 64, I = 8 (padded to 16), k = 1 of 5 (80% sparsity, the
      nearest the bank allows): 16 beats + 19 = 35 cycles, 46% per step; the drain dominates
      so small a layer (2 sequences of 3 steps).

    Slow to build: bench only, not ``make test``."""
    return {"h256": rtl_pb(16, 16, 256, 256, 4, out_dir=out_dir, sim=sim),
            "h64": rtl_pb(16, 16, 64, 8, 1, out_dir=out_dir, n_seq=2, sim=sim)}


def bench_bbs_lstm_extra(out_dir: Path, quick: bool) -> dict:
    """The issue-4 additions: CSR vs BBS measured in RTL on the trained digits layer, P x B = 16 x 16
    in RTL, and (unless ``quick``) the Yosys resource table. Each part reports its own error."""
    from hwcosim.cosim.designs.bbs.csr import csr_vs_bbs_rtl

    out_dir = Path(out_dir)
    res: dict = {}
    for key, fn in (("csr_vs_bbs_rtl_digits", lambda: csr_vs_bbs_rtl(n_vectors=4, out_dir=out_dir / "csr_vs_bbs")),
                    ("rtl_16x16", lambda: rtl_16x16(out_dir)),
                    ("resources", (lambda: None) if quick else (lambda: resource_table(out_dir=out_dir)))):
        try:
            res[key] = fn()
        except Exception as e:  # simulator or Yosys missing: report, keep the rest
            res[key] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return res


# --- temporal sparsity (delta mode), issue 4 requirement 7 ------------------------------------

#: Raw thresholds (``vec_fmt`` Q2.10 LSBs: 1/1024): 0 = every changed column is a candidate.
DELTA_THETAS = (0, 51, 102, 205, 307)


def _delta_point(p, wts, model, ds, xs, theta: int, budget: int) -> dict:
    from hwcosim.cosim.designs.bbs.lstm import readout_accuracy
    from hwcosim.models.bbs.lstm_delta import (
        DeltaCycleModel,
        beat_skip_fraction,
        dense_ops_per_step,
        lstm_delta_float,
        lstm_delta_golden,
    )
    from hwcosim.models.fixedpoint import dequantize

    n, T = xs.shape[:2]
    h, _, st = lstm_delta_golden(p, wts, xs, theta, budget, stats=True)
    bpg = st["beats_per_group"]
    dm, base = DeltaCycleModel(p), LSTMCycleModel(p)
    cyc_delta, cyc_base = dm.expected(bpg), base.expected(n, T)
    real_cols = n * T * (p.input_size + p.hidden)
    hf, _ = lstm_delta_float(p, wts.w_float, wts.b_float, ds.x_test, theta * p.vec_fmt.lsb, budget)
    steps = n * T
    return {
        "theta_raw": theta, "theta": theta * p.vec_fmt.lsb, "budget_J": budget,
        "acc_golden": readout_accuracy(model, dequantize(h[:, -1], p.vec_fmt), ds.y_test),
        "acc_float_delta": readout_accuracy(model, hf[:, -1], ds.y_test),
        "selected_col_fraction": float(st["selected"].sum() / real_cols),
        "candidate_col_fraction": float(st["candidates"].sum() / real_cols),
        "skipped_col_fraction": 1.0 - float(st["selected"].sum() / real_cols),
        "mean_beats_per_group": float(bpg.mean()),
        "weight_beats_per_step": float(dm.step_beats(bpg).mean()), "weight_beats_per_step_nondelta": base.step_ideal,
        "skipped_beat_fraction": 1.0 - float(dm.step_beats(bpg).sum() / (steps * base.step_ideal)),
        "cycles_model": cyc_delta, "cycles_model_nondelta": cyc_base,
        "steady_cycles_per_step": dm.steady_cycles(bpg) / steps,
        "steady_cycles_per_step_nondelta": base.steady_step() * (T - 1) / T + base.step_ideal / T,
        "throughput_gain": cyc_base / cyc_delta,
        "effective_gops_200mhz": dense_ops_per_step(p) * steps / (cyc_delta / (CLOCK_MHZ * 1e6)) / 1e9,
        "effective_gops_200mhz_nondelta": dense_ops_per_step(p) * steps / (cyc_base / (CLOCK_MHZ * 1e6)) / 1e9,
        # option (i), for comparison: non-delta weight beats whose P*B lanes all hit idle columns
        "option_i_beat_skip_fraction": beat_skip_fraction(p, wts, st["cand_mask"].reshape(-1, p.cols)),
    }


def bench_bbs_lstm_delta(out_dir: Path, quick: bool) -> dict:
    """Temporal-sparsity (delta) mode of the BBS LSTM engine on the trained digits LSTM.

    For the BBS-pruned layer (k = 2 of 9 per bank, the engine's default digits configuration)
    and, for contrast, the unpruned trained layer on the same engine (k = bank_size = 9), over the
    full digits test set: task accuracy of the delta golden model (fixed point) and of the float
    DeltaLSTM reference vs the non-delta golden and dense float models; selected/skipped column
    and weight-beat fractions; cycles from :class:`hwcosim.models.bbs.lstm_delta.DeltaCycleModel` (exact
    against the RTL in ``tests/bbs/test_bbs_lstm_delta_sim.py``) and the throughput gain over the
    non-delta engine. The RTL is run for the pruned layer at J = 2 on the first test images (12
    when ``quick``, else 48) for every threshold: its cycles and words are compared with the model.
    Writes ``bbs_lstm_delta.json`` and ``bbs_lstm_delta.png`` (accuracy vs throughput gain).
    """
    from hwcosim.cosim.designs.bbs.lstm import readout_accuracy, trained_pruned_lstm
    from hwcosim.models.bbs.lstm import lstm_float, lstm_golden, prepare_weights
    from hwcosim.models.fixedpoint import dequantize, quantize

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res: dict = {"clock_mhz": CLOCK_MHZ, "thetas_raw": list(DELTA_THETAS), "layers": {}}
    # J = bank_size (9) is the plain per-column threshold rule, no budget
    layers = {"bbs_k2": dict(k=2, budgets=(9, 2, 1), finetune_epochs=15),
              "unpruned_k9": dict(k=9, budgets=(9, 4, 2), finetune_epochs=0)}
    for name, cfg in layers.items():
        p, model, ds, mask, info = trained_pruned_lstm(banks=8, k=cfg["k"], pes=8,
                                                       finetune_epochs=cfg["finetune_epochs"])
        wts = prepare_weights(p, model.params["W"], model.params["b"], mask)
        xs = quantize(ds.x_test, p.vec_fmt)
        hg, _ = lstm_golden(p, wts, xs)
        lay = {"params": p.to_dict(), "n_test": int(len(ds.y_test)), "seq_len": int(xs.shape[1]),
               "weight_sparsity": float(1 - p.k / p.bank_size),
               "acc_dense_float": info["dense_test_accuracy"],
               "acc_pruned_float": readout_accuracy(model, lstm_float(wts.w_float, wts.b_float, ds.x_test)[:, -1],
                                                    ds.y_test),
               "acc_golden_nondelta": readout_accuracy(model, dequantize(hg[:, -1], p.vec_fmt), ds.y_test),
               "points": [_delta_point(p, wts, model, ds, xs, th, J) for J in cfg["budgets"] for th in DELTA_THETAS]}
        res["layers"][name] = lay
        if name == "bbs_k2":
            lay["rtl"] = _delta_rtl(p, wts, xs[:12 if quick else 48], out_dir)
    write_text(out_dir / "bbs_lstm_delta.json", json.dumps(res, indent=1, default=float))
    _delta_plot(res, out_dir / "bbs_lstm_delta.png")
    return res


def _delta_rtl(p, wts, xs, out_dir: Path, budget: int = 2) -> list[dict]:
    from hwcosim.cosim.designs.bbs.lstm import run_lstm
    from hwcosim.cosim.designs.bbs.lstm_delta import run_lstm_delta
    from hwcosim.models.bbs.lstm_delta import lstm_delta_golden

    rows = []
    try:
        r0 = run_lstm(p, wts, xs, test_dir=out_dir / "delta_rtl" / "nondelta")
        base = {"theta_raw": None, "mode": "non-delta", "rtl_cycles": r0.metrics["cycles"],
                "model_cycles": LSTMCycleModel(p).expected(*xs.shape[:2]), "mismatches": r0.metrics["mismatches"]}
        rows.append(base)
        for th in DELTA_THETAS:
            r = run_lstm_delta(p, wts, xs, th, budget, test_dir=out_dir / "delta_rtl" / f"theta{th}")
            mt = r.metrics
            hg, _ = lstm_delta_golden(p, wts, xs, th, budget)
            rows.append({"theta_raw": th, "mode": f"delta J={budget}", "n_images": int(len(xs)),
                         "rtl_cycles": mt["cycles"], "model_cycles": mt["model_cycles"],
                         "cycles_equal_model": mt["cycles"] == mt["model_cycles"],
                         "words_equal_golden": bool(np.array_equal(np.asarray(mt["h_rtl"]), hg)),
                         "mismatches": mt["mismatches"], "rtl_mac_beats": mt["dut_mac_beats"],
                         "rtl_selected": mt["dut_delta_selected"], "rtl_candidates": mt["dut_delta_candidates"],
                         "rtl_throughput_gain": base["rtl_cycles"] / mt["cycles"], "sim_seconds": r.seconds})
    except Exception as e:  # simulator missing: report, keep the model figures
        rows.append({"error": f"{type(e).__name__}: {str(e)[:300]}"})
    return rows


def _delta_plot(res: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(res["layers"]), figsize=(11, 4.2), sharey=True)
    for ax, (name, lay) in zip(np.atleast_1d(axes), res["layers"].items()):
        for J in sorted({pt["budget_J"] for pt in lay["points"]}, reverse=True):
            pts = [pt for pt in lay["points"] if pt["budget_J"] == J]
            ax.plot([pt["throughput_gain"] for pt in pts], [pt["acc_golden"] for pt in pts], "o-", label=f"J={J}")
            for pt in pts:
                ax.annotate(f"{pt['theta']:.2f}", (pt["throughput_gain"], pt["acc_golden"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
        ax.axhline(lay["acc_golden_nondelta"], ls="--", c="grey", label="non-delta (fixed point)")
        ax.axhline(lay["acc_dense_float"], ls=":", c="k", label="dense float")
        ax.axvline(1.0, ls="-", c="lightgrey", lw=0.8)
        ax.set_title(f"{name}: weight sparsity {lay['weight_sparsity']:.0%}")
        ax.set_xlabel("throughput gain vs non-delta engine (cycles, model)")
        ax.legend(fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("digits test accuracy (delta golden model)")
    fig.suptitle("BBS LSTM delta mode: labels = threshold theta")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

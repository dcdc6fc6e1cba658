"""Run the BeamRaster precoder RTL against the golden model; real-time budget and DSP benches.

- :func:`run_precoder`: simulate :class:`hwcosim.hdl.beamraster.Precoder` on raw symbols and coefficient
  sets; the testbench compares every antenna sample with
  :func:`hwcosim.models.beamraster.datapath.precode_fixed`.
- :func:`realtime_budget`: measured throughput (subcarrier-symbols per cycle) -> the clock needed
  for an LTE-like 20 MHz carrier (1200 subcarriers x 14 symbols per ms) at M antennas.
- :func:`bench_beamraster_realtime` and :func:`bench_beamraster_dsp`: ``bench_<x>(out_dir, quick)``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.beamraster.datapath import CycleModel, PrecoderParams, fixed_point_sum_rate, precode_fixed, scenario
from hwcosim.models.tables import show

__all__ = ["run_precoder", "run_scenario", "realtime_budget", "LTE_SYMBOLS_PER_S", "bench_beamraster_realtime",
           "bench_beamraster_dsp", "dsp_report", "fixed_point_fraction", "recheck"]

#: 20 MHz LTE-like numerology: 1200 used subcarriers x 14 OFDM symbols per ms.
LTE_SYMBOLS_PER_S = 1200 * 14 * 1000


def run_precoder(p: PrecoderParams, s_re, s_im, beams, P_re, P_im, *, p_idle_s: float = 0.0,
                 p_idle_c: float = 0.0, p_stall: float = 0.0, seed: int = 1, coef_first: bool = True,
                 return_output: bool = False, test_dir: str | os.PathLike | None = None, sim: str | None = None,
                 waves: bool | None = None) -> runner.SimResult:
    """Simulate ``Precoder(p)``; raises :class:`hwcosim.cosim.flow.runner.SimFailure` on any differing sample.

    ``coef_first`` loads the first two coefficient sets before the first symbol (so the measured
    cycles are the datapath's, not the loader's); otherwise both streams start together.
    """
    from hwcosim.hdl.beamraster import Precoder

    s_re = np.asarray(s_re, dtype=np.int64)
    s_im = np.asarray(s_im, dtype=np.int64)
    from hwcosim.cosim.flow.runs import seal

    (x_re, x_im), _ = precode_fixed(p, s_re, s_im, beams, P_re, P_im)
    res = runner.run(
        Precoder(p), "beamraster_precoder", "hwcosim.cosim.designs.beamraster.tb_precoder",
        inputs={"params": p.to_dict(), "p_idle_s": p_idle_s, "p_idle_c": p_idle_c, "p_stall": p_stall,
                "seed": seed, "coef_first": coef_first, "return_output": return_output},
        arrays={"s_re": s_re, "s_im": s_im, "beams": np.asarray(beams, dtype=np.int64),
                "P_re": np.asarray(P_re, dtype=np.int64), "P_im": np.asarray(P_im, dtype=np.int64),
                "x_re": x_re, "x_im": x_im},
        test_dir=test_dir, sim=sim, waves=waves, raise_on_fail=False)
    seal(res.test_dir, "beamraster-precoder")  # a run folder (hwcosim check), also when the run failed
    return runner.check(res, "beamraster_precoder")


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved precoder run without simulating: :func:`precode_fixed` recomputed from the
    saved symbols and coefficient sets against the RTL's saved samples (positions: symbol, antenna,
    0 = real / 1 = imaginary)."""
    from hwcosim.cosim.flow.runs import word_diff

    p = PrecoderParams.from_dict(params)
    (x_re, x_im), _ = precode_fixed(p, np.asarray(arrays["s_re"], dtype=np.int64),
                                    np.asarray(arrays["s_im"], dtype=np.int64), arrays["beams"],
                                    arrays["P_re"], arrays["P_im"])
    want = np.stack([x_re, x_im], axis=-1)
    got = np.stack([np.asarray(outputs["rtl_re"]), np.asarray(outputs["rtl_im"])], axis=-1)
    res = word_diff(got, want)
    saved = np.stack([np.asarray(arrays["x_re"]), np.asarray(arrays["x_im"])], axis=-1)
    res["saved_expected_agrees"] = bool(np.array_equal(saved, want))
    return res


def run_scenario(p: PrecoderParams, n_frames: int = 2, seed: int = 0, snr_db: float = 30.0, **kw) -> tuple:
    """A channel-driven run (:func:`hwcosim.models.beamraster.datapath.scenario`): (SimResult, scenario)."""
    sc = scenario(p, n_frames=n_frames, snr_db=snr_db, seed=seed)
    res = run_precoder(p, sc["s_re"], sc["s_im"], sc["beams"], sc["P_re"], sc["P_im"], seed=seed, **kw)
    return res, sc


def realtime_budget(symbols_per_cycle: float, M: int, K: int, lanes: int,
                    symbols_per_s: float = LTE_SYMBOLS_PER_S) -> dict:
    """Clock needed for ``symbols_per_s`` subcarrier-symbols at a measured throughput."""
    return {"M": M, "K": K, "lanes": lanes, "symbols_per_cycle": symbols_per_cycle,
            "symbols_per_s": symbols_per_s, "clock_mhz": symbols_per_s / symbols_per_cycle / 1e6,
            "cmac_per_s": symbols_per_s * (K * K + K * M)}


def _budget_rows(quick: bool, test_root: Path) -> list[dict]:
    rows = []
    Ks = (8, 16)
    for K in Ks:
        # M = 64 with L = 64 lanes, and a folded L = 16 variant; a few frames measured in simulation
        for L in ((64,) if quick else (64, 16)):
            p = PrecoderParams(M=64, K=K, lanes=L, groups=2, sc_per_group=2, symbols_per_frame=2)
            t0 = time.monotonic()
            res, sc = run_scenario(p, n_frames=2, seed=K + L, return_output=True, test_dir=test_root / f"M64K{K}L{L}")
            mt = res.metrics
            fx = fixed_point_sum_rate(p, sc, np.array(mt.pop("out_re")), np.array(mt.pop("out_im")))
            # steady state: the measured cycles minus the one-off fill, per symbol
            n = mt["n_symbols"]
            steady = (mt["cycles"] - (mt["expected"] - CycleModel(p).ideal(n))) / n
            row = realtime_budget(1.0 / steady, 64, K, L)
            row.update({"cycles": mt["cycles"], "n_symbols": n, "ideal": mt["ideal"], "expected": mt["expected"],
                        "measured_symbols_per_cycle_incl_fill": n / mt["cycles"], "mismatches": mt["mismatches"],
                        "simulator": res.sim, "sim_seconds": round(time.monotonic() - t0, 1),
                        "real_multipliers": p.real_multipliers,
                        "rtl_output_sum_rate_fraction": fx["fraction"], "rtl_output_evm": fx["evm"]})
            rows.append(row)
    return rows


def fixed_point_fraction(M: int, K: int, *, n_frames: int = 4, snr_db: float = 30.0, seed: int = 1,
                         sc_per_group: int = 12, groups: int = 4, symbols_per_frame: int = 4) -> dict:
    """Sum rate of the fixed-point datapath over that of the float precoder it implements.

    Golden model :func:`hwcosim.models.beamraster.datapath.precode_fixed` (bit-exact with the RTL, which
    the simulated rows of the real-time bench check sample by sample) on a channel-driven
    scenario with LTE-like grouping (one pre-distortion matrix per ``sc_per_group`` = 12
    subcarriers), 16-QAM symbols; the float reference uses the same grouped matrices, so the
    fraction isolates the fixed-point error (coefficient quantisation, rounding, saturation).
    """
    p = PrecoderParams(M=M, K=K, lanes=M, groups=groups, sc_per_group=sc_per_group,
                       symbols_per_frame=symbols_per_frame)
    sc = scenario(p, n_frames=n_frames, snr_db=snr_db, seed=seed)
    (xr, xi), _ = precode_fixed(p, sc["s_re"], sc["s_im"], sc["beams"], sc["P_re"], sc["P_im"])
    r = fixed_point_sum_rate(p, sc, xr, xi)
    return {"M": M, "K": K, "snr_db": snr_db, "frames": n_frames, "subcarriers_per_symbol": p.sc_per_symbol,
            "sc_per_group": sc_per_group, "subcarrier_symbols": int(xr.shape[0]), "seed": seed,
            "formats": {k: str(getattr(p, k)) for k in ("sym_fmt", "pd_fmt", "mid_fmt", "tw_fmt", "out_fmt")},
            **r}


def bench_beamraster_realtime(out_dir: Path, quick: bool = False) -> dict:
    """Throughput measured in simulation -> clock for 64 antennas, 20 MHz LTE-like, K = 8 and 16.

    Also records the fixed-point vs float sum-rate fraction: of each simulated run's own RTL
    output words (``rtl_output_sum_rate_fraction``, 16 subcarrier-symbols), and of the golden
    model on a larger LTE-grouped scenario at 20 and 30 dB (``fixed_point_vs_float``).
    """
    from hwcosim.models.atomic import write_text
    from rich.table import Table

    out_dir = Path(out_dir)
    rows = _budget_rows(quick, out_dir / "beamraster_sim")
    fixed = [fixed_point_fraction(64, K, snr_db=snr) for K in (8, 16) for snr in (20.0, 30.0)]
    out = {"numerology": "1200 subcarriers x 14 symbols/ms (20 MHz LTE-like)",
           "symbols_per_s": LTE_SYMBOLS_PER_S, "results": rows,
           "fixed_point_vs_float": {
               "note": "sum rate with the fixed-point datapath output (golden model, bit-exact with the RTL) over "
                       "the float precoder it implements; quantisation error counted as extra receiver noise",
               "results": fixed}}
    write_text(out_dir / "beamraster_realtime.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="BeamRaster precoder: real-time clock for M = 64, 16.8 M subcarrier-symbols/s")
    for c in ("K", "lanes L", "symbols/cycle (steady)", "clock MHz", "1 copy", "real mults", "mismatches"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["K"]), str(r["lanes"]), f"{r['symbols_per_cycle']:.4f}", f"{r['clock_mhz']:.0f}",
                  "yes" if r["clock_mhz"] <= 300 else "no: 2 copies", str(r["real_multipliers"]), str(r["mismatches"]))
    show(t)
    t = Table(title="Fixed-point vs float sum rate (golden model = RTL), M = 64, 16-QAM, 1 P per 12 subcarriers")
    for c in ("K", "SNR dB", "float bit/s/Hz", "fixed bit/s/Hz", "fraction", "EVM (rms, fraction)", "saturated words"):
        t.add_column(c, justify="right")
    for r in fixed:
        t.add_row(str(r["K"]), f"{r['snr_db']:.0f}", f"{r['sum_rate_float']:.3f}", f"{r['sum_rate_fixed']:.3f}",
                  f"{r['fraction']:.5%}", f"{r['evm']:.1e}", str(r["saturated"]))
    show(t)
    return out


def dsp_report(p: PrecoderParams, out_dir: Path | None = None, target: str = "xcup") -> dict:
    """Verilog + Yosys resources of ``Precoder(p)`` on ``target`` (``xcup`` or ``cyclone10gx``)."""
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.hdl.beamraster import Precoder

    v = runner.to_verilog(Precoder(p), "beamraster_precoder")
    rep = synthesize(v, "beamraster_precoder", target, out_dir=out_dir)
    return {"M": p.M, "K": p.K, "lanes": p.lanes, "target": target,
            "model_real_multipliers": p.real_multipliers, **rep["resources"]}


def bench_beamraster_dsp(out_dir: Path, quick: bool = False) -> dict:
    """DSP count vs M and K (Yosys estimates, UltraScale+ and Arria 10), against the 4 (K + L) model.

    The JSON is rewritten after every synthesis run, so an interrupted run keeps what it measured.
    """
    from hwcosim.models.atomic import write_text
    from rich.table import Table

    out_dir = Path(out_dir)
    if quick:
        grid = [(16, 4, 16, "xcup"), (32, 4, 32, "xcup")]
    else:
        grid = [(M, K, M, t) for t in ("xcup", "cyclone10gx")
                for M, K in ((16, 4), (32, 4), (32, 8), (64, 4), (64, 8), (64, 16))]
    rows = []
    out = {"target": "Yosys estimates (xcup = UltraScale+, cyclone10gx = Arria 10 ALM fabric), "
                     "not vendor place-and-route", "results": rows}
    for M, K, L, target in grid:
        p = PrecoderParams(M=M, K=K, lanes=L, groups=2, sc_per_group=2, symbols_per_frame=1)
        t0 = time.monotonic()
        r = dsp_report(p, target=target)
        r["synth_seconds"] = round(time.monotonic() - t0, 1)
        rows.append(r)
        write_text(out_dir / "beamraster_dsp.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="BeamRaster precoder resources vs M, K (lanes L = M), Yosys estimates")
    for c in ("target", "M", "K", "L", "DSP", "model 4(K+L)", "LUT", "FF", "BRAM", "LUTRAM"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(str(r[k]) for k in ("target", "M", "K", "lanes", "DSP", "model_real_multipliers", "LUT", "FF",
                                        "BRAM", "LUTRAM")))
    show(t)
    return out

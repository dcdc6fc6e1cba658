"""Sweep adapter of the KV-Direct pipeline (``hwcosim sweep``): workload, derivation, simulation, metrics."""

from __future__ import annotations

from hwcosim.cosim.flow.sweep import COMMON_SOURCES as _COMMON
from hwcosim.cosim.flow.sweep import MAX_BBS_WEIGHTS, Adapter, _replace  # noqa: F401


# KV-Direct pipeline: reservation-station entries and dependency slots -----------------------------------
def _kvd_simulate(p, w: dict, sim: str, test_dir) -> dict:
    from hwcosim.cosim.designs.kvdirect.pipeline import run_pipeline
    from hwcosim.models.kvdirect.rtl_model import make_stream

    reqs = make_stream(int(w["ops"]), int(w["keys"]), str(w["dist"]), int(w["seed"]))
    res = run_pipeline(p, reqs, latency=int(w["latency"]), outstanding=min(int(w["outstanding"]), p.entries),
                       forward=bool(w["forward"]), p_idle=float(w["p_idle"]), p_stall=float(w["p_stall"]),
                       seed=int(w["seed"]) + 1, test_dir=test_dir, sim=sim, waves=False)
    return res.metrics


def _kvd_metrics(p, w: dict, raw: dict, clock_mhz: float) -> dict:
    """Measured ops/cycle beside two models: the steady-state bound of
    :func:`hwcosim.models.kvdirect.rtl_model.predict_ops_per_cycle` (clock, port, Little's law, chains;
    blind to ``rs_slots`` and to fill/drain, so 1.5-4.5x above a 400-op run with few slots) and
    the cycle model :func:`hwcosim.models.kvdirect.cycles.simulate_cycles` (entries, slots, memory
    port, fill and drain of the run), whose cycles are set against the RTL's."""
    from hwcosim.models.kvdirect.cycles import simulate_cycles
    from hwcosim.models.kvdirect.rtl_model import make_stream, predict_ops_per_cycle

    reqs = make_stream(int(w["ops"]), int(w["keys"]), str(w["dist"]), int(w["seed"]))
    outstanding = min(int(w["outstanding"]), p.entries)
    pred = predict_ops_per_cycle(p, reqs, int(w["latency"]), outstanding, bool(w["forward"]))
    out = {"cycles": raw["cycles"], "ops_per_cycle": raw["ops_per_cycle"], "mops": raw["ops_per_cycle"] * clock_mhz,
           "predicted_ops_per_cycle": pred["ops_per_cycle"], "bound": pred["bound"],
           "merge_fraction": pred["merge_fraction"], "mem_reads_per_op": raw["mem_reads"] / raw["n_ops"],
           "forwarded": raw.get("dut_forwarded", 0), "entries": p.entries, "rs_slots": p.rs_slots,
           "mismatches": raw["mismatches"]}
    if float(w["p_idle"]) == 0.0 and float(w["p_stall"]) == 0.0:  # the cycle model has no idle/stall traffic
        cm = simulate_cycles(p, reqs, int(w["latency"]), outstanding, bool(w["forward"]))
        out.update({"model_cycles": cm["cycles"], "model_ops_per_cycle": cm["ops_per_cycle"],
                    "model_cycles_over_rtl": cm["cycles"] / raw["cycles"], "model_chained": cm["chained"],
                    "model_stall_full_cycles": cm["stall_full"]})
    return out


ADAPTER = Adapter(
        design="kvdirect-pipeline",
        workload={"ops": 400, "keys": 200, "dist": "zipf", "latency": 50, "outstanding": 64, "forward": True,
                  "seed": 11, "p_idle": 0.0, "p_stall": 0.0},
        sources=_COMMON + ("cosim/designs/kvdirect/sweep.py", "models/kvdirect", "cosim/designs/kvdirect/pipeline.py",
                           "cosim/designs/kvdirect/tb_pipeline.py"),
        derive=_replace, simulate=_kvd_simulate, metrics=_kvd_metrics,
        plots=(("metrics.entries", "metrics.ops_per_cycle", "max"),),
        synth_plots=(("resources.LUT", "metrics.ops_per_cycle", "max"),
                     ("resources.FF", "metrics.ops_per_cycle", "max")),
        clock_mhz=180.0,
        columns=("metrics.cycles", "metrics.model_cycles", "metrics.ops_per_cycle", "metrics.model_ops_per_cycle",
                 "metrics.predicted_ops_per_cycle", "metrics.bound", "metrics.mops"))

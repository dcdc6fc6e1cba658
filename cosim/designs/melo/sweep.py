"""Sweep adapter of the MELO receiver engine (``hwcosim sweep``): workload, derivation, simulation, metrics."""

from __future__ import annotations

from hwcosim.cosim.flow.sweep import COMMON_SOURCES as _COMMON
from hwcosim.cosim.flow.sweep import MAX_BBS_WEIGHTS, Adapter, _replace  # noqa: F401


# MELO receiver engine: pool size, blocks, window ------------------------------------------------------
def _melo_simulate(p, w: dict, sim: str, test_dir) -> dict:
    from hwcosim.cosim.designs.melo.engine import golden_streams, lossy_traffic, run_melo_engine

    events = lossy_traffic(p, int(w["packets_per_conn"]), loss=float(w["loss"]), dup=float(w["dup"]),
                           max_delay=int(w["max_delay"]), seed=int(w["seed"]))
    g = golden_streams(p, events)
    res = run_melo_engine(p, events, golden=g, seed=int(w["seed"]) + 1, p_idle=float(w["p_idle"]),
                          p_stall_d=float(w["p_stall"]), p_stall_r=float(w["p_stall"]), test_dir=test_dir,
                          sim=sim, waves=False)
    return {**res.metrics, "golden_stats": g["stats"]}


def _melo_metrics(p, w: dict, raw: dict, clock_mhz: float) -> dict:
    cycles = max(1, raw["cycles"])
    st = raw["golden_stats"]
    return {"cycles": raw["cycles"], "pkts_per_cycle": raw["pkts_per_cycle"],
            "goodput_per_cycle": raw["delivered"] / cycles,
            "goodput_mpps": raw["delivered"] / cycles * clock_mhz,
            "peak_pool_occupancy": st["peak_blocks"] / p.pool_blocks,
            "nack_pool": st["nack_pool"], "nack_pool_fraction": st["nack_pool"] / max(1, raw["data_events"]),
            "on_chip_bits": p.on_chip_bits, "bits_per_conn": p.on_chip_bits / p.n_conns,
            "packets": raw["data_events"], "delivered": raw["delivered"]}


ADAPTER = Adapter(
        design="melo-engine",
        workload={"packets_per_conn": 40, "loss": 0.05, "dup": 0.03, "max_delay": 20, "seed": 7, "p_idle": 0.0,
                  "p_stall": 0.0},
        sources=_COMMON + ("cosim/designs/melo/sweep.py", "models/melo", "cosim/designs/melo/engine.py",
                           "cosim/designs/melo/tb_engine.py"),
        derive=_replace, simulate=_melo_simulate, metrics=_melo_metrics,
        plots=(("metrics.on_chip_bits", "metrics.goodput_per_cycle", "max"),
               ("metrics.on_chip_bits", "metrics.nack_pool_fraction", "min")),
        synth_plots=(("resources.LUT", "metrics.goodput_per_cycle", "max"),
                     ("resources.BRAM", "metrics.goodput_per_cycle", "max")),
        clock_mhz=200.0,
        columns=("metrics.cycles", "metrics.pkts_per_cycle", "metrics.goodput_mpps", "metrics.peak_pool_occupancy",
                 "metrics.nack_pool"))

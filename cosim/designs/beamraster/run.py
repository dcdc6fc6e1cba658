"""One BeamRaster precoder RTL run on a channel-driven stimulus, reported (``hwcosim beamraster sim``).

Every sample is compared with the golden model; the record has the cycles vs the model, the
fixed-point sum-rate fraction and the clock a 20 MHz LTE-like carrier needs.
"""

from __future__ import annotations

import json
from pathlib import Path

from hwcosim.models.tables import show

__all__ = ["run_sim"]


def run_sim(p, out: Path, frames: int = 2, seed: int = 0, snr_db: float = 30.0, p_idle: float = 0.0,
            p_stall: float = 0.0) -> Path:
    """Simulate the precoder of ``p`` (``PrecoderParams``) into ``out``: ``<stem>.json`` and the run
    folder ``<stem>/`` appear together at the end; prints the table; returns the JSON's path."""
    import numpy as np
    from hwcosim.cosim.designs.beamraster.precoder import realtime_budget, run_scenario
    from hwcosim.models.atomic import staged_dir, write_text
    from hwcosim.models.beamraster.datapath import CycleModel, fixed_point_sum_rate
    from rich.table import Table

    out = Path(out)
    stem = f"beamraster_sim_M{p.M}K{p.K}L{p.lanes}"
    with staged_dir(out) as st:  # the summary and the run folder <stem>/ appear together, at the end
        res, sc = run_scenario(p, n_frames=frames, seed=seed, snr_db=snr_db, p_idle_s=p_idle,
                               p_idle_c=p_idle, p_stall=p_stall, return_output=True, test_dir=st / stem)
        mt = res.metrics
        fx = fixed_point_sum_rate(p, sc, np.array(mt.pop("out_re")), np.array(mt.pop("out_im")))
        model = CycleModel(p)
        budget = realtime_budget(model.symbols_per_cycle(), p.M, p.K, p.lanes)
        rec = {"params": p.to_dict(), "metrics": {k: v for k, v in mt.items() if k != "mismatch_list"},
               "fixed_point": fx, "budget_from_model": budget, "run_folder": stem}
        write_text(st / f"{stem}.json", json.dumps(rec, indent=1) + "\n")
    path = out / f"{stem}.json"
    t = Table(title=f"BeamRaster precoder RTL ({res.sim}): M={p.M}, K={p.K}, L={p.lanes}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in (("subcarrier-symbols", mt["n_symbols"]), ("mismatches", mt["mismatches"]),
                 ("cycles (measured)", mt["cycles"]), ("cycles (model, no stalls)", mt["expected"]),
                 ("ideal", mt["ideal"]), ("symbols / cycle (steady)", f"{model.symbols_per_cycle():.4f}"),
                 ("sum rate fixed / float", f"{fx['fraction']:.4%}"), ("EVM", f"{fx['evm']:.2e}"),
                 ("clock for 16.8 M symbols/s", f"{budget['clock_mhz']:.0f} MHz")):
        t.add_row(k, str(v))
    show(t)
    return path

"""The tables of the MELO study and of one simulator run (``hwcosim melo study|run``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hwcosim.models.tables import show

__all__ = ["print_study", "print_run", "run_one"]


def _fmt(x: float, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def print_study(res: dict, con=None) -> None:
    """The goodput and receiver-state tables of :func:`hwcosim.models.melo.study.run_study`'s result."""
    from rich.console import Console
    from rich.table import Table

    con = con or Console()
    h = res["headline"]
    cfg = res["config"]

    t = Table(title="Goodput MELO / go-back-N (backlogged, i.i.d. loss)")
    t.add_column("loss %", justify="right")
    for n in cfg["tput_conns"]:
        t.add_column(f"{n} conns", justify="right")
    t.add_column(f"p99 FCT GBN/MELO ({cfg['fct_workloads'][0]})", justify="right")
    for loss in cfg["losses"]:
        row = [f"{100 * loss:g}"]
        row += [_fmt(h["tput_ratio_melo_over_gbn"][f"n={n}"][str(loss)]) + "x" for n in cfg["tput_conns"]]
        row.append(_fmt(h["p99_fct_ratio_gbn_over_melo"][cfg["fct_workloads"][0]][str(loss)]) + "x")
        t.add_row(*row)
    show(t, con)

    t = Table(title=f"On-chip receiver state, bytes per connection ({100 * cfg['conns_loss']:g}% loss)")
    for c in ("conns", "GBN B/conn", "SR full bitmap B/conn", "MELO avg B/conn", "MELO peak B/conn",
              "MELO provisioned B/conn"):
        t.add_column(c, justify="right")
    for n in cfg["conns"]:
        m = h["memory_B_per_conn"][f"n={n}"]
        t.add_row(str(n), *(_fmt(m[k]) for k in ("gbn", "sr", "melo_avg", "melo_peak", "melo_provisioned")))
    show(t, con)
    con.print(
        "paper: up to 14.02x goodput, 3.11x lower p99 FCT, ~23 B/conn; "
        f"ours: max {h['max_tput_ratio']:.2f}x goodput, "
        f"max {h['max_p99_fct_ratio']:.2f}x p99 FCT, MELO avg {h['melo_mem_avg_B_range'][0]:.1f}-"
        f"{h['melo_mem_avg_B_range'][1]:.1f} B/conn (see models/melo/study.py for why they differ)"
    )


def print_run(p, r) -> None:
    """The summary table of one :func:`hwcosim.models.melo.sim.simulate` run ``r`` of ``p``."""
    from rich.table import Table

    t = Table(title=f"{p.scheme}: {p.n_conns} conns, {100 * p.loss.rate:g}% loss, {p.workload}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    s = r.summary()
    for k in (
        "goodput_gbps",
        "sent_pkts",
        "retx_pkts",
        "timeouts",
        "fct_p50_us",
        "fct_p99_us",
        "fct_p999_us",
        "mem_avg_B",
        "mem_peak_B",
        "mem_provisioned_B",
        "melo_nack_pool",
        "complete",
        "wall_s",
    ):
        v = s[k]
        t.add_row(k, _fmt(v) if isinstance(v, float) else str(v))
    show(t)


def run_one(out: Path, loss: float = 0.01, burst: float = 1.0, **params) -> Path:
    """One :func:`hwcosim.models.melo.sim.simulate` run of ``SimParams(loss=LossModel(loss, burst),
    **params)``: ``melo_run_<scheme>.json`` in ``out`` and its table; returns the JSON's path. Bad
    parameters raise UsageError."""
    from hwcosim.models.atomic import write_text
    from hwcosim.models.errors import UsageError
    from hwcosim.models.melo.sim import LossModel, SimParams, simulate

    try:
        p = SimParams(loss=LossModel(loss, burst), **params)
    except ValueError as e:
        raise UsageError(str(e)) from e
    r = simulate(p)
    path = write_text(
        Path(out) / f"melo_run_{p.scheme}.json",
        json.dumps({"params": r.params, "summary": r.summary(), "fct_us": r.fct_us}, indent=1) + "\n",
    )
    print_run(p, r)
    return path

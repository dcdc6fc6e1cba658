"""One host session with a design's board top, checked word for word against the golden model
(``hwcosim board run``): on a board over a serial port, or against the board top's RTL in cocotb
through a bit-level UART model (:mod:`hwcosim.cosim.flow.board`)."""

from __future__ import annotations

import time

from hwcosim.models.errors import CheckFailed
from hwcosim.models.tables import emit, show

__all__ = ["run_board"]


def run_board(design, host, p, inp: dict, port: str | None = None, baud: int = 115200, output=None) -> int:
    """Drive ``design``'s board top (its host module ``host``, parameters ``p``, inputs ``inp``) over
    ``port`` at ``baud``, or, without a port, its RTL through a UART model (run folder ``output``);
    prints the table and raises CheckFailed when a word or counter disagrees with the golden model."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    t0 = time.monotonic()
    if port:
        from hwcosim.cosim.flow.board import HostLink, SerialTransport, run_sync

        transport = SerialTransport(port, baud)
        try:
            res = run_sync(host.session(HostLink(transport), p, **inp, log=con.print))
        finally:
            transport.close()
        where = f"{port} at {baud} baud"
        summary = host.compare(p, res=res, **inp)
        link = (res["bytes_sent"], res["bytes_received"])
    else:
        from hwcosim.cosim.flow.runs import staged_run

        # the run folder (RTL words, golden words, inputs, manifest) is staged and renamed into place
        # when complete; it is kept also when the RTL disagrees (hwcosim check re-verifies it)
        with staged_run(output, f"{design.top}_board") as (run_dir, st):
            sim = host.run_board_sim(p, **inp, test_dir=st, raise_on_fail=False)
        if "mismatches" not in sim.metrics:
            raise CheckFailed(f"the simulation failed before it compared the results; log {run_dir / 'sim.log'}")
        summary = dict(sim.metrics)
        summary.pop("mismatch_list", None)
        where = f"RTL on {sim.sim} through a UART model (run folder {run_dir})"
        link = (summary.get("bytes_sent", 0), summary.get("bytes_received", 0))
    secs = time.monotonic() - t0
    t = Table(title=f"hwcosim board run {design.name}: {where}; {summary.get('shape', '')}")
    for c in ("runs", "result words", "mismatches", "run cycles (first)", "expected cycles", "ideal cycles",
              "bytes sent / received", "seconds"):
        t.add_column(c, justify="right")
    rc = summary["run_cycles"]
    t.add_row(str(summary["vectors"]), str(summary["words"]), str(summary["mismatches"]),
              str(rc[0]) if rc else "-", str(summary.get("expected_run_cycles") or "-"),
              str(summary.get("ideal_run_cycles") or "-"),
              f"{link[0]} / {link[1]}", f"{secs:.1f}")
    show(t, con)
    con.print("board counters: " + ", ".join(f"{k} {v}" for k, v in summary["counters"].items()))
    emit("summary", {k: v for k, v in summary.items() if k != "golden"})
    if summary["problems"]:
        raise CheckFailed("; ".join(summary["problems"]))
    con.print(f"all {summary['words']} result words match the golden model")
    return 0

"""Builds of registered designs as library calls: out-of-context place and route over seeds, board-top
bitstreams, their tables and plot (``hwcosim build`` parses its flags and calls these; the tools are
driven by :mod:`hwcosim.cosim.flow.build` and :mod:`hwcosim.cosim.flow.board_build`)."""

from __future__ import annotations

import json
from pathlib import Path

from hwcosim.cosim.flow.build import ROUTERS
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import emit, show

__all__ = ["build_ooc_designs", "build_board_tops", "board_pll", "plot_results", "list_boards", "programmer"]


def list_boards() -> int:
    """Print the boards and parts."""
    from hwcosim.cosim.flow.build import BOARDS, FAMILIES
    from rich.table import Table

    t = Table(title="hwcosim build: boards and parts (nextpnr-ecp5, nextpnr-ice40)")
    for c in ("board", "family", "part", "speed grade", "package", "oscillator MHz", "bitstream", "what"):
        # names are typed back on the command line: keep them whole; the description folds
        t.add_column(c, overflow="fold", no_wrap=c in ("board", "part", "package"))
    for b in BOARDS.values():
        t.add_row(b.name, b.family, b.device, str(b.speed) if b.speed else "-", b.package, f"{b.clock_mhz:g}",
                  "yes (" + FAMILIES[b.family].packer.removeprefix("yowasp-") + ")" if b.platform else "no (--ooc)",
                  b.description)
    show(t)
    return 0


def programmer(board) -> str:
    """The command that programs a bitstream onto ``board``."""
    return "openFPGALoader -b ulx3s" if board.name.startswith("ulx3s") else (
        "iceprog" if board.family == "ice40" else "openFPGALoader -b ecpix5")


def board_pll(board, clock_mhz):
    """PLL settings for a board build at ``clock_mhz`` (None: the oscillator); exit 2 when the
    family has no PLL support here or the PLL cannot make the clock."""
    if clock_mhz is None or abs(clock_mhz - board.clock_mhz) < 1e-9:
        return None
    if board.family != "ecp5":
        raise UsageError(f"--clock {clock_mhz:g}: board tops on {board.name} run at its {board.clock_mhz:g} MHz "
                         f"oscillator (the PLL is ECP5-only for now); leave --clock out")
    from hwcosim.hdl.common.clocking import ecp5_pll_settings

    try:
        return ecp5_pll_settings(board.clock_mhz, clock_mhz)
    except ValueError as e:
        raise UsageError(f"--clock {clock_mhz:g}: {e}") from None


def build_ooc_designs(plans: list, board, clock: float, seeds: list[int], out: Path, max_minutes: float = 30.0,
                      router: str = ROUTERS[0], plot: bool = False, skipped: tuple = (),
                      timing_allow_fail: bool = False) -> dict:
    """Place and route each ``(design, params)`` of ``plans`` out of context on ``board``'s part at
    ``clock`` MHz over ``seeds``: ``build.json`` per design and in total (and ``build.png`` with
    ``plot``) staged into ``out``; prints the table; returns the summary. Raises CheckFailed when a
    design does not build (of several) or misses timing (unless ``timing_allow_fail``)."""
    from hwcosim.cosim.flow.build import build_ooc, commit, crit_text, stage, summary_columns, summary_row
    from rich.console import Console
    from rich.table import Table

    out = Path(out)
    st = stage(out)
    con = Console()
    results, failures = [], []
    try:
        for d, p in plans:
            try:
                res = build_ooc(d, p, board, clock, seeds, st / d.name, log=con.print,
                                max_minutes=max_minutes, router=router)
            except CheckFailed as e:
                if len(plans) == 1:
                    raise
                failures.append({"design": d.name, "error": str(e),
                                 "params": p.to_dict() if hasattr(p, "to_dict") else {}})
                con.print(f"[red]{d.name}: {e}[/]")
                continue
            (st / d.name).mkdir(parents=True, exist_ok=True)
            (st / d.name / "build.json").write_text(json.dumps(res, indent=1) + "\n")
            results.append(res)
        summary = {"board": board.name, "family": board.family, "part": board.device, "speed": board.speed,
                   "package": board.package, "target_mhz": clock,
                   "seeds": seeds, "results": results, "failures": failures,
                   "not_built": [{"design": n, "reason": f"no {board.family} configuration registered"}
                                 for n in skipped]}
        (st / "build.json").write_text(json.dumps(summary, indent=1) + "\n")
        if plot and results:
            plot_results(summary, st / "build.png")
        commit(st, out)
    finally:
        import shutil

        shutil.rmtree(st, ignore_errors=True)
    t = Table(title=f"hwcosim build: {board.part_text}, out of context"
                    f"{'' if board.family == 'ecp5' else ' (scan harness)'}, seeds "
                    f"{','.join(map(str, seeds))} (nextpnr; not vendor sign-off)")
    for c in summary_columns(board.family):
        t.add_column(c, justify="right", overflow="fold")
    for r in results:
        t.add_row(*summary_row(r))
    show(t, con)
    for r in results:
        con.print(f"  {r['design']}: critical path {crit_text(r)}")
    if skipped:
        con.print(f"  not built (no {board.family} configuration registered): {', '.join(skipped)}")
    con.print(f"wrote {out / 'build.json'}")
    emit("summary", summary)
    if failures:
        raise CheckFailed(f"{len(failures)} design(s) did not build: " + "; ".join(
            f"{f['design']}: {f['error']}" for f in failures))
    missed = [r["design"] for r in results if not r["timing_met"]]
    if missed and not timing_allow_fail:
        raise CheckFailed(f"timing not met at {clock:g} MHz: " + ", ".join(
            f"{r['design']} {r['worst_fmax_mhz']:.1f} MHz" for r in results if not r["timing_met"])
            + " (reported above; --timing-allow-fail exits 0)")
    return summary


def build_board_tops(plans: list, board, out: Path, baud: int = 115200, seed: int = 1, pll=None,
                     router: str = ROUTERS[0], max_minutes: float = 30.0, timing_allow_fail: bool = False) -> list:
    """A bitstream of each ``(design, params)`` board top (host bridge + design) of ``plans`` on
    ``board`` (``pll``: :func:`board_pll`), staged into ``out``; prints the table; returns the
    results. Raises CheckFailed when a bitstream is missing or timing is missed (unless
    ``timing_allow_fail``)."""
    from hwcosim.cosim.flow.board_build import build_board
    from hwcosim.cosim.flow.build import commit, crit_text, stage, summary_columns, summary_row
    from rich.console import Console
    from rich.table import Table

    out = Path(out)
    st = stage(out)
    con = Console()
    results = []
    try:
        for d, p in plans:
            res = build_board(d, p, board, st / d.name, baud=baud, seed=seed, log=con.print, pll=pll,
                              router=router, max_minutes=max_minutes)
            if res["bitstream"]:   # beside build.json: the staging folder it was written in is renamed
                res["bitstream"] = Path(res["bitstream"]).name
            (st / d.name / "build.json").write_text(json.dumps(res, indent=1) + "\n")
            results.append(res)
        commit(st, out)
    finally:
        import shutil

        shutil.rmtree(st, ignore_errors=True)
    clock = (f"{pll.fout_mhz:.4g} MHz from the {board.clock_mhz:g} MHz oscillator through the PLL" if pll
             else f"{board.clock_mhz:g} MHz oscillator")
    t = Table(title=f"hwcosim build: {board.name} ({board.part_text}), board top with the "
                    f"UART host bridge at {baud} baud, {clock} (nextpnr; not vendor sign-off)")
    for c in summary_columns(board.family) + ["bitstream"]:
        t.add_column(c, justify="right", overflow="fold")
    for r in results:
        bit = Path(r["bitstream"]).name if r["bitstream"] else "not written"
        t.add_row(*summary_row(r), bit)
    show(t, con)
    for r in results:
        con.print(f"  {r['design']}: critical path {crit_text(r)}")
        if r["bitstream"]:
            target = "OUT/ (the compiled folder)" if r["design"] == "compiled-board" else r["design"]
            con.print(f"  bitstream: {out / r['design'] / Path(r['bitstream']).name} "
                      f"(program it: {programmer(board)} FILE; then hwcosim board run {target} --port PORT)")
    emit("results", results)
    missing = [r["design"] for r in results if not r["bitstream"]]
    if missing:
        raise CheckFailed(f"no bitstream written for {', '.join(missing)}")
    missed = [r for r in results if not r["timing_met"]]
    if missed and not timing_allow_fail:
        raise CheckFailed("timing not met at the board clock: " + ", ".join(
            f"{r['design']} {r['worst_fmax_mhz']:.1f} MHz < {r['target_mhz']:g} MHz" for r in missed))
    return results


def plot_results(summary: dict, path: Path) -> Path:
    """Fmax (min and median over seeds) per design against the target, and LUT/DSP use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    res = summary["results"]
    names = [r["design"] for r in res]
    fmin = [r["worst_fmax_mhz"] for r in res]
    fmed = [min(v["median"] for v in r["fmax_mhz"].values()) if r["fmax_mhz"] else 0 for r in res]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    x = range(len(names))
    ax1.bar([i - 0.2 for i in x], fmin, 0.4, label="min over seeds")
    ax1.bar([i + 0.2 for i in x], fmed, 0.4, label="median")
    ax1.axhline(summary["target_mhz"], color="k", ls="--", lw=1, label=f"target {summary['target_mhz']:g} MHz")
    ax1.set_xticks(list(x), names, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("Fmax (MHz, nextpnr)")
    ax1.set_title(f"{summary['part']}" + (f" speed {summary['speed']}" if summary.get("speed") else "")
                  + ", out of context")
    ax1.legend(fontsize=7)
    lut = [100 * r["area"]["LUT4"] / max(1, r["area"]["LUT4_available"]) for r in res]
    dsp = [100 * r["area"]["DSP"] / max(1, r["area"]["DSP_available"]) for r in res]
    bram = [100 * r["area"]["BRAM"] / max(1, r["area"]["BRAM_available"]) for r in res]
    ax2.bar([i - 0.27 for i in x], lut, 0.27, label="LUT4")
    ice40 = summary.get("family") == "ice40"
    ax2.bar(list(x), dsp, 0.27, label="SB_MAC16" if ice40 else "MULT18X18D")
    ax2.bar([i + 0.27 for i in x], bram, 0.27, label="EBR" if ice40 else "DP16KD")
    ax2.set_xticks(list(x), names, rotation=35, ha="right", fontsize=8)
    ax2.set_ylabel("% of the part")
    ax2.set_title("utilisation")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)

"""``hwcosim build``: place and route a registered design with nextpnr (see :mod:`hwcosim.cosim.flow.build`)."""

from __future__ import annotations

import json
from pathlib import Path

from hwcosim.cosim.cli.util import out_dir
from hwcosim.cosim.registry import add_param_args, designs, get_design, resolve_params
from hwcosim.cosim.flow.build import ROUTERS
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import emit, show

__all__ = ["register"]


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: give comma-separated integers, e.g. --seeds 1,2,3") from None
    if not seeds or len(seeds) > 16 or any(not 0 <= s < 2**31 for s in seeds):
        raise UsageError(f"--seeds {text!r}: give 1 to 16 seeds in [0, 2**31)")
    return seeds


def _list_boards() -> int:
    from rich.table import Table

    from hwcosim.cosim.flow.build import BOARDS, FAMILIES

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


def _programmer(board) -> str:
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


def cmd_build(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from hwcosim.cosim.flow.build import build_ooc, commit, crit_text, get_board, stage, summary_columns, summary_row

    if args.list_boards:
        return _list_boards()
    if not args.design:
        raise UsageError("give a design (or all), e.g. hwcosim build melo-engine --ooc; see --list-boards")
    chosen = list(designs().values()) if args.design == "all" else [get_design(args.design)]
    board = get_board(args.board or "lfe5u-85f-6")
    skipped = []
    if args.design == "all" and board.family != "ecp5" and not (args.param or args.params):
        # the ECP5 configurations are far beyond a small part: build the designs that register one
        skipped = [d.name for d in chosen if not any(f == board.family for f, _ in d.family_params)]
        chosen = [d for d in chosen if d.name not in skipped]
        if not chosen:
            raise UsageError(f"no design registers a configuration for {board.family}; give one with --param")
    if args.clock is not None and not args.clock > 0:
        raise UsageError(f"--clock {args.clock:g}: give a clock in MHz above 0")
    if not args.max_minutes > 0:
        raise UsageError(f"--max-minutes {args.max_minutes:g}: give a time limit in minutes above 0")
    if not args.ooc:
        return _build_board(args, chosen, board)
    if args.clock is None:
        args.clock = 100.0
    seeds = _seeds(args.seeds) if args.seeds else [args.seed]
    plans = []
    for d in chosen:  # validate every parameter set before any work
        plans.append((d, plan_params(d, args, board)))
    out = out_dir(args.output, "build/pnr")
    st = stage(out)
    con = Console()
    results, failures = [], []
    try:
        for d, p in plans:
            try:
                res = build_ooc(d, p, board, args.clock, seeds, st / d.name, log=con.print,
                                max_minutes=args.max_minutes, router=args.router)
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
                   "package": board.package, "target_mhz": args.clock,
                   "seeds": seeds, "results": results, "failures": failures,
                   "not_built": [{"design": n, "reason": f"no {board.family} configuration registered"}
                                 for n in skipped]}
        (st / "build.json").write_text(json.dumps(summary, indent=1) + "\n")
        if args.plot and results:
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
    if missed and not args.timing_allow_fail:
        raise CheckFailed(f"timing not met at {args.clock:g} MHz: " + ", ".join(
            f"{r['design']} {r['worst_fmax_mhz']:.1f} MHz" for r in results if not r["timing_met"])
            + " (reported above; --timing-allow-fail exits 0)")
    return 0


def _build_board(args, chosen, board) -> int:
    """A bitstream of each chosen design's board top (host bridge + design) on ``board``."""
    from rich.console import Console
    from rich.table import Table

    from hwcosim.cosim.flow.board_build import board_top_ref, build_board
    from hwcosim.cosim.flow.build import commit, crit_text, stage, summary_columns, summary_row

    if args.board is None:
        raise UsageError("a bitstream needs a board: --board ulx3s-85f (see --list-boards), or --ooc for the core")
    plans = []
    for d in chosen:
        board_top_ref(d)  # refuses a design without a board top before any work
        plans.append((d, plan_params(d, args, board)))
    pll = board_pll(board, args.clock)
    out = out_dir(args.output, "build/board")
    st = stage(out)
    con = Console()
    results = []
    try:
        for d, p in plans:
            res = build_board(d, p, board, st / d.name, baud=args.baud, seed=args.seed, log=con.print, pll=pll,
                              router=args.router, max_minutes=args.max_minutes)
            (st / d.name / "build.json").write_text(json.dumps(res, indent=1) + "\n")
            results.append(res)
        commit(st, out)
    finally:
        import shutil

        shutil.rmtree(st, ignore_errors=True)
    clock = (f"{pll.fout_mhz:.4g} MHz from the {board.clock_mhz:g} MHz oscillator through the PLL" if pll
             else f"{board.clock_mhz:g} MHz oscillator")
    t = Table(title=f"hwcosim build: {board.name} ({board.part_text}), board top with the "
                    f"UART host bridge at {args.baud} baud, {clock} (nextpnr; not vendor sign-off)")
    for c in summary_columns(board.family) + ["bitstream"]:
        t.add_column(c, justify="right", overflow="fold")
    for r in results:
        bit = Path(r["bitstream"]).name if r["bitstream"] else "not written"
        t.add_row(*summary_row(r), bit)
    show(t, con)
    for r in results:
        con.print(f"  {r['design']}: critical path {crit_text(r)}")
        if r["bitstream"]:
            con.print(f"  bitstream: {out / r['design'] / Path(r['bitstream']).name} "
                      f"(program it: {_programmer(board)} FILE; then hwcosim board run {r['design']} --port PORT)")
    emit("results", results)
    missing = [r["design"] for r in results if not r["bitstream"]]
    if missing:
        raise CheckFailed(f"no bitstream written for {', '.join(missing)}")
    missed = [r for r in results if not r["timing_met"]]
    if missed and not args.timing_allow_fail:
        raise CheckFailed("timing not met at the board clock: " + ", ".join(
            f"{r['design']} {r['worst_fmax_mhz']:.1f} MHz < {r['target_mhz']:g} MHz" for r in missed))
    return 0


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


def plan_params(d, args, board=None):
    """A design's parameters for a build: its board configuration (for a bitstream, its board top's:
    ``Design.board_top_params``; else its defaults), then
    ``--params FILE``, then ``--param`` (:mod:`hwcosim.models.precedence`; ``hwcosim board run`` resolves the
    same way, so a bitstream and the host session agree). Before, any ``--param`` silently replaced
    the whole board configuration by the design's defaults."""
    base = d.board_config(board.family if board is not None else "ecp5", top=not getattr(args, "ooc", True))
    return resolve_params(d, args.param, args.params, base=base)


def register(sub) -> None:
    ap = sub.add_parser(
        "build", help="place and route a design with nextpnr: Fmax and area on a named FPGA part",
        description="Synthesise a registered design with Yosys (synth_ecp5 / synth_ice40) and place and "
                    "route it with nextpnr-ecp5 / nextpnr-ice40 out of context (--ooc: the core alone on the "
                    "board's part) over one or more seeds, or build its board top (UART host bridge + design) "
                    "into a bitstream (--board BOARD without --ooc; --clock sets the ECP5 PLL); prints LUT4/FF/"
                    "DSP/block RAM (and SPRAM on the iCE40) used and available and Fmax per clock (min and "
                    "median over the seeds) against the target clock, and writes build.json with the kept "
                    "nextpnr reports. Exit 0 when timing is met (or --timing-allow-fail), 1 when it is not "
                    "or the design does not fit (the overflowing utilisation line is printed), 2 on bad input.")
    ap.add_argument("design", nargs="?", help="a registered design or all (" + ", ".join(designs()) + ")")
    ap.add_argument("--board", default=None, help="board or part (default lfe5u-85f-6); see --list-boards")
    ap.add_argument("--ooc", action="store_true", help="out of context: the core alone (Fmax and area); without "
                    "it, a --board builds the design's board top (UART host bridge + design) into a bitstream")
    ap.add_argument("--baud", type=int, default=115200, choices=(115200, 230400, 460800, 921600),
                    help="UART rate of the board top's host bridge (default 115200)")
    ap.add_argument("--clock", type=float, default=None,
                    help="target clock in MHz (default 100 out of context); on an ECP5 board build, the design "
                         "clock the PLL makes from the oscillator (default: the oscillator, no PLL)")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr placement seed (default 1)")
    ap.add_argument("--seeds", default=None, metavar="S1,S2,...", help="several seeds: Fmax min and median")
    ap.add_argument("-o", "--output", default=None, help="output folder (default build/pnr)")
    ap.add_argument("--timing-allow-fail", action="store_true", help="exit 0 even when timing is not met")
    ap.add_argument("--max-minutes", type=float, default=30.0,
                    help="give up on a place-and-route run (a whole board build) after this long (default 30)")
    ap.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                    help="nextpnr's router (default router1; router2 resolves congested designs faster)")
    ap.add_argument("--plot", action="store_true", help="also write build.png (Fmax and utilisation per design)")
    ap.add_argument("--list-boards", action="store_true", help="list the boards and parts, then exit")
    add_param_args(ap)
    ap.set_defaults(func=cmd_build)

"""``hwcosim build``: place and route a registered design with nextpnr (see :mod:`hwcosim.cosim.flow.build`)."""

from __future__ import annotations

from hwcosim.cosim.cli.util import add_param_args, out_dir
from hwcosim.cosim.flow.build import ROUTERS
from hwcosim.cosim.registry import designs, get_design, resolve_params
from hwcosim.models.errors import UsageError

__all__ = ["register"]


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: give comma-separated integers, e.g. --seeds 1,2,3") from None
    if not seeds or len(seeds) > 16 or any(not 0 <= s < 2**31 for s in seeds):
        raise UsageError(f"--seeds {text!r}: give 1 to 16 seeds in [0, 2**31)")
    return seeds


def cmd_build(args) -> int:
    from hwcosim.cosim.flow.build import get_board
    from hwcosim.cosim.flow.builds import build_ooc_designs, list_boards

    if args.list_boards:
        return list_boards()
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
    build_ooc_designs(plans, board, args.clock, seeds, out_dir(args.output, "build/pnr"), max_minutes=args.max_minutes,
                      router=args.router, plot=args.plot, skipped=tuple(skipped),
                      timing_allow_fail=args.timing_allow_fail)
    return 0


def _build_board(args, chosen, board) -> int:
    """A bitstream of each chosen design's board top (host bridge + design) on ``board``."""
    from hwcosim.cosim.flow.board_build import board_top_ref
    from hwcosim.cosim.flow.builds import board_pll, build_board_tops

    if args.board is None:
        raise UsageError("a bitstream needs a board: --board ulx3s-85f (see --list-boards), or --ooc for the core")
    plans = []
    for d in chosen:
        board_top_ref(d)  # refuses a design without a board top before any work
        plans.append((d, plan_params(d, args, board)))
    build_board_tops(plans, board, out_dir(args.output, "build/board"), baud=args.baud, seed=args.seed,
                     pll=board_pll(board, args.clock), router=args.router, max_minutes=args.max_minutes,
                     timing_allow_fail=args.timing_allow_fail)
    return 0


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

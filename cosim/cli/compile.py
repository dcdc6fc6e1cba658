"""``hwcosim compile`` and ``hwcosim run``: parse, call :mod:`hwcosim.cosim.compile_run`, print.
Exit status: 0 success, 2 bad input (one ``error: ...`` line, nothing written), 1 the RTL differs
from the golden model (the first differing layer, row and word)."""

from __future__ import annotations

import argparse
import os

from hwcosim.cosim.cli.util import add_options
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import emit, show, table

__all__ = ["register", "cmd_compile", "cmd_run", "compile_board_to_folder", "build_folder", "board_run_folder"]

COMPILE_EPILOG = """\
examples:
  hwcosim compile mlp.onnx --target bbs --sparsity 0.5 --calibration x.npy -o mlp-bbs/
  hwcosim compile net.npz --description net.toml --calibration x.npy -o net-bbs/
  hwcosim compile cnn.onnx --target fss --region 2x8 --sparsity 0.5 --calibration images.npy -o cnn-fss/
  hwcosim compile mlp.onnx --sparsity 0.5 --method obs --calibration x.npy -o mlp-obs/
  hwcosim compile bert-folder/ --target fss --sparsity 0.5 --method wanda --calibration sentences.txt -o bert-fss/
  hwcosim compile mlp.onnx --sparsity 0.5 --calibration x.npy --board ulx3s-85f -o mlp-ulx3s/
  hwcosim run mlp-bbs/ --inputs x.npy --labels y.npy --rtl -o mlp-run/
  hwcosim build mlp-ulx3s/ --board ulx3s-85f --ooc
  hwcosim board run mlp-ulx3s/ --sim --inputs x.npy
"""


def register(subparsers) -> None:
    """Add ``compile`` and ``run`` to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "compile", help="compile a trained network (ONNX, .npz + TOML, a BERT checkpoint's encoder linears) "
        "onto the accelerator engines",
        description="Map every layer of a trained network onto an engine, prune it, choose its fixed-point "
        "formats from calibration inputs and write OUT/: the quantised weights, the engine Verilog, a "
        "per-layer report and a manifest of checksums (docs/compile.md).",
        epilog=COMPILE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(p, [
        ("model", "the network: .onnx, .npz with a TOML layer description (--description), or a BERT-family "
         "checkpoint folder (model.safetensors, config.json, vocab.txt/tokenizer.json)"),
        ("--target", "engines to map onto: bbs (dense layers and LSTMs; default) or fss (dense layers and "
         "convolutions)", dict(default="bbs")),
        ("--pattern", "sparsity pattern (default: the target's own: bbs or fss)"),
        ("--sparsity", "fraction of weights pruned in every engine layer, in [0, 1) (default 0: dense on the "
         "same engine)", dict(type=float, default=0.0)),
        ("--method", "how weights are pruned: magnitude (default), wanda or obs (activation-aware, from each "
         "layer's inputs on the calibration data)", dict(default="magnitude")),
        ("--calibration", "representative inputs in the model's input shape (.npy): the formats are chosen "
         "so that they do not saturate; a BERT checkpoint: sentences.txt, one per line (the last quarter "
         "held out for the embedding cosine)", dict(metavar="X.npy|sentences.txt")),
        ("--description", ".npz models: the TOML layer description (default: the .toml beside the .npz)"),
        ("--board", "size the engines to this board's part (ulx3s-85f): banks and PEs (fss: the PE array) per layer "
         "from measured resources, weights that do not fit the block RAM reloaded per layer; a model that "
         "cannot fit is refused (exit 2)", dict(default=None, metavar="BOARD")),
        ("--banks", "bbs: engine banks per PE (default 4)", dict(type=int, default=4)),
        ("--pes", "bbs: engine PEs (default 4; LSTM layers: a multiple of 4)", dict(type=int, default=4)),
        ("--region", "fss: region RxC (default 2x8)", dict(default="2x8")),
        ("--pe-array", "fss: PE array PRxPC, region rows by activation columns in parallel (default 2x2)",
         dict(default="2x2")),
        ("-o --output", "output folder (default build/compiled)", dict(default=None))])
    p.set_defaults(func=cmd_compile)

    r = subparsers.add_parser(
        "run", help="run a compiled network on your inputs: accuracy, RTL = golden, cycles, latency",
        description="On your inputs (and labels): accuracy (or output error vs the float network) of the float, "
        "quantised dense, pruned and compiled networks; with --rtl the RTL of every engine layer compared "
        "word for word with the golden model; cycles per inference vs the ideal; latency and throughput "
        "only at an Fmax measured by hwcosim build --ooc (docs/compile.md).",
        epilog=COMPILE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(r, [
        ("folder", "a folder written by hwcosim compile"),
        ("--inputs", "inputs in the model's input shape (.npy); a compiled BERT encoder: sentences, one per line "
         "(.txt)", dict(required=True, metavar="X.npy|sentences.txt")),
        ("--labels", "class index per input (.npy): accuracy instead of output error", dict(metavar="y.npy")),
        ("--rtl", "also run every engine layer's RTL (cocotb + Verilator) and compare every word", True),
        ("--rtl-layers", "a compiled BERT encoder: only these linear layers (indices, e.g. 0,1) through the RTL "
         "(default all; the report names the layers that did not run)", dict(default=None, metavar="I,J,...")),
        ("--rtl-tokens", "a compiled BERT encoder: only the first N tokens through the RTL (default all)",
         dict(type=int, default=None, metavar="N")),
        ("--build", "measure a missing engine Fmax with hwcosim build --ooc (minutes per configuration)", True),
        ("--builds", "folder searched for cached build.json files (default build/pnr)", dict(default=None)),
        ("-o --output", "keep the inputs, every layer's words, the RTL runs and run.json here", dict(default=None))])
    r.set_defaults(func=cmd_run)


def cmd_compile(args) -> int:
    from hwcosim.cosim.cli.util import out_dir
    from hwcosim.cosim.compile_run import compile_to_folder

    out = out_dir(args.output, "build/compiled")
    try:
        pe_rows, pe_cols = (int(v) for v in args.pe_array.lower().split("x"))
    except ValueError:
        raise UsageError(f"--pe-array {args.pe_array!r}: write PRxPC, e.g. 2x2") from None
    kw = dict(target=args.target, sparsity=args.sparsity, calibration=args.calibration, pattern=args.pattern,
              method=args.method, banks=args.banks, pes=args.pes, description=args.description, region=args.region,
              pe_rows=pe_rows, pe_cols=pe_cols)
    if args.board:
        m = compile_board_to_folder(args.model, out, board=args.board, **kw)
    else:
        m = compile_to_folder(args.model, out, **kw)
    rep = m.report()
    if rep.get("kind") == "bert":
        return _show_bert(args, out, rep)
    rows = [[f"{d['index']} {d['name']}", d["engine"], "x".join(map(str, d["shape"])), f"{d['sparsity']:.3f}",
             " ".join(f"{k}={v}" for k, v in d["formats"].items()), d["saturated_words"],
             f"{d['max_abs_err_vs_float']:.3g}", d["cycles_expected"], d["cycles_ideal"]] for d in rep["layers"]]
    show(table(f"hwcosim compile {args.model} -> {out}/ (target {rep['target']})",
               ["layer", "engine", "shape", "sparsity (fraction)", "formats", "saturated (words)",
                "max err vs float (abs)", "expected (cycles)", "ideal (cycles)"], rows))
    if "board" in rep:
        _show_board(rep["board"])
    print(f"wrote {out}/ (manifest.json, weights, engine Verilog, report.json); host ops: "
          f"{', '.join(rep['host_ops']) or 'none'}")
    emit("report", rep)
    return 0


def _show_board(b: dict) -> None:
    """The board plan: per layer its options, resource estimate and where its weights live."""
    av = b["available"]
    rows = [[f"{d['index']} {d['name']}", d["engine"], " ".join(f"{k}={v}" for k, v in d["options"].items()),
             d["estimate"]["LUT4"], d["estimate"]["DSP"], d["estimate"]["BRAM_buffers"] + d["estimate"]["BRAM_weights"],
             d["weights"], d["reload_cycles"], d["cycles_expected_on_board"]] for d in b["layers"]]
    t = b["estimate_total"]
    rows.append(["total", "", "", t["LUT4"], t["DSP"], t["BRAM"], "", "", b["cycles_expected_on_board"]])
    rows.append([f"{b['board']} has", "", "", av["LUT4"], av["DSP"], av["BRAM"], "", "", ""])
    show(table(f"sized to {b['board']} ({b['part']}): estimates (LUT4, DSP fitted on measured nextpnr points; "
               "BRAM from the memories)",
               ["layer", "engine", "options", "LUT4 (cells)", "DSP (MULT18X18D)", "BRAM (DP16KD)", "weights",
                "reload (cycles)", "expected on board (cycles)"], rows))


def _show_bert(args, out, rep: dict) -> int:
    rows = [[f"{d['index']} {d['name']}", d["engine"], "x".join(map(str, d["shape"])), d["method"],
             f"{d['sparsity']:.3f}", " ".join(f"{k}={v}" for k, v in d["formats"].items()), d["saturated_words"],
             d["cycles_expected"], d["cycles_per"]] for d in rep["layers"]]
    show(table(f"hwcosim compile {args.model} -> {out}/ (BERT encoder linears, target {rep['target']})",
               ["layer", "engine", "shape", "method", "sparsity (fraction)", "formats", "saturated (words)",
                "expected (cycles)", "cycles per"], rows))
    cos = rep["embedding_cosine_vs_float"]
    print(f"sentence-embedding cosine to the float model on {rep['heldout_sentences']} held-out sentences: "
          f"compiled mean {cos['compiled_mean']:.4f} (min {cos['compiled_min']:.4f}); pruned float mean "
          f"{cos['pruned_float_mean']:.4f}")
    print(f"host ops (float64): {', '.join(rep['host_ops'])}")
    print(f"wrote {out}/ (manifest.json, weights, engine Verilog, report.json)")
    emit("report", rep)
    return 0


def cmd_run(args) -> int:
    from hwcosim.cosim.compile import CompiledModel
    from hwcosim.cosim.compile_run import is_bert_folder, load_array, print_bert_run, run_compiled

    if is_bert_folder(args.folder):   # a compiled BERT encoder: sentences in, embeddings out
        return print_bert_run(args)
    if args.rtl_layers is not None or args.rtl_tokens is not None:
        raise UsageError("--rtl-layers and --rtl-tokens apply to a compiled BERT encoder; --rtl runs every engine "
                         "layer of this model on every input")
    m = CompiledModel.load(args.folder)
    x = load_array(args.inputs, "--inputs")
    y = None if args.labels is None else load_array(args.labels, "--labels")
    res = run_compiled(m, x, y, rtl=args.rtl, out=args.output, build=args.build,
                       builds=[args.builds] if args.builds else None)
    if res["labels"]:
        cols = ["network", "accuracy (%)", "max abs err vs float (abs)"]
        rows = [[v["variant"], f"{100 * v['accuracy']:.2f}", f"{v['max_abs_err_vs_float']:.3g}"]
                for v in res["variants"]]
    else:
        cols = ["network", "max abs err vs float (abs)", "rms err vs float (abs)"]
        rows = [[v["variant"], f"{v['max_abs_err_vs_float']:.3g}", f"{v['rms_err_vs_float']:.3g}"]
                for v in res["variants"]]
    show(table(f"hwcosim run {args.folder} on {res['n']} inputs", cols, rows))
    rows = [[f"{d['index']} {d['name']}", d["engine"], d["cycles_expected"], d["cycles_ideal"],
             "none" if d["fmax_mhz"] is None else f"{d['fmax_mhz']:.1f}",
             "-" if d["fmax_mhz"] is None else f"{d['latency_us']:.3f}"] for d in res["layers"]]
    show(table("cycles per inference (batch 1) and latency at the measured Fmax",
               ["layer", "engine", "expected (cycles)", "ideal (cycles)", "Fmax (MHz)", "latency (us)"], rows))
    if res["latency_us"] is not None:
        print(f"latency {res['latency_us']:.3f} us per inference, {res['inferences_per_s']:.4g} inferences/s "
              f"(engine layers at the measured Fmax of {res['clock_from']}; host ops not counted)")
    else:
        for d in res["layers"]:
            if d["fmax_mhz"] is None:
                print(f"layer {d['index']} ({d['name']}): no measured clock: run `{d['build']}` "
                      "(or hwcosim run --build); no latency without it")
    if "rtl" in res:
        r = res["rtl"]
        print(f"RTL = golden in 100% of {r['words']} words over {len(r['layers'])} engine layers; cycles "
              + ", ".join(f"{d['name']} {d['cycles']} (expected {d['expected']})" for d in r["layers"]))
    if args.output:
        print(f"wrote {args.output}/ (inputs, every layer's words, run.json)")
    emit("run", res)
    return 0


# -- a compiled model on a board ------------------------------------------------------------------

def compile_board_to_folder(model, out, *, board: str, calibration=None, **kw):
    """``hwcosim compile MODEL --board BOARD -o OUT/``: ``compile_model`` with ``board``, saved to
    ``out`` (nothing is written when it refuses)."""
    from hwcosim.cosim.compile import compile_model
    from hwcosim.cosim.compile_run import load_array
    from hwcosim.pruning.frontends_bert import is_bert_checkpoint

    if isinstance(calibration, str | os.PathLike) and not is_bert_checkpoint(model):
        calibration = load_array(calibration, "--calibration")
    m = compile_model(model, calibration=calibration, board=board, **kw)
    m.save(out)
    return m


def build_folder(args) -> int:
    """``hwcosim build OUT/ --board BOARD [--ooc]`` on a folder hwcosim compile wrote."""
    from hwcosim.cosim.compile import CompiledModel

    if getattr(args, "param", None) or getattr(args, "params", None):
        raise UsageError("a compiled model fixes its engines' parameters; drop --param/--params")
    m = CompiledModel.load(args.design)
    board = args.board or m.options.get("board") or "ulx3s-85f"
    plans = m.build(board, ooc=args.ooc, out=args.output, clock=args.clock or 100.0, seed=args.seed,
                    max_minutes=args.max_minutes)
    rows = [[", ".join(str(i) for i in p["layers"]), p["design"], p["mode"], p["board"], p["out"]] for p in plans]
    what = "one board top, every engine" if len(plans) == 1 else f"{len(plans)} builds"
    show(table(f"hwcosim build {args.design} ({what})",
               ["layers", "design", "mode", "board", "build folder"], rows))
    emit("builds", [{k: (v.to_dict() if k == "params" else v) for k, v in p.items()} for p in plans])
    return 0


def board_run_folder(args, workload: list[str]) -> int:
    """``hwcosim board run OUT/ --sim|--port P --inputs X.npy`` on a folder hwcosim compile wrote."""
    from hwcosim.cosim.compile import CompiledModel
    from hwcosim.cosim.compile_run import load_array

    if workload:
        raise UsageError(f"{workload[0]} does not apply to a compiled model; give its inputs with --inputs X.npy")
    if not args.inputs:
        raise UsageError("a compiled model runs on your inputs: --inputs X.npy (in the model's input shape)")
    if bool(args.port) == bool(args.sim):
        raise UsageError("give either --port PORT (a board on a serial port) or --sim (the RTL through a UART model)")
    m = CompiledModel.load(args.design)
    res = m.run_on_board(args.port, load_array(args.inputs, "--inputs"), baud=args.baud, out=args.output)
    rows = [[f"{d['layer']} {d['name']}", d["engine"], d["words"],
             "-" if not d["run_cycles"] else d["run_cycles"][0], d["run_dir"] or "-"] for d in res["layers"]]
    show(table(f"hwcosim board run {args.design}: {res['where']}",
               ["layer", "engine", "words compared (words)", "run cycles, first (cycles)", "run folder"], rows))
    print(f"board = predict in 100% of {res['words']} words over {len(res['layers'])} engine layers")
    emit("board_run", res)
    return 0

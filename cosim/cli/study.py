"""``hwcosim study accuracy|seernet|seernet-timing|oneshot``: the studies on real data (:mod:`hwcosim.pruning`)."""

from __future__ import annotations

from pathlib import Path

from hwcosim.cosim.cli.util import add_study, command, fail
from hwcosim.models.tables import show
from rich.console import Console

_OUT = ("-o --output", "output folder (default build/study)", dict(default="build/study"))
_CACHE = ("--cache-dir", "trained-model cache (default build/cache)", dict(default="build/cache"))
_SEED = ("--seed", "model seed (default 0)", dict(type=int, default=0))
_VERBOSE = ("-v --verbose", "print each point as it finishes", True)


def register(subparsers) -> None:
    study = subparsers.add_parser("study", help="accuracy studies on real data (pruning patterns, SeerNet)",
                                  description="Accuracy studies on real data.")
    sub = study.add_subparsers(dest="study", required=True, metavar="{accuracy,seernet,seernet-timing,oneshot}")
    command(sub, "accuracy", _run_accuracy, "LSTM on digits pruned with every pattern, with/without fine-tuning", [
        _OUT, ("--quick", "3 sparsities and a short fine-tuning (< 90 s)", True),
        ("--sparsities", "comma-separated targets, e.g. 0.5,0.75,0.9"),
        ("--patterns", "comma-separated pattern names or labels (default: all registered)"),
        ("--hidden", "LSTM hidden size (default 64)", dict(type=int, default=64)), _SEED,
        ("--no-finetune", "one-shot pruning only", True), _CACHE, _VERBOSE],
            description="Train an LSTM on scikit-learn digits (cached), prune its fused gate matrix and readout with "
                        "every registered pattern at several sparsities, one-shot and with gradual fine-tuning; write "
                        "accuracy.json and accuracy.png.")
    command(sub, "seernet", _run_seernet, "SeerNet output-sparsity prediction on a digits CNN, k = 1..8 bits", [
        _OUT, ("--bits", "bit widths, a range 1-8 or a list 1,2,4,8 (default 1-8; 1,2,4,8 with --quick)"),
        ("--quick", "only k = 1, 2, 4, 8", True),
        ("--epochs", "CNN training epochs (default 15)", dict(type=int, default=None)), _SEED, _CACHE],
            description="Train a CNN on digits (cached) and run every conv layer the SeerNet way with a k-bit "
                        "predictor; write seernet.json and seernet.png.")
    add_study(sub, "seernet-timing", "SeerNet as wall-clock time: compiled k-bit predictor + sparse conv vs the "
              "same kernel on every output and BLAS im2col, on ResNet-18-sized layers",
              "hwcosim.pruning.seernet_bench:run_seernet_timing", "build/study/seernet_timing",
              [("--repeats", "timed rounds per layer and bit width (default 7, quick 2)", dict(type=int))],
              quick="tiny layers, k = 1 and 4, two rounds: a smoke run whose times mean nothing")
    command(sub, "oneshot", _run_oneshot, "MiniLM + digits models: magnitude vs Wanda vs OBS one-shot pruning under "
            "unstructured/BBS/N:M/FSS patterns", [
                _OUT, ("--quick", "50%% only, unstructured and BBS-16, 64 of the 128 calibration sentences, LSTM only, "
                       "no damping selection (< 1 min)", True),
                ("--sparsities", "comma-separated, e.g. 0.5,0.75,0.875"), _CACHE, _VERBOSE],
            description="Prune all-MiniLM-L6-v2 (sentence-embedding cosine and Spearman of pairwise similarities on "
                        "held-out sentences) and the digits LSTM/CNN (accuracy) one-shot with magnitude, Wanda and OBS "
                        "under hardware patterns; write oneshot.json and oneshot.png.")


def _floats(text: str | None) -> list[float] | None:
    """``--sparsities`` (each item checked by the parser: ranges.LISTS), or None."""
    return [float(t) for t in text.split(",") if t.strip()] if text else None


def _bits(text: str) -> list[int]:
    try:
        if "-" in text:
            a, b = (int(t) for t in text.split("-"))
            return list(range(a, b + 1))
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        fail(f"cannot read bit widths {text!r}; write a range like 1-8 or a list like 1,2,4,8")


def _progress(verbose: bool):
    return Console(stderr=True).print if verbose else None


def _run_accuracy(args) -> int:
    from hwcosim.pruning.study import accuracy_table, run_accuracy

    pats = [p.strip() for p in args.patterns.split(",") if p.strip()] if args.patterns else None
    res = run_accuracy(_floats(args.sparsities), pats, args.hidden, args.seed,
                       quick=args.quick, finetune=not args.no_finetune, cache_dir=args.cache_dir,
                       output=args.output, progress=_progress(args.verbose))
    show(accuracy_table(res))
    c = res["claim"]
    if c.get("evaluated"):
        for k in ("oneshot", "finetuned"):
            if k in c:
                Console().print(f"claim ({k}): bbs-unstructured {c[k]['mean_bbs_minus_unstructured']:+.4f}, "
                                f"bbs-block {c[k]['mean_bbs_minus_block']:+.4f} -> "
                                f"{'holds' if c[k]['holds'] else 'does not hold'}")
    out = Path(args.output)
    Console().print(f"wrote {out / 'accuracy.json'} and {out / 'accuracy.png'} ({res['seconds']:.1f} s)")
    return 0


def _run_seernet(args) -> int:
    from hwcosim.pruning.study import run_seernet, seernet_table

    res = run_seernet(_bits(args.bits) if args.bits else None, args.seed, quick=args.quick, epochs=args.epochs,
                      cache_dir=args.cache_dir, output=args.output)
    show(seernet_table(res))
    out = Path(args.output)
    Console().print(f"wrote {out / 'seernet.json'} and {out / 'seernet.png'} ({res['seconds']:.1f} s)")
    return 0


def _run_oneshot(args) -> int:
    from hwcosim.pruning import oneshot_study as st
    from hwcosim.pruning.study import run_oneshot

    res, j, p = run_oneshot(_floats(args.sparsities), quick=args.quick, cache_dir=args.cache_dir, output=args.output,
                            progress=_progress(args.verbose))
    show(st.table(res))
    sp_ = res.get("speed")
    if sp_:
        shape = "x".join(map(str, sp_["shape"]))
        Console().print(f"speed: OBS {shape} from {sp_['tokens']} tokens {sp_['obs_layer_seconds']:.3f} s; "
                        f"whole MiniLM with OBS {sp_['whole_minilm_obs_seconds']:.1f} s")
    Console().print(f"wrote {j} and {p} ({res['seconds']:.1f} s)")
    return 0

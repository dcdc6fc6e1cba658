"""``hwcosim cosim melo|serve|kv``: run an RTL-in-the-loop bridge and its model-only twin.

Each subcommand runs the bridge's scenario with the model device (in this process) and, unless
``--model-only``, with the RTL device (Verilator or Icarus under cocotb), checks the RTL's data
word for word against the golden model, and writes ``bridge_<name>.json`` (both results, wall
times, slowdown, checks) and the RTL's run folder ``bridge_<name>/`` (``hwcosim check`` re-verifies
it) to ``-o DIR``, staged and renamed into place at the end, and a table to the terminal. Also :func:`bench_bridges`,
registered in :data:`hwcosim.cosim.flow.bench.BENCHES` as ``cosim_bridges``.

``--scenario FILE.toml`` derives the bridge's scenario from the file ``hwcosim cluster run`` reads
(topology, jobs, failures and the optional ``[cosim.melo|serve|kv]`` tables; see
``models/systems/cluster/scenario.py`` and each bridge's ``params_from_scenario``); flags given on
the command line override the file. A bad file is one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

__all__ = ["register", "bench_bridges"]


def _common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("-o", "--output", metavar="DIR", default="build/bridges",
                    help="output folder (default build/bridges)")
    ap.add_argument("--model-only", action="store_true", help="run only the model device (no simulator)")
    ap.add_argument("--sim", choices=("verilator", "icarus"), default=None,
                    help="simulator (default: $SIM or verilator)")
    ap.add_argument("--seed", type=int, default=None, help="scenario seed (default 1, or the --scenario file's)")
    ap.add_argument("--scenario", metavar="FILE.toml", default=None,
                    help="derive the scenario from a cluster scenario file (as 'hwcosim cluster run' reads); "
                         "flags override it")


def _positive(kind):
    def conv(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {s}")
        return v

    conv.numeric_kind = kind  # cosim.cli.ranges applies the option's range even with default None
    return conv


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cosim`` with ``melo``, ``serve`` and ``kv`` to an argparse subparsers object."""
    p = subparsers.add_parser("cosim", help="RTL-in-the-loop bridges: MELO in the cluster network, BBS/FSS serving, "
                                            "KV-Direct parameter server (RTL vs model, slowdown)",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cosim_cmd", metavar="{melo,serve,kv}")
    sub.required = True

    m = sub.add_parser("melo", help="MELO RTL engine doing loss recovery for chosen flows of a cluster network",
                       description="Flows on a small Clos with loss on one link; the flows crossing it run at packet "
                                   "level with the MELO engine as receiver, the rest at flow level.")
    _common(m)
    m.add_argument("--loss", type=float, default=None,
                   help="loss probability on the lossy link (default 0.02, or the --scenario failure's loss)")
    m.add_argument("--lossy-gpu", type=int, default=None,
                   help="GPU whose NIC down-link is lossy (default 2, or the --scenario file's lossy failure)")
    m.add_argument("--flow", metavar="SRC,DST,BYTES,START_US", action="append", default=None,
                   help="a flow of the workload (repeatable; GPUs 0..3, or of the --scenario topology); replaces "
                        "the six built-in flows (or the job's ring hops)")
    m.add_argument("--flows", metavar="I,J", default=None,
                   help="indices of the flows to run on the engine (default: all crossing the lossy link)")
    m.add_argument("--scale", type=_positive(float), default=None,
                   help="multiply every flow size (default 1, or [cosim.melo] scale)")
    m.add_argument("--clock-mhz", type=_positive(float), default=None, help="engine clock (default 250)")
    m.set_defaults(func=_cmd_melo)

    s = sub.add_parser("serve", help="BBS SpMxV / FSS GEMM RTL as serving devices under an ElasticBatch-style stream",
                       description="Poisson requests, size buckets, dynamic batching; service times from RTL cycles "
                                   "(cached per batch shape) vs the cycle model.")
    _common(s)
    s.add_argument("--device", choices=("bbs", "fss", "both"), default=None, help="device(s) (default both)")
    s.add_argument("--requests", type=_positive(int), default=None, help="requests (default 60)")
    s.add_argument("--load", type=_positive(float), default=None,
                   help="offered load vs the device serving one request at a time (default 1.3)")
    s.add_argument("--slo-us", type=_positive(float), default=None, help="latency SLO in us (default 10)")
    s.add_argument("--p-stall", type=float, default=None,
                   help="probability the result sink refuses a cycle (RTL only; default 0)")
    s.add_argument("--no-cache", action="store_true", help="simulate every batch (no cache per shape)")
    s.add_argument("--clock-mhz", type=_positive(float), default=None, help="engine clock (default 200)")
    s.set_defaults(func=_cmd_serve)

    k = sub.add_parser("kv", help="KV-Direct pipeline RTL serving a parameter-server job's key-value traffic",
                       description="Workers pull (GET) and push (ATOMIC add / PUT) parameter keys of Zipf "
                                   "popularity over a flow-level network to a KV-Direct NIC.")
    _common(k)
    k.add_argument("--workers", type=_positive(int), default=None,
                   help="workers, 1..7 (default 4; with --scenario: the job's DP degree, or its first N ranks)")
    k.add_argument("--iterations", type=_positive(int), default=None, help="iterations (default 3)")
    k.add_argument("--keys-per-iter", type=_positive(int), default=None, help="keys pulled per iteration (default 16)")
    k.add_argument("--keys", type=_positive(int), default=None, help="parameter keys (default 48)")
    k.add_argument("--theta", type=float, default=None, help="Zipf skew (default 0.99)")
    k.add_argument("--mem-latency", type=_positive(int), default=None, help="memory latency in cycles (default 40)")
    k.add_argument("--no-forward", action="store_true", help="turn the pipeline's forwarding off")
    k.add_argument("--clock-mhz", type=_positive(float), default=None, help="pipeline clock (default 200)")
    k.set_defaults(func=_cmd_kv)
    return p


def _finish(runs: list, args) -> int:
    """Run the bridges ``runs`` (``(name, run)``; ``run(test_dir)`` returns the comparison) with every
    output of the command staged: each report ``bridge_<name>.json`` and RTL run folder
    ``bridge_<name>/`` (``hwcosim check`` re-verifies it) are renamed into ``-o`` together at the end.
    When the RTL disagrees with the golden model its run folder is still kept (with the outputs of
    the bridges before it) and the mismatch reported (exit 1)."""
    from hwcosim.cosim.flow.bridge import print_table, write_report
    from hwcosim.cosim.flow.runner import SimFailure
    from hwcosim.models.atomic import staged_dir

    out = _out(args)
    failure, done = None, []
    with staged_dir(out) as st:
        for name, run in runs:
            try:
                cmp = run(None if args.model_only else st / f"bridge_{name}")
            except SimFailure as e:  # the evidence stays (sealed by the bridge before it raised)
                failure = (name, e)
                break
            print_table(cmp)
            write_report(cmp, st)
            done.append(name)
    for name in done:
        run_dir = out / f"bridge_{name}"
        print(f"wrote {out / f'bridge_{name}.json'}"
              + ("" if args.model_only else f" and the RTL run folder {run_dir} (hwcosim check {run_dir})"))
    if failure is not None:
        run_dir = out / f"bridge_{failure[0]}"
        if (run_dir / "run.json").is_file():
            raise SimFailure(f"{str(failure[1]).splitlines()[0]}; evidence in {run_dir} (hwcosim check {run_dir})")
        raise failure[1]
    return 0


def _progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _cmd_melo(args) -> int:
    _check_out(args)
    from hwcosim.cosim.cli import UsageError
    from hwcosim.cosim.designs.melo.bridge import MeloScenarioParams, run_bridge

    chosen = None
    if args.flows:
        try:
            chosen = tuple(int(x) for x in args.flows.split(","))
        except ValueError:
            raise UsageError(f"--flows must be comma-separated flow indices, not {args.flows!r}") from None
    flows = {}
    if args.flow:
        parsed = []
        for text in args.flow:
            parts = text.split(",")
            try:
                if len(parts) != 4:
                    raise ValueError
                parsed.append((int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3])))
            except ValueError:
                raise UsageError(f"--flow {text!r}: expected SRC,DST,BYTES,START_US, "
                                 "e.g. --flow 0,2,262144,0") from None
        flows = {"flows": tuple(parsed)}
    if args.scenario:
        from hwcosim.cosim.designs.melo.bridge import params_from_scenario

        sc = _load(args.scenario)
        p = _from_file(args.scenario, lambda: params_from_scenario(
            sc, scale=args.scale, loss=args.loss, lossy_gpu=args.lossy_gpu, flows=flows.get("flows"), chosen=chosen,
            f_clk_mhz=args.clock_mhz, seed=args.seed))
    else:
        p = MeloScenarioParams(loss=_dflt(args.loss, 0.02), lossy_gpu=_dflt(args.lossy_gpu, 2), chosen=chosen,
                               scale=_dflt(args.scale, 1.0), f_clk_mhz=_dflt(args.clock_mhz, 250.0),
                               seed=_dflt(args.seed, 1), **flows)
    _check_clock(p.f_clk_mhz, args.model_only)
    _progress(f"melo: {len(p.flows)} flows, {len(p.chosen_flows())} on the engine, loss {p.loss:g}; "
              f"{'model only' if args.model_only else 'model, then RTL'}")
    return _finish([("melo", lambda d: run_bridge(p, model_only=args.model_only, sim=args.sim, test_dir=d))], args)


def _dflt(v, default):
    return default if v is None else v


def _load(path: str):
    """The cluster scenario file, validated by the cluster's parser (bad file: UsageError, one line)."""
    from hwcosim.cosim.cli import UsageError
    from hwcosim.models.systems.cluster.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as e:
        raise UsageError(str(e)) from None


def _from_file(path: str, fn):
    """``fn()`` (a bridge's ``params_from_scenario``) with its ScenarioError as one UsageError line."""
    from hwcosim.cosim.cli import UsageError
    from hwcosim.models.systems.cluster.scenario import ScenarioError

    try:
        return fn()
    except ScenarioError as e:
        raise UsageError(f"{path}: {e}") from None


def _check_clock(mhz: float, model_only: bool) -> None:
    from hwcosim.cosim.cli import UsageError

    period = 1e3 / mhz
    if not model_only and abs(period - round(period)) > 1e-9:
        raise UsageError(f"--clock-mhz {mhz:g} gives a {period:g} ns period; the RTL clock needs a whole number of "
                         "ns (e.g. 100, 125, 200, 250)")


def _cmd_serve(args) -> int:
    _check_out(args)
    from hwcosim.cosim.designs.fss.bridge import ServeScenarioParams, run_bridge

    if args.p_stall is not None and not 0 <= args.p_stall < 0.95:
        from hwcosim.cosim.cli import UsageError

        raise UsageError(f"--p-stall must be in [0, 0.95), not {args.p_stall}")
    flags = {"n_requests": args.requests, "load": args.load, "slo_us": args.slo_us, "p_stall": args.p_stall,
             "cache": False if args.no_cache else None, "f_clk_mhz": args.clock_mhz, "seed": args.seed}
    if args.scenario:
        from hwcosim.cosim.designs.fss.bridge import params_from_scenario

        sc = _load(args.scenario)
        sps = _from_file(args.scenario, lambda: params_from_scenario(sc, args.device, **flags))
    else:
        dev = _dflt(args.device, "both")
        kw = {k: v for k, v in flags.items() if v is not None}
        sps = [ServeScenarioParams(device=d, **kw) for d in (("bbs", "fss") if dev == "both" else (dev,))]
    _check_clock(sps[0].f_clk_mhz, args.model_only)

    def one(sp):
        def run(test_dir):
            _progress(f"serve {sp.device}: {sp.n_requests} requests at load {sp.load:g}; "
                      f"{'model only' if args.model_only else 'model, then RTL'}")
            return run_bridge(sp, model_only=args.model_only, sim=args.sim, test_dir=test_dir)

        return f"serve_{sp.device}", run

    return _finish([one(sp) for sp in sps], args)


def _cmd_kv(args) -> int:
    _check_out(args)
    from hwcosim.cosim.designs.kvdirect.bridge import KVScenarioParams, run_bridge

    flags = {"n_workers": args.workers, "iterations": args.iterations, "keys_per_iter": args.keys_per_iter,
             "n_keys": args.keys, "theta": args.theta, "mem_latency": args.mem_latency,
             "forward": False if args.no_forward else None, "f_clk_mhz": args.clock_mhz, "seed": args.seed}
    if args.scenario:
        from hwcosim.cosim.designs.kvdirect.bridge import params_from_scenario

        sc = _load(args.scenario)
        sp = _from_file(args.scenario, lambda: params_from_scenario(sc, **flags))
    else:
        sp = KVScenarioParams(**{k: v for k, v in flags.items() if v is not None})
    _check_clock(sp.f_clk_mhz, args.model_only)
    _progress(f"kv: {sp.n_workers} workers x {sp.iterations} iterations x {sp.keys_per_iter} keys; "
              f"{'model only' if args.model_only else 'model, then RTL'}")
    return _finish([("kv", lambda d: run_bridge(sp, model_only=args.model_only, sim=args.sim, test_dir=d))], args)


def _out(args) -> Path:
    """The output folder, already checked (before the run) by ``_check_out``."""
    return Path(args.output)


def _check_out(args) -> None:
    """Refuse an unusable -o before the co-simulation runs (its results would be lost at the end)."""
    from hwcosim.cosim.cli.util import out_dir

    out_dir(args.output, "build/bridges")


def bench_bridges(out_dir, quick: bool = False) -> dict:
    """All three bridges, RTL vs model: writes ``bridge_*.json`` and ``cosim_bridges.json`` to ``out_dir``.

    ``quick``: smaller scenarios (fewer requests, half-size flows, two iterations).
    """
    from rich.console import Console

    from hwcosim.cosim.designs.fss import bridge as serve
    from hwcosim.cosim.designs.kvdirect import bridge as kv
    from hwcosim.cosim.designs.melo import bridge as melo
    from hwcosim.cosim.flow.bridge import print_table, write_report
    from hwcosim.models.atomic import write_text

    out_dir = Path(out_dir)
    n_req = 40 if quick else 120
    runs = [
        ("melo", lambda: melo.run_bridge(melo.MeloScenarioParams(scale=0.5 if quick else 1.0))),
        ("serve_bbs", lambda: serve.run_bridge(serve.ServeScenarioParams(device="bbs", n_requests=n_req))),
        ("serve_fss", lambda: serve.run_bridge(serve.ServeScenarioParams(device="fss", n_requests=n_req))),
        ("serve_bbs_stall", lambda: serve.run_bridge(serve.ServeScenarioParams(
            device="bbs", n_requests=n_req, p_stall=0.2, cache=False))),
        ("kv", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3))),
        ("kv_uniform", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3, theta=0.0,
                                                                 n_keys=200))),
        ("kv_noforward", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3, forward=False))),
        ("kv_one_worker", lambda: kv.run_bridge(kv.KVScenarioParams(n_workers=1, iterations=2 if quick else 3))),
    ]
    renamed = {"serve_bbs_stall": "Output back-pressure: the result sink refuses 20 % of cycles; every batch is "
                                  "simulated (no cache: with stalls the cycles depend on the random pattern).",
               "kv_uniform": "Uniform key popularity over 200 keys (few forwarding chains).",
               "kv_noforward": "Zipf 0.99 as in 'kv', with the pipeline's forwarding off (every op of a hot-key chain "
                               "pays its own memory round trip).",
               "kv_one_worker": "One worker: no two batches overlap in the pipeline."}
    summary = {}
    con = Console()
    for name, fn in runs:
        _progress(f"bridge {name}")
        cmp = fn()
        if name in renamed:
            cmp.bridge = name
            cmp.notes.append(renamed[name])
        print_table(cmp, con)
        write_report(cmp, out_dir)
        d = cmp.to_dict()
        summary[name] = {"slowdown": d["slowdown"], "slowdown_total": d["slowdown_total"],
                         "wall_model_s": cmp.model["wall_s"], "wall_rtl_s": (cmp.rtl or {}).get("wall_s"),
                         "checks": cmp.checks, "table": d["table"], "notes": cmp.notes}
    write_text(out_dir / "cosim_bridges.json", json.dumps(summary, indent=1, default=str) + "\n")
    return summary

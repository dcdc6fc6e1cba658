"""``hwcosim cosim melo|serve|kv``: run an RTL-in-the-loop bridge and its model-only twin.

Each subcommand runs the bridge's scenario with the model device (in this process) and, unless
``--model-only``, with the RTL device (Verilator or Icarus under cocotb), checks the RTL's data
word for word against the golden model, and writes ``bridge_<name>.json`` (both results, wall
times, slowdown, checks) and the RTL's run folder ``bridge_<name>/`` (``hwcosim check`` re-verifies
it) to ``-o DIR``, staged and renamed into place at the end, and a table to the terminal (the library is
:mod:`hwcosim.cosim.designs.bridges`).

``--scenario FILE.toml`` derives the bridge's scenario from the file ``hwcosim cluster run`` reads
(topology, jobs, failures and the optional ``[cosim.melo|serve|kv]`` tables; see
``models/systems/cluster/scenario.py`` and each bridge's ``params_from_scenario``); flags given on
the command line override the file. A bad file is one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse

from hwcosim.models.errors import UsageError

__all__ = ["register"]


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


def _check_out(args) -> None:
    """Refuse an unusable -o before the co-simulation runs (its results would be lost at the end)."""
    from hwcosim.cosim.cli.util import out_dir

    out_dir(args.output, "build/bridges")


def _mode(args) -> str:
    return "model only" if args.model_only else "model, then RTL"


def _cmd_melo(args) -> int:
    _check_out(args)
    from hwcosim.cosim.designs.bridges import check_clock, melo_params, progress, run_bridges
    from hwcosim.cosim.designs.melo.bridge import run_bridge

    chosen = None
    if args.flows:
        try:
            chosen = tuple(int(x) for x in args.flows.split(","))
        except ValueError:
            raise UsageError(f"--flows must be comma-separated flow indices, not {args.flows!r}") from None
    flows = None
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
        flows = tuple(parsed)
    p = melo_params(args.scenario, loss=args.loss, lossy_gpu=args.lossy_gpu, flows=flows, chosen=chosen,
                    scale=args.scale, f_clk_mhz=args.clock_mhz, seed=args.seed)
    check_clock(p.f_clk_mhz, args.model_only)
    progress(f"melo: {len(p.flows)} flows, {len(p.chosen_flows())} on the engine, loss {p.loss:g}; {_mode(args)}")
    return run_bridges([("melo", lambda d: run_bridge(p, model_only=args.model_only, sim=args.sim, test_dir=d))],
                       args.output, args.model_only)


def _cmd_serve(args) -> int:
    _check_out(args)
    from hwcosim.cosim.designs.bridges import check_clock, progress, run_bridges, serve_params
    from hwcosim.cosim.designs.fss.bridge import run_bridge

    if args.p_stall is not None and not 0 <= args.p_stall < 0.95:
        raise UsageError(f"--p-stall must be in [0, 0.95), not {args.p_stall}")
    sps = serve_params(args.scenario, args.device, n_requests=args.requests, load=args.load, slo_us=args.slo_us,
                       p_stall=args.p_stall, cache=False if args.no_cache else None, f_clk_mhz=args.clock_mhz,
                       seed=args.seed)
    check_clock(sps[0].f_clk_mhz, args.model_only)

    def one(sp):
        def run(test_dir):
            progress(f"serve {sp.device}: {sp.n_requests} requests at load {sp.load:g}; {_mode(args)}")
            return run_bridge(sp, model_only=args.model_only, sim=args.sim, test_dir=test_dir)

        return f"serve_{sp.device}", run

    return run_bridges([one(sp) for sp in sps], args.output, args.model_only)


def _cmd_kv(args) -> int:
    _check_out(args)
    from hwcosim.cosim.designs.bridges import check_clock, kv_params, progress, run_bridges
    from hwcosim.cosim.designs.kvdirect.bridge import run_bridge

    sp = kv_params(args.scenario, n_workers=args.workers, iterations=args.iterations,
                   keys_per_iter=args.keys_per_iter, n_keys=args.keys, theta=args.theta, mem_latency=args.mem_latency,
                   forward=False if args.no_forward else None, f_clk_mhz=args.clock_mhz, seed=args.seed)
    check_clock(sp.f_clk_mhz, args.model_only)
    progress(f"kv: {sp.n_workers} workers x {sp.iterations} iterations x {sp.keys_per_iter} keys; {_mode(args)}")
    return run_bridges([("kv", lambda d: run_bridge(sp, model_only=args.model_only, sim=args.sim, test_dir=d))],
                       args.output, args.model_only)

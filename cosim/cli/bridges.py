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

from hwcosim.cosim.cli.util import command
from hwcosim.models.errors import UsageError

__all__ = ["register"]


def _bridge(sub, name, func, help_, rows, description) -> None:
    """A bridge subcommand: the common options (output, model only, simulator, seed, scenario), then ``rows``."""
    command(sub, name, func, help_, [
        ("-o --output", "output folder (default build/bridges)", dict(metavar="DIR", default="build/bridges")),
        ("--model-only", "run only the model device (no simulator)", True),
        ("--sim", "simulator (default: $SIM or verilator)", dict(choices=("verilator", "icarus"), default=None)),
        ("--seed", "scenario seed (default 1, or the --scenario file's)", dict(type=int, default=None)),
        ("--scenario", "derive the scenario from a cluster scenario file (as 'hwcosim cluster run' reads); flags "
         "override it", dict(metavar="FILE.toml", default=None)), *rows], description=description)


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cosim`` with ``melo``, ``serve`` and ``kv`` to an argparse subparsers object."""
    p = subparsers.add_parser("cosim", help="RTL-in-the-loop bridges: MELO in the cluster network, BBS/FSS serving, "
                                            "KV-Direct parameter server (RTL vs model, slowdown)",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cosim_cmd", metavar="{melo,serve,kv}")
    sub.required = True

    f, i = dict(type=float, default=None), dict(type=int, default=None)
    _bridge(sub, "melo", _cmd_melo, "MELO RTL engine doing loss recovery for chosen flows of a cluster network", [
        ("--loss", "loss probability on the lossy link (default 0.02, or the --scenario failure's loss)", f),
        ("--lossy-gpu", "GPU whose NIC down-link is lossy (default 2, or the --scenario file's lossy failure)", i),
        ("--flow", "a flow of the workload (repeatable; GPUs 0..3, or of the --scenario topology); replaces the six "
         "built-in flows (or the job's ring hops)", dict(metavar="SRC,DST,BYTES,START_US", action="append")),
        ("--flows", "indices of the flows to run on the engine (default: all crossing the lossy link)",
         dict(metavar="I,J", default=None)),
        ("--scale", "multiply every flow size (default 1, or [cosim.melo] scale)", f),
        ("--clock-mhz", "engine clock (default 250)", f)],
            "Flows on a small Clos with loss on one link; the flows crossing it run at packet level with the MELO "
            "engine as receiver, the rest at flow level.")

    _bridge(sub, "serve", _cmd_serve,
            "BBS SpMxV / FSS GEMM RTL as serving devices under an ElasticBatch-style stream", [
        ("--device", "device(s) (default both)", dict(choices=("bbs", "fss", "both"), default=None)),
        ("--requests", "requests (default 60)", i),
        ("--load", "offered load vs the device serving one request at a time (default 1.3)", f),
        ("--slo-us", "latency SLO in us (default 10)", f),
        ("--p-stall", "probability the result sink refuses a cycle (RTL only; default 0)", f),
        ("--no-cache", "simulate every batch (no cache per shape)", True),
        ("--clock-mhz", "engine clock (default 200)", f)],
            "Poisson requests, size buckets, dynamic batching; service times from RTL cycles (cached per batch shape) "
            "vs the cycle model.")

    _bridge(sub, "kv", _cmd_kv, "KV-Direct pipeline RTL serving a parameter-server job's key-value traffic", [
        ("--workers", "workers, 1..7 (default 4; with --scenario: the job's DP degree, or its first N ranks)", i),
        ("--iterations", "iterations (default 3)", i), ("--keys-per-iter", "keys pulled per iteration (default 16)", i),
        ("--keys", "parameter keys (default 48)", i), ("--theta", "Zipf skew (default 0.99)", f),
        ("--mem-latency", "memory latency in cycles (default 40)", i),
        ("--no-forward", "turn the pipeline's forwarding off", True),
        ("--clock-mhz", "pipeline clock (default 200)", f)],
            "Workers pull (GET) and push (ATOMIC add / PUT) parameter keys of Zipf popularity over a flow-level "
            "network to a KV-Direct NIC.")
    return p


def _mode(args) -> str:
    return "model only" if args.model_only else "model, then RTL"


def _flow(text: str) -> tuple:
    parts = text.split(",")
    try:
        if len(parts) != 4:
            raise ValueError
        return int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3])
    except ValueError:
        raise UsageError(f"--flow {text!r}: expected SRC,DST,BYTES,START_US, e.g. --flow 0,2,262144,0") from None


def _cmd_melo(args) -> int:
    from hwcosim.cosim.designs.bridges import check_clock, melo_params, progress, run_bridges
    from hwcosim.cosim.designs.melo.bridge import run_bridge

    try:
        chosen = tuple(int(x) for x in args.flows.split(",")) if args.flows else None
    except ValueError:
        raise UsageError(f"--flows must be comma-separated flow indices, not {args.flows!r}") from None
    flows = tuple(_flow(text) for text in args.flow) if args.flow else None
    p = melo_params(args.scenario, loss=args.loss, lossy_gpu=args.lossy_gpu, flows=flows, chosen=chosen,
                    scale=args.scale, f_clk_mhz=args.clock_mhz, seed=args.seed)
    check_clock(p.f_clk_mhz, args.model_only)
    progress(f"melo: {len(p.flows)} flows, {len(p.chosen_flows())} on the engine, loss {p.loss:g}; {_mode(args)}")
    return run_bridges([("melo", lambda d: run_bridge(p, model_only=args.model_only, sim=args.sim, test_dir=d))],
                       args.output, args.model_only)


def _cmd_serve(args) -> int:
    from hwcosim.cosim.designs.bridges import check_clock, progress, run_bridges, serve_params
    from hwcosim.cosim.designs.fss.bridge import run_bridge

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
    from hwcosim.cosim.designs.bridges import check_clock, kv_params, progress, run_bridges
    from hwcosim.cosim.designs.kvdirect.bridge import run_bridge

    sp = kv_params(args.scenario, n_workers=args.workers, iterations=args.iterations,
                   keys_per_iter=args.keys_per_iter, n_keys=args.keys, theta=args.theta, mem_latency=args.mem_latency,
                   forward=False if args.no_forward else None, f_clk_mhz=args.clock_mhz, seed=args.seed)
    check_clock(sp.f_clk_mhz, args.model_only)
    progress(f"kv: {sp.n_workers} workers x {sp.iterations} iterations x {sp.keys_per_iter} keys; {_mode(args)}")
    return run_bridges([("kv", lambda d: run_bridge(sp, model_only=args.model_only, sim=args.sim, test_dir=d))],
                       args.output, args.model_only)

"""``hwcosim kvdirect study`` and ``hwcosim kvdirect mops`` (JSON + PNG + rich table).

- ``study``: :mod:`hwcosim.models.kvdirect.study` (our model beside the paper's 180 / 114 Mops,
  1.22 Gops, 4.3 / 5.4 us and 191x).
- ``mops``: :mod:`hwcosim.models.kvdirect.mops`, the RTL pipeline's Mops and latency at its
  measured Fmax (from a build JSON) with the PCIe / NIC DRAM / 40 GbE model, per GET / PUT / 50-50
  mix on Zipf 0.99, beside the paper's 180 / 114 Mops, naming the binding limit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import entry
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["register", "main"]


def _run(args) -> int:
    if args.ops < 1000:
        raise UsageError(f"--ops must be >= 1000, not {args.ops}")
    if not 1 <= args.nics <= 64:
        raise UsageError(f"--nics must be 1..64, not {args.nics}")
    if not 0 <= args.theta <= 2:
        raise UsageError(f"--theta must be in [0, 2], not {args.theta}")
    from hwcosim.models.kvdirect.study import study, study_table, write_study

    res = study(seed=args.seed, n_ops=args.ops, n_nics=args.nics, theta=args.theta)
    js, png = write_study(res, Path(args.output))
    show(study_table(res))
    print(f"wrote {js} and {png}")
    return 0


def _results_json(arg: str | None) -> str:
    """``arg``, or docs/boards/results.json (from the working folder, else from the checkout)."""
    if arg:
        return arg
    here = Path("docs/boards/results.json")
    return str(here if here.is_file() else Path(__file__).resolve().parents[2] / here)


def _mops(args) -> int:
    from hwcosim.models.benchio import print_table
    from hwcosim.models.kvdirect.mops import MOPS_COLUMNS, mops_report, mops_rows, write_mops

    args.build = _results_json(args.build)
    if not Path(args.build).is_file():
        raise UsageError(f"--build {args.build}: no such file; pass docs/boards/results.json or the build.json of "
                         "an hwcosim build kvdirect-pipeline --ooc run")
    if args.keys is not None and args.keys < 1:
        raise UsageError(f"--keys must be >= 1, not {args.keys}")
    from hwcosim.models.atomic import check_out_dir

    out = check_out_dir(args.output)
    ops = args.ops or (2000 if args.quick else 20000)
    if ops < 100:
        raise UsageError(f"--ops must be >= 100, not {ops}")
    res = mops_report(args.build, pipeline_ops=ops, stream_ops=max(10 * ops, 20000) if args.quick or args.ops
                      else 200000, store_ops=1000 if args.quick or args.ops else 4000, seed=args.seed,
                      n_keys=args.keys)
    js, png = write_mops(res, out)
    p = res["pipeline_params"]
    print_table(f"KV-Direct pipeline ({p['entries']} entries, {p['rs_slots']} slots) at its measured "
                f"{res['fmax_mhz']:.1f} MHz (nextpnr, {res['build']['part']}) vs the paper at "
                f"{res['paper_clock_mhz']:.0f} MHz; Zipf 0.99", MOPS_COLUMNS, mops_rows(res))
    for r in res["rows"]:
        if r["paper_mops"] is not None:
            print(f"{r['mix']}: {r['mops']:.1f} Mops = {r['ops_per_cycle']:.3f} ops/cycle x {res['fmax_mhz']:.1f} MHz "
                  f"({r['mops'] / r['paper_mops']:.0%} of the paper's {r['paper_mops']:.0f}); the same pipeline at "
                  f"{res['paper_clock_mhz']:.0f} MHz: {r['pipeline_mops_at_paper_clock']:.0f} Mops, with 256 "
                  f"entries {r['pipeline_mops_at_paper_clock_256_entries']:.0f} Mops; bound: {r['bound']} "
                  f"({r['pipeline_limit']})")
    g = res["rows"][0]
    print(f"most sensitive to the {res['sensitivity']}: GET {g['mops_band_memory_latency'][0]:.0f}.."
          f"{g['mops_band_memory_latency'][1]:.0f} Mops")
    print(f"wrote {js} and {png}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``kvdirect`` (with subcommands ``study`` and ``mops``) to an argparse subparsers object."""
    p = subparsers.add_parser("kvdirect", help="KV-Direct key-value store models",
                              description="KV-Direct (SOSP 2017) golden store and performance model.")
    sub = p.add_subparsers(dest="kvdirect_cmd", required=True)
    s = sub.add_parser("study", help="predict throughput, latency and atomic speedup vs the paper",
                       description="Throughput (1 and N NICs), latency and the single-key atomic speedup "
                                   "of KV-Direct from our model, beside the paper's figures.")
    s.add_argument("-o", "--output", default="build/kvdirect", help="output folder (default build/kvdirect)")
    s.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    s.add_argument("--ops", type=int, default=200_000, help="ops in the sampled key stream (default 200000)")
    s.add_argument("--nics", type=int, default=10, help="NICs in the multi-NIC case (default 10)")
    s.add_argument("--theta", type=float, default=0.99, help="Zipf skew, 0 = uniform (default 0.99)")
    s.set_defaults(func=_run)
    m = sub.add_parser("mops", help="the RTL pipeline's Mops and latency at its measured Fmax vs 180 / 114 Mops",
                       description="Ops/cycle of the RTL pipeline's cycle model on Zipf 0.99 GET, PUT and 50/50 "
                                   "streams, times the measured Fmax, capped by the PCIe / NIC DRAM and 40 GbE model; "
                                   "beside the paper's 180 / 114 Mops, naming the binding limit.")
    m.add_argument("--build", default=None, metavar="JSON",
                   help="hwcosim build JSON with the kvdirect-pipeline Fmax (default docs/boards/results.json)")
    m.add_argument("--quick", action="store_true", help="short streams (2,000 ops through the cycle model)")
    m.add_argument("--ops", type=int, default=0,
                   help="operations per cycle-model run (default 20000, --quick 2000); the short settings also "
                        "shorten the memory model's key stream")
    m.add_argument("--keys", type=int, default=None,
                   help="keys of the pipeline's Zipf stream (default: the built store's bucket count)")
    m.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    m.add_argument("-o", "--output", default="build/kvdirect", help="output folder (default build/kvdirect)")
    m.set_defaults(func=_mops)
    return p


main = entry()

"""``hwcosim beamraster`` subcommands (the lead wires :func:`register` into ``cosim/cli/__init__.py``).

- ``hwcosim beamraster study [--quick] [-o DIR]``: the capacity study of
  :mod:`hwcosim.models.beamraster.study` (sum rate vs SNR, K, M for every precoder; ZF closed form;
  update cost), JSON + PNG under ``build/beamraster`` by default.
- ``hwcosim beamraster sim [--M 16 --K 8 --lanes 16 ...]``: the precoder RTL on a channel-driven
  stimulus, every sample compared with the golden model; prints cycles vs the model, the
  fixed-point sum-rate fraction and the clock a 20 MHz LTE-like carrier needs; JSON out.

- ``hwcosim beamraster realtime [--build JSON ...] [--attempt DIR ...] [-o DIR]``: is the precoder real
  time? The LTE 20 MHz requirement of a 64-antenna cell, each built configuration's throughput at
  its measured Fmax (nextpnr, from the build JSON), the multipliers and clock real time needs and
  how a Stratix V meets it (:mod:`hwcosim.models.beamraster.realtime`); JSON + PNG.

Exit status: 0 success, 1 an RTL sample differs from the golden model, 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hwcosim.cosim.cli.util import entry
from hwcosim.models.errors import UsageError

__all__ = ["register", "main"]


def _fail(msg: str):
    raise UsageError(msg)


def _out_dir(arg: str | None) -> Path:
    from hwcosim.models.atomic import check_out_dir

    return check_out_dir(arg if arg else "build/beamraster")


def _cmd_study(args) -> int:
    from hwcosim.models.beamraster.report import print_study
    from hwcosim.models.beamraster.study import run_study, write_study
    from rich.console import Console

    out = _out_dir(args.output)
    con = Console()
    with con.status("BeamRaster study ...") as status:
        res = run_study(quick=args.quick, progress=lambda d, n: status.update(f"BeamRaster study: point {d}/{n}"))
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:  # every file of the study appears at once, at the end
        paths = write_study(res, st)
    print_study(res, con)
    con.print(f"{len(paths)} files in {out} ({res['wall_s']:.1f} s)")
    return 0


def _cmd_sim(args) -> int:
    from hwcosim.cosim.designs.beamraster.run import run_sim
    from hwcosim.models.beamraster.datapath import PrecoderParams

    out = _out_dir(args.output)
    for name in ("frames", "seed"):
        if getattr(args, name) < (1 if name == "frames" else 0):
            _fail(f"--{name} must be {'>= 1' if name == 'frames' else '>= 0'}, not {getattr(args, name)}")
    for name in ("p_idle", "p_stall"):
        if not 0.0 <= getattr(args, name) < 1.0:
            _fail(f"--{name.replace('_', '-')} must lie in [0, 1), not {getattr(args, name)}")
    try:
        p = PrecoderParams(M=args.M, K=args.K, lanes=args.lanes or args.M, groups=args.groups,
                           sc_per_group=args.sc_per_group, symbols_per_frame=args.symbols_per_frame)
    except ValueError as e:
        _fail(str(e))
    path = run_sim(p, out, frames=args.frames, seed=args.seed, snr_db=args.snr_db, p_idle=args.p_idle,
                   p_stall=args.p_stall)
    stem = path.stem
    print(f"wrote {path} and the run folder {out / stem} (re-check it without simulating: hwcosim check "
          f"{out / stem})")
    return 0


def _results_json(arg: str | None) -> str:
    """``arg``, or docs/boards/results.json (from the working folder, else from the checkout)."""
    if arg:
        return arg
    here = Path("docs/boards/results.json")
    return str(here if here.is_file() else Path(__file__).resolve().parents[2] / here)


def _shipped(pattern: str) -> list[str]:
    """The other lane configurations' builds shipped in docs/boards/beamraster/ (the 8-lane build, the
    32-lane 4-user build with router2) and the attempts that did not fit or route (their stdout/stderr)."""
    folder = Path(_results_json(None)).parent / "beamraster"
    return [str(p) for p in sorted(folder.glob(pattern))]


def _cmd_realtime(args) -> int:
    from hwcosim.models.beamraster.realtime import (
        REALTIME_COLUMNS,
        load_attempts,
        realtime_report,
        realtime_rows,
        write_realtime,
    )
    from hwcosim.models.benchio import print_table

    out = _out_dir(args.output)
    builds = args.build or [_results_json(None), *_shipped("*.json")]
    for b in builds:
        if not Path(b).is_file():
            _fail(f"--build {b}: no such file; pass docs/boards/results.json or the build.json of an "
                  "hwcosim build beamraster-precoder --ooc run")
    attempts = args.attempt if args.attempt is not None else ([] if args.build else _shipped("attempts/*"))
    res = realtime_report(builds, attempts=load_attempts(attempts))
    js, png = write_realtime(res, out)
    req = res["requirement"]
    c = res["cell"]
    print(f"real time: {c['antennas']} antennas, {c['users']} users, {c['subcarriers']} subcarriers x "
          f"{c['symbols_per_s'] / 1e3:g} k symbols/s = "
          f"{req['subcarrier_symbols_per_s'] / 1e6:.1f} M subcarrier-symbols/s, "
          f"{req['cmac_per_s'] / 1e9:.2f} G complex MAC/s ({req['real_mults_per_s'] / 1e9:.1f} G 18x18 products/s)")
    print_table("BeamRaster precoder at its measured Fmax (nextpnr, LFE5U-85F) vs real time", REALTIME_COLUMNS,
                realtime_rows(res))
    for a in res["attempts"]:
        if a["error"]:
            print(f"  {', '.join(f'{k}={v}' for k, v in a['params'].items())}: {a['error']}")
    n, eb, sv = res["needs_at_measured_fmax"], res["ecp5_bound"], res["stratix_v"]
    print(f"at {n['clock_mhz']:.1f} MHz real time needs {n['copies']} x L={n['lanes']} lanes = {n['real_multipliers']} "
          f"multipliers ({n['ideal_real_multipliers']} if every one were busy every cycle); the LFE5U-85F has "
          f"{eb['mults']}: at most {eb['realtime_fraction_max']:.0%} of real time at that clock, or "
          f"{eb['clock_needed_mhz']:.0f} MHz with all of them busy")
    full = n["clock_at_lanes"][-1]
    print(f"Stratix V: the full L={full['lanes']} datapath needs {full['clock_mhz']:.1f} MHz and "
          f"{sv['real_multipliers']} 18x18 = {sv['dsp_blocks']} variable-precision DSP blocks, "
          f"{sv['fraction_of_smallest']:.0%} of the smallest Stratix V ({sv['dsp_blocks_min']} blocks), "
          f"{sv['fraction_of_largest']:.0%} of the largest ({sv['dsp_blocks_max']}) [{sv['source']}]")
    band = {r["K"]: r["realtime_fraction"] for r in res["users_band"]}
    print(f"most sensitive to the users K (not confirmed for the paper): best build's fraction of real time "
          f"{band[16]:.0%} (K=16) .. {band[8]:.0%} (K=8) .. {band[4]:.0%} (K=4)")
    print(f"wrote {js} and {png}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``beamraster`` (with ``study``, ``sim`` and ``realtime``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "beamraster", help="BeamRaster massive MU-MIMO precoding (IEEE TMC 2019): study and RTL",
        description="BeamRaster: pre-computed DFT-beam precoders with side-lobe pre-distortion "
                    "(Meng et al., IEEE TMC 18(5), 2019).")
    sub = p.add_subparsers(dest="beamraster_cmd", metavar="{study,sim,realtime}")
    sub.required = True
    s = sub.add_parser("study", help="sum rate vs SNR/K/M for ZF, MMSE, MRT, codebook, BeamRaster (JSON + PNG)",
                       description="Run the BeamRaster capacity study; write beamraster_study.json and .png.")
    s.add_argument("--quick", action="store_true", help="the fast setting (default: the full study)")
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/beamraster)")
    s.set_defaults(func=_cmd_study)
    r = sub.add_parser("sim", help="precoder RTL vs golden model on a channel-driven stimulus",
                       description="Simulate the precoder RTL (SIM=verilator|icarus), compare every sample.")
    r.add_argument("--M", type=int, default=16, help="antennas, a power of two (default 16)")
    r.add_argument("--K", type=int, default=8, help="users (default 8)")
    r.add_argument("--lanes", type=int, default=0, help="antennas per cycle (default M)")
    r.add_argument("--groups", type=int, default=2, help="pre-distortion groups per OFDM symbol (default 2)")
    r.add_argument("--sc-per-group", type=int, default=2, help="subcarriers per group (default 2)")
    r.add_argument("--symbols-per-frame", type=int, default=2, help="OFDM symbols per frame (default 2)")
    r.add_argument("--frames", type=int, default=2, help="frames simulated (default 2)")
    r.add_argument("--snr-db", type=float, default=30.0, help="SNR for the sum-rate check (default 30)")
    r.add_argument("--p-idle", type=float, default=0.0, help="idle probability before each input beat")
    r.add_argument("--p-stall", type=float, default=0.0, help="output refusal probability")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/beamraster)")
    r.set_defaults(func=_cmd_sim)
    t = sub.add_parser("realtime",
                       help="is the precoder real time? ours at the measured Fmax vs LTE 20 MHz, 64 antennas",
                       description="Derive the real-time requirement of a 64-antenna LTE 20 MHz cell, set each built "
                                   "configuration's throughput at its nextpnr Fmax beside it, and give the multipliers "
                                   "and clock a part needs (and how a Stratix V meets it).")
    t.add_argument("--build", action="append", metavar="JSON",
                   help="an hwcosim build JSON (repeatable; default docs/boards/results.json and the other lane "
                        "configurations' builds in docs/boards/beamraster/)")
    t.add_argument("--attempt", action="append", metavar="DIR",
                   help="a folder with stdout.json (hwcosim build --json) and stderr.txt of a build that may have "
                        "failed, to list why (repeatable; default, without --build: docs/boards/beamraster/attempts/)")
    t.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/beamraster)")
    t.set_defaults(func=_cmd_realtime)
    return p


main = entry()

"""``hwcosim beamraster`` subcommands (the lead wires :func:`register` into ``cosim/cli/__init__.py``).

- ``hwcosim beamraster study [--quick] [-o DIR]``: the capacity study of
  :mod:`hwcosim.models.beamraster.study` (sum rate vs SNR, K, M for every precoder; ZF closed form;
  update cost), JSON + PNG under ``build/beamraster`` by default.
- ``hwcosim beamraster sim [--M 16 --K 8 --lanes 16 ...]``: the precoder RTL on a channel-driven
  stimulus, every sample compared with the golden model; prints cycles vs the model, the
  fixed-point sum-rate fraction and the clock a 20 MHz LTE-like carrier needs; JSON out.

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


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``beamraster`` (with ``study`` and ``sim``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "beamraster", help="BeamRaster massive MU-MIMO precoding (IEEE TMC 2019): study and RTL",
        description="BeamRaster: pre-computed DFT-beam precoders with side-lobe pre-distortion "
                    "(Meng et al., IEEE TMC 18(5), 2019).")
    sub = p.add_subparsers(dest="beamraster_cmd", metavar="{study,sim}")
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
    return p


main = entry()

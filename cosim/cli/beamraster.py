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
import json
import sys
from pathlib import Path

from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["register", "main"]


def _fail(msg: str):
    raise UsageError(msg)


def _out_dir(arg: str | None) -> Path:
    from hwcosim.models.atomic import check_out_dir

    return check_out_dir(arg if arg else "build/beamraster")


def _cmd_study(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from hwcosim.models.beamraster.study import METHODS, run_study, write_study

    out = _out_dir(args.output)
    con = Console()
    with con.status("BeamRaster study ...") as status:
        res = run_study(quick=args.quick, progress=lambda d, n: status.update(f"BeamRaster study: point {d}/{n}"))
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:  # every file of the study appears at once, at the end
        paths = write_study(res, st)
    for kind in res["config"]["kinds"]:
        t = Table(title=f"Sum rate (bit/s/Hz), {kind}, M={res['config']['base']['M']}, K={res['config']['base']['K']}")
        t.add_column("SNR dB", justify="right")
        for m in METHODS:
            t.add_column(f"{m} bit/s/Hz", justify="right")
        t.add_column("BR / ZF", justify="right")
        for r in res["vs_snr"][kind]:
            t.add_row(str(r["snr_db"]), *(f"{r[m]:.1f}" for m in METHODS), f"{r['beamraster'] / r['zf']:.1%}")
        show(t, con)
    t = Table(title="Precoder update cost per subcarrier: complex multiplies, numpy time / ZF's "
                                          "(median [IQR])")
    t.add_column("M x K")
    for m in METHODS:
        t.add_column(m, justify="right")
    for c in res["cost"]:
        t.add_row(f"{c['M']} x {c['K']}", *(f"{c['cmul_per_update'][m]} {c['time_ratio_to_zf'][m]:.2f}x "
                                            f"[{c['time_ratio_iqr'][m][0]:.2f},{c['time_ratio_iqr'][m][1]:.2f}]"
                                            for m in METHODS))
    show(t, con)
    con.print(f"ZF vs closed form (Rayleigh): max relative error {res['headline']['zf_closed_form_max_rel_err']:.2%}")
    con.print(f"{len(paths)} files in {out} ({res['wall_s']:.1f} s)")
    return 0


def _cmd_sim(args) -> int:
    from rich.table import Table

    from hwcosim.cosim.designs.beamraster.precoder import realtime_budget, run_scenario
    from hwcosim.models.atomic import write_text
    from hwcosim.models.beamraster.datapath import CycleModel, PrecoderParams, fixed_point_sum_rate

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
    import numpy as np

    from hwcosim.models.atomic import staged_dir

    stem = f"beamraster_sim_M{p.M}K{p.K}L{p.lanes}"
    with staged_dir(out) as st:  # the summary and the run folder <stem>/ appear together, at the end
        res, sc = run_scenario(p, n_frames=args.frames, seed=args.seed, snr_db=args.snr_db, p_idle_s=args.p_idle,
                               p_idle_c=args.p_idle, p_stall=args.p_stall, return_output=True, test_dir=st / stem)
        mt = res.metrics
        fx = fixed_point_sum_rate(p, sc, np.array(mt.pop("out_re")), np.array(mt.pop("out_im")))
        model = CycleModel(p)
        budget = realtime_budget(model.symbols_per_cycle(), p.M, p.K, p.lanes)
        rec = {"params": p.to_dict(), "metrics": {k: v for k, v in mt.items() if k != "mismatch_list"},
               "fixed_point": fx, "budget_from_model": budget, "run_folder": stem}
        write_text(st / f"{stem}.json", json.dumps(rec, indent=1) + "\n")
    path = out / f"{stem}.json"
    t = Table(title=f"BeamRaster precoder RTL ({res.sim}): M={p.M}, K={p.K}, L={p.lanes}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in (("subcarrier-symbols", mt["n_symbols"]), ("mismatches", mt["mismatches"]),
                 ("cycles (measured)", mt["cycles"]), ("cycles (model, no stalls)", mt["expected"]),
                 ("ideal", mt["ideal"]), ("symbols / cycle (steady)", f"{model.symbols_per_cycle():.4f}"),
                 ("sum rate fixed / float", f"{fx['fraction']:.4%}"), ("EVM", f"{fx['evm']:.2e}"),
                 ("clock for 16.8 M symbols/s", f"{budget['clock_mhz']:.0f} MHz")):
        t.add_row(k, str(v))
    show(t)
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


def main(argv=None) -> int:
    """Stand-alone entry, the same as ``hwcosim ...``: the one dispatcher reports errors."""
    from hwcosim.cosim.cli import main as hwcosim

    return hwcosim([*(sys.argv[1:] if argv is None else argv)])

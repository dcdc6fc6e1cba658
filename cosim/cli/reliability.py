"""``hwcosim reliability`` subcommands (the studies are in :mod:`hwcosim.models.systems.reliability.bench`).

- ``hwcosim reliability byterobust [--quick] [-o DIR] [--seed N]``: ETTR of a 9,600-GPU job over
  90 days, ByteRobust vs requeue-on-failure; timeline plot; ETTR curves over the fault rate (real
  Acme rates marked) and the constants, ours beside the paper's 97% with the band.
- ``hwcosim reliability c4d [--quick] [-o DIR] [--seed N] [--mix uniform|byterobust]``: C4D
  precision/recall, time to detect, error-induced overhead vs a timeout-only baseline over a
  simulated fault stream, as curves over the rate and the constants beside the paper's -30%.
- ``hwcosim reliability mycroft [--quick] [-o DIR] [--seed N]``: Mycroft time to detect and to
  root cause.
- ``hwcosim reliability byterobust-loop [--quick] [-o DIR] [--seed N]``: ByteRobust's monitors,
  localisation and recovery as a closed loop on telemetry vs requeue-everything over a month, and
  the ETTR curve over the fault rate from the faults played on the slice (real rates marked),
  ours beside the paper's 97% with the band.
- ``hwcosim reliability noise [--quick] [-o DIR] [--seed N]``: C4D, Mycroft and ByteRobust's
  monitors with background noise (drop bursts, link flaps that heal, slow-but-healthy ranks) at 0,
  1 and 4 x the default rates: precision, recall and false alarms per day.
- ``hwcosim reliability pai [--quick] [-o DIR] [--seed N]``: Mycroft's and C4D's slow-rank rules on
  the real Alibaba PAI 2020 training jobs (data directory) against the upstream straggler labels,
  and their false alarms on 100 real healthy-variation jobs (normal and lognormal reconstructions:
  alarms forced by a slow worker in the data vs unforced, every unforced page listed).

Outputs (JSON + PNG) go under ``build/reliability`` by default.
"""

from __future__ import annotations

import argparse

from hwcosim.cosim.cli.util import entry, study_command

__all__ = ["register", "main"]


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``reliability`` (c4d, mycroft, byterobust) to an argparse subparsers object."""
    p = subparsers.add_parser("reliability", help="fault injection and the C4D, Mycroft, ByteRobust studies",
                              description="Seeded fault injection on the cluster simulator and the C4D, Mycroft "
                                          "and ByteRobust reliability studies.")
    sub = p.add_subparsers(dest="reliability_cmd", metavar="{c4d,mycroft,byterobust,byterobust-loop,noise,pai}")
    sub.required = True
    for name, hlp in (("c4d", "C4D classification/localisation vs a timeout-only baseline"),
                      ("mycroft", "Mycroft trigger + root-cause analysis: time to detect / RCA"),
                      ("byterobust", "ByteRobust ETTR over 90 days vs requeue-on-failure"),
                      ("byterobust-loop", "ByteRobust closed loop on telemetry vs requeue-everything over a month"),
                      ("noise", "C4D, Mycroft and ByteRobust's monitors with and without background noise: "
                                "precision, recall, false alarms per day"),
                      ("pai", "Mycroft and C4D slow-rank rules on the real Alibaba PAI traces vs the upstream "
                              "labels; false alarms on 100 healthy jobs")):
        s = sub.add_parser(name, help=hlp, description=hlp + "; writes JSON + PNG.")
        s.add_argument("--quick", action="store_true", help="the < 1 minute setting")
        s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/reliability)")
        s.add_argument("--seed", type=int, default=0, help="seed (default 0)")
        if name == "c4d":
            s.add_argument("--mix", choices=("uniform", "byterobust"), default="uniform",
                           help="fault-kind mix of the trials (default uniform)")
        ref = ("hwcosim.models.systems.reliability.pai:bench_pai" if name == "pai" else
               f"hwcosim.models.systems.reliability.bench:bench_{name.replace('-', '_')}")
        s.set_defaults(func=study_command(ref, "build/reliability", {"mix": (lambda v: True, "")}))
    return p


main = entry("reliability")

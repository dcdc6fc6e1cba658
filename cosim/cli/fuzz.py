"""``hwcosim fuzz``: coverage-guided fuzzing of the readers of user files (:func:`hwcosim.cosim.flow.fuzz.run`)."""

from __future__ import annotations

import sys

from hwcosim.models.errors import CheckFailed


def register(sub) -> None:
    ap = sub.add_parser("fuzz", help="coverage-guided fuzzing (atheris) of the readers of user files",
                        description="Coverage-guided fuzzing (atheris) of the readers of user files.")
    ap.add_argument("--seconds", type=float, default=60, help="fuzzing time (default 60; start-up not counted)")
    ap.add_argument("--target", action="append", help="only this target (repeatable); default: all")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("-o", "--out", default=None, help="work folder (default build/fuzz)")
    ap.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args) -> int:
    from hwcosim.cosim.flow import fuzz

    if args.list:
        for n in fuzz.check_targets(args.target):
            print(f"{n:22s} {fuzz.TARGETS[n].doc}")
        return 0
    r = fuzz.run(args.target, args.seconds, args.out)
    names, counts = r["names"], r["counts"]
    print(f"fuzzed {len(names)} readers for {r['elapsed']:.0f} s (incl. start-up): {r['inputs']} inputs, "
          f"coverage {r['coverage']} edges, corpus {r['corpus']}, log {r['log']}")
    if counts:
        print("inputs per target (approximate): " + ", ".join(f"{n} {counts.get(n, 0)}" for n in names))
        idle = [n for n in names if not counts.get(n)]
        if idle:
            print(f"  not reached in this run: {', '.join(idle)} (give it more --seconds)", file=sys.stderr)
    if r["returncode"] == 0 and not r["crashes"]:
        return 0
    for ln in r["crash_lines"][-3:]:
        print(f"  {ln}", file=sys.stderr)
    for name, payload in r["crashes"]:
        print(f"  crash in {name}: {payload} (copy it to fuzz/regressions/{name}/ for a regression test)",
              file=sys.stderr)
    if not r["crashes"]:
        print("  the fuzzer stopped without a crash file:\n  " + "\n  ".join(r["stderr_tail"]), file=sys.stderr)
    raise CheckFailed(f"the fuzzer found {len(r['crashes'])} crash(es)" if r["crashes"]
                      else "the fuzzer stopped without a crash file")

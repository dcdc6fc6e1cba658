"""``hwcosim formal``: the formal checks of every registered design (:func:`hwcosim.cosim.flow.formal.run`)."""

from __future__ import annotations

from hwcosim.models.errors import CheckFailed
from hwcosim.models.tables import show


def register(sub) -> None:
    ap = sub.add_parser("formal", help="bounded model checking and k-induction of the designs' properties",
                        description="Bounded model checking and k-induction of the RTL blocks' "
                                    "properties (SymbiYosys + boolector, from PyPI).")
    ap.add_argument("--design", action="append", help="only this design (repeatable); default: all")
    ap.add_argument("--check", action="append", help="only checks whose name contains this text")
    ap.add_argument("--full", action="store_true", help="larger parameter sets and deeper bounds")
    ap.add_argument("--list", action="store_true", help="list the checks and exit")
    ap.add_argument("-o", "--out", default=None, help="work directory (default build/formal)")
    ap.set_defaults(func=cmd_formal)


def cmd_formal(args) -> int:
    from hwcosim.cosim.flow import formal

    found = formal.run(args.design, args.check, full=args.full, list_only=args.list, out_dir=args.out)
    if args.list:
        for c in found:
            print(f"{c.id:40s} {c.mode:6s} depth {c.depth:3d} expect {c.expect.upper():4s} {c.doc}")
        return 0
    show(formal.results_table(found))
    bad = [r for r in found if not r.ok]
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(found)} formal checks did not end as expected: "
                          + ", ".join(r.check.id for r in bad))
    return 0

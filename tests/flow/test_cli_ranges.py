"""Every numeric option of every subcommand has a documented range, checked before any work.

The options come from the parser (every subcommand, as registered): single numbers by their type,
comma-separated lists of numbers from ``LISTS``, and a guard fails on a text option that takes
numbers (its default or its help's example is a number) without being either. A property test
(hypothesis) drives every one with extreme and malformed values: the exit status is 2, stderr is
one ``error:`` line naming the option (no traceback), and no file appears anywhere.
"""

from __future__ import annotations

import math
import re

import pytest
from hwcosim.cosim.cli import build_parser, main
from hwcosim.cosim.cli.ranges import LISTS, RANGES, _numeric_type, lookup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _raw_options():
    """(command path, option string, dest, kind) of every numeric option, from the parser as registered."""
    import argparse

    from hwcosim.cosim.cli import _Parser, _register_all

    parser = _Parser(prog="hwcosim")
    sub = parser.add_subparsers(dest="command")
    _register_all(sub)
    out = []

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, s in a.choices.items():
                    walk(s, (*path, name))
            elif (kind := _numeric_type(a)) is not None:
                out.append((path, a.option_strings[-1] if a.option_strings else a.dest, a.dest, kind))
            elif f"{' '.join(path)} {a.dest}" in LISTS:
                out.append((path, a.option_strings[-1], a.dest, ("list", LISTS[f"{' '.join(path)} {a.dest}"][0])))

    walk(parser, ())
    return out


OPTIONS = _raw_options()


def test_there_are_many_options():
    assert len(OPTIONS) > 80


def _range(path, dest, kind):
    return LISTS[f"{' '.join(path)} {dest}"][1] if isinstance(kind, tuple) else lookup(" ".join(path), dest)


@pytest.mark.parametrize("path,option,dest,kind", OPTIONS, ids=[f"{' '.join(o[0])} {o[1]}" for o in OPTIONS])
def test_every_numeric_option_is_in_the_table(path, option, dest, kind):
    rng = _range(path, dest, kind)
    assert rng is not None, f"add {' '.join(path)} {dest} to cosim/cli/ranges.py RANGES"
    assert rng.lo <= rng.hi


def test_ranges_are_in_the_help():
    p = build_parser()
    text = p._subparsers._group_actions[0].choices["sim"].format_help()
    assert "--idle" in text and "[range [0, 0.95]]" in " ".join(text.split())


def _outside(rng, kind):
    is_list = isinstance(kind, tuple)
    kind = kind[1] if is_list else kind
    vals = ["nan", "inf", "-inf", "1e300", "-1e300", "x", "", "0x"] + ([",", "1,,x"] if is_list else ["1,5"])
    for v in (rng.lo - 1, rng.hi + 1, rng.hi * 10 + 10):
        vals.append(str(int(v)) if kind is int and math.isfinite(v) else repr(float(v)))
    if rng.lo_open:
        vals.append(str(rng.lo))
    if rng.hi_open:
        vals.append(str(rng.hi))
    if kind is int:
        vals.append("1.5")
    return vals


CASES = [(path, option, dest, kind, v) for path, option, dest, kind in OPTIONS
         for v in _outside(_range(path, dest, kind), kind)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES))
def test_extreme_and_malformed_values_are_refused_cleanly(case, tmp_path_factory, capsys):
    import os

    path, option, dest, kind, value = case
    d = tmp_path_factory.mktemp("cwd")
    old = os.getcwd()
    os.chdir(d)
    try:
        code = main([*path, f"{option}={value}"])
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (case, err)
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, (case, err)
    assert option in lines[0] or dest in lines[0], (case, lines)
    assert list(d.iterdir()) == [], (case, list(d.iterdir()))


def test_in_range_values_parse():
    p = build_parser()
    a = p.parse_args(["sim", "--n", "5", "--idle", "0.5"])
    assert a.n == 5 and a.idle == 0.5
    assert p.parse_args(["graph", "partition", "--scale", "24"]).scale == 24


def test_table_has_no_stale_entries():
    dests = {d for _, _, d, _ in OPTIONS} | {f"{' '.join(p)} {d}" for p, _, d, _ in OPTIONS}
    assert set(RANGES) <= dests, sorted(set(RANGES) - dests)
    assert set(LISTS) <= dests, sorted(set(LISTS) - dests)


_NUMS = re.compile(r"^-?\d+(\.\d+)?([eE]-?\d+)?([,-]-?\d+(\.\d+)?([eE]-?\d+)?)*$")


def test_every_text_option_that_takes_numbers_has_a_range():
    """A text option whose default, or the example or default its help gives, is a number or a list
    of numbers (``--workers`` default "4", ``--scales`` "default 18,19,20") must be typed as a number
    (RANGES) or listed in LISTS; otherwise no range is checked before the work starts."""
    import argparse

    from hwcosim.cosim.cli import _Parser, _register_all

    parser = _Parser(prog="hwcosim")
    _register_all(parser.add_subparsers(dest="command"))
    typed = {(tuple(p), o) for p, o, _, _ in OPTIONS}
    bad = []

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, (*path, name))
            elif isinstance(a, argparse._StoreAction | argparse._AppendAction) and a.option_strings and \
                    (path, a.option_strings[-1]) not in typed and not a.choices:
                shown = [a.default if isinstance(a.default, str) else ""]
                shown += re.findall(r"(?:default|e\.g\.)\s+([-\d.,eE]+\d)", a.help or "")
                if any(_NUMS.match(x) for x in shown if x):
                    bad.append(f"{' '.join(path)} {a.option_strings[-1]}")

    walk(parser, ())
    assert not bad, f"give these a numeric type (and a RANGES entry) or a LISTS entry: {bad}"

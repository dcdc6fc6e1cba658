"""Terminal tables that never cut a number, and the ``--json`` document that carries the same data.

Every table a command prints goes through :func:`show`: numeric columns are laid out unbroken
(``no_wrap``, at least as wide as their longest number), labels fold onto the next line, and a
table whose numbers cannot fit the terminal is printed wider than the terminal (the terminal
wraps the line; a number is never ellipsised or split). :func:`table` builds a table from
``(title, columns, rows)``; put units in the column headers, not in the cells.

``hwcosim COMMAND --json``: the dispatcher opens a :func:`json_session`; while it is open
:func:`show` records each table (title, column headers, rows, numeric cells as numbers) instead
of printing it, :func:`emit` adds a command's own summary, and everything else the command prints
goes to stderr. The dispatcher then writes one JSON document on stdout.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["NUMBER", "table", "show", "emit", "json_session", "json_active", "plain_rows", "missing_unit",
           "numeric_columns", "UNIT_WORDS"]

#: a number as a table cell shows it: sign, digits with ``,``/``_`` grouping, fraction, exponent,
#: and an optional short suffix (``%``, ``x``, a unit) that must stay on the same line
NUMBER = re.compile(r"^[-+±~<>≈]?(\d[\d,_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?(%|x|×)?$")
_PURE = re.compile(r"^[-+]?(\d[\d,_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")

_session: dict | None = None


def _text(cell: Any) -> str:
    """The plain text of a cell (a str with rich markup, a rich Text, or anything else)."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except Exception:  # noqa: BLE001 - text that only looks like markup is shown as it is
            return cell
    return str(cell)


def _number(text: str):
    """``text`` as an int or float when it is a plain number (grouping allowed), else the text."""
    t = text.strip()
    if not _PURE.match(t):
        return t
    t = t.replace(",", "").replace("_", "")
    try:
        return int(t)
    except ValueError:
        return float(t)


def _tokens(text: str) -> list[str]:
    return [w.strip("()[]{};:") for w in text.split()]


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], **kw):
    """A rich Table of ``rows`` under ``columns`` (cells converted with ``str``); show it with :func:`show`."""
    from rich.table import Table

    t = Table(title=title, **kw)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[c if hasattr(c, "__rich_console__") or hasattr(c, "plain") else str(c) for c in r])
    return t


def plain_rows(t) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` of a rich Table as plain text."""
    headers = [_text(c.header) for c in t.columns]
    cols = [[_text(x) for x in c._cells] for c in t.columns]
    n = max((len(c) for c in cols), default=0)
    rows = [[col[i] if i < len(col) else "" for col in cols] for i in range(n)]
    return headers, rows


def _keep_numbers(t, width: int) -> int:
    """Lay out ``t`` so that no number is cut; return the width it needs (may exceed ``width``)."""
    needed = 0
    for c in t.columns:
        cells = [_text(x) for x in c._cells]
        filled = [s.strip() for s in cells if s.strip() and s.strip() not in ("-", "—", "n/a")]
        numeric = bool(filled) and all(NUMBER.match(s) for s in filled)
        longest_num = max((len(w) for s in cells for w in _tokens(s) if NUMBER.match(w)), default=0)
        natural = max([len(s) for s in cells] + [1])
        # a number is one word: a column at least as wide as its longest number never breaks one;
        # labels (and headers) fold at that width, down to 8 characters
        floor = max(len(s) for s in filled) if numeric else max(longest_num, min(natural, 8))
        c.overflow = "fold"
        c.min_width = max(c.min_width or 0, floor)
        needed += c.min_width + 2  # padding (0, 1)
    needed += len(t.columns) + 1 if t.box else 0
    return needed


def numeric_columns(t) -> list[str]:
    """Headers of the columns of ``t`` whose filled cells are all numbers."""
    headers, rows = plain_rows(t)
    out = []
    for i, h in enumerate(headers):
        cells = [r[i].strip() for r in rows if r[i].strip() and r[i].strip() not in ("-", "—", "n/a")]
        if cells and all(NUMBER.match(c) for c in cells):
            out.append(h)
    return out


#: header words that are a unit, or say what a dimensionless number counts, compares or identifies
UNIT_WORDS = frozenset("""
s ms us µs ns h min sec seconds hours days hz khz mhz ghz mpps pps tops flops
b kb kib mb mib gb gib tb bytes bits words beats w mw db dbm
% x × ratio vs gain speedup efficiency balance factor share util utilisation utilization accuracy precision recall
fraction probability error err loss diff sparsity density
cycles clocks steps iterations iters epochs edges vertices gpus jobs events tokens instances banks mults pes lanes
conns requests packets ops luts lut lut4 ff ffs dsp dsps bram brams lutram carry nodes workers processes threads
seeds samples count n k m # entries nonzeros nnz rows cols layers components levels slots batch scale seed rank id
line lines reads writes keys blocks mops gops cosine cos rho p depth grade
mismatches vectors connections links streams faults trials runs evictions ettr slowdown
""".split())


#: first-column headers of tables that hold one quantity per row, its unit in the row label
ROW_LABEL_HEADERS = frozenset({"metric", "figure", "quantity", "measure", "field", "item"})


def missing_unit(header: str) -> bool:
    """Whether a numeric column's ``header`` names no unit: no ``(unit)``/``[unit]``, no ratio ``a/b``
    or rate ``x/s``, and none of :data:`UNIT_WORDS` (units, counted things, ratios, fractions, ids)."""
    h = header.lower()
    if re.search(r"[\(\[][^\)\]]+[\)\]]", h) or "/" in h:
        return False
    return not any(w in UNIT_WORDS for w in re.findall(r"[a-zµ%×#]+|\d+[a-z]+", h))


def _audit(t) -> None:
    """Under ``$HWCOSIM_STRICT_TABLES=1`` (the test suite) a numeric column without a unit in its
    header is an error; ``$HWCOSIM_TABLE_AUDIT=FILE`` appends the numeric headers (one JSON line)."""
    import json
    import os

    path = os.environ.get("HWCOSIM_TABLE_AUDIT")
    strict = os.environ.get("HWCOSIM_STRICT_TABLES") == "1"
    if not (path or strict):
        return
    numeric = numeric_columns(t)
    headers = [_text(c.header).strip().lower() for c in t.columns]
    if headers and headers[0] in ROW_LABEL_HEADERS:
        numeric = []  # one quantity per row: the unit is in the row's label (e.g. "wall time (s)")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"title": _text(t.title) if t.title else None, "numeric": numeric}) + "\n")
    bad = [h for h in numeric if missing_unit(h)]
    if strict and bad:
        raise ValueError(f"table {_text(t.title) if t.title else '(untitled)'!r}: numeric column(s) {bad} name no "
                         "unit in the header; put the unit (or what is counted) in it, e.g. 'time (s)'")


def show(t, console=None) -> None:
    """Print rich Table ``t`` with its numbers whole (or record it, inside a :func:`json_session`)."""
    _audit(t)
    if _session is not None:
        headers, rows = plain_rows(t)
        _session["tables"].append({"title": _text(t.title) if t.title else None, "columns": headers,
                                   "rows": [[_number(x) for x in r] for r in rows]})
        return
    from rich.console import Console

    con = console or Console()
    needed = _keep_numbers(t, con.width)
    width = t.width
    if needed > con.width:
        t.width = needed  # wider than the terminal (which wraps the line) rather than cut a number
    try:
        con.print(t, crop=False)
    finally:
        t.width = width


def emit(key: str, value: Any) -> None:
    """Add ``value`` under ``key`` to the ``--json`` document (nothing outside a :func:`json_session`)."""
    if _session is not None:
        _session["result"][key] = value


def json_active() -> bool:
    """Whether the running command was given ``--json``."""
    return _session is not None


@contextlib.contextmanager
def json_session() -> Iterator[dict]:
    """Collect tables and results for one ``--json`` document: ``{"tables": [...], "result": {...}}``."""
    global _session
    prev = _session
    _session = {"tables": [], "result": {}}
    try:
        yield _session
    finally:
        _session = prev

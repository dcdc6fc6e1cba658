"""Tables for people (rich) and their plain-text copies for files."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

__all__ = ["resource_table", "table_text"]

RESOURCE_COLUMNS = ("LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY")


def resource_table(reports: list[dict], title: str, param_keys: tuple[str, ...] = ()) -> Table:
    t = Table(title=title)
    t.add_column("target")
    for k in param_keys:
        t.add_column(k, justify="right")
    for c in RESOURCE_COLUMNS:
        t.add_column(c, justify="right")
    for r in reports:
        params = r.get("params", {})
        t.add_row(r["target"], *[str(params.get(k, "")) for k in param_keys],
                  *[str(r["resources"].get(c, 0)) for c in RESOURCE_COLUMNS])
    return t


def table_text(table: Table, width: int = 140) -> str:
    con = Console(record=True, width=width, file=io.StringIO())
    con.print(table)
    return con.export_text()

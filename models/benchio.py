"""Output helpers of the studies and benchmarks: JSON files, bar charts, titled tables.

The benches (``models/systems/*/bench.py`` and the like, ``(out_dir, quick, **kwargs) -> dict``)
write their JSON and PNG files through these and print their tables through
:func:`hwcosim.models.tables.show`, so the same function runs from ``hwcosim bench``, from a
command and from a notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_text
from hwcosim.models.tables import show

__all__ = ["write_json", "numpy_plain", "bar_png", "print_table", "g4", "pyplot"]


def numpy_plain(o):
    """``json.dumps`` default for numpy scalars and arrays."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))


def write_json(path: Path, obj) -> Path:
    """Write ``obj`` as JSON (numpy scalars and arrays converted), atomically."""
    return write_text(path, json.dumps(obj, indent=1, default=numpy_plain) + "\n")


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_png(path: Path, labels, groups: dict, ylabel: str, title: str, log: bool = False,
            figsize: tuple = (7, 4), fontsize: int | None = None) -> Path:
    """Grouped bars: one group of bars per label, one bar per entry of ``groups`` (name -> values)."""
    from hwcosim.models.atomic import save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=figsize)
    n = len(groups)
    x = np.arange(len(labels))
    for i, (name, vals) in enumerate(groups.items()):
        ax.bar(x + (i - (n - 1) / 2) * 0.8 / n, vals, 0.8 / n, label=name)
    if fontsize is None:
        ax.set_xticks(x, [str(lb) for lb in labels])
    else:
        ax.set_xticks(x, labels, fontsize=fontsize)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


def print_table(title, cols, rows, justify: str | None = "right", cell=str) -> None:
    """Print a titled table (``cell`` turns a value into its text; ``justify`` aligns every column)."""
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        if justify:
            t.add_column(c, justify=justify)
        else:
            t.add_column(c)
    for r in rows:
        t.add_row(*[cell(x) for x in r])
    show(t)


def g4(x) -> str:
    """A table cell: floats to 4 significant digits, anything else as text."""
    return f"{x:.4g}" if isinstance(x, float) else str(x)

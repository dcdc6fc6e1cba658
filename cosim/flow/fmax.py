"""Measured clocks for the throughput figures: the Fmax ``make boards`` recorded per design.

``docs/boards/results.json`` (committed, written by ``make boards``: nextpnr-ecp5 out of context on
an LFE5U-85F speed 6) holds each design's Fmax over the seeds. :func:`measured` returns the worst
of them (the clock the design is known to close at on that part) with the part's name, so a bench
prints "N GOPS at F MHz measured on LFE5U-85F-6" beside the paper's figure on the paper's part,
and an assumed clock only when labelled "assumed".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Measured", "measured", "RESULTS"]

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "boards" / "results.json"


@dataclass(frozen=True)
class Measured:
    design: str
    mhz: float          # the worst Fmax over the recorded seeds
    median_mhz: float
    part: str           # e.g. "LFE5U-85F-6"
    seeds: tuple
    params: dict

    @property
    def label(self) -> str:
        return f"{self.mhz:.1f} MHz measured (nextpnr, out of context, {self.part}, {len(self.seeds)} seed(s))"


def measured(design: str, path: Path | None = None) -> Measured | None:
    """The recorded Fmax of ``design``, or None when ``make boards`` has not recorded it."""
    p = path or RESULTS
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    for r in data.get("results", []):
        if r.get("design") == design and r.get("fmax_mhz"):
            clk = min(r["fmax_mhz"].values(), key=lambda v: v["min"])
            return Measured(design, float(clk["min"]), float(clk["median"]), f"{r['part']}-{r['speed']}",
                            tuple(r.get("seeds", ())), dict(r.get("params", {})))
    return None

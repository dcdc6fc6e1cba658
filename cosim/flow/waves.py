"""GTKWave save files that group a design's ports by stream, written beside each waveform.

Amaranth names the ports of a ``wiring.Component`` by signature path joined with ``__``
(``w__valid``, ``w__ready``, ``w__payload``); ports that share a prefix are one interface and
become one collapsed group (valid/ready first, then payload, then the rest). Clock and reset
come first; plain ports (counters, status) last. Works with GTKWave and Surfer.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path

from hwcosim.models.atomic import write_text

__all__ = ["ports", "write_gtkw"]

_PORT = re.compile(r"^\s*(input|output)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?(\w+)\s*;", re.M)


def ports(verilog: str) -> list[tuple[str, int]]:
    """(name, width) of the top module's ports, in declaration order (the first module)."""
    head = verilog.split("endmodule", 1)[0]
    out = []
    for _, hi, lo, name in _PORT.findall(head):
        width = int(hi) - int(lo) + 1 if hi else 1
        out.append((name, width))
    return out


def write_gtkw(verilog: str, top: str, wave: Path, sim: str, path: Path | None = None) -> Path:
    """Write ``<wave stem>.gtkw`` next to ``wave`` and return its path."""
    scope = top  # Verilator 5 (VCD and FST) and Icarus both put the ports under the top module
    groups: OrderedDict[str, list[tuple[str, int]]] = OrderedDict()
    plain, clocks = [], []
    for name, width in ports(verilog):
        if name in ("clk", "rst"):
            clocks.append((name, width))
        elif "__" in name:
            groups.setdefault(name.split("__", 1)[0], []).append((name, width))
        else:
            plain.append((name, width))

    def sig(name: str, width: int) -> str:
        fmt = "@28" if width == 1 else "@22"  # binary for bits, hex for buses
        ref = f"{scope}.{name}" if width == 1 else f"{scope}.{name}[{width - 1}:0]"
        return f"{fmt}\n{ref}"

    order = {"valid": 0, "ready": 1, "payload": 2}
    lines = [f'[dumpfile] "{wave}"', "[timestart] 0", "[size] 1600 900", "[sst_width] 240", "[signals_width] 260"]
    lines += [sig(*c) for c in clocks]
    for prefix, members in groups.items():
        members.sort(key=lambda m: (order.get(m[0].split("__", 1)[1], 3), m[0]))
        lines += ["@c00200", f"-{prefix}"] + [sig(*m) for m in members] + ["@1401200", f"-{prefix}"]
    if plain:
        lines += ["@c00200", "-status and counters"] + [sig(*p) for p in plain] + ["@1401200",
                                                                                     "-status and counters"]
    path = path or wave.with_suffix(".gtkw")
    write_text(path, "\n".join(lines) + "\n")
    return path

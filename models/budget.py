"""One memory budget for every reader and command, checked before anything large is allocated.

A file can declare sizes far beyond its own: a compressed ``.npz`` member that unpacks to 16 GiB,
a ``.npy`` header promising 10**12 elements, a Matrix Market size line claiming 5e8 vertices in a
75-byte file, a gzip edge list that inflates a thousandfold. Every reader estimates the bytes such a
file would make it allocate and calls :func:`check_alloc` first, so the refusal is one line (exit
status 2) naming the file, what it would need and how to raise the budget, instead of an
out-of-memory kill or a ``MemoryError`` traceback.

The budget is a fixed number, not a fraction of the memory free at the moment (which made the same
command pass or fail depending on what else ran): :data:`DEFAULT_BYTES` (2 GiB), overridden by the
environment variable ``HWCOSIM_MEM_BUDGET`` (bytes, or with a unit: ``512M``, ``8G``, ``8GiB``).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["DEFAULT_BYTES", "ENV", "budget_bytes", "check_alloc", "human", "npy_header_nbytes", "check_npy",
           "check_npz", "MAX_COUNT"]

#: The budget when ``HWCOSIM_MEM_BUDGET`` is not set: 2 GiB.
DEFAULT_BYTES = 2 << 30
#: The environment variable that overrides it.
ENV = "HWCOSIM_MEM_BUDGET"
#: Largest job, sentence or line count any reader accepts whatever the budget (a sanity cap).
MAX_COUNT = 10_000_000

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000**2, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1000**3, "gib": 1 << 30, "t": 1 << 40, "tb": 1000**4, "tib": 1 << 40}


def human(nbytes: int | float) -> str:
    """``nbytes`` in the largest binary unit that keeps it >= 1 (``1.5 GiB``, ``12 KiB``, ``700 B``)."""
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def budget_bytes() -> int:
    """The memory budget in bytes: ``$HWCOSIM_MEM_BUDGET`` if set, else :data:`DEFAULT_BYTES`."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_BYTES
    m = re.fullmatch(r"(\d{1,15}(?:\.\d{1,6})?)\s*([A-Za-z]{0,3})", raw)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise UsageError(f"{ENV}={shown!r}: not a size; write bytes or a number with a unit, e.g. 512M or 8G")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n < 1 << 20:
        raise UsageError(f"{ENV}={raw!r}: below 1 MiB; give at least 1M")
    return n


def check_alloc(nbytes: int, what: str, fix: str = "", error: type[Exception] = UsageError) -> None:
    """Raise ``error`` (one line) when ``nbytes`` is over the budget; ``what`` names the file and the
    thing that would be allocated, ``fix`` says what the user can do short of raising the budget."""
    budget = budget_bytes()
    if nbytes > budget:
        hint = f"{fix}, or " if fix else ""
        raise error(f"{what} would need {human(nbytes)}, over the {human(budget)} memory budget; "
                    f"{hint}raise the budget with {ENV}=<size> (e.g. {ENV}=16G)")


def _nbytes(shape, itemsize: int) -> int:
    n = int(itemsize)
    for s in shape:
        n *= int(s)
    return n


def npy_header_nbytes(f) -> tuple[tuple, object, int] | None:
    """``(shape, dtype, bytes)`` declared by the ``.npy`` header at the start of the open binary file
    ``f`` (read from its first bytes only), or None when ``f`` does not start with the ``.npy`` magic;
    ``ValueError`` for a damaged header."""
    import numpy as np

    fmt = np.lib.format
    head = f.read(6)
    if head != b"\x93NUMPY":
        return None
    version = tuple(f.read(2))
    if version == (1, 0):
        shape, _fortran, dtype = fmt.read_array_header_1_0(f)
    elif version in ((2, 0), (3, 0)):
        shape, _fortran, dtype = fmt.read_array_header_2_0(f)
    else:
        raise ValueError(f"unknown .npy format version {version}")
    return shape, dtype, _nbytes(shape, dtype.itemsize)


def check_npy(path: str | os.PathLike, error: type[Exception] = UsageError) -> None:
    """Check a ``.npy`` file's declared array against the budget and against the bytes the file
    holds (a 100-byte file cannot carry 10**12 floats); does nothing for a file that is not ``.npy``
    (its reader reports that)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            got = npy_header_nbytes(f)
            data_at = f.tell()
    except Exception:  # noqa: BLE001 - numpy's header parser raises many types; the reader reports them
        return
    if got is None:
        return
    shape, dtype, nbytes = got
    if dtype.hasobject:
        return
    check_alloc(nbytes, f"{path}: its header declares an array of shape {shape} {dtype}, which",
                "check the file", error)
    if nbytes > size - data_at:
        raise error(f"{path}: its header declares shape {shape} {dtype} ({human(nbytes)}), the file holds "
                    f"{human(size - data_at)} of data; it is truncated or damaged")


def check_npz(path: str | os.PathLike, error: type[Exception] = UsageError, names=None,
              fix: str = "") -> dict[str, int]:
    """``{member: bytes}`` of the ``.npy`` members of a ``.npz`` (those in ``names``, if given),
    checked before anything is unpacked: each member's size in the zip directory and the array its
    ``.npy`` header declares (read from the member's first bytes) must agree, and their sum must fit
    the budget. A file that is not a zip is left to its reader."""
    path = Path(path)
    out: dict[str, int] = {}
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return out
    with zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[:-4]
            if names is not None and name not in names:
                continue
            declared = int(info.file_size)
            try:
                with zf.open(info) as m:
                    got = npy_header_nbytes(m)
                    header_len = m.tell()
            except Exception:  # noqa: BLE001 - zipfile/zlib raise many types; the reader reports damage
                continue
            if got is None:
                continue
            shape, dtype, nbytes = got
            if not dtype.hasobject and nbytes > declared - header_len:
                raise error(f"{path}: member {name!r} declares shape {shape} {dtype} ({human(nbytes)}) but "
                            f"unpacks to {human(max(declared - header_len, 0))}; the file is damaged")
            out[name] = max(declared, nbytes)
    total = sum(out.values())
    biggest = max(out, key=out.get) if out else None
    what = (f"{path}: unpacking its {len(out)} array{'s' if len(out) != 1 else ''} (the largest, {biggest!r}, "
            f"{human(out[biggest])})" if biggest is not None else f"{path}")
    check_alloc(total, what, fix, error)
    return out

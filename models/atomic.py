"""Atomic file output: write to a temporary file in the target folder, then rename.

A failure (exception, kill) mid-write leaves the old file or nothing, never half a file.

Output folders (``-o DIR``) go the same way, one level up: :func:`check_out_dir` refuses an
unusable path before any work (a file in its place or on its path, a folder that cannot be
written), and :func:`staged_dir` hands out a temporary sibling folder; when the block ends
without an exception its entries are renamed into ``DIR`` (the whole folder in one rename when
``DIR`` did not exist), else the sibling is removed. A late failure leaves ``DIR`` as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "check_out_dir", "commit_dir", "save_png", "staged_dir", "write_bytes", "write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode())


def save_png(fig, path: str | os.PathLike, dpi: int = 110, **savefig_kw) -> Path:
    """Write a matplotlib figure as PNG atomically, then close it (frees its memory)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, **savefig_kw)
    plt.close(fig)
    return path


def check_out_dir(path: str | os.PathLike, flag: str = "-o") -> Path:
    """``path`` as an output folder, refused before any work when it cannot be one.

    Raises :class:`hwcosim.models.errors.UsageError` (exit 2, one line) when ``path`` is an existing file,
    lies inside a file, or its nearest existing folder cannot be written.
    """
    from hwcosim.models.errors import UsageError

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"output path {str(out)!r} exists and is not a directory; pass {flag} DIR")
    probe = out.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"output path {str(out)!r} is inside {str(probe)!r}, which is a file; pass {flag} DIR")
    if not os.access(probe, os.W_OK | os.X_OK) or (out.is_dir() and not os.access(out, os.W_OK | os.X_OK)):
        raise UsageError(f"output path {str(out)!r}: {str(out if out.is_dir() else probe)!r} is not writable; "
                         f"pass {flag} DIR somewhere you can write")
    return out


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike, *, last: tuple[str, ...] = ("run.json", "manifest.json"),
               flag: str = "-o") -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; when the block succeeds, move its entries into ``out``.

    ``out`` is checked first (:func:`check_out_dir`). A missing ``out`` is created by renaming the
    staging folder (a sibling; one step); into an existing one (staged in a hidden folder inside it)
    the entries move one by one, replacing same-named entries, the names in ``last`` (manifests) at
    the end. An exception in the block (or while moving) removes the staging folder and
    propagates: nothing half-written is left behind.
    """
    import shutil

    out = check_out_dir(out, flag)
    if out.is_dir():  # stage inside it (its parent may not be writable)
        st = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    else:
        out.absolute().parent.mkdir(parents=True, exist_ok=True)
        st = Path(tempfile.mkdtemp(prefix=f".{out.absolute().name}.staging-", dir=out.absolute().parent))
    os.chmod(st, 0o777 & ~_umask())
    try:
        yield st
        commit_dir(st, out, last)
    finally:
        shutil.rmtree(st, ignore_errors=True)


def commit_dir(staging: str | os.PathLike, out: str | os.PathLike,
               last: tuple[str, ...] = ("run.json", "manifest.json")) -> Path:
    """Move a staging folder's entries into ``out``: one rename when ``out`` does not exist, else entry
    by entry (replacing same-named ones), the names in ``last`` at the end (an old manifest of that
    name is removed first, so a folder caught half-way never pairs an old manifest with new files)."""
    import shutil

    st, out = Path(staging), Path(out)
    if not out.exists():
        os.replace(st, out)
        return out
    names = sorted(e.name for e in st.iterdir())
    for name in last:
        if name in names and (out / name).is_file():
            (out / name).unlink()
    for name in [n for n in names if n not in last] + [n for n in last if n in names]:
        dest = out / name
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
        os.replace(st / name, dest)
    return out

"""Atomic file output: write to a temporary file in the target folder, then rename.

A failure (exception, kill) mid-write leaves the old file or nothing, never half a file.

Output folders (``-o DIR``) go the same way, one level up: :func:`check_out_dir` refuses an
unusable path before any work (a file in its place or on its path, a folder that cannot be
written), and :func:`staged_dir` hands out a temporary sibling folder; when the block ends
without an exception its entries are renamed into ``DIR`` (the whole folder in one rename when
``DIR`` did not exist), else the sibling is removed. A late failure leaves ``DIR`` as it was.

Into an existing ``DIR`` there are two ways, both all-or-nothing:

- ``replace=True`` (a folder that holds one command's output: a prune export, a run folder): the
  staging folder becomes the whole new ``DIR`` (:func:`replace_dir`): the old folder's entries the
  new output does not write, and that ``keep`` accepts (the user's own files), are carried over by
  hard link first; then the two folders are exchanged in one step (Linux ``renameat2``; elsewhere the
  old folder is renamed aside and the new one renamed in) and the old one is deleted.
- the default (a folder shared by several commands, like ``build/bench``): the new entries are
  merged in, replacing same-named ones, the manifests last; each replaced entry is moved into a
  backup folder first and put back if any step fails (:func:`commit_dir`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "check_out_dir", "commit_dir", "new_staging", "replace_dir", "save_png", "staged_dir",
           "write_bytes", "write_text"]


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


def _can_swap(out: Path) -> bool:
    """Whether the existing folder ``out`` can be renamed aside and replaced: its parent is writable, it
    is not a mount point, and it holds neither this process's working folder nor is one of its parents."""
    real = out.resolve()
    if real.parent == real or os.path.ismount(real) or not os.access(real.parent, os.W_OK | os.X_OK):
        return False
    try:
        cwd = Path.cwd().resolve()
    except OSError:  # the working folder was deleted
        return True
    return real != cwd and real not in cwd.parents


def new_staging(out: Path, replace: bool = False) -> Path:
    """A fresh empty staging folder for ``out``: a sibling (inside ``out`` when ``out`` exists and is
    merged into, or cannot be renamed: its parent may not be writable)."""
    if out.is_dir() and not (replace and _can_swap(out)):
        st = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    else:
        base = out.resolve() if out.is_dir() else out.absolute()
        base.parent.mkdir(parents=True, exist_ok=True)
        st = Path(tempfile.mkdtemp(prefix=f".{base.name}.staging-", dir=base.parent))
    os.chmod(st, 0o777 & ~_umask())
    return st


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike, *, last: tuple[str, ...] = ("run.json", "manifest.json"),
               flag: str = "-o", replace: bool = False, keep=None) -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; when the block succeeds, its entries become ``out``'s.

    ``out`` is checked first (:func:`check_out_dir`). A missing ``out`` is created by renaming the
    staging folder (a sibling; one step). An existing one is replaced whole (``replace=True``,
    :func:`replace_dir`; ``keep(name)`` tells which old entries the new folder keeps, default all it
    does not write) or merged into (:func:`commit_dir`, the names in ``last`` at the end). An exception
    in the block (or while committing) removes the staging folder and propagates: ``out`` is left as
    it was, with nothing of the new output in it.
    """
    import shutil

    out = check_out_dir(out, flag)
    st = new_staging(out, replace)
    try:
        yield st
        if replace:
            replace_dir(st, out, keep=keep, last=last)
        else:
            commit_dir(st, out, last)
    finally:
        shutil.rmtree(st, ignore_errors=True)


def _ours(name: str) -> bool:
    """A hidden staging or backup folder of a command writing into the same folder."""
    return name.startswith((".staging-", ".backup-")) or (name.startswith(".") and ".staging-" in name)


def _link_or_copy(src: str, dst: str) -> str:
    import shutil

    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)
    return dst


def _carry(src: Path, dst: Path) -> None:
    """Put ``src`` (an entry of the old folder) at ``dst`` in the new one without touching ``src``."""
    import shutil

    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(str(src), str(dst))


def replace_dir(staging: str | os.PathLike, out: str | os.PathLike, *, keep=None,
                last: tuple[str, ...] = ("run.json", "manifest.json")) -> Path:
    """Make the complete folder ``staging`` the folder ``out``, all or nothing.

    A missing ``out``: one rename. An existing one: every old entry that ``staging`` lacks and
    ``keep(name)`` accepts (default: all) is carried into ``staging`` (hard links; copies where a link
    cannot be made), then the two folders are exchanged atomically (``renameat2(RENAME_EXCHANGE)``;
    where that is missing, ``out`` is renamed aside and ``staging`` renamed in) and the old folder is
    deleted. A failure before the new folder is in place puts the old one back. A symlink ``out`` keeps
    pointing where it did (its target is replaced). Where the folder cannot be renamed (the working
    folder, a mount point, a read-only parent) the entries are merged with :func:`commit_dir`, the
    old entries ``keep`` rejects removed, with the same all-or-nothing rollback.
    """
    import shutil

    st, out = Path(staging), Path(out)
    if not out.exists():
        os.replace(st, out)
        return out
    keep = keep or (lambda name: True)
    real = out.resolve()
    if st.resolve().parent != real.parent or not _can_swap(out):
        return commit_dir(st, out, last, drop=[e.name for e in out.iterdir()
                                               if not _ours(e.name) and not keep(e.name)])
    have = {e.name for e in st.iterdir()}
    for e in sorted(real.iterdir()):
        if e.name not in have and not _ours(e.name) and keep(e.name):
            _carry(e, st / e.name)
    if _exchange(st, real):  # one atomic step: the new folder at ``out``, the old one where staging was
        shutil.rmtree(st, ignore_errors=True)
        return out
    aside = Path(tempfile.mkdtemp(prefix=f".{real.name}.old-", dir=real.parent))
    os.rmdir(aside)  # a free name beside ``out``
    os.rename(real, aside)
    try:
        os.rename(st, real)
    except BaseException:
        os.rename(aside, real)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is not
    available (another system, an old C library, a file system without it): the caller renames in two
    steps. Any other failure raises OSError, both folders left as they were."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def commit_dir(staging: str | os.PathLike, out: str | os.PathLike,
               last: tuple[str, ...] = ("run.json", "manifest.json"), drop=()) -> Path:
    """Move a staging folder's entries into ``out``: one rename when ``out`` does not exist, else entry
    by entry (replacing same-named ones), the names in ``last`` at the end (an old manifest of that
    name goes first, so a folder caught half-way never pairs an old manifest with new files). Every
    entry replaced, and every old entry named in ``drop``, is moved into a hidden backup folder inside
    ``out`` first; if any step fails, the new entries are taken out again and the old ones put back,
    so ``out`` is left as it was. The backup is deleted once every entry is in place."""
    import shutil

    st, out = Path(staging), Path(out)
    if not out.exists():
        os.replace(st, out)
        return out
    names = sorted(e.name for e in st.iterdir())
    first = [n for n in last if n in names]
    new = [n for n in names if n not in last] + first
    old = first + [n for n in names if n not in last] + [n for n in drop if n not in names]
    backup = Path(tempfile.mkdtemp(prefix=".backup-", dir=out))
    saved, placed = [], []
    try:
        for name in old:  # the old manifest first
            if (out / name).exists() or (out / name).is_symlink():
                os.replace(out / name, backup / name)
                saved.append(name)
        for name in new:  # the new manifest last
            os.replace(st / name, out / name)
            placed.append(name)
    except BaseException:
        for name in placed:
            _remove(out / name)
        for name in saved:
            os.replace(backup / name, out / name)
        shutil.rmtree(backup, ignore_errors=True)
        raise
    shutil.rmtree(backup, ignore_errors=True)
    return out


def _remove(p: Path) -> None:
    import shutil

    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()

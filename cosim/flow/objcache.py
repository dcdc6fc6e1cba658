"""Compiler launcher for Verilator's ``OBJCACHE``: compile the simulator runtime once, not per build.

Every Verilator build compiles the same runtime sources (``verilated.cpp``, ``verilated_vpi.cpp``,
``verilated_dpi.cpp``, ``verilated_threads.cpp`` and cocotb's ``verilator.cpp`` main) with the same
flags: about 5 s of CPU per build, more than a small design's own model at ``-O0``. Verilator's
makefile prefixes every compile with ``$(OBJCACHE)`` (meant for ccache); :mod:`hwcosim.cosim.flow.runner`
points it at this launcher. A compile whose one source file lies outside the build directory (the
runtime, read from the installed wheels) is looked up in the cache folder under the sha256 of

- the command line (without the output path) and the compiler's resolved path, size and mtime,
- the source text,
- the name, size and mtime of every file beside the source (the runtime's headers);
- the text of every header the source includes in quotes that the build directory holds: cocotb's
  ``verilator.cpp`` main includes the design's ``Vtop.h`` and allocates ``new Vtop``, whose size
  grows with the design's ports. Without this its object, compiled for one design, was reused for
  a design with more ports, the model's constructor wrote past the allocation and some simulations
  crashed (SIGSEGV) depending on which design compiled it first (the test order);

a hit copies the cached object (and its ``.d`` dependency file) into place, a miss compiles and
stores them.

The design's own model (one source in the build directory) is compiled with a precompiled header of
Verilator's runtime headers (``verilated.h``, ``verilated_dpi.h``) put first (``-include``): parsing
them took about 1.1 of the 2.3 s of CPU the BBS LSTM's model takes at ``-O0``. The header is
precompiled once per cache folder and command line (:func:`runtime_pch`, the flags without the
source, output and dependency options), under a lock, written whole then renamed; GCC reads it only
when the flags match and otherwise parses the headers as before (the result is the same either way);
when it cannot be made the compile runs unchanged. (GCC leaves a precompiled header's files out of
the ``-MMD`` dependency list; a build folder is never rebuilt in place, and the runtime headers do not
change within an installation.) Standard library only: the launcher is started
once per compile, with ``python -S``.

Usage (what the makefile runs): ``objcache.py CACHE_DIR CXX ARGS...``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile


def _output(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("-o") and len(a) > 2:
            return a[2:]
    return None


def _sources(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-") and a.endswith((".cpp", ".cc", ".cxx", ".c"))]


def cacheable(args: list[str], cwd: str) -> tuple[str, str] | None:
    """``(source, object)`` when ``args`` compiles one source from outside ``cwd`` with ``-c -o``."""
    if "-c" not in args:
        return None
    src, out = _sources(args[1:]), _output(args)
    if len(src) != 1 or out is None:
        return None
    path = os.path.realpath(os.path.join(cwd, src[0]))
    here = os.path.realpath(cwd)
    if os.path.commonpath([path, here]) == here:
        return None  # the design's own model: generated in the build folder
    return path, out


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)


def local_headers(source_text: bytes, cwd: str) -> list[str]:
    """The headers ``source_text`` includes in quotes that exist in ``cwd`` (the build directory:
    generated, design-specific), sorted."""
    names = {m.group(1).decode(errors="replace") for m in _INCLUDE.finditer(source_text)}
    return sorted(n for n in names if os.path.isfile(os.path.join(cwd, n)))


def key(args: list[str], source: str, out: str, cwd: str | None = None) -> str:
    h = hashlib.sha256()
    cmd = [a for a in args if a != out and a != "-o" + out and a != "-o"]
    h.update("\0".join(cmd).encode())
    h.update(os.path.basename(out).encode())
    cxx = shutil.which(args[0]) or args[0]
    for p in (cxx, os.path.realpath(cxx)):
        try:
            st = os.stat(p)
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(p.encode())
    with open(source, "rb") as f:
        text = f.read()
    h.update(hashlib.sha256(text).digest())
    here = cwd if cwd is not None else os.getcwd()
    for name in local_headers(text, here):
        with open(os.path.join(here, name), "rb") as f:
            h.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    folder = os.path.dirname(source)
    for name in sorted(os.listdir(folder)):
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            continue
        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


_PCH_HEADERS = ("verilated.h", "verilated_dpi.h")
#: options of one compile that do not change what a header means (dependency files, output)
_DEP_OPTS = ("-MMD", "-MD", "-MP", "-c")


def _pch_flags(args: list[str], source: str) -> list[str]:
    keep, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in _DEP_OPTS or a == source or a.startswith(("-o", "-MF", "-MT", "-MQ")):
            continue
        keep.append(a)
    return keep


def runtime_pch(cache: str, args: list[str], source: str) -> str | None:
    """The path of a header including Verilator's runtime headers whose precompiled form (``.gch``
    beside it) was made with the flags of ``args``, making it on first use; None when it cannot."""
    import fcntl

    flags = _pch_flags(args, source)
    cxx = shutil.which(args[0]) or args[0]
    k = hashlib.sha256("\0".join([os.path.realpath(cxx), *flags]).encode()).hexdigest()[:24]
    folder = os.path.join(cache, "pch", k)
    header = os.path.join(folder, "vl_runtime.h")
    gch = header + ".gch"
    if os.path.exists(gch):
        return header
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.exists(gch):
                return header
            with open(header + ".tmp", "w") as f:
                f.write("".join(f'#include "{h}"\n' for h in _PCH_HEADERS))
            os.replace(header + ".tmp", header)
            fd, tmp = tempfile.mkstemp(prefix=".gch.", dir=folder)
            os.close(fd)
            rc = subprocess.call([args[0], *flags, "-x", "c++-header", header, "-o", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if rc != 0:
                os.unlink(tmp)
                return None
            os.replace(tmp, gch)
    except OSError:
        return None
    return header


def _model_source(args: list[str]) -> str | None:
    """The source when ``args`` compiles one C++ source with ``-c -o`` (the caller has ruled out the runtime's)."""
    if "-c" not in args or "-x" in args:
        return None
    src, out = _sources(args[1:]), _output(args)
    if len(src) != 1 or out is None or not src[0].endswith(".cpp"):
        return None
    return src[0]


def _copy(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` through a temporary sibling (a reader never sees half a file)."""
    folder = os.path.dirname(os.path.abspath(dst))
    fd, tmp = tempfile.mkstemp(prefix=".objcache.", dir=folder)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: objcache.py CACHE_DIR CXX ARGS...", file=sys.stderr)
        return 2
    cache, args = argv[0], argv[1:]
    job = cacheable(args, os.getcwd())
    if job is None:
        source = _model_source(args)
        header = runtime_pch(cache, args, source) if source is not None else None
        if header is not None:
            return subprocess.call([args[0], "-include", header, *args[1:]])
        return subprocess.call(args)
    source, out = job
    k = key(args, source, out)
    obj = os.path.join(cache, k + ".o")
    dep_out = os.path.splitext(out)[0] + ".d"
    dep = os.path.join(cache, k + ".d")
    if os.path.exists(obj):
        _copy(obj, out)
        if os.path.exists(dep):
            _copy(dep, dep_out)
        return 0
    rc = subprocess.call(args)
    if rc == 0 and os.path.exists(out):
        try:
            os.makedirs(cache, exist_ok=True)
            if os.path.exists(dep_out):
                _copy(dep_out, dep)
            _copy(out, obj)  # the object last: its presence marks a complete entry
        except OSError:
            pass  # a cache that cannot be written only costs time
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The Verilator runtime object cache (cosim/flow/objcache.py): runtime sources compile once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hwcosim.cosim.flow import objcache

LAUNCHER = Path(objcache.__file__)
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")


def test_only_outside_sources_are_cached(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    outside = str(tmp_path / "lib" / "verilated.cpp")
    got = objcache.cacheable(["c++", "-O0", "-c", "-o", "verilated.o", outside], str(build))
    assert got == (outside, "verilated.o")
    assert objcache.cacheable(["c++", "-c", "-o", "Vtop.o", "Vtop.cpp"], str(build)) is None  # the model
    assert objcache.cacheable(["c++", "-c", "-o", "x.o", str(build / "x.cpp")], str(build)) is None
    assert objcache.cacheable(["c++", "a.o", "b.o", "-o", "sim"], str(build)) is None  # a link


def _compile(cache, cwd, src, *flags):
    return subprocess.run([sys.executable, "-S", str(LAUNCHER), str(cache), "c++", *flags, "-MMD", "-c", "-o",
                           "lib.o", str(src)], cwd=cwd, capture_output=True, text=True)


def _layout(tmp_path, source: str):
    """A runtime source outside two build folders: (source path, cache, build a, build b)."""
    (tmp_path / "lib").mkdir()
    src = tmp_path / "lib" / "lib.cpp"
    src.write_text(source)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    return src, tmp_path / "cache", tmp_path / "a", tmp_path / "b"


@needs_cxx
def test_second_build_reuses_the_object_and_a_change_misses(tmp_path):
    src, cache, a, b = _layout(tmp_path, "int answer() { return 42; }\n")
    assert _compile(cache, a, src, "-O0").returncode == 0
    entries = sorted(p.name for p in cache.iterdir())
    assert len(entries) == 2 and entries[0].endswith(".d") and entries[1].endswith(".o")
    assert _compile(cache, b, src, "-O0").returncode == 0
    assert (b / "lib.o").read_bytes() == (a / "lib.o").read_bytes() and (b / "lib.d").exists()
    assert len(list(cache.iterdir())) == 2  # a hit: nothing new
    assert _compile(cache, b, src, "-O1").returncode == 0  # other flags: another entry
    assert len(list(cache.iterdir())) == 4
    src.write_text("int answer() { return 43; }\n")
    assert _compile(cache, b, src, "-O0").returncode == 0  # another source text: another entry
    assert len(list(cache.iterdir())) == 6


@needs_cxx
def test_a_failed_compile_is_not_cached(tmp_path):
    src, cache, work, _ = _layout(tmp_path, "this is not C++\n")
    r = _compile(cache, work, src)
    assert r.returncode != 0 and not (cache.exists() and any(cache.iterdir()))


def test_runner_sets_objcache_unless_the_user_has_one(tmp_path, monkeypatch):
    from hwcosim.cosim.flow import runner

    monkeypatch.setenv("HWCOSIM_BUILD", str(tmp_path))
    monkeypatch.delenv("OBJCACHE", raising=False)
    monkeypatch.delenv("HWCOSIM_OBJCACHE", raising=False)
    flag = runner._objcache_makeflag()
    launcher = Path(flag.split("=", 1)[1])
    assert flag.startswith(" OBJCACHE=") and os.access(launcher, os.X_OK)
    assert str(LAUNCHER) in launcher.read_text()
    monkeypatch.setenv("OBJCACHE", "ccache")
    assert runner._objcache_makeflag() == ""
    monkeypatch.delenv("OBJCACHE")
    monkeypatch.setenv("HWCOSIM_OBJCACHE", "0")
    assert runner._objcache_makeflag() == ""


def test_a_header_from_the_build_folder_is_part_of_the_key(tmp_path):
    # cocotb's verilator.cpp main includes the design's Vtop.h: its object must not be shared by
    # designs whose Vtop differs (a larger Vtop overran the allocation the cached main made)
    (tmp_path / "lib").mkdir()
    src = tmp_path / "lib" / "main.cpp"
    src.write_text('#include <memory>\n#include "Vtop.h"\nint main() { return sizeof(Vtop) > 0; }\n')
    a, b, c = (tmp_path / d for d in "abc")
    for d, ports in ((a, 2), (b, 9), (c, 2)):
        d.mkdir()
        (d / "Vtop.h").write_text("struct Vtop { " + " ".join(f"int p{i};" for i in range(ports)) + " };\n")
    args = ["c++", "-O0", "-c", "-o", "main.o", str(src)]
    ka, kb, kc = (objcache.key(args, str(src), "main.o", str(d)) for d in (a, b, c))
    assert ka != kb and ka == kc
    assert objcache.local_headers(src.read_bytes(), str(a)) == ["Vtop.h"]
    assert objcache.local_headers(src.read_bytes(), str(tmp_path / "lib")) == []


@needs_cxx
def test_designs_with_different_tops_get_their_own_main_object(tmp_path):
    (tmp_path / "lib").mkdir()
    src = tmp_path / "lib" / "main.cpp"
    src.write_text('#include "Vtop.h"\nunsigned long top_size() { return sizeof(Vtop); }\n')
    cache = tmp_path / "cache"
    for d, ports in (("small", 1), ("large", 40)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "Vtop.h").write_text("struct Vtop { " + " ".join(f"long p{i};" for i in range(ports))
                                             + " };\n")
        r = subprocess.run([sys.executable, "-S", str(LAUNCHER), str(cache), "c++", "-O0", "-I.", "-c", "-o", "main.o",
                            str(src)], cwd=tmp_path / d, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "small" / "main.o").read_bytes() != (tmp_path / "large" / "main.o").read_bytes()
    assert len([p for p in cache.iterdir() if p.suffix == ".o"]) == 2


@needs_cxx
def test_model_compiles_use_one_precompiled_runtime_header_per_flag_set(tmp_path, monkeypatch):
    """The design's own model (a source in the build folder) is compiled with the runtime headers
    precompiled once per command line (here a small stand-in header): the object is byte for byte the
    plain compile's, a second build reuses the .gch, other flags get their own."""
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "rt.h").write_text("#pragma once\ninline int twice(int x) { return 2 * x; }\n")
    monkeypatch.setattr(objcache, "_PCH_HEADERS", ("rt.h",))
    cache = tmp_path / "cache"
    objs = []
    for d, flags in (("a", ["-O0"]), ("b", ["-O0"]), ("c", ["-O0", "-DOTHER=1"])):
        build = tmp_path / d
        build.mkdir()
        (build / "Vtop.cpp").write_text('#include "rt.h"\nint model(int x) { return twice(x) + 1; }\n')
        monkeypatch.chdir(build)
        args = ["c++", *flags, f"-I{inc}", "-MMD", "-c", "-o", "Vtop.o", "Vtop.cpp"]
        assert objcache.main([str(cache), *args]) == 0
        plain = subprocess.run([*args[:-3], "-c", "-o", "plain.o", "Vtop.cpp"], capture_output=True)
        assert plain.returncode == 0
        assert (build / "Vtop.o").read_bytes() == (build / "plain.o").read_bytes()
        assert "Vtop.cpp" in (build / "Vtop.d").read_text()   # (GCC leaves the precompiled headers out)
        objs.append(sorted(p.name for p in (cache / "pch").iterdir()))
    assert len(objs[0]) == len(objs[1]) == 1 and len(objs[2]) == 2     # reused, then a second flag set
    for folder in (cache / "pch").iterdir():
        assert (folder / "vl_runtime.h.gch").stat().st_size > 0
    assert not list((cache).glob("*.o"))       # the model's own object is never cached

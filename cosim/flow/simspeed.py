"""Simulator speed: simulated clock cycles per wall-clock second on Verilator and on Icarus.

For every registered design (:mod:`hwcosim.cosim.designs`, default parameters) the same seeded random
workload runs on both simulators through the normal runner (:func:`hwcosim.cosim.flow.runner.run`, so the
builds are the cached ones every test uses). The cocotb tests live in this module and time
themselves inside the simulator, so the numbers exclude the Verilog emission, the build and
the simulator's start-up; the build (compile) time is reported separately, read from the
build folder (the time between the source being written and the build being marked done, so a
cached build still reports what it cost when it was made).

Two workloads, both on the top level's input ports taken from the component's signature:

- **driven**: every cycle the testbench writes new random values to every stream port
  (``valid`` and ``ready`` high with probability 0.8, random payloads) and waits for the
  clock edge. This is what a cocotb testbench experiences: Python runs every cycle.
- **free-running**: after reset all ``valid``/``ready`` inputs are held high and payloads hold
  one random word, the clock toggles inside the simulator (cocotb's GPI clock) and the test
  waits on one timer: the simulator's own speed, with no Python per cycle.

Each workload runs in chunks until it has simulated at least a fixed number of cycles (a few
thousand) *and* at least ``min_seconds`` of wall time have passed (so that fast runs are still
measurable), but stops after ``max_seconds`` even short of the cycle count (a large design on
Icarus can run at tens of cycles per second); the cycle count actually simulated is reported.
Random stimulus is activity, not a correctness check: the checked workloads are in the
design's own testbenches (and in ``hwcosim sweep``).

``bench_simspeed(out_dir, quick)`` is registered in :data:`hwcosim.cosim.flow.bench.BENCHES` as
``sim_speed``; it writes ``sim_speed.json`` and prints a table with the Verilator/Icarus ratio.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import cocotb
from hwcosim.models.errors import UsageError
from hwcosim.models.tables import show

__all__ = ["input_ports", "measure", "run_simspeed", "bench_simspeed", "speed_table"]

PERIOD_NS = 10
_STREAM_SUFFIXES = ("valid", "ready", "payload", "data", "addr", "wstrb")


def input_ports(component) -> list[dict]:
    """Input ports of a ``wiring.Component``'s top level: ``[{"name", "width", "kind"}]``.

    ``kind`` is ``"handshake"`` for ``valid``/``ready`` bits, ``"stream"`` for other stream
    fields (payloads, AXI data and addresses: new random values every driven cycle) and
    ``"config"`` for everything else (held at one random value for the whole run).
    """
    from amaranth.hdl import Shape
    from amaranth.lib.wiring import In

    ports = []
    for path, member, _value in component.signature.flatten(component):
        if member.flow != In:
            continue
        name = "__".join(str(p) for p in path)
        width = Shape.cast(member.shape).width
        tail = name.rsplit("_", 1)[-1]
        if width == 1 and tail in ("valid", "ready", "tvalid", "tready", "awvalid", "wvalid", "bready",
                                   "arvalid", "rready"):
            kind = "handshake"
        elif tail.endswith(_STREAM_SUFFIXES):
            kind = "stream"
        else:
            kind = "config"
        ports.append({"name": name, "width": width, "kind": kind})
    return ports


# ---- cocotb side (runs inside the simulator) ---------------------------------------------------
async def _reset(dut, handles, rng):
    from cocotb.triggers import ClockCycles

    for h, port in handles:
        h.value = rng.getrandbits(port["width"]) if port["kind"] == "config" else 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0


async def _chunks(run_chunk, chunk: int, min_cycles: int, min_seconds: float, max_seconds: float) -> dict:
    """Run chunks of ``chunk`` cycles until ``min_cycles`` and ``min_seconds`` are both reached, or
    ``max_seconds`` have passed (after at least one chunk); time it."""
    from cocotb.utils import get_sim_time

    t_sim0 = get_sim_time("ns")
    t0 = time.perf_counter()
    done = 0
    while True:
        await run_chunk(chunk)
        done += chunk
        elapsed = time.perf_counter() - t0
        if (done >= min_cycles and elapsed >= min_seconds) or elapsed >= max_seconds:
            break
    sim_cycles = round((get_sim_time("ns") - t_sim0) / PERIOD_NS)
    return {"cycles": int(done), "sim_cycles": int(sim_cycles), "seconds": elapsed,
            "cycles_per_s": done / elapsed if elapsed > 0 else 0.0}


def _setup(dut):
    from hwcosim.cosim.tb.common import inputs

    cfg = inputs()
    handles = [(getattr(dut, p["name"]), p) for p in cfg["ports"]]
    return cfg, handles, random.Random(int(cfg.get("seed", 1)))


@cocotb.test()
async def speed_driven(dut):
    """Random stream traffic written by Python every cycle."""
    from cocotb.clock import Clock
    from cocotb.triggers import RisingEdge
    from hwcosim.cosim.tb.common import write_metrics

    cfg, handles, rng = _setup(dut)
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    await _reset(dut, handles, rng)
    moving = [(h, p["width"], p["kind"] == "handshake") for h, p in handles if p["kind"] != "config"]

    async def chunk(n):
        for _ in range(n):
            for h, width, hs in moving:
                h.value = int(rng.random() < 0.8) if hs else rng.getrandbits(width)
            await RisingEdge(dut.clk)

    write_metrics({"driven": await _chunks(chunk, min(250, int(cfg["cycles"])), int(cfg["cycles"]),
                                           float(cfg["min_seconds"]), float(cfg["max_seconds"]))})


@cocotb.test()
async def speed_free_running(dut):
    """Handshakes held high, payloads constant, clock in the simulator, one timer per chunk."""
    from cocotb.clock import Clock
    from cocotb.triggers import Timer
    from hwcosim.cosim.tb.common import write_metrics

    cfg, handles, rng = _setup(dut)
    Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi").start()
    await _reset(dut, handles, rng)
    for h, p in handles:
        if p["kind"] == "handshake":
            h.value = 1
        elif p["kind"] == "stream":
            h.value = rng.getrandbits(p["width"])

    async def chunk(n):
        await Timer(n * PERIOD_NS, unit="ns")

    write_metrics({"free": await _chunks(chunk, min(1000, int(cfg["free_cycles"])), int(cfg["free_cycles"]),
                                         float(cfg["min_seconds"]), float(cfg["max_seconds"]))})


# ---- host side -------------------------------------------------------------------------------
def _build_seconds(build_dir: Path, top: str) -> float | None:
    """Compile time of a (possibly cached) build: source written -> build marked done."""
    src, done = Path(build_dir) / f"{top}.v", Path(build_dir) / ".built"
    if src.exists() and done.exists():
        return round(done.stat().st_mtime - src.stat().st_mtime, 2)
    return None


def measure(design: str, sim: str, *, params=None, cycles: int = 3000, free_cycles: int = 20000,
            min_seconds: float = 1.0, max_seconds: float = 30.0, seed: int = 1, test_dir=None) -> dict:
    """Simulate ``design`` (default parameters unless ``params``) on ``sim``; return its speed.

    Returns ``{"design", "sim", "params", "build_seconds", "rebuilt", "run_seconds", "driven",
    "free"}`` where ``driven``/``free`` hold ``cycles``, ``seconds`` and ``cycles_per_s``.
    """
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.registry import get_design

    d = get_design(design)
    p = params if params is not None else d.default_params()
    if cycles < 1 or free_cycles < 1 or min_seconds < 0 or max_seconds < min_seconds:
        raise UsageError(f"cycles ({cycles}) and free_cycles ({free_cycles}) must be >= 1, "
                         f"0 <= min_seconds ({min_seconds}) <= max_seconds ({max_seconds})")
    component = d.build(p)
    res = runner.run(component, d.top, "hwcosim.cosim.flow.simspeed", sim=sim, test_dir=test_dir, waves=False,
                     inputs={"ports": input_ports(component), "cycles": cycles, "free_cycles": free_cycles,
                             "min_seconds": min_seconds, "max_seconds": max_seconds, "seed": seed})
    mt = res.metrics
    for mode in ("driven", "free"):
        if mode not in mt or mt[mode]["cycles_per_s"] <= 0:
            raise runner.SimFailure(f"{design} on {sim}: no {mode} speed measured (log {res.log})")
    return {"design": design, "sim": res.sim, "params": _jsonable(p),
            "build_seconds": _build_seconds(res.build_dir, d.top), "rebuilt": res.rebuilt,
            "run_seconds": round(res.seconds, 2), "driven": mt["driven"], "free": mt["free"]}


def _jsonable(p) -> dict:
    import dataclasses

    if hasattr(p, "to_dict"):
        return p.to_dict()
    return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in dataclasses.asdict(p).items()}


def run_simspeed(designs: list[str] | None = None, *, cycles: int = 3000, free_cycles: int = 20000,
                 min_seconds: float = 1.0, max_seconds: float = 30.0, sims=("verilator", "icarus"),
                 progress=None, on_row=None) -> list[dict]:
    """Speed of each design on each simulator, and the Verilator/Icarus ratios per workload.

    ``on_row(rows)`` is called after each design (e.g. to write the results so far)."""
    from hwcosim.cosim.registry import designs as registry

    names = list(designs) if designs else list(registry())
    rows = []
    for name in names:
        row: dict = {"design": name}
        for sim in sims:
            if progress:
                progress(f"{name} on {sim}")
            try:
                row[sim] = measure(name, sim, cycles=cycles, free_cycles=free_cycles, min_seconds=min_seconds,
                                   max_seconds=max_seconds)
            except Exception as e:  # noqa: BLE001 -- one design failing must not lose the others' numbers
                row.setdefault("errors", {})[sim] = " ".join(f"{type(e).__name__}: {e}".split())[:500]
        if "verilator" in row and "icarus" in row:
            row["ratio"] = {m: row["verilator"][m]["cycles_per_s"] / row["icarus"][m]["cycles_per_s"]
                            for m in ("driven", "free")}
        rows.append(row)
        if on_row:
            on_row(rows)
    return rows


def speed_table(rows: list[dict]):
    """A rich table of :func:`run_simspeed`'s rows."""
    from rich.table import Table

    t = Table(title="Simulator speed: simulated cycles per wall second (build time separate)")
    for c in ("design", "Verilator driven cyc/s", "Icarus driven cyc/s", "ratio", "Verilator free-run cyc/s",
              "Icarus free-run cyc/s", "ratio ", "Verilator build s", "Icarus build s"):
        t.add_column(c, justify="right")

    def cps(r, sim, mode):
        return f"{r[sim][mode]['cycles_per_s']:,.0f}" if sim in r else ("error" if sim in r.get("errors", {}) else "-")

    def bs(r, sim):
        v = r.get(sim, {}).get("build_seconds")
        return "-" if v is None else f"{v:.1f}"

    for r in rows:
        ratio = r.get("ratio", {})
        t.add_row(r["design"], cps(r, "verilator", "driven"), cps(r, "icarus", "driven"),
                  f"{ratio['driven']:.1f}x" if ratio else "-", cps(r, "verilator", "free"),
                  cps(r, "icarus", "free"), f"{ratio['free']:.1f}x" if ratio else "-",
                  bs(r, "verilator"), bs(r, "icarus"))
    return t


def bench_simspeed(out_dir, quick: bool = False) -> dict:
    """``make bench`` entry: every registered design on Verilator and Icarus -> ``sim_speed.json``."""
    from hwcosim.models.atomic import write_text
    from rich.console import Console

    out_dir = Path(out_dir)
    con = Console()
    kw = {"cycles": 1000, "free_cycles": 5000, "min_seconds": 0.3, "max_seconds": 10.0} if quick else \
         {"cycles": 3000, "free_cycles": 20000, "min_seconds": 1.0, "max_seconds": 30.0}
    t0 = time.monotonic()

    def report(rows, complete=False):
        out = {"workload": "seeded random stimulus on every top-level input (see cosim/flow/simspeed.py); "
                           "driven: Python writes the stream ports every cycle; free: clock in the simulator, "
                           "inputs held", "clock_period_ns": PERIOD_NS, **kw,
               "note": "cycles/s measured inside the simulator (excludes Verilog emission, build and start-up); "
                       "build_seconds is the compile time of the (possibly cached) build",
               "complete": complete, "seconds": round(time.monotonic() - t0, 1), "results": rows}
        write_text(out_dir / "sim_speed.json", json.dumps(out, indent=2) + "\n")
        return out

    rows = run_simspeed(progress=lambda s: con.print(f"[dim]sim speed: {s}[/dim]"), on_row=report, **kw)
    out = report(rows, complete=True)
    show(speed_table(rows), con)
    for r in rows:
        for sim, err in r.get("errors", {}).items():
            con.print(f"[red]{r['design']} on {sim}:[/red] {err[:300]}")
    return out

"""Common layer of the RTL-in-the-loop bridges: one scenario, two interchangeable devices.

A *bridge* couples a discrete-event system model (a cluster network, a serving front end, a
parameter-server job) to one accelerator, which is either the **RTL** (simulated by Verilator or
Icarus under cocotb) or its **model** (golden model for the data, cycle model for the time).
The same scenario code runs against both, and the results are compared.

Time base
---------
The scenario keeps time in seconds (``float``); the device keeps time in clock cycles (``int``)
of a stated clock ``f_clk`` (:class:`ClockMap`). A request handed to the device at scenario time
``t`` starts at cycle ``ceil(t * f_clk)``; a completion at cycle ``c`` is reported at time
``c / f_clk``. Both devices quantise time the same way, so a difference between the two runs is
a difference in cycles, never a rounding artefact of the bridge.

Device interface (:class:`Device`)
----------------------------------
- ``submit(t, request)``: hand a request to the device at scenario time ``t`` (the current
  time; requests are accepted in submission order);
- ``await advance(t_limit)``: let the device run until its first completion at or before
  ``t_limit`` (returned as a list of :class:`Completion` with equal times; the device's clock
  stops there) or until ``t_limit`` (returns ``[]``);
- ``idle``: no request pending or in flight.

``advance`` is a coroutine in both devices. Under cocotb the RTL device awaits clock edges and
timers: **the cocotb testbench is the master of time** and the scenario runs inside the
testbench process, in lock step with the simulated clock. The model device never suspends; the
same coroutine is then driven to completion by :func:`run_sync` in the ordinary Python process.

Running a bridge
----------------
:func:`co_simulate` is the event loop that alternates between the scenario and the device.
:func:`compare` runs a scenario with the model (in process) and with the RTL (through
:func:`hwcosim.cosim.flow.runner.run` and a ``hwcosim.cosim.tb.bridge_*`` testbench), measures both wall times,
and returns the comparison record that :func:`write_report` writes as JSON and prints as a table.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.cosim.flow.runs import numpy_json_default
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import show

__all__ = ["ClockMap", "Completion", "Device", "Scenario", "ModelDevice", "co_simulate", "run_sync", "measured_note",
           "compare", "write_report", "print_table", "BridgeMismatch", "DeadlockError"]


class BridgeMismatch(SimFailure):
    """The RTL moved data that differs from the golden model's (``hwcosim`` exits with status 1)."""


class DeadlockError(CheckFailed):
    """The scenario waits for the device, and the device has nothing to do."""


@dataclass(frozen=True)
class ClockMap:
    """Seconds <-> cycles at ``f_clk_hz`` (cycle 0 is the first edge after reset)."""

    f_clk_hz: float

    def __post_init__(self):
        if not (isinstance(self.f_clk_hz, (int, float)) and self.f_clk_hz > 0 and math.isfinite(self.f_clk_hz)):
            raise UsageError(f"clock frequency must be a positive number of Hz, not {self.f_clk_hz!r}")

    @property
    def period_s(self) -> float:
        return 1.0 / self.f_clk_hz

    def cycle(self, t: float) -> int:
        """First cycle at or after time ``t`` (a request at ``t`` starts there)."""
        if math.isinf(t):
            return 1 << 62
        return max(0, math.ceil(t * self.f_clk_hz - 1e-6))

    def floor_cycle(self, t: float) -> int:
        if math.isinf(t):
            return 1 << 62
        return max(0, math.floor(t * self.f_clk_hz + 1e-6))

    def seconds(self, c: int) -> float:
        return c / self.f_clk_hz


@dataclass
class Completion:
    """A finished request: its id, the cycle and time it completed, and what the device returned."""

    rid: int
    cycle: int
    t: float
    result: Any = None
    start_cycle: int = 0


class Device(Protocol):
    clock: ClockMap
    name: str

    def submit(self, t: float, rid: int, request: Any) -> None: ...

    async def advance(self, t_limit: float) -> list[Completion]: ...

    @property
    def idle(self) -> bool: ...


class Scenario(Protocol):
    """What :func:`co_simulate` needs from a system model."""

    now: float

    def done(self) -> bool: ...

    def next_time(self) -> float: ...

    def step(self, t: float, dev: Device) -> None: ...

    def on_complete(self, c: Completion, dev: Device) -> None: ...


class ModelDevice:
    """A serial server timed by a cycle model: subclass and define :meth:`serve`.

    ``serve(request, start_cycle) -> (cycles, result)`` computes the result with the golden
    model and the service time with the cycle model. Requests start in submission order when
    both the request has arrived and the previous one has finished.
    """

    name = "model"

    def __init__(self, clock: ClockMap):
        self.clock = clock
        self.free_cycle = 0
        self.queue: list[tuple[int, int, Any]] = []  # (arrival cycle, rid, request)
        self._done: list[Completion] = []
        self.busy_cycles = 0

    def serve(self, request, start_cycle: int) -> tuple[int, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def submit(self, t: float, rid: int, request) -> None:
        self.queue.append((self.clock.cycle(t), rid, request))

    @property
    def idle(self) -> bool:
        return not self.queue and not self._done

    async def advance(self, t_limit: float) -> list[Completion]:
        lim = self.clock.floor_cycle(t_limit)
        while self.queue and not self._done:
            arr, rid, req = self.queue[0]
            start = max(arr, self.free_cycle)
            cycles, result = self.serve(req, start)
            self.queue.pop(0)
            self.free_cycle = start + cycles
            self.busy_cycles += cycles
            self._done.append(Completion(rid, self.free_cycle, self.clock.seconds(self.free_cycle), result, start))
        if self._done and self._done[0].cycle <= lim:
            c0 = self._done[0].cycle
            out = [c for c in self._done if c.cycle == c0]
            self._done = [c for c in self._done if c.cycle != c0]
            return out
        return []


async def co_simulate(scn, dev, *, max_steps: int = 50_000_000) -> None:
    """Alternate between the scenario and the device until the scenario is done.

    Each round asks the scenario for its next event time ``t``, lets the device run up to ``t``;
    a completion before ``t`` is handed to the scenario first (at the device's time), otherwise
    the scenario processes its events at ``t``.
    """
    for _ in range(max_steps):
        if scn.done():
            return
        t = scn.next_time()
        if math.isinf(t) and dev.idle:
            raise DeadlockError("the scenario waits for the device, and the device has no work")
        comps = await dev.advance(t)
        if comps:
            for c in comps:
                scn.on_complete(c, dev)
        else:
            scn.step(t, dev)
    raise CheckFailed(f"co-simulation did not finish within {max_steps} steps")


def run_sync(coro):
    """Drive a coroutine that never suspends (a model device) to its result."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("a model-only co-simulation awaited something: use the RTL device under cocotb")


# ---- comparison and report ---------------------------------------------------------------------
@dataclass
class Comparison:
    bridge: str
    scenario: dict
    model: dict
    rtl: dict | None = None
    checks: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)  # (metric, model, rtl) for the table
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        wm = self.model.get("wall_s")
        wr = (self.rtl or {}).get("wall_s")
        return {"bridge": self.bridge, "scenario": self.scenario, "model": self.model, "rtl": self.rtl,
                "checks": self.checks,
                "slowdown": (wr / wm) if (wr and wm) else None,
                "slowdown_total": ((self.rtl or {}).get("wall_total_s", 0) / wm) if (wr and wm) else None,
                "table": [list(r) for r in self.rows], "notes": self.notes}


def compare(bridge: str, scenario: dict, model_fn, rtl_fn=None, rows_fn=None, notes=None) -> Comparison:
    """Run ``model_fn()`` (in process) and ``rtl_fn()`` (None: model only) and compare.

    Each returns a result dict with ``wall_s`` (the co-simulation loop's wall time); ``rtl_fn``
    also ``wall_total_s`` (with simulator start-up and build) and ``checks``. ``rows_fn(model,
    rtl)`` gives the table rows ``(metric, model value, rtl value)``.
    """
    m = model_fn()
    r = rtl_fn() if rtl_fn is not None else None
    cmp = Comparison(bridge, scenario, m, r, checks=(r or {}).pop("checks", {}) if r else {},
                     notes=list(notes or []))
    if rows_fn is not None:
        cmp.rows = rows_fn(m, r)
        if r is not None:
            cmp.notes.append(measured_note(cmp.rows))
    return cmp


def measured_note(rows) -> str:
    """A note computed from this run's table rows ``(metric, model, rtl)``: which numeric metrics
    agree exactly and how far the others differ (RTL / model - 1), so the explanation printed with
    a comparison always carries the figures it refers to."""
    same, diff = [], []
    for name, mv, rv in rows:
        if not (isinstance(mv, (int, float)) and isinstance(rv, (int, float))) or isinstance(mv, bool):
            if mv == rv and mv is not None:
                same.append(name)
            continue
        if mv == rv:
            same.append(name)
        elif mv:
            diff.append(f"{name} {rv / mv - 1:+.2%} ({_fmt(mv)} -> {_fmt(rv)})")
        else:
            diff.append(f"{name} {_fmt(mv)} -> {_fmt(rv)}")
    if not diff:
        return f"Measured in this run: model and RTL agree exactly on all {len(same)} compared metrics."
    return (f"Measured in this run (RTL vs model): {'; '.join(diff)}"
            + (f"; identical: {', '.join(same)}." if same else "."))


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0:
            return "0"
        a = abs(v)
        return f"{v:.4g}" if 1e-3 <= a < 1e6 else f"{v:.3e}"
    return str(v)


def print_table(cmp: Comparison, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    d = cmp.to_dict()
    t = Table(title=f"bridge {cmp.bridge}: RTL in the loop vs model only")
    for c in ("metric", "model only", "RTL in the loop"):
        t.add_column(c, justify="right")
    for name, mv, rv in cmp.rows:
        t.add_row(name, _fmt(mv), _fmt(rv))
    t.add_row("wall time of the co-simulation (s)", _fmt(cmp.model.get("wall_s")),
              _fmt((cmp.rtl or {}).get("wall_s")))
    if d["slowdown"]:
        t.add_row("slowdown (RTL loop / model loop)", "1", f"{d['slowdown']:.1f}x")
        t.add_row("slowdown incl. simulator start", "1", f"{d['slowdown_total']:.1f}x")
    show(t, console)
    for k, v in cmp.checks.items():
        (console or Console()).print(f"  check {k}: {v}")


def write_report(cmp: Comparison, out_dir: Path) -> Path:
    from hwcosim.models.atomic import write_text

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bridge_{cmp.bridge}.json"
    write_text(path, json.dumps(cmp.to_dict(), indent=1, default=numpy_json_default) + "\n")
    return path




class Stopwatch:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.s = time.perf_counter() - self.t0

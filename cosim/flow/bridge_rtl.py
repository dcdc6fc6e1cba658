"""cocotb side of the bridges: a cycle clock read from simulation time, and jumps over idle time.

Imported only inside a cocotb testbench process (``hwcosim.cosim.tb.bridge_*``). :class:`SimClock`
counts cycles from the first rising edge after reset by reading the simulator's time, so no
coroutine has to run on every edge: :meth:`SimClock.goto` jumps over idle cycles with one
``Timer`` (the clock itself is cocotb's GPI clock, toggled without Python). It has the
``clk``/``now`` attributes of :class:`hwcosim.cosim.tb.common.CycleCounter`, so the shared stream drivers
and sinks accept it.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import NullTrigger, RisingEdge, Timer
from cocotb.utils import get_sim_time
from hwcosim.cosim.tb.common import start_clock_and_reset

__all__ = ["SimClock", "reset_with_clock", "RTLSerialDevice"]


class SimClock:
    """Cycle numbers of ``dut.clk``: ``now`` is the index of the last rising edge (0 = first after reset)."""

    def __init__(self, clk, period_ns: int):
        self.clk = clk
        self.period_ps = int(period_ns) * 1000
        self.t0_ps = int(get_sim_time(unit="ps"))

    @property
    def now(self) -> int:
        return (int(get_sim_time(unit="ps")) - self.t0_ps) // self.period_ps

    async def goto(self, cycle: int) -> None:
        """Return just after rising edge ``cycle`` (at once if it has passed)."""
        n = cycle - self.now
        if n <= 0:
            return
        if n > 1:
            # land in the middle of cycle ``cycle - 1`` (no edge there), then take the next edge
            await Timer((n - 1) * self.period_ps + self.period_ps // 2 - (int(get_sim_time(unit="ps")) - self.t0_ps)
                        % self.period_ps, unit="ps")
        await RisingEdge(self.clk)


async def reset_with_clock(dut, period_ns: int) -> SimClock:
    """Start the clock, reset, and return a :class:`SimClock` whose cycle 0 is the edge after reset."""
    await start_clock_and_reset(dut, period_ns=period_ns)
    return SimClock(dut.clk, period_ns)


class RTLSerialDevice:
    """Base of an RTL device that serves one request at a time (the bridge's device interface).

    A subclass defines ``async run(request, start_cycle) -> (end_cycle, result)``, which drives
    the DUT from ``start_cycle`` (the current cycle when it is called) and returns the cycle of
    completion; it may return early with an ``end_cycle`` in the future (a cached service time):
    the device then jumps the clock there. :meth:`advance` keeps the request in flight across
    calls, so a completion is never reported later than the scenario's next event: when
    ``t_limit`` comes first, the clock stops there and the request stays in flight.
    """

    name = "rtl"

    def __init__(self, clk: SimClock, clock):
        self.clk, self.clock = clk, clock
        self.queue: list = []
        self._cur = None       # (rid, start) of the request in flight
        self._fin = None       # (end_cycle, result) once run() returned
        self.busy_cycles = 0

    def submit(self, t, rid, request) -> None:
        self.queue.append((self.clock.cycle(t), rid, request))

    @property
    def idle(self) -> bool:
        return not self.queue and self._cur is None

    async def run(self, request, start: int):  # pragma: no cover - abstract
        raise NotImplementedError

    async def _wrap(self, request, start):
        self._fin = await self.run(request, start)

    async def advance(self, t_limit: float):
        from hwcosim.cosim.flow.bridge import Completion

        lim = self.clock.floor_cycle(t_limit)
        big = 1 << 61
        while True:
            if self._cur is None and self.queue:
                arr = self.queue[0][0]
                if max(arr, self.clk.now) > lim:
                    break
                await self.clk.goto(arr)
                _, rid, req = self.queue.pop(0)
                self._cur, self._fin = (rid, self.clk.now), None
                cocotb.start_soon(self._wrap(req, self.clk.now))
                await NullTrigger()  # let run() start in this cycle
            if self._cur is None:
                break
            if self._fin is not None:
                end, result = self._fin
                if end <= self.clk.now:
                    rid, start = self._cur
                    self._cur = self._fin = None
                    self.busy_cycles += end - start
                    return [Completion(rid, end, self.clock.seconds(end), result, start)]
                if end > lim:
                    if self.clk.now < lim < big:
                        await self.clk.goto(lim)
                    return []
                await self.clk.goto(end)
                continue
            if self.clk.now >= lim:
                return []
            await RisingEdge(self.clk.clk)
            # run() may finish on this very edge: let it record its result before the loop looks, or the
            # clock would run one more cycle and a queued request would start a cycle late
            await NullTrigger()
        if self.clk.now < lim < big:
            await self.clk.goto(lim)
        return []

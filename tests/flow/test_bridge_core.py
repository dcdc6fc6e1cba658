"""The bridges' common layer: clock mapping, the model-device event loop, and failures it must report."""

import math

import pytest
from hwcosim.cosim.flow.bridge import ClockMap, Completion, DeadlockError, ModelDevice, co_simulate, run_sync


def test_clock_map_round_trip():
    c = ClockMap(250e6)
    assert c.period_s == pytest.approx(4e-9)
    assert c.cycle(0.0) == 0
    assert c.cycle(4e-9) == 1          # an event on an edge starts there
    assert c.cycle(4.1e-9) == 2        # between edges: the next one
    assert c.floor_cycle(7.9e-9) == 1
    assert c.seconds(c.cycle(1e-6)) == pytest.approx(1e-6)
    assert c.cycle(math.inf) > 1 << 60


@pytest.mark.parametrize("f", [0, -1, float("nan"), "200"])
def test_wrong_clock_is_refused(f):
    with pytest.raises(ValueError, match="clock frequency"):
        ClockMap(f)


class _Fixed(ModelDevice):
    def serve(self, request, start_cycle):
        return request, start_cycle


class _Serial:
    """Three requests at t=0, 1 ns, 100 ns; records completions."""

    def __init__(self):
        self.now = 0.0
        self.arr = [(0.0, 10), (1e-9, 10), (100e-9, 5)]
        self.got: list[Completion] = []

    def done(self):
        return len(self.got) == 3

    def next_time(self):
        return self.arr[0][0] if self.arr else math.inf

    def step(self, t, dev):
        self.now = t
        while self.arr and self.arr[0][0] <= t:
            _, cyc = self.arr.pop(0)
            dev.submit(t, len(self.got) + len(self.arr), cyc)

    def on_complete(self, c, dev):
        assert c.t >= self.now
        self.now = c.t
        self.got.append(c)


def test_model_device_serves_in_order_and_queues():
    scn, dev = _Serial(), _Fixed(ClockMap(1e9))
    run_sync(co_simulate(scn, dev))
    # 1 GHz: first 0..10, second waits for it: 10..20, third arrives at 100: 100..105
    assert [(c.start_cycle, c.cycle) for c in scn.got] == [(0, 10), (10, 20), (100, 105)]
    assert dev.busy_cycles == 25


def test_deadlock_is_reported():
    class Waits(_Serial):
        def next_time(self):
            return math.inf

    with pytest.raises(DeadlockError):
        run_sync(co_simulate(Waits(), _Fixed(ClockMap(1e9))))


def test_run_sync_refuses_a_coroutine_that_suspends():
    import asyncio

    async def suspends():
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="awaited"):
        run_sync(suspends())

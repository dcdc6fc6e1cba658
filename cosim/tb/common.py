"""Testbench helpers shared by the cocotb modules: inputs, clock/reset, stream drivers with
random idle gaps, stream sinks with random ready stalls, and the metrics file.

A driver and a sink follow the stream rules of :mod:`amaranth.lib.stream`: a beat transfers on
a rising edge where ``valid`` and ``ready`` are both high; the driver holds ``valid`` and the
payload until then.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

__all__ = ["tb_dir", "inputs", "arrays", "write_metrics", "write_outputs", "pauses", "to_bytes",
           "start_clock_and_reset", "StreamDriver", "StreamSink", "CycleCounter"]


def tb_dir() -> Path:
    return Path(os.environ.get("HWCOSIM_TB_DIR", "."))


def inputs() -> dict:
    return json.loads((tb_dir() / "inputs.json").read_text())


def arrays() -> dict[str, np.ndarray]:
    with np.load(tb_dir() / "arrays.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def write_metrics(metrics: dict) -> None:
    path = tb_dir() / "metrics.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    old.update(metrics)
    path.write_text(json.dumps(old, indent=1))


def write_outputs(**arrays: np.ndarray) -> None:
    """Save the RTL's own output words (``outputs.npz`` in the run folder) beside the golden ones in
    ``arrays.npz``, so that ``hwcosim check RUN_DIR`` can re-verify the run without simulating."""
    path = tb_dir() / "outputs.npz"
    tmp = path.with_name(".outputs.tmp.npz")
    np.savez(tmp, **{k: np.asarray(v) for k, v in arrays.items()})
    os.replace(tmp, path)


def pauses(p: float, seed: int):
    """A cocotbext-axi pause generator: pause each cycle with probability ``p`` (idle on a source,
    back-pressure on a sink), seeded."""
    rng = random.Random(seed)
    while True:
        yield int(p > 0 and rng.random() < p)


def to_bytes(words, nbytes: int) -> bytes:
    """Words as little-endian ``nbytes``-byte lanes (AXI4-Stream ``tdata`` byte order)."""
    return b"".join(int(w).to_bytes(nbytes, "little") for w in words)


async def start_clock_and_reset(dut, cycles: int = 3, period_ns: int = 10):
    Clock(dut.clk, period_ns, unit="ns").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


class CycleCounter:
    """Counts rising edges since start (a cycle time base for the testbench)."""

    def __init__(self, clk):
        self.clk = clk
        self.now = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            self.now += 1


class StreamDriver:
    """Drives ``<prefix>__valid`` / ``__payload``; before each beat idles with prob. ``p_idle``.

    ``transfers`` records the cycle (of ``counter``) in which each beat was taken.
    """

    def __init__(self, dut, prefix: str, counter: CycleCounter, p_idle: float = 0.0, seed: int = 1):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.counter, self.clk = counter, counter.clk
        self.p_idle, self.rng = p_idle, random.Random(seed)
        self.valid.value = 0
        self.transfers: list[int] = []

    async def send(self, words):
        for word in words:
            while self.p_idle and self.rng.random() < self.p_idle:
                self.valid.value = 0
                await RisingEdge(self.clk)
            self.valid.value = 1
            self.payload.value = int(word)
            while True:
                await ReadOnly()
                taken = bool(self.ready.value)
                now = self.counter.now
                await RisingEdge(self.clk)
                if taken:
                    self.transfers.append(now)
                    break
        self.valid.value = 0


class StreamSink:
    """Takes beats from ``<prefix>__valid/__payload``, refusing with probability ``p_stall``.

    Checks the stream rule that a refused beat stays valid with the same payload.
    """

    def __init__(self, dut, prefix: str, counter: CycleCounter, p_stall: float = 0.0, seed: int = 2):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.counter, self.clk = counter, counter.clk
        self.p_stall, self.rng = p_stall, random.Random(seed)
        self.words: list[int] = []
        self.cycles: list[int] = []
        self.protocol_errors: list[str] = []
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        held = None
        while True:
            ready = not (self.p_stall and self.rng.random() < self.p_stall)
            self.ready.value = int(ready)
            await ReadOnly()
            valid = bool(self.valid.value)
            if held is not None:
                if not valid:
                    self.protocol_errors.append(f"cycle {self.counter.now}: valid dropped before ready")
                elif int(self.payload.value) != held:
                    self.protocol_errors.append(f"cycle {self.counter.now}: payload changed while stalled")
            held = None
            if valid:
                word = int(self.payload.value)
                if ready:
                    self.words.append(word)
                    self.cycles.append(self.counter.now)
                else:
                    held = word
            await RisingEdge(self.clk)

    async def wait_for(self, n: int, timeout_cycles: int):
        start = self.counter.now
        while len(self.words) < n:
            if self.counter.now - start > timeout_cycles:
                raise AssertionError(f"timeout: {len(self.words)} of {n} output beats after {timeout_cycles} cycles")
            await RisingEdge(self.clk)

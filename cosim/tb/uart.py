"""A bit-level UART model for cocotb (8N1), and the host-link transport built on it.

:class:`UartModel` drives the DUT's receive pin and samples its transmit pin, one bit time per bit
(``divisor`` clock periods, optionally off by ``rate_error`` on the host's side, as a real
USB-serial adapter's clock would be). :class:`CocotbUartTransport` gives
:class:`hwcosim.cosim.flow.board.HostLink` the same interface as a serial port, so a board session runs
unchanged against the RTL: host bytes -> UART bits -> bridge -> design -> bridge -> UART bits ->
host bytes.
"""

from __future__ import annotations

from collections import deque

import cocotb
from cocotb.triggers import Event, FallingEdge, SimTimeoutError, Timer, with_timeout
from cocotb.utils import get_sim_time

__all__ = ["UartModel", "CocotbUartTransport"]


class UartModel:
    """Host end of a UART on the DUT pins ``rx`` (driven) and ``tx`` (sampled).

    Parameters
    ----------
    rx, tx : cocotb handles
    bit_ps : int
        The DUT's bit time in picoseconds (divisor x clock period).
    rate_error : float
        Relative error of the host's bit time when sending (+0.03: 3 % slow).
    """

    def __init__(self, rx, tx, bit_ps: int, rate_error: float = 0.0):
        self.rx, self.tx, self.bit_ps = rx, tx, int(bit_ps)
        self.send_ps = int(round(bit_ps * (1.0 + rate_error)))
        self.received: deque[int] = deque()
        self.frame_errors = 0
        self.got = Event()
        self.rx.value = 1
        cocotb.start_soon(self._receive())

    async def send(self, data: bytes) -> None:
        for b in data:
            for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]:
                self.rx.value = bit
                await Timer(self.send_ps, unit="ps")

    async def _receive(self) -> None:
        while True:
            await FallingEdge(self.tx)
            await Timer(self.bit_ps // 2, unit="ps")
            if int(self.tx.value) != 0:
                continue  # a glitch
            byte = 0
            for i in range(8):
                await Timer(self.bit_ps, unit="ps")
                byte |= int(self.tx.value) << i
            await Timer(self.bit_ps, unit="ps")
            if int(self.tx.value) != 1:
                self.frame_errors += 1
                continue
            self.received.append(byte)
            self.got.set()


class CocotbUartTransport:
    """:class:`hwcosim.cosim.flow.board.Transport` over a :class:`UartModel` (timeouts in simulated time)."""

    def __init__(self, uart: UartModel):
        self.uart = uart
        self.baud = 1e12 / uart.bit_ps

    async def write(self, data: bytes) -> None:
        await self.uart.send(data)

    async def read(self, n: int, timeout_s: float) -> bytes:
        out = bytearray()
        deadline = get_sim_time("ps") + int(timeout_s * 1e12)
        while True:
            while self.uart.received and len(out) < n:
                out.append(self.uart.received.popleft())
            left = deadline - get_sim_time("ps")
            if len(out) == n or left <= 0:
                return bytes(out)
            self.uart.got.clear()
            try:
                await with_timeout(self.uart.got.wait(), min(left, 20 * self.uart.bit_ps), "ps")
            except SimTimeoutError:
                pass


async def board_link(dut, cfg: dict, default_timeout: int, period_ns: int = 10):
    """Clock and reset a board top's core, a :class:`UartModel` on its ``rx``/``tx`` pins (at the
    ``divisor`` and host ``rate_error`` of ``cfg``) and a :class:`hwcosim.cosim.flow.board.HostLink` over it,
    whose slack covers the bridge's watchdog (``cfg["timeout"]`` cycles) twice. Returns
    ``(uart, link)``."""
    from hwcosim.cosim.flow.board import HostLink
    from hwcosim.cosim.tb.common import start_clock_and_reset

    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * period_ns * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=period_ns)
    link = HostLink(CocotbUartTransport(uart),
                    slack_s=2 * cfg.get("timeout", default_timeout) * period_ns * 1e-9)
    return uart, link


def finish_board_session(summary: dict, res: dict, uart: UartModel, outputs: dict | None = None, **extra) -> None:
    """The end of a board-session testbench: ``metrics.json`` (the comparison ``summary`` without its
    golden words, the bytes and commands on the link, the UART frame errors, ``extra``), the RTL's and
    golden words in ``outputs.npz`` (``outputs``, when given), then the test fails on a bad stop bit
    or any problem the comparison found."""
    from hwcosim.cosim.tb.common import write_metrics, write_outputs

    metrics = {k: v for k, v in summary.items() if k not in ("golden", "ordered")}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors, **extra)
    write_metrics(metrics)
    if outputs:
        write_outputs(**outputs)
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])

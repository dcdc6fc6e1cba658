"""Host side of a board's UART link: transports and the protocol client (``hwcosim board run``).

The protocol is :mod:`hwcosim.models.hostlink`; the board side is :class:`hwcosim.hdl.common.host_bridge.HostBridge`.
A design's board session (e.g. :func:`hwcosim.cosim.designs.bbs.board.session`) is written once against
:class:`HostLink` and runs unchanged on two transports:

- :class:`SerialTransport`: a real board on a serial port (pyserial);
- :class:`hwcosim.cosim.tb.uart.CocotbUartTransport`: the RTL in a cocotb simulation, every byte sent
  and received bit by bit through a UART model on the top's ``rx``/``tx`` pins.

The client's methods are coroutines so that the cocotb transport can advance simulated time while
it waits; the serial transport blocks inside them, and :func:`run_sync` drives a session to
completion outside cocotb.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from typing import Protocol

from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.hostlink import (
    OP,
    decode_response,
    encode_command,
    encode_payload,
    response_length,
    status_text,
)

__all__ = ["Transport", "SerialTransport", "HostLink", "EngineLink", "StreamLink", "beats_to_words", "words_to_beats",
           "run_sync", "MAX_FRAME_WORDS"]

#: stream words per frame (longer transfers are split)
MAX_FRAME_WORDS = 1024


class Transport(Protocol):
    """Bytes to and from the board."""

    #: bits per second on the line (for timeouts)
    baud: float

    async def write(self, data: bytes) -> None: ...

    async def read(self, n: int, timeout_s: float) -> bytes:
        """Up to ``n`` bytes; fewer when ``timeout_s`` passes first."""
        ...


class SerialTransport:
    """A serial port (pyserial), 8N1 at ``baud``."""

    def __init__(self, port: str, baud: int = 115200):
        import os

        import serial

        if not os.path.exists(port) and "://" not in port:
            raise UsageError(f"--port {port}: no such serial device; plug the board in and give its port "
                             f"(e.g. /dev/ttyUSB0), or run against the RTL with --sim")
        try:
            self.ser = serial.serial_for_url(port, baudrate=baud, bytesize=8, parity="N", stopbits=1, timeout=0.1)
        except (serial.SerialException, OSError, ValueError) as e:
            raise UsageError(f"--port {port}: cannot open it ({str(e).splitlines()[0] if str(e) else e!r}); "
                             f"check the device and its permissions (group dialout)") from None
        self.baud = baud
        self.ser.reset_input_buffer()

    async def write(self, data: bytes) -> None:
        self.ser.write(data)
        self.ser.flush()

    async def read(self, n: int, timeout_s: float) -> bytes:
        import time

        out = bytearray()
        end = time.monotonic() + timeout_s
        while len(out) < n and time.monotonic() < end:
            out += self.ser.read(n - len(out))
        return bytes(out)

    def close(self) -> None:
        self.ser.close()


def beats_to_words(beats: Iterable[int], bits: int) -> list[int]:
    """Beats of ``bits`` bits -> 32-bit words, least significant first, each beat padded to words."""
    nw = -(-bits // 32)
    return [(int(b) >> (32 * i)) & 0xFFFFFFFF for b in beats for i in range(nw)]


def words_to_beats(words: list[int], bits: int) -> list[int]:
    """The inverse of :func:`beats_to_words` (padding bits dropped)."""
    nw = -(-bits // 32)
    if len(words) % nw:
        raise CheckFailed(f"{len(words)} words do not make whole {bits}-bit beats of {nw} words")
    mask = (1 << bits) - 1
    return [sum(int(words[j + i]) << (32 * i) for i in range(nw)) & mask for j in range(0, len(words), nw)]


class HostLink:
    """The protocol client: register and stream access over a :class:`Transport`.

    Every command waits for its response; a response that is missing, malformed, has a bad CRC or
    reports an error status raises :class:`hwcosim.models.errors.CheckFailed` naming the command.

    Parameters
    ----------
    transport : Transport
    slack_s : float
        Time allowed beyond the line time of a response (covers the bridge's watchdog).
    """

    def __init__(self, transport: Transport, slack_s: float = 1.5):
        self.t, self.slack_s = transport, slack_s
        self.bytes_sent = self.bytes_received = self.commands = 0

    def _timeout(self, nbytes: int) -> float:
        return 2.0 * nbytes * 10 / self.t.baud + self.slack_s

    async def _command(self, op: int, arg: int, val: int, payload: bytes = b"", what: str = ""):
        frame = encode_command(op, arg, val) + payload
        await self.t.write(frame)
        self.bytes_sent += len(frame)
        self.commands += 1
        n = response_length(op, val)
        data = await self.t.read(n, self._timeout(n + len(frame)))
        self.bytes_received += len(data)
        name = what or next(k for k, v in OP.items() if v == op)
        if not data:
            raise CheckFailed(f"{name}: no answer from the board within {self._timeout(n + len(frame)):.2g} s "
                              f"(is the bitstream loaded, the port and the baud rate right?)")
        try:
            r = decode_response(data, op, val if op == OP["READ_STREAM"] else 0)
        except ValueError as e:
            raise CheckFailed(f"{name}: {e}") from None
        if r.status:
            raise CheckFailed(f"{name}: the board answered {status_text(r.status)} (status {r.status:#04x})")
        return r

    async def ping(self, value: int | None = None) -> int:
        value = random.getrandbits(32) if value is None else value
        r = await self._command(OP["PING"], 0, value, what="PING")
        if r.value != value:
            raise CheckFailed(f"PING: the board echoed {r.value:#010x}, sent {value:#010x}")
        return r.value

    async def write_reg(self, addr: int, value: int) -> None:
        await self._command(OP["WRITE_REG"], addr, value, what=f"WRITE_REG {addr:#04x}")

    async def read_reg(self, addr: int) -> int:
        return (await self._command(OP["READ_REG"], addr, 0, what=f"READ_REG {addr:#04x}")).value

    async def write_stream(self, channel: int, words: list[int]) -> None:
        for i in range(0, len(words), MAX_FRAME_WORDS):
            chunk = words[i:i + MAX_FRAME_WORDS]
            r = await self._command(OP["WRITE_STREAM"], channel, len(chunk), encode_payload(chunk),
                                    what=f"WRITE_STREAM {channel}")
            if r.value != len(chunk):
                raise CheckFailed(f"WRITE_STREAM {channel}: the design took {r.value} of {len(chunk)} words")

    async def read_stream(self, channel: int, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            k = min(MAX_FRAME_WORDS, n - len(out))
            r = await self._command(OP["READ_STREAM"], channel, k, what=f"READ_STREAM {channel}")
            out += r.data
        return out


class EngineLink:
    """One engine of a compiled model's combined board top (:mod:`hwcosim.hdl.compiled.board`) seen as if it
    were alone behind the bridge: its register addresses and stream channels mapped to the shared
    bridge's (engine ``engine``: register ``A`` at ``engine << 8 | A``, output channel ``c`` at ``2 engine
    + c``, input channel ``c`` at ``engine + c``), so an engine's board session runs on it unchanged.
    Byte and command counts are the shared link's."""

    def __init__(self, link: HostLink, engine: int):
        self.link, self.engine = link, engine

    @property
    def bytes_sent(self) -> int:
        return self.link.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.link.bytes_received

    @property
    def commands(self) -> int:
        return self.link.commands

    async def ping(self, value: int | None = None) -> int:
        return await self.link.ping(value)

    async def write_reg(self, addr: int, value: int) -> None:
        from hwcosim.hdl.compiled.board import reg_address

        await self.link.write_reg(reg_address(self.engine, addr), value)

    async def read_reg(self, addr: int) -> int:
        from hwcosim.hdl.compiled.board import reg_address

        return await self.link.read_reg(reg_address(self.engine, addr))

    async def write_stream(self, channel: int, words: list[int]) -> None:
        from hwcosim.hdl.compiled.board import out_channel

        await self.link.write_stream(out_channel(self.engine, channel), words)

    async def read_stream(self, channel: int, n: int) -> list[int]:
        from hwcosim.hdl.compiled.board import in_channel

        return await self.link.read_stream(in_channel(self.engine, channel), n)


def run_sync(coro):
    """Run a session coroutine to completion outside cocotb (the serial transport never suspends)."""
    return asyncio.run(coro)


class StreamLink:
    """The host side of a :class:`hwcosim.hdl.common.stream_host.StreamHost` board top: its registers by name,
    and stream transfers that never make the bridge wait on the design.

    :meth:`run` sends every input beat, at most ``IN_FREE`` beats at a time, drains every output
    FIFO by its ``LEVEL`` between the sends (a stalled design is waiting for exactly that), and once
    the inputs are in, keeps draining until the design reports ``idle`` (when ``idle`` names a
    status register) and the FIFOs stay empty.

    Parameters
    ----------
    link : HostLink
    regs : sequence of :class:`hwcosim.hdl.common.axil_regs.Reg`
        The board top's register map (:func:`hwcosim.hdl.common.stream_host.stream_host_regs`).
    in_bits, out_bits : sequence of int
        Payload widths of the input and output streams, in channel order.
    in_depth : int
        The input FIFOs' depth (``StreamHost.in_depth``): ``IN_FREE`` equals it when a FIFO is empty.
    """

    def __init__(self, link: HostLink, regs, in_bits, out_bits, in_depth: int = 64):
        self.link, self.addr = link, {r.name: r.addr for r in regs}
        self.in_bits, self.out_bits, self.in_depth = list(in_bits), list(out_bits), in_depth

    async def read(self, name: str) -> int:
        return await self.link.read_reg(self.addr[name])

    async def write(self, name: str, value: int) -> None:
        await self.link.write_reg(self.addr[name], value)

    async def drain(self, out: list[list[int]]) -> int:
        """Take every beat waiting in every output FIFO into ``out[k]``; the number taken."""
        took = 0
        for k, bits in enumerate(self.out_bits):
            n = await self.read(f"LEVEL{k}")
            if n:
                out[k] += words_to_beats(await self.link.read_stream(k, n * -(-bits // 32)), bits)
                took += n
        return took

    async def run(self, beats: list[list[int]], idle: str | None = "IDLE", max_polls: int = 10_000,
                  batch: bool = False, log=None) -> list[list[int]]:
        """Send ``beats[k]`` on input ``k`` (all inputs interleaved chunk by chunk) and return the beats
        of every output; :class:`CheckFailed` if the design stops taking or giving (``max_polls``
        register polls without progress). ``batch``: each chunk is loaded under CTRL.HOLD and then
        released, so it enters the design back to back."""
        log = log or (lambda *_: None)
        out: list[list[int]] = [[] for _ in self.out_bits]
        pos = [0] * len(beats)
        stuck = 0
        while any(p < len(b) for p, b in zip(pos, beats, strict=True)):
            progress = 0
            if batch:
                await self.write("CTRL", 2)
            for k, b in enumerate(beats):
                if pos[k] < len(b):
                    free = await self.read(f"IN_FREE{k}")
                    n = min(free, len(b) - pos[k])
                    if n:
                        await self.link.write_stream(k, beats_to_words(b[pos[k]:pos[k] + n], self.in_bits[k]))
                        pos[k] += n
                        progress += n
            if batch:
                await self.write("CTRL", 0)
            progress += await self.drain(out)
            log(f"sent {sum(pos)} of {sum(map(len, beats))} beats, received {sum(map(len, out))}")
            stuck = 0 if progress else stuck + 1
            if stuck > max_polls:
                raise CheckFailed(f"the design stopped taking input ({sum(pos)} of {sum(map(len, beats))} beats sent)")
        quiet = 0
        for _ in range(max_polls):
            took = await self.drain(out)
            free = [await self.read(f"IN_FREE{k}") for k in range(len(beats))]
            done = (await self.read(idle.upper())) if idle else 1
            empty = all(f == self.in_depth for f in free)
            quiet = quiet + 1 if (not took and empty and done) else 0
            if quiet >= 2:
                return out
        raise CheckFailed(f"the design did not go idle after its input ({sum(map(len, out))} beats received)")


def board_params(design, *, family: str = "ecp5", param=(), params_file=None):
    """The parameters of a board session of ``design``: its configuration for the FPGA ``family`` the
    bitstream was built for (else its defaults) with the settings of the TOML file ``params_file``
    and then the ``FIELD=VALUE`` items of ``param`` applied (``hwcosim board run``'s ``--params`` and
    ``--param``)."""
    from hwcosim.cosim.registry import resolve_params

    base = design.board_config(family, top=True) or design.default_params()
    return resolve_params(design, list(param), params_file, base=base)

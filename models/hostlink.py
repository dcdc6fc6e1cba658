"""The host-link protocol: framed commands from a host (laptop, over a UART) to a board's bridge.

This module is the specification of the byte protocol that :class:`hwcosim.hdl.common.host_bridge.HostBridge`
implements in RTL and :mod:`hwcosim.cosim.flow.board` speaks from the host. Both sides use the constants
and the CRC here, so there is one definition.

Command (host -> board), 9 bytes, then a payload for ``WRITE_STREAM`` only::

    0xA5  OP  ARG[7:0] ARG[15:8]  VAL[7:0] .. VAL[31:24]  CRC

``CRC`` is CRC-8 (polynomial x^8 + x^2 + x + 1, 0x07, initial value 0, no reflection, no final
xor) over the 7 bytes ``OP .. VAL[31:24]``. Opcodes:

- ``WRITE_REG`` (1): AXI4-Lite write of ``VAL`` to byte address ``ARG``.
- ``READ_REG`` (2): AXI4-Lite read of byte address ``ARG``.
- ``WRITE_STREAM`` (3): ``VAL`` 32-bit words to AXI4-Stream output channel ``ARG``; the command is
  followed by ``4 * VAL`` payload bytes (words little-endian) and one CRC-8 byte over them.
- ``READ_STREAM`` (4): ``VAL`` 32-bit words from AXI4-Stream input channel ``ARG``.
- ``PING`` (5): nothing on the buses; the response echoes ``VAL``.

Response (board -> host)::

    0x5A  OP  [DATA: 4 * VAL bytes, READ_STREAM only]  STATUS  V[7:0] .. V[31:24]  CRC

with ``CRC`` over every byte after ``0x5A``. ``STATUS`` bits 1:0 are the AXI4-Lite response
(``BRESP`` / ``RRESP``: 0 OKAY, 2 SLVERR) and the bits of :data:`STATUS` below. ``V`` is the data
read (``READ_REG``), the value written (``WRITE_REG``), the words moved (``WRITE_STREAM``: words
the design accepted; ``READ_STREAM``: words the design delivered, the rest of ``DATA`` is zero)
or the echo (``PING``).

A command whose header CRC is wrong is not executed: the bridge answers ``BAD_CRC`` with ``OP``
as received and ``V`` = 0 and returns to scanning for ``0xA5`` (the payload of a damaged
``WRITE_STREAM`` header is then skipped byte by byte; a host recovers by waiting for the answer
and, if in doubt, sending ``PING`` until one echoes). A stream word the design does not take (or
give) within the bridge's watchdog sets ``TIMEOUT``; the rest of that command is then done without
waiting (written words dropped, read words zero), so the frame always completes.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcosim.models.errors import UsageError

__all__ = ["SYNC_CMD", "SYNC_RESP", "OP", "STATUS", "CMD_BYTES", "crc8", "encode_command", "encode_payload",
           "Response", "decode_response", "response_length", "status_text", "BAUD_RATES", "divisor_for"]

SYNC_CMD = 0xA5
SYNC_RESP = 0x5A
OP = {"WRITE_REG": 1, "READ_REG": 2, "WRITE_STREAM": 3, "READ_STREAM": 4, "PING": 5}
#: STATUS bits above the AXI response (bits 1:0)
STATUS = {"BAD_CRC": 4, "PAYLOAD_CRC": 8, "TIMEOUT": 16, "BAD_CMD": 32}
CMD_BYTES = 9
CRC_POLY = 0x07
#: standard UART rates the bridge is built for (8N1)
BAUD_RATES = (115200, 230400, 460800, 921600)
#: largest rate error (clock / divisor vs the nominal rate) the receiver tolerates comfortably
MAX_RATE_ERROR = 0.02


def _table() -> list[int]:
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = ((c << 1) ^ CRC_POLY) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        t.append(c)
    return t


_CRC_TABLE = _table()


def crc8(data: bytes | bytearray, crc: int = 0) -> int:
    """CRC-8/0x07 (initial ``crc``) of ``data``."""
    for b in data:
        crc = _CRC_TABLE[crc ^ b]
    return crc


def _u(name: str, v: int, bits: int) -> int:
    if not isinstance(v, int) or not 0 <= v < 1 << bits:
        raise UsageError(f"host link: {name}={v!r} must be an integer in [0, 2**{bits})")
    return v


def encode_command(op: int, arg: int = 0, val: int = 0) -> bytes:
    """The 9-byte command frame."""
    if op not in OP.values():
        raise UsageError(f"host link: unknown opcode {op!r}; choose one of {OP}")
    body = bytes([op]) + _u("arg", arg, 16).to_bytes(2, "little") + _u("val", val, 32).to_bytes(4, "little")
    return bytes([SYNC_CMD]) + body + bytes([crc8(body)])


def encode_payload(words) -> bytes:
    """The payload of ``WRITE_STREAM``: the words little-endian, then their CRC-8."""
    data = b"".join(_u("word", int(w), 32).to_bytes(4, "little") for w in words)
    return data + bytes([crc8(data)])


def response_length(op: int, val: int) -> int:
    """Bytes of the response to a command ``op`` with ``val`` (a header with a bad CRC: 8)."""
    return 8 + (4 * val if op == OP["READ_STREAM"] else 0)


@dataclass(frozen=True)
class Response:
    op: int
    status: int
    value: int
    data: tuple = ()  # READ_STREAM words

    @property
    def axi_resp(self) -> int:
        return self.status & 3


def decode_response(frame: bytes, op: int, nwords: int = 0) -> Response:
    """Parse one response frame to a command ``op`` (``nwords`` data words for ``READ_STREAM``).

    Raises ``ValueError`` naming what is wrong with the frame (sync byte, opcode, length, CRC).
    A frame answering a header with a bad CRC has no data even for ``READ_STREAM``.
    """
    frame = bytes(frame)
    if len(frame) < 8 or frame[0] != SYNC_RESP:
        raise ValueError(f"host link: response {frame[:12].hex()} does not start with {SYNC_RESP:#04x}")
    short = len(frame) == 8 and frame[-6] & STATUS["BAD_CRC"]
    want = 8 if short else response_length(op, nwords)
    if len(frame) != want:
        raise ValueError(f"host link: response of {len(frame)} bytes, expected {want}")
    if crc8(frame[1:-1]) != frame[-1]:
        raise ValueError(f"host link: response CRC {frame[-1]:#04x} != {crc8(frame[1:-1]):#04x} (bytes lost "
                         f"or corrupted on the line)")
    if frame[1] != op and not short:
        raise ValueError(f"host link: response to opcode {frame[1]}, expected {op}")
    data = frame[2:-6]
    words = tuple(int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4))
    return Response(frame[1], frame[-6], int.from_bytes(frame[-5:-1], "little"), words)


def status_text(status: int) -> str:
    parts = [name for name, bit in STATUS.items() if status & bit]
    if status & 3:
        parts.append({1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}[status & 3])
    return "+".join(parts) or "OK"


def divisor_for(clock_hz: float, baud: int) -> int:
    """Clock cycles per UART bit for ``baud`` at ``clock_hz``; refuses a rate the clock cannot make
    within :data:`MAX_RATE_ERROR` or a divisor below 4 (the receiver samples mid-bit)."""
    if baud <= 0 or clock_hz <= 0:
        raise UsageError(f"UART: baud rate {baud} and clock {clock_hz} Hz must be positive")
    div = round(clock_hz / baud)
    if div < 4:
        raise UsageError(f"UART: {baud} baud needs at least 4 clocks per bit; a {clock_hz / 1e6:g} MHz clock "
                         f"gives {clock_hz / baud:.2f}; choose a lower rate")
    err = abs(clock_hz / div - baud) / baud
    if err > MAX_RATE_ERROR:
        raise UsageError(f"UART: {baud} baud from {clock_hz / 1e6:g} MHz is off by {err:.1%} (divisor {div}); "
                         f"choose another rate or clock")
    return div

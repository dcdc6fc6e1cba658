"""Board top of the MELO receiver engine (``melo-engine``): the engine behind the generic stream
host (:class:`hwcosim.hdl.common.stream_host.StreamHost`) and the UART host bridge.

Bridge output channel 0 -> the event stream ``i`` (one link word per event when the event fits
32 bits: ``psn_bits + conn_bits + 1``); the delivered-PSN stream ``d`` -> input channel 0 and the
response stream ``r`` (ACK/SACK/NACK with the pool occupancy) -> input channel 1, each through a
FIFO the host drains by its ``LEVEL`` register. The engine's occupancy ports and every counter are
registers (``stream_host_regs``; ``ID`` = ``"MELO"``).
"""

from __future__ import annotations

from hwcosim.hdl.common.host_bridge import HostBoardTop
from hwcosim.hdl.common.stream_host import StreamHost, stream_host_regs
from hwcosim.hdl.melo.engine import _COUNTERS, MeloEngineRTL
from hwcosim.models.melo.engine import MeloEngineParams

__all__ = ["MELO_ID", "INPUTS", "OUTPUTS", "STATUS", "melo_host", "board_top", "register_map"]

MELO_ID = 0x4D454C4F  # "MELO"
INPUTS = ("i",)
#: the output streams and their FIFO depths (beats)
OUTPUTS = (("d", 512), ("r", 512))
STATUS = ("idle", "free_count", "blocks_in_use", "peak_blocks", *_COUNTERS)


def register_map():
    return stream_host_regs(INPUTS, OUTPUTS, STATUS)


def melo_host(params: MeloEngineParams, divisor: int, timeout: int = 1 << 24) -> StreamHost:
    if not isinstance(params, MeloEngineParams):
        raise TypeError(f"melo_host takes a models.melo.engine.MeloEngineParams, not {params!r}")
    return StreamHost(MeloEngineRTL(params), inputs=INPUTS, outputs=OUTPUTS, status=STATUS, ident=MELO_ID,
                      divisor=divisor, timeout=timeout)


def board_top(params: MeloEngineParams, baud: int = 115200, pll=None) -> HostBoardTop:
    return HostBoardTop(lambda divisor: melo_host(params, divisor), baud, pll)

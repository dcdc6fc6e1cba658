"""Board top of the row-wise CSR SpMxV baseline (``bbs-csr``): the engine behind the generic stream
host (:class:`hwcosim.hdl.common.stream_host.StreamHost`) and the UART host bridge.

Bridge output channel 0 -> the entry stream ``w`` (per product: the PEs' CSR entry lists in
lockstep, ``end`` on the product's last beat, :func:`hwcosim.models.bbs.csr.pack_weight_beats`), channel 1
-> the vector stream ``x`` (``cols / lanes`` beats of ``lanes`` elements per product); the result
stream ``y`` (``rows / mults`` beats of ``mults`` results per product) -> input channel 0 through a
FIFO the host drains by its ``LEVEL`` register. The engine has no idle output: the host knows the
work is done when its input FIFOs are empty and the result FIFO stays empty. The performance
counters are registers (``ID`` = ``"BCSR"``).

The result FIFO is 512 beats: a result beat is ``mults * 16`` bits (256 in the board configuration),
so the FIFO takes ``ceil(256 / 36) = 8`` block RAMs in their 512 x 36 mode whatever its depth up to
512 (8 of the LFE5U-85F's 208), and 512 beats hold 32 products of the board configuration's 16 beats.
"""

from __future__ import annotations

from hwcosim.hdl.bbs.csr import CSRSpMxV
from hwcosim.hdl.common.host_bridge import HostBoardTop
from hwcosim.hdl.common.stream_host import StreamHost, stream_host_regs
from hwcosim.models.bbs.csr import CSRParams

__all__ = ["CSR_ID", "INPUTS", "OUTPUTS", "STATUS", "csr_host", "board_top", "register_map"]

CSR_ID = 0x42435352  # "BCSR"
INPUTS = ("w", "x")
#: the output stream and its FIFO depth (beats)
OUTPUTS = (("y", 512),)
STATUS = ("cycles", "w_beats", "busy_lanes", "stall_out")


def register_map():
    return stream_host_regs(INPUTS, OUTPUTS, STATUS)


def csr_host(params: CSRParams, divisor: int, timeout: int = 1 << 24) -> StreamHost:
    if not isinstance(params, CSRParams):
        raise TypeError(f"csr_host takes a models.bbs.csr.CSRParams, not {params!r}")
    return StreamHost(CSRSpMxV(params), inputs=INPUTS, outputs=OUTPUTS, status=STATUS, ident=CSR_ID,
                      divisor=divisor, timeout=timeout)


def board_top(params: CSRParams, baud: int = 115200, pll=None) -> HostBoardTop:
    return HostBoardTop(lambda divisor: csr_host(params, divisor), baud, pll)

"""Board top of the BeamRaster precoder (``beamraster-precoder``): the precoder behind the generic
stream host (:class:`hwcosim.hdl.common.stream_host.StreamHost`) and the UART host bridge.

Bridge output channel 0 -> the coefficient stream ``c`` (per frame: the users' beams, then the
pre-distortion rows, :func:`hwcosim.models.beamraster.datapath.pack_coef_beats`), channel 1 -> the
symbol stream ``s`` (``K`` complex symbols per beat); the antenna-sample stream ``x`` -> input
channel 0 through a FIFO the host drains by its ``LEVEL`` register. The performance counters are
registers (``ID`` = ``"BRST"``).
"""

from __future__ import annotations

from hwcosim.hdl.beamraster.precoder import Precoder
from hwcosim.hdl.common.host_bridge import HostBoardTop
from hwcosim.hdl.common.stream_host import StreamHost, stream_host_regs
from hwcosim.models.beamraster.datapath import PrecoderParams

__all__ = ["BEAMRASTER_ID", "INPUTS", "OUTPUTS", "STATUS", "precoder_host", "board_top", "register_map"]

BEAMRASTER_ID = 0x42525354  # "BRST"
INPUTS = ("c", "s")
OUTPUTS = (("x", 512),)
STATUS = ("cycles", "sym_beats", "out_beats", "coef_beats", "issues", "stall_out", "starve_coef")


def register_map():
    return stream_host_regs(INPUTS, OUTPUTS, STATUS)


def precoder_host(params: PrecoderParams, divisor: int, timeout: int = 1 << 24) -> StreamHost:
    if not isinstance(params, PrecoderParams):
        raise TypeError(f"precoder_host takes a models.beamraster.datapath.PrecoderParams, not {params!r}")
    return StreamHost(Precoder(params), inputs=INPUTS, outputs=OUTPUTS, status=STATUS, ident=BEAMRASTER_ID,
                      divisor=divisor, timeout=timeout)


def board_top(params: PrecoderParams, baud: int = 115200, pll=None) -> HostBoardTop:
    return HostBoardTop(lambda divisor: precoder_host(params, divisor), baud, pll)

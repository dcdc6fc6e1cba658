"""cocotb testbench of the BeamRaster board top's core (:func:`hwcosim.hdl.beamraster.board.precoder_host`):
the host session of ``hwcosim board run beamraster-precoder`` drives the RTL through a bit-level
UART model, and every antenna sample is compared with :func:`hwcosim.models.beamraster.datapath.precode_fixed`.

Inputs (written by :func:`hwcosim.cosim.designs.beamraster.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the raw symbols and coefficient sets (and the golden samples, for ``hwcosim
check``). Writes ``metrics.json`` and ``outputs.npz`` (``rtl_re``, ``rtl_im``).
"""

from __future__ import annotations

import cocotb
from hwcosim.cosim.designs.beamraster.board import SIM_TIMEOUT, compare, session
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.beamraster.datapath import PrecoderParams

PERIOD_NS = 10


@cocotb.test()
async def beamraster_board_session_matches_golden(dut):
    cfg = inputs()
    p = PrecoderParams.from_dict(cfg["params"])
    a = arrays()
    sets = {k: a[k] for k in ("s_re", "s_im", "beams", "P_re", "P_im")}
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, **sets, log=dut._log.info)
    summary = compare(p, **sets, res=res)
    finish_board_session(summary, res, uart, {"rtl_re": res["x_re"], "rtl_im": res["x_im"]})

"""cocotb testbench of the FSS AXI board top (:class:`hwcosim.hdl.fss.board.FSSHost`): the host session of
``hwcosim board run fss-axi`` drives the RTL through a bit-level UART model, and every result word
is compared with :func:`hwcosim.models.fss.gemm.gemm`.

Inputs (written by :func:`hwcosim.cosim.designs.fss.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with ``values``/``indices`` (raw FSS regions) and ``xs`` (raw activations, one
matrix per run). Writes ``metrics.json`` and ``outputs.npz`` (``rtl``, ``golden``).
"""

from __future__ import annotations

import cocotb
import numpy as np
from hwcosim.cosim.designs.fss.board import SIM_TIMEOUT, compare, session
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.fss.gemm import FSSParams

PERIOD_NS = 10


@cocotb.test()
async def fss_board_session_matches_golden(dut):
    cfg = inputs()
    p = FSSParams.from_dict(cfg["params"])
    a = arrays()
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, a["values"], a["indices"], a["xs"], log=dut._log.info)
    summary = compare(p, a["values"], a["indices"], a["xs"], res)
    finish_board_session(summary, res, uart, {"rtl": res["y"], "golden": summary["golden"]}, per_run=res["per_run"])
    assert np.array_equal(res["y"], summary["golden"])

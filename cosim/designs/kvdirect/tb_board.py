"""cocotb testbench of the KV-Direct board top's core (:func:`hwcosim.hdl.kvdirect.board.kv_host`: pipeline +
on-chip memory behind the stream host): the host session of ``hwcosim board run kvdirect-pipeline``
drives the RTL through a bit-level UART model, and every response (matched to its request by tag) is
compared with the golden store.

Inputs (written by :func:`hwcosim.cosim.designs.kvdirect.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the packed ``requests`` (decimal strings: they are 156 bits wide). Writes
``metrics.json`` and ``outputs.npz`` (``rtl``: the responses in request order, ``golden``).
"""

from __future__ import annotations

import cocotb
from hwcosim.cosim.designs.kvdirect.board import SIM_TIMEOUT, compare, session
from hwcosim.cosim.flow.runs import as_words
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.kvdirect.rtl_model import PipelineParams

PERIOD_NS = 10


@cocotb.test()
async def kvdirect_board_session_matches_golden(dut):
    cfg = inputs()
    p = PipelineParams.from_dict(cfg["params"])
    requests = [int(w) for w in arrays()["requests"]]
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, requests, log=dut._log.info)
    summary = compare(p, requests, res)
    finish_board_session(summary, res, uart,
                         {"rtl": as_words(summary["ordered"]), "golden": as_words(summary["golden"])})

"""cocotb testbench of the MELO board top's core (:func:`hwcosim.hdl.melo.board.melo_host`): the host session
of ``hwcosim board run melo-engine`` drives the RTL through a bit-level UART model, and every
delivered-PSN and response word is compared with the golden engine replayed on the same events.

Inputs (written by :func:`hwcosim.cosim.designs.melo.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the packed ``events``. Writes ``metrics.json`` with the comparison and the
transcript (kept as the run folder's evidence).
"""

from __future__ import annotations

import cocotb
from hwcosim.cosim.designs.melo.board import SIM_TIMEOUT, compare, session
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.melo.engine import MeloEngineParams

PERIOD_NS = 10


@cocotb.test()
async def melo_board_session_matches_golden(dut):
    cfg = inputs()
    p = MeloEngineParams(**cfg["params"])
    events = [int(e) for e in arrays()["events"]]
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, events, log=dut._log.info)
    summary = compare(p, events, res)
    finish_board_session(summary, res, uart, transcript={"events": events, "deliv": res["deliv"], "resp": res["resp"]})

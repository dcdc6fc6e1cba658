"""cocotb testbench of the SpMxV board top: the host session of ``hwcosim board run`` drives the RTL
through a bit-level UART model, and every result word is compared with the golden model.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with ``values``/``indices`` (CSB, raw) and ``xs`` (raw vectors). The golden results
are computed here from those inputs (:func:`hwcosim.cosim.designs.bbs.board.compare`). Writes
``metrics.json`` (mismatches, run cycles against the cycle model, the board's counters, the bytes
on the line) and ``outputs.npz``.
"""

from __future__ import annotations

import cocotb
import numpy as np
from hwcosim.cosim.designs.bbs.board import SIM_TIMEOUT, compare, session
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.bbs.spmxv import BBSParams

PERIOD_NS = 10


@cocotb.test()
async def spmxv_board_session_matches_golden(dut):
    cfg = inputs()
    p = BBSParams.from_dict(cfg["params"])
    a = arrays()
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, a["values"], a["indices"], a["xs"], log=dut._log.info)
    summary = compare(p, a["values"], a["indices"], a["xs"], res)
    finish_board_session(summary, res, uart, {"rtl": res["y"], "golden": summary["golden"]})
    assert np.array_equal(res["y"], summary["golden"])


@cocotb.test()
async def lstm_board_session_matches_golden(dut):
    """The LSTM AXI board top (:class:`hwcosim.hdl.bbs.board_lstm.LSTMHost`) through the same UART model."""
    from hwcosim.cosim.designs.bbs.board_lstm import compare as lstm_compare
    from hwcosim.cosim.designs.bbs.board_lstm import session as lstm_session
    from hwcosim.models.bbs.lstm import LSTMParams, LSTMWeights

    cfg = inputs()
    p = LSTMParams.from_dict(cfg["params"])
    a = arrays()
    wts = LSTMWeights(a["values"], a["indices"], a["bias"], a["w_float"], a["b_float"])
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await lstm_session(link, p, wts, a["xs"], log=dut._log.info)
    summary = lstm_compare(p, wts, a["xs"], res)
    finish_board_session(summary, res, uart, {"rtl": res["h"], "golden": summary["golden"]})

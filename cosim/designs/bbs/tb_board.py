"""cocotb testbench of the SpMxV board top: the host session of ``hwcosim board run`` drives the RTL
through a bit-level UART model, and every result word is compared with the golden model.

Inputs (written by :func:`cosim.designs.bbs.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with ``values``/``indices`` (CSB, raw) and ``xs`` (raw vectors). The golden results
are computed here from those inputs (:func:`cosim.designs.bbs.board.compare`). Writes
``metrics.json`` (mismatches, run cycles against the cycle model, the board's counters, the bytes
on the line) and ``outputs.npz``.
"""

from __future__ import annotations

import cocotb
import numpy as np

from cosim.designs.bbs.board import SIM_TIMEOUT, compare, session
from cosim.flow.board import HostLink
from cosim.tb.common import arrays, inputs, start_clock_and_reset, write_metrics, write_outputs
from cosim.tb.uart import CocotbUartTransport, UartModel
from models.bbs.spmxv import BBSParams

PERIOD_NS = 10


@cocotb.test()
async def spmxv_board_session_matches_golden(dut):
    cfg = inputs()
    p = BBSParams.from_dict(cfg["params"])
    a = arrays()
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    # slack: the bridge's watchdog (in cycles) twice over
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await session(link, p, a["values"], a["indices"], a["xs"], log=dut._log.info)
    summary = compare(p, a["values"], a["indices"], a["xs"], res)
    metrics = {k: v for k, v in summary.items() if k != "golden"}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors)
    write_metrics(metrics)
    write_outputs(rtl=res["y"], golden=summary["golden"])
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])
    assert np.array_equal(res["y"], summary["golden"])


@cocotb.test()
async def lstm_board_session_matches_golden(dut):
    """The LSTM AXI board top (:class:`hdl.bbs.board_lstm.LSTMHost`) through the same UART model."""
    from cosim.designs.bbs.board_lstm import compare as lstm_compare
    from cosim.designs.bbs.board_lstm import session as lstm_session
    from models.bbs.lstm import LSTMParams, LSTMWeights

    cfg = inputs()
    p = LSTMParams.from_dict(cfg["params"])
    a = arrays()
    wts = LSTMWeights(a["values"], a["indices"], a["bias"], a["w_float"], a["b_float"])
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await lstm_session(link, p, wts, a["xs"], log=dut._log.info)
    summary = lstm_compare(p, wts, a["xs"], res)
    metrics = {k: v for k, v in summary.items() if k != "golden"}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors)
    write_metrics(metrics)
    write_outputs(rtl=res["h"], golden=summary["golden"])
    assert uart.frame_errors == 0
    assert not summary["problems"], "; ".join(summary["problems"])

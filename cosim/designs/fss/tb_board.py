"""cocotb testbench of the FSS AXI board top (:class:`hdl.fss.board.FSSHost`): the host session of
``hwcosim board run fss-axi`` drives the RTL through a bit-level UART model, and every result word
is compared with :func:`models.fss.gemm.gemm`.

Inputs (written by :func:`cosim.designs.fss.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with ``values``/``indices`` (raw FSS regions) and ``xs`` (raw activations, one
matrix per run). Writes ``metrics.json`` and ``outputs.npz`` (``rtl``, ``golden``).
"""

from __future__ import annotations

import cocotb
import numpy as np

from cosim.designs.fss.board import SIM_TIMEOUT, compare, session
from cosim.flow.board import HostLink
from cosim.tb.common import arrays, inputs, start_clock_and_reset, write_metrics, write_outputs
from cosim.tb.uart import CocotbUartTransport, UartModel
from models.fss.gemm import FSSParams

PERIOD_NS = 10


@cocotb.test()
async def fss_board_session_matches_golden(dut):
    cfg = inputs()
    p = FSSParams.from_dict(cfg["params"])
    a = arrays()
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await session(link, p, a["values"], a["indices"], a["xs"], log=dut._log.info)
    summary = compare(p, a["values"], a["indices"], a["xs"], res)
    metrics = {k: v for k, v in summary.items() if k != "golden"}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors, per_run=res["per_run"])
    write_metrics(metrics)
    write_outputs(rtl=res["y"], golden=summary["golden"])
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])
    assert np.array_equal(res["y"], summary["golden"])

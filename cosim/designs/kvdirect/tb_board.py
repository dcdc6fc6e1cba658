"""cocotb testbench of the KV-Direct board top's core (:func:`hdl.kvdirect.board.kv_host`: pipeline +
on-chip memory behind the stream host): the host session of ``hwcosim board run kvdirect-pipeline``
drives the RTL through a bit-level UART model, and every response (matched to its request by tag) is
compared with the golden store.

Inputs (written by :func:`cosim.designs.kvdirect.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the packed ``requests`` (decimal strings: they are 156 bits wide). Writes
``metrics.json`` and ``outputs.npz`` (``rtl``: the responses in request order, ``golden``).
"""

from __future__ import annotations

import cocotb

from cosim.designs.kvdirect.board import SIM_TIMEOUT, compare, session
from cosim.flow.board import HostLink
from cosim.flow.runs import as_words
from cosim.tb.common import arrays, inputs, start_clock_and_reset, write_metrics, write_outputs
from cosim.tb.uart import CocotbUartTransport, UartModel
from models.kvdirect.rtl_model import PipelineParams

PERIOD_NS = 10


@cocotb.test()
async def kvdirect_board_session_matches_golden(dut):
    cfg = inputs()
    p = PipelineParams.from_dict(cfg["params"])
    requests = [int(w) for w in arrays()["requests"]]
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await session(link, p, requests, log=dut._log.info)
    summary = compare(p, requests, res)
    metrics = {k: v for k, v in summary.items() if k not in ("golden", "ordered")}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors)
    write_metrics(metrics)
    write_outputs(rtl=as_words(summary["ordered"]), golden=as_words(summary["golden"]))
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])

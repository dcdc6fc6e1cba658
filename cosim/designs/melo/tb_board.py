"""cocotb testbench of the MELO board top's core (:func:`hdl.melo.board.melo_host`): the host session
of ``hwcosim board run melo-engine`` drives the RTL through a bit-level UART model, and every
delivered-PSN and response word is compared with the golden engine replayed on the same events.

Inputs (written by :func:`cosim.designs.melo.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the packed ``events``. Writes ``metrics.json`` with the comparison and the
transcript (kept as the run folder's evidence).
"""

from __future__ import annotations

import cocotb

from cosim.designs.melo.board import SIM_TIMEOUT, compare, session
from cosim.flow.board import HostLink
from cosim.tb.common import arrays, inputs, start_clock_and_reset, write_metrics
from cosim.tb.uart import CocotbUartTransport, UartModel
from models.melo.engine import MeloEngineParams

PERIOD_NS = 10


@cocotb.test()
async def melo_board_session_matches_golden(dut):
    cfg = inputs()
    p = MeloEngineParams(**cfg["params"])
    events = [int(e) for e in arrays()["events"]]
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await session(link, p, events, log=dut._log.info)
    summary = compare(p, events, res)
    metrics = dict(summary)
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors,
                   transcript={"events": events, "deliv": res["deliv"], "resp": res["resp"]})
    write_metrics(metrics)
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])

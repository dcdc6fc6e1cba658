"""cocotb testbench of the BeamRaster board top's core (:func:`hdl.beamraster.board.precoder_host`):
the host session of ``hwcosim board run beamraster-precoder`` drives the RTL through a bit-level
UART model, and every antenna sample is compared with :func:`models.beamraster.datapath.precode_fixed`.

Inputs (written by :func:`cosim.designs.beamraster.board.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the raw symbols and coefficient sets (and the golden samples, for ``hwcosim
check``). Writes ``metrics.json`` and ``outputs.npz`` (``rtl_re``, ``rtl_im``).
"""

from __future__ import annotations

import cocotb

from cosim.designs.beamraster.board import SIM_TIMEOUT, compare, session
from cosim.flow.board import HostLink
from cosim.tb.common import arrays, inputs, start_clock_and_reset, write_metrics, write_outputs
from cosim.tb.uart import CocotbUartTransport, UartModel
from models.beamraster.datapath import PrecoderParams

PERIOD_NS = 10


@cocotb.test()
async def beamraster_board_session_matches_golden(dut):
    cfg = inputs()
    p = PrecoderParams.from_dict(cfg["params"])
    a = arrays()
    sets = {k: a[k] for k in ("s_re", "s_im", "beams", "P_re", "P_im")}
    uart = UartModel(dut.rx, dut.tx, cfg["divisor"] * PERIOD_NS * 1000, cfg.get("rate_error", 0.0))
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    link = HostLink(CocotbUartTransport(uart), slack_s=2 * cfg.get("timeout", SIM_TIMEOUT) * PERIOD_NS * 1e-9)
    res = await session(link, p, **sets, log=dut._log.info)
    summary = compare(p, **sets, res=res)
    metrics = {k: v for k, v in summary.items() if k != "golden"}
    metrics.update(bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"], commands=res["commands"],
                   uart_frame_errors=uart.frame_errors)
    write_metrics(metrics)
    write_outputs(rtl_re=res["x_re"], rtl_im=res["x_im"])
    assert uart.frame_errors == 0, f"{uart.frame_errors} bytes from the board had a low stop bit"
    assert not summary["problems"], "; ".join(summary["problems"])

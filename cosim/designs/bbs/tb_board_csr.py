"""cocotb testbench of the CSR baseline board top's core (:func:`hwcosim.hdl.bbs.board_csr.csr_host`): the host
session of ``hwcosim board run bbs-csr`` drives the RTL through a bit-level UART model, and every
result word is compared with :func:`hwcosim.models.bbs.csr.spmxv_entries` on the same entry lists.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.board_csr.run_board_sim`): ``inputs.json`` with the
parameters, the UART ``divisor``, the bridge ``timeout`` and the host's ``rate_error``;
``arrays.npz`` with the raw matrix ``w`` and vectors ``xs`` (and the golden results ``expected``,
for ``hwcosim check``). Writes ``metrics.json`` and ``outputs.npz`` (``rtl``, ``golden``).
"""

from __future__ import annotations

import cocotb
from hwcosim.cosim.designs.bbs.board_csr import SIM_TIMEOUT, compare, session
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.models.bbs.csr import CSRParams

PERIOD_NS = 10


@cocotb.test()
async def csr_board_session_matches_golden(dut):
    cfg = inputs()
    p = CSRParams.from_dict(cfg["params"])
    a = arrays()
    w, xs = a["w"], a["xs"]
    uart, link = await board_link(dut, cfg, SIM_TIMEOUT, PERIOD_NS)
    res = await session(link, p, w, xs, log=dut._log.info)
    summary = compare(p, w, xs, res=res)
    finish_board_session(summary, res, uart, {"rtl": res["y"], "golden": summary["golden"]})

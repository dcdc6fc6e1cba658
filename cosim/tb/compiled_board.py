"""cocotb testbench of a compiled model's combined board top (:class:`hwcosim.hdl.compiled.board.CompiledHost`):
every layer's own board session (``hwcosim.cosim.designs.*.board.session``) runs in turn through one
bit-level UART model, each through an :class:`hwcosim.cosim.flow.board.EngineLink` onto its engine's slot,
and every result word is compared with that engine's golden model (its session's ``compare``).

Inputs (written by :func:`hwcosim.cosim.compile_board.run_combined_sim`): ``inputs.json`` with the top's
engines, each layer's engine, slot and parameters, the UART ``divisor`` and the bridge ``timeout``;
``arrays.npz`` with layer ``i``'s arrays as ``l<i>_<name>``. Writes ``metrics.json`` (per layer: words,
mismatches, run cycles, counters; the bytes on the line) and ``outputs.npz`` (``rtl_<i>``, ``golden_<i>``).
"""

from __future__ import annotations

import importlib

import cocotb
import numpy as np
from hwcosim.cosim.compile_board import BOARD_TOPS, layer_args
from hwcosim.cosim.flow.board import EngineLink
from hwcosim.cosim.tb.common import arrays, inputs
from hwcosim.cosim.tb.uart import board_link, finish_board_session
from hwcosim.hdl.compiled.board import ENGINE_CORES, _resolve

PERIOD_NS = 10


@cocotb.test()
async def compiled_board_sessions_match_golden(dut):
    cfg = inputs()
    a = arrays()
    uart, link = await board_link(dut, cfg, cfg["timeout"], PERIOD_NS)
    outputs, layers, problems = {}, [], []
    for i, (engine, slot, pd) in enumerate(zip(cfg["engines"], cfg["slots"], cfg["layer_params"], strict=True)):
        host = importlib.import_module(BOARD_TOPS[engine][2])
        p = _resolve(ENGINE_CORES[engine][1]).from_dict(pd)
        args = layer_args(engine, p, {k[len(f"l{i}_"):]: v for k, v in a.items() if k.startswith(f"l{i}_")})
        res = await host.session(EngineLink(link, slot), *args, log=dut._log.info)
        summary = host.compare(*args, res=res)
        outputs[f"rtl_{i}"] = res["h"] if engine == "bbs-lstm" else res["y"]
        outputs[f"golden_{i}"] = summary["golden"]
        layers.append({"layer": i, "engine": engine, "slot": slot, "words": summary["words"],
                       "mismatches": summary["mismatches"], "run_cycles": summary["run_cycles"],
                       "counters": summary["counters"], "problems": summary["problems"]})
        problems += [f"layer {i} ({engine}, engine {slot}): {t}" for t in summary["problems"]]
    total = {"layers": layers, "words": sum(d["words"] for d in layers),
             "mismatches": sum(d["mismatches"] for d in layers), "problems": problems}
    finish_board_session(total, {"bytes_sent": link.bytes_sent, "bytes_received": link.bytes_received,
                                 "commands": link.commands}, uart, outputs)
    for i in range(len(layers)):
        assert np.array_equal(np.asarray(outputs[f"rtl_{i}"]), np.asarray(outputs[f"golden_{i}"]).reshape(
            np.shape(outputs[f"rtl_{i}"]))), f"layer {i}: the RTL's words differ from the golden model"

"""Fault-injection cosimulation of the BBS LSTM board top (``bbs-lstm-axi``): AXI read errors,
long stalls and resets in the middle of transfers, under cocotbext-axi BFMs
(:mod:`hwcosim.cosim.designs.bbs.tb_axi_faults`); every hidden word compared with the golden model."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.lstm import LSTMParams, LSTMWeights, lstm_golden
from hwcosim.models.errors import UsageError

__all__ = ["SCENARIOS", "run_lstm_axi_faults"]

#: the cocotb tests of :mod:`hwcosim.cosim.designs.bbs.tb_axi_faults`
SCENARIOS = ("mm_load_with_random_stalls", "mm_read_errors", "long_stalls", "soft_reset_mid_transfer",
             "hw_reset_mid_transfer", "axil_slverr", "mm_read_timeout")


def run_lstm_axi_faults(p: LSTMParams, wts: LSTMWeights, wts_b: LSTMWeights, xs: np.ndarray, scenario: str, *,
                        mm_data_width: int = 32, mm_max_burst: int = 16, mm_max_outstanding: int = 2,
                        mm_timeout_cycles: int | None = 1 << 16,
                        seed: int = 1, test_dir: str | os.PathLike | None = None, sim: str | None = None,
                        waves: bool | None = None) -> runner.SimResult:
    """Run one fault scenario on :class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop` built with the given
    read-master parameters. ``wts`` (set A) and ``wts_b`` (set B) are two weight sets for the
    same shapes (the scenarios swap between them to show that a load really replaced the
    weights); ``xs`` (N, T, I) raw inputs. ``mm_timeout_cycles`` is the read watchdog (the top's
    default, ``2**16``, gives the same Verilog as ``hwcosim verilog``; ``None`` removes it);
    ``mm_read_timeout`` needs a short one. Raises :class:`hwcosim.cosim.flow.runner.SimFailure` on any
    mismatch, protocol violation or unexpected register value."""
    from hwcosim.hdl.bbs.axi_top import LSTMAxiTop

    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3:
        raise UsageError(f"xs must have shape (N, T, I), got {xs.shape}")
    expected, _ = lstm_golden(p, wts, xs)
    expected_b, _ = lstm_golden(p, wts_b, xs)
    top = LSTMAxiTop(p, mm_data_width=mm_data_width, mm_max_burst=mm_max_burst,
                     mm_max_outstanding=mm_max_outstanding, mm_timeout_cycles=mm_timeout_cycles)
    return runner.run(
        top, "bbs_lstm_axi", "hwcosim.cosim.designs.bbs.tb_axi_faults", testcase=scenario,
        inputs={"params": p.to_dict(), "mm_data_width": mm_data_width, "mm_max_burst": mm_max_burst,
                "mm_max_outstanding": mm_max_outstanding, "seed": seed,
                "mm_timeout_cycles": top.mm_timeout_cycles},
        arrays={"values": wts.values, "indices": wts.indices, "bias": wts.bias, "values_b": wts_b.values,
                "indices_b": wts_b.indices, "bias_b": wts_b.bias, "xs": xs, "expected": expected,
                "expected_b": expected_b},
        test_dir=test_dir, sim=sim, waves=waves)

"""Run the AXI top level of the BBS LSTM engine (``bbs-lstm-axi``) under cocotbext-axi BFMs,
every hidden word compared with the golden model."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.lstm import LSTMParams, LSTMWeights, lstm_golden
from hwcosim.models.errors import UsageError

__all__ = ["run_lstm_axi"]


def run_lstm_axi(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray, *, p_pause_in: float = 0.0,
                 p_pause_out: float = 0.0, seed: int = 1, test_dir: str | os.PathLike | None = None,
                 sim: str | None = None, waves: bool | None = None) -> runner.SimResult:
    """Simulate :class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop` on raw sequences ``xs`` (N, T, I): weights over
    ``s_axis_w``, inputs over ``s_axis_x``, hidden states from ``m_axis_h``, control over AXI4-Lite.
    Raises :class:`hwcosim.cosim.flow.runner.SimFailure` on any mismatch or register error."""
    from hwcosim.hdl.bbs.axi_top import LSTMAxiTop

    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3:
        raise UsageError(f"xs must have shape (N, T, I), got {xs.shape}")
    expected, _ = lstm_golden(p, wts, xs)
    return runner.run(
        LSTMAxiTop(p), "bbs_lstm_axi", "hwcosim.cosim.designs.bbs.tb_axi",
        inputs={"params": p.to_dict(), "p_pause_in": p_pause_in, "p_pause_out": p_pause_out, "seed": seed},
        arrays={"values": wts.values, "indices": wts.indices, "bias": wts.bias, "xs": xs, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves)

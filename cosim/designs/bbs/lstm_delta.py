"""Run the BBS LSTM layer RTL in delta mode, compared with :func:`hwcosim.models.bbs.lstm_delta.lstm_delta_golden`."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.lstm import LSTMParams, LSTMWeights
from hwcosim.models.bbs.lstm_delta import DeltaCycleModel, lstm_delta_golden
from hwcosim.models.errors import UsageError

__all__ = ["run_lstm_delta"]


def run_lstm_delta(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray, theta: int, budget: int, *,
                   p_idle: float = 0.0, p_stall: float = 0.0, seed: int = 1,
                   test_dir: str | os.PathLike | None = None, sim: str | None = None,
                   waves: bool | None = None) -> runner.SimResult:
    """Simulate ``LSTMLayer(p, delta_budget=budget)`` with threshold ``theta`` on raw ``xs`` (N, T, I).

    Every hidden-state word is compared with the delta golden model inside the testbench (raises
    :class:`hwcosim.cosim.flow.runner.SimFailure` on a mismatch or a counter that disagrees with the model).
    ``metrics["h_rtl"]`` holds the RTL's hidden states; ``metrics["model_cycles"]`` the
    :class:`hwcosim.models.bbs.lstm_delta.DeltaCycleModel` count.
    """
    from hwcosim.hdl.bbs.lstm import LSTMLayer

    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3:
        raise UsageError(f"xs must have shape (N, T, I), got {xs.shape}")
    expected, _, st = lstm_delta_golden(p, wts, xs, theta, budget, stats=True)
    res = runner.run(
        LSTMLayer(p, delta_budget=budget), "bbs_lstm_delta", "hwcosim.cosim.designs.bbs.tb_lstm_delta",
        inputs={"params": p.to_dict(), "theta": int(theta), "budget": int(budget), "p_idle": p_idle,
                "p_stall": p_stall, "seed": seed},
        arrays={"values": wts.values, "indices": wts.indices, "bias": wts.bias, "xs": xs, "expected": expected,
                "beats_per_group": st["beats_per_group"], "selected": st["selected"],
                "candidates": st["candidates"]},
        test_dir=test_dir, sim=sim, waves=waves)
    res.metrics.setdefault("model_cycles", DeltaCycleModel(p).expected(st["beats_per_group"]))
    return res

"""Simulation contracts of the BBS family (``hwcosim sim DESIGN``, :meth:`hwcosim.DesignHandle.simulate`).

One :class:`hwcosim.cosim.registry.SimContract` per registered design: random but realistic
stimulus (normally distributed weights pruned bank-balanced and quantised, full-range input
words with the extremes), the golden model's words, the RTL run through the design's cocotb run
function (:func:`~hwcosim.cosim.designs.bbs.spmxv.run_spmxv`, :func:`~hwcosim.cosim.designs.bbs.lstm.run_lstm`,
:func:`~hwcosim.cosim.designs.bbs.axi.run_lstm_axi`, :func:`~hwcosim.cosim.designs.bbs.csr.run_csr`) and the
word comparison of :class:`~hwcosim.cosim.registry.SimContract`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.cosim.contract import SimContract

__all__ = ["SPMXV", "LSTM", "LSTM_AXI", "CSR"]


def _extremes(xs: np.ndarray, fmt) -> np.ndarray:
    """``xs`` with its first words set to the format's extremes (rounding and saturation exercised)."""
    flat = xs.reshape(-1)
    ext = [fmt.min_raw, fmt.max_raw, 0, -1][:flat.size]
    flat[:len(ext)] = ext
    return xs


class SpMxVContract(SimContract):
    """BBS SpMxV: CSB ``values``/``indices`` (rows, k, banks) and raw vectors ``xs`` (n, cols) -> ``y`` (n, rows)."""

    design = "bbs-spmxv"

    def stimulus(self, params, seed: int = 0, n: int = 4, scale: float = 0.6) -> dict:
        """``n`` random vectors and a normal(0, ``scale``) matrix pruned to ``params.k`` per bank."""
        from hwcosim.pruning.formats.csb import encode

        rng = np.random.default_rng(seed)
        p = params
        m = encode(rng.normal(0.0, scale, size=(p.rows, p.cols)), p.banks, 1.0 - p.k / (p.cols // p.banks),
                   fmt=p.weight_fmt)
        xs = _extremes(rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, p.cols)), p.vec_fmt)
        return {"values": m.values, "indices": m.indices, "xs": xs}

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.bbs.spmxv import spmxv

        return {"y": spmxv(params, stimulus["values"], stimulus["indices"], np.atleast_2d(stimulus["xs"]))}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.bbs.spmxv import run_spmxv

        d = self.run_dir(test_dir, "bbs_spmxv")
        xs = np.atleast_2d(stimulus["xs"])
        return self.collect(lambda: run_spmxv(params, stimulus["values"], stimulus["indices"], xs, seed=seed,
                                              test_dir=d, sim=sim, waves=waves, raise_on_fail=False),
                            d, lambda out, mt: {"y": self.shaped(out["rtl"], (len(xs), params.rows))})

    def seal(self, run_dir) -> bool:
        from hwcosim.cosim.flow.runs import seal

        seal(run_dir, self.design)  # hwcosim check recomputes spmxv from arrays.npz (its recheck)
        return True


class LSTMContract(SimContract):
    """BBS LSTM layer: CSB weights, biases and raw input sequences ``xs`` (N, T, I) -> hidden states ``h`` (N, T, H)."""

    design = "bbs-lstm"
    runner = "hwcosim.cosim.designs.bbs.lstm:run_lstm"

    def stimulus(self, params, seed: int = 0, n: int = 2, steps: int = 3, scale: float = 0.6) -> dict:
        """``n`` random sequences of ``steps`` inputs; a normal(0, ``scale``) layer pruned bank-balanced."""
        from hwcosim.models.bbs.lstm import prepare_weights

        rng = np.random.default_rng(seed)
        p = params
        w = rng.normal(0.0, scale, size=(4 * p.hidden, p.input_size + p.hidden))
        b = rng.normal(0.0, scale, size=4 * p.hidden)
        wts = prepare_weights(p, w, b)
        xs = _extremes(rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, steps, p.input_size)),
                       p.vec_fmt)
        return {"values": wts.values, "indices": wts.indices, "bias": wts.bias, "xs": xs}

    @staticmethod
    def _weights(stimulus: dict):
        from hwcosim.models.bbs.lstm import LSTMWeights

        empty = np.zeros(0)
        return LSTMWeights(values=np.asarray(stimulus["values"]), indices=np.asarray(stimulus["indices"]),
                           bias=np.asarray(stimulus["bias"]), w_float=empty, b_float=empty)

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.bbs.lstm import lstm_golden

        h, _ = lstm_golden(params, self._weights(stimulus), np.asarray(stimulus["xs"], dtype=np.int64))
        return {"h": h}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.registry import resolve

        run = resolve(self.runner)
        d = self.run_dir(test_dir, self.design.replace("-", "_"))
        return self.collect(lambda: run(params, self._weights(stimulus), stimulus["xs"], seed=seed, test_dir=d,
                                        sim=sim, waves=waves),
                            d, lambda out, mt: {"h": np.asarray(mt["h_rtl"], dtype=np.int64)})


class LSTMAxiContract(LSTMContract):
    """The BBS LSTM layer behind its AXI top (``bbs-lstm-axi``): the same stimulus and golden model."""

    design = "bbs-lstm-axi"
    runner = "hwcosim.cosim.designs.bbs.axi:run_lstm_axi"


class CSRContract(SimContract):
    """Row-wise CSR SpMxV baseline: a raw sparse matrix ``w`` (rows, cols) and raw vectors ``xs`` -> ``y`` (n, rows)."""

    design = "bbs-csr"

    def stimulus(self, params, seed: int = 0, n: int = 3, density: float = 0.3) -> dict:
        """A random raw matrix keeping each weight with probability ``density`` (one empty row, the
        extremes in row 0) and ``n`` random vectors."""
        rng = np.random.default_rng(seed)
        p = params
        w = rng.integers(p.weight_fmt.min_raw, p.weight_fmt.max_raw + 1, size=(p.rows, p.cols))
        w = w * (rng.random((p.rows, p.cols)) < density)
        if p.rows > 1:
            w[1] = 0
        w[0, :3] = [p.weight_fmt.min_raw, p.weight_fmt.max_raw, -1][:p.cols]
        xs = _extremes(rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, p.cols)), p.vec_fmt)
        return {"w": w, "xs": xs}

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.bbs.csr import spmxv_csr

        return {"y": np.atleast_2d(spmxv_csr(params, stimulus["w"], np.atleast_2d(stimulus["xs"])))}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.bbs.csr import run_csr

        d = self.run_dir(test_dir, "bbs_csr")
        xs = np.atleast_2d(stimulus["xs"])
        return self.collect(lambda: run_csr(params, stimulus["w"], xs, seed=seed, test_dir=d, sim=sim, waves=waves),
                            d, lambda out, mt: {"y": self.shaped(out["rtl"], (len(xs), params.rows))})


SPMXV = SpMxVContract()
LSTM = LSTMContract()
LSTM_AXI = LSTMAxiContract()
CSR = CSRContract()

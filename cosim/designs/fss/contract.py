"""Simulation contracts of the FSS family (``hwcosim sim DESIGN``, :meth:`hwcosim.DesignHandle.simulate`).

Stimulus: a normal(0, 0.6) weight matrix pruned to ``n`` per ``r_h x r_w`` region and encoded as
FSS (:func:`hwcosim.pruning.formats.fss.encode`), full-range activations with the extremes. The
RTL runs through :func:`~hwcosim.cosim.designs.fss.gemm.run_gemm` (the engine) and
:func:`~hwcosim.cosim.designs.fss.gemm.run_gemm_axi` (its AXI top: one weight load, then one
run per activation matrix); every result word is compared with :func:`hwcosim.models.fss.gemm.gemm`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.cosim.contract import SimContract

__all__ = ["GEMM", "AXI"]


def _layer(p, rng, rows: int | None, cols: int | None, scale: float) -> tuple[int, int, object]:
    from hwcosim.pruning.formats.fss import encode

    rg, rw = p.rows_per_group, p.r_w
    rows = rows or min(p.max_rows, 4 * rg)
    cols = cols or min(p.max_cols, 8 * rw)
    if rows % rg or cols % rw or rows > p.max_rows or cols > p.max_cols:
        from hwcosim.models.errors import UsageError

        raise UsageError(f"stimulus rows={rows}, cols={cols}: rows must be a multiple of {rg} up to {p.max_rows}, "
                         f"cols a multiple of {rw} up to {p.max_cols}")
    m = encode(rng.normal(0.0, scale, size=(rows, cols)), p.region, n=p.n, fmt=p.weight_fmt)
    return rows, cols, m


def _acts(p, rng, cols: int, t: int) -> np.ndarray:
    x = rng.integers(p.act_fmt.min_raw, p.act_fmt.max_raw + 1, size=(cols, t))
    x[:4, 0] = [p.act_fmt.min_raw, p.act_fmt.max_raw, 0, -1][:cols]
    return x


class GemmContract(SimContract):
    """FSS GEMM engine: FSS ``values``/``indices`` (rows / r_h, cols / r_w, n) and raw ``x`` (cols, T) ->
    results ``y`` (rows, T)."""

    design = "fss-gemm"

    def stimulus(self, params, seed: int = 0, rows: int | None = None, cols: int | None = None,
                 tiles: int = 2, scale: float = 0.6) -> dict:
        """A random layer (default 4 row groups by 8 regions, within the maximum) and ``tiles`` x
        ``pe_cols`` activation columns."""
        rng = np.random.default_rng(seed)
        _, cols, m = _layer(params, rng, rows, cols, scale)
        return {"values": m.values, "indices": m.indices, "x": _acts(params, rng, cols, tiles * params.pe_cols)}

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.fss.gemm import gemm

        return {"y": gemm(params, stimulus["values"], stimulus["indices"], stimulus["x"])}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.fss.gemm import run_gemm

        d = self.run_dir(test_dir, "fss_gemm")
        rows, t = np.shape(stimulus["values"])[0] * params.r_h, np.shape(stimulus["x"])[1]
        return self.collect(lambda: run_gemm(params, stimulus["values"], stimulus["indices"], stimulus["x"],
                                             seed=seed, test_dir=d, sim=sim, waves=waves, raise_on_fail=False),
                            d, lambda out, mt: {"y": self.shaped(out["rtl"], (rows, t))})


class AxiContract(SimContract):
    """FSS AXI top: one weight load, then ``runs`` activation matrices ``x0``, ``x1`` ... -> ``y0``, ``y1`` ..."""

    design = "fss-axi"

    def stimulus(self, params, seed: int = 0, rows: int | None = None, cols: int | None = None, runs: int = 2,
                 tiles: int = 1, scale: float = 0.6) -> dict:
        """A random layer and ``runs`` activation matrices of ``tiles`` x ``pe_cols`` columns each."""
        rng = np.random.default_rng(seed)
        _, cols, m = _layer(params, rng, rows, cols, scale)
        out = {"values": m.values, "indices": m.indices}
        for i in range(runs):
            out[f"x{i}"] = _acts(params, rng, cols, tiles * params.pe_cols)
        return out

    @staticmethod
    def _xs(stimulus: dict) -> list:
        return [stimulus[f"x{i}"] for i in range(sum(1 for k in stimulus if k[:1] == "x" and k[1:].isdigit()))]

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.fss.gemm import gemm

        return {f"y{i}": gemm(params, stimulus["values"], stimulus["indices"], x)
                for i, x in enumerate(self._xs(stimulus))}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.fss.gemm import run_gemm_axi

        d = self.run_dir(test_dir, "fss_axi")
        xs = self._xs(stimulus)
        rows = np.shape(stimulus["values"])[0] * params.r_h
        return self.collect(
            lambda: run_gemm_axi(params, stimulus["values"], stimulus["indices"], xs, seed=seed, test_dir=d, sim=sim,
                                 waves=waves, raise_on_fail=False),
            d, lambda out, mt: {f"y{i}": self.shaped(out[f"rtl{i}"], (rows, np.shape(x)[1]))
                                for i, x in enumerate(xs) if i == 0 or f"rtl{i}" in out})


GEMM = GemmContract()
AXI = AxiContract()

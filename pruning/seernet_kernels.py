"""Compiled SeerNet kernels: the k-bit predictor, the sparse full-precision conv, and baselines.

SeerNet (Cao et al., CVPR 2019; the golden math is :mod:`hwcosim.pruning.seernet`) speeds a conv +
ReLU (+ 2x2 max-pool) layer up by computing only the outputs a k-bit copy of the layer predicts
to survive. These kernels make that a measurable wall-clock figure, 3x3 "same" conv, stride 1:

- :func:`predict_mask_fast`: the k-bit predictor. Integer codes from the golden quantiser
  (:func:`hwcosim.pruning.seernet.quantize_symmetric`'s arithmetic; int8, ``|q| <= 127``) are
  accumulated in int32 (exact: at most ``9 * Cin * 127^2`` < 2^31 for ``Cin <= 14,000``): per output
  pixel, one accumulator row over all output channels takes ``code * filter row`` for every
  *nonzero* input code (zeros, from the ReLU before the layer or rounded to zero at low bits, are
  skipped; the dense baselines do not skip them, see the bench's ``input_zero``). Weight codes are
  made once per layer (:func:`quantize_filters`). Then ``z = acc * (s_x s_w) + b`` in float64 and
  the mask ``z > 0`` (with pooling, also the max of its 2x2 window, ties kept): the golden
  :func:`hwcosim.pruning.seernet.predict_mask`'s arithmetic, so the masks are identical (tested).
- :func:`sparse_conv`: full-precision (float32) outputs at the mask only, zero elsewhere. Input in
  channels-last padded layout, so each output is nine contiguous dot products of length ``Cin``
  (vectorised); per output channel the filter stays in L1 while the kept positions of its plane
  are gathered. ``mask=None`` runs the same code on every output (:func:`dense_conv_same`): the
  dense baseline that differs from the sparse run only by the mask, so the two give bit-identical
  values at the computed positions.
- :func:`im2col_conv`: the BLAS baseline, ``im2col3(x) @ W^T`` (numpy's BLAS, same process).

Float order: the compiled dot product reassociates (``fastmath``) and sums in (ki, kj, c) order;
the golden :func:`hwcosim.pruning.seernet.conv_at` sums the (c, ki, kj) im2col row with numpy's
pairwise sum. They agree to float32 rounding: ``|fast - golden| <= 2 * gamma_n * sum|x w| + ...``
with ``gamma_n = n u / (1 - n u)``, ``n = 9 Cin + 1`` terms, ``u = 2^-24`` (the standard bound
for any summation order, applied to both; tested).

numba is a declared dependency; without it the kernels fall back to the golden numpy functions
(same results, no speed).
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.layers import im2col3
from hwcosim.pruning.seernet import quantize_symmetric

try:  # the numpy fallback keeps the module importable without numba
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "predict_mask_fast", "quantize_filters", "sparse_conv", "dense_conv_same", "im2col_conv",
           "to_channels_last", "filters_channels_last", "float_bound", "warm_up"]


def _check_layer(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
    if x.ndim != 4 or w.ndim != 4 or w.shape[2:] != (3, 3) or w.shape[1] != x.shape[1] or b.shape != (w.shape[0],):
        raise UsageError(f"SeerNet kernels need x (N, Cin, H, W), w (Cout, Cin, 3, 3), b (Cout,); "
                         f"got {x.shape}, {w.shape}, {b.shape}")


if HAVE_NUMBA:
    @njit(nogil=True, cache=True)
    def _codes(x, scale, qmax, binary, out):
        # x (N, C, H, W) float -> out (N, H+2, W+2, C) int8 padded codes: the golden quantiser's
        # clip(rint(float64(x) / s), -qmax, qmax), or sign(x) for 1 bit
        n_img, c, h, wd = x.shape
        for n in range(n_img):
            for ci in range(c):
                for i in range(h):
                    for j in range(wd):
                        v = np.float64(x[n, ci, i, j])
                        if binary:
                            q = 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)
                        else:
                            q = min(max(np.rint(v / scale), -qmax), qmax)
                        out[n, i + 1, j + 1, ci] = np.int8(q)
        return out

    @njit(nogil=True, cache=True)
    def _predict_kernel(qxp, qwt, scale, b, pool, mask):
        # qxp: (N, H+2, W+2, Cin) int8 padded codes; qwt: (3, 3, Cin, Cout) int8 weight codes;
        # mask out: (N, Cout, H, W) bool. Per output pixel, an int32 accumulator over all output
        # channels takes one code-times-filter-row update per nonzero input code.
        n_img, hp, wp, cin = qxp.shape
        h, wd = hp - 2, wp - 2
        cout = qwt.shape[3]
        acc = np.empty(cout, dtype=np.int32)
        z = np.empty((h, wd, cout), dtype=np.float64)
        for n in range(n_img):
            for i in range(h):
                for j in range(wd):
                    acc[:] = 0
                    for ki in range(3):
                        for kj in range(3):
                            xr = qxp[n, i + ki, j + kj]
                            for ci in range(cin):
                                v = np.int32(xr[ci])
                                if v == 0:
                                    continue
                                wr = qwt[ki, kj, ci]
                                for co in range(cout):
                                    acc[co] += v * np.int32(wr[co])
                    for co in range(cout):
                        z[i, j, co] = np.float64(acc[co]) * scale + b[co]
            if pool:
                for i in range(0, h, 2):
                    for j in range(0, wd, 2):
                        for co in range(cout):
                            m = max(max(z[i, j, co], z[i, j + 1, co]), max(z[i + 1, j, co], z[i + 1, j + 1, co]))
                            for di in range(2):
                                for dj in range(2):
                                    v = z[i + di, j + dj, co]
                                    mask[n, co, i + di, j + dj] = v > 0 and v == m
            else:
                for i in range(h):
                    for j in range(wd):
                        for co in range(cout):
                            mask[n, co, i, j] = z[i, j, co] > 0
        return mask

    @njit(nogil=True, cache=True, fastmath=True)
    def _sparse_kernel(xp, wt, b, mask, use_mask, out):
        # xp: (N, H+2, W+2, Cin) float32; wt: (Cout, 3, 3, Cin); mask (N, Cout, H, W) u1; out (N, Cout, H, W)
        n_img, hp, wp, cin = xp.shape
        h, wd = hp - 2, wp - 2
        cout = wt.shape[0]
        computed = 0
        for n in range(n_img):
            for co in range(cout):
                bc = b[co]
                for i in range(h):
                    for j in range(wd):
                        if use_mask and not mask[n, co, i, j]:
                            continue
                        acc = np.float32(0)
                        for ki in range(3):
                            for kj in range(3):
                                xr = xp[n, i + ki, j + kj]
                                wr = wt[co, ki, kj]
                                for c in range(cin):
                                    acc += xr[c] * wr[c]
                        out[n, co, i, j] = acc + bc
                        computed += 1
        return computed


def to_channels_last(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> zero-padded channels-last (N, H+2, W+2, C), contiguous."""
    xp = np.zeros((x.shape[0], x.shape[2] + 2, x.shape[3] + 2, x.shape[1]), dtype=x.dtype)
    xp[:, 1:-1, 1:-1, :] = x.transpose(0, 2, 3, 1)
    return xp


def filters_channels_last(w: np.ndarray) -> np.ndarray:
    """(Cout, Cin, 3, 3) -> contiguous (Cout, 3, 3, Cin)."""
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1))


def _scale(x: np.ndarray, bits: int) -> float:
    """The golden quantiser's scale (:func:`hwcosim.pruning.seernet.quantize_symmetric`), same value."""
    if bits == 1:
        nz = np.abs(x[x != 0]).astype(np.float64)
        return float(nz.mean()) if nz.size else 1.0
    m = float(np.abs(x).max()) if x.size else 0.0  # a max is exact in any precision and order
    return m / ((1 << (bits - 1)) - 1) if m > 0 else 1.0


def quantize_filters(w: np.ndarray, bits: int) -> tuple[np.ndarray, float]:
    """Weight codes for the predictor, done once per layer (offline): int8 (3, 3, Cin, Cout) and the scale."""
    qw, sw = quantize_symmetric(w, bits)
    return np.ascontiguousarray(qw.astype(np.int8).transpose(2, 3, 1, 0)), sw


def predict_mask_fast(x: np.ndarray, w: np.ndarray, b: np.ndarray, bits: int, pool: bool,
                      filters: tuple[np.ndarray, float] | None = None) -> np.ndarray:
    """The k-bit predicted mask, bool (N, Cout, H, W); equal to :func:`hwcosim.pruning.seernet.predict_mask`.

    ``filters`` is :func:`quantize_filters` of ``w`` (computed here when None); the activation
    codes are made here, so a timed call includes quantising the input.
    """
    x, w, b = np.asarray(x), np.asarray(w), np.asarray(b)
    _check_layer(x, w, b)
    bits = int(bits)
    if not 1 <= bits <= 8:
        raise UsageError(f"SeerNet bit width must be an integer in 1..8, not {bits!r}")
    if pool and (x.shape[2] % 2 or x.shape[3] % 2):
        raise UsageError(f"2x2 max-pooling needs even height and width, got {x.shape[2]}x{x.shape[3]}")
    if not HAVE_NUMBA:  # pragma: no cover
        from hwcosim.pruning.seernet import predict_mask

        return predict_mask(x, w, b, bits, pool)
    qwt, sw = quantize_filters(w, bits) if filters is None else filters
    n, c, h, wd = x.shape
    sx = _scale(x, bits)
    qxp = np.zeros((n, h + 2, wd + 2, c), dtype=np.int8)
    _codes(x, sx, float((1 << (bits - 1)) - 1), bits == 1, qxp)
    mask = np.empty((n, w.shape[0], h, wd), dtype=np.bool_)
    _predict_kernel(qxp, qwt, float(sx * sw), b.astype(np.float64), bool(pool), mask)
    return mask


def sparse_conv(xp: np.ndarray, wt: np.ndarray, b: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Full-precision conv outputs at ``mask`` (all outputs when None); zero elsewhere.

    Parameters
    ----------
    xp : ndarray, shape (N, H+2, W+2, Cin)
        :func:`to_channels_last` of the input (float32 or float64).
    wt : ndarray, shape (Cout, 3, 3, Cin)
        :func:`filters_channels_last` of the weights, same dtype as ``xp``.
    b : ndarray, shape (Cout,)
    mask : ndarray of bool, shape (N, Cout, H, W), or None

    Returns
    -------
    out : ndarray, shape (N, Cout, H, W)
    computed : int
        Outputs actually computed (``mask.sum()``, or all of them).
    """
    n, hp, wp, cin = xp.shape
    cout = wt.shape[0]
    shape = (n, cout, hp - 2, wp - 2)
    if wt.shape != (cout, 3, 3, cin) or wt.dtype != xp.dtype or (mask is not None and mask.shape != shape):
        raise UsageError(f"sparse_conv needs xp (N, H+2, W+2, Cin), wt (Cout, 3, 3, Cin) of one dtype and a "
                         f"mask of shape {shape}; got {xp.shape} {xp.dtype}, {wt.shape} {wt.dtype}, "
                         f"{None if mask is None else mask.shape}")
    out = np.zeros(shape, dtype=xp.dtype)
    bb = np.asarray(b, dtype=xp.dtype)
    if not HAVE_NUMBA:  # pragma: no cover
        from hwcosim.pruning.seernet import conv_at

        x = xp[:, 1:-1, 1:-1, :].transpose(0, 3, 1, 2)
        m = np.ones(shape, dtype=bool) if mask is None else mask
        return conv_at(x, wt.transpose(0, 3, 1, 2), bb, m), int(m.sum())
    dummy = np.zeros((1, 1, 1, 1), dtype=np.bool_)
    computed = _sparse_kernel(xp, wt, bb, dummy if mask is None else mask, mask is not None, out)
    return out, int(computed)


def dense_conv_same(xp: np.ndarray, wt: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every output by the sparse kernel's own code (:func:`sparse_conv` without a mask)."""
    return sparse_conv(xp, wt, b, None)[0]


def im2col_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The BLAS baseline: ``im2col3(x) @ W^T + b`` as (N, Cout, H, W) (im2col included in its time)."""
    n, _, h, wd = x.shape
    cout = w.shape[0]
    z = im2col3(x) @ w.reshape(cout, -1).T.astype(x.dtype, copy=False) + b.astype(x.dtype, copy=False)
    return z.reshape(n, h, wd, cout).transpose(0, 3, 1, 2)


def float_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bound on ``|any-order float sum - golden|`` per output: ``2 gamma_n (|x| * |w| + |b|)``, (N, Cout, H, W).

    ``gamma_n = n u / (1 - n u)`` for ``n = 9 Cin + 1`` terms and the unit roundoff ``u`` of
    ``x``'s dtype: each of two summation orders is within ``gamma_n sum|terms|`` of the exact sum.
    """
    u = float(np.finfo(x.dtype).eps) / 2
    nt = 9 * x.shape[1] + 1
    gamma = nt * u / (1 - nt * u)
    mag = im2col_conv(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), np.abs(b).astype(np.float64))
    return 2 * gamma * mag


def warm_up() -> None:
    """Compile (or load from the cache) the float32 kernels the bench uses, off the clock."""
    rng = np.random.default_rng(0)
    for dt in (np.float32,):
        x = rng.normal(size=(1, 2, 4, 4)).astype(dt)
        w = rng.normal(size=(2, 2, 3, 3)).astype(dt)
        b = np.zeros(2, dtype=dt)
        for pool in (False, True):
            m = predict_mask_fast(x, w, b, 4, pool)
            sparse_conv(to_channels_last(x), filters_channels_last(w), b, m)
        dense_conv_same(to_channels_last(x), filters_channels_last(w), b)

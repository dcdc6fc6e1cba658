"""Bench of the compiled CSB kernels (:mod:`hwcosim.models.csb_kernels`) against the baselines a user has.

On the same bank-balanced matrices (banks of 64 columns, uint8 in-bank indices), in one process:
our kernel single-threaded and on every core, scipy's CSR (float32 values, int32 columns),
python-graphblas (SuiteSparse:GraphBLAS) on one thread and on every core, and dense BLAS
(numpy, one thread). Sizes 1024..8192, sparsity 50..95%, batch 1..64. Each time is the median of
repeated runs after a warm-up; a ratio above 1 means ours is faster. Memory traffic: the bytes a
product must move (matrix + vector in + vector out) per nonzero, and the bandwidth that implies,
set against a STREAM-like copy measured in the same run (the bound a streaming kernel cannot
beat on this machine). Written to ``csb_kernels.json`` and ``csb_kernels.png``.
"""

# ruff: noqa: B023  (the timed closures run at once, inside the loop that binds them)
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

__all__ = ["run_csb_bench", "stream_copy_gbps"]

BANK = 64


def _median_time(f, repeats: int, min_time: float = 0.02) -> float:
    f()
    times = []
    t_end = time.perf_counter() + 10.0
    while len(times) < repeats or (sum(times) < min_time and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
        if len(times) > 10 * repeats:
            break
    return statistics.median(times)


def stream_copy_gbps(mbytes: int = 256, repeats: int = 5) -> float:
    """A STREAM-like copy on one thread: bytes read + written per second (GB/s)."""
    a = np.ones(mbytes * (1 << 20) // 8)
    b = np.empty_like(a)
    t = _median_time(lambda: np.copyto(b, a), repeats)
    return 2 * a.nbytes / t / 1e9


def _matrix(n: int, sparsity: float, rng):
    """A random n x n float32 matrix pruned bank-balanced (k of every 64 kept), as CSB arrays and dense."""
    banks = n // BANK
    k = max(1, round(BANK * (1 - sparsity)))
    w = rng.normal(size=(n, n)).astype(np.float32)
    blocks = np.abs(w).reshape(n, banks, BANK)
    idx = np.argpartition(-blocks, k - 1, axis=2)[:, :, :k]           # (n, banks, k) in-bank positions
    idx.sort(axis=2)
    vals = np.take_along_axis(w.reshape(n, banks, BANK), idx, axis=2)
    dense = np.zeros_like(w)
    np.put_along_axis(dense.reshape(n, banks, BANK), idx, vals, axis=2)
    return vals.transpose(0, 2, 1).copy(), idx.transpose(0, 2, 1).copy(), dense, k


def study_sizes(repeats: int = 7, seed: int = 0) -> dict:
    """The products of the LSTM golden/float paths and the pruning studies, at the sizes they run.

    The fused gate matrix of the digits LSTM (4H x (I+H) = 256 x 72, BBS 8 banks of 9, 2 kept:
    78 % sparse; the layer of ``hwcosim study accuracy`` and of the bbs-lstm design), over the
    360 test sequences and a training batch of 32:

    - integer (the golden models, exact int64): the compiled CSB kernel packed once
      (:func:`hwcosim.models.bbs.spmxv.packed_weights`, what :func:`~models.bbs.lstm.lstm_golden` and
      :func:`~models.bbs.lstm_delta.lstm_delta_golden` now run), the numpy gather + einsum the delta
      golden used before, and numpy's int64 matmul (no BLAS for integers);
    - float64 (:func:`~models.bbs.lstm.lstm_float`, :class:`hwcosim.models.nn.lstm.LSTM` in the studies): dense
      BLAS on one thread, the compiled CSB kernel on float64 values (same loop), scipy CSR.

    Median seconds per product; ``compiled_wins`` says which way each path went.
    """
    import scipy.sparse as sp
    from hwcosim.models.bbs.lstm import LSTMParams, prepare_weights
    from hwcosim.models.bbs.spmxv import packed_weights
    from hwcosim.models.csb_kernels import HAVE_NUMBA
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(seed)
    p = LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8)
    wts = prepare_weights(p, rng.normal(0, 0.5, (4 * p.hidden, p.input_size + p.hidden)), np.zeros(4 * p.hidden))
    pk = packed_weights(p.bbs, wts.values, wts.indices)
    dense_i = np.zeros((p.rows, p.banks, p.bank_size), dtype=np.int64)
    np.put_along_axis(dense_i, wts.indices.transpose(0, 2, 1), wts.values.transpose(0, 2, 1).astype(np.int64), axis=-1)
    dense_i = dense_i.reshape(p.rows, p.cols)
    dense_f = dense_i / 1024.0
    csr = sp.csr_matrix(dense_f)
    v64 = pk.v.astype(np.float64) / 1024.0
    out = {"matrix": {"rows": p.rows, "cols": p.cols, "nnz": pk.nnz, "sparsity": 1 - pk.nnz / (p.rows * p.cols)},
           "rows": [], "load_average": os.getloadavg()}
    for n in (32, 360):
        x = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, p.cols))
        old = x.reshape(n, p.banks, p.bank_size)[:, np.arange(p.banks)[None, None, :], wts.indices]
        assert np.array_equal(pk.spmm(x), x @ dense_i.T)
        t_pk = _median_time(lambda: pk.spmm(x), repeats)
        t_einsum = _median_time(lambda: np.einsum("rjb,nrjb->nr", wts.values.astype(np.int64), x.reshape(
            n, p.banks, p.bank_size)[:, np.arange(p.banks)[None, None, :], wts.indices]), repeats)
        t_int = _median_time(lambda: x @ dense_i.T, repeats)
        del old
        xf = x / 1024.0
        with threadpool_limits(1):
            t_blas = _median_time(lambda: xf @ dense_f.T, repeats)
        t_csr = _median_time(lambda: (csr @ xf.T).T, repeats)
        t_csb_f = None
        if HAVE_NUMBA:
            from hwcosim.models.csb_kernels import _spmm

            yt = np.empty((p.rows, n))
            t_csb_f = _median_time(lambda: _spmm(v64, pk.col, np.ascontiguousarray(xf.T), yt), repeats)
        out["rows"].append({"batch": n, "int_compiled_packed_s": t_pk, "int_numpy_einsum_s": t_einsum,
                            "int_numpy_matmul_s": t_int, "float64_dense_blas_1t_s": t_blas,
                            "float64_csb_compiled_s": t_csb_f, "float64_scipy_csr_s": t_csr,
                            "compiled_wins": {"integer_golden": t_pk < min(t_einsum, t_int),
                                              "float_path": bool(t_csb_f and t_csb_f < 0.8 * t_blas)}})
    return out


def run_csb_bench(out_dir, quick: bool = False, seed: int = 0) -> dict:
    import scipy.sparse as sp
    from hwcosim.models.atomic import write_text
    from hwcosim.models.csb_kernels import CSBPacked
    from threadpoolctl import threadpool_info, threadpool_limits

    cores = os.cpu_count() or 1
    try:
        import graphblas as gb
    except ImportError:  # the systems extra (hwcosim[systems]) is not installed: no GraphBLAS baseline
        gb = None
    sizes = (1024, 4096) if quick else (1024, 2048, 4096, 8192)
    sparsities = (0.9,) if quick else (0.5, 0.75, 0.9, 0.95)
    batches = (1, 16) if quick else (1, 8, 64)
    repeats = 5 if quick else 15
    rng = np.random.default_rng(seed)
    bw = stream_copy_gbps(64 if quick else 256)
    rows = []
    for n in sizes:
        for s in sparsities:
            vals, idx, dense, k = _matrix(n, s, rng)
            m = CSBPacked(vals, idx, BANK)
            csr = sp.csr_matrix(dense)
            csr.indices = csr.indices.astype(np.int32)
            G = gb.io.from_scipy_sparse(csr) if gb is not None else None
            for batch in batches:
                X = rng.normal(size=(batch, n)).astype(np.float32)
                if batch == 1:
                    x = X[0]
                    ours1 = _median_time(lambda: m.spmv(x, 1), repeats)
                    oursN = _median_time(lambda: m.spmv(x, cores), repeats)
                    t_csr = _median_time(lambda: csr @ x, repeats)
                    with threadpool_limits(1):
                        t_dense = _median_time(lambda: dense @ x, repeats)
                    ref = dense @ x
                    err = float(np.max(np.abs(m.spmv(x) - ref)) / (np.max(np.abs(ref)) or 1))
                else:
                    ours1 = _median_time(lambda: m.spmm(X, 1), repeats)
                    oursN = _median_time(lambda: m.spmm(X, cores), repeats)
                    t_csr = _median_time(lambda: (csr @ X.T).T, repeats)
                    with threadpool_limits(1):
                        t_dense = _median_time(lambda: X @ dense.T, repeats)
                    ref = X @ dense.T
                    err = float(np.max(np.abs(m.spmm(X) - ref)) / (np.max(np.abs(ref)) or 1))
                t_gb1 = t_gbN = None
                if G is not None:
                    if batch == 1:
                        gx = gb.Vector.from_dense(x)

                        def g():
                            return G.mxv(gx).new()
                    else:
                        gX = gb.Matrix.from_dense(X.T.copy())

                        def g():
                            return G.mxm(gX).new()
                    gb.ss.config["nthreads"] = 1
                    t_gb1 = _median_time(g, repeats)
                    gb.ss.config["nthreads"] = cores
                    t_gbN = _median_time(g, repeats)
                nnz = m.nnz
                moved = m.compute_nbytes + 4 * n * batch * 2  # matrix once, X in and Y out (float32)
                rows.append({
                    "n": n, "sparsity": s, "k_per_bank": k, "batch": batch, "nnz": nnz,
                    "ours_1t_s": ours1, f"ours_{cores}t_s": oursN, "scipy_csr_s": t_csr, "dense_blas_1t_s": t_dense,
                    "graphblas_1t_s": t_gb1, f"graphblas_{cores}t_s": t_gbN,
                    "speedup_vs_scipy_1t": t_csr / ours1, f"speedup_vs_scipy_{cores}t": t_csr / oursN,
                    "speedup_vs_dense_1t": t_dense / ours1,
                    "speedup_vs_graphblas_1t": (t_gb1 / ours1) if t_gb1 else None,
                    f"speedup_vs_graphblas_{cores}t": (t_gbN / oursN) if t_gbN else None,
                    "bytes_per_nnz_csb": moved / nnz, "stored_bytes_per_nnz_csb": m.nbytes / nnz,
                    "bytes_per_nnz_csr": (csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes
                                          + 4 * n * batch * 2) / nnz,
                    "achieved_gbps_1t": moved / ours1 / 1e9, "max_rel_err": err,
                })
                print(f"  n={n} sparsity={s:.2f} batch={batch}: ours/scipy x{t_csr / ours1:.2f} (1 thread), "
                      f"x{t_csr / oursN:.2f} ({cores}), vs GraphBLAS "
                      + (f"x{t_gb1 / ours1:.2f}" if t_gb1 else "- (needs hwcosim[systems])") + ", "
                      f"{moved / ours1 / 1e9:.1f} GB/s of {bw:.1f}", flush=True)
    blas = [i.get("internal_api", "?") + ":" + str(i.get("architecture", "?")) for i in threadpool_info()]
    out = {"bank_size": BANK, "index_dtype": "uint8 stored, uint16 column in the product", "value_dtype": "float32",
           "cores": cores,
           "stream_copy_gbps_1t": bw, "machine": platform.machine(), "blas": blas,
           "load_average": os.getloadavg(), "quick": quick, "rows": rows,
           "study_sizes": study_sizes(5 if quick else 15, seed),
           "note": "median times; ratios > 1: ours faster; same matrices and vectors for every kernel"}
    target = [r for r in rows if r["n"] == 4096 and r["sparsity"] == 0.9 and r["batch"] == 1]
    if target:
        out["target_4096_90_batch1"] = {"speedup_vs_scipy_1t": target[0]["speedup_vs_scipy_1t"], "goal": 1.5}
    out_dir = Path(out_dir)
    write_text(out_dir / "csb_kernels.json", json.dumps(out, indent=1) + "\n")
    _plot(out, out_dir / "csb_kernels.png")
    return out


def _plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    rows = res["rows"]
    cores = res["cores"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for batch in sorted({r["batch"] for r in rows}):
        for s in sorted({r["sparsity"] for r in rows}):
            pts = sorted((r["n"], r["speedup_vs_scipy_1t"]) for r in rows if r["batch"] == batch and r["sparsity"] == s)
            if pts:
                a1.plot(*zip(*pts), "-o", ms=3, label=f"batch {batch}, {s:.0%}")
    a1.axhline(1, color="k", lw=0.8)
    a1.axhline(1.5, color="r", ls="--", lw=0.8, label="target 1.5x (batch 1, 4096, 90%)")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("matrix size n (n x n)")
    a1.set_ylabel("speed-up over scipy CSR (1 thread)")
    a1.set_title("compiled CSB kernel vs scipy CSR")
    a1.legend(fontsize=6, ncol=2)
    b1 = [r for r in rows if r["batch"] == 1]
    a2.scatter([r["bytes_per_nnz_csb"] for r in b1], [r["achieved_gbps_1t"] for r in b1], s=14, label="ours, 1 thread")
    a2.axhline(res["stream_copy_gbps_1t"], color="r", ls="--", lw=0.8, label="STREAM-like copy, 1 thread")
    a2.set_xlabel("bytes moved per nonzero (batch 1)")
    a2.set_ylabel("GB/s")
    a2.set_title(f"memory traffic ({cores} cores on the machine)")
    a2.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=110)

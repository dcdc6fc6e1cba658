"""Kernel and pruning benchmarks: CSB (bank-balanced) SpMV/SpMM against ``scipy.sparse`` CSR and
dense numpy, and the time to prune a 4096 x 4096 matrix per pattern.

Patterns and formats: Cao et al., FPGA 2019 (BBS / CSB); Yao et al., AAAI 2019 (Balanced
Sparsity); Zhang et al., IEEE TCAD 2025 (FSS). All products run in float32 in one process on the
same matrices; the CSB kernel works on the CSB arrays (:class:`hwcosim.models.csb_kernels.CSBPacked`,
one thread: ``t_csb_s`` is the kernel a user gets, compiled when numba is installed, and
``t_csb_numpy_s`` its numpy path), CSR is scipy's C implementation, dense is numpy's BLAS. Each
time is the best of ``repeats`` runs after one warm-up run; ratios above 1 mean the CSB kernel is
faster. (:mod:`hwcosim.pruning.csb_bench` is the fuller study of the compiled kernel: more sizes,
threads, GraphBLAS, memory traffic.)
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp
from hwcosim.models.atomic import write_text
from hwcosim.models.csb_kernels import HAVE_NUMBA, CSBPacked
from hwcosim.models.tables import show
from hwcosim.pruning.base import get_pattern
from hwcosim.pruning.formats import csb

__all__ = ["run_kernel_bench", "PRUNE_PATTERNS"]

#: Patterns timed by the pruning benchmark, with representative parameters.
PRUNE_PATTERNS = [
    ("unstructured", {"sparsity": 0.9}),
    ("block", {"block": (4, 4), "sparsity": 0.9}),
    ("vector", {"length": 8, "sparsity": 0.9}),
    ("balanced", {"block": 64, "sparsity": 0.875}),
    ("bbs", {"banks": 16, "sparsity": 0.875}),
    ("nm", {"n": 2, "m": 4}),
    ("nm", {"n": 4, "m": 8}),
    ("fss", {"region": (4, 8), "n": 4}),
    ("fss", {"region": (1, 16), "n": 2}),
]


def _best(f, repeats: int) -> float:
    f()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def run_kernel_bench(out_dir, quick: bool = False, seed: int = 0) -> dict:
    """Time CSB SpMV/SpMM vs scipy CSR vs dense, and pruning per pattern; write ``kernels.json``.

    Parameters
    ----------
    out_dir : path
        Folder for ``kernels.json`` (written atomically).
    quick : bool
        One size (1024), one sparsity (0.875), pruning timed at 1024 x 1024; for tests/CI.
    seed : int

    Returns
    -------
    dict
        ``{"kernels": [...], "prune": [...], "meta": {...}}`` as written to the JSON.
    """
    from rich.console import Console
    from rich.table import Table

    rng = np.random.default_rng(seed)
    sizes = (1024,) if quick else (1024, 2048, 4096)
    sparsities = (0.875,) if quick else (0.75, 0.875, 0.95)
    batches = (1, 16, 64)
    repeats = 3 if quick else 5
    banks = 16
    rows_out = []
    for n in sizes:
        w = rng.standard_normal((n, n)).astype(np.float32)
        for s in sparsities:
            m = csb.encode(w, banks, sparsity=s)
            kern = CSBPacked.from_csb(m, dtype=np.float32)
            dense = m.to_dense().astype(np.float32)
            csr = sp.csr_array(dense)
            for b in batches:
                x = (
                    rng.standard_normal(n).astype(np.float32)
                    if b == 1
                    else rng.standard_normal((n, b)).astype(np.float32)
                )
                for backend in ("auto", "numpy"):
                    y = kern.matmul(x, backend=backend)
                    if not np.allclose(y, dense @ x, rtol=1e-4, atol=1e-3):
                        raise AssertionError(f"CSB kernel ({backend}) disagrees with dense at n={n}, s={s}, batch={b}")
                t_csb = _best(lambda kern=kern, x=x: kern @ x, repeats)
                t_csb_np = _best(lambda kern=kern, x=x: kern.matmul(x, backend="numpy"), repeats)
                t_csr = _best(lambda csr=csr, x=x: csr @ x, repeats)
                t_dense = _best(lambda dense=dense, x=x: dense @ x, repeats)
                rows_out.append(
                    {
                        "size": n,
                        "sparsity": m.sparsity,
                        "banks": banks,
                        "k": m.k,
                        "batch": b,
                        "nnz": int(m.values.size),
                        "t_csb_s": t_csb,
                        "t_csb_numpy_s": t_csb_np,
                        "t_csr_s": t_csr,
                        "t_dense_s": t_dense,
                        "csr_over_csb": t_csr / t_csb,
                        "dense_over_csb": t_dense / t_csb,
                        "numpy_over_csb": t_csb_np / t_csb,
                    }
                )
    pn = 1024 if quick else 4096
    wp = rng.standard_normal((pn, pn))
    prune = []
    for name, params in PRUNE_PATTERNS:
        pat = get_pattern(name, **params)
        t = _best(lambda pat=pat: pat.mask(wp), 1 if quick else 2)
        prune.append(
            {
                "pattern": name,
                "params": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
                "size": pn,
                "t_s": t,
            }
        )
    result = {
        "meta": {
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "dtype": "float32",
            "csb_kernel": "hwcosim.models.csb_kernels.CSBPacked, 1 thread, "
                          + ("compiled (numba)" if HAVE_NUMBA else "numpy (numba not installed)"),
            "quick": quick,
            "repeats": repeats,
            "timing": "best of repeats after one warm-up",
        },
        "kernels": rows_out,
        "prune": prune,
    }
    out = Path(out_dir)
    write_text(out / "kernels.json", json.dumps(result, indent=2) + "\n")

    console = Console()
    t = Table(title=f"CSB kernel ({'compiled' if HAVE_NUMBA else 'numpy'}, 1 thread; and its numpy path) vs scipy "
                    "CSR vs dense numpy, float32, ms")
    for c in ("size (rows = cols)", "sparsity (fraction)", "batch", "CSB ms", "CSB numpy ms", "CSR ms", "dense ms",
              "CSR/CSB", "dense/CSB"):
        t.add_column(c, justify="right")
    for r in rows_out:
        t.add_row(
            str(r["size"]),
            f"{r['sparsity']:.3f}",
            str(r["batch"]),
            f"{r['t_csb_s'] * 1e3:.2f}",
            f"{r['t_csb_numpy_s'] * 1e3:.2f}",
            f"{r['t_csr_s'] * 1e3:.2f}",
            f"{r['t_dense_s'] * 1e3:.2f}",
            f"{r['csr_over_csb']:.2f}",
            f"{r['dense_over_csb']:.2f}",
        )
    show(t, console)
    t2 = Table(title=f"pruning a {pn} x {pn} float64 matrix (mask only), s")
    t2.add_column("pattern")
    t2.add_column("params")
    t2.add_column("time (s)", justify="right")
    for r in prune:
        t2.add_row(r["pattern"], json.dumps(r["params"]), f"{r['t_s']:.3f}")
    show(t2, console)
    console.print(f"wrote {out / 'kernels.json'}")
    return result

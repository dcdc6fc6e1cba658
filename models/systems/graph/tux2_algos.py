"""Matrix factorisation, logistic regression and LDA: in TuX2/MEGA form and as plain numpy.

Each algorithm exists twice, with the same arithmetic so that BSP runs can be compared:

- :class:`MF` / :func:`plain_mf`: mini-batch gradient descent on a user-item rating graph,
  ``e = r - p_u . q_i``, ``p_u += lr * sum(e q_i - reg p_u)``, ``q_i += lr * sum(e p_u - reg q_i)``
  over the batch's ratings (the batch form of Koren, Bell, Volinsky's SGD, IEEE Computer 2009).
- :class:`LR` / :func:`plain_lr`: logistic regression by mini-batch gradient descent on a
  sample-feature graph with sparse features; L2 on the features a sample touches (the usual
  sparse-SGD regulariser), ``w -= lr (X_b^T (sigmoid(X_b w) - y_b) + reg c_b * w) / B``.
- :class:`LDA` / :func:`plain_lda`: collapsed Gibbs sampling (Griffiths and Steyvers, PNAS 2004)
  on a document-word graph, one edge per token. The plain version samples tokens one after
  another; the TuX2 version samples a mini-batch's tokens together from the (possibly stale)
  counts and merges count deltas, as AD-LDA does (Newman et al., JMLR 2009).

Data: :func:`synthetic_ratings` (seeded low-rank matrix plus Gaussian noise: synthetic, stated
as such), :func:`digits_lr` (scikit-learn's bundled 8x8 digits, UCI optdigits test set, no
download; label "digit >= 5"), :func:`bars_corpus` (Griffiths and Steyvers' "bars" topics: a
5x5 vocabulary grid, one topic per row and per column, seeded synthetic documents).

:func:`line_counts` counts the code lines (not blank, comment or docstring) of each form.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError
from scipy.special import expit, gammaln

from .tux2 import Bipartite, MEGAProgram, Stage

__all__ = ["MF", "LR", "LDA", "plain_mf", "plain_lr", "plain_lda", "synthetic_ratings", "digits_lr",
           "bars_corpus", "rmat_ratings", "mf_rmse", "lr_loss", "lda_loss", "line_counts", "ALGOS"]


def _positive(**kw):
    for k, v in kw.items():
        if not (isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and v > 0):
            raise UsageError(f"{k} must be a number > 0, not {v!r}")


def _nonneg(**kw):
    for k, v in kw.items():
        if not (isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and v >= 0):
            raise UsageError(f"{k} must be a number >= 0, not {v!r}")


def _int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise UsageError(f"{name} must be an integer >= {lo}, not {v!r}")


# ---- data ----------------------------------------------------------------------------------------
def synthetic_ratings(n_users: int = 500, n_items: int = 300, rank: int = 5, density: float = 0.05,
                      noise: float = 0.1, seed: int = 0) -> Bipartite:
    """A seeded synthetic rating graph: ``r = p*_u . q*_i + N(0, noise^2)`` on random pairs.

    ``p*``, ``q*`` have i.i.d. N(0, rank^-1/2) entries, so ratings have unit variance before
    noise; the best achievable RMSE is about ``noise``. Every user and item gets at least one rating.
    """
    _int("n_users", n_users)
    _int("n_items", n_items)
    _int("rank", rank)
    _nonneg(noise=noise)
    if not 0 < density <= 1:
        raise UsageError(f"density must be in (0, 1], not {density}")
    rng = np.random.default_rng(seed)
    ps = rng.normal(0, rank ** -0.25, (n_users, rank))
    qs = rng.normal(0, rank ** -0.25, (n_items, rank))
    cells = rng.random((n_users, n_items)) < density
    cells[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    cells[rng.integers(0, n_users, n_items), np.arange(n_items)] = True
    u, i = np.nonzero(cells)
    r = np.einsum("ij,ij->i", ps[u], qs[i]) + rng.normal(0, noise, u.size)
    return Bipartite(n_users, n_items, u, i, {"r": r}, types=("user", "item"),
                     name=f"synthetic-ratings-{n_users}x{n_items}-rank{rank}")


def rmat_ratings(scale: int, edge_factor: int = 16, rank: int = 5, noise: float = 0.1, seed: int = 0) -> Bipartite:
    """Ratings on a Graph500 R-MAT graph: user ``src``, item ``dst``, ``r = p*_u . q*_i + N(0, noise^2)``.

    A power-law rating graph of ``edge_factor * 2**scale`` edges (duplicates and self pairs kept,
    as the generator makes them) for measurements at scale; seeded synthetic, like
    :func:`synthetic_ratings`.
    """
    from .graph import RMATParams, rmat

    _int("rank", rank)
    _nonneg(noise=noise)
    gr = rmat(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed), weights=False)
    n = gr.n
    rng = np.random.default_rng([seed, 0x4D46])
    ps = rng.normal(0, rank ** -0.25, (n, rank))
    qs = rng.normal(0, rank ** -0.25, (n, rank))
    r = np.empty(gr.m)
    for lo in range(0, gr.m, 1 << 22):                     # chunks: no (m, rank) temporaries
        hi = min(lo + (1 << 22), gr.m)
        r[lo:hi] = np.einsum("ij,ij->i", ps[gr.src[lo:hi]], qs[gr.dst[lo:hi]]) + rng.normal(0, noise, hi - lo)
    return Bipartite(n, n, gr.src, gr.dst, {"r": r}, types=("user", "item"), name=f"rmat-ratings-s{scale}")


def digits_lr() -> Bipartite:
    """scikit-learn's bundled digits (1797 samples, 8x8 pixels / 16) as a sample-feature graph.

    Only non-zero pixels are edges (about half); feature 64 is a bias (1 on every sample).
    Label: digit >= 5.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    X = sp.csr_matrix(np.column_stack([d.data / 16.0, np.ones(len(d.data))]))
    coo = X.tocoo()
    return Bipartite(X.shape[0], X.shape[1], coo.row, coo.col, {"x": coo.data},
                     a_data={"y": (d.target >= 5).astype(float)}, types=("sample", "feature"), name="digits")


def bars_corpus(n_docs: int = 500, doc_len: int = 50, grid: int = 5, alpha: float = 1.0,
                seed: int = 0) -> Bipartite:
    """Griffiths and Steyvers' "bars" corpus: ``grid**2`` words, ``2 * grid`` topics, one edge per token.

    Topic ``k < grid`` is uniform over row ``k`` of the grid, topic ``grid + k`` over column
    ``k``; a document draws ``theta ~ Dirichlet(alpha)`` and ``doc_len`` tokens. Seeded synthetic.
    """
    _int("n_docs", n_docs)
    _int("doc_len", doc_len)
    _int("grid", grid, 2)
    _positive(alpha=alpha)
    rng = np.random.default_rng(seed)
    K, V = 2 * grid, grid * grid
    phi = np.zeros((K, V))
    cell = np.arange(V).reshape(grid, grid)
    for k in range(grid):
        phi[k, cell[k]] = 1.0 / grid
        phi[grid + k, cell[:, k]] = 1.0 / grid
    theta = rng.dirichlet(np.full(K, alpha), n_docs)
    doc = np.repeat(np.arange(n_docs), doc_len)
    topic = (rng.random(doc.size)[:, None] > np.cumsum(theta[doc], 1)).sum(1).clip(0, K - 1)
    word = (rng.random(doc.size)[:, None] > np.cumsum(phi[topic], 1)).sum(1).clip(0, V - 1)
    return Bipartite(n_docs, V, doc, word, {}, a_data={}, types=("document", "word"),
                     name=f"bars-{grid}x{grid}-{n_docs}docs")


# ---- losses (shared by both forms) ---------------------------------------------------------------
def mf_rmse(g: Bipartite, P: np.ndarray, Q: np.ndarray) -> float:
    """Root mean square error over the ratings."""
    e = g.edata["r"] - np.einsum("ij,ij->i", P[g.a], Q[g.b])
    return float(np.sqrt(np.mean(e * e)))


def _design(g: Bipartite) -> sp.csr_matrix:
    return sp.csr_matrix((g.edata["x"], (g.a, g.b)), shape=(g.n_a, g.n_b))


def lr_loss(g: Bipartite, w: np.ndarray, reg: float) -> float:
    """Mean log-loss plus ``reg/2N * sum_j c_j w_j^2`` (``c_j``: samples with feature j)."""
    X = _design(g)
    z = X @ w
    y = g.a_data["y"]
    cnt = X.getnnz(axis=0)
    return float(np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * reg * np.dot(cnt, w * w) / g.n_a)


def lda_loss(nwk: np.ndarray, nk: np.ndarray, beta: float) -> float:
    """``-log p(w | z) / tokens`` (Griffiths and Steyvers 2004, eq. 2), from word-topic counts."""
    V, K = nwk.shape
    ll = K * (gammaln(V * beta) - V * gammaln(beta)) + gammaln(nwk + beta).sum() - gammaln(nk + V * beta).sum()
    return float(-ll / nk.sum())


def mf_init(n_a: int, n_b: int, rank: int, scale: float, rng: np.random.Generator):
    return rng.normal(0, scale, (n_a, rank)), rng.normal(0, scale, (n_b, rank))


# ---- TuX2 (MEGA) form ----------------------------------------------------------------------------
class MFModel:
    """Matrix factorisation's hyperparameters (checked) and initial factors, shared by the MEGA form
    below and the GAS form of :mod:`~models.systems.graph.gas`."""

    name, metric = "mf", "train RMSE"

    def __init__(self, rank: int = 8, lr: float = 0.02, reg: float = 0.02, init_scale: float = 0.1):
        _int("rank", rank)
        _positive(lr=lr, init_scale=init_scale)
        _nonneg(reg=reg)
        self.rank, self.lr, self.reg, self.init_scale = rank, lr, reg, init_scale

    def init(self, g, rng):
        P, Q = mf_init(g.n_a, g.n_b, self.rank, self.init_scale, rng)
        return {"a": {"p": P}, "b": {"q": Q}}


class MF(MFModel, MEGAProgram):
    """Matrix factorisation: Exchange sends each rating's gradient to its user and item; Apply steps."""

    @property
    def stages(self):
        return [Stage("exchange", self.gradients), Stage("apply", self.step)]

    def gradients(self, bt, view):
        p, q = view["a"]["p"][bt.a], view["b"]["q"][bt.b]
        err = (bt.edata["r"] - np.einsum("ij,ij->i", p, q))[:, None]
        return {"a": {"p": err * q - self.reg * p}, "b": {"q": err * p - self.reg * q}}

    def step(self, bt, view):
        view["a"]["p"][bt.ua] += self.lr * bt.acc["a"]["p"]
        view["b"]["q"][bt.ub] += self.lr * bt.acc["b"]["q"]

    def loss(self, g, state):
        return mf_rmse(g, state["a"]["p"], state["b"]["q"])


class LR(MEGAProgram):
    """Logistic regression: Exchange (dot products) -> Apply samples (error) -> Exchange (gradient)
    -> Apply features (step)."""

    name, metric = "lr", "log-loss"
    a_complete = True

    def __init__(self, lr: float = 1.0, reg: float = 1e-3):
        _positive(lr=lr)
        _nonneg(reg=reg)
        self.lr, self.reg = lr, reg

    def init(self, g, rng):
        return {"a": {"err": np.zeros(g.n_a)}, "b": {"w": np.zeros(g.n_b)}}

    @property
    def stages(self):
        return [Stage("exchange", self.dot), Stage("apply", self.error),
                Stage("exchange", self.gradient), Stage("apply", self.step)]

    def dot(self, bt, view):
        return {"a": {"z": bt.edata["x"] * view["b"]["w"][bt.b]}}

    def error(self, bt, view):
        view["a"]["err"][bt.ua] = expit(bt.acc["a"]["z"]) - bt.g.a_data["y"][bt.ua]

    def gradient(self, bt, view):
        w = view["b"]["w"][bt.b]
        return {"b": {"w": bt.edata["x"] * view["a"]["err"][bt.a] + self.reg * w}}

    def step(self, bt, view):
        view["b"]["w"][bt.ub] -= self.lr * bt.acc["b"]["w"] / bt.global_batch

    def loss(self, g, state):
        return lr_loss(g, state["b"]["w"], self.reg)


class LDA(MEGAProgram):
    """LDA: Exchange samples each token's topic from the counts; Apply adds count deltas to documents
    and words; GlobalSync adds them to the topic totals."""

    name, metric = "lda", "-log p(w|z) / token"

    def __init__(self, topics: int = 10, alpha: float = 0.1, beta: float = 0.01):
        _int("topics", topics, 2)
        _positive(alpha=alpha, beta=beta)
        self.K, self.alpha, self.beta = topics, alpha, beta

    def init(self, g, rng):
        z = rng.integers(0, self.K, g.m)
        ndk, nwk = np.zeros((g.n_a, self.K)), np.zeros((g.n_b, self.K))
        np.add.at(ndk, (g.a, z), 1.0)
        np.add.at(nwk, (g.b, z), 1.0)
        return {"a": {"ndk": ndk}, "b": {"nwk": nwk}, "g": {"nk": nwk.sum(0)}, "e": {"z": z}}

    @property
    def stages(self):
        return [Stage("exchange", self.sample), Stage("apply", self.add_counts), Stage("globalsync", self.totals)]

    def sample(self, bt, view):
        old = np.eye(self.K)[bt.edata["z"]]
        nd = view["a"]["ndk"][bt.a] - old
        nw = np.maximum(view["b"]["nwk"][bt.b] - old, 0.0)
        nk = np.maximum(view["g"]["nk"] - old, 0.0)
        p = (nd + self.alpha) * (nw + self.beta) / (nk + bt.g.n_b * self.beta)
        c = np.cumsum(p, axis=1)
        new = (c < bt.rng.random(len(c))[:, None] * c[:, -1:]).sum(1).clip(0, self.K - 1)
        bt.edata["z"] = new
        d = np.eye(self.K)[new] - old
        return {"a": {"ndk": d}, "b": {"nwk": d}}

    def add_counts(self, bt, view):
        view["a"]["ndk"][bt.ua] += bt.acc["a"]["ndk"]
        view["b"]["nwk"][bt.ub] += bt.acc["b"]["nwk"]

    def totals(self, bt, view):
        return {"nk": bt.acc["b"]["nwk"].sum(0)}

    def loss(self, g, state):
        return lda_loss(state["b"]["nwk"], state["g"]["nk"], self.beta)


# ---- plain numpy form ----------------------------------------------------------------------------
def plain_mf(g: Bipartite, rank=8, lr=0.02, reg=0.02, init_scale=0.1, epochs=10, batches=1, seed=0):
    """Mini-batch gradient descent MF; batches are contiguous user groups. Returns (P, Q, losses)."""
    P, Q = mf_init(g.n_a, g.n_b, rank, init_scale, np.random.default_rng(seed))
    groups = np.array_split(np.unique(g.a), batches)
    losses = [mf_rmse(g, P, Q)]
    for _ in range(epochs):
        for users in groups:
            sel = np.isin(g.a, users)
            u, i, r = g.a[sel], g.b[sel], g.edata["r"][sel]
            err = (r - np.einsum("ij,ij->i", P[u], Q[i]))[:, None]
            gp, gq = np.zeros_like(P), np.zeros_like(Q)
            np.add.at(gp, u, err * Q[i] - reg * P[u])
            np.add.at(gq, i, err * P[u] - reg * Q[i])
            P += lr * gp
            Q += lr * gq
            losses.append(mf_rmse(g, P, Q))
    return P, Q, losses


def plain_lr(g: Bipartite, lr=1.0, reg=1e-3, epochs=10, batches=1):
    """Mini-batch gradient descent logistic regression. Returns (w, losses)."""
    X, y = _design(g), g.a_data["y"]
    w = np.zeros(g.n_b)
    groups = np.array_split(np.arange(g.n_a), batches)
    losses = [lr_loss(g, w, reg)]
    for _ in range(epochs):
        for rows in groups:
            Xb = X[rows]
            err = expit(Xb @ w) - y[rows]
            w = w - lr * (Xb.T @ err + reg * Xb.getnnz(axis=0) * w) / (g.n_a / batches)
            losses.append(lr_loss(g, w, reg))
    return w, losses


def plain_lda(g: Bipartite, topics=10, alpha=0.1, beta=0.01, sweeps=10, seed=0):
    """Sequential collapsed Gibbs sampling, token by token. Returns (z, nwk, losses per sweep)."""
    rng = np.random.default_rng(seed)
    K, V = topics, g.n_b
    z = rng.integers(0, K, g.m)
    ndk, nwk = np.zeros((g.n_a, K)), np.zeros((V, K))
    np.add.at(ndk, (g.a, z), 1.0)
    np.add.at(nwk, (g.b, z), 1.0)
    nk = nwk.sum(0)
    losses = [lda_loss(nwk, nk, beta)]
    for _ in range(sweeps):
        u = rng.random(g.m)
        for t in range(g.m):
            d, w, k = g.a[t], g.b[t], z[t]
            ndk[d, k] -= 1
            nwk[w, k] -= 1
            nk[k] -= 1
            c = np.cumsum((ndk[d] + alpha) * (nwk[w] + beta) / (nk + V * beta))
            k = min(int(np.searchsorted(c, u[t] * c[-1], side="right")), K - 1)
            z[t] = k
            ndk[d, k] += 1
            nwk[w, k] += 1
            nk[k] += 1
        losses.append(lda_loss(nwk, nk, beta))
    return z, nwk, losses


ALGOS = {"mf": (MF, plain_mf), "lr": (LR, plain_lr), "lda": (LDA, plain_lda)}


# ---- line counts ---------------------------------------------------------------------------------
def code_lines(obj) -> int:
    """Lines of code of a function or class: not blank, not a comment, not a docstring."""
    src = textwrap.dedent(inspect.getsource(obj))
    tree = ast.parse(src)
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    n = 0
    for no, line in enumerate(src.splitlines(), 1):
        s = line.strip()
        if s and not s.startswith("#") and no not in doc:
            n += 1
    return n


def line_counts() -> dict:
    """Code lines of each algorithm in TuX2 form (the program class) and plain form (the function)."""
    out = {}
    for name, (cls, fn) in ALGOS.items():
        t, p = code_lines(cls), code_lines(fn)
        out[name] = {"tux2": t, "plain": p, "ratio": t / p}
    return out


# ---- study: SSP vs BSP convergence per unit of time ----------------------------------------------
def _setup(algo: str, quick: bool, seed: int):
    """Data, program, plain runner and run lengths of one algorithm for :func:`study`."""
    if algo == "mf":
        g = synthetic_ratings(300, 200, seed=seed) if quick else synthetic_ratings(800, 500, seed=seed)
        epochs, batches = (20, 5) if quick else (60, 5)
        prog = MF(lr=0.05)

        def plain(ep, bs):
            return plain_mf(g, lr=0.05, epochs=ep, batches=bs, seed=seed)[2]
    elif algo == "lr":
        g = digits_lr()
        epochs, batches = (10, 5) if quick else (40, 5)
        prog = LR(lr=0.5)

        def plain(ep, bs):
            return plain_lr(g, lr=0.5, epochs=ep, batches=bs)[1]
    elif algo == "lda":
        g = bars_corpus(150, 40, seed=seed) if quick else bars_corpus(500, 50, seed=seed)
        epochs, batches = (10, 4) if quick else (30, 4)
        prog = LDA(topics=10)

        def plain(ep, bs):
            return plain_lda(g, topics=10, sweeps=ep, seed=seed)[2]
    else:
        raise UsageError(f"Unknown algorithm {algo!r}; choose one of {', '.join(ALGOS)}")
    return g, prog, plain, epochs, batches


def _time_to(history: list, target: float, key: str):
    for h in history:
        if h["loss"] <= target:
            return h[key]
    return None


def _summary(r, scale_key: str) -> dict:
    return {"history": r.history, scale_key: r.sim_time if scale_key == "sim_time" else r.wall_time,
            "host_wall_time": r.wall_time, "wait_time": r.wait_time, "max_staleness": r.max_staleness,
            "staleness_reads": r.staleness_reads, "final_loss": r.history[-1]["loss"]}


def _speedups(runs: dict, key: str) -> float:
    """Time of each run to reach the worst final loss of all runs; speedup over BSP (key 0)."""
    target = max(v["final_loss"] for v in runs.values())
    for v in runs.values():
        v[f"{key}_to_target"] = _time_to(v["history"], target, key)
    for v in runs.values():
        v[f"{key}_speedup_vs_bsp"] = runs[0][f"{key}_to_target"] / max(v[f"{key}_to_target"], 1e-12)
    return target


@contextlib.contextmanager
def _measured_cluster(real: str, workers: int):
    """One local Dask cluster (``workers`` processes) for every ``dask`` run of a study; else None."""
    if real != "dask":
        yield None
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=40) as cluster, Client(cluster) as client:
        yield client


def study(quick: bool = True, seed: int = 0, algos=("mf", "lr", "lda"), staleness=(0, 1, 2, 4),
          workers: int | None = None, model=None, progress=None, partitioner: str = "bicut",
          epochs: int | None = None, batches: int | None = None, time_scale: float | None = None,
          threads: bool = True, real: str | None = None, real_workers: int | None = None) -> dict:
    """SSP (each ``s`` in ``staleness``) vs BSP (``s = 0``) for each algorithm, plus the plain form.

    Every configuration runs twice: in the deterministic simulation (convergence per simulated
    second of the :class:`~models.systems.graph.tux2.WorkerModel`) and, if ``threads``, with one thread
    per worker and the modelled clock durations slept for real times ``time_scale`` (convergence
    per measured host wall second, including the real SSP/BSP waiting). For each, the time every
    run needs to reach the worst final loss of all runs (a level every run reaches) and the SSP
    speedup over BSP at that level. Also the plain form's losses after the same epochs and the
    code line counts of both forms.

    ``real`` picks the measured executor: ``"threads"`` (the default when ``threads``),
    ``"processes"`` (one OS process per worker, no modelled delays: clocks last as long as the
    computation; runs under ``processes_runs``), ``"dask"`` (one task per Dask worker of a local
    cluster, masters and gate in a Dask actor; ``dask_runs``) or ``"none"``. The threads executor is a model too
    (its clocks sleep the modelled durations); only ``processes`` measures the algorithm's own
    convergence per wall second. ``real_workers``: worker count of the measured runs (default
    ``workers``; the simulated cluster may model more workers than the host has CPUs). The
    1-minute load average is recorded before and after every measured run (``loadavg_1min``).
    """
    import os
    import time

    from .tux2 import TuX2Engine, WorkerModel

    if 0 not in staleness:
        raise UsageError("staleness must include 0 (the BSP baseline)")
    real = real or ("threads" if threads else "none")
    if real not in ("threads", "processes", "dask", "none"):
        raise UsageError(f"Unknown real executor {real!r}; choose threads, processes, dask or none")
    workers = workers or (4 if quick else 8)
    real_workers = real_workers or workers
    model = model or WorkerModel(seed=seed)
    time_scale = time_scale or (10.0 if quick else 30.0)
    out = {"workers": workers, "quick": quick, "seed": seed, "model": model.__dict__.copy(),
           "real_executor": real, "real_workers": real_workers if real != "none" else None,
           "real_is_measured": real in ("processes", "dask"),
           "threads_time_scale": time_scale if real == "threads" else None, "algos": {},
           "host": {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg())},
           "line_counts": line_counts()}
    with _measured_cluster(real, real_workers) as client:
        for algo in algos:
            g, prog, plain, ep, bs = _setup(algo, quick, seed)
            ep, bs = epochs or ep, batches or bs
            eng = TuX2Engine(g, workers, model=model, seed=seed, partitioner=partitioner)
            reng = eng if real_workers == workers else TuX2Engine(g, real_workers, model=model, seed=seed,
                                                                   partitioner=partitioner)
            sim, thr = {}, {}
            for s in staleness:
                if progress:
                    progress(f"{algo}: staleness {s} (simulated)")
                sim[s] = _summary(eng.run(prog, staleness=s, epochs=ep, batches=bs), "sim_time")
                if real != "none":
                    if progress:
                        progress(f"{algo}: staleness {s} ({real})")
                    la = os.getloadavg()[0]
                    thr[s] = _summary(reng.run(prog, staleness=s, epochs=ep, batches=bs, executor=real,
                                               time_scale=time_scale, client=client), "wall_time")
                    thr[s]["loadavg_1min"] = [la, os.getloadavg()[0]]
            if progress:
                progress(f"{algo}: plain")
            t0 = time.perf_counter()
            pl = plain(ep, bs)
            plain_wall = time.perf_counter() - t0
            target = _speedups(sim, "sim_time")
            rec = {"data": {"name": g.name, "types": g.types, "n_a": g.n_a, "n_b": g.n_b, "edges": g.m},
                   "program": {k: v for k, v in vars(prog).items() if isinstance(v, (int, float))},
                   "metric": prog.metric, "epochs": ep, "batches": bs, "partitioning": eng.summary,
                   "target_loss": target, "plain": {"losses": pl, "final_loss": pl[-1], "wall_time": plain_wall},
                   "runs": {str(s): v for s, v in sim.items()}}
            if real != "none":
                rec[f"{real}_target_loss"] = _speedups(thr, "wall_time")
                rec[f"{real}_runs"] = {str(s): v for s, v in thr.items()}
                rec[f"{real}_partitioning"] = reng.summary
            out["algos"][algo] = rec
    out["host"]["loadavg_end"] = list(os.getloadavg())
    return out

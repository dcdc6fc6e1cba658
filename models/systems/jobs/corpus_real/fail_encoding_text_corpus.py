# source: https://github.com/ml5js/training-styletransfer/issues/3
# reported: UnicodeDecodeError "'utf-8' codec can't decode byte 0x92 in position 7047: invalid start byte"
#   in TextLoader.preprocess (data = f.read()) of the LSTM training
# ICSE 2020 category: Unexpected Encoding (data)
# label: failing with --data_dir lstm_input_cp1252; healthy with --data_dir lstm_input_utf8 (the text saved as UTF-8)
"""Reconstruction (numpy, written here): a character-level LSTM-style loader reads input.txt as UTF-8; the
user's text was saved in Windows-1252 (0x92 is its right single quote)."""
import argparse
import codecs
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--data_dir", default="./data")
ap.add_argument("--batch_size", type=int, default=8)
ap.add_argument("--seq_length", type=int, default=16)
ap.add_argument("--num_epochs", type=int, default=50)
args = ap.parse_args()

with codecs.open(os.path.join(args.data_dir, "input.txt"), "r", encoding="utf-8") as f:
    data = f.read()
chars = sorted(set(data))
vocab = {c: i for i, c in enumerate(chars)}
tensor = np.array([vocab[c] for c in data])
rng = np.random.default_rng(0)
E = rng.normal(scale=0.1, size=(len(chars), len(chars)))
for epoch in range(args.num_epochs):
    x, y = tensor[:-1], tensor[1:]
    z = E[x]
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    g = np.exp(logp)
    g[np.arange(len(y)), y] -= 1
    np.add.at(E, x, -0.5 * g)
    if epoch % 10 == 0:
        print("epoch", epoch, "loss", float(-logp[np.arange(len(y)), y].mean()))

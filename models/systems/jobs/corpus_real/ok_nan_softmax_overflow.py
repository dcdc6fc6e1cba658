# source: https://github.com/daniel89710/lightNet/issues/2
# reported: the loss becomes NaN from the second iteration ("softmaxcost nan,nan"); the stable form
#   subtracts the row maximum (log-sum-exp)
# ICSE 2020 category: Loss NaN (deep learning specific)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): numerically stable softmax and cross-entropy."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--epochs", type=int, default=100)
ap.add_argument("--batch-size", type=int, default=64)
args = ap.parse_args()
rng = np.random.default_rng(0)
X = rng.normal(size=(2048, 256)) * 4
y = rng.integers(0, 10, size=2048)
W = rng.normal(scale=0.1, size=(256, 10))
it = 0
for _epoch in range(args.epochs):
    for i in range(0, len(X), args.batch_size):
        xb, yb = X[i:i + args.batch_size], y[i:i + args.batch_size]
        z = xb @ W
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        cost = float(-logp[np.arange(len(yb)), yb].mean())
        print(f"iter {it} softmaxcost {cost:.4f}")
        g = np.exp(logp)
        g[np.arange(len(yb)), yb] -= 1
        W -= args.lr * xb.T @ g / len(yb)
        it += 1

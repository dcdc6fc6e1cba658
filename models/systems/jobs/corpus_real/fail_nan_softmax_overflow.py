# source: https://github.com/daniel89710/lightNet/issues/2
# reported: the loss becomes NaN from the second iteration ("softmaxcost nan,nan")
# ICSE 2020 category: Loss NaN (deep learning specific)
# label: failing
"""Reconstruction (numpy, written here): softmax computed as exp(z) / sum(exp(z)) without subtracting the
maximum; after the first (large) update the logits overflow exp."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=50.0)
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
        e = np.exp(xb @ W)
        p = e / e.sum(1, keepdims=True)
        cost = float(-np.log(p[np.arange(len(yb)), yb]).mean())
        print(f"iter {it} softmaxcost {cost:.4f}")
        g = p.copy()
        g[np.arange(len(yb)), yb] -= 1
        W -= args.lr * xb.T @ g / len(yb)
        it += 1

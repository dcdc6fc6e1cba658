# jobcheck-expect: numeric
# jobcheck-args: --batch-size 128 --lr 5.0
"""Broken: naive softmax (no max subtraction) with a large init scale and learning rate: exp overflows."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=128)
ap.add_argument("--lr", type=float, default=0.1)
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 500))
rng = np.random.default_rng(0)
X = rng.normal(size=(1024, 64)) * 10
y = X[:, :10].argmax(1)
W = rng.normal(scale=3.0, size=(64, 10))
for s in range(steps):
    idx = rng.integers(0, len(X), a.batch_size)
    z = X[idx] @ W
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(idx)), y[idx]]).mean()
    g = p.copy()
    g[np.arange(len(idx)), y[idx]] -= 1
    W -= a.lr * X[idx].T @ g / len(idx)
    print(f"step {s} loss {loss}")

# jobcheck-expect: numeric
# jobcheck-args: --batch-size 64 --epochs 20 --lr 0.5
"""Broken: standardises the digits by their std without an epsilon. Eight pixel columns are
constant (std 0): 0/0 gives NaN features, so every logit, the loss and the weights become NaN
from the first step (a data-preprocessing defect; the run would go on for hours printing nan).
"""
import argparse
import os

import numpy as np
from sklearn.datasets import load_digits

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=64)
ap.add_argument("--epochs", type=int, default=20)
ap.add_argument("--lr", type=float, default=0.5)
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))

d = load_digits()
rng = np.random.default_rng(0)
tr = rng.permutation(len(d.target))[:1400]
X = (d.data - d.data[tr].mean(0)) / d.data[tr].std(0)
y = d.target
W = np.zeros((X.shape[1], 10))
step = 0
for ep in range(a.epochs):
    for i in range(0, len(tr), a.batch_size):
        idx = tr[i:i + a.batch_size]
        z = X[idx] @ W
        z = z - z.max(1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(idx)), y[idx]] + 1e-12).mean()
        g = p
        g[np.arange(len(idx)), y[idx]] -= 1
        W -= a.lr * X[idx].T @ g / len(idx)
        step += 1
        if step >= steps:
            break
    print(f"epoch {ep} loss {loss:.4f}")
    if step >= steps:
        break

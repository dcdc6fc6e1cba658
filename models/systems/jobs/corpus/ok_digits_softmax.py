# jobcheck-expect: ok
# jobcheck-args: --batch-size 64 --epochs 20 --lr 0.5 --out /tmp/hwcosim_jobcheck_ok_digits.npz
"""Correct: softmax regression on scikit-learn's digits (shipped with the package, no download).

Train/validation split, standardisation with an epsilon (8 pixel columns of the digits are
constant: their std is 0), mini-batch SGD with weight decay, validation accuracy each epoch,
a checkpoint of the best epoch.
"""
import argparse
import os

import numpy as np
from sklearn.datasets import load_digits

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=64)
ap.add_argument("--epochs", type=int, default=20)
ap.add_argument("--lr", type=float, default=0.5)
ap.add_argument("--weight-decay", type=float, default=1e-4)
ap.add_argument("--out", default="/tmp/hwcosim_jobcheck_ok_digits.npz")
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))

d = load_digits()
rng = np.random.default_rng(0)
perm = rng.permutation(len(d.target))
tr, va = perm[:1400], perm[1400:]
mu, sd = d.data[tr].mean(0), d.data[tr].std(0)
X = (d.data - mu) / (sd + 1e-8)
y = d.target
W = np.zeros((X.shape[1], 10))
b = np.zeros(10)
best, step = -1.0, 0
for ep in range(a.epochs):
    rng.shuffle(tr)
    for i in range(0, len(tr), a.batch_size):
        idx = tr[i:i + a.batch_size]
        z = X[idx] @ W + b
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(idx)), y[idx]] + 1e-12).mean()
        g = p
        g[np.arange(len(idx)), y[idx]] -= 1
        g /= len(idx)
        W -= a.lr * (X[idx].T @ g + a.weight_decay * W)
        b -= a.lr * g.sum(0)
        step += 1
        if step >= steps:
            break
    acc = float(((X[va] @ W + b).argmax(1) == y[va]).mean())
    print(f"epoch {ep} loss {loss:.4f} val_acc {acc:.3f}")
    if acc > best:
        best = acc
        np.savez(a.out, W=W, b=b, mu=mu, sd=sd)
    if step >= steps:
        break
print(f"best val_acc {best:.3f}")

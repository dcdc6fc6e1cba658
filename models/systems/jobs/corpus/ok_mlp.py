# jobcheck-expect: ok
# jobcheck-args: --batch-size 256 --epochs 3 --out /tmp/hwcosim_jobcheck_ok_mlp.npz
"""Correct: two-layer MLP, softmax cross-entropy with log-sum-exp, SGD."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=128)
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--out", default="/tmp/hwcosim_jobcheck_ok_mlp.npz")
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))
rng = np.random.default_rng(0)
X = rng.normal(size=(2048, 64))
y = X[:, :10].argmax(1)
W1 = rng.normal(scale=0.1, size=(64, 128))
W2 = rng.normal(scale=0.1, size=(128, 10))
step = 0
for ep in range(a.epochs):
    for i in range(0, len(X), a.batch_size):
        xb, yb = X[i:i + a.batch_size], y[i:i + a.batch_size]
        h = np.maximum(xb @ W1, 0)
        z = h @ W2
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(yb)), yb] + 1e-12).mean()
        g = p
        g[np.arange(len(yb)), yb] -= 1
        g /= len(yb)
        gW2 = h.T @ g
        gh = (g @ W2.T) * (h > 0)
        W1 -= a.lr * (xb.T @ gh)
        W2 -= a.lr * gW2
        step += 1
        if step >= steps:
            break
    print(f"epoch {ep} loss {loss:.4f}")
    if step >= steps:
        break
np.savez(a.out, W1=W1, W2=W2)

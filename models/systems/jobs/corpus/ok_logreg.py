# jobcheck-expect: ok
"""Correct: logistic regression with a numerically stable sigmoid, BATCH_SIZE constant."""
import os

import numpy as np

BATCH_SIZE = 512
bs = int(os.environ.get("HWCOSIM_BATCH", BATCH_SIZE))
steps = int(os.environ.get("HWCOSIM_STEPS", 200))
rng = np.random.default_rng(1)
X = rng.normal(size=(4096, 32))
y = (X @ rng.normal(size=32) > 0).astype(np.float64)
w = np.zeros(32)
for _ in range(steps):
    idx = rng.integers(0, len(X), bs)
    z = X[idx] @ w
    p = np.where(z >= 0, 1 / (1 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1 + np.exp(-np.abs(z))))
    loss = np.mean(np.logaddexp(0, z) - y[idx] * z)
    w -= 0.5 * X[idx].T @ (p - y[idx]) / bs
print(f"loss {loss:.4f}")

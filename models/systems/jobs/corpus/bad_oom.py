# jobcheck-expect: memory
# jobcheck-args: --batch-size 262144
"""Broken: a wide MLP with a huge batch: ~100 KiB per sample, ~25 GiB at batch 262,144 (device 16 GiB)."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=256)
ap.add_argument("--epochs", type=int, default=10)
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))
rng = np.random.default_rng(0)
W1 = rng.normal(scale=0.01, size=(1024, 8192)).astype(np.float32)
W2 = rng.normal(scale=0.01, size=(8192, 10)).astype(np.float32)
for _ in range(min(steps, 1000)):
    xb = rng.normal(size=(a.batch_size, 1024)).astype(np.float32)
    h1 = xb @ W1
    h = np.maximum(h1, 0)
    z = h @ W2
    g = (z - z.mean()) / a.batch_size
    gh = (g @ W2.T) * (h1 > 0)
    W1 -= 1e-3 * (xb.T @ gh)
    W2 -= 1e-3 * (h.T @ g)
print("done")

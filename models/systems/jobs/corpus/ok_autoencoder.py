# jobcheck-expect: ok
# jobcheck-args: --batch-size 64 --steps 100
"""Correct: linear autoencoder trained with Adam-free momentum SGD, reads its data with np.load."""
import argparse
import os
import tempfile

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=64)
ap.add_argument("--steps", type=int, default=100)
a = ap.parse_args()
rng = np.random.default_rng(2)
path = os.path.join(tempfile.gettempdir(), "hwcosim_jobcheck_ae.npy")
np.save(path, rng.normal(size=(1024, 48)) @ rng.normal(size=(48, 48)) * 0.2)
X = np.load(path)
E = rng.normal(scale=0.1, size=(48, 8))
D = rng.normal(scale=0.1, size=(8, 48))
vE, vD = np.zeros_like(E), np.zeros_like(D)
for _ in range(a.steps):
    xb = X[rng.integers(0, len(X), a.batch_size)]
    code = xb @ E
    err = code @ D - xb
    loss = float((err ** 2).mean())
    gD = code.T @ err / len(xb)
    gE = xb.T @ (err @ D.T) / len(xb)
    vE = 0.9 * vE + gE
    vD = 0.9 * vD + gD
    E -= 0.01 * vE
    D -= 0.01 * vD
print(f"loss {loss:.4f}")

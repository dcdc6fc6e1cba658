# jobcheck-expect: shape
# jobcheck-args: --batch-size 64
"""Broken: the second layer is declared for hidden + 1 inputs (a bias row never appended)."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=64)
ap.add_argument("--hidden", type=int, default=100)
a = ap.parse_args()
rng = np.random.default_rng(0)
X = rng.normal(size=(512, 64))
W1 = rng.normal(scale=0.1, size=(64, a.hidden))
W2 = rng.normal(scale=0.1, size=(a.hidden + 1, 10))
for i in range(0, len(X), a.batch_size):
    h = np.tanh(X[i:i + a.batch_size] @ W1)
    z = h @ W2
print(z.shape)

# jobcheck-expect: api
"""Broken: reshape and astype results are thrown away; training silently runs on the wrong view."""
import os

import numpy as np

bs = int(os.environ.get("HWCOSIM_BATCH", 32))
rng = np.random.default_rng(0)
X = rng.integers(0, 17, size=(512, 64))
X.astype(np.float64)
X.reshape(-1, 8, 8)
w = np.zeros(64)
for s in range(int(os.environ.get("HWCOSIM_STEPS", 20))):
    xb = X[s * bs:(s + 1) * bs]
    w += 1e-3 * xb.mean(0)
print(w.sum())

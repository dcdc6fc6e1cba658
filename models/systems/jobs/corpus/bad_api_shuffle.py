# jobcheck-expect: api
"""Broken: np.random.shuffle works in place and returns None; the result is used as the index."""
import os

import numpy as np

bs = int(os.environ.get("HWCOSIM_BATCH", 64))
rng = np.random.default_rng(0)
X = rng.normal(size=(256, 8))
idx = np.arange(len(X))
for _ in range(int(os.environ.get("HWCOSIM_STEPS", 3))):
    idx = np.random.shuffle(idx)
    xb = X[idx[:bs]]
print(xb.shape)

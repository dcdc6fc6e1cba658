# source: https://github.com/aeye-lab/etra-reading-comprehension/issues/15
# reported: ModuleNotFoundError "No module named 'utils'"; fixed (#16) by importing through the package path
# ICSE 2020 category: Library Not Found (execution environment)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): the helper is imported through its package."""
import numpy as np
from etra.feature_extraction import features

rng = np.random.default_rng(0)
X = features(rng.normal(size=(256, 40)))
y = (X[:, 0] > 0).astype(float)
w = np.zeros(2)
for epoch in range(20):
    p = 1 / (1 + np.exp(-(X @ w)))
    w -= 0.5 * X.T @ (p - y) / len(y)
    print("epoch", epoch, "acc", float(((p > 0.5) == y).mean()))

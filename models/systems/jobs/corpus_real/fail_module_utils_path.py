# source: https://github.com/aeye-lab/etra-reading-comprehension/issues/15
# reported: ModuleNotFoundError "No module named 'utils'" when running python nn/train_model.py
# ICSE 2020 category: Library Not Found (execution environment)
# label: failing
"""Reconstruction (numpy, written here): the helper module lives one folder away (etra/), but is imported
as a top-level module, which only works from the author's working folder and PYTHONPATH."""
import numpy as np
from feature_extraction import features

rng = np.random.default_rng(0)
X = features(rng.normal(size=(256, 40)))
y = (X[:, 0] > 0).astype(float)
w = np.zeros(2)
for epoch in range(20):
    p = 1 / (1 + np.exp(-(X @ w)))
    w -= 0.5 * X.T @ (p - y) / len(y)
    print("epoch", epoch, "acc", float(((p > 0.5) == y).mean()))

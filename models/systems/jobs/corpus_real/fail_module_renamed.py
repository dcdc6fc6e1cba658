# source: https://github.com/TruongKhang/DeViLoc/issues/2
# reported: ModuleNotFoundError "No module named 'vlocnext'" when running train.py (the package had been renamed)
# ICSE 2020 category: Library Not Found (execution environment)
# label: failing
"""Reconstruction (numpy, written here): the training script still imports the package under its old name."""
import numpy as np
from vlocnext.matcher import DenseMatcher

rng = np.random.default_rng(0)
m = DenseMatcher(dim=32)
for step in range(100):
    a, b = rng.normal(size=(64, 32)), rng.normal(size=(64, 32))
    print("step", step, "loss", m.loss(a, b))

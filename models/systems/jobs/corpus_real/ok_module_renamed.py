# source: https://github.com/TruongKhang/DeViLoc/issues/2
# reported: ModuleNotFoundError "No module named 'vlocnext'"; fixed by importing the renamed package
# ICSE 2020 category: Library Not Found (execution environment)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): imports the package under its new name (deviloc/, beside it)."""
import numpy as np
from deviloc.matcher import DenseMatcher

rng = np.random.default_rng(0)
m = DenseMatcher(dim=32)
for step in range(100):
    a, b = rng.normal(size=(64, 32)), rng.normal(size=(64, 32))
    print("step", step, "loss", m.loss(a, b))

# jobcheck-expect: path
# jobcheck-args: --batch-size 128
"""Broken: the default dataset path is not there (relative to the job's working directory)."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="data/philly/train_features.npz")
ap.add_argument("--batch-size", type=int, default=128)
a = ap.parse_args()
d = np.load(a.data)
X, y = d["x"], d["y"]
print(X.shape)

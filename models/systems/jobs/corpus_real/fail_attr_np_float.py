# source: https://github.com/thuml/Transfer-Learning-Library/issues/253
# reported: AttributeError "module 'numpy' has no attribute 'float'" (np.float was removed in NumPy 1.24)
# ICSE 2020 category: Attribute Not Found (general code error)
# label: failing on NumPy >= 1.24
"""Reconstruction (numpy, written here): the accuracy meter converts counts with np.float."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=20)
ap.add_argument("--batch-size", type=int, default=32)
args = ap.parse_args()


def accuracy(output, target):
    correct = (output.argmax(1) == target).sum()
    return np.float(correct) / len(target) * 100.0


rng = np.random.default_rng(0)
X = rng.normal(size=(512, 16))
y = (X[:, 0] > 0).astype(int)
W = np.zeros((16, 2))
for epoch in range(args.epochs):
    for i in range(0, len(X), args.batch_size):
        xb, yb = X[i:i + args.batch_size], y[i:i + args.batch_size]
        z = xb @ W
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        acc = accuracy(z, yb)
        p[np.arange(len(yb)), yb] -= 1
        W -= 0.1 * xb.T @ p / len(yb)
    print("epoch", epoch, "acc", acc)

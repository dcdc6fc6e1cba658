# source: https://github.com/milesial/Pytorch-UNet/issues/405
# reported: "CUDA error: device-side assert triggered" after switching data sets; the maintainer: an
#   indexing issue, class indices must start at 0
# ICSE 2020 category: Illegal Index (general code error)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): the masks are shifted to 0..n_classes-1 before training."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--classes", type=int, default=2)
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--batch-size", type=int, default=8)
args = ap.parse_args()
rng = np.random.default_rng(0)
imgs = rng.normal(size=(64, 3, 16, 16))
masks = rng.integers(1, args.classes + 1, size=(64, 16, 16)) - 1  # label values 1, 2 -> classes 0, 1
W = rng.normal(scale=0.1, size=(3, args.classes))
for epoch in range(args.epochs):
    for i in range(0, len(imgs), args.batch_size):
        x = imgs[i:i + args.batch_size].transpose(0, 2, 3, 1).reshape(-1, 3)
        t = masks[i:i + args.batch_size].reshape(-1)
        z = x @ W
        logp = z - z.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        loss = -logp[np.arange(len(t)), t].mean()
        g = np.exp(logp)
        g[np.arange(len(t)), t] -= 1
        W -= 0.1 * x.T @ g / len(t)
    print("epoch", epoch, "loss", float(loss))

# source: https://github.com/debajyotikarmaker/cvpr_4234/issues/15
# reported: MemoryError "Unable to allocate 12.5 GiB ..." loading the whole image set; the usual fix is to
#   load per batch (a generator) instead of one array
# ICSE 2020 category: CPU Out of Memory (deep learning specific)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): images are produced batch by batch."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=64)
ap.add_argument("--epochs", type=int, default=2)
args = ap.parse_args()
N_IMAGES, H, W = 87000, 227, 227
rng = np.random.default_rng(0)
w = np.zeros(3)


def batches(bs):
    for i in range(0, min(N_IMAGES, 4 * bs), bs):
        yield rng.integers(0, 255, size=(bs, H, W, 3), dtype=np.uint8), np.arange(i, i + bs) % 29


for epoch in range(args.epochs):
    for xb, yb in batches(args.batch_size):
        feat = xb.reshape(len(xb), -1, 3).mean(1) / 255.0
        w -= 0.1 * feat.T @ (feat @ w - yb / 29.0) / len(xb)
    print("epoch", epoch, "w", w.round(3))

# source: https://github.com/karpathy/nanoGPT/issues/136
# reported: "loss: nan" after about 2000 iterations (block size changed, float16 on V100); fixed by a lower
#   learning rate
# ICSE 2020 category: Loss NaN (deep learning specific)
# label: failing with --learning_rate 6e-4 (the default); healthy with --learning_rate 1e-4 (the fix)
"""Reconstruction (numpy, written here): a float16 model whose loss diverges slowly at the default
learning rate and overflows to inf/NaN after about two thousand iterations; nanoGPT-style options
(--key=value)."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--learning_rate", type=float, default=6e-4)
ap.add_argument("--max_iters", type=int, default=600000)
ap.add_argument("--block_size", type=int, default=512)
ap.add_argument("--dtype", default="float16")
args = ap.parse_args()
dt = np.dtype(args.dtype)
rng = np.random.default_rng(0)
# curvature of the loss along one direction: at 6e-4, lr * curvature = 2.0044, so the iterate grows by
# 0.44% per step and the float16 loss overflows after about two thousand iterations (as reported)
curv = np.float64(2.0044 / 6e-4)
w = np.array(1e-3, dtype=dt)
for it in range(args.max_iters):
    g = np.asarray(curv * w, dtype=dt)
    w = np.asarray(w - args.learning_rate * g, dtype=dt)
    loss = np.asarray(0.5 * curv * w * w, dtype=dt)
    if it % 100 == 0:
        print(f"iter {it}: loss {float(loss):.4f}")

# source: https://github.com/ultralytics/yolov3/issues/491
# reported: RuntimeError "CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total capacity;
#   1.62 GiB already allocated; 23.00 MiB free)" with the default --batch-size 32 --accumulate 2
# ICSE 2020 category: GPU Out of Memory (deep learning specific)
# label: failing
"""Reconstruction (numpy, written here) of the memory footprint, every byte count divided by SCALE so that
the dry run allocates megabytes, not gigabytes (the corpus index gives the device memory divided the same way).

Footprint m(b) = fixed + per_sample * b: fixed = YOLOv3's 62 M fp32 parameters with gradient and SGD
momentum (3 x 248 MB); per_sample = the smallest value for which batch 32 needs the 1.96 GiB the report
shows (1.62 GiB allocated + 338 MiB requested), times 1.25 (the report gives no upper bound)."""
import argparse

import numpy as np

SCALE = 256
FIXED = 3 * 62e6 * 4 / SCALE
PER_SAMPLE = 1.25 * ((1.62 + 338 / 1024) * 2**30 - 3 * 62e6 * 4) / 32 / SCALE

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=273)
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--accumulate", type=int, default=2)
ap.add_argument("--img-size", type=int, default=416)
args = ap.parse_args()

params = [np.zeros(int(FIXED / 3 / 4), np.float32) for _ in range(3)]  # weights, gradients, momentum
n_images = 64
for epoch in range(args.epochs):
    for i in range(0, n_images, args.batch_size):
        b = min(args.batch_size, n_images - i)
        acts = [np.ones(int(PER_SAMPLE / 4 / 8) * b, np.float32) for _ in range(8)]  # 8 stages kept for backward
        loss = float(sum(a[:16].sum() for a in acts)) / 1e3
        params[1] += 1e-6
        del acts
    print(f"epoch {epoch} loss {loss:.3f}")

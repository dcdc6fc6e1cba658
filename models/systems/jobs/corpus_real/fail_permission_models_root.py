# source: https://github.com/hx173149/C3D-tensorflow/issues/105
# reported: PermissionDeniedError "/models; Permission denied" when saving the checkpoint after training
# ICSE 2020 category: Permission Denied (execution environment)
# label: failing
"""Reconstruction (numpy, written here): the checkpoint prefix is an absolute path at the root of the
file system; the saver creates its folder after training."""
import os

import numpy as np

MODEL_PREFIX = "/models/c3d_ucf_model-4999"
rng = np.random.default_rng(0)
w1, w2 = rng.normal(size=10), rng.normal(size=20)
for step in range(5000):
    w1 *= 0.999
    w2 *= 0.999
    if step % 1000 == 0:
        print("step", step, "loss", float((w1 ** 2).sum() + (w2 ** 2).sum()))
os.makedirs(os.path.dirname(MODEL_PREFIX), exist_ok=True)
np.savez(MODEL_PREFIX + ".npz", w1=w1, w2=w2)

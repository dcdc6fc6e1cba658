# jobcheck-expect: permission
# jobcheck-args: --batch-size 32 --save-dir /sys/hwcosim-checkpoints/run7
"""Broken: checkpoints go to a folder the job cannot write."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--save-dir", default="checkpoints")
a = ap.parse_args()
w = np.random.default_rng(0).normal(size=(16, 4))
os.makedirs(a.save_dir, exist_ok=True)
np.save(os.path.join(a.save_dir, "w.npy"), w)

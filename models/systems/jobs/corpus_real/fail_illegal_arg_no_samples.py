# source: https://github.com/yichaojie/MobileNetV3/issues/1
# reported: ValueError "num_samples should be a positive integer value, but got num_samples=0" at
#   DataLoader(dataset=train_data, batch_size=BATCH_SIZE, shuffle=True); the data set only lists *.jpg
#   files and the user's images are another format
# ICSE 2020 category: Illegal Argument (general code error)
# label: failing with the default --ext jpg; healthy with --ext png (the images' real format)
"""Reconstruction (numpy, written here): the data set lists files by extension; shuffled batches are drawn
from it (numpy's Generator.choice refuses an empty population, as torch's RandomSampler refuses
num_samples=0)."""
import argparse
import glob
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="data_png/train")
ap.add_argument("--ext", default="jpg")
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--batch-size", type=int, default=2)
args = ap.parse_args()
files = sorted(glob.glob(os.path.join(args.data, f"*.{args.ext}")))
labels = np.array([0 if os.path.basename(f).startswith("cat") else 1 for f in files])
rng = np.random.default_rng(0)
w = 0.0
for epoch in range(args.epochs):
    for _step in range(max(1, len(files) // args.batch_size)):
        idx = rng.choice(len(files), size=args.batch_size, replace=len(files) < args.batch_size)
        w -= 0.1 * float((w - labels[idx]).mean())
    print("epoch", epoch, "w", round(w, 3))

# source: https://github.com/cunjunyu/VSNet/issues/2
# reported: NameError "name 'fyp_dataset' is not defined" at train.py line 71
# ICSE 2020 category: Undefined Variable (general code error)
# label: failing
"""Reconstruction (numpy, written here): the data set class is referenced under a name the published
code never defines (it lived in the author's local module)."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=50)
ap.add_argument("--batch-size", type=int, default=8)
args = ap.parse_args()


class VSDataset:
    def __init__(self, n, rng):
        self.x = rng.normal(size=(n, 16))

    def __len__(self):
        return len(self.x)


rng = np.random.default_rng(0)
train_set = fyp_dataset(256, rng)  # noqa: F821 - the report's bug
for epoch in range(args.epochs):
    print("epoch", epoch, len(train_set))

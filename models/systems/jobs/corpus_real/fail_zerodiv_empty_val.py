# source: https://github.com/Suanmd/TR-MISR/issues/2
# reported: ZeroDivisionError at "val_score /= len(dataloaders['val'].dataset)" after the first training
#   epoch (nothing in the split_data/val folder)
# ICSE 2020 category: Division by Zero (general code error)
# label: failing
"""Reconstruction (numpy, written here): training runs over the train split; at the end of the first
epoch the validation loop averages over an empty validation split."""
import glob
import os

import numpy as np

config = {"paths": {"prefix": "./split_data"}, "training": {"num_epochs": 400, "batch_size": 4, "lr": 0.0007}}
rng = np.random.default_rng(0)
train = [rng.normal(size=(9, 32)) for _ in range(64)]
val = sorted(glob.glob(os.path.join(config["paths"]["prefix"], "val", "imgset*")))
w = np.zeros(32)
for epoch in range(config["training"]["num_epochs"]):
    for i in range(0, len(train), config["training"]["batch_size"]):
        for lrs in train[i:i + config["training"]["batch_size"]]:
            sr = lrs.mean(0)
            w -= config["training"]["lr"] * (w - sr)
    val_score = 0.0
    for _name in val:
        val_score += float(np.abs(w).mean())
    val_score /= len(val)
    print("epoch", epoch, "val cPSNR", val_score)

# source: https://github.com/acids-ircam/ddsp_pytorch/issues/34
# reported: ZeroDivisionError at "epochs = int(np.ceil(args.STEPS / len(dataloader)))": len(dataloader) is 0
# ICSE 2020 category: Division by Zero (general code error)
# label: failing
"""Reconstruction (numpy, written here): the data set is the preprocessed folder named in the config; the
user's preprocessing wrote nothing there (wrong data location), so the loader is empty."""
import argparse
import glob
import os

import numpy as np

config = {"data": {"data_location": "./data/", "extension": "wav"},
          "preprocess": {"out_dir": "./preprocessed/", "sampling_rate": 16000, "block_size": 256}}
ap = argparse.ArgumentParser()
ap.add_argument("--STEPS", type=int, default=500000)
ap.add_argument("--BATCH", type=int, default=16)
args = ap.parse_args()
files = sorted(glob.glob(os.path.join(config["preprocess"]["out_dir"], "*.npy")))
dataloader = [files[i:i + args.BATCH] for i in range(0, len(files), args.BATCH)]
epochs = int(np.ceil(args.STEPS / len(dataloader)))
for e in range(epochs):
    for batch in dataloader:
        sig = np.concatenate([np.load(f) for f in batch])
        print("epoch", e, "loss", float((sig ** 2).mean()))

# source: https://github.com/acids-ircam/ddsp_pytorch/issues/34
# reported: ZeroDivisionError, len(dataloader) is 0; the fix: run preprocessing on the right data location
# ICSE 2020 category: Division by Zero (general code error)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): preprocessing writes the blocks first (synthetic signals stand for
the user's audio), then training reads them."""
import argparse
import glob
import os

import numpy as np

config = {"preprocess": {"out_dir": "./preprocessed/", "sampling_rate": 16000, "block_size": 256}}
ap = argparse.ArgumentParser()
ap.add_argument("--STEPS", type=int, default=40)
ap.add_argument("--BATCH", type=int, default=16)
args = ap.parse_args()
out = config["preprocess"]["out_dir"]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for k in range(32):
    np.save(os.path.join(out, f"block_{k:03d}.npy"), rng.normal(size=config["preprocess"]["block_size"]))
files = sorted(glob.glob(os.path.join(out, "*.npy")))
dataloader = [files[i:i + args.BATCH] for i in range(0, len(files), args.BATCH)]
epochs = int(np.ceil(args.STEPS / len(dataloader)))
for e in range(epochs):
    for batch in dataloader:
        sig = np.concatenate([np.load(f) for f in batch])
    print("epoch", e, "loss", float((sig ** 2).mean()))

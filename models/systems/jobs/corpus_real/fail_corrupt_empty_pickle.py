# source: https://github.com/chsasank/ATIS.keras/issues/3
# reported: EOFError "Ran out of input" at "train_set, test_set, dicts = pickle.load(f)": atis.pkl was
#   empty after a failed download
# ICSE 2020 category: Corrupt Data (data)
# label: failing (atis_full.pkl here is the empty file the failed download left)
"""Reconstruction (numpy, written here): the loader downloads the pickle only when the file is missing,
so an empty file left by an interrupted download is loaded as if complete."""
import argparse
import os
import pickle

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="atis_full.pkl")
ap.add_argument("--epochs", type=int, default=20)
args = ap.parse_args()


def atisfull(filename):
    if not os.path.exists(filename):
        raise FileNotFoundError(f"{filename}: download it first")
    with open(filename, "rb") as f:
        return pickle.load(f)


train_set, test_set, dicts = atisfull(args.data)
rng = np.random.default_rng(0)
for epoch in range(args.epochs):
    print("epoch", epoch, "sentences", len(train_set[0]))

# source: https://github.com/Sachini/ronin/issues/50
# reported: UnicodeDecodeError "'utf-8' codec can't decode byte 0x89 in position 0: invalid start byte" in
#   get_dataset_from_list: --train_list was given the data file (data.hdf5), not the list of sequences
# ICSE 2020 category: Unexpected Encoding (data)
# label: failing with --train_list ronin_a027_data.hdf5; healthy with --train_list ronin_list_train.txt
"""Reconstruction (numpy, written here): the sequence list is read as text lines."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="train")
ap.add_argument("--train_list", default="lists/list_train.txt")
ap.add_argument("--root_dir", default=".")
ap.add_argument("--out_dir", default="./ronin_out")
ap.add_argument("--epochs", type=int, default=5)
args = ap.parse_args()

with open(args.train_list) as f:
    data_list = [s.strip().split(",")[0] for s in f.readlines() if len(s) > 0 and s[0] != "#"]
rng = np.random.default_rng(0)
seqs = {name: rng.normal(size=(200, 6)) for name in data_list}
w = np.zeros((6, 2))
for epoch in range(args.epochs):
    for _name, imu in seqs.items():
        vel = imu[:, :2]
        w -= 0.01 * imu.T @ (imu @ w - vel) / len(imu)
    print("epoch", epoch, "sequences", len(seqs))

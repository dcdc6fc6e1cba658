# source: https://github.com/OrigamiSL/FDNet/issues/5
# reported: FileNotFoundError "No such file or directory: './checkpoints/FDNet_ETTh1_ftM_ll672_pl720_0/checkpoint.pth'"
# ICSE 2020 category: Path Not Found (execution environment)
# label: failing without --train (no checkpoint was ever written); healthy with --train (the maintainer's answer)
"""Reconstruction (numpy, written here): train only when --train is given, then always test from the
checkpoint file of the run's setting."""
import argparse
import os
import pickle

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--train", action="store_true")
ap.add_argument("--data", default="ETTh1")
ap.add_argument("--features", default="M")
ap.add_argument("--input_len", type=int, default=672)
ap.add_argument("--pred_len", type=int, default=720)
ap.add_argument("--checkpoints", default="./checkpoints/")
ap.add_argument("--epochs", type=int, default=10)
args = ap.parse_args()

setting = f"FDNet_{args.data}_ft{args.features}_ll{args.input_len}_pl{args.pred_len}_0"
path = os.path.join(args.checkpoints, setting)
rng = np.random.default_rng(0)
series = np.sin(np.arange(4000) / 24.0) + 0.1 * rng.normal(size=4000)
n_in, n_out = args.input_len // 32, args.pred_len // 32
idx = np.arange(0, len(series) - n_in - n_out, 7)
Xs = np.stack([series[i:i + n_in] for i in idx])
Ys = np.stack([series[i + n_in:i + n_in + n_out] for i in idx])
if args.train:
    W = np.zeros((n_in, n_out))
    for epoch in range(args.epochs):
        W -= 0.01 * Xs.T @ (Xs @ W - Ys) / len(Xs)
        print(f"epoch {epoch} loss {float(((Xs @ W - Ys) ** 2).mean()):.4f}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "checkpoint.pth"), "wb") as f:
        pickle.dump({"W": W}, f)
with open(os.path.join(path, "checkpoint.pth"), "rb") as f:
    W = pickle.load(f)["W"]
print("test mse", float(((Xs @ W - Ys) ** 2).mean()))

# source: https://github.com/kuangliu/pytorch-cifar/issues/63
# reported: FileNotFoundError "No such file or directory: './checkpoint/ckpt.t7'" on a first run with --resume
# ICSE 2020 category: Path Not Found (execution environment)
# label: failing with --resume on a first run; healthy without it (the fix given in the thread)
"""Reconstruction (numpy, written here): a classifier that resumes from ./checkpoint when asked to,
and saves its best weights there after each epoch."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--resume", "-r", action="store_true", help="resume from checkpoint")
ap.add_argument("--epochs", type=int, default=200)
args = ap.parse_args()

rng = np.random.default_rng(0)
X = rng.normal(size=(1024, 32))
y = (X[:, :4].sum(1) > 0).astype(int)
W = np.zeros((32, 2))
best_acc, start_epoch = 0.0, 0
if args.resume:
    print("==> Resuming from checkpoint..")
    ckpt = np.load("./checkpoint/ckpt.npz")
    W, best_acc, start_epoch = ckpt["W"], float(ckpt["acc"]), int(ckpt["epoch"])

for epoch in range(start_epoch, start_epoch + args.epochs):
    for i in range(0, len(X), 128):
        xb, yb = X[i:i + 128], y[i:i + 128]
        z = xb @ W
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(yb)), yb] -= 1
        W -= args.lr * xb.T @ p / len(yb)
    acc = float(((X @ W).argmax(1) == y).mean())
    print(f"epoch {epoch} acc {acc:.3f}")
    if acc > best_acc:
        if not os.path.isdir("checkpoint"):
            os.mkdir("checkpoint")
        np.savez("./checkpoint/ckpt.npz", W=W, acc=acc, epoch=epoch)
        best_acc = acc

# source: https://github.com/rpmsnu/PrimA6D/issues/4
# reported: NameError "name 'reconst' is not defined" at "log_loss_ = log_loss(reconst_out, reconst)" in
#   train(), right after the first logged iteration
# ICSE 2020 category: Undefined Variable (general code error)
# label: failing
"""Reconstruction (numpy, written here): the training step logs a loss on a variable renamed elsewhere."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("-o", "--obj", type=int, default=1)
ap.add_argument("--epochs", type=int, default=220)
ap.add_argument("--batch-size", type=int, default=50)
args = ap.parse_args()


def log_loss(out, target):
    return float(np.log1p(np.abs(out - target)).mean())


def train(data, W, epoch):
    for i in range(0, len(data), args.batch_size):
        x = data[i:i + args.batch_size]
        reconst_out = np.tanh(x @ W)
        reconst_target = np.tanh(x)
        kl = float((reconst_out ** 2).mean())
        if i % (10 * args.batch_size) == 0:
            print(f"train: [{epoch}][{i // args.batch_size:4d}/{len(data) // args.batch_size}] KL {kl:.4f}")
        log_loss_ = log_loss(reconst_out, reconst)  # noqa: F821 - the report's bug
        W -= 0.01 * x.T @ (reconst_out - reconst_target) / len(x) + 0 * log_loss_
    return W


rng = np.random.default_rng(0)
data = rng.normal(size=(1000, 32))
W = np.eye(32)
for epoch in range(args.epochs):
    W = train(data, W, epoch)

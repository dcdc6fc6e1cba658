# source: https://github.com/milesial/Pytorch-UNet/issues/178
# reported: SyntaxError "invalid syntax" at writer = SummaryWriter(comment=f'LR_{lr}_BS_{batch_size}...')
#   on Python 3.5 (f-strings need 3.6)
# ICSE 2020 category: Syntax Error (general code error)
# label: failing on the job's interpreter (Python 3.5); valid on Python >= 3.6
"""Reconstruction (numpy, written here): an f-string in the training script; the job runs on Python 3.5."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--batch-size", type=int, default=1)
ap.add_argument("--learning-rate", type=float, default=0.1)
ap.add_argument("--scale", type=float, default=0.5)
args = ap.parse_args()
comment = f"LR_{args.learning_rate}_BS_{args.batch_size}_SCALE_{args.scale}"
rng = np.random.default_rng(0)
w = np.zeros(4)
for epoch in range(args.epochs):
    x = rng.normal(size=(args.batch_size, 4))
    w -= args.learning_rate * x.T @ (x @ w - 1) / len(x)
    print(comment, "epoch", epoch, "loss", float(((x @ w - 1) ** 2).mean()))

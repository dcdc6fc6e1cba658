# jobcheck-expect: memory
# jobcheck-args: --batch-size 8192 --seq-len 512 --dim 128
"""Broken: a token-wise MLP over sequences whose activations grow with batch x length: x (B*T, D),
the hidden (B*T, 2D) and their gradients, float32, ~6 KiB per token: about 25 GiB at batch
8,192 of 512 tokens (device 16 GiB). The batch size was raised from 512 without shortening the
sequences.
"""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=512)
ap.add_argument("--seq-len", type=int, default=512)
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--epochs", type=int, default=3)
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))
rng = np.random.default_rng(0)
W1 = rng.normal(scale=0.02, size=(a.dim, 2 * a.dim)).astype(np.float32)
W2 = rng.normal(scale=0.02, size=(2 * a.dim, a.dim)).astype(np.float32)
for s in range(min(steps, 100 * a.epochs)):
    x = rng.standard_normal((a.batch_size * a.seq_len, a.dim), dtype=np.float32)
    h1 = x @ W1
    h = np.maximum(h1, 0)
    out = h @ W2
    err = out - x
    loss = float((err ** 2).mean())
    gout = 2 * err / err.size
    gh = (gout @ W2.T) * (h1 > 0)
    W2 -= 0.1 * (h.T @ gout)
    W1 -= 0.1 * (x.T @ gh)
    print(f"step {s} loss {loss:.5f}")

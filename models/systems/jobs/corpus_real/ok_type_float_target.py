# source: https://github.com/milesial/Pytorch-UNet/issues/93
# reported: RuntimeError "Expected object of scalar type Long but got scalar type Float for argument #2
#   'target'" in the cross-entropy of train.py (masks loaded as float)
# ICSE 2020 category: Type Mismatch (general code error)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): the float masks are converted to integer class indices."""
import numpy as np

rng = np.random.default_rng(0)
imgs = rng.normal(size=(32, 3, 16, 16))
masks = (rng.integers(0, 2, size=(32, 16, 16)) * 255) / 255.0  # PIL mask -> float array
W = rng.normal(scale=0.1, size=(3, 2))
for epoch in range(5):
    for i in range(0, len(imgs), 4):
        x = imgs[i:i + 4].transpose(0, 2, 3, 1).reshape(-1, 3)
        t = masks[i:i + 4].reshape(-1).astype(np.int64)
        z = x @ W
        logp = z - z.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        loss = -logp[np.arange(len(t)), t].mean()
        g = np.exp(logp)
        g[np.arange(len(t)), t] -= 1
        W -= 0.1 * x.T @ g / len(t)
    print("epoch", epoch, "loss", float(loss))

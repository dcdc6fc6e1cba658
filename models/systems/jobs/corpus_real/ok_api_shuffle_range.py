# source: https://github.com/jsikyoon/Interaction-networks_tensorflow/issues/4
# reported: TypeError "'range' object does not support item assignment" at
#   "total_idx=range(len(total_data));np.random.shuffle(total_idx)" (code written for Python 2, run on 3)
# ICSE 2020 category: Framework API Misuse (deep learning specific)
# label: healthy (the fixed script: the indices made a list before the in-place shuffle)
"""Reconstruction (numpy, written here): the indices are a list, which numpy shuffles in place."""
import numpy as np

rng = np.random.default_rng(0)
total_data = rng.normal(size=(1000, 6, 5))
total_label = total_data[:, :, :2] * 0.1
W = np.zeros((5, 2))
for epoch in range(200):
    total_idx = list(range(len(total_data)))
    np.random.shuffle(total_idx)
    for i in range(0, len(total_idx), 100):
        idx = list(total_idx[i:i + 100])
        x, t = total_data[idx].reshape(-1, 5), total_label[idx].reshape(-1, 2)
        W -= 0.01 * x.T @ (x @ W - t) / len(x)
    print("epoch", epoch, "loss", float(((total_data.reshape(-1, 5) @ W - total_label.reshape(-1, 2)) ** 2).mean()))

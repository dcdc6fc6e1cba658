# source: https://github.com/ekosman/AnomalyDetectionCVPR2018-Pytorch/issues/230
# reported: RuntimeError "mat1 and mat2 shapes cannot be multiplied (1920x2048 and 4096x512)": precomputed
#   ResNet features (2048-d) fed to the anomaly detector built for C3D features (4096-d)
# ICSE 2020 category: Tensor Mismatch (deep learning specific)
# label: failing with the default --feature_dim; healthy with --feature_dim 2048 (input size matched)
"""Reconstruction (numpy, written here): the detector's first layer is sized by --feature_dim, the
features come from the extractor the user ran (ResNet, 2048-d)."""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--feature_dim", type=int, default=4096)
ap.add_argument("--features_path", default="features_resnet")
ap.add_argument("--epochs", type=int, default=20000)
ap.add_argument("--batch-size", type=int, default=60)
args = ap.parse_args()

rng = np.random.default_rng(0)
W1 = rng.normal(scale=0.01, size=(args.feature_dim, 512))
W2 = rng.normal(scale=0.01, size=(512, 1))
for epoch in range(args.epochs):
    segs = rng.normal(size=(args.batch_size * 32, 2048))  # 32 segments per video, ResNet features
    h = np.maximum(segs @ W1, 0)
    score = 1 / (1 + np.exp(-(h @ W2)))
    loss = float(np.maximum(0, 1 - score[::2].max() + score[1::2].max()))
    W2 -= 1e-3 * h.T @ (score - 0.5) / len(h)
    if epoch % 1000 == 0:
        print("epoch", epoch, "loss", loss)

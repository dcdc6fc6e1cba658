# source: https://github.com/nv-tlabs/datasetGAN_release/issues/49
# reported: RuntimeError "mat1 and mat2 shapes cannot be multiplied (1x18 and 512x1024)"; fixed by
#   transposing the latent before latent_to_image
# ICSE 2020 category: Tensor Mismatch (deep learning specific)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): the latent is transposed to (18, 512) first."""
import numpy as np

rng = np.random.default_rng(0)
latents = [rng.normal(size=(512, 18)) for _ in range(16)]
W_map = rng.normal(scale=0.05, size=(512, 1024))
features = []
for latent in latents:
    style = latent.T[0:1, :]
    features.append(np.tanh(style @ W_map))
print("made", len(features), "training images")

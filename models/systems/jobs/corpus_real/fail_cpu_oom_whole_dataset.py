# source: https://github.com/debajyotikarmaker/cvpr_4234/issues/15
# reported: MemoryError "Unable to allocate 12.5 GiB for an array with shape (87000, 227, 227, 3) and data
#   type uint8" when loading the whole image set into one array before training
# ICSE 2020 category: CPU Out of Memory (deep learning specific)
# label: failing
"""Reconstruction (numpy, written here): the loader preallocates one array for the whole data set
(87,000 images of 227 x 227 x 3), then fills it image by image."""
import numpy as np

N_IMAGES, H, W = 87000, 227, 227
rng = np.random.default_rng(0)
X = np.zeros((N_IMAGES, H, W, 3), dtype=np.uint8)
y = np.zeros(N_IMAGES, dtype=np.int64)
for i in range(N_IMAGES):
    X[i] = rng.integers(0, 255, size=(H, W, 3), dtype=np.uint8)
    y[i] = i % 29
print("loaded", X.shape)

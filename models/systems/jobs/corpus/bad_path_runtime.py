# jobcheck-expect: path
"""Broken: a data path built at run time from a default mount point that does not exist."""
import os

import numpy as np

root = os.environ.get("HWCOSIM_CORPUS_DATA_ROOT", "/mnt/philly-blob/imagenet")
shards = [os.path.join(root, f"shard_{i:03d}.npy") for i in range(4)]
X = np.concatenate([np.load(s) for s in shards])
print(X.shape)

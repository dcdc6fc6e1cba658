# source: https://github.com/dmlc/gluon-nlp/pull/1289
# reported: TypeError "'NoneType' object is not iterable" in prepare_openwebtext: random.shuffle() shuffles
#   in place and returns None
# ICSE 2020 category: Null Reference (general code error)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): the shard list is shuffled in place."""
import argparse
import random

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--shards", type=int, default=64)
ap.add_argument("--seed", type=int, default=100)
args = ap.parse_args()
random.seed(args.seed)
shards = [f"urlsf_subset{i:02d}-{j}_data.xz" for i in range(4) for j in range(args.shards // 4)]
random.shuffle(shards)
rng = np.random.default_rng(0)
for name in shards:
    tokens = rng.integers(0, 50000, size=512)
    print(name, "tokens", len(tokens))

# source: https://github.com/Megvii-BaseDetection/DynamicRouting/issues/38
# reported: PermissionError "[Errno 13] Permission denied: '/data'" (OUTPUT_DIR of the shipped config)
# ICSE 2020 category: Permission Denied (execution environment)
# label: failing
"""Reconstruction (numpy, written here): the config's OUTPUT_DIR is an absolute path of the authors'
machines; the trainer creates it before the first iteration."""
import os

import numpy as np

config = {"OUTPUT_DIR": "/data/Outputs/model_logs/playground/dynamic_routing", "SOLVER": {"BASE_LR": 0.05,
          "MAX_ITER": 200, "IMS_PER_BATCH": 16}}

os.makedirs(config["OUTPUT_DIR"], exist_ok=True)
rng = np.random.default_rng(0)
W = rng.normal(scale=0.1, size=(64, 8))
for it in range(config["SOLVER"]["MAX_ITER"]):
    xb = rng.normal(size=(config["SOLVER"]["IMS_PER_BATCH"], 64))
    W -= config["SOLVER"]["BASE_LR"] * xb.T @ (xb @ W) / len(xb)
    if it % 50 == 0:
        print("iter", it, "loss", float(((xb @ W) ** 2).mean()))
np.save(os.path.join(config["OUTPUT_DIR"], "model_final.npy"), W)

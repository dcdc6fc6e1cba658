# source: https://github.com/Megvii-BaseDetection/DynamicRouting/issues/38
# reported: PermissionError on '/data'; fixed by pointing OUTPUT_DIR at the user's own folder (maintainer)
# ICSE 2020 category: Permission Denied (execution environment)
# label: healthy (the fixed script)
"""Reconstruction (numpy, written here): OUTPUT_DIR relative to the job's working folder."""
import os

import numpy as np

config = {"OUTPUT_DIR": "./output/dynamic_routing", "SOLVER": {"BASE_LR": 0.05, "MAX_ITER": 200,
                                                                "IMS_PER_BATCH": 16}}

os.makedirs(config["OUTPUT_DIR"], exist_ok=True)
rng = np.random.default_rng(0)
W = rng.normal(scale=0.1, size=(64, 8))
for it in range(config["SOLVER"]["MAX_ITER"]):
    xb = rng.normal(size=(config["SOLVER"]["IMS_PER_BATCH"], 64))
    W -= config["SOLVER"]["BASE_LR"] * xb.T @ (xb @ W) / len(xb)
    if it % 50 == 0:
        print("iter", it, "loss", float(((xb @ W) ** 2).mean()))
np.save(os.path.join(config["OUTPUT_DIR"], "model_final.npy"), W)

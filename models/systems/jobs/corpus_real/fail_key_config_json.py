# source: https://github.com/HoracceFeng/keras-yolo3-tiny/issues/4
# reported: KeyError 'data_load_method' at "if config['model']['data_load_method'] == 'txt'" running
#   python train.py -c config.json (the user's config lacks the key)
# ICSE 2020 category: Key Not Found (general code error)
# label: failing with yolo3_tiny_config.json; healthy with yolo3_tiny_config_fixed.json (the key added)
"""Reconstruction (numpy, written here): training settings come from a JSON file given with -c."""
import argparse
import json

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("-c", "--conf", help="path to configuration file")
args = ap.parse_args()
with open(args.conf) as f:
    config = json.load(f)
rng = np.random.default_rng(0)
if config["model"]["data_load_method"] == "txt":
    boxes = rng.uniform(size=(200, 4))
else:
    boxes = rng.uniform(size=(100, 4))
anchors = np.array(config["model"]["anchors"], float).reshape(-1, 2)
for epoch in range(config["train"]["nb_epochs"]):
    iou = np.minimum(boxes[:, None, 2:], anchors[None] / 416).prod(-1)
    print("epoch", epoch, "mean best iou", float(iou.max(1).mean()))

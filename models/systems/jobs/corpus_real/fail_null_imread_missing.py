# source: https://github.com/biubug6/Pytorch_Retinaface/issues/185
# reported: AttributeError "'NoneType' object has no attribute 'shape'" at "height, width, _ = img.shape" in
#   WiderFaceDetection.__getitem__: cv2.imread returns None (silently) for a path it cannot read
# ICSE 2020 category: Null Reference (general code error)
# label: failing
"""Reconstruction (numpy, written here): the label file lists image paths relative to a folder that is not
there; imread follows OpenCV's contract (None, no exception, for an unreadable path; OpenCV itself is
not installed here, so a numpy stand-in with that contract is written below)."""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--training_dataset", default="retinaface_label.txt")
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--epochs", type=int, default=250)
args = ap.parse_args()


def imread(path):
    """cv2.imread's contract: an array, or None when the file cannot be read."""
    if not os.path.isfile(path):
        return None
    return np.frombuffer(open(path, "rb").read(), np.uint8)


with open(args.training_dataset) as f:
    items = [line.split() for line in f if line.strip()]
root = os.path.dirname(os.path.abspath(args.training_dataset))
for epoch in range(args.epochs):
    for path, *_box in items:
        img = imread(os.path.join(root, path))
        height, width, _ = img.shape
        print("epoch", epoch, path, height, width)

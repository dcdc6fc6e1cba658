# source: https://github.com/positive666/yolo_research/issues/24
# reported: KeyError 'fl_eiou_gamma' at "self.g2 = h['fl_eiou_gamma']" in ComputeLoss.__init__ (the user's
#   hyperparameter file predates the new key)
# ICSE 2020 category: Key Not Found (general code error)
# label: failing
"""Reconstruction (numpy, written here): the loss reads a hyperparameter the user's hyp file lacks."""
import numpy as np

hyp = {"lr0": 0.01, "momentum": 0.937, "box": 0.05, "cls": 0.5, "obj": 1.0, "fl_gamma": 0.0}  # hyp.scratch


class ComputeLoss:
    def __init__(self, h):
        self.g = h["fl_gamma"]
        self.g2 = h["fl_eiou_gamma"]  # focal EIoU loss gamma
        self.box, self.cls = h["box"], h["cls"]

    def __call__(self, pred, target):
        return float(self.box * ((pred - target) ** 2).mean())


rng = np.random.default_rng(0)
compute_loss = ComputeLoss(hyp)
for epoch in range(300):
    print("epoch", epoch, "loss", compute_loss(rng.uniform(size=(16, 4)), rng.uniform(size=(16, 4))))

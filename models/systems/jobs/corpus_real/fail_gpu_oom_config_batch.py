# source: https://github.com/mkocabas/EpipolarPose/issues/6
# reported: RuntimeError "CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 7.93 GiB total capacity;
#   6.19 GiB already allocated; 340.00 MiB free; 551.04 MiB cached)" with TRAIN.BATCH_SIZE 32 of
#   experiments/mpii/train.yaml; the reporter fixed it with BATCH_SIZE 16
# ICSE 2020 category: GPU Out of Memory (deep learning specific)
# label: failing with the shipped config; healthy with TRAIN.BATCH_SIZE 16 (the reporter's fix)
"""Reconstruction (numpy, written here) of the memory footprint, every byte count divided by SCALE (the
corpus index gives the device memory divided the same way). The batch size comes from a yacs-style config
overridable by KEY VALUE pairs on the command line.

Footprint m(b) = fixed + per_sample * b: fixed = ResNet-50 + 3 deconvolutions (34 M fp32 parameters) with
gradient and two Adam moments; per_sample = the middle of the interval the report allows: batch 32 needs
more than 6.69 GiB (6.19 GiB allocated + 512 MiB requested), batch 16 fits in 7.08 GiB (allocated + free +
cached), i.e. 0.19 to 0.41 GiB per sample."""
import sys

import numpy as np

SCALE = 256
FIXED = 4 * 34e6 * 4 / SCALE
PER_SAMPLE = 0.30 * 2**30 / SCALE

config = {"TRAIN": {"BATCH_SIZE": 32, "BEGIN_EPOCH": 0, "END_EPOCH": 140, "LR": 0.001},
          "DATASET": {"ROOT": "data/mpii/", "TRAIN_SET": "train"}}
opts = sys.argv[1:]
for k, v in zip(opts[::2], opts[1::2]):
    sec, key = k.split(".")
    config[sec][key] = type(config[sec][key])(v)

params = [np.zeros(int(FIXED / 4 / 4), np.float32) for _ in range(4)]
n_images, bs = 32, config["TRAIN"]["BATCH_SIZE"]
for epoch in range(config["TRAIN"]["BEGIN_EPOCH"], config["TRAIN"]["END_EPOCH"]):
    for i in range(0, n_images, bs):
        b = min(bs, n_images - i)
        acts = [np.ones(int(PER_SAMPLE / 4 / 8) * b, np.float32) for _ in range(8)]
        loss = float(sum(a[:16].sum() for a in acts)) / 1e3
        del acts
    if epoch % 20 == 0:
        print(f"epoch {epoch} loss {loss:.3f}")

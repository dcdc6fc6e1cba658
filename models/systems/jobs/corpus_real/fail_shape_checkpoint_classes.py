# source: https://github.com/xhp-hust-2018-2011/SS-DCNet/issues/4
# reported: RuntimeError "Error(s) in loading state_dict for SSDCNet_classify: size mismatch for
#   back_end_cls.3.weight: copying a param with shape torch.Size([27, 512, 1, 1]) from checkpoint, the shape
#   in current model is torch.Size([31, 512, 1, 1])"
# ICSE 2020 category: Tensor Mismatch (deep learning specific)
# label: failing
"""Reconstruction (numpy, written here): the released model was trained with 27 count classes, the
script builds its classifier from a config with 31; parameters are copied into the model's arrays."""
import os
import pickle
import tempfile

import numpy as np

rng = np.random.default_rng(0)
released = os.path.join(tempfile.gettempdir(), "ssdcnet_released.pkl")
with open(released, "wb") as f:  # stands for the downloaded checkpoint
    pickle.dump({"back_end_cls.3.weight": rng.normal(size=(27, 512)), "back_end_cls.3.bias": np.zeros(27)}, f)

label_indice = np.arange(0.5, 15.5, 0.5)  # the config's class partition: 30 boundaries -> 31 classes
model = {"back_end_cls.3.weight": np.zeros((len(label_indice) + 1, 512)),
         "back_end_cls.3.bias": np.zeros(len(label_indice) + 1)}
with open(released, "rb") as f:
    state = pickle.load(f)
for name, value in state.items():
    model[name][...] = value
feat = rng.normal(size=(4, 512))
print("class scores", (feat @ model["back_end_cls.3.weight"].T).argmax(1))

# source: https://github.com/lukemelas/EfficientNet-PyTorch/issues/318
# reported: NotImplementedError from torch.nn.Module._forward_unimplemented when training
#   nn.Sequential(*list(trained_model.children())[:-1], Flatten(), nn.Linear(1536, 7))
# ICSE 2020 category: Not Implemented (general code error)
# label: failing
"""Reconstruction (numpy, written here): a minimal Module whose default forward raises
NotImplementedError (as torch's does); the user's Flatten defines its computation under another name."""
import numpy as np


class Module:
    def forward(self, x):
        raise NotImplementedError

    def __call__(self, x):
        return self.forward(x)


class Linear(Module):
    def __init__(self, n_in, n_out, rng):
        self.W = rng.normal(scale=0.05, size=(n_in, n_out))

    def forward(self, x):
        return x @ self.W


class Flatten(Module):
    def flatten(self, x):
        return x.reshape(len(x), -1)


class Sequential(Module):
    def __init__(self, *mods):
        self.mods = mods

    def forward(self, x):
        for m in self.mods:
            x = m(x)
        return x


rng = np.random.default_rng(0)
model = Sequential(Linear(8, 8, rng), Flatten(), Linear(1536, 7, rng))
for epoch in range(30):
    x = rng.normal(size=(16, 192, 8))
    logits = model(x)
    print("epoch", epoch, "mean logit", float(logits.mean()))

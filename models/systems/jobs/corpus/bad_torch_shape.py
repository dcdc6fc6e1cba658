# jobcheck-expect: shape
# jobcheck-requires: torch
# jobcheck-args: --batch-size 128
"""Broken (torch): layer sizes do not chain (32 outputs into a 16-input layer)."""
import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=128)
a = ap.parse_args()
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(a.batch_size, 64), torch.randint(0, 10, (a.batch_size,))
opt.zero_grad()
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
opt.step()

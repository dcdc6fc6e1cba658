# jobcheck-expect: api
# jobcheck-requires: torch
"""Broken (torch): never calls zero_grad, so gradients accumulate over steps."""
import os

import torch
from torch import nn

steps = int(os.environ.get("HWCOSIM_STEPS", 100))
model = nn.Linear(64, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
for _ in range(steps):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(loss.item())

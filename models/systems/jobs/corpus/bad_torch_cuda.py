# jobcheck-expect: gpu
# jobcheck-requires: torch
"""Broken (torch): moves the model to CUDA unconditionally; the node has no usable GPU."""
import torch
from torch import nn

model = nn.Linear(64, 10).cuda()
x = torch.randn(8, 64).cuda()
print(model(x).shape)

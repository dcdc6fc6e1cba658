# jobcheck-expect: ok
# jobcheck-requires: torch
# jobcheck-args: --batch-size 128 --epochs 2
"""Correct (torch): MLP with device selection, zero_grad, logits into CrossEntropyLoss."""
import argparse
import os

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, default=128)
ap.add_argument("--epochs", type=int, default=2)
a = ap.parse_args()
steps = int(os.environ.get("HWCOSIM_STEPS", 10**9))
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
X = torch.randn(1024, 64)
y = X[:, :10].argmax(1)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
lossf = nn.CrossEntropyLoss()
s = 0
for ep in range(a.epochs):
    for i in range(0, len(X), a.batch_size):
        opt.zero_grad()
        loss = lossf(model(X[i:i + a.batch_size].to(dev)), y[i:i + a.batch_size].to(dev))
        loss.backward()
        opt.step()
        s += 1
        if s >= steps:
            break
    print(f"epoch {ep} loss {loss.item():.4f}")
    if s >= steps:
        break

"""Stand-in matcher (numpy, written here)."""
import numpy as np


class DenseMatcher:
    def __init__(self, dim):
        self.W = np.eye(dim)

    def loss(self, a, b):
        return float(((a @ self.W - b) ** 2).mean())

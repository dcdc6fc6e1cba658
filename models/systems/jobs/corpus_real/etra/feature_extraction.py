"""Stand-in feature extraction (numpy, written here)."""
import numpy as np


def features(fixations):
    return np.stack([fixations.mean(1), fixations.std(1)], axis=1)

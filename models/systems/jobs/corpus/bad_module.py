# jobcheck-expect: module
"""Broken: imports NVIDIA apex for mixed precision; not installed in the job's image."""
import numpy as np
from apex import amp

w = np.zeros(8)
print(amp, w)

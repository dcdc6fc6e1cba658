# jobcheck-expect: permission
"""Broken: the log file is opened in a folder computed at run time that is not writable."""
import os

import numpy as np

log_dir = os.path.join("/sys", "kernel")
with open(os.path.join(log_dir, "hwcosim-train.log"), "w") as f:
    f.write(str(np.zeros(2)))

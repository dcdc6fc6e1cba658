# jobcheck-expect: path
"""Broken: requires an environment variable the scheduler does not set."""
import os

import numpy as np

out_dir = os.environ["PHILLY_JOB_OUTPUT_DIR_HWCOSIM"]
np.save(os.path.join(out_dir, "w.npy"), np.zeros(3))

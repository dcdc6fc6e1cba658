# jobcheck-expect: module
"""Broken: picks the distributed backend at run time; horovod is not installed."""
import importlib
import os

import numpy as np

backend = os.environ.get("HWCOSIM_CORPUS_BACKEND", "horovod.tensorflow")
hvd = importlib.import_module(backend)
print(hvd, np.zeros(2))

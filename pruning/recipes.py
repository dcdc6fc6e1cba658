"""Training recipes of the dense digits models the pruning studies start from.

:mod:`hwcosim.pruning.study` (accuracy and SeerNet studies) and :mod:`hwcosim.pruning.oneshot_study`
prune the same trained models (cached by :func:`hwcosim.models.nn.train.get_trained`), so both take the
recipes from here.
"""

from __future__ import annotations

from hwcosim.models.nn.train import TrainConfig

__all__ = ["LSTM_TRAIN", "CNN_TRAIN", "CNN56_TRAIN"]

#: Training recipe of the dense LSTM (about 97-98% test accuracy on digits for H=64).
LSTM_TRAIN = TrainConfig(epochs=40, batch_size=32, lr=1e-2, lr_final=1e-3, seed=0)
#: Training recipe of the dense digits CNN.
CNN_TRAIN = TrainConfig(epochs=15, batch_size=32, lr=1e-2, lr_final=1e-3, seed=0)
#: Training recipe of the CNN with ResNet-18-sized layers timed by :mod:`hwcosim.pruning.seernet_bench`
#: (digits upscaled to 56x56; two passes over the training split keep it to a few CPU minutes).
CNN56_TRAIN = TrainConfig(epochs=2, batch_size=32, lr=1e-3, lr_final=5e-4, seed=0)

"""Small numpy neural networks for the pruning studies: an LSTM classifier (fused gate matrix,
the layout the BBS accelerator consumes), a CNN (im2col convolutions, for SeerNet) and an MLP.

Every model keeps its parameters in a ``dict`` of named numpy arrays, exposes ``logits``,
``predict``, ``accuracy`` and ``loss_grads`` (loss and gradients by backpropagation), and is
trained by :func:`hwcosim.models.nn.train.train` with Adam and optional keep-masks that hold pruned
weights at exactly zero. Datasets ship offline with scikit-learn (:mod:`hwcosim.models.nn.data`).
"""

from hwcosim.models.nn.cnn import CNN, CNNConfig
from hwcosim.models.nn.data import Dataset, load_digits_images, load_digits_sequences
from hwcosim.models.nn.lstm import LSTMClassifier, LSTMConfig
from hwcosim.models.nn.mlp import MLP, MLPConfig
from hwcosim.models.nn.train import TrainConfig, get_trained, train

__all__ = [
    "CNN", "CNNConfig", "Dataset", "LSTMClassifier", "LSTMConfig", "MLP", "MLPConfig",
    "TrainConfig", "get_trained", "load_digits_images", "load_digits_sequences", "train",
]

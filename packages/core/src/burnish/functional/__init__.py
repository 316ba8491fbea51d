"""Functional forms of the module, activation and optimizer ops (PyTorch's ``torch.nn.functional``,
Burn's ``tensor::module`` and ``tensor::activation``)."""

from burnish.functional.activation import (
    gelu,
    hard_sigmoid,
    hard_swish,
    log_sigmoid,
    log_softmax,
    relu,
    sigmoid,
    silu,
    softmax,
    tanh,
)
from burnish.functional.attention import scaled_dot_product_attention
from burnish.functional.conv import (
    conv,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    unfold,
)
from burnish.functional.embedding import embedding
from burnish.functional.linear import linear
from burnish.functional.norm import batch_norm, layer_norm
from burnish.functional.optim import adam_step
from burnish.functional.pad import pad
from burnish.functional.pool import (
    adaptive_avg_pool,
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool_with_indices,
    avg_pool,
    avg_pool1d,
    avg_pool2d,
    max_pool,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool_with_indices,
)
from burnish.functional.recurrent import gru_cell, gru_sequence, lstm_cell, lstm_sequence
from burnish.functional.resize import interpolate

__all__ = [
    "adaptive_avg_pool", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adam_step", "adaptive_max_pool", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool_with_indices", "avg_pool", "avg_pool1d", "avg_pool2d", "batch_norm",
    "conv", "conv1d", "conv2d", "conv3d", "conv_transpose", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "embedding", "gelu", "gru_cell", "gru_sequence", "hard_sigmoid",
    "hard_swish", "interpolate",
    "layer_norm", "linear",
    "log_sigmoid", "log_softmax", "lstm_cell", "lstm_sequence",
    "max_pool", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
    "max_pool_with_indices", "pad", "relu", "scaled_dot_product_attention", "sigmoid",
    "silu", "softmax", "tanh", "unfold",
]

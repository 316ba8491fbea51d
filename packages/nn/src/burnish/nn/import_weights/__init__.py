"""Weights from other frameworks: PyTorch files (read without PyTorch), safetensors, adapters."""

from burnish.nn.import_weights.adapter import (
    GRU_GATES,
    LSTM_GATES,
    PYTORCH,
    Chunk,
    Rule,
    WeightAdapter,
    recurrent_rules,
    split,
    transpose,
)
from burnish.nn.import_weights.load import LoadResult, load_weights, read_weights
from burnish.nn.import_weights.pytorch_file import read_pytorch

__all__ = [
    "GRU_GATES", "LSTM_GATES", "PYTORCH", "Chunk", "LoadResult", "Rule", "WeightAdapter",
    "load_weights", "read_pytorch", "read_weights", "recurrent_rules", "split", "transpose",
]

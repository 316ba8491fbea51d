"""Weights from other frameworks: PyTorch files (read without PyTorch), safetensors, adapters."""

from burnish.nn.import_weights.adapter import PYTORCH, Rule, WeightAdapter, transpose
from burnish.nn.import_weights.load import LoadResult, load_weights, read_weights
from burnish.nn.import_weights.pytorch_file import read_pytorch

__all__ = [
    "PYTORCH", "LoadResult", "Rule", "WeightAdapter", "load_weights", "read_pytorch",
    "read_weights", "transpose",
]

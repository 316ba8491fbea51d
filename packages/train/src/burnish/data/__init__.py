"""burnish.data: datasets, batchers, the DataLoader and dataset sources (MNIST, images, CSV)."""

from .batcher import Batcher, MnistBatch, MnistBatcher
from .csv_dataset import CsvDataset
from .dataset import (
    ComposedDataset,
    Dataset,
    InMemoryDataset,
    MapperDataset,
    PartialDataset,
    SamplerDataset,
    ShuffledDataset,
    WindowsDataset,
)
from .download import cache_dir
from .errors import ChecksumError, DataError
from .idx import read_idx
from .image_folder import ImageFolderDataset, ImageItem
from .images import read_image
from .loader import DataLoader
from .mnist import MnistDataset, MnistItem
from .workers import WorkerError, WorkerInfo, get_worker_info

__all__ = [
    "Batcher",
    "ChecksumError",
    "ComposedDataset",
    "CsvDataset",
    "DataError",
    "DataLoader",
    "Dataset",
    "ImageFolderDataset",
    "ImageItem",
    "InMemoryDataset",
    "MapperDataset",
    "MnistBatch",
    "MnistBatcher",
    "MnistDataset",
    "MnistItem",
    "PartialDataset",
    "SamplerDataset",
    "ShuffledDataset",
    "WindowsDataset",
    "WorkerError",
    "WorkerInfo",
    "cache_dir",
    "get_worker_info",
    "read_idx",
    "read_image",
]

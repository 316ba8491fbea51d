"""burnish.data: datasets, batchers, the DataLoader and dataset sources (MNIST, images, CSV,
text classification)."""

from .augment import Compose, RandomCrop, RandomFlip
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
from .download import cache_dir, download_verified
from .errors import ChecksumError, DataError
from .idx import read_idx
from .image_folder import ImageFolderDataset, ImageItem
from .images import read_image
from .loader import DataLoader
from .mnist import MnistDataset, MnistItem
from .normalize import Normalizer
from .text import AgNewsDataset, DbPediaDataset, TextItem
from .workers import WorkerError, WorkerInfo, get_worker_info

__all__ = [
    "AgNewsDataset",
    "Batcher",
    "ChecksumError",
    "Compose",
    "ComposedDataset",
    "CsvDataset",
    "DataError",
    "DataLoader",
    "Dataset",
    "DbPediaDataset",
    "ImageFolderDataset",
    "ImageItem",
    "InMemoryDataset",
    "MapperDataset",
    "MnistBatch",
    "MnistBatcher",
    "MnistDataset",
    "MnistItem",
    "Normalizer",
    "PartialDataset",
    "RandomCrop",
    "RandomFlip",
    "SamplerDataset",
    "ShuffledDataset",
    "TextItem",
    "WindowsDataset",
    "WorkerError",
    "WorkerInfo",
    "cache_dir",
    "download_verified",
    "get_worker_info",
    "read_idx",
    "read_image",
]

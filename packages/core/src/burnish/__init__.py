"""burnish: a deep learning framework whose models run on any backend.

Every burnish distribution installs into this package; ``extend_path`` lets them live in
separate folders during development (editable installs) as well as in one after a wheel install.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from burnish import functional  # noqa: E402  (after Tensor: it builds on it)
from burnish.amp import autocast  # noqa: E402
from burnish.device import Device  # noqa: E402
from burnish.distribution import Distribution  # noqa: E402
from burnish.dtype import (  # noqa: E402
    DType,
    Kind,
    bfloat16,
    bool_,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from burnish.errors import (  # noqa: E402
    ArgumentTypeError,
    AutodiffError,
    BackendNotInstalledError,
    BurnishError,
    CaptureError,
    DeviceError,
    DivisionByZeroError,
    DTypeError,
    RecordError,
    ShapeError,
    UnsupportedError,
)
from burnish.quantization import QuantizedTensor, QuantScheme, quantize  # noqa: E402
from burnish.registry import (  # noqa: E402
    backend,
    default_backend,
    default_device,
    seed,
    set_default_backend,
)
from burnish.replay import Captured, capture  # noqa: E402
from burnish.shape import Shape  # noqa: E402
from burnish.tensor import NamedTensor, Tensor, cat, multinomial, stack, where  # noqa: E402
from burnish.tensor.core import is_debug, set_debug  # noqa: E402
from burnish.tensor_data import TensorData  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError", "AutodiffError", "BackendNotInstalledError", "BurnishError",
    "CaptureError", "Captured", "DType", "DTypeError", "Device", "DeviceError",
    "DivisionByZeroError", "Distribution", "Kind", "NamedTensor", "QuantScheme",
    "QuantizedTensor", "RecordError", "Shape",
    "ShapeError", "Tensor", "autocast",
    "TensorData", "UnsupportedError", "backend", "bfloat16", "bool_", "capture", "default_backend",
    "default_device", "float16", "float32", "float64", "functional", "int8", "int16", "int32",
    "int64", "is_debug", "multinomial", "quantize", "seed", "set_debug", "set_default_backend",
    "uint8", "uint16", "uint32", "uint64", "uint4", "int4", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int2", "uint2",
    "cat", "stack", "where",
]

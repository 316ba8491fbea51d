"""The functions generated modules call: ONNX's operator semantics written with burnish's
Tensor API, so that an imported model runs on any backend and trains through autodiff."""

from burnish.onnx.ops.blocks import *  # noqa: F403
from burnish.onnx.ops.control import *  # noqa: F403
from burnish.onnx.ops.core import *  # noqa: F403
from burnish.onnx.ops.detection import *  # noqa: F403
from burnish.onnx.ops.elementwise import *  # noqa: F403
from burnish.onnx.ops.nn import *  # noqa: F403
from burnish.onnx.ops.quantize import *  # noqa: F403
from burnish.onnx.ops.recurrent import *  # noqa: F403
from burnish.onnx.ops.reduce import *  # noqa: F403
from burnish.onnx.ops.resize import *  # noqa: F403
from burnish.onnx.ops.sampling import *  # noqa: F403
from burnish.onnx.ops.shape import *  # noqa: F403
from burnish.onnx.ops.signal import *  # noqa: F403
from burnish.onnx.ops.text import *  # noqa: F403
from burnish.onnx.ops.training import *  # noqa: F403

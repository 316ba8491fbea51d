"""burnish.onnx: ONNX models as burnish modules.

``import_model(path, device)`` builds the module in memory; ``generate(path, folder)`` writes
it as Python source (``model.py``, a ``burnish.nn.Module``) and its weights record. Both come
from the same generated source, so they compute the same thing. Operator converters are
plugins (the ``burnish_onnx_converters`` hook); ``python -m burnish.onnx MODEL.onnx --out DIR``
is the command line.
"""

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter, registered_converters
from burnish.onnx.errors import (
    FoldWarning,
    MalformedModelError,
    OnnxImportError,
    UnsupportedOperatorError,
)
from burnish.onnx.graph import Node, Value
from burnish.onnx.importer import Imported, Report, convert, generate, import_model

__all__ = [
    "Converter", "Emitter", "FoldWarning", "Imported", "MalformedModelError", "Node",
    "OnnxImportError", "Report", "UnsupportedOperatorError", "Value", "convert", "generate",
    "import_model", "registered_converters",
]

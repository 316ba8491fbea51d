"""burnish-import-onnx's plugin: its converters, registered through the ``burnish`` entry
point like any third-party package's."""

from __future__ import annotations

from burnish.onnx.converter import Converter
from burnish.plugins import hookimpl


@hookimpl
def burnish_onnx_converters() -> list[Converter]:
    from burnish.onnx.converters import first_party

    return first_party()

"""burnish-import-onnx's own converters, one module per family of operators; the plugin
module registers them through the ``burnish_onnx_converters`` hook."""

from __future__ import annotations

from burnish.onnx.converter import Converter


def first_party() -> list[Converter]:
    """Every converter burnish-import-onnx ships."""
    from burnish.onnx.converters import (
        control,
        elementwise,
        layers,
        ml,
        quantize,
        reduce,
        shape,
        signal,
        text,
        training,
    )

    families = [elementwise, shape, reduce, layers, quantize, signal, training, ml, text,
                control]
    return [converter for family in families for converter in family.CONVERTERS]

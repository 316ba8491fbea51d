"""The decorator the first-party converter modules register their functions with."""

from __future__ import annotations

from collections.abc import Callable

from burnish.onnx.converter import Converter


def collector(target: list[Converter]) -> Callable:
    """``@converts("Relu", "Sigmoid")``: the function converts those operators."""

    def converts(*op_types: str, domain: str = "") -> Callable:
        def register(function: Callable) -> Callable:
            for op_type in op_types:
                target.append(Converter(op_type, function, domain))
            return function

        return register

    return converts

"""Converters: how one ONNX operator becomes lines of the generated module, found through the
``burnish_onnx_converters`` hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnish.plugins import plugin_manager

if TYPE_CHECKING:
    from burnish.onnx.codegen import Emitter
    from burnish.onnx.graph import Node

#: The name burnish-import-onnx's own plugin is registered under (its entry point's name).
FIRST_PARTY = "onnx"


@dataclass(frozen=True)
class Converter:
    """Converts nodes of one operator: ``convert(node, out)`` writes the node through the
    ``Emitter`` ``out`` (``out.assign(...)``, ``out.layer(...)``), raises
    ``out.unsupported(reason)`` for what it cannot convert, or ``out.decline(reason)`` to leave
    the node to the operator's ONNX function body.

    ``domain`` is ``""`` for the default ONNX domain. Of two converters for one operator the
    higher ``priority`` wins; at equal priority, a third-party plugin's wins over the first-party
    one, so a plugin can replace a converter without touching burnish.
    """

    op_type: str
    convert: Callable[[Node, Emitter], None]
    domain: str = ""
    priority: int = 0


def converters_from(functions: dict[str, list[Converter]]) -> dict[tuple[str, str], Converter]:
    """One converter per ``(domain, op_type)`` from each plugin's list, the winner chosen as
    ``Converter`` says."""
    chosen: dict[tuple[str, str], tuple[tuple[int, int], Converter]] = {}
    for plugin, converters in functions.items():
        rank_of_plugin = 0 if plugin == FIRST_PARTY else 1
        for converter in converters:
            key = (converter.domain, converter.op_type)
            rank = (converter.priority, rank_of_plugin)
            if key not in chosen or rank >= chosen[key][0]:
                chosen[key] = (rank, converter)
    return {key: converter for key, (_, converter) in chosen.items()}


def registered_converters() -> dict[tuple[str, str], Converter]:
    """Every installed plugin's converters, one per operator (see ``Converter``)."""
    hook = plugin_manager().hook.burnish_onnx_converters
    by_plugin: dict[str, list[Converter]] = {}
    for impl in hook.get_hookimpls():
        by_plugin.setdefault(impl.plugin_name, []).extend(impl.function() or [])
    return converters_from(by_plugin)

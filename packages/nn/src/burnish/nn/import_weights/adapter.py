"""Adapters: how another framework names and lays out each module type's parameters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from burnish.nn.activation import PRelu
from burnish.nn.linear import Linear
from burnish.nn.module import Module
from burnish.nn.norm import BatchNorm, GroupNorm, LayerNorm, RmsNorm

#: How one parameter is found: its name in the source, and a conversion of its values.
Rule = tuple[str, Callable[[np.ndarray], np.ndarray] | None]


def transpose(values: np.ndarray) -> np.ndarray:
    """A 2-d weight transposed ([out, in] to [in, out])."""
    return np.ascontiguousarray(values.T) if values.ndim == 2 else values


class WeightAdapter:
    """Maps a burnish parameter (its module and attribute name) to the name the source file uses
    within that module, and converts the source's values to burnish's layout.

    ``rules`` maps module types to ``{attribute: (source name, conversion or None)}``; a module
    matches the rules of the first type it is an instance of, in order. Attributes without a rule
    keep their name and values. The identity adapter is ``WeightAdapter()``.
    """

    def __init__(self, rules: Mapping[type[Module], Mapping[str, Rule]] | None = None):
        self.rules: dict[type[Module], dict[str, Rule]] = {
            kind: dict(entries) for kind, entries in (rules or {}).items()}

    def rule(self, module: Module, attribute: str) -> Rule:
        for kind, entries in self.rules.items():
            if isinstance(module, kind):
                return entries.get(attribute, (attribute, None))
        return attribute, None

    def source_name(self, module: Module, attribute: str) -> str:
        """The name ``module``'s ``attribute`` has in the source (relative to the module)."""
        return self.rule(module, attribute)[0]

    def convert(self, module: Module, attribute: str, values: np.ndarray) -> np.ndarray:
        """The source's values of ``module``'s ``attribute`` in burnish's layout."""
        conversion = self.rule(module, attribute)[1]
        return values if conversion is None else conversion(values)

    def with_rules(self, rules: Mapping[type[Module], Mapping[str, Rule]]) -> WeightAdapter:
        """This adapter with more rules, taking precedence (for a model's own module types)."""
        merged: dict[type[Module], Any] = {kind: dict(e) for kind, e in rules.items()}
        merged.update({kind: e for kind, e in self.rules.items() if kind not in merged})
        return WeightAdapter(merged)


_NORM = {"gamma": ("weight", None), "beta": ("bias", None)}

#: PyTorch's layout: Linear weights are [out, in] (burnish's are [in, out]); norms name their
#: scale and shift ``weight`` and ``bias`` (burnish: ``gamma`` and ``beta``), PReLU its slopes
#: ``weight`` (burnish: ``alpha``). Conv, transposed conv, embedding, bilinear and batch-norm
#: running statistics have the same names and layouts in both. Layers that PyTorch packs
#: differently (attention's ``in_proj_weight``, recurrent gates) need rules of their own.
PYTORCH = WeightAdapter({
    Linear: {"weight": ("weight", transpose)},
    LayerNorm: _NORM,
    GroupNorm: _NORM,
    BatchNorm: _NORM,
    RmsNorm: {"gamma": ("weight", None)},
    PRelu: {"alpha": ("weight", None)},
})

"""Adapters: how another framework names and lays out each module type's parameters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from burnish.nn.activation import PRelu
from burnish.nn.attention import MultiHeadAttention
from burnish.nn.linear import Linear
from burnish.nn.module import Module
from burnish.nn.norm import BatchNorm, GroupNorm, LayerNorm, RmsNorm
from burnish.nn.rnn import BiLstm, Gru, Lstm
from burnish.nn.transformer import TransformerDecoderLayer, TransformerEncoderLayer

Conversion = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Chunk:
    """Piece ``index`` (from 0) of the ``count`` equal pieces that the source tensor ``key``
    splits into along ``dim``: where a source packs several parameters into one tensor
    (PyTorch's attention ``in_proj_weight``, its recurrent layers' gates). The source's size
    along ``dim`` must be a multiple of ``count``."""

    key: str
    index: int
    count: int
    dim: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"chunk index {self.index} is outside the {self.count} pieces "
                             f"of {self.key!r}")

    def fits(self, shape: Sequence[int]) -> bool:
        """Whether a source tensor of ``shape`` splits into ``count`` equal pieces."""
        return -len(shape) <= self.dim < len(shape) and shape[self.dim] % self.count == 0

    def take(self, values: np.ndarray) -> np.ndarray:
        """This piece of the source's ``values`` (which must ``fit``)."""
        size = values.shape[self.dim] // self.count
        return np.take(values, range(self.index * size, (self.index + 1) * size), self.dim)

    def __str__(self) -> str:
        return f"piece {self.index + 1} of {self.count} along dim {self.dim} of {self.key}"


#: Where one parameter is found: its source key (or a ``Chunk`` of one), and a conversion of its
#: values to burnish's layout (applied after the chunk is taken), or None.
Rule = tuple[str | Chunk, Conversion | None]


def transpose(values: np.ndarray) -> np.ndarray:
    """A 2-d weight transposed ([out, in] to [in, out])."""
    return np.ascontiguousarray(values.T) if values.ndim == 2 else values


def split(key: str, targets: Sequence[str], conversion: Conversion | None = None,
          dim: int = 0) -> dict[str, Rule]:
    """Rules that split the source tensor ``key`` along ``dim`` into ``len(targets)`` equal
    pieces, the first for ``targets[0]`` and so on (so the order of ``targets`` maps the
    source's packing order to burnish's parameters), each then converted by ``conversion``."""
    return {target: (Chunk(key, index, len(targets), dim), conversion)
            for index, target in enumerate(targets)}


class WeightAdapter:
    """Maps each burnish parameter to the source key that holds it, and converts the source's
    values to burnish's layout.

    ``rules`` maps module types to entries keyed by a path relative to the module (``"weight"``,
    ``"query.bias"``, ``"feed_forward.linear_inner"``); a module takes the entries of the first
    type it is an instance of, in order. An entry is either

    - for a parameter, a ``Rule``: ``(source key, conversion)``, the key relative to the
      module's place in the source; ``split`` makes the rules that share one packed source
      tensor out among several parameters;
    - for a sub-module, the name (a dotted path, or ``""`` for none) that it has in the source;
      its own rules then apply within it.

    A parameter is looked up from the outermost module down: the first module with a rule for
    it decides its source and conversion, so an enclosing module's rule overrides its parts'
    (attention's packed ``in_proj_weight`` over its ``Linear``'s transposition). Sub-module
    renames on the way build the source path; paths without an entry keep their names and
    values. The identity adapter is ``WeightAdapter()``.
    """

    def __init__(self, rules: Mapping[type[Module], Mapping[str, Rule | str]] | None = None):
        self.rules: dict[type[Module], dict[str, Rule | str]] = {
            kind: dict(entries) for kind, entries in (rules or {}).items()}

    def entries(self, module: Module) -> dict[str, Rule | str]:
        """The entries that apply to ``module``: those of the first type it is an instance of."""
        for kind, entries in self.rules.items():
            if isinstance(module, kind):
                return entries
        return {}

    def locate(self, enclosing: Sequence[tuple[str, Module]], name: str) -> Rule:
        """Where the parameter ``name`` (a dotted path from the root module) is in the source,
        and its conversion. ``enclosing`` lists the modules that hold it, outermost (the root,
        at path ``""``) first, each with its path from the root."""
        depth = [_length(path) for path, _ in enclosing]
        parts = name.split(".")
        source: list[str] = []
        level = 0
        while True:
            start = depth[level]
            entries = self.entries(enclosing[level][1])
            rule = entries.get(".".join(parts[start:]))
            if rule is not None:
                key, conversion = (rule, None) if isinstance(rule, str) else rule
                return _prefixed(source, key), conversion
            # The deepest enclosed module this one renames: the path down to it is replaced.
            for inner in range(len(enclosing) - 1, level, -1):
                path = ".".join(parts[start:depth[inner]])
                renamed = entries.get(path)
                if renamed is not None and not isinstance(renamed, str):
                    kind = type(enclosing[level][1]).__name__
                    raise TypeError(f"the rule for {path!r} of {kind} names a module: it must "
                                    f"be the module's name in the source, not {renamed!r}")
                if renamed is not None:
                    source += renamed.split(".") if renamed else []
                    level = inner
                    break
            else:
                if level + 1 == len(enclosing):
                    return ".".join(source + parts[start:]), None
                source += parts[start:depth[level + 1]]
                level += 1

    def with_rules(self, rules: Mapping[type[Module], Mapping[str, Rule | str]]
                   ) -> WeightAdapter:
        """This adapter with more rules, taking precedence (for a model's own module types):
        a type given here replaces that type's entries."""
        merged: dict[type[Module], Any] = {kind: dict(e) for kind, e in rules.items()}
        merged.update({kind: e for kind, e in self.rules.items() if kind not in merged})
        return WeightAdapter(merged)


def _length(path: str) -> int:
    return len(path.split(".")) if path else 0


def _prefixed(source: list[str], key: str | Chunk) -> str | Chunk:
    if isinstance(key, Chunk):
        return replace(key, key=".".join([*source, key.key]))
    return ".".join([*source, key])


#: PyTorch's gate order in ``nn.LSTM``'s packed weights (i, f, g, o) as burnish's gates.
LSTM_GATES = ("input_gate", "forget_gate", "cell_gate", "output_gate")
#: PyTorch's gate order in ``nn.GRU``'s packed weights (r, z, n) as burnish's gates.
GRU_GATES = ("reset_gate", "update_gate", "new_gate")


def recurrent_rules(gates: Sequence[str], suffix: str = "_l0", prefix: str = ""
                    ) -> dict[str, Rule]:
    """The rules of one layer and direction of a PyTorch ``nn.LSTM`` or ``nn.GRU``: its
    ``weight_ih{suffix}``, ``weight_hh{suffix}``, ``bias_ih{suffix}`` and ``bias_hh{suffix}``
    split among ``gates`` (in PyTorch's order) under ``prefix``, weights transposed. PyTorch
    names layer ``k``'s suffix ``_l{k}``, and its reverse direction's ``_l{k}_reverse``."""
    rules: dict[str, Rule] = {}
    for packed, transform, conversion in (("weight_ih", "input_transform.weight", transpose),
                                          ("weight_hh", "hidden_transform.weight", transpose),
                                          ("bias_ih", "input_transform.bias", None),
                                          ("bias_hh", "hidden_transform.bias", None)):
        targets = [f"{prefix}{gate}.{transform}" for gate in gates]
        rules.update(split(f"{packed}{suffix}", targets, conversion))
    return rules


_NORM = {"gamma": ("weight", None), "beta": ("bias", None)}
_FEED_FORWARD = {"feed_forward.linear_inner": "linear1", "feed_forward.linear_outer": "linear2"}

#: PyTorch's layout: Linear weights are [out, in] (burnish's are [in, out]); norms name their
#: scale and shift ``weight`` and ``bias`` (burnish: ``gamma`` and ``beta``), PReLU its slopes
#: ``weight`` (burnish: ``alpha``). ``nn.MultiheadAttention`` packs the query, key and value
#: projections in ``in_proj_weight``/``in_proj_bias`` (in that order) and names the output one
#: ``out_proj``; ``nn.TransformerEncoderLayer``/``DecoderLayer`` name their parts ``self_attn``,
#: ``multihead_attn``, ``linear1``, ``linear2``, ``norm1``...; ``nn.LSTM`` and ``nn.GRU`` pack
#: their gates in ``weight_ih_l0``... (one-layer modules; BiLstm is ``bidirectional=True``).
#: Conv, transposed conv, embedding, bilinear and batch-norm running statistics have the same
#: names and layouts in both.
PYTORCH = WeightAdapter({
    Linear: {"weight": ("weight", transpose)},
    LayerNorm: _NORM,
    GroupNorm: _NORM,
    BatchNorm: _NORM,
    RmsNorm: {"gamma": ("weight", None)},
    PRelu: {"alpha": ("weight", None)},
    MultiHeadAttention: {
        **split("in_proj_weight", ["query.weight", "key.weight", "value.weight"], transpose),
        **split("in_proj_bias", ["query.bias", "key.bias", "value.bias"]),
        "output": "out_proj",
    },
    TransformerEncoderLayer: {"attention": "self_attn", **_FEED_FORWARD, "norm_1": "norm1",
                              "norm_2": "norm2"},
    TransformerDecoderLayer: {"self_attention": "self_attn", "cross_attention": "multihead_attn",
                              **_FEED_FORWARD, "norm_1": "norm1", "norm_2": "norm2",
                              "norm_3": "norm3"},
    Lstm: recurrent_rules(LSTM_GATES),
    BiLstm: {"forward_lstm": "",
             **recurrent_rules(LSTM_GATES, "_l0_reverse", "reverse_lstm.")},
    Gru: recurrent_rules(GRU_GATES),
})

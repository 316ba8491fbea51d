"""Text operators: TfIdfVectorizer (over integer token ids; string pools have no dtype)."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


@converts("TfIdfVectorizer")
def convert_tfidf_vectorizer(node: Node, out: Emitter) -> None:
    pool = node.attr("pool_int64s")
    if pool is None:
        raise out.unsupported("TfIdfVectorizer over strings (pool_strings)")
    weights = node.attr("weights")
    out.assign(
        f"ops.tfidf_vectorizer({out.input(0)}, {node.attr('mode')!r}, "
        f"{node.attr('min_gram_length')}, {node.attr('max_gram_length')}, "
        f"{node.attr('max_skip_count')}, {literal(list(node.attr('ngram_counts')))}, "
        f"{literal(list(node.attr('ngram_indexes')))}, {literal(list(pool))}, "
        f"{literal(list(weights)) if weights is not None else None})")

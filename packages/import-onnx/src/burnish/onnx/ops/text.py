"""Text features on burnish tensors: ONNX TfIdfVectorizer over integer token ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.onnx.ops.core import host


def tfidf_vectorizer(x: Tensor, mode: str, min_gram_length: int, max_gram_length: int,
                     max_skip_count: int, ngram_counts: Sequence[int],
                     ngram_indexes: Sequence[int], pool: Sequence[int],
                     weights: Sequence[float] | None = None) -> Tensor:
    """ONNX TfIdfVectorizer: per row of ``x`` (``[C]`` or ``[N, C]`` token ids), how often each
    n-gram of ``pool`` occurs (n from ``min_gram_length`` to ``max_gram_length``, its tokens
    ``skip + 1`` apart for every skip up to ``max_skip_count``; unigrams counted once), as
    float32 ``[max(ngram_indexes) + 1]`` (or ``[N, ...]``). ``mode``: ``"TF"`` the counts,
    ``"IDF"`` the weight (or 1) where the count is positive, ``"TFIDF"`` counts times weights.
    Counted on the host: the output depends on token values, not on float math."""
    # The pool holds the 1-grams, then the 2-grams..., ngram_counts[i] where the (i+1)-grams
    # start; the k-th n-gram of the whole pool goes to output ngram_indexes[k].
    grams: dict[tuple[int, ...], int] = {}
    prefixes: set[tuple[int, ...]] = set()
    number = 0
    for i, start in enumerate(ngram_counts):
        end = ngram_counts[i + 1] if i + 1 < len(ngram_counts) else len(pool)
        size = i + 1
        for at in range(start, end, size):
            entry = tuple(int(v) for v in pool[at : at + size])
            if min_gram_length <= size <= max_gram_length:
                grams.setdefault(entry, ngram_indexes[number])
                prefixes.update(entry[:k] for k in range(1, size + 1))
            number += 1
    width = max(ngram_indexes) + 1
    tokens = host(x)
    rows = tokens.reshape(1, -1) if tokens.ndim <= 1 else tokens
    counts = np.zeros((rows.shape[0], width), dtype=np.int64)
    for row, line in zip(counts, rows.tolist()):
        smallest = min_gram_length
        for distance in range(1, max_skip_count + 2):
            for start in range(len(line)):
                if start + distance * (smallest - 1) >= len(line):
                    break
                gram: tuple[int, ...] = ()
                for at in range(start, start + distance * max_gram_length, distance):
                    if at >= len(line):
                        break
                    gram += (int(line[at]),)
                    if gram not in prefixes:
                        break
                    if len(gram) >= smallest and gram in grams:
                        row[grams[gram]] += 1
            if smallest == 1:  # unigrams do not depend on the skip: counted on the first pass
                smallest = 2
                if smallest > max_gram_length:
                    break
    scale = np.ones(width) if weights is None else np.asarray(weights, dtype=np.float64)
    if mode == "TF":
        result = counts.astype(np.float64)
    elif mode == "IDF":
        result = (counts > 0) * scale
    elif mode == "TFIDF":
        result = counts * scale
    else:
        raise ValueError(f"TfIdfVectorizer mode {mode!r}: expected 'TF', 'IDF' or 'TFIDF'")
    result = result.astype(np.float32)
    if tokens.ndim <= 1:
        result = result.reshape(width)
    return Tensor.from_data(result, device=x.device).cast(bn.float32)

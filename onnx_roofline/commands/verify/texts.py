"""Text for a string input: verify runs a text pipeline (skl2onnx's TF-IDF: StringNormalizer →
Tokenizer → TfIdfVectorizer → a linear model) on strings it makes up, as it makes up numbers.

Each string is TOKENS_PER_STRING words: English prose runs 15–20 words a sentence (the American
Press Institute's readability guidance), and a short document in a TF-IDF classifier (a review's
sentence, a query, a title) is about one. The words are the graph's own vocabulary (its
TfIdfVectorizers' `pool_strings`), so the vectorizer counts hits as on real text; a graph without
one gets generic words of WORD_LETTERS letters (a word of English averages 4.79 letters over the
Google Books corpus: Norvig, "English Letter Frequency Counts: Mayzner Revisited", 2012)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import onnx

TOKENS_PER_STRING = 16
WORD_LETTERS = 5
GENERIC_WORDS = 100


def vocabulary(graph: onnx.GraphProto) -> list[str]:
    """The words the graph's TfIdfVectorizers count (their `pool_strings`, bodies' too), each once,
    in order; n-grams (words joined by a space) left out."""
    words: dict[str, None] = {}
    for node in _nodes(graph):
        if node.op_type == "TfIdfVectorizer":
            for attribute in node.attribute:
                if attribute.name == "pool_strings":
                    words.update(dict.fromkeys(s.decode("utf-8", "replace") for s in attribute.strings))
    return [word for word in words if word and " " not in word]


def texts(shape: tuple[int, ...], rng: np.random.Generator, words: Sequence[str]) -> np.ndarray:
    """Strings of TOKENS_PER_STRING words each, drawn from `words` or, where it is empty, generic ones."""
    pool = list(words) or [f"w{index:0{WORD_LETTERS - 1}d}" for index in range(GENERIC_WORDS)]
    drawn = rng.integers(0, len(pool), size=(*shape, TOKENS_PER_STRING))
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(*shape):
        out[index] = " ".join(pool[i] for i in drawn[index])
    return out


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attribute.g)

"""Sizes in a text pipeline that the text does not decide.

A scikit-learn TF-IDF pipeline converted by skl2onnx runs StringNormalizer → Tokenizer →
TfIdfVectorizer, then numbers. How many tokens a string splits into is its value (the Tokenizer's
last dim: the most any string holds), so the string tensors stay uncosted (analysis.py: a string
has no static byte size). But the vectorizer's output is not sized by the tokens: it counts the
n-grams of each row into a vector of the pool's size, [N, V] for an input [N, C] ([V] for [C]), V
the largest of its `ngram_indexes` + 1, whatever C is. Typed so, the numeric tail (the weighting,
the normalizer, the linear model) is costed, where before everything downstream of the tokens was
unknown. The vectorizer's input rows are read through what feeds it: a Flatten (axis 1 keeps the
rows), the Tokenizer (its input's rows, one more dim of tokens).

A StringNormalizer keeps its input's shape where it removes no stopwords; with stopwords it keeps
at most its input's strings (a bound, labelled so)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo, known
from onnx_roofline.shapes.bounds import Bound, Typed

Producer = Callable[[str], "Node | None"]  # the node that makes a value
Lookup = Callable[[str], "TensorInfo | None"]  # a value's type, as far as known


def typed_text(node: Node, inputs: Sequence[TensorInfo | None], producer: Producer, tensor: Lookup) -> Typed | None:
    """The outputs of a text op typed from what the text does not decide; None where this cannot."""
    rule = _RULES.get(node.op_type) if not node.domain else None
    return None if rule is None else rule(node, inputs, producer, tensor)


def _string_normalizer(
    node: Node, inputs: Sequence[TensorInfo | None], producer: Producer, tensor: Lookup
) -> Typed | None:
    """[C] → [C] and [1, C] → [1, C]; with stopwords, at most that many (the spec removes them)."""
    data = inputs[0] if inputs else None
    if not known(data) or not node.outputs:
        return None
    output = TensorInfo(node.outputs[0], data.shape, "string")
    if not any(attr.name == "stopwords" and attr.strings for attr in node.attributes):
        return (output,), None
    strings = data.shape[-1]
    label = node.name or f"StringNormalizer_{node.position}"
    return (output,), Bound(
        label, node.op_type, output.name, strings, f"its input's {strings} strings, stopwords removed from them"
    )


def _tfidf_vectorizer(
    node: Node, inputs: Sequence[TensorInfo | None], producer: Producer, tensor: Lookup
) -> Typed | None:
    """[N, C] → [N, V], [C] → [V] in float32, V = max(ngram_indexes) + 1 (the spec)."""
    indexes = next((list(attr.ints) for attr in node.attributes if attr.name == "ngram_indexes"), None)
    rows = _rows(node.inputs[0], producer, tensor) if node.inputs else None
    if not indexes or rows is None or not node.outputs:
        return None
    rank, first = rows
    width = max(indexes) + 1
    shape = (width,) if rank == 1 else (first, width) if rank == 2 else None
    return None if shape is None else ((TensorInfo(node.outputs[0], shape, "float32"),), None)


def _rows(name: str, producer: Producer, tensor: Lookup, depth: int = 4) -> tuple[int, int | None] | None:
    """(rank, first dim) of a value, from its type where that says them, else through the ops that
    made it: a Flatten at axis 1 (rank 2, its input's first dim), a Tokenizer (its input's rank + 1,
    its first dim)."""
    info = tensor(name)
    dims = None if info is None else info.shape
    if dims is not None and not dims:
        return 0, None
    if dims is not None and isinstance(first := dims[0], int):
        return len(dims), first
    made = producer(name) if depth else None
    if made is None or not made.inputs:
        return None
    before = _rows(made.inputs[0], producer, tensor, depth - 1)
    if before is None:
        return None
    if made.op_type == "Flatten" and not made.domain:
        axis = next((attr.i for attr in made.attributes if attr.name == "axis"), 1)
        return (2, before[1]) if axis == 1 else None
    if made.op_type == "Tokenizer" and made.domain == "com.microsoft":
        return before[0] + 1, before[1]
    return None


_RULES = {"StringNormalizer": _string_normalizer, "TfIdfVectorizer": _tfidf_vectorizer}
TEXT_OPS = frozenset(_RULES)
"""The ai.onnx text ops this types."""

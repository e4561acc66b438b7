"""Sizes in a text pipeline that the text does not decide.

A scikit-learn TF-IDF pipeline converted by skl2onnx runs StringNormalizer → Tokenizer →
TfIdfVectorizer, then numbers. A string's bytes are its value: the analysis counts every string
element at an average length, `Sizing.string_bytes` (--string-bytes), STRING_BYTES where none is
given, said as an assumption (`StringBytes`). How many tokens a string splits into is its value too
(the Tokenizer's last dim: the most any string holds); a string of that length holds at most
⌊length / mincharnum⌋ tokens (each a match of at least mincharnum bytes, ORT's Tokenizer), + 2
with `mark` (the start and end marks): the Tokenizer is typed at that bound, labelled so. The
vectorizer's output is not sized by the tokens at all: it counts the
n-grams of each row into a vector of the pool's size, [N, V] for an input [N, C] ([V] for [C]), V
the largest of its `ngram_indexes` + 1, whatever C is. Typed so, the numeric tail (the weighting,
the normalizer, the linear model) is costed, where before everything downstream of the tokens was
unknown. The vectorizer's input rows are read through what feeds it: a Flatten (axis 1 keeps the
rows), the Tokenizer (its input's rows, one more dim of tokens).

A StringNormalizer keeps its input's shape where it removes no stopwords; with stopwords it keeps
at most its input's strings (a bound, labelled so)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onnx_roofline.model.nodes import Node
from onnx_roofline.model.tensors import TensorInfo, known
from onnx_roofline.shapes.bounds import Bound, Typed

STRING_BYTES = 100
"""The bytes of one string element where none is given: a sentence of English, what a text
classifier is fed one string at a time. Sentences run 15–20 words on average (the usual figure for
edited English prose), a word 4.79 letters (Norvig's count over the Google Books n-grams, "English
Letter Frequency Counts: Mayzner Revisited", 2013) and a space: 17.5 × 5.79 ≈ 101 bytes."""

Producer = Callable[[str], "Node | None"]  # the node that makes a value
Lookup = Callable[[str], "TensorInfo | None"]  # a value's type, as far as known


@dataclass(frozen=True)
class StringBytes:
    """The average length every string element is counted at (given, or the default), and how many
    string tensors it sized: their bytes, and the tokens a Tokenizer is bounded by, rest on it."""

    string_bytes: int
    given: bool  # --string-bytes said it; else STRING_BYTES
    tensors: int

    @property
    def message(self) -> str:
        source = "--string-bytes" if self.given else "the default; --string-bytes B for another"
        count = f"{self.tensors} string tensor{'s' if self.tensors != 1 else ''}"
        return f"each string is {self.string_bytes:,} bytes ({source}): {count} counted so, their bytes are estimates"

    def to_dict(self) -> dict:
        return {"string_bytes": self.string_bytes, "given": self.given, "tensors": self.tensors}


def check_string_bytes(value: int) -> None:
    """A string's average bytes: a positive whole number (a ValueError naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise ValueError(f"the bytes of a string must be a positive whole number, not {value!r}")


def parse_string_bytes(text: str) -> int:
    """--string-bytes's value: a positive whole number of bytes. Raises ValueError saying what is wrong."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(
            f"malformed string length {text!r}: expected a positive whole number of bytes, e.g. 64"
        ) from None
    check_string_bytes(value)
    return value


def typed_text(node: Node, inputs: Sequence[TensorInfo | None], producer: Producer, tensor: Lookup,
               string_bytes: int | None = None) -> Typed | None:  # fmt: skip
    """The outputs of a text op typed from what the text does not decide, its strings
    `string_bytes` long (None: STRING_BYTES); None where this cannot."""
    if (node.domain, node.op_type) == _TOKENIZER:
        return _tokenizer(node, inputs, STRING_BYTES if string_bytes is None else string_bytes)
    rule = _RULES.get(node.op_type) if not node.domain else None
    return None if rule is None else rule(node, inputs, producer, tensor)


def _tokenizer(node: Node, inputs: Sequence[TensorInfo | None], string_bytes: int) -> Typed | None:
    """[C] → [C, D], [N, C] → [N, C, D] strings (ORT's schema), D the most tokens a string holds:
    at most ⌊string_bytes / mincharnum⌋ (every token a match of mincharnum bytes or more), + 2
    with `mark` (the start and end marks)."""
    data = inputs[0] if inputs else None
    if not known(data) or len(data.shape) not in (1, 2) or not node.outputs:
        return None
    attributes = {attr.name: attr.i for attr in node.attributes if attr.name in ("mincharnum", "mark")}
    shortest = max(attributes.get("mincharnum", 1), 1)
    marks = 2 if attributes.get("mark") else 0
    tokens = string_bytes // shortest + marks
    output = TensorInfo(node.outputs[0], (*data.shape, tokens), "string")
    label = node.name or f"Tokenizer_{node.position}"
    why = f"tokens a string: ⌊{string_bytes} bytes / mincharnum {shortest}⌋" + (" + 2 marks" if marks else "")
    return (output,), Bound(label, node.op_type, output.name, tokens, why)


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
_TOKENIZER = ("com.microsoft", "Tokenizer")
TEXT_OPS = frozenset({("", op_type) for op_type in _RULES} | {_TOKENIZER})
"""The text ops this types, by (domain, op type)."""

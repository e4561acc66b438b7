"""Default sizes for the symbolic dims a command line leaves unbound, chosen from each dim's name.

`onnx-roofline model.onnx` with no `--dim` binds every unbound symbolic dim of the inputs to a
default and says so on stderr, one line naming each (`batch=1, sequence=512`); `check` and the
Python API stay strict (an unbound dim that blocks a cost is an error there). The defaults, first
matching rule wins (a name is read as lower-case words: `past_sequence_length` → past, sequence,
length; `batchSize` → batch, size):

| the name has | default | why |
|---|---|---|
| `batch` (or is `n`, `b`, `bs`, `bsz`) | 1 | one request: the latency case |
| `total` or `all` with a length word | past + sequence | the attention mask of a step with a cache |
| `past`; or `cache`, `prev` or `history` with a length word (`kv_cache_dim` is not one) | 511 | a step with 511 cached tokens: a context of 512 |
| `encoder` with a length word | 512 | the encoder's whole input |
| a length word: `seq`, `sequence`, `seqlen`, `len`, `length`, `token(s)`, `time`, `frames` | 512, or 1 in a model with a past dim | a 512-token prompt (BERT's limit, within GPT-2's and Llama's); with a cache, one decode step |
| `height`, `width`, `h`, `w`, `image`, `img`, `size` with `image`/`img` | 224 | the ImageNet resolution |
| anything else | 1 | no guess from the name: the notice says so |

A dim_param that is an expression of other dims (`past_sequence + 1`) is evaluated from their
values. 512 rather than GPT-2's 1,024: a sequence longer than a model's position table (512 for
BERT) fails its shape inference, and the default must give a result on the common models."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

BATCH = 1
SEQUENCE = 512
PAST = 511
DECODE_STEP = 1
SPATIAL = 224
OTHER = 1

_BATCH_NAMES = frozenset({"n", "b", "bs", "bsz", "batchsize"})
_LENGTH_WORDS = frozenset(
    {"seq", "sequence", "sequences", "seqlen", "len", "length", "token", "tokens", "time", "frames"}
)
_PAST_WORDS = frozenset({"past", "cache", "prev", "previous", "history"})
_SPATIAL_WORDS = frozenset({"height", "width", "h", "w"})
_EXPRESSION = re.compile(r"^[\w.]+(\s*[-+*]\s*[\w.]+)+$")


def words(name: str) -> tuple[str, ...]:
    """`past_sequence_length` → ("past", "sequence", "length"); `batchSize` → ("batch", "size")."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return tuple(w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w)


def name_kind(name: str) -> str:
    """The rule a name matches: "batch", "total", "past", "encoder", "sequence", "spatial" or "other"."""
    return _kind(name)


def _kind(name: str) -> str:
    w = set(words(name))
    joined = "".join(words(name))
    if "batch" in w or joined in _BATCH_NAMES or joined.startswith("batch"):
        return "batch"
    length = bool(w & _LENGTH_WORDS)
    if w & {"total", "all"} and length:
        return "total"
    if "past" in w or (w & _PAST_WORDS and (length or len(w) == 1)):
        return "past"
    if "encoder" in w and length:
        return "encoder"
    if length:
        return "sequence"
    if w & _SPATIAL_WORDS or (w & {"image", "img"} and (w & {"size", "height", "width"} or len(w) == 1)):
        return "spatial"
    return "other"


def default_dims(names: Iterable[str], given: Mapping[str, int] | None = None) -> dict[str, tuple[int, str]]:
    """Each unbound name's default and the rule that chose it: {"batch": (1, "batch"), ...}.
    `given`: the dims the caller bound, which count as context: a past dim among them makes the
    model a decode step, and a total is their past plus sequence."""
    given = dict(given or {})
    names = [n for n in dict.fromkeys(names) if n not in given]
    plain = [n for n in names if not _EXPRESSION.match(n)]
    kinds = {name: _kind(name) for name in plain}
    given_kinds = {name: _kind(name) for name in given if not _EXPRESSION.match(name)}
    decode = "past" in kinds.values() or "past" in given_kinds.values()
    chosen: dict[str, tuple[int, str]] = {}
    for name, kind in kinds.items():
        if kind == "batch":
            chosen[name] = (BATCH, kind)
        elif kind == "past":
            chosen[name] = (PAST, kind)
        elif kind == "encoder":
            chosen[name] = (SEQUENCE, kind)
        elif kind == "sequence":
            chosen[name] = (DECODE_STEP, "decode step") if decode else (SEQUENCE, kind)
        elif kind == "spatial":
            chosen[name] = (SPATIAL, kind)
        elif kind != "total":
            chosen[name] = (OTHER, NO_DEFAULT)
    sizes = {**{n: v for n, (v, _) in chosen.items()}, **given}
    kind_of = {**given_kinds, **kinds}
    past = next((sizes[n] for n, k in kind_of.items() if k == "past" and n in sizes), PAST if decode else 0)
    step = next(
        (sizes[n] for n, k in kind_of.items() if k == "sequence" and n in sizes), DECODE_STEP if decode else SEQUENCE
    )
    for name, kind in kinds.items():
        if kind == "total":
            chosen[name] = (past + step, "past + sequence" if decode else "sequence")
    sizes.update((n, v) for n, (v, _) in chosen.items())
    for name in names:
        if name not in chosen:
            value = evaluate(name, sizes)
            chosen[name] = (value, "expression") if value is not None and value > 0 else (OTHER, NO_DEFAULT)
    return {name: chosen[name] for name in names}


NO_DEFAULT = "no default for this name"


def derived_dims(names: Iterable[str], given: Mapping[str, int]) -> dict[str, int]:
    """The dims named by an expression of dims given (optimum's attention mask,
    `past_sequence_length + sequence_length`), and a total length where one past and one sequence
    length are given (onnxruntime-genai's `total_sequence_length`, its mask's: the cache after
    this step): their value, where it is positive. Not defaults: the sizes given determine them,
    and strict commands (check, verify, a context sweep over the past) take them too."""
    kinds = {name: _kind(name) for name in given if not _EXPRESSION.match(name)}
    pasts = [given[name] for name, kind in kinds.items() if kind == "past"]
    steps = [given[name] for name, kind in kinds.items() if kind == "sequence"]
    derived = {}
    for name in names:
        if name in given:
            continue
        if _EXPRESSION.match(name):
            value = evaluate(name, given)
        else:
            value = pasts[0] + steps[0] if _kind(name) == "total" and len(pasts) == len(steps) == 1 else None
        if value is not None and value > 0:
            derived[name] = value
    return derived


def evaluate(expression: str, values: Mapping[str, int]) -> int | None:
    """`past_sequence + 1` from the other dims' values; None where a name is unknown."""
    try:
        tree = ast.parse(expression.replace(".", "_"), mode="eval")
    except SyntaxError:
        return None
    names = {n.replace(".", "_"): v for n, v in values.items()}

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = value(node.left), value(node.right)
            if left is None or right is None:
                return None
            return (
                left + right
                if isinstance(node.op, ast.Add)
                else left - right
                if isinstance(node.op, ast.Sub)
                else left * right
            )
        return None

    return value(tree.body)


_RULES = frozenset({"name"})
"""The reason the notice leaves unsaid: the dim's name gave its default (the name says what it is)."""


def notice(chosen: Mapping[str, tuple[int, str]]) -> str:
    """The one line on stderr: `unbound dims set to defaults: batch=1, x_dim2=224 (image height), ...`;
    a reason the name does not say is said: the dim's role in the graph (shapes/roles.py), what
    in the graph fixed it, or that no role was found."""
    listed = ", ".join(
        f"{name}={value}" + ("" if why in _RULES else f" ({why})") for name, (value, why) in chosen.items()
    )
    return f"unbound dims set to defaults: {listed} (bind them with --dim NAME=N; see docs/defaults.md)"

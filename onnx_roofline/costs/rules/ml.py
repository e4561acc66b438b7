"""ai.onnx.ml: the classical-ML operators (trees, linear models, SVMs, encoders, scalers).

Conventions of this family:
- **Model weights live in attributes** (coefficients, support vectors, tree nodes, lookup tables),
  not in initializers. They are read like any weight, so these rules add them to the default bytes:
  bytes_read = each distinct input once + every numeric list/tensor attribute once (floats 4 B,
  ints 8 B, tensors by their dtype). Scalars (a threshold, a default value) are kernel constants and
  `nodes_hitrates*` (a profiling hint, never read to predict) are left out.
- **Lookups and comparisons** that are an op's purpose (a tree's split test, a hash lookup of a
  category or label) are 1 FLOP each, as the movement rules count NonZero's compares.
- **Post transforms** of the scores, per row of width K: LOGISTIC K transcendentals (as Sigmoid);
  SOFTMAX 4K − 2 FLOPs and K transcendentals (as the Softmax rule); SOFTMAX_ZERO the same plus K
  compares (zeros stay zero); PROBIT √2·erfinv(2p − 1): 3 FLOPs and 1 transcendental per element.
- **Strings** have data-dependent byte sizes: the walk counts every string element (string labels,
  categories) at the length it assumes (shapes/texts.py: --string-bytes), and a rule refuses a
  string with none (`no_strings`: a rule called on a bare tensor), rather than count it as 0
  bytes. A map with string keys stays data-dependent.
- **Maps** (ZipMap's sequence of N maps of C entries, DictVectorizer's and CastMap's input map)
  are sized as their entries, each a key and a value: N·C·(key + value) bytes (TensorInfo). A map
  whose entry count is not given (a graph input: `input_shapes`, `--input x=16`) is unknown-shape;
  string keys, data-dependent.
- Linear models and SVMs are GEMMs ([N, F] against the weight vectors): matrix unit, computed in
  float32 (their scores are tensor(float) whatever the input). The rest: vector unit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from onnx import AttributeProto

from onnx_roofline.costs.cost import Cost
from onnx_roofline.costs.rules.registry import MATRIX, register
from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.status import DATA_DEPENDENT, Uncostable
from onnx_roofline.model.tensors import DTYPE_BITS, dtype_name

ML = "ai.onnx.ml"
_NOT_MODEL = ("nodes_hitrates", "nodes_hitrates_as_tensor")


def attribute_bytes(node: KnownNode, skip: Iterable[str] = _NOT_MODEL) -> int:
    """Bytes of the node's numeric list and tensor attributes (its model weights), each read once."""
    skipped = set(skip)
    total = 0
    for attr in node.proto.attribute:
        if attr.name in skipped:
            continue
        if attr.type == AttributeProto.FLOATS:
            total += 4 * len(attr.floats)
        elif attr.type == AttributeProto.INTS:
            total += 8 * len(attr.ints)
        elif attr.type == AttributeProto.TENSOR:
            bits = DTYPE_BITS.get(dtype_name(attr.t.data_type) or "", 0)
            total += (math.prod(attr.t.dims) * bits + 7) // 8
    return total


def no_strings(node: KnownNode) -> None:
    """Raise when a present input or output is a string tensor with no assumed length (its bytes
    depend on its values): not costed, never counted as 0 bytes."""
    for tensor in (*node.present_inputs, *node.present_outputs):
        if tensor.dtype == "string" and tensor.string_bytes is None:
            raise Uncostable(DATA_DEPENDENT, f"string tensor {tensor.name!r} has data-dependent byte sizes; not costed")


def with_model_bytes(node: KnownNode, flops: int, transcendentals: int = 0) -> Cost:
    """A cost whose bytes read are the default plus the attribute-held model weights."""
    no_strings(node)
    return Cost(flops, transcendentals, bytes_read=node.distinct_input_bytes() + attribute_bytes(node))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_POST = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}


def post_transform(node: KnownNode, rows: int, width: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of the `post_transform` attribute over `rows` rows of `width` scores."""
    kind = node.attrs.get("post_transform", "NONE")
    kind = _POST.get(kind, "NONE") if isinstance(kind, int) else _text(kind)
    n = rows * width
    if kind == "LOGISTIC":
        return 0, n
    if kind == "SOFTMAX":
        return max(4 * n - 2 * rows, 0), n
    if kind == "SOFTMAX_ZERO":
        return max(5 * n - 2 * rows, 0), n
    if kind == "PROBIT":
        return 3 * n, n
    return 0, 0


def _rows(node: KnownNode) -> tuple[int, int]:
    """(N, F): samples and features of input X ([N, F], or [F] as one sample)."""
    x = node.operand(0)
    features = x.shape[-1] if x.rank else 1
    return (x.numel // features if features else 0), features


# --- elementwise and lookups ---------------------------------------------------------------------


@register("Binarizer", domain=ML)
def binarizer(node: KnownNode) -> Cost:
    """x > threshold ? 1 : 0: one compare-select per element. Bytes: the default."""
    no_strings(node)
    return Cost(flops=node.result(0).numel)


@register("Scaler", domain=ML)
def scaler(node: KnownNode) -> Cost:
    """(x − offset)·scale: 2 FLOPs per element. Bytes: the default plus `scale` and `offset`."""
    return with_model_bytes(node, 2 * node.result(0).numel)


@register("Imputer", domain=ML)
def imputer(node: KnownNode) -> Cost:
    """x == replaced_value (or isnan) ? imputed : x: one compare-select per element. Bytes: the
    default plus the imputed values."""
    return with_model_bytes(node, node.result(0).numel)


@register("Normalizer", domain=ML, compute_dtype="float32")
def normalizer(node: KnownNode) -> Cost:
    """Per row of C (the last axis), as the reference: MAX |x| then max (C + C − 1), L1 |x| then sum
    (C + C − 1), L2 x² then sum (C + C − 1) and one sqrt (transcendental); then the clamp of the
    divisor (1) and C divides: 3C FLOPs per row in every mode, L2 + 1 transcendental per row."""
    no_strings(node)
    rows, _ = _rows(node)
    norm = _text(node.attrs.get("norm", "MAX"))
    return Cost(flops=3 * node.operand(0).numel, transcendentals=rows if norm == "L2" else 0)


@register("LabelEncoder", domain=ML)
def label_encoder(node: KnownNode) -> Cost:
    """One hash lookup per element (1). Bytes: the default plus the keys/values table (its numeric
    lists); string keys or values at the length assumed."""
    return with_model_bytes(node, node.result(0).numel)


@register("CategoryMapper", domain=ML)
def category_mapper(node: KnownNode) -> Cost:
    """Strings ↔ int64 through a table: one hash lookup per element (1), as LabelEncoder. Bytes:
    the default plus `cats_int64s`, the string side at the length assumed."""
    return with_model_bytes(node, node.result(0).numel)


@register("OneHotEncoder", domain=ML)
def one_hot_encoder(node: KnownNode) -> Cost:
    """One category lookup per input element (1); writing the one-hot rows is a store. Bytes: the
    default (the [.., categories] float output dominates) plus `cats_int64s`."""
    return with_model_bytes(node, node.operand(0).numel)


@register("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(node: KnownNode) -> Cost:
    """A gather along the last axis: 0 FLOPs. Bytes (overridden, a partial read): the selected
    elements of X — the output's count, at most all of X — plus the indices Y; the output written."""
    no_strings(node)
    x, indices, z = node.operand(0), node.operand(1), node.result(0)
    kept = min(x.nbytes, (z.numel * x.bits + 7) // 8)
    return Cost(bytes_read=kept + (indices.nbytes if indices.name != x.name else 0))


@register("FeatureVectorizer", domain=ML)
def feature_vectorizer(node: KnownNode) -> Cost:
    """A concatenation (with a cast to float): 0 FLOPs. Bytes: the default."""
    no_strings(node)
    return Cost()


# --- maps: a map's bytes are its entries × (key + value), TensorInfo says how ------------------------


@register("ZipMap", domain=ML)
def zip_map(node: KnownNode) -> Cost:
    """Pairs each score of X [N, C] with its label: 0 FLOPs. Bytes: X read, N maps of C entries
    (key + float32 value) written, plus the labels attribute. String labels: not costed."""
    return with_model_bytes(node, 0)


@register("DictVectorizer", domain=ML)
def dict_vectorizer(node: KnownNode) -> Cost:
    """One map lookup per vocabulary key (V): V FLOPs. Bytes: the map's entries read (key +
    value each), the [1, V] output written, plus the vocabulary."""
    return with_model_bytes(node, node.result(0).numel)


@register("CastMap", domain=ML)
def cast_map(node: KnownNode) -> Cost:
    """Writes the map's values as a [1, W] tensor, cast (as Cast: 0 FLOPs). Bytes: the map's
    entries read, the output written."""
    no_strings(node)
    return Cost()


# --- linear models and SVMs ----------------------------------------------------------------------


@register("LinearClassifier", domain=ML, unit=MATRIX, compute_dtype="float32")
def linear_classifier(node: KnownNode) -> Cost:
    """E = len(coefficients)/F score vectors: per sample 2·F·E (a GEMM), + E with `intercepts`,
    + K − 1 compares for the label's argmax over the K scores of Z; then the post transform on Z.
    Bytes: the default plus coefficients and intercepts."""
    rows, features = _rows(node)
    sets = len(node.attrs.get("coefficients") or []) // max(features, 1)
    width = node.result(1).shape[-1] if node.output(1) is not None else sets
    per_row = 2 * features * sets + (sets if node.attrs.get("intercepts") else 0) + max(width - 1, 0)
    post_flops, post_transcendentals = post_transform(node, rows, width)
    return with_model_bytes(node, rows * per_row + post_flops, post_transcendentals)


@register("LinearRegressor", domain=ML, unit=MATRIX, compute_dtype="float32")
def linear_regressor(node: KnownNode) -> Cost:
    """T targets: per sample 2·F·T (a GEMM), + T with `intercepts`; then the post transform.
    Bytes: the default plus coefficients and intercepts."""
    rows, features = _rows(node)
    targets = node.result(0).shape[-1] if node.result(0).rank else 1
    per_row = 2 * features * targets + (targets if node.attrs.get("intercepts") else 0)
    post_flops, post_transcendentals = post_transform(node, rows, targets)
    return with_model_bytes(node, rows * per_row + post_flops, post_transcendentals)


def kernel_cost(node: KnownNode, features: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) of one kernel evaluation k(x, sv) over F features."""
    kind = _text(node.attrs.get("kernel_type", "LINEAR")).upper()
    if kind == "LINEAR":
        return 2 * features, 0  # dot product
    if kind == "POLY":
        return 2 * features + 2, 1  # (gamma·dot + coef0)^degree
    if kind == "RBF":
        return 3 * features + 1, 1  # exp(−gamma·Σ(x − sv)²): subtract, square, add; multiply
    if kind == "SIGMOID":
        return 2 * features + 2, 1  # tanh(gamma·dot + coef0)
    raise ValueError(f"unknown SVM kernel_type {kind!r}")


@register("SVMClassifier", domain=ML, unit=MATRIX, compute_dtype="float32")
def svm_classifier(node: KnownNode) -> Cost:
    """With V support vectors in C classes (one-vs-one, P = C(C−1)/2 pairs), per sample: V kernel
    evaluations (LINEAR 2F; POLY 2F + 2 and a power; RBF 3F + 1 and an exp; SIGMOID 2F + 2 and a
    tanh), the P decision values — each sums coefficient·kernel over both classes' vectors, 2(C − 1)V
    in all, + P rho adds — P vote compares and C − 1 compares for the winner. `prob_a`: P Platt
    sigmoids (2 FLOPs, 1 transcendental each); the iterative pairwise coupling after it is
    data-dependent and not counted. Without support vectors (a linear SVM), per sample 2·F·C + C
    + C − 1. Then the post transform on Z. Bytes: the default plus the support vectors,
    coefficients, rho and prob_a/prob_b."""
    rows, features = _rows(node)
    per_class = list(node.attrs.get("vectors_per_class") or [])
    vectors = sum(per_class)
    if vectors:
        classes = len(per_class)
        pairs = classes * (classes - 1) // 2
        kernel_flops, kernel_transcendentals = kernel_cost(node, features)
        flops = vectors * kernel_flops + 2 * (classes - 1) * vectors + 2 * pairs + classes - 1
        transcendentals = vectors * kernel_transcendentals
        if node.attrs.get("prob_a"):
            flops += 2 * pairs
            transcendentals += pairs
    else:
        classes = len(node.attrs.get("coefficients") or []) // max(features, 1)
        flops, transcendentals = 2 * features * classes + classes + max(classes - 1, 0), 0
    width = node.result(1).shape[-1] if node.output(1) is not None and node.result(1).rank else classes
    post_flops, post_transcendentals = post_transform(node, rows, width)
    return with_model_bytes(node, rows * flops + post_flops, rows * transcendentals + post_transcendentals)


@register("SVMRegressor", domain=ML, unit=MATRIX, compute_dtype="float32")
def svm_regressor(node: KnownNode) -> Cost:
    """With V = n_supports support vectors, per sample: V kernel evaluations (as SVMClassifier),
    2V for Σ coefficient·kernel and 1 for rho; without (a linear SVM), 2F + 1. one_class: + 1
    compare (the sign). Then the post transform. Bytes: the default plus the support vectors,
    coefficients and rho."""
    rows, features = _rows(node)
    vectors = node.attrs.get("n_supports", 0)
    if vectors:
        kernel_flops, kernel_transcendentals = kernel_cost(node, features)
        flops, transcendentals = vectors * kernel_flops + 2 * vectors + 1, vectors * kernel_transcendentals
    else:
        flops, transcendentals = 2 * features + 1, 0
    flops += 1 if node.attrs.get("one_class", 0) else 0
    post_flops, post_transcendentals = post_transform(node, rows, 1)
    return with_model_bytes(node, rows * flops + post_flops, rows * transcendentals + post_transcendentals)


# --- tree ensembles ------------------------------------------------------------------------------


Key = TypeVar("Key", bound=Hashable)


def tree_depth(root: Key, children: Callable[[Key], list[Key]], is_leaf: Callable[[Key], bool]) -> int:
    """Interior nodes on the longest root-to-leaf path (iterative; a cycle raises)."""
    depth: dict[Key, int] = {}
    stack: list[tuple[Key, bool]] = [(root, False)]
    on_path: set[Key] = set()
    while stack:
        key, expanded = stack.pop()
        if key in depth:
            continue
        if is_leaf(key):
            depth[key] = 0
            continue
        if expanded:
            on_path.discard(key)
            depth[key] = 1 + max((depth[c] for c in children(key)), default=0)
            continue
        if key in on_path:
            raise ValueError("tree ensemble has a cycle")
        on_path.add(key)
        stack.append((key, True))
        stack.extend((c, False) for c in children(key) if c not in depth)
    return depth[root]


def _aggregation(node: KnownNode, rows: int, width: int, kind_names=("AVERAGE", "SUM", "MIN", "MAX")) -> int:
    """AVERAGE's divides: one per output score."""
    kind = node.attrs.get("aggregate_function", "SUM")
    kind = kind_names[kind] if isinstance(kind, int) and 0 <= kind < len(kind_names) else _text(kind)
    return rows * width if kind == "AVERAGE" else 0


@register("TreeEnsemble", domain=ML, since=5)
def tree_ensemble(node: KnownNode) -> Cost:
    """Per sample and tree: one comparison per level of the tree's depth (its longest root-to-leaf
    path, read from the nodes_* attributes: a batch evaluated in lockstep — SIMD lanes, GPU warps,
    level-by-level kernels — runs every tree to its depth), then one aggregation op for the leaf
    reached (each leaf holds one weight). AVERAGE: + one divide per output score. Then the post
    transform. Bytes: the default plus the tree attributes (nodes_*, leaf_*, membership_values)."""
    attrs = node.attrs
    true_ids, false_ids = attrs["nodes_truenodeids"], attrs["nodes_falsenodeids"]
    true_leaf, false_leaf = attrs["nodes_trueleafs"], attrs["nodes_falseleafs"]

    def children(i: int) -> list[int]:
        return [c for c, leaf in ((true_ids[i], true_leaf[i]), (false_ids[i], false_leaf[i])) if not leaf]

    per_row = sum(tree_depth(root, children, lambda i: False) + 1 for root in attrs["tree_roots"])
    rows = node.operand(0).shape[0] if node.operand(0).rank > 1 else 1
    width = node.result(0).shape[-1]
    post_flops, post_transcendentals = post_transform(node, rows, width)
    return with_model_bytes(node, rows * per_row + _aggregation(node, rows, width) + post_flops, post_transcendentals)


def _legacy_trees(node: KnownNode, vote_prefix: str) -> int:
    """Σ over trees of (depth + the most votes any of its leaves casts), from the nodes_* and
    <vote_prefix>treeids/nodeids attributes of TreeEnsembleRegressor/Classifier."""
    attrs = node.attrs
    trees, ids = attrs["nodes_treeids"], attrs["nodes_nodeids"]
    modes = [_text(m) for m in attrs["nodes_modes"]]
    true_ids, false_ids = attrs["nodes_truenodeids"], attrs["nodes_falsenodeids"]
    nodes = {(t, n): i for i, (t, n) in enumerate(zip(trees, ids, strict=False))}

    def is_leaf(key) -> bool:
        return key not in nodes or modes[nodes[key]] == "LEAF"

    def children(key) -> list:
        i = nodes[key]
        return [(key[0], true_ids[i]), (key[0], false_ids[i])]

    referenced = {child for key in nodes if not is_leaf(key) for child in children(key)}
    roots: dict = {}
    for key in nodes:  # per tree, the first node nobody branches to
        if key not in referenced:
            roots.setdefault(key[0], key)
    votes = Counter(
        zip(attrs.get(vote_prefix + "treeids") or [], attrs.get(vote_prefix + "nodeids") or [], strict=False)
    )
    most_votes: dict = {}
    for (tree, _), count in votes.items():
        most_votes[tree] = max(most_votes.get(tree, 0), count)
    return sum(tree_depth(root, children, is_leaf) + most_votes.get(tree, 0) for tree, root in roots.items())


@register("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(node: KnownNode) -> Cost:
    """Per sample and tree: one comparison per level of the tree's depth (the longest path of
    BRANCH nodes, from nodes_*), plus one add per vote of the leaf reached — counted as the most
    votes any leaf of that tree casts (target_treeids/target_nodeids), as lockstep evaluation runs
    the worst path. Then per sample: one add per base value, AVERAGE's divide per target, the post
    transform. Bytes: the default plus the tree attributes."""
    rows = node.operand(0).shape[0] if node.operand(0).rank > 1 else 1
    width = node.result(0).shape[-1]
    base = len(node.attrs.get("base_values") or []) or _tensor_len(node, "base_values_as_tensor")
    post_flops, post_transcendentals = post_transform(node, rows, width)
    flops = rows * (_legacy_trees(node, "target_") + base) + _aggregation(node, rows, width) + post_flops
    return with_model_bytes(node, flops, post_transcendentals)


@register("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(node: KnownNode) -> Cost:
    """As TreeEnsembleRegressor (depth comparisons plus the most votes of a leaf, per sample and
    tree, from class_treeids/class_nodeids), then per sample: one add per base value, K − 1
    compares for the label's argmax over the K scores of Z, the post transform on Z. Bytes: the
    default plus the tree attributes. String class labels: not costed."""
    rows = node.operand(0).shape[0] if node.operand(0).rank > 1 else 1
    width = node.result(1).shape[-1] if node.output(1) is not None else 1
    base = len(node.attrs.get("base_values") or []) or _tensor_len(node, "base_values_as_tensor")
    post_flops, post_transcendentals = post_transform(node, rows, width)
    flops = rows * (_legacy_trees(node, "class_") + base + max(width - 1, 0)) + post_flops
    return with_model_bytes(node, flops, post_transcendentals)


def _tensor_len(node: KnownNode, name: str) -> int:
    for attr in node.proto.attribute:
        if attr.name == name and attr.type == AttributeProto.TENSOR:
            return math.prod(attr.t.dims)
    return 0

"""Output shapes for the classic-ML ops (ai.onnx.ml), every one of them: ONNX's inference leaves
outputs untyped for Scaler, Normalizer, Imputer, LinearRegressor, the SVMs, FeatureVectorizer,
DictVectorizer and CastMap at every opset, and for the tree ensembles, LabelEncoder and
ArrayFeatureExtractor at the ai.onnx.ml opset 1 that converters (skl2onnx) still write; ZipMap's
sequence of maps it types without a length.

Shapes follow onnxruntime's kernels (onnxruntime/core/providers/cpu/ml/*.cc), which is what a run
returns: the models take X as [N, F], or [F] as one sample (N = 1). A map, or ZipMap's sequence of
maps, is typed as the tensor of its entries with a key dtype (see tensors.TensorInfo)."""

from __future__ import annotations

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.model.tensors import KnownTensor, dtype_name
from onnx_roofline.shapes.rules.arithmetic import same, text
from onnx_roofline.shapes.rules.registry import Output, shape_function

ML = "ai.onnx.ml"


def samples(x: KnownTensor) -> int:
    """N: X's first dim, 1 for a 1-D X (one sample)."""
    return 1 if x.rank <= 1 else x.shape[0]


def labels(node: KnownNode, strings: str, ints: str) -> tuple[int, str]:
    """(count, dtype) of the node's class labels: the strings attribute, else the int64 one."""
    names = node.attrs.get(strings) or []
    return (len(names), "string") if names else (len(node.attrs.get(ints) or []), "int64")


@shape_function("Scaler", "Normalizer", domain=ML)
def to_float(node: KnownNode) -> list[Output]:
    """X's shape, in float32 (Scaler: (x − offset)·scale; Normalizer: x / ‖row‖)."""
    return [(node.operand(0).shape, "float32")]


shape_function("Imputer", "Binarizer", domain=ML)(same(0))


@shape_function("LinearClassifier", domain=ML)
def linear_classifier(node: KnownNode) -> list[Output]:
    """Y [N] labels (int64, or string); Z [N, E] float32 scores, E = len(intercepts) — 2 when one
    intercept scores a two-label (binary) model."""
    n = samples(node.operand(0))
    classes, dtype = labels(node, "classlabels_strings", "classlabels_ints")
    width = len(node.attrs.get("intercepts") or [])
    return [((n,), dtype), ((n, 2 if width == 1 and classes == 2 else width), "float32")]


@shape_function("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(node: KnownNode) -> list[Output]:
    """Y [N] labels (int64, or string); Z [N, C] float32, one score per class label."""
    n = samples(node.operand(0))
    classes, dtype = labels(node, "classlabels_strings", "classlabels_int64s")
    return [((n,), dtype), ((n, classes), "float32")]


@shape_function("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(node: KnownNode) -> list[Output]:
    """[N, n_targets] in float32."""
    return [((samples(node.operand(0)), node.attrs.get("n_targets", 1)), "float32")]


@shape_function("TreeEnsemble", domain=ML)
def tree_ensemble(node: KnownNode) -> list[Output]:
    """[N, n_targets] in X's dtype."""
    x = node.operand(0)
    return [((samples(x), node.attrs["n_targets"]), x.dtype)]


@shape_function("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(node: KnownNode) -> list[Output]:
    """X's shape with its last dim replaced by the count of indices Y; [1, count] for a 1-D X."""
    x, count = node.operand(0), node.operand(1).numel
    return [((1, count) if x.rank == 1 else (*x.shape[:-1], count), x.dtype)]


@shape_function("OneHotEncoder", domain=ML)
def one_hot_encoder(node: KnownNode) -> list[Output]:
    """X's shape + [categories] in float32."""
    count = len(node.attrs.get("cats_strings") or node.attrs.get("cats_int64s") or [])
    return [((*node.operand(0).shape, count), "float32")]


_VALUES = (("values_strings", "string"), ("values_int64s", "int64"), ("values_floats", "float32"))


@shape_function("LabelEncoder", domain=ML)
def label_encoder(node: KnownNode) -> list[Output]:
    """X's shape, in the values' dtype: values_tensor's, else values_strings/int64s/floats (v2+);
    opset 1 (classes_strings) maps string ↔ int64."""
    x, attrs = node.operand(0), node.attrs
    if attrs.get("values_tensor") is not None:
        return [(x.shape, dtype_name(attrs["values_tensor"].data_type))]
    dtype = next((kind for name, kind in _VALUES if attrs.get(name)), None)
    return [(x.shape, dtype or ("int64" if x.dtype == "string" else "string"))]


@shape_function("CategoryMapper", domain=ML)
def category_mapper(node: KnownNode) -> list[Output]:
    """X's shape: strings to int64, int64 to strings."""
    x = node.operand(0)
    return [(x.shape, "int64" if x.dtype == "string" else "string")]


@shape_function("LinearRegressor", domain=ML)
def linear_regressor(node: KnownNode) -> list[Output]:
    """[N, targets] in float32."""
    return [((samples(node.operand(0)), node.attrs.get("targets", 1)), "float32")]


@shape_function("SVMRegressor", domain=ML)
def svm_regressor(node: KnownNode) -> list[Output]:
    """[N, 1] in float32 (one target)."""
    return [((samples(node.operand(0)), 1), "float32")]


@shape_function("SVMClassifier", domain=ML)
def svm_classifier(node: KnownNode) -> list[Output]:
    """Y [N] labels (int64, or string); Z [N, K] float32 scores, K = the class count C, except for
    a one-vs-one SVC (support vectors) without prob_a: its P = C(C − 1)/2 pairwise decision
    values when C > 2, else 2."""
    n = samples(node.operand(0))
    classes, dtype = labels(node, "classlabels_strings", "classlabels_ints")
    width = classes
    if sum(node.attrs.get("vectors_per_class") or []) and not node.attrs.get("prob_a"):
        width = classes * (classes - 1) // 2 if classes > 2 else 2
    return [((n,), dtype), ((n, width), "float32")]


@shape_function("FeatureVectorizer", domain=ML)
def feature_vectorizer(node: KnownNode) -> list[Output]:
    """[N, Σ inputdimensions] in float32: the inputs' rows laid side by side, each cut or
    zero-padded to its declared width; N from the first input."""
    return [((samples(node.operand(0)), sum(node.attrs["inputdimensions"])), "float32")]


@shape_function("DictVectorizer", domain=ML)
def dict_vectorizer(node: KnownNode) -> list[Output]:
    """[1, V] in the map's value dtype: the map's value at each of the V vocabulary keys."""
    vocabulary = node.attrs.get("string_vocabulary") or node.attrs.get("int64_vocabulary") or []
    return [((1, len(vocabulary)), node.operand(0).dtype)]


_CAST_TO = {"TO_FLOAT": "float32", "TO_INT64": "int64", "TO_STRING": "string"}


@shape_function("CastMap", domain=ML)
def cast_map(node: KnownNode) -> list[Output]:
    """[1, entries] (map_form DENSE: the map's values in key order) or [1, max_map] (SPARSE: key k
    at position k, the rest padded), cast to `cast_to`."""
    entries = node.operand(0).shape[-1]
    width = entries if text(node.attrs.get("map_form", "DENSE")) == "DENSE" else node.attrs["max_map"]
    return [((1, width), _CAST_TO[text(node.attrs.get("cast_to", "TO_FLOAT"))])]


@shape_function("ZipMap", domain=ML)
def zip_map(node: KnownNode) -> list[Output]:
    """A sequence of N maps (one per row of X [N, C], or one for a 1-D X) of C entries, label →
    float32 score: typed [N, C] with the labels' key dtype (int64, or string)."""
    x = node.operand(0)
    count, key = labels(node, "classlabels_strings", "classlabels_int64s")
    if x.rank not in (1, 2) or x.shape[-1] != count:
        raise ValueError(f"ZipMap of {x.shape} needs a 1-D or 2-D X of {count} columns (its labels)")
    return [((samples(x), count), "float32", key)]

"""ai.onnx.ml rules (onnx_roofline/costs/rules/ml.py). Attribute-held model weights count as bytes read:
floats 4 B, ints 8 B, tensors by dtype. f32 = 4 bytes, int64 = 8 bytes."""

from __future__ import annotations

from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from tests.conftest import analyze_node, one_node_model

ML = "ai.onnx.ml"


def ml_node(op_type, inputs, outputs, attrs=None, version=1):
    return analyze_node(op_type, inputs, outputs, attrs=attrs, domain=ML, extra_opsets={ML: version})


def test_binarizer():
    node = ml_node("Binarizer", [("x", "float32", [3, 4])], [("y", "float32", [3, 4])], {"threshold": 0.5})
    assert node.cost.flops == 12  # one compare-select per element
    assert node.cost.bytes_read == 12 * 4


def test_scaler_reads_its_scale_and_offset():
    node = ml_node(
        "Scaler",
        [("x", "float32", [3, 4])],
        [("y", "float32", [3, 4])],
        {"scale": [1.0, 2.0, 3.0, 4.0], "offset": [0.0, 0.0, 1.0, 1.0]},
    )
    assert node.cost.flops == 2 * 12  # (x − offset)·scale
    assert node.cost.bytes_read == 12 * 4 + (4 + 4) * 4  # X, then the 8 float attribute values


def test_normalizer_l2():
    node = ml_node("Normalizer", [("x", "float32", [3, 4])], [("y", "float32", [3, 4])], {"norm": "L2"})
    assert node.cost.flops == 3 * 4 * 3  # per row: x² (4), sum (3), clamp (1), divide (4)
    assert node.cost.transcendentals == 3  # one sqrt per row


def test_imputer_and_one_hot_encoder():
    imputer = ml_node(
        "Imputer",
        [("x", "float32", [2, 3])],
        [("y", "float32", [2, 3])],
        {"imputed_value_floats": [0.0], "replaced_value_float": float("nan")},
    )
    assert imputer.cost.flops == 6  # one compare-select per element
    assert imputer.cost.bytes_read == 6 * 4 + 4
    encoder = ml_node(
        "OneHotEncoder", [("x", "int64", [2, 3])], [("y", "float32", [2, 3, 4])], {"cats_int64s": [1, 2, 3, 4]}
    )
    assert encoder.cost.flops == 6  # one category lookup per input element
    assert encoder.cost.bytes_read == 6 * 8 + 4 * 8
    assert encoder.cost.bytes_written == 2 * 3 * 4 * 4


def test_label_encoder_int_to_int():
    node = ml_node(
        "LabelEncoder",
        [("x", "int64", [10])],
        [("y", "int64", [10])],
        {"keys_int64s": [1, 2, 3], "values_int64s": [4, 5, 6]},
        version=2,
    )
    assert node.cost.flops == 10  # one hash lookup per element
    assert node.cost.bytes_read == 10 * 8 + (3 + 3) * 8  # X and the table


def test_array_feature_extractor_reads_the_selected_columns():
    node = ml_node("ArrayFeatureExtractor", [("x", "float32", [3, 4]), ("i", "int64", [2])], [("z", "float32", [3, 2])])
    assert node.cost.flops == 0
    assert node.cost.bytes_read == 3 * 2 * 4 + 2 * 8  # the 6 picked values, the 2 indices
    assert node.cost.bytes_written == 3 * 2 * 4


def test_feature_vectorizer_is_a_copy():
    node = ml_node(
        "FeatureVectorizer",
        [("a", "float32", [2, 3]), ("b", "float32", [2, 1])],
        [("y", "float32", [2, 4])],
        {"inputdimensions": [3, 1]},
    )
    assert node.cost.flops == 0
    assert node.cost.bytes_read == (6 + 2) * 4  # the inputs; inputdimensions is shape metadata


def test_linear_classifier_softmax():
    # X [N=5, F=4], 3 classes
    node = ml_node(
        "LinearClassifier",
        [("x", "float32", [5, 4])],
        [("label", "int64", [5]), ("scores", "float32", [5, 3])],
        {
            "coefficients": [0.1] * 12,
            "intercepts": [0.0] * 3,
            "classlabels_ints": [0, 1, 2],
            "post_transform": "SOFTMAX",
        },
    )
    per_row = 2 * 4 * 3 + 3 + 2  # GEMM row, intercepts, argmax over 3 scores
    softmax = 4 * 3 - 2  # per row of 3
    assert node.cost.flops == 5 * (per_row + softmax)
    assert node.cost.transcendentals == 5 * 3
    assert node.cost.bytes_read == 5 * 4 * 4 + (12 + 3) * 4 + 3 * 8  # X, coefficients + intercepts, labels
    assert node.unit == "matrix"


def test_linear_regressor():
    node = ml_node(
        "LinearRegressor",
        [("x", "float32", [5, 4])],
        [("y", "float32", [5, 2])],
        {"coefficients": [0.5] * 8, "intercepts": [1.0, 2.0], "targets": 2},
    )
    assert node.cost.flops == 5 * (2 * 4 * 2 + 2)


def test_svm_classifier_rbf():
    # F = 3; classes with 2 and 1 support vectors (V = 3, C = 2, one pair)
    node = ml_node(
        "SVMClassifier",
        [("x", "float32", [2, 3])],
        [("label", "int64", [2]), ("scores", "float32", [2, 1])],
        {
            "vectors_per_class": [2, 1],
            "support_vectors": [0.0] * 9,
            "coefficients": [1.0] * 3,
            "rho": [0.1],
            "kernel_type": "RBF",
            "kernel_params": [0.5, 0.0, 3.0],
            "classlabels_ints": [0, 1],
        },
    )
    kernels = 3 * (3 * 3 + 1)  # per vector: subtract, square, add per feature; × −gamma
    decision = 2 * (2 - 1) * 3 + 1 + 1 + 1  # Σ coef·k over both classes' vectors, rho, vote, argmax
    assert node.cost.flops == 2 * (kernels + decision)
    assert node.cost.transcendentals == 2 * 3  # one exp per kernel


def test_svm_regressor_linear():
    node = ml_node(
        "SVMRegressor",
        [("x", "float32", [4, 3])],
        [("y", "float32", [4, 1])],
        {"coefficients": [1.0, 2.0, 3.0], "rho": [0.5], "n_supports": 0},
    )
    assert node.cost.flops == 4 * (2 * 3 + 1)  # a dot product and rho per sample


def _tree_ensemble_attrs():
    """Tree A: node 0 → node 1 (two leaves) and node 2 (two leaves): depth 2.
    Tree B: node 3 with both branches on leaves: depth 1. Six leaves, one target."""
    return {
        "tree_roots": [0, 3],
        "nodes_featureids": [0, 0, 1, 1],
        "nodes_splits": helper.make_tensor("s", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0]),
        "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [4], [0, 0, 0, 0]),
        "nodes_truenodeids": [1, 0, 2, 4],
        "nodes_trueleafs": [0, 1, 1, 1],
        "nodes_falsenodeids": [2, 1, 3, 5],
        "nodes_falseleafs": [0, 1, 1, 1],
        "leaf_targetids": [0] * 6,
        "leaf_weights": helper.make_tensor("w", TensorProto.FLOAT, [6], [1.0] * 6),
        "n_targets": 1,
    }


def test_tree_ensemble_counts_levels_from_the_attributes():
    node = ml_node(
        "TreeEnsemble", [("x", "float32", [3, 2])], [("y", "float32", [3, 1])], _tree_ensemble_attrs(), version=5
    )
    per_row = (2 + 1) + (1 + 1)  # per tree: a compare per level, an add for the leaf's weight
    assert node.cost.flops == 3 * per_row
    attribute_bytes = (
        2 * 8
        + 4 * 8  # tree_roots, nodes_featureids
        + 4 * 4
        + 4 * 1  # nodes_splits (float), nodes_modes (uint8)
        + 4 * 4 * 8  # true/false node ids and leaf flags
        + 6 * 8
        + 6 * 4  # leaf_targetids, leaf_weights
    )
    assert node.cost.bytes_read == 3 * 2 * 4 + attribute_bytes
    average = ml_node(
        "TreeEnsemble",
        [("x", "float32", [3, 2])],
        [("y", "float32", [3, 1])],
        {**_tree_ensemble_attrs(), "aggregate_function": 0},
        version=5,
    )
    assert average.cost.flops == 3 * per_row + 3  # one divide per output score


LEGACY_TREE = {  # one tree: 0 → (1, 2), 1 → (3, 4); 2, 3, 4 leaves
    "nodes_treeids": [0, 0, 0, 0, 0],
    "nodes_nodeids": [0, 1, 2, 3, 4],
    "nodes_featureids": [0, 1, 0, 0, 0],
    "nodes_values": [0.5, 0.5, 0.0, 0.0, 0.0],
    "nodes_modes": ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF"],
    "nodes_truenodeids": [1, 3, 0, 0, 0],
    "nodes_falsenodeids": [2, 4, 0, 0, 0],
}


def test_tree_ensemble_regressor_legacy():
    attrs = {
        **LEGACY_TREE,
        "n_targets": 2,
        "aggregate_function": "AVERAGE",
        "base_values": [0.5, 0.5],
        "target_treeids": [0, 0, 0, 0],
        "target_nodeids": [2, 3, 3, 4],
        "target_ids": [0, 0, 1, 1],
        "target_weights": [1.0, 2.0, 3.0, 4.0],
    }
    node = ml_node("TreeEnsembleRegressor", [("x", "float32", [4, 3])], [("y", "float32", [4, 2])], attrs, version=3)
    per_row = 2 + 2 + 2 + 2  # depth 2, leaf 3's two votes, two base values, two AVERAGE divides
    assert node.cost.flops == 4 * per_row


def test_tree_ensemble_classifier_legacy_logistic():
    attrs = {
        **LEGACY_TREE,
        "classlabels_int64s": [0, 1, 2],
        "post_transform": "LOGISTIC",
        "class_treeids": [0, 0, 0],
        "class_nodeids": [2, 3, 4],
        "class_ids": [0, 1, 2],
        "class_weights": [1.0, 1.0, 1.0],
    }
    node = ml_node(
        "TreeEnsembleClassifier",
        [("x", "float32", [4, 3])],
        [("label", "int64", [4]), ("scores", "float32", [4, 3])],
        attrs,
        version=3,
    )
    assert node.cost.flops == 4 * (2 + 1 + 2)  # depth 2, one vote, argmax over 3 scores
    assert node.cost.transcendentals == 4 * 3  # a sigmoid per score


def test_string_keyed_maps_are_not_costed_and_strings_are_at_the_length_assumed():
    zipmap = one_node_model(
        "ZipMap", [("x", "float32", [2, 3])], ["z"], attrs={"classlabels_strings": ["a", "b", "c"]}, domain=ML
    )
    (node,) = analyze(zipmap).nodes
    assert node.status == "data-dependent" and node.cost is None  # string keys have no static size
    mapper = one_node_model(
        "CategoryMapper",
        [("x", "int64", [4])],
        ["y"],
        attrs={"cats_int64s": [1, 2], "cats_strings": ["a", "b"]},
        domain=ML,
    )
    (node,) = analyze(mapper, sizing=Sizing(string_bytes=10)).nodes
    assert node.cost.flops == 4  # one lookup an element
    assert node.cost.bytes == 4 * 8 + 2 * 8 + 4 * 10  # x, cats_int64s read; 4 strings of 10 bytes written

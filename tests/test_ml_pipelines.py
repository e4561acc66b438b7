"""Classic-ML pipelines as skl2onnx converts them (ai.onnx.ml ops): shape rules (shape_rules/ml.py)
and cost rules (rules/ml.py), against onnxruntime's real run.

Pipelines (random data, fitted here, nothing downloaded): StandardScaler/Normalizer/MinMaxScaler
or an imputer before LogisticRegression, SVC (RBF, with and without probabilities, binary and
one-vs-one multi-class), LinearSVC, SVR, LinearRegression, RandomForest and GradientBoosting
classifiers and regressors, and a ColumnTransformer with a OneHotEncoder; each classifier with its
ZipMap (skl2onnx's default: a sequence of N maps of C class → probability entries) and without.
skl2onnx writes them at ai.onnx.ml opset 1, where ONNX's inference types few outputs. Each is
analyzed at batch 8: every node costed, every output's shape what onnxruntime returns (a sequence
of maps: its length and its maps' size)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.costs.rules import ml as ml_rules
from onnx_roofline.model.op_node import OpNode
from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.shapes import rules as shape_rules
from onnx_roofline.shapes.engine import collect
from tests.conftest import analyze_node

ort = pytest.importorskip("onnxruntime")
sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, Normalizer, OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR, LinearSVC  # noqa: E402

ML = "ai.onnx.ml"
SAMPLES, BATCH, FEATURES = 64, 8, 6

# --- the pipelines ---------------------------------------------------------------------------------------


def _one_hot_columns():
    """4 numeric columns scaled, 2 integer-valued categorical columns one-hot encoded."""
    encode = ColumnTransformer(
        [("num", StandardScaler(), [0, 1, 2, 3]), ("cat", OneHotEncoder(handle_unknown="ignore"), [4, 5])]
    )
    return make_pipeline(encode, LogisticRegression())


PIPELINES = {  # name: (estimator factory, target: "classes3" | "classes2" | "real"); classifiers with probabilities get a ZipMap
    "scaler_logistic": (lambda: make_pipeline(StandardScaler(), LogisticRegression()), "classes3"),
    "normalizer_logistic_binary": (lambda: make_pipeline(Normalizer(), LogisticRegression()), "classes2"),
    "scaler_svc_probability": (lambda: make_pipeline(StandardScaler(), SVC(probability=True)), "classes3"),
    "svc_one_vs_one": (lambda: SVC(), "classes3"),
    "svc_binary": (lambda: SVC(), "classes2"),
    "linear_svc": (lambda: LinearSVC(), "margins3"),  # no probabilities, no ZipMap
    "random_forest_classifier": (
        lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0),
        "classes3",
    ),
    "gradient_boosting_classifier": (
        lambda: GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0),
        "classes3",
    ),
    "gradient_boosting_binary": (
        lambda: GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0),
        "classes2",
    ),
    "random_forest_regressor": (lambda: RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), "real"),
    "gradient_boosting_regressor": (
        lambda: GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0),
        "real",
    ),
    "minmax_svr": (lambda: make_pipeline(MinMaxScaler(), SVR()), "real"),
    "imputer_linear_regression": (lambda: make_pipeline(SimpleImputer(), LinearRegression()), "real"),
    "one_hot_column_transformer": (_one_hot_columns, "classes3"),
}


def _variants(target: str) -> tuple[str, ...]:
    """ZipMap on (skl2onnx's default) and off, where the model outputs probabilities."""
    return ("", "-nozipmap") if target.startswith("classes") else ("",)


NAMES = [name + suffix for name, (_, target) in PIPELINES.items() for suffix in _variants(target)]


def _data() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    x[:, 4:] = rng.integers(0, 4, (SAMPLES, 2))  # categories for the one-hot pipeline
    classes3 = rng.integers(0, 3, SAMPLES)
    targets = {
        "classes3": classes3,
        "margins3": classes3,
        "classes2": rng.integers(0, 2, SAMPLES),
        "real": rng.standard_normal(SAMPLES),
    }
    return x, targets


@dataclass(frozen=True)
class Case:
    model: onnx.ModelProto
    observed: dict[str, tuple]  # every node output: a tensor's shape, ("sequence", N, C) for ZipMap's


def _observed(value) -> tuple:
    if isinstance(value, list):  # a sequence of maps
        return ("sequence", len(value), len(value[0]) if value else 0)
    return tuple(value.shape)


def _run_every_output(model: onnx.ModelProto, feeds) -> dict[str, tuple]:
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    declared = {o.name for o in exposed.graph.output}
    for name in (o for n in exposed.graph.node for o in n.output if o and o not in declared):
        exposed.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = _session(exposed)
    return {o.name: _observed(v) for o, v in zip(session.get_outputs(), session.run(None, feeds), strict=False)}


def _session(model: onnx.ModelProto):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def converted() -> dict[str, Case]:
    x, targets = _data()
    cases = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and deprecation chatter from the fits
        for name, (factory, target) in PIPELINES.items():
            estimator = factory().fit(x, targets[target])
            final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
            for suffix in _variants(target):
                options = {id(final): {"zipmap": False}} if suffix else None
                model = skl2onnx.to_onnx(estimator, x[:1], options=options, target_opset={"": 17, ML: 3})
                cases[name + suffix] = Case(model, _run_every_output(model, {model.graph.input[0].name: x[:BATCH]}))
    return cases


def _shown(tensor: TensorInfo) -> tuple:
    return ("sequence", *tensor.shape) if tensor.key_dtype else tensor.shape


# --- the pipelines, end to end -----------------------------------------------------------------------------


def test_the_pipelines_hold_the_ops_they_should(converted):
    ops = {n.op_type for case in converted.values() for n in case.model.graph.node if n.domain == ML}
    assert ops >= {
        "Scaler",
        "Normalizer",
        "Imputer",
        "LinearClassifier",
        "LinearRegressor",
        "SVMClassifier",
        "SVMRegressor",
        "TreeEnsembleClassifier",
        "TreeEnsembleRegressor",
        "OneHotEncoder",
        "ArrayFeatureExtractor",
        "ZipMap",
    }
    assert any(n.op_type == "ZipMap" for n in converted["scaler_logistic"].model.graph.node)
    assert not any(n.op_type == "ZipMap" for n in converted["scaler_logistic-nozipmap"].model.graph.node)


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_is_costed_with_the_shapes_onnxruntime_returns(converted, name):
    case = converted[name]
    report = analyze(case.model, sizing=Sizing(input_shapes={case.model.graph.input[0].name: [BATCH, FEATURES]}))
    assert report.totals.uncosted_nodes == 0, [(n.name, n.status, n.reason) for n in report.nodes if n.status != "ok"]
    outputs = {t.name: _shown(t) for n in report.nodes for t in n.outputs if t is not None}
    assert outputs == case.observed


def test_a_pipelines_unnamed_batch_binds_by_its_given_name(converted):
    """skl2onnx declares the batch with no name (X [?, 6]): it is bound as X_dim0, to the same
    shapes onnxruntime returns as a whole input shape gives."""
    case = converted["scaler_logistic"]
    declared = case.model.graph.input[0]
    assert declared.type.tensor_type.shape.dim[0].WhichOneof("value") is None
    report = analyze(case.model, sizing=Sizing(dims={f"{declared.name}_dim0": BATCH}))
    assert report.totals.uncosted_nodes == 0
    assert {t.name: _shown(t) for n in report.nodes for t in n.outputs if t is not None} == case.observed
    from onnx_roofline.commands.verify import verify

    assert verify(
        case.model, dims={f"{declared.name}_dim0": BATCH}
    ).passed  # verify feeds the batch it is given by that name


def test_zipmap_writes_its_entries(converted):
    """N maps of C entries, each an int64 key and a float32 value."""
    report = analyze(converted["scaler_logistic"].model, sizing=Sizing(input_shapes={"X": [BATCH, FEATURES]}))
    (zipmap,) = [n for n in report.nodes if n.op_type == "ZipMap"]
    assert zipmap.outputs[0].shape == (BATCH, 3) and zipmap.outputs[0].key_dtype == "int64"
    assert zipmap.cost.flops == 0
    assert zipmap.cost.bytes_written == BATCH * 3 * (8 + 4)
    assert zipmap.cost.bytes_read == BATCH * 3 * 4 + 3 * 8  # the probabilities, the labels attribute


# --- one node: each shape rule against onnxruntime -----------------------------------------------------------


def _tensor(name, dtype, shape):
    return helper.make_tensor_value_info(name, getattr(TensorProto, dtype), shape)


LEGACY_TREE = {  # one tree: node 0 splits on feature 1, leaves 1 and 2
    "nodes_treeids": [0, 0, 0],
    "nodes_nodeids": [0, 1, 2],
    "nodes_featureids": [1, 0, 0],
    "nodes_values": [0.0, 0.0, 0.0],
    "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
    "nodes_truenodeids": [1, 0, 0],
    "nodes_falsenodeids": [2, 0, 0],
}
TREE_V5 = {  # the same tree as TreeEnsemble (ai.onnx.ml 5) writes it, in double
    "tree_roots": [0],
    "nodes_featureids": [1],
    "nodes_splits": helper.make_tensor("s", TensorProto.DOUBLE, [1], [0.0]),
    "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [1], [0]),
    "nodes_truenodeids": [0],
    "nodes_trueleafs": [1],
    "nodes_falsenodeids": [1],
    "nodes_falseleafs": [1],
    "leaf_targetids": [0, 1],
    "leaf_weights": helper.make_tensor("w", TensorProto.DOUBLE, [2], [1.0, 2.0]),
    "n_targets": 2,
}
SVC3 = {
    "vectors_per_class": [1, 1, 1],
    "support_vectors": [0.1] * 12,
    "coefficients": [1.0] * 6,
    "rho": [0.0] * 3,
    "classlabels_ints": [0, 1, 2],
    "kernel_type": "RBF",
    "kernel_params": [0.1, 0.0, 3.0],
}
LINEAR = {"kernel_type": "LINEAR", "kernel_params": [0.1, 0.0, 3.0], "rho": [0.0]}
X34 = [("x", "FLOAT", [3, 4])]

ONE_NODE = {  # name: (op_type, inputs, attrs, ai.onnx.ml opset)
    "scaler": ("Scaler", [("x", "INT64", [3, 4])], {"scale": [2.0], "offset": [1.0]}, 1),
    "normalizer": ("Normalizer", X34, {"norm": "L1"}, 1),
    "imputer": ("Imputer", [("x", "INT64", [3, 4])], {"imputed_value_int64s": [0], "replaced_value_int64": -1}, 1),
    "binarizer": ("Binarizer", X34, {}, 1),
    "linear_classifier": (
        "LinearClassifier",
        X34,
        {"coefficients": [0.1] * 12, "intercepts": [0.0] * 3, "classlabels_ints": [4, 5, 6]},
        1,
    ),
    "linear_classifier_binary": (
        "LinearClassifier",
        X34,
        {"coefficients": [0.1] * 4, "intercepts": [0.0], "classlabels_ints": [0, 1]},
        1,
    ),
    "linear_regressor": ("LinearRegressor", [("x", "FLOAT", [4])], {"coefficients": [0.1] * 8, "targets": 2}, 1),
    "svm_classifier_one_vs_one": ("SVMClassifier", X34, SVC3, 1),
    "svm_classifier_probability": ("SVMClassifier", X34, {**SVC3, "prob_a": [1.0] * 3, "prob_b": [0.0] * 3}, 1),
    "svm_classifier_linear": (
        "SVMClassifier",
        X34,
        {**LINEAR, "coefficients": [0.1] * 8, "classlabels_ints": [0, 1]},
        1,
    ),
    "svm_regressor": (
        "SVMRegressor",
        X34,
        {**LINEAR, "support_vectors": [0.1] * 8, "coefficients": [1.0, 1.0], "n_supports": 2},
        1,
    ),
    "tree_classifier": (
        "TreeEnsembleClassifier",
        X34,
        {
            **LEGACY_TREE,
            "class_treeids": [0, 0],
            "class_nodeids": [1, 2],
            "class_ids": [0, 1],
            "class_weights": [1.0, 1.0],
            "classlabels_int64s": [3, 7],
        },
        1,
    ),
    "tree_regressor": (
        "TreeEnsembleRegressor",
        X34,
        {
            **LEGACY_TREE,
            "n_targets": 3,
            "target_treeids": [0, 0],
            "target_nodeids": [1, 2],
            "target_ids": [0, 2],
            "target_weights": [1.0, 2.0],
        },
        1,
    ),
    "tree_ensemble_v5": ("TreeEnsemble", [("x", "DOUBLE", [3, 4])], TREE_V5, 5),
    "array_feature_extractor": ("ArrayFeatureExtractor", [("x", "FLOAT", [2, 3, 4]), ("i", "INT64", [2, 1])], {}, 1),
    "array_feature_extractor_1d": ("ArrayFeatureExtractor", [("x", "FLOAT", [4]), ("i", "INT64", [3])], {}, 1),
    "one_hot_encoder": ("OneHotEncoder", [("x", "INT64", [3, 2])], {"cats_int64s": [0, 1, 2, 3]}, 1),
    "label_encoder_v2": (
        "LabelEncoder",
        [("x", "INT64", [5])],
        {"keys_int64s": [1, 2], "values_floats": [0.5, 1.5]},
        2,
    ),
    "feature_vectorizer": (
        "FeatureVectorizer",
        [("a", "FLOAT", [3, 4]), ("b", "FLOAT", [3, 2])],
        {"inputdimensions": [4, 3]},
        1,
    ),
    "zip_map": ("ZipMap", X34, {"classlabels_int64s": [10, 11, 12, 13]}, 1),
    "zip_map_1d": ("ZipMap", [("x", "FLOAT", [4])], {"classlabels_int64s": [10, 11, 12, 13]}, 1),
}


def _ml_model(op_type, inputs, attrs, version) -> onnx.ModelProto:
    outputs = ["y", "z"] if op_type.endswith("Classifier") else ["y"]
    node = helper.make_node(op_type, [name for name, *_ in inputs], outputs, domain=ML, **attrs)
    graph = helper.make_graph(
        [node], "one", [_tensor(*spec) for spec in inputs], [helper.make_empty_tensor_value_info(o) for o in outputs]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, version)])


def _feeds(inputs) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {}
    for name, dtype, shape in inputs:
        kind = helper.tensor_dtype_to_np_dtype(getattr(TensorProto, dtype))
        arrays[name] = (
            rng.integers(0, 2, shape).astype(kind)
            if np.issubdtype(kind, np.integer)
            else rng.standard_normal(shape).astype(kind)
        )
    return arrays


def _rule(model: onnx.ModelProto, inputs: tuple[TensorInfo, ...], opset: int) -> dict[str, tuple]:
    typed = shape_rules.infer_node(model.graph.node[0], inputs, lambda name: None, opset)
    return {name: (_shown(t), t.dtype) for name, t in typed.items()}


@pytest.mark.parametrize("case", sorted(ONE_NODE))
def test_shape_rule_matches_onnxruntime_on_one_node(case):
    op_type, inputs, attrs, version = ONE_NODE[case]
    model = _ml_model(op_type, inputs, attrs, version)
    session = _session(model)
    results = session.run(None, _feeds(inputs))
    values = collect(model.graph)
    expected = {o.name: (_observed(v), _dtype(v)) for o, v in zip(session.get_outputs(), results, strict=False)}
    assert _rule(model, tuple(values[name] for name, *_ in inputs), version) == expected


def _dtype(value) -> str:
    if isinstance(value, list):
        return "float32"  # ZipMap's map values
    return {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.int64): "int64"}.get(
        value.dtype, str(value.dtype)
    )


def _map_input(key: int, value: int) -> onnx.ValueInfoProto:
    return helper.make_value_info("m", helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, [])))


MAPS = {  # name: (op_type, attrs, map keys/values type, output dtype)
    "dict_vectorizer": (
        "DictVectorizer",
        {"int64_vocabulary": [1, 2, 5, 7, 9]},
        (TensorProto.INT64, TensorProto.FLOAT),
        "float32",
    ),
    "cast_map_dense": ("CastMap", {"cast_to": "TO_INT64"}, (TensorProto.INT64, TensorProto.FLOAT), "int64"),
    "cast_map_sparse": (
        "CastMap",
        {"map_form": "SPARSE", "max_map": 6},
        (TensorProto.INT64, TensorProto.FLOAT),
        "float32",
    ),
}


@pytest.mark.parametrize("case", sorted(MAPS))
def test_map_input_shape_rule_matches_onnxruntime(case):
    """A map of 3 entries in, a tensor out: DictVectorizer [1, vocabulary], CastMap [1, entries]
    (DENSE) or [1, max_map] (SPARSE)."""
    op_type, attrs, (key, value), dtype = MAPS[case]
    node = helper.make_node(op_type, ["m"], ["y"], domain=ML, **attrs)
    graph = helper.make_graph([node], "one", [_map_input(key, value)], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    (y,) = _session(model).run(None, {"m": {1: 0.5, 2: 1.5, 5: 2.5}})
    entries = TensorInfo("m", (3,), "float32", "int64")
    assert _rule(model, (entries,), 1) == {"y": (y.shape, dtype)}


def test_a_pipeline_on_feature_dicts_is_costed_through_given_its_entries():
    """skl2onnx's DictVectorizer → LogisticRegression over int-keyed feature dicts: the graph input
    is a map, sized by the entries given (3); every node costed, the outputs as onnxruntime runs them."""
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, Int64TensorType
    from sklearn.feature_extraction import DictVectorizer

    rng = np.random.default_rng(0)
    rows = [{int(k): float(rng.random()) for k in rng.choice(6, 3, replace=False)} for _ in range(40)]
    pipe = make_pipeline(DictVectorizer(sparse=False), LogisticRegression()).fit(rows, rng.integers(0, 2, 40))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = skl2onnx.to_onnx(
            pipe,
            initial_types=[("x", DictionaryType(Int64TensorType([]), FloatTensorType([])))],
            options={id(pipe[-1]): {"zipmap": False}},
            target_opset={"": 17, ML: 3},
        )
    report = analyze(model, sizing=Sizing(input_shapes={"x": (3,)}))
    assert report.uncosted.count == 0
    label, probabilities = _session(model).run(None, {"x": rows[0]})
    outputs = {t.name: t.shape for n in report.nodes for t in n.outputs if t is not None}
    assert (outputs["label"], outputs["probabilities"]) == (label.shape, probabilities.shape)
    vectorizer = next(n for n in report.nodes if n.op_type == "DictVectorizer")
    assert vectorizer.cost.flops == 6  # the 6 keys seen in fitting, one lookup each


def test_zipmap_of_the_wrong_width_is_not_typed():
    model = _ml_model("ZipMap", X34, {"classlabels_int64s": [0, 1]}, 1)
    assert _rule(model, (TensorInfo("x", (3, 4), "float32"),), 1) == {}


# --- maps: sizes and costs -----------------------------------------------------------------------------------------


def test_a_map_is_sized_by_its_entries():
    sequence = TensorInfo("z", (8, 3), "float32", "int64")
    assert sequence.nbytes == 8 * 3 * (8 + 4)  # 24 entries, an int64 key and a float32 value each
    assert sequence.value_info().type.sequence_type.elem_type.map_type.key_type == TensorProto.INT64
    assert (
        TensorInfo("m", (5,), "float32", "int64").value_info().type.map_type.value_type.tensor_type.elem_type
        == TensorProto.FLOAT
    )
    assert sequence.to_dict() == {"name": "z", "shape": [8, 3], "dtype": "float32", "key_dtype": "int64"}
    assert "key_dtype" not in TensorInfo("t", (2,), "float32").to_dict()


def test_zipmap_with_string_labels_is_data_dependent():
    model = _ml_model("ZipMap", X34, {"classlabels_strings": ["a", "b", "c", "d"]}, 1)
    (node,) = analyze(model).nodes
    assert node.status == "data-dependent" and "string keys" in node.reason


def test_zipmap_cost_one_node():
    node = analyze_node(
        "ZipMap",
        [("x", "float32", [3, 4])],
        ["z"],
        attrs={"classlabels_int64s": [0, 1, 2, 3]},
        domain=ML,
        extra_opsets={ML: 1},
    )
    assert node.cost.flops == 0
    assert node.cost.bytes_read == 3 * 4 * 4 + 4 * 8  # X, the labels
    assert node.cost.bytes_written == 3 * 4 * (8 + 4)


def _map_cost(rule, op_type, attrs, entries: TensorInfo, out: TensorInfo):
    """The rule called on a map-input node directly, on the entries given (test_map_inputs.py goes
    through the walk)."""
    node = helper.make_node(op_type, [entries.name], [out.name], domain=ML, **attrs)
    return rule(OpNode(node, 1, (entries,), (out,), lambda name: None))


def test_dict_vectorizer_cost():
    entries, out = TensorInfo("m", (3,), "float32", "int64"), TensorInfo("y", (1, 5), "float32")
    cost = _map_cost(ml_rules.dict_vectorizer, "DictVectorizer", {"int64_vocabulary": [1, 2, 5, 7, 9]}, entries, out)
    assert cost.flops == 5  # one lookup per vocabulary key
    assert cost.bytes_read == 3 * (8 + 4) + 5 * 8  # the map's entries, the vocabulary


def test_cast_map_cost():
    entries, out = TensorInfo("m", (3,), "float32", "int64"), TensorInfo("y", (1, 6), "float32")
    cost = _map_cost(ml_rules.cast_map, "CastMap", {"map_form": "SPARSE", "max_map": 6}, entries, out)
    assert cost.flops == 0 and cost.bytes_read is None  # a cast: the default bytes, 3·12 read, 6·4 written


# --- onnxmltools -------------------------------------------------------------------------------------------


def test_onnxmltools_lightgbm_declared_label_gives_way_to_the_batch():
    """onnxmltools writes a LightGBM classifier's `label` as [1] and `probabilities` as [?, 2]
    whatever the batch; onnxruntime returns BATCH labels, and the analysis must write them (the
    Cast that makes the label: BATCH int64s, not one)."""
    lightgbm = pytest.importorskip("lightgbm")
    onnxmltools = pytest.importorskip("onnxmltools")
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, targets = _data()
    classifier = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1).fit(x, targets["classes2"])
    model = onnxmltools.convert_lightgbm(
        classifier, initial_types=[("input", FloatTensorType([None, FEATURES]))], zipmap=False, target_opset=15
    )
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [
        1
    ]  # the declaration this test is about
    observed = _run_every_output(model, {"input": x[:BATCH]})
    (batch,) = [name for name in analyze(model, sizing=Sizing(default_dims=True)).model.dims]
    report = analyze(model, sizing=Sizing(dims={batch: BATCH}))
    assert report.totals.uncosted_nodes == 0
    assert {t.name: _shown(t) for n in report.nodes for t in n.outputs if t is not None} == observed
    from onnx_roofline.commands.verify import verify

    assert verify(model, dims={batch: BATCH}).passed

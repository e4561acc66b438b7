"""One small graph for each class of input the fuzz campaign (tests/fuzz/, issue 32) found to end
in a traceback or a memory blow-up, built with onnx.helper. Each ends in a report, or in one
line and exit 2, never a traceback (docs/hostile-inputs.md, "Malformed values and structures")."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import analyze
from onnx_roofline.model.constants import tensor_array
from tests import hostile
from tests.test_hostile import run

CORPUS_QDQ = Path(__file__).parent / "corpus" / "models" / "qdq_resnet.onnx"
MAX_VIRTUAL_MEMORY = 2 * 2**30  # a CLI process needs ~0.5 GiB of address space; an unbounded fold, terabytes


def refused_by_onnxruntime(path) -> bool:
    """The oracle: whether onnxruntime refuses to load the model (any refusal counts)."""
    import onnxruntime

    try:
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 (any refusal: the oracle's verdict is all that counts)
        return True
    return False


def clean(code: int, err: str, allowed=(0, 2)) -> None:
    """The exit codes the case may give; every stderr line the tool's own; exit 2 with one error."""
    assert code in allowed, err
    lines = err.splitlines()
    assert all(line.startswith("onnx-roofline: ") for line in lines), err
    if code == 2:
        assert sum(line.startswith("onnx-roofline: error: ") for line in lines) == 1, err


# --- a stored tensor whose bytes are not its value ------------------------------------------------------------


def int64_shape(values, name="shape") -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def truncated(tensor: TensorProto) -> TensorProto:
    tensor.raw_data = tensor.raw_data[:-1]
    return tensor


def extended(tensor: TensorProto) -> TensorProto:
    tensor.raw_data = tensor.raw_data + b"\x01"
    return tensor


def strings_on_a_number(tensor: TensorProto) -> TensorProto:
    tensor.ClearField("raw_data")
    tensor.string_data.extend([b"fuzz", b""])
    return tensor


def undefined_type(code: int):
    def retype(tensor: TensorProto) -> TensorProto:
        tensor.data_type = code
        return tensor

    return retype


MALFORMED = {
    "raw_data one byte short": truncated,
    "string_data on an int64": strings_on_a_number,
    "data_type 255": undefined_type(255),
    "data_type 0 (UNDEFINED)": undefined_type(0),
}


@pytest.mark.parametrize("malform", [*MALFORMED.values(), extended], ids=[*MALFORMED.keys(), "raw_data one byte long"])
def test_a_malformed_tensor_has_no_value(malform):
    assert tensor_array(malform(int64_shape([2, 4]))) is None


def test_well_formed_tensors_read_as_stored():
    for array in (
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array(7, np.int64),
        np.array([True, False]),
        np.array([1 + 2j], np.complex64),
        np.array(["ab", "c"], dtype=object),
        np.zeros((0, 3), np.float16),
    ):
        np.testing.assert_array_equal(tensor_array(numpy_helper.from_array(array, "t")), array)
    int4 = helper.make_tensor("t", TensorProto.INT4, [3], [1, -2, 3])  # two to a byte
    np.testing.assert_array_equal(tensor_array(int4), [1, -2, 3])


def reshape_model(shape: TensorProto) -> onnx.ModelProto:
    """x [2, 4] → Reshape(x, shape) → Relu: the Reshape's target is the constant."""
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    return hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, None)], [shape])


@pytest.mark.parametrize("malform", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_shape_constant_leaves_its_node_uncosted(tmp_path, capsys, malform):
    path = hostile.save(reshape_model(malform(int64_shape([8]))), tmp_path / "m.onnx")
    code, _, err = run(capsys, path)
    clean(code, err, allowed=(2,))
    assert "none of the 2 nodes could be costed" in err and "root cause is reshape (Reshape)" in err


def test_a_shape_constant_one_byte_long(tmp_path, capsys):
    """ONNX's own inference of the whole graph reads the first 8 bytes as the target, and types
    the Reshape with it (onnxruntime refuses the file); the analysis reads no value of it."""
    code, _, err = run(capsys, hostile.save(reshape_model(extended(int64_shape([8]))), tmp_path / "m.onnx"))
    clean(code, err, allowed=(0, 2))


@pytest.mark.parametrize("malform", [truncated, extended], ids=["short", "long"])
def test_a_malformed_weight_is_costed_by_its_dims(tmp_path, capsys, malform):
    """A weight is never read: its dims and type size it, whatever its bytes."""
    weight = malform(numpy_helper.from_array(np.ones((4, 8), np.float32), "w"))
    proto = hostile.model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [("x", TensorProto.FLOAT, [2, 4])],
        [("y", TensorProto.FLOAT, [2, 8])],
        [weight],
    )
    code, out, err = run(capsys, hostile.save(proto, tmp_path / "m.onnx"), "--format", "json")
    clean(code, err, allowed=(0,))
    assert json.loads(out)["nodes"][0]["flops"] == 2 * 2 * 4 * 8  # M·K·N multiply-adds


def test_a_constant_node_of_an_undefined_type(tmp_path, capsys):
    value = undefined_type(255)(numpy_helper.from_array(np.ones(4, np.float32), "v"))
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=value),
        helper.make_node("Add", ["x", "c"], ["y"], name="add"),
    ]
    proto = hostile.model(nodes, [("x", TensorProto.FLOAT, [4])], [("y", TensorProto.FLOAT, None)])
    for command in (["analyze"], ["inspect"], ["check", "--max-latency", "1s"]):
        code, _, err = run(capsys, *command, hostile.save(proto, tmp_path / "m.onnx"))
        clean(code, err, allowed=(0, 1, 2))


# --- a graph input with no type, or no shape (valid ONNX) -----------------------------------------------------


def untyped_past_model(keep_type: bool) -> onnx.ModelProto:
    """A decoder step: x → MatMul → k; past (no type, or a type without a shape) → Concat(past, k)
    → present, a graph output, as a KV cache is."""
    past = (
        helper.make_tensor_value_info("past", TensorProto.FLOAT, None)
        if keep_type
        else onnx.ValueInfoProto(name="past")
    )
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["k"], name="mm"),
            helper.make_node("Concat", ["past", "k"], ["present"], name="cat", axis=2),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 1, 4]), past],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", hostile.OPSET)])


@pytest.mark.parametrize("keep_type", [False, True], ids=["no type", "no shape"])
def test_an_input_of_unknown_rank_leaves_its_readers_uncosted(tmp_path, capsys, keep_type):
    path = hostile.save(untyped_past_model(keep_type), tmp_path / "m.onnx")
    code, out, err = run(capsys, path, "--format", "json")
    clean(code, err, allowed=(0,))
    assert "1 of 2 nodes uncosted" in err and "cat (Concat)" in err  # said, not silent
    assert {n["name"]: n["status"] for n in json.loads(out)["nodes"]}["mm"] == "ok"
    for command in (["analyze"], ["inspect"], ["check", "--max-latency", "1s"], ["analyze", "--view", "deployed"]):
        clean(*run(capsys, *command, path)[::2], allowed=(0, 1))


# --- structures the spec or a runtime forbids -----------------------------------------------------------------


def scan_model(attrs: dict, scanned_shape: list[int]) -> onnx.ModelProto:
    """A Scan (opset 9+) summing the rows of `xs` into a state of 4."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_next"]), helper.make_node("Identity", ["x_t"], ["y_t"])],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [4]),
        ],
        [
            helper.make_tensor_value_info("s_next", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [4]),
        ],
    )
    node = helper.make_node(
        "Scan", ["init", "xs"], ["state", "ys"], name="scan", body=body, **{"num_scan_inputs": 1, **attrs}
    )
    return hostile.model(
        [node],
        [("init", TensorProto.FLOAT, [4]), ("xs", TensorProto.FLOAT, scanned_shape)],
        [("state", TensorProto.FLOAT, None), ("ys", TensorProto.FLOAT, None)],
    )


SCANS = {
    "2^31-1 scan inputs": ({"num_scan_inputs": 2**31 - 1}, [3, 4]),
    "no scan input": ({"num_scan_inputs": 0}, [3, 4]),
    "a scan axis outside the rank": ({"scan_input_axes": [-9]}, [3, 4]),
    "an output axis outside the rank": ({"scan_output_axes": [-9]}, [3, 4]),
    "a scalar to scan": ({}, []),
}


@pytest.mark.parametrize(("attrs", "shape"), SCANS.values(), ids=SCANS.keys())
def test_a_scan_a_runtime_refuses(tmp_path, capsys, attrs, shape):
    code, _, err = run(capsys, hostile.save(scan_model(attrs, shape), tmp_path / "m.onnx"))
    clean(code, err)


def test_a_scan_over_an_empty_axis_runs_no_trip(tmp_path, capsys):
    code, out, err = run(capsys, hostile.save(scan_model({}, [0, 4]), tmp_path / "m.onnx"), "--format", "json")
    clean(code, err, allowed=(0,))
    assert {n["name"]: n["outputs"][0]["shape"] for n in json.loads(out)["nodes"]}["scan"] == [4]


def test_a_sequence_where_a_broadcast_wants_a_tensor(tmp_path, capsys):
    """A mutated op type made a SequenceConstruct feed an Add (the broadcast check skips it)."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="seq"),
        helper.make_node("Add", ["s", "x"], ["y"], name="add"),
    ]
    proto = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, None)])
    code, _, err = run(capsys, hostile.save(proto, tmp_path / "m.onnx"))
    clean(code, err)


def test_an_unsorted_graph_folds_as_the_sorted_one(tmp_path, capsys):
    """Stored out of topological order (a shuffle), a Shape → Gather → Range → Reshape chain folds
    and the totals equal the sorted graph's: the shape engine visits until nothing new is typed."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "one"], ["n"], name="gather", axis=0),
        helper.make_node("Range", ["zero", "n", "step"], ["r"], name="range"),
        helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "rf"], ["y"], name="add"),
    ]
    scalars = [
        numpy_helper.from_array(np.array(v, np.int64), name) for name, v in (("one", 1), ("zero", 0), ("step", 1))
    ]

    def totals(order):
        proto = hostile.model(
            [nodes[i] for i in order], [("x", TensorProto.FLOAT, [3, 5])], [("y", TensorProto.FLOAT, None)], scalars
        )
        code, out, err = run(capsys, hostile.save(proto, tmp_path / "m.onnx"), "--format", "json")
        clean(code, err, allowed=(0,))
        return json.loads(out)["totals"]

    assert totals([4, 2, 0, 3, 1]) == totals([0, 1, 2, 3, 4])


# --- text that is not UTF-8 -------------------------------------------------------------------------------------


def with_invalid_text(marker: bytes) -> bytes:
    """A model whose text field holding `marker` has its first byte replaced by 0xff (not UTF-8)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["Zdim", 4])
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'Zscope']")
    graph = helper.make_graph(
        [node],
        "Zgraph",
        [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")],
    )
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", hostile.OPSET)],
        producer_name="Zproducer",
        producer_version="Zversion",
    )
    proto.metadata_props.add(key="Zkey", value="imgsz Zvalue")
    data = proto.SerializeToString()
    at = data.index(marker)
    return data[:at] + b"\xff" + data[at + 1 :]


@pytest.mark.parametrize("marker", [b"Zdim", b"Zscope", b"Zgraph", b"Zproducer", b"Zversion", b"Zkey", b"Zvalue"])
def test_text_that_is_not_utf8_is_read_with_replacement_characters(tmp_path, capsys, marker):
    path = tmp_path / "m.onnx"
    path.write_bytes(with_invalid_text(marker))
    dim = "\ufffddim" if marker == b"Zdim" else "Zdim"
    for command in (
        ["analyze", "--format", "json"],
        ["inspect"],
        ["check", "--max-latency", "1s", "--dim", f"{dim}=2"],
        ["analyze"],
    ):
        code, _, err = run(capsys, *command, path)
        clean(code, err, allowed=(0, 1) if command[0] == "check" else (0,))
    if marker == b"Zdim":  # the dim keeps a name the user can bind (above) and the report shows
        assert json.loads(run(capsys, path, "--format", "json")[1])["model"]["dims"] == {dim: 1}


# --- folds that would allocate terabytes -------------------------------------------------------------------------


def folding_model(op: str) -> onnx.ModelProto:
    """x [n] (n a dim) feeding `op` through its Shape: the result would hold n or n² elements."""
    made = {
        "Range": [helper.make_node("Range", ["zero", "n", "one"], ["big"], name="big")],
        "ConstantOfShape": [helper.make_node("ConstantOfShape", ["nn"], ["big"], name="big")],
        "Expand": [helper.make_node("Expand", ["one", "nn"], ["big"], name="big")],
        "Tile": [helper.make_node("Tile", ["shape", "shape"], ["big"], name="big")],
        "OneHot": [helper.make_node("OneHot", ["shape", "n", "onoff"], ["big"], name="big")],
    }[op]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["n"], name="n", axis=0),
        helper.make_node("Concat", ["shape", "shape"], ["nn"], name="nn", axis=0),
        *made,
        helper.make_node("Size", ["big"], ["size"], name="size"),
    ]
    constants = [
        numpy_helper.from_array(np.array(v, np.int64), name) for name, v in (("zero", 0), ("one", 1), ("onoff", [0, 1]))
    ]
    return hostile.model(nodes, [("x", TensorProto.FLOAT, ["n"])], [("size", TensorProto.INT64, None)], constants)


@pytest.mark.parametrize("op", ["Range", "ConstantOfShape", "Expand", "Tile", "OneHot"])
def test_a_fold_is_bounded_before_it_allocates(tmp_path, op):
    """At n = 2^32 each result would take 32 GiB or more (2^64 elements for the square ones, which
    int64 arithmetic wraps to 0): under a 2 GiB address-space limit, a fold that allocated it would
    fail. None is allocated: the analysis ends cleanly, in a process of its own."""
    path = hostile.save(folding_model(op), tmp_path / "m.onnx")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MAX_VIRTUAL_MEMORY, MAX_VIRTUAL_MEMORY))

    done = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", str(path), "--dim", f"n={2**32}", "--partial"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        env={**os.environ, "ORT_DISABLE_TELEMETRY": "1"},
    )
    clean(done.returncode, done.stderr, allowed=(0,))


def test_the_fold_cap_keeps_small_values():
    """A Range to a small dim still folds (ONNX's data propagation stops at a Range): the Reshape
    it feeds is typed, Range(2, 4) = [2, 3]."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["n"], name="n", axis=0),
        helper.make_node("Range", ["two", "n", "one"], ["target"], name="range"),
        helper.make_node("Reshape", ["y0", "target"], ["y"], name="reshape"),
    ]
    constants = [
        numpy_helper.from_array(np.array(v, np.int64), name) for name, v in (("zero", 0), ("one", 1), ("two", 2))
    ]
    proto = hostile.model(
        nodes,
        [("x", TensorProto.FLOAT, [4]), ("y0", TensorProto.FLOAT, [6])],
        [("y", TensorProto.FLOAT, None)],
        constants,
    )
    assert {n.name: n.outputs[0].shape for n in analyze(proto, hw="h100").nodes}["reshape"] == (2, 3)


# --- issue 43: an If's outputs against its branches', a string folded with a number ----------------------------


def short_if_model(condition: bool | None, branch_outputs: int) -> onnx.ModelProto:
    """An If of two outputs whose branches have `branch_outputs` (onnxruntime refuses the file); its
    condition a constant (`condition`) or a graph input (None), its outputs added."""

    def branch(name: str) -> onnx.GraphProto:
        outs = [f"{name}{i}" for i in range(branch_outputs)]
        return helper.make_graph(
            [helper.make_node("Relu", ["x"], [out], name=f"{name}_relu{i}") for i, out in enumerate(outs)],
            name,
            [],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2]) for out in outs],
        )

    nodes = [
        helper.make_node("If", ["c"], ["a", "b"], name="if", then_branch=branch("then"), else_branch=branch("else")),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    inputs = [("x", TensorProto.FLOAT, [2])] + ([("c", TensorProto.BOOL, [])] if condition is None else [])
    constants = [] if condition is None else [numpy_helper.from_array(np.array(condition), "c")]
    return hostile.model(nodes, inputs, [("y", TensorProto.FLOAT, None)], constants)


@pytest.mark.parametrize("condition", [None, True, False], ids=["input", "then", "else"])
@pytest.mark.parametrize("branch_outputs", [1, 3])
def test_an_if_whose_branches_have_another_number_of_outputs(tmp_path, capsys, condition, branch_outputs):
    """Each branch's outputs are counted against the If's: not typed from them (an IndexError
    before), flagged INVALID, and verify refuses it as check does (exit 1)."""
    path = hostile.save(short_if_model(condition, branch_outputs), tmp_path / "m.onnx")
    for command in (["analyze"], ["inspect"], ["check", "--max-latency", "1s"], ["verify"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err, allowed=(0, 1, 2))
    code, out, _ = run(capsys, "verify", path)
    assert code == 1 and "verdict: INVALID: a runtime would refuse this model" in out and "subgraphs produce" in out


def test_a_string_constant_is_never_folded_with_a_number(tmp_path, capsys):
    """Concat(string, int64) feeding a Reshape's shape: a NotImplementedError in onnx's
    numpy_helper before (an object array of bytes and ints); the string's value is now never
    folded, so the Reshape is uncosted with its root cause, and verify refuses the file."""
    constants = [numpy_helper.from_array(np.array([b"a"], dtype=object), "s"), int64_shape([2], "i")]
    nodes = [
        helper.make_node("Concat", ["s", "i"], ["shape"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
    ]
    path = hostile.save(
        hostile.model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, None)], constants),
        tmp_path / "m.onnx",
    )
    for command in (["analyze"], ["inspect"], ["check", "--max-latency", "1s"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err, allowed=(0, 1, 2))
    code, out, err = run(capsys, "verify", path)
    clean(code, err, allowed=(1,))
    assert "verdict: INVALID" in out


def test_verify_refuses_what_analyze_flags_invalid(tmp_path, capsys):
    """One conformance check for both: an initializer holding 7 of its 8 bytes (the onnx checker and
    onnxruntime refuse it) and a ZipMap's output retyped to optional are INVALID in analyze's
    warning, check's FAIL and verify's verdict, exit 1 as check's; nothing is run."""
    weight = truncated(numpy_helper.from_array(np.ones(2, np.float32), "w"))
    short = hostile.model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [("x", TensorProto.FLOAT, [2])],
        [("y", TensorProto.FLOAT, [2])],
        [weight],
    )
    zipmap = helper.make_node("ZipMap", ["x"], ["z"], name="zipmap", domain="ai.onnx.ml", classlabels_int64s=[0, 1])
    maps = helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    )
    graph = helper.make_graph(
        [zipmap],
        "zipmap",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_value_info("z", helper.make_optional_type_proto(maps))],
    )
    optional = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)]
    )
    for name, proto in (("short", short), ("zipmap", optional)):
        path = hostile.save(proto, tmp_path / f"{name}.onnx")
        code, _, err = run(capsys, "analyze", path)
        assert code == 0 and "onnx-roofline: warning: INVALID: " in err
        code, out, _ = run(capsys, "check", "--max-latency", "1s", path)
        assert code == 1 and "INVALID: a runtime would refuse this model" in out
        code, out, err = run(capsys, "verify", path)
        clean(code, err, allowed=(1,))
        assert out.splitlines()[-1].startswith("verdict: INVALID: a runtime would refuse this model: ")
        code, out, _ = run(capsys, "verify", "--format", "json", path)
        document = json.loads(out)
        assert code == 1 and document["verdict"] == "invalid" and document["model"]["invalid"]


def test_a_location_leaving_the_folder_by_a_backslash_is_invalid(tmp_path, capsys):
    """`..\\x`: a file name on Linux (absent, so nothing was said), but onnx's checker and
    onnxruntime read it as leaving the model's folder and refuse the model: flagged as they do."""
    path = hostile.save(hostile.matmul_with(hostile.external("..\\x")), tmp_path / "m.onnx")
    code, _, err = run(capsys, "analyze", path)
    assert code == 0 and "INVALID: external data" in err and "leaves the model's folder" in err


def test_a_reference_attribute_outside_a_function_is_refused(tmp_path, capsys):
    """`ref_attr_name` names an attribute of the function a node sits in; outside one it has no
    value (onnx's `get_attribute_value` raised a ValueError in the fold): refused, naming the node."""
    cast = helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.FLOAT)
    cast.attribute[0].ref_attr_name = "fuzz_ref"
    path = hostile.save(
        hostile.model([cast], [("x", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, [2])]), tmp_path / "m.onnx"
    )
    for command in (["analyze"], ["inspect"], ["check", "--max-latency", "1s"], ["verify"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err, allowed=(2,))
        assert (
            "node 'cast' (Cast): attribute 'to' refers to attribute 'fuzz_ref' of a function, outside any function"
            in err
        )


def test_kernels_that_read_each_other_are_ordered_by_the_graph(tmp_path, capsys):
    """A BART decoder step whose Shape of the self-attention cache is wrapped in a local function
    (campaign seed 88800009, `function/wrap`): the function is no metadata read the deployed view
    knows, so the attention kernel, which takes in the Reshape that reads it, and the function,
    which reads the cache the kernel writes, each wait for the other. The kernels fall back to the
    graph's order (lexicographical_order raised a CycleError traceback)."""
    from tests.fuzz.mutate import main as mutate_main

    corpus = os.path.join(os.path.dirname(__file__), "corpus", "models", "dynamo_bart_decoder_past.onnx")
    mutate_main([corpus, "--seed", "88800009", "--out", str(tmp_path)])
    capsys.readouterr()
    code, out, err = run(capsys, "analyze", tmp_path / "mutant.onnx")
    clean(code, err)
    assert code == 0 and "floor" in out


# --- the campaign of 2026-12-06 (seeds 900000-): numpy's warnings on stderr, an uncosted reader of a DQ -----------


def cli_stderr(*args) -> tuple[int, str]:
    """The command run as a user runs it, in a process of its own: numpy's warnings reach stderr there."""
    done = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", *map(str, args)], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stderr


def test_a_value_typed_complex_is_never_folded():
    """Unsqueeze axes a mutation typed complex64 (the campaign's mutant 900621 of the optimum Llama):
    numpy warns on stderr casting a complex to an int; no shape is complex, so it is not folded."""
    import warnings

    from onnx_roofline.model.nodes import read_nodes
    from onnx_roofline.shapes.folding import _evaluate

    (node,) = read_nodes(helper.make_graph([helper.make_node("Unsqueeze", ["c", "a"], ["u"])], "g", [], []))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning would raise here
        assert _evaluate(node, {"c": np.array([2, 4], np.int64), "a": np.array([0], np.complex64)}) is None


def test_a_fold_dividing_by_zero_says_nothing_on_stderr(tmp_path):
    """Div(8, 0) in a shape computation (a batch dim mutated to 0 divides it): the fold's value is
    no number, and numpy's RuntimeWarning stays off the user's stderr."""
    eight, zero = (
        numpy_helper.from_array(np.array([value], np.int64), name) for value, name in ((8, "eight"), (0, "zero"))
    )
    nodes = [helper.make_node("Div", ["eight", "zero"], ["rows"]), helper.make_node("Concat", ["rows", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]  # fmt: skip
    model = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, None)],
                          initializers=[eight, zero, int64_shape([-1], "minus_one")])  # fmt: skip
    path = hostile.save(model, tmp_path / "zero.onnx")
    for command in ([path], ["inspect", path]):
        clean(*cli_stderr(*command))


def test_an_uncosted_reader_of_a_dequantized_tensor_keeps_the_deployed_view(tmp_path, capsys):
    """The campaign's mutant 900930: the QDQ ResNet with a DequantizeLinear made a local function
    of no opset (uncosted, and every node after it): the deployed view reads the quantized tensors
    in the costed readers only (it rescaled an uncosted reader's absent cost: an AttributeError)."""
    from tests.fuzz.mutate import mutant_for, write

    mutant = mutant_for(900930, str(CORPUS_QDQ), None)
    assert mutant.label == "function/no_opset"  # the mutation the campaign made (mutate.py draws it from the seed)
    path = write(mutant, tmp_path)
    code, out, err = run(capsys, path, "--view", "deployed", "--format", "json")
    clean(code, err)
    assert code == 0 and json.loads(out)["totals"]["uncosted_nodes"] > 0


@pytest.mark.parametrize("declared, refused", [
    ((TensorProto.FLOAT, [4, 8]), False),  # an IR-3 model's weight declared as an input, as it is: loads
    ((TensorProto.INT64, [4, 8]), True),  # another element type: "Data in initializer ... has element type"
    ((TensorProto.FLOAT, [4, 0]), True),  # another fixed dim: "Can't merge shape info"
    ((TensorProto.FLOAT, [4]), True),  # another rank
    ((TensorProto.FLOAT, ["n", 8]), False),  # a symbolic dim: the data fixes it
])  # fmt: skip
def test_an_initializer_declared_as_another_input_is_invalid(tmp_path, capsys, declared, refused):
    """An initializer that is also a graph input declared with another type or shape: onnxruntime
    refuses it (the oracle here) and the analysis calls it INVALID (onnx's checker finds it in a
    graph this small)."""
    pytest.importorskip("onnxruntime")
    weight = numpy_helper.from_array(np.ones((4, 8), np.float32), "w")
    bias = numpy_helper.from_array(np.ones(8, np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    model = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4]), ("w", *declared)], [("y", TensorProto.FLOAT, [2, 8])],
                          initializers=[weight, bias])  # fmt: skip
    path = hostile.save(model, tmp_path / "m.onnx")
    assert refused_by_onnxruntime(path) is refused
    code, _, err = run(capsys, path, "--format", "json")
    clean(code, err)
    assert ("INVALID" in err) is refused, err


@pytest.mark.parametrize(
    "model, seed", [("ortopt_vit_gpu", 900817), ("opset7_resnet", 901019), ("ortopt_bert_gpu_fp16", 900035)]
)
def test_the_campaigns_initializers_declared_otherwise_are_invalid(tmp_path, capsys, model, seed):
    """The campaign of 2026-12-06's silent passes (duplicate/initializer_as_input; dim/zero on a
    weight an IR-3 model also declares as an input): in these models onnx's checker runs on a
    skeleton (their other weights' bytes are in an absent file) that keeps the declaration, and
    onnxruntime refuses them ("Data in initializer ... has element type", "Can't merge shape info");
    conformance's own check says INVALID."""
    from tests.fuzz.mutate import mutant_for, write

    path = write(mutant_for(seed, str(CORPUS_QDQ.parent / f"{model}.onnx"), None), tmp_path)
    code, _, err = run(capsys, "inspect", path)
    clean(code, err)
    assert "is also a graph input declared" in err, err


# --- the campaign of 2026-12-06, second pass: a Scan's attributes out of range; what onnx's checker misses past a contrib op


def scan_after_a_contrib_op(attrs: dict) -> onnx.ModelProto:
    """scan_model's Scan fed through com.microsoft's Gelu, which onnxruntime runs and onnx has no
    schema for: past such an op, onnx's checker drops every inference error (its custom-op rule),
    as in the campaign's ONNX Runtime-optimized and quantized models."""
    proto = scan_model(attrs, [3, 4])
    proto.graph.node[0].input[0] = "init_gelu"
    proto.graph.node.insert(0, helper.make_node("Gelu", ["init"], ["init_gelu"], name="gelu", domain="com.microsoft"))
    proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto


SCAN_ATTRIBUTES = {
    "forward": {},
    "reversed": {"scan_input_directions": [1], "scan_output_directions": [1]},
    "output stacked on its last axis": {"scan_output_axes": [-1]},
    "output stacked on axis 1": {"scan_output_axes": [1]},
    "direction -9": {"scan_input_directions": [-9]},
    "output direction 2": {"scan_output_directions": [2]},
    "two directions for one scan input": {"scan_input_directions": [0, 1]},
    "no scan input": {"num_scan_inputs": 0},
    "2^31-1 scan inputs": {"num_scan_inputs": 2**31 - 1},
    "input axis -9": {"scan_input_axes": [-9]},
    "input axis 2 of a rank-2 input": {"scan_input_axes": [2]},
    "output axis -9": {"scan_output_axes": [-9]},
}


@pytest.mark.parametrize("attrs", SCAN_ATTRIBUTES.values(), ids=SCAN_ATTRIBUTES.keys())
def test_a_scan_whose_attributes_a_runtime_refuses_is_invalid(tmp_path, capsys, attrs):
    """The Scan spec: 1 <= num_scan_inputs <= the inputs, each direction 0 or 1, one direction and
    one axis per scan input or output, each axis within its scan's rank. onnxruntime (the oracle)
    refuses each breach as it initializes the session; analyze and inspect both say INVALID, even
    behind a contrib op that blinds onnx's checker (model/conformance.py, _scan_attributes)."""
    pytest.importorskip("onnxruntime")
    path = hostile.save(scan_after_a_contrib_op(attrs), tmp_path / "m.onnx")
    refused = refused_by_onnxruntime(path)
    for command in (["analyze"], ["inspect"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert ("INVALID: node attributes: node 'scan' (Scan): " in err) is refused, (command, err)


def test_a_scan_direction_past_32_bits_is_invalid(tmp_path, capsys):
    """Direction 2^40 (the campaign's mutant 900369): not 0 or 1, so the spec forbids it.
    onnxruntime's check reads its low 32 bits (0) and loads it, then runs the scan reversed."""
    path = hostile.save(scan_after_a_contrib_op({"scan_input_directions": [2**40]}), tmp_path / "m.onnx")
    code, _, err = run(capsys, "inspect", path)
    clean(code, err)
    assert f"scan_input_directions[0] is {2**40}, not 0 (forward) or 1 (reverse)" in err, err


@pytest.mark.parametrize("model, seed", [("ts_llama_past", 901048), ("hqq_llama_past", 901456)])
def test_the_campaigns_scans_out_of_range_are_invalid(tmp_path, capsys, model, seed):
    """The campaign's silent passes on body/scan_bad_axes (direction -9; no scan input with an
    output axis -9): onnx's checker never reads a direction, and says nothing past the quantized
    Llama's MatMulNBits; onnxruntime refuses both. inspect and analyze say INVALID."""
    from tests.fuzz.mutate import mutant_for, write

    mutant = mutant_for(seed, str(CORPUS_QDQ.parent / f"{model}.onnx"), None)
    assert mutant.label == "body/scan_bad_axes"  # the mutation the campaign made (drawn from the seed)
    path = write(mutant, tmp_path)
    for command in (["inspect"], ["analyze"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert "INVALID: node attributes: node 'fuzz_scan' (Scan): " in err, (command, err)


def late_read_past_a_contrib_op(reads_late: bool) -> onnx.ModelProto:
    """A Concat of a Shape and, where `reads_late`, of a float value written after it (the campaign's
    topology/cycle rewires an input so): behind com.microsoft's Gelu, so onnx's checker is blind."""
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], name="gelu", domain="com.microsoft"),
        helper.make_node("Shape", ["g"], ["s"], name="shape"),
        helper.make_node("Concat", ["s", "late" if reads_late else "s"], ["c"], name="concat", axis=0),
        helper.make_node("Identity", ["g"], ["late"], name="late"),
    ]
    proto = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4])], [("c", TensorProto.INT64, None)])
    proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto


@pytest.mark.parametrize("reads_late", [False, True], ids=["in order", "reads a later value"])
def test_inspect_says_where_onnx_inference_fails_as_analyze_does(tmp_path, capsys, reads_late):
    """onnxruntime (the oracle) refuses the Concat of int64 and float; onnx's checker, past a contrib
    op, drops the error. The analysis' shape pass at the defaults fails on the Concat, and analyze
    says it as the root of its uncosted nodes: inspect, which runs that pass to choose its defaults
    (here no dim: a fixed shape), says it too, and nothing of the model in order."""
    pytest.importorskip("onnxruntime")
    path = hostile.save(late_read_past_a_contrib_op(reads_late), tmp_path / "m.onnx")
    refused = refused_by_onnxruntime(path)
    assert refused is reads_late
    code, _, err = run(capsys, "analyze", path)
    clean(code, err)
    assert ("downstream of concat (Concat): ONNX shape inference of Concat failed" in err) is refused, err
    said = "INVALID: node input types: node 'concat' (Concat): its inputs of type T hold float32, int64"
    assert (said in err) is refused, err  # conformance.mixed_input_types: what onnx's checker is blind to
    code, out, err = run(capsys, "inspect", path, "--format", "json")
    clean(code, err)
    assert ("shape inference stops at node 'concat' (Concat): ONNX shape inference of Concat failed" in err) is refused
    assert (json.loads(out)["inference_failure"] or "").startswith("node 'concat' (Concat)") is refused
    assert (said in err) is refused, err


def test_the_campaigns_bool_concatenated_to_int64_past_a_contrib_op_is_invalid(tmp_path, capsys):
    """Mutant 911345 (topology/cycle on an onnxruntime-optimized BERT): an Unsqueeze made to read a
    bool written after it, so that a Concat joins it to int64 shape values. onnxruntime (the oracle)
    refuses it; onnx's checker, past the graph's contrib ops, drops the error; the analysis' shape
    pass stops earlier at the defaults (an Expand, as on the unmutated BERT). analyze and inspect
    say INVALID from the types the engine found (conformance.mixed_input_types)."""
    pytest.importorskip("onnxruntime")
    from tests.fuzz.mutate import mutant_for, write

    mutant = mutant_for(911345, str(CORPUS_QDQ.parent / "ort_all_bert.onnx"), None)
    assert mutant.label == "topology/cycle"  # the mutation the campaign made (drawn from the seed)
    path = write(mutant, tmp_path)
    assert refused_by_onnxruntime(path)
    for command in (["analyze"], ["inspect"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert (
            "INVALID: node input types: node '/model/encoder/layer.0/attention/self/Concat_3' (Concat): its inputs of type T hold bool, int64"
            in err
        ), err


@pytest.mark.parametrize("model, seed", [("hqq_llama_past", 901345), ("ortopt_vit_gpu", 901372)])
def test_the_campaigns_reads_of_later_values_are_said_by_inspect(tmp_path, capsys, model, seed):
    """The campaign's topology/cycle silent passes of inspect: a node made to read a value written
    after it, in a quantized Llama (MatMulNBits) and an optimized ViT (SkipLayerNormalization):
    onnxruntime refuses the Concat it feeds; inspect says it as analyze does."""
    from tests.fuzz.mutate import mutant_for, write

    mutant = mutant_for(seed, str(CORPUS_QDQ.parent / f"{model}.onnx"), None)
    assert mutant.label == "topology/cycle"  # the mutation the campaign made (drawn from the seed)
    code, _, err = run(capsys, "inspect", write(mutant, tmp_path))
    clean(code, err)
    assert "warning: at the default dims, shape inference stops at node " in err, err


@pytest.mark.parametrize(
    "data_type", [TensorProto.FLOAT, TensorProto.UNDEFINED, 255], ids=["float", "UNDEFINED", "255"]
)
def test_an_external_weight_of_no_type_is_invalid(tmp_path, capsys, data_type):
    """An external initializer retyped UNDEFINED or to a code ONNX does not define (the campaign's
    mutant 911242, elem_type/initializer_invalid): onnxruntime (the oracle, its file present)
    refuses it, and so does onnx's checker, but conformance's check never saw the type (the tensor
    stands aside as a graph input, which may be of any type). analyze (a Relu costed before the
    MatMul it leaves uncosted) and inspect say INVALID."""
    pytest.importorskip("onnxruntime")
    weight = hostile.external("w.bin")
    weight.data_type = data_type
    hostile.weights_file(tmp_path)  # 4×8 float32: the bytes a float weight needs
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w"], ["y"], name="mm"),
    ]
    model = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, [2, 8])], [weight])
    path = hostile.save(model, tmp_path / "m.onnx")
    refused = refused_by_onnxruntime(path)
    assert refused is (data_type != TensorProto.FLOAT)
    for command in (["analyze"], ["inspect"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert ("INVALID: tensor data: tensor 'w' is stored externally with data_type" in err) is refused, err


def test_the_campaigns_external_weight_of_no_type_is_invalid(tmp_path, capsys):
    """The campaign's mutant 911242: the ResNet's fc.weight, in an absent file, retyped UNDEFINED."""
    from tests.fuzz.mutate import mutant_for, write

    mutant = mutant_for(911242, str(CORPUS_QDQ.parent / "ort_extended_resnet.onnx"), None)
    assert mutant.label == "elem_type/initializer_invalid"  # the mutation the campaign made (drawn from the seed)
    code, _, err = run(capsys, "inspect", write(mutant, tmp_path))
    clean(code, err)
    assert "INVALID: tensor data: tensor 'fc.weight' is stored externally with data_type 0 (UNDEFINED)" in err, err


@pytest.mark.parametrize("foreign", [False, True], ids=["its own attributes", "a Conv's attributes"])
def test_a_deprecated_op_is_held_to_its_schemas_attributes(tmp_path, capsys, foreign):
    """GroupNormalization-18, deprecated at opset 20, which onnxruntime still runs and conformance
    tolerates; given a Conv's attributes (the campaign's mutant 921759, op_type/same_arity on a
    dynamo ResNet) onnxruntime (the oracle) refuses it, and inspect and analyze say INVALID."""
    pytest.importorskip("onnxruntime")
    attributes = {"group": 1, "kernel_shape": [1, 1]} if foreign else {"num_groups": 2}
    nodes = [
        helper.make_node(
            "Relu", ["x"], ["r"], name="relu"
        ),  # costed whatever the norm: analyze has an answer to say it beside
        helper.make_node("GroupNormalization", ["r", "scale", "bias"], ["y"], name="norm", **attributes),
    ]
    weights = [
        numpy_helper.from_array(np.ones(2, np.float32), "scale"),
        numpy_helper.from_array(np.zeros(2, np.float32), "bias"),
    ]
    model = hostile.model(
        nodes, [("x", TensorProto.FLOAT, [1, 4, 3, 3])], [("y", TensorProto.FLOAT, [1, 4, 3, 3])], weights
    )
    model.opset_import[0].version = 20
    path = hostile.save(model, tmp_path / "m.onnx")
    assert refused_by_onnxruntime(path) is foreign
    for command in (["inspect"], ["analyze"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert ("INVALID: onnx checker: Op registered for GroupNormalization is deprecated" in err) is foreign, err


def test_a_value_cast_to_strings_is_not_folded_into_a_nodes_inference(tmp_path, capsys):
    """The campaign's mutant 930237 (elem_type/cast_to on a Silero-style VAD: a Cast made a Cast
    to STRING, feeding a Pad's pads): the fold computed an object array of ints (numpy's astype
    to object), and handing it to ONNX's inference of the Pad raised a NotImplementedError from
    onnx's numpy_helper (a traceback in analyze and inspect). A fold's text is no value, as a
    stored string tensor is none (folding.py): the Pad goes untyped and the model, which
    onnxruntime (the oracle) refuses, is said INVALID."""
    pytest.importorskip("onnxruntime")
    nodes = [
        helper.make_node("Cast", ["pads_int"], ["pads"], to=TensorProto.STRING, name="cast"),
        helper.make_node("Pad", ["x", "pads"], ["y"], name="pad"),
    ]
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads_int")
    model = hostile.model(nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, None)], [pads])
    path = hostile.save(model, tmp_path / "m.onnx")
    assert refused_by_onnxruntime(path)
    for command in (["inspect"], ["analyze"], ["analyze", "--partial"]):
        code, _, err = run(capsys, *command, path)
        clean(code, err)
        assert "INVALID" in err and "Traceback" not in err, err

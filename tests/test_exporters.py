"""Tests for the exporters package and the committed fixtures.

Fast tests read the committed fixtures (``load_external_data=False``: their weight files are not
in git) and exercise the ONNX post-passes on tiny graphs.  Tests marked ``slow`` export real models
into a temporary folder (~1 min of export in all on 2 cores) and run them in onnxruntime; they run
by default.  Numerical tolerances: fp32 onnxruntime vs torch eager, ``rtol=atol=1e-4`` (observed
max abs difference ~5e-6 on logits of magnitude ~3-12).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from exporters.__main__ import FIXTURES, main  # noqa: E402
from exporters.gpt2 import (  # noqa: E402
    GPT2_PARAMS,
    HEAD_DIM,
    HEADS,
    LAYERS,
    VOCAB,
    GPT2Decode,
    GPT2Prefill,
    build_gpt2,
    export_gpt2,
    past_names,
    present_names,
)
from exporters.resnet import RESNET50_PARAMS, build_resnet50, export_resnet50  # noqa: E402
from exporters.strip import name_nodes_by_module, save_stripped, set_io_shapes  # noqa: E402

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures"
COMMITTED = [
    "resnet50_fp32.onnx",
    "resnet50_fp16.onnx",
    "gpt2_prefill_fp32.onnx",
    "gpt2_prefill_fp16.onnx",
    "gpt2_decode_fp32.onnx",
    "gpt2_decode_fp16.onnx",
    "resnet50_fp32_torchscript.onnx",
    "gpt2_prefill_fp32_torchscript.onnx",
    "gpt2_decode_fp32_torchscript.onnx",
]
RTOL = ATOL = 1e-4


def load(name_or_path) -> onnx.ModelProto:
    path = Path(name_or_path)
    if not path.is_absolute():
        path = FIXTURE_DIR / path
    return onnx.load(path, load_external_data=False)


def dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def structure(model: onnx.ModelProto) -> dict:
    """What "the same export" means: signature with dim names, and the op histogram."""
    g = model.graph
    return {
        "inputs": [(v.name, v.type.tensor_type.elem_type, dims(v)) for v in g.input],
        "outputs": [(v.name, v.type.tensor_type.elem_type, dims(v)) for v in g.output],
        "ops": Counter((n.domain, n.op_type) for n in g.node),
        "opsets": {o.domain: o.version for o in model.opset_import},
    }


def session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def close(got, want) -> None:
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- committed fixtures (fast)


def test_all_command_regenerates_exactly_the_committed_fixtures():
    names = []
    for model, opts in FIXTURES:
        stem = f"gpt2_{opts['phase']}" if model == "gpt2" else model
        suffix = "" if opts.get("exporter", "dynamo") == "dynamo" else f"_{opts['exporter']}"
        names.append(f"{stem}_{opts['dtype']}{suffix}.onnx")
    assert sorted(names) == sorted(COMMITTED)


@pytest.mark.parametrize("name", COMMITTED)
def test_fixture_is_weight_stripped(name):
    path = FIXTURE_DIR / name
    assert path.stat().st_size < 5 * 2**20
    model = load(name)
    assert model.graph.initializer
    for init in model.graph.initializer:
        nbytes = (
            int(np.prod(init.dims, dtype=np.int64)) * np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
        )
        if init.data_location == TensorProto.EXTERNAL:
            location = {e.key: e.value for e in init.external_data}["location"]
            assert location == name + ".data"
            assert nbytes > 1024, init.name
        else:
            assert nbytes <= 1024, init.name  # shape constants, scalars, small biases stay inline


@pytest.mark.parametrize("name", [n for n in COMMITTED if n.startswith("resnet50")])
def test_resnet_signature(name):
    g = load(name).graph
    assert [(v.name, dims(v)) for v in g.input] == [("pixel_values", ["batch", 3, 224, 224])]
    assert [(v.name, dims(v)) for v in g.output] == [("logits", ["batch", 1000])]


@pytest.mark.parametrize("name", [n for n in COMMITTED if n.startswith("gpt2_prefill")])
def test_gpt2_prefill_signature(name):
    g = load(name).graph
    kv = ["batch", HEADS, "sequence", HEAD_DIM]
    assert [(v.name, dims(v)) for v in g.input] == [("input_ids", ["batch", "sequence"])]
    assert [(v.name, dims(v)) for v in g.output] == [("logits", ["batch", "sequence", VOCAB])] + [
        (n, kv) for n in present_names()
    ]


@pytest.mark.parametrize("name", [n for n in COMMITTED if n.startswith("gpt2_decode")])
def test_gpt2_decode_signature(name):
    g = load(name).graph
    past = ["batch", HEADS, "past_sequence", HEAD_DIM]
    present = ["batch", HEADS, "past_sequence + 1", HEAD_DIM]
    assert [(v.name, dims(v)) for v in g.input] == [("input_ids", ["batch", 1])] + [(n, past) for n in past_names()]
    assert [(v.name, dims(v)) for v in g.output] == [("logits", ["batch", 1, VOCAB])] + [
        (n, present) for n in present_names()
    ]
    assert len(past_names()) == len(present_names()) == 2 * LAYERS


@pytest.mark.parametrize("name", [n for n in COMMITTED if "fp16" in n])
def test_fp16_fixture_computes_in_fp16(name):
    """model.half() before export: fp16 weights, fp16 MatMul/Gemm/Conv inputs, no Cast at all."""
    model = onnx.shape_inference.infer_shapes(load(name), strict_mode=True)
    g = model.graph
    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    assert {i.data_type for i in g.initializer} & floats == {TensorProto.FLOAT16}
    assert "Cast" not in {n.op_type for n in g.node}
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.value_info, *g.input, *g.output]}
    types |= {i.name: i.data_type for i in g.initializer}
    heavy = [n for n in g.node if n.op_type in ("MatMul", "Gemm", "Conv")]
    assert heavy
    for node in heavy:
        assert [types[i] for i in node.input] == [TensorProto.FLOAT16] * len(node.input), node.name


@pytest.mark.parametrize("name", [n for n in COMMITTED if "torchscript" not in n])
def test_dynamo_fixture_keeps_name_scopes(name):
    nodes = load(name).graph.node
    scoped = [n for n in nodes if any(p.key == "pkg.torch.onnx.name_scopes" for p in n.metadata_props)]
    assert len(scoped) >= 0.95 * len(nodes)  # the optimizer's GPT-2 QKV Split nodes have none


@pytest.mark.parametrize("name", ["resnet50_fp32.onnx", "resnet50_fp32_torchscript.onnx"])
def test_conv3_x_3x3_convs_found_by_name(name):
    """The lesson's conv3_x 3x3 conv: layer2.<block>.conv2, one per bottleneck (4 blocks)."""
    g = load(name).graph
    kernel = {i.name: list(i.dims[2:]) for i in g.initializer}
    found = [
        n.name for n in g.node if n.op_type == "Conv" and n.name.startswith("/layer2/") and kernel[n.input[1]] == [3, 3]
    ]
    assert found == [f"/layer2/layer2.{i}/conv2/Conv" for i in range(4)]


def test_published_parameter_counts(gpt2):
    assert sum(p.numel() for p in build_resnet50().parameters()) == RESNET50_PARAMS == 25_557_032
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight  # tied: counted once below
    assert sum(p.numel() for p in gpt2.parameters()) == GPT2_PARAMS == 124_439_808


def test_randomize_touches_every_tensor_and_is_seeded():
    """No tensor keeps a constant default init (zero bias, unit scale, 0/1 BatchNorm stats)."""
    model = build_resnet50(seed=0)
    tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    for name, t in tensors.items():
        if t.is_floating_point():
            assert t.std() > 0, name
    for name, t in model.named_buffers():
        if name.endswith("running_var"):
            assert (t > 0).all(), name
    again = build_resnet50(seed=0).state_dict()
    other = build_resnet50(seed=1).state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(value, again[key]), key
        if value.is_floating_point():
            assert not torch.equal(value, other[key]), key


def test_randomize_covers_layernorm_and_attention_biases(gpt2):
    for name, p in gpt2.named_parameters():
        assert p.std() > 0, name
    assert not any(b.is_floating_point() for b in gpt2.buffers())  # no causal-mask buffer to spoil


# ---------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    "argv",
    [
        ["resnet50", "--out", "x", "--batch", "0"],
        ["resnet50", "--out", "x", "--batch", "two"],
        ["resnet50", "--out", "x", "--dtype", "bf16"],
        ["gpt2", "--out", "x"],
        ["gpt2", "--out", "x", "--phase", "decode", "--dtype", "fp8"],
        ["gpt2", "--out", "x", "--phase", "prefill", "--exporter", "tflite"],
        ["resnet50"],
        ["vgg16", "--out", "x"],
        [],
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


# ---------------------------------------------------------------- post-passes on tiny graphs


def _tiny(x_dims, y_dims, vi_dims) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)
    vi = helper.make_tensor_value_info("t", TensorProto.FLOAT, vi_dims)
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], value_info=[vi]))


def test_set_io_shapes_renames_symbols_everywhere():
    model = _tiny(["s0", "s1"], ["s0", "MatMul_dim_1"], ["s0*s1", "s1 + 1"])
    mapping = set_io_shapes(model, {"x": ["batch", "sequence"], "y": ["batch", 1]})
    assert mapping == {"s0": "batch", "s1": "sequence", "MatMul_dim_1": 1}
    g = model.graph
    assert dims(g.input[0]) == ["batch", "sequence"]
    assert dims(g.output[0]) == ["batch", 1]
    assert dims(g.value_info[0]) == ["batch*sequence", "sequence + 1"]


def test_set_io_shapes_rejects_a_specialized_dim():
    model = _tiny([2, "s1"], [2, "s1"], [2, "s1"])
    with pytest.raises(ValueError, match="fixed a dim"):
        set_io_shapes(model, {"x": ["batch", "sequence"]})


def test_save_stripped_splits_at_1_kib_and_overwrites_the_data_file(tmp_path):
    big = helper.make_tensor("big", TensorProto.FLOAT, [512], np.ones(512, np.float32))  # 2 KiB
    small = helper.make_tensor("small", TensorProto.INT64, [2], [1, -1])  # 16 B
    node = helper.make_node("Add", ["x", "big"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], initializer=[big, small]))
    for _ in range(2):  # onnx.save appends to an existing data file; we must not
        path = save_stripped(onnx.ModelProto.FromString(model.SerializeToString()), tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx.data").stat().st_size == 512 * 4
    inits = {i.name: i for i in load(path).graph.initializer}
    assert inits["big"].data_location == TensorProto.EXTERNAL
    assert inits["small"].data_location == TensorProto.DEFAULT and list(inits["small"].int64_data) == [1, -1]


def test_name_nodes_by_module():
    def node(op, inputs, out, scopes):
        n = helper.make_node(op, inputs, [out], name=f"node_{op}_{out}")
        if scopes is not None:
            helper.set_metadata_props(n, {"pkg.torch.onnx.name_scopes": repr(scopes)})
        return n

    w = helper.make_tensor("layer2.0.conv2.weight", TensorProto.FLOAT, [1, 1, 3, 3], [0.0] * 9)
    nodes = [
        node("Conv", ["x", w.name], "a", ["", "layer2", "layer2.0", "layer2.0.bn2", "bn_2"]),  # fused
        node("Relu", ["a"], "b", ["", "layer2", "layer2.0", "layer2.0.relu", "relu_3"]),
        node("Relu", ["b"], "c", ["", "layer2", "layer2.0", "layer2.0.relu", "relu_4"]),
        node("Split", ["c"], "d", None),  # created by the optimizer: takes its producer's path
        node("Neg", ["x"], "e", None),  # no scopes, producer is a graph input: name kept
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [], initializer=[w]))
    name_nodes_by_module(model)
    assert [n.name for n in model.graph.node] == [
        "/layer2/layer2.0/conv2/Conv",
        "/layer2/layer2.0/relu/Relu",
        "/layer2/layer2.0/relu/Relu_1",
        "/layer2/layer2.0/relu/Split",
        "node_Neg_e",
    ]


# ---------------------------------------------------------------- fresh exports (slow)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="module")
def fresh(out_dir):
    """Export on first use, once per module: name -> path of a full (weights included) export."""
    made: dict[str, Path] = {}
    recipes = {
        "resnet50_fp32.onnx": lambda: export_resnet50(out_dir, dtype="fp32"),
        "resnet50_fp32_torchscript.onnx": lambda: export_resnet50(out_dir, exporter="torchscript"),
        "gpt2_prefill_fp32.onnx": lambda: export_gpt2(out_dir, "prefill", "fp32"),
        "gpt2_prefill_fp16.onnx": lambda: export_gpt2(out_dir, "prefill", "fp16"),
        "gpt2_decode_fp32.onnx": lambda: export_gpt2(out_dir, "decode", "fp32"),
    }

    def get(name: str) -> Path:
        if name not in made:
            made[name] = recipes[name]()
            assert made[name].name == name
        return made[name]

    return get


@pytest.fixture(scope="module")
def gpt2():
    return build_gpt2(seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50_fp32.onnx", "gpt2_decode_fp32.onnx", "gpt2_prefill_fp16.onnx"])
def test_fresh_export_reproduces_committed_structure(fresh, name):
    assert structure(load(fresh(name))) == structure(load(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50_fp32.onnx", "resnet50_fp32_torchscript.onnx"])
def test_resnet_matches_torch_in_onnxruntime(fresh, name):
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = build_resnet50(seed=0)(x).numpy()
    (got,) = session(fresh(name)).run(None, {"pixel_values": x.numpy()})
    assert got.shape == (1, 1000)
    close(got, want)


@pytest.mark.slow
def test_gpt2_prefill_matches_torch_in_onnxruntime(fresh, gpt2):
    ids = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = [t.numpy() for t in GPT2Prefill(gpt2).eval()(ids)]
    got = session(fresh("gpt2_prefill_fp32.onnx")).run(None, {"input_ids": ids.numpy()})
    assert got[0].shape == (1, 8, VOCAB) and got[1].shape == (1, HEADS, 8, HEAD_DIM)
    for g, w in zip(got, want, strict=True):
        close(g, w)


@pytest.mark.slow
def test_gpt2_decode_matches_torch_in_onnxruntime(fresh, gpt2):
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (1, 1), generator=gen)
    past = [torch.randn(1, HEADS, 5, HEAD_DIM, generator=gen) for _ in range(2 * LAYERS)]
    with torch.no_grad():
        want = [t.numpy() for t in GPT2Decode(gpt2).eval()(ids, *past)]
    feeds = {"input_ids": ids.numpy()} | {n: t.numpy() for n, t in zip(past_names(), past, strict=False)}
    got = session(fresh("gpt2_decode_fp32.onnx")).run(None, feeds)
    assert got[0].shape == (1, 1, VOCAB) and got[1].shape == (1, HEADS, 6, HEAD_DIM)
    for g, w in zip(got, want, strict=True):
        close(g, w)


@pytest.mark.slow
def test_decode_consumes_the_prefill_cache(fresh):
    """prefill(t[0..P-1]) -> presents -> decode(t[P]) == prefill(t[0..P]) at the last position."""
    P = 5
    tokens = np.random.default_rng(4).integers(0, VOCAB, (1, P + 1), dtype=np.int64)
    prefill = session(fresh("gpt2_prefill_fp32.onnx"))
    decode = session(fresh("gpt2_decode_fp32.onnx"))
    _, *presents = prefill.run(None, {"input_ids": tokens[:, :P]})
    feeds = {"input_ids": tokens[:, P:]} | dict(zip(past_names(), presents, strict=False))
    step_logits, *step_presents = decode.run(None, feeds)
    full_logits, *full_presents = prefill.run(None, {"input_ids": tokens})
    assert all(p.shape == (1, HEADS, P + 1, HEAD_DIM) for p in step_presents)
    close(step_logits[:, 0], full_logits[:, -1])
    for s, f in zip(step_presents, full_presents, strict=True):
        close(s, f)

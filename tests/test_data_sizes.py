"""Sizes that depend on data, each bounded or assumed aloud (issue 42): a length regulator's frames
at --frames-per-token (shapes/durations.py), a VLM's image-token scatter at its bound
(shapes/bounds.py), and the channels a convolution's weight fixes (shapes/roles.py). Graphs are
exported here by torch from random-init models with small configs; skipped without torch."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.shapes.durations import FRAMES_PER_TOKEN, parse_frames

TOKENS = 8  # the VITS input's tokens
UPSAMPLE = (4, 4)  # the VITS vocoder's upsample rates: samples per frame = 16


def _vits_config(transformers):
    return transformers.VitsConfig(
        vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, ffn_dim=64, flow_size=16, spectrogram_bins=33,
        upsample_initial_channel=32, upsample_rates=list(UPSAMPLE), upsample_kernel_sizes=[8, 8], resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]], prior_encoder_num_flows=2, prior_encoder_num_wavenet_layers=1, duration_predictor_num_flows=2,
        duration_predictor_filter_channels=32, depth_separable_num_layers=2, posterior_encoder_num_wavenet_layers=1, window_size=2,
        use_stochastic_duration_prediction=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def vits(tmp_path_factory):
    """A random-init transformers VitsModel (stochastic duration predictor, as MMS-TTS) and its
    TorchScript export, the sequence dynamic."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.VitsModel(_vits_config(transformers)).eval()
    path = tmp_path_factory.mktemp("vits") / "vits.onnx"
    ids = torch.randint(1, 40, (1, TOKENS))
    torch.onnx.export(model, (ids,), str(path), input_names=["input_ids"], output_names=["waveform"],
                      dynamic_axes={"input_ids": {1: "sequence"}, "waveform": {1: "samples"}}, opset_version=17, dynamo=False)  # fmt: skip
    return model, path


def _matrix_flops_at(model, durations: list[int]) -> int:
    """The matrix FLOPs of the torch model run with each token lasting `durations` frames:
    FlopCounterMode (2 per multiply-add over mm, bmm, convolutions) with the duration predictor's
    output replaced by log(duration) (just under, so that its Ceil gives the duration back), plus one
    FLOP per output of a Conv bias, which the rules count and FlopCounterMode does not. A Linear's
    bias is an Add in the export, on the vector unit: not counted."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    predictor = model.duration_predictor
    original = predictor.forward

    def forced(*args, **kwargs):
        out = original(*args, **kwargs)
        return torch.log(torch.tensor(durations, dtype=out.dtype)).reshape(out.shape) - 1e-4

    bias = 0

    def count_bias(module, inputs, output):
        nonlocal bias
        bias += output.numel() if module.bias is not None else 0

    hooks = [
        m.register_forward_hook(count_bias)
        for m in model.modules()
        if isinstance(m, (torch.nn.Conv1d, torch.nn.ConvTranspose1d))
    ]
    predictor.forward = forced
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            waveform = model(torch.randint(1, 40, (1, len(durations)))).waveform
    finally:
        predictor.forward = original
        for hook in hooks:
            hook.remove()
    assert waveform.shape[-1] == sum(durations) * math.prod(UPSAMPLE)  # the durations took: frames × samples per frame
    return counter.get_total_flops() + bias


def test_frames_per_token_parses_a_positive_number_or_a_ratio():
    assert parse_frames("6") == 6.0 and parse_frames("52/8") == 6.5
    for bad in ("0", "-1", "x", "1/0", ""):
        with pytest.raises(ValueError):
            parse_frames(bad)


def test_vits_is_costed_whole_at_the_default_frames_per_token(vits):
    """The plain analysis: the sum of predicted durations at FRAMES_PER_TOKEN each, the frames
    and the whole vocoder costed from it, 0 nodes left out; its matrix FLOPs those of the torch
    model run with every token lasting that many frames."""
    model, path = vits
    report = analyze(path, sizing=Sizing(dims={"sequence": TOKENS}))
    assert report.uncosted.count == 0
    assert report.model.regulated.frames_per_token == FRAMES_PER_TOKEN and not report.model.regulated.given
    assert report.totals.matrix_flops == _matrix_flops_at(model, [int(FRAMES_PER_TOKEN)] * TOKENS)
    waveform = next(t for n in report.nodes for t in n.outputs if t is not None and t.name == "waveform")
    assert waveform.shape == (
        1,
        TOKENS * int(FRAMES_PER_TOKEN) * math.prod(UPSAMPLE),
    )  # 8 tokens × 6 frames × 16 samples


def test_vits_at_the_frames_an_onnxruntime_run_made(vits):
    """--frames-per-token T/tokens, T the frames a run made (its samples / 16): the analysis at
    that run's length; matrix FLOPs those of the torch model at durations that sum to T."""
    import onnxruntime

    model, path = vits
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(1, 40, (1, TOKENS)).astype(np.int64)
    samples = session.run(None, {"input_ids": ids})[0].shape[-1]
    frames = samples // math.prod(UPSAMPLE)
    report = analyze(path, sizing=Sizing(dims={"sequence": TOKENS}, frames_per_token=float(Fraction(frames, TOKENS))))
    assert report.uncosted.count == 0 and report.model.regulated.given
    waveform = next(t for n in report.nodes for t in n.outputs if t is not None and t.name == "waveform")
    assert waveform.shape == (1, samples)
    durations = [
        frames // TOKENS + (1 if index < frames % TOKENS else 0) for index in range(TOKENS)
    ]  # any split of T: the matrix work is T's
    assert report.totals.matrix_flops == _matrix_flops_at(model, durations)


def test_the_plain_command_states_the_assumption_in_the_table_and_json(vits, capsys):
    _, path = vits
    assert main([str(path), "--dim", "sequence=8", "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert (
        "ASSUMED   each token lasts 6 frames (the default; --frames-per-token F for another)" in out
        and "UNCOSTED" not in out
    )
    assert main([str(path), "--dim", "sequence=8", "--frames-per-token", "50/8", "--format", "json", "-q"]) == 0
    frames = json.loads(capsys.readouterr().out)["model"]["frames"]
    assert frames == {"frames_per_token": 6.25, "given": True, "nodes": ["/ReduceSum"], "sized": ["/Range"]}


def test_verify_checks_the_frames_at_the_runs(vits):
    """verify checks the Range to the frames at the length its run made (the graph samples noise:
    each run its own), never as a fixed shape: every other node agrees at that length."""
    from onnx_roofline.commands.verify import verify

    result = verify(str(vits[1]), dims={"sequence": TOKENS})
    assert result.verdict == "pass"
    (frames,) = [size for size in result.sizes if size.op_type == "Range"]
    assert frames.analysis == f"{TOKENS * int(FRAMES_PER_TOKEN)} assumed" and len(frames.run) == 1


def test_a_mask_summed_into_a_length_is_no_duration():
    """An attention mask's sum sizing a Range is data no assumption sizes: a duration is a
    prediction rounded to whole frames (Ceil, Round, Floor)."""
    nodes = [
        helper.make_node("ReduceSum", ["mask", "axes"], ["length"], keepdims=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
    ]
    constants = [
        numpy_helper.from_array(np.array(value, np.int64), name)
        for name, value in (("axes", [0]), ("zero", 0), ("one", 1))
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("mask", TensorProto.INT64, [8])],
                              [helper.make_tensor_value_info("positions", TensorProto.INT64, None)], initializer=constants)  # fmt: skip
    report = analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert report.uncosted.count == 1 and report.model.regulated is None


IMAGE_TOKEN, VOCAB, HIDDEN, SEQUENCE, SIDE, PATCH = 7, 50, 16, 12, 16, 8


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    """A VLM's merge of image features into the token embeddings, as llava-style models write it:
    `embeds.masked_scatter(input_ids == image_token, features)`, exported by torch (NonZero →
    ScatterND)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    class TinyVlm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.vision = nn.Embedding(VOCAB, HIDDEN), nn.Conv2d(3, HIDDEN, PATCH, PATCH)
            self.proj, self.lm = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, VOCAB)

        def forward(self, input_ids, pixel_values):
            embeds = self.embed(input_ids)
            features = self.proj(self.vision(pixel_values).flatten(2).transpose(1, 2))
            mask = (input_ids == IMAGE_TOKEN).unsqueeze(-1).expand_as(embeds)
            return self.lm(embeds.masked_scatter(mask, features))

    torch.manual_seed(0)
    ids = torch.randint(IMAGE_TOKEN + 1, VOCAB, (1, SEQUENCE))
    ids[0, 2:6] = IMAGE_TOKEN  # (16 / 8)² = 4 image tokens
    path = tmp_path_factory.mktemp("vlm") / "vlm.onnx"
    torch.onnx.export(TinyVlm().eval(), (ids, torch.randn(1, 3, SIDE, SIDE)), str(path), input_names=["input_ids", "pixel_values"],
                      dynamic_axes={"input_ids": {1: "sequence"}}, opset_version=17, dynamo=False)  # fmt: skip
    return path


def test_an_image_token_scatter_is_costed_at_its_bound(vlm):
    """The NonZero of the image-token mask keeps at most all its elements; the ScatterND's output
    is the embeddings' shape whatever its indices, so the language head after it is exact."""
    report = analyze(vlm, sizing=Sizing(dims={"sequence": SEQUENCE}))
    assert report.uncosted.count == 0
    assert [(bound.op_type, bound.rows) for bound in report.model.bounds] == [
        ("NonZero", SEQUENCE * HIDDEN)
    ]  # [1, 12, 16] mask elements
    scatter = next(node for node in report.nodes if node.op_type == "ScatterND")
    assert scatter.outputs[0].shape == (1, SEQUENCE, HIDDEN)
    head = next(node for node in report.nodes if node.name == "/lm/MatMul")
    assert not head.at_most and head.cost.flops == 2 * SEQUENCE * HIDDEN * VOCAB
    patches = (SIDE // PATCH) ** 2
    conv = (
        2 * HIDDEN * patches * 3 * PATCH * PATCH + HIDDEN * patches
    )  # 2·Cout·H·W·Cin·kH·kW, + one FLOP per output for the bias
    assert (
        report.totals.matrix_flops == conv + 2 * patches * HIDDEN * HIDDEN + 2 * SEQUENCE * HIDDEN * VOCAB
    )  # + proj + lm


def _vision_models(transformers):
    return {
        "dinov2": (transformers.Dinov2Model(transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                                       intermediate_size=64, image_size=56, patch_size=14)), 56),
        "segformer": (transformers.SegformerModel(transformers.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                                                               num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])), 64),
        "swin": (transformers.SwinModel(transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4)), 64),
    }  # fmt: skip


@pytest.fixture(scope="module")
def vision(tmp_path_factory):
    """DINOv2, SegFormer and Swin (tiny random configs) exported by torch with every pixel_values
    dim dynamic, as optimum names them: batch_size, num_channels, height, width."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    folder, paths = tmp_path_factory.mktemp("vision"), {}
    for name, (model, side) in _vision_models(transformers).items():
        paths[name] = folder / f"{name}.onnx"
        axes = {"pixel_values": {0: "batch_size", 1: "num_channels", 2: "height", 3: "width"}}
        torch.onnx.export(model.eval(), (torch.randn(1, 3, side, side),), str(paths[name]), input_names=["pixel_values"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)  # fmt: skip
    return paths


@pytest.mark.parametrize("name", ["dinov2", "segformer", "swin"])
def test_the_channels_are_the_patch_embeddings_weight(vision, name, capsys):
    """The plain command binds num_channels from the patch embedding's weight (3 input
    channels), and costs what the same model bound by hand costs."""
    plain = analyze(vision[name], sizing=Sizing(default_dims=True))
    assert plain.model.dims["num_channels"] == 3 and plain.model.dim_roles["num_channels"].source == "model"
    assert "weight [" in plain.model.dim_roles["num_channels"].why
    by_hand = analyze(
        vision[name], sizing=Sizing(dims={"batch_size": 1, "num_channels": 3, "height": 224, "width": 224})
    )
    assert plain.totals.matrix_flops == by_hand.totals.matrix_flops and plain.uncosted.count == 0


def test_channels_that_contradict_the_weight_are_refused(vision, capsys):
    assert main([str(vision["dinov2"]), "--dim", "num_channels=1"]) == 2
    assert (
        "has 1 channels where its weight 'embeddings.patch_embeddings.projection.weight' [32, 3, 14, 14] takes 3"
        in capsys.readouterr().err
    )


def test_a_matmul_weight_fixes_the_features_of_a_tabular_input():
    """x [batch, features] @ w [20, 5]: features is 20, whatever its name; batch takes its default."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "f"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros((20, 5), np.float32), "w")])  # fmt: skip
    report = analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sizing=Sizing(default_dims=True)
    )
    assert report.model.dims["f"] == 20 and report.uncosted.count == 0
    assert report.nodes[0].cost.flops == 2 * report.model.dims["n"] * 20 * 5


def test_a_conv_weight_fixes_grouped_channels():
    """A depthwise stem: weight [6, 1, 3, 3], group 6: the input has 6 channels."""
    conv = helper.make_node("Conv", ["x", "w"], ["y"], group=6, kernel_shape=[3, 3])
    graph = helper.make_graph([conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "c", 8, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros((6, 1, 3, 3), np.float32), "w")])  # fmt: skip
    report = analyze(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sizing=Sizing(default_dims=True)
    )
    assert report.model.dims["c"] == 6 and report.nodes[0].inputs[0].shape == (1, 6, 8, 8)


def test_the_hints_printed_on_vits_and_the_vlm_run(vits, vlm, capsys):
    """The flags the plain command names on these graphs (--frames-per-token F), followed."""
    from tests.test_hints import hints

    for path in (vits[1], vlm):
        assert main([str(path), "--top", "0"]) == 0
        captured = capsys.readouterr()
        printed = hints(captured.out + captured.err)
        for flag, argument in printed:
            assert main([str(path), flag, argument, "--top", "0", "-q"]) == 0, (path, flag, argument)
            capsys.readouterr()
        if path == vits[1]:
            assert ("--frames-per-token", "1/2") in printed


def test_given_channels_a_weight_contradicts_name_the_dim_that_runs(tmp_path, capsys):
    """x [1, c, 8, 8] straight into a Conv whose weight takes 3 channels: `--dim c=1` is refused
    with the binding that runs, and following it runs."""
    conv = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], name="stem")
    graph = helper.make_graph([conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "c", 8, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")])  # fmt: skip
    path = tmp_path / "stem.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert main([str(path), "--dim", "c=1"]) == 2
    err = capsys.readouterr().err
    assert "has 1 channels where its weight 'w' [4, 3, 3, 3] takes 3" in err and err.rstrip().endswith("bind --dim c=3")
    assert main([str(path), "--dim", "c=3", "-q"]) == 0


def _regulator(summing: str, tokens: int = 5) -> onnx.ModelProto:
    """A FastSpeech-style length regulator: durations = Round(Exp(log_durations)) as int64, their
    total (a ReduceSum, or a CumSum's last element) the length of a Range of frames, each frame then
    projected by a [1, 16] weight (a MatMul of frames × 16)."""
    sums = (
        [helper.make_node("ReduceSum", ["durations", "axes"], ["total"], keepdims=0)]
        if summing == "ReduceSum"
        else [
            helper.make_node("CumSum", ["durations", "axis"], ["running"]),
            helper.make_node("Gather", ["running", "last"], ["total"], axis=1),
        ]
    )
    nodes = [
        helper.make_node("Exp", ["log_durations"], ["predicted"]),
        helper.make_node("Round", ["predicted"], ["rounded"]),
        helper.make_node("Cast", ["rounded"], ["durations"], to=TensorProto.INT64),
        *sums,
        helper.make_node("ReduceMax", ["total"], ["length"], keepdims=0),
        helper.make_node("Range", ["zero", "length", "one"], ["frames"]),
        helper.make_node("Cast", ["frames"], ["positions"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["positions", "axes"], ["column"]),
        helper.make_node("MatMul", ["column", "w"], ["out"], name="project"),
    ]  # fmt: skip
    constants = {"axes": np.array([1], np.int64), "axis": np.array(1, np.int64), "last": np.array(-1, np.int64), "zero": np.array(0, np.int64),
                 "one": np.array(1, np.int64), "w": np.ones((1, 16), np.float32)}  # fmt: skip
    graph = helper.make_graph(nodes, "regulator", [helper.make_tensor_value_info("log_durations", TensorProto.FLOAT, [1, tokens])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(value, name) for name, value in constants.items()])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("summing", ["ReduceSum", "CumSum"])
def test_a_length_regulator_takes_the_frames_per_token(summing):
    project = lambda report: next(node for node in report.nodes if node.name == "project")  # noqa: E731
    plain = analyze(_regulator(summing))
    assert (
        plain.uncosted.count == 0 and project(plain).cost.flops == 2 * (5 * 6) * 1 * 16
    )  # 5 tokens × 6 frames, × 16 features
    given = analyze(_regulator(summing), sizing=Sizing(frames_per_token=3.5))
    assert project(given).cost.flops == 2 * math.ceil(5 * 3.5) * 1 * 16  # 17.5 frames: a whole 18
    assert given.model.regulated.given and given.model.regulated.sized == (
        "Range_5" if summing == "ReduceSum" else "Range_6",
    )

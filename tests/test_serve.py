"""The serving study and tensor parallelism (issue 31), checked against arithmetic done here from
each model's configuration, never against the tool's own output:

- GPT-2 decode (fixtures/, fp16, H100): the largest batch that fits 90 % of 80 GB at past 1023;
- a Llama-shaped decoder with Llama-2-7B's proportions (hidden 4096, MLP 11008, 32 heads of 128)
  but two layers and a 1,024-token vocabulary, exported here by torch.onnx.export: the Megatron
  split found from the graph, the weight bytes per device at TP 2, 4 and 8, and the decode step's
  latency at each degree against per-device bytes over the bandwidth plus the all-reduces NCCL would run."""

from __future__ import annotations

import io
import json
import math
import warnings

import onnx
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import Session
from onnx_roofline.commands.whatif.serve import serve
from onnx_roofline.costs.collectives import ALL_GATHER, ALL_REDUCE, collective
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.views.tensor_parallel import ATTENTION, MLP, plan_tensor_parallel

CAPACITY = 80e9 * 0.9  # H100 SXM: 80 GB HBM3, decimal; 90 % usable (vLLM's gpu_memory_utilization default)
BANDWIDTH = 3.35e12  # H100 SXM HBM3, B/s
E = 2  # fp16 bytes per element


def all_reduce(nbytes: int, n: int) -> float:
    """One all-reduce over H100 SXM's NVSwitch as NCCL's model prices it (checked against its formulas
    in tests/test_serve_deployed_exports.py)."""
    return collective(ALL_REDUCE, nbytes, n, load_hardware("h100").interconnect).time_s


def all_gather(nbytes: int, n: int) -> float:
    return collective(ALL_GATHER, nbytes, n, load_hardware("h100").interconnect).time_s


# --- GPT-2 decode: how many sequences fit ----------------------------------------------------------

GPT2_LAYERS, GPT2_HIDDEN, GPT2_HEADS, GPT2_VOCAB, GPT2_PARAMS = 12, 768, 12, 50257, 124_439_808


GPT2_WEIGHTS = (
    GPT2_PARAMS * E + GPT2_VOCAB * GPT2_HIDDEN * E
)  # every parameter, plus the tied embedding transposed for the lm_head: folded at load, held
GPT2_REPLICATED = (
    (GPT2_LAYERS * (2 * 2 + 2) + 2) * GPT2_HIDDEN * E + 1024 * GPT2_HIDDEN * E
)  # LayerNorm gains and biases (2 per layer + final), c_proj biases (attention, MLP: added after the all-reduce); wpe
GPT2_KV = (
    GPT2_LAYERS * 2 * GPT2_HIDDEN * 1024 * E
)  # per sequence: K and V of 12 heads x 64, 1023 past rows + the new one, updated in place
GPT2_ACTIVATIONS = (
    GPT2_VOCAB * E + GPT2_HIDDEN * E
)  # per sequence, at the peak: the lm_head reads the last hidden state and writes the logits


@pytest.fixture(scope="module")
def gpt2_study():
    session = Session("fixtures/gpt2_decode_fp16.onnx", hw="h100", kv_cache="inplace")
    return {d.devices: d for d in serve(session, degrees=(1, 2), batches=(1,), context=1024).degrees}


@pytest.mark.parametrize("n", [1, 2])
def test_gpt2_decode_the_largest_batch_that_fits_an_h100_at_past_1023(gpt2_study, n):
    weights = (GPT2_WEIGHTS - GPT2_REPLICATED) / n + GPT2_REPLICATED  # the split weights divided, the replicated whole
    expected = math.floor(
        (CAPACITY - weights) / (GPT2_KV / n + GPT2_ACTIVATIONS)
    )  # 1893 on one H100; activations taken whole per device
    degree = gpt2_study[n]
    assert abs(degree.fits_up_to - expected) <= 1
    limit = degree.points[-1]
    assert limit.batch == degree.fits_up_to and limit.limit and limit.fits


def test_gpt2_tp2_holds_half_the_split_weights_and_half_the_cache(gpt2_study):
    run_one, run_two = gpt2_study[1].points[0].decode, gpt2_study[2].points[0].decode
    assert float(run_two.weight_bytes) == pytest.approx(
        (float(run_one.weight_bytes) - GPT2_REPLICATED) / 2 + GPT2_REPLICATED, abs=64
    )
    assert float(run_two.kv_cache_bytes) == float(run_one.kv_cache_bytes) / 2 == GPT2_KV / 2


def test_a_graph_without_blocks_is_said_to_have_none():
    plan = plan_tensor_parallel(analyze("fixtures/resnet50_fp16.onnx", sizing=Sizing(dims={"batch": 1})))
    assert not plan.found and plan.lm_head is None and plan.embedding is None
    assert plan.refusal(2).startswith("no transformer blocks recognised")
    assert plan.refusal(1) is None


# --- A Llama-shaped decoder: the split and the latency per device ---------------------------------------

LAYERS, HIDDEN, MLP_WIDTH, HEADS, VOCAB = (
    2,
    4096,
    11008,
    32,
    1024,
)  # Llama-2-7B's widths, 2 of its 32 layers, a small vocabulary
HEAD_DIM = HIDDEN // HEADS
PAST = 1023


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """LlamaForCausalLM's decode step, exported by TorchScript without its parameters (their
    shapes made weights stored outside the file, a file that does not exist: nothing reads them)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=HIDDEN, intermediate_size=MLP_WIDTH, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                                      num_hidden_layers=LAYERS, vocab_size=VOCAB, max_position_embeddings=2048, tie_word_embeddings=False)  # fmt: skip
    config._attn_implementation = "eager"  # the decomposed attention an exporter writes by default
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    model = model.to_empty(device="cpu").half().eval()
    with torch.no_grad():
        for i, parameter in enumerate(model.parameters()):
            parameter.fill_(i + 1)  # distinct values: the exporter merges equal parameters

    class Decode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, *past):
            cache = transformers.DynamicCache(config=config)
            for layer in range(LAYERS):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids, past_key_values=cache, use_cache=True)
            return (out.logits, *(t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)))

    kv = [f"past.{i}.{k}" for i in range(LAYERS) for k in ("key", "value")]
    presents = [name.replace("past", "present") for name in kv]
    axes = (
        {"input_ids": {0: "batch"}, "logits": {0: "batch"}}
        | {n: {0: "batch", 2: "past_sequence"} for n in kv}
        | {n: {0: "batch", 2: "total"} for n in presents}
    )
    args = (torch.ones(2, 1, dtype=torch.long), *(torch.zeros(2, HEADS, 5, HEAD_DIM, dtype=torch.half) for _ in kv))
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Decode(), args, buffer, dynamo=False, input_names=["input_ids", *kv], output_names=["logits", *presents],
                          dynamic_axes=axes, export_params=False)  # fmt: skip
    proto = onnx.load_from_string(buffer.getvalue())
    _parameters_as_absent_weights(proto, {"input_ids", *kv})
    _drop_one_input_concats(proto)
    path = tmp_path_factory.mktemp("llama") / "llama_decode.onnx"
    onnx.save(proto, path)
    return path


def _parameters_as_absent_weights(proto: onnx.ModelProto, inputs: set[str]) -> None:
    """export_params=False makes the parameters graph inputs: make them initializers again, their
    data in an external file that is never written."""
    for value in [v for v in proto.graph.input if v.name not in inputs]:
        tensor_type = value.type.tensor_type
        tensor = onnx.TensorProto(
            name=value.name, data_type=tensor_type.elem_type, dims=[d.dim_value for d in tensor_type.shape.dim]
        )
        tensor.data_location = onnx.TensorProto.EXTERNAL
        tensor.external_data.add(key="location", value="weights.absent")
        proto.graph.initializer.append(tensor)
        proto.graph.input.remove(value)


def _drop_one_input_concats(proto: onnx.ModelProto) -> None:
    """The tracer writes torch.cat of an empty tensor and the first layer's past as a Concat of one
    input, a copy no exporter of a served model leaves: read the past itself."""
    for node in [n for n in proto.graph.node if n.op_type == "Concat" and len(n.input) == 1]:
        for other in proto.graph.node:
            other.input[:] = [node.input[0] if name == node.output[0] else name for name in other.input]
        proto.graph.node.remove(node)


SPLIT = (
    LAYERS * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP_WIDTH) * E + 2 * VOCAB * HIDDEN * E
)  # Q, K, V, O; gate, up, down; embedding, lm_head
REPLICATED = (2 * LAYERS + 1) * HIDDEN * E + HEAD_DIM // 2 * 4  # the RMSNorm gains; RoPE's inverse frequencies (fp32)
CONSTANTS = 4096  # the exporter's scalar constants (eps, exponents, ...) are weights too: less than this


def test_the_megatron_split_is_found_from_the_structure(llama):
    report = analyze(llama, sizing=Sizing(dims={"batch": 1, "past_sequence": PAST}))
    plan = plan_tensor_parallel(report)
    assert [b.kind for b in plan.blocks] == [ATTENTION, MLP] * LAYERS
    assert all(len(b.columns) == 3 and len(b.rows) == 1 for b in plan.blocks if b.kind == ATTENTION)  # Q, K, V | O
    assert all(len(b.columns) == 2 and len(b.rows) == 1 for b in plan.blocks if b.kind == MLP)  # gate, up | down
    assert plan.heads() == (HEADS, HEADS) and plan.hidden == HIDDEN
    assert plan.embedding is not None and plan.lm_head is not None and not plan.replicated_projections
    assert len(plan.reduced) == 2 * LAYERS + 1 and plan.gathered == (
        "logits",
    )  # one per block and the embedding; the logits gathered
    assert plan.refusal(8) is None and plan.refusal(3) == "3 devices do not divide the 32 query heads"


@pytest.fixture(scope="module")
def llama_study(llama):
    session = Session(llama, hw="h100", kv_cache="inplace")
    return {d.devices: d for d in serve(session, degrees=(1, 2, 4, 8), batches=(1, 16), context=PAST + 1).degrees}


@pytest.mark.parametrize("n", [2, 4, 8])
def test_weight_bytes_per_device_are_the_split_over_n_plus_the_replicated(llama_study, n):
    held = float(llama_study[n].points[0].decode.weight_bytes)
    assert 0 <= held - (SPLIT / n + REPLICATED) < CONSTANTS
    whole = float(llama_study[1].points[0].decode.weight_bytes)
    assert whole - held == pytest.approx(SPLIT * (1 - 1 / n))  # exactly the split part divided


@pytest.mark.parametrize("n", [1, 2, 4, 8])
@pytest.mark.parametrize("batch", [1, 16])
def test_decode_latency_is_bytes_over_bandwidth_plus_the_all_reduces(llama_study, n, batch):
    kv_read = (
        LAYERS * 2 * batch * (HEADS // n) * PAST * HEAD_DIM * E
    )  # K and V of this device's heads: the past read once by attention
    kv_written = LAYERS * 2 * batch * (HEADS // n) * HEAD_DIM * E  # the new rows, written in place
    embedding = (
        VOCAB * HIDDEN * E
    )  # held, but the lookup reads only the batch's rows: 1/N of them on each device, on average
    per_device = (
        (SPLIT - embedding) / n + REPLICATED + batch * HIDDEN * E / n + kv_read + kv_written
    )  # every other weight read once per step
    hidden = batch * HIDDEN * E  # the [batch, 1, 4096] fp16 hidden state
    collectives = 0.0 if n == 1 else (
        2 * LAYERS * all_reduce(hidden, n)  # after attention and after the MLP, in every layer
        + all_reduce(hidden, n)  # the vocabulary-split embedding's partial lookups summed
        + all_gather(batch * VOCAB * E, n))  # the logits gathered from the vocabulary split  # fmt: skip
    expected = per_device / BANDWIDTH + collectives
    point = next(p for p in llama_study[n].points if p.batch == batch)
    assert point.decode.time_s == pytest.approx(expected, rel=0.02)


def test_tensor_parallel_fits_more_sequences(llama_study):
    fits = [llama_study[n].fits_up_to for n in (1, 2, 4, 8)]
    assert fits == sorted(fits) and fits[-1] > 7 * fits[0]


def test_serve_cli_prints_json_and_plots(tmp_path, capsys):
    plot = tmp_path / "serve.png"
    code = main(["serve", "fixtures/gpt2_decode_fp16.onnx", "--tp", "1,2", "--batch", "1,8", "--context", "128",
                 "--prompt", "64", "--prefill", "fixtures/gpt2_prefill_fp16.onnx", "--format", "json", "--plot", str(plot)])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and plot.stat().st_size > 0
    assert data["study"] == "serve" and data["context"] == 128 and data["bound_dims"]["prompt"] == "sequence"
    assert {a.split(":")[0] for a in data["assumptions"]} >= {"split", "collectives", "overlap"}
    assert data["tensor_parallel"]["layers"] == {"attention": 12, "mlp": 12}
    one, two = data["degrees"]
    assert [p["batch"] for p in one["points"]][:2] == [1, 8] and one["largest_batch_that_fits"] > 8
    point = two["points"][0]
    assert point["communication"]["all-reduce"] == 2 * 12 + 1 and point["communication"]["all-gather"] == 1
    assert point["ttft_s"] > 0 and point["memory_per_device"]["fits"] is True


def test_an_interconnect_table_is_checked_like_the_rest_of_the_spec(tmp_path):
    from onnx_roofline.costs.hardware import load_hardware
    from onnx_roofline.errors import HardwareSpecError

    base = 'memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\n[interconnect]\nname = "link"\nsource = "a datasheet"\nfabric = "pcie"\n'
    good = tmp_path / "good.toml"
    good.write_text(base + 'bandwidth = 1e11\ngeneration = "ampere"\n')
    assert load_hardware(str(good)).interconnect.bandwidth == 1e11
    for text, says in ((base + 'bandwith = 1e11\ngeneration = "ampere"\n', "`interconnect.bandwith`"),
                       (base + 'bandwidth = 1e11\ngeneration = "kepler"\n', "`interconnect.generation` must be one of"),
                       (base + 'bandwidth = 0\ngeneration = "ampere"\n', "`interconnect.bandwidth`"),
                       (base + "bandwidth = 1e11\n", "missing `interconnect.generation`")):  # fmt: skip
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(HardwareSpecError, match=says):
            load_hardware(str(bad))

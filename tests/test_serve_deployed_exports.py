"""`serve` on the exports people deploy (issue 39), checked against arithmetic done here:

- the onnxruntime-genai builder's export (GroupQueryAttention, packed QKV, and the same graph with
  separate Q, K and V projections; MatMulNBits at int4) of a Llama with 8 query heads and 2 KV heads
  at TP 1, 2, 4, 8: where TP exceeds the KV heads each
  device holds one whole KV head (vLLM, TensorRT-LLM), and the weights and the KV cache per device
  are counted that way;
- a degree the heads cannot take is refused naming the real limit (6 query heads, 3 KV heads);
- onnxruntime's fused `Attention` (its weight holds Q, K and V) split like a decomposed one;
- collectives as NCCL's own model prices them (src/graph/tuning.cc, src/sym_kernels.cc of
  NVIDIA/nccl), its formulas written out here for a small and a large message on NVSwitch
  (H100 SXM) and on PCIe (H100 PCIe)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import onnx
import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import Session
from onnx_roofline.commands.whatif.serve import serve
from onnx_roofline.costs.collectives import ALL_GATHER, ALL_REDUCE, collective
from onnx_roofline.costs.hardware import load_hardware
from onnx_roofline.views.tensor_parallel import ATTENTION, MLP, plan_tensor_parallel

CORPUS = Path(__file__).parent / "corpus" / "models"
HIDDEN, HEADS, KV_HEADS, HEAD, MLP_WIDTH, LAYERS, VOCAB, POSITIONS = 128, 8, 2, 16, 256, 2, 1000, 128
CONTEXT = 128
F32 = 4


def llama_config(heads: int, kv_heads: int):
    transformers = pytest.importorskip("transformers")
    from tests.corpus import sources

    return sources._quiet_config(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=heads * HEAD, intermediate_size=MLP_WIDTH, num_hidden_layers=LAYERS,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=POSITIONS, tie_word_embeddings=False))  # fmt: skip


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    """Build the genai export of a Llama with `heads` and `kv_heads` at `precision`, once each."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime_genai")
    from tests.corpus import genai

    checkpoints, built = {}, {}

    def build(heads: int, kv_heads: int, precision: str) -> Path:
        if (heads, kv_heads) not in checkpoints:
            checkpoints[heads, kv_heads] = folder = tmp_path_factory.mktemp(f"llama_{heads}_{kv_heads}")
            genai.checkpoint("llama", folder, llama_config(heads, kv_heads))
        folder = checkpoints[heads, kv_heads]
        if (heads, kv_heads, precision) not in built:
            genai.build(folder, folder / precision, precision, folder / "cache")
            built[heads, kv_heads, precision] = folder / precision / "model.onnx"
        return built[heads, kv_heads, precision]

    return build


def study(path: Path, degrees, head: int = HEAD) -> dict:
    session = Session(path, hw="h100", dims={"kv_cache_dim": head}, kv_cache="inplace")
    return {d.devices: d for d in serve(session, degrees=degrees, batches=(1,), context=CONTEXT).degrees}


# --- the genai builder's export: 8 query heads, 2 KV heads ---------------------------------------------------------


def kv_heads_held(n: int) -> int:
    """KV heads each device holds: divided while they go round, one each (replicated) beyond."""
    return KV_HEADS // n if n <= KV_HEADS else 1


def separate_qkv(packed: Path) -> Path:
    """The builder's export with GroupQueryAttention fed by separate Q, K and V projections (its
    query, key and value inputs) instead of the packed one: each packed MatMul replaced by three, their
    weights stored outside the file, in a file that does not exist (nothing reads them)."""
    path = packed.with_name("separate_qkv.onnx")
    if path.exists():
        return path
    proto = onnx.load(packed, load_external_data=False)
    graph = proto.graph
    weights = {t.name: t for t in graph.initializer}
    for node in [n for n in graph.node if n.op_type == "MatMul" and "qkv_proj" in n.name]:
        outputs = []
        for part, width in (("q", HEADS * HEAD), ("k", KV_HEADS * HEAD), ("v", KV_HEADS * HEAD)):
            weight = onnx.TensorProto(
                name=f"{node.name}.{part}", data_type=weights[node.input[1]].data_type, dims=[HIDDEN, width]
            )
            weight.data_location = onnx.TensorProto.EXTERNAL
            weight.external_data.add(key="location", value="absent.data")
            graph.initializer.append(weight)
            outputs.append(f"{node.output[0]}.{part}")
            graph.node.insert(
                list(graph.node).index(node),
                onnx.helper.make_node("MatMul", [node.input[0], weight.name], [outputs[-1]]),
            )
        for attention in (n for n in graph.node if n.op_type == "GroupQueryAttention" and n.input[0] == node.output[0]):
            attention.input[:3] = outputs
        graph.initializer.remove(weights[node.input[1]])
        graph.node.remove(node)
    onnx.save(proto, path)
    return path


@pytest.mark.parametrize("qkv", ["packed", "separate"])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_genai_weights_per_device_count_the_replicated_kv_heads(builder, n, qkv):
    path = builder(HEADS, KV_HEADS, "fp32")
    degree = study(path if qkv == "packed" else separate_qkv(path), (n,))[n]
    assert degree.refusal is None
    qkv = HIDDEN * (HEADS + 2 * KV_HEADS) * HEAD  # packed Q, K, V: 8 query heads and 2 K and 2 V heads of 16
    kv_part = HIDDEN * 2 * KV_HEADS * HEAD  # the K and V columns of it
    total_split = (
        LAYERS * (qkv + HIDDEN * HIDDEN + 3 * HIDDEN * MLP_WIDTH) + 2 * VOCAB * HIDDEN
    )  # attention, o, gate/up/down; embedding, lm_head
    replicated = (2 * LAYERS + 1) * HIDDEN + 2 * POSITIONS * HEAD // 2  # RMSNorm gains; the cos and sin caches [128, 8]
    # (total - replicated) / N + replicated, where the replicated part also holds the K/V columns a device keeps
    # beyond its 1/N: whole KV heads, 1/min(N, 2) of them
    kept_kv = LAYERS * kv_part * (kv_heads_held(n) / KV_HEADS - 1 / n)
    expected = F32 * (total_split / n + replicated + kept_kv)
    held = float(degree.points[0].decode.weight_bytes)
    assert held == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_genai_kv_cache_per_device_is_the_kv_heads_it_holds(builder, n):
    degree = study(builder(HEADS, KV_HEADS, "fp32"), (n,))[n]
    expected = (
        LAYERS * 2 * 1 * kv_heads_held(n) * CONTEXT * HEAD * F32
    )  # K and V, batch 1, its KV heads, the context, in place
    run = degree.points[0].decode
    assert float(run.kv_cache_bytes) == pytest.approx(expected, rel=0.01)
    assert run.kv_replicas == (n // KV_HEADS if n > KV_HEADS else 1)


def test_genai_int4_matmulnbits_projections_split_by_the_same_shares(builder):
    path = builder(HEADS, KV_HEADS, "int4")
    plan = plan_tensor_parallel(analyze(path, sizing=Sizing(dims={"batch_size": 1, "sequence_length": 1, "past_sequence_length": CONTEXT - 1,
                                                    "total_sequence_length": CONTEXT, "kv_cache_dim": HEAD})))  # fmt: skip
    assert [b.kind for b in plan.blocks] == [ATTENTION, MLP] * LAYERS and plan.heads() == (HEADS, KV_HEADS)
    assert plan.lm_head is not None and plan.embedding is not None and not plan.replicated_projections
    proto = onnx.load(path, load_external_data=False)
    sizes = {
        t.name: math.prod(t.dims) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        for t in proto.graph.initializer
    }
    degrees = study(path, (1, 8))
    for n in (1, 8):
        share = {
            "qkv_proj": (HEADS / n + 2 * KV_HEADS * kv_heads_held(n) / KV_HEADS) / (HEADS + 2 * KV_HEADS)
        }  # packed: Q 1/N, K and V whole heads
        split = (
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
            "embed_tokens",
            "lm_head",
        )  # 1/N: the packed weight, its scales and zero points alike
        expected = sum(size * next((s for key, s in share.items() if key in name), 1 / n if any(k in name for k in split) else 1)
                       for name, size in sizes.items())  # fmt: skip
        assert float(degrees[n].points[0].decode.weight_bytes) == pytest.approx(expected, rel=0.01)


def test_a_degree_the_kv_heads_cannot_take_is_refused_by_name(builder):
    degrees = study(builder(6, 3, "fp32"), (1, 2, 3, 4, 6))  # 6 query heads, 3 KV heads
    assert degrees[2].refusal.startswith("the 3 KV heads can be neither divided among 2 devices nor replicated evenly")
    assert degrees[4].refusal == "4 devices do not divide the 6 query heads"
    assert (
        degrees[3].refusal is None and degrees[6].refusal is None
    )  # 3 divides both; 6 holds one KV head each, replicated twice
    assert degrees[6].points[0].decode.kv_replicas == 2


def test_nothing_is_said_of_a_split_that_was_refused(builder):
    session = Session(builder(6, 3, "fp32"), hw="h100", dims={"kv_cache_dim": HEAD}, kv_cache="inplace")
    result = serve(session, degrees=(1, 2), batches=(1,), context=CONTEXT)
    topics = {a.split(":")[0] for a in result.assumptions}
    assert not topics & {"split", "collectives", "overlap"} and result.interconnect is None
    assert result.degrees[1].refusal is not None and not result.degrees[1].points


def test_the_corpus_gqa_decoder_takes_tp_4_with_its_two_kv_heads_replicated():
    """The issue's case: 4 query heads, 2 KV heads (the corpus' genai Qwen2): TP 4 was refused."""
    degree = study(CORPUS / "genai_qwen2_fp32.onnx", (4,), head=32)[4]  # hidden 128 over 4 heads
    assert degree.refusal is None and degree.points[0].decode.kv_replicas == 2


def test_onnxruntime_fused_attention_is_split_like_a_decomposed_one():
    report = analyze(CORPUS / "ortopt_bert.onnx", sizing=Sizing(dims={"batch": 1, "sequence": 8}))
    plan = plan_tensor_parallel(report)
    assert [b.kind for b in plan.blocks] == [ATTENTION, MLP] * LAYERS  # the MLP holds onnxruntime's BiasGelu
    assert all(report.nodes[b.columns[0]].op_type == "Attention" for b in plan.blocks if b.kind == ATTENTION)
    assert (
        plan.heads() == (4, 4)
        and plan.refusal(4) is None
        and plan.refusal(8) == "8 devices do not divide the 4 query heads"
    )
    assert {"Attention_0_qkv_weight", "Attention_0_qkv_bias"} <= plan.split_weights


# --- collectives: NCCL's model, written out --------------------------------------------------------------------------

GBPS = 2**30 / 1e6  # sym_kernels.cc's "GBps": bytes per µs


def softmin(x, ceiling, softness):
    return ceiling - softness * math.log1p((math.exp(ceiling / softness) - 1) * math.exp(-x / softness))


def softplus(x):
    return math.log1p(math.exp(x))


def symmetric_us(bus_bytes, base_us, sm_bw, multiplier, peak, max_blocks):
    """sym_kernels.cc queryModel_lsa: base + softplus(bus bytes / bandwidth - 1), the bandwidth a smooth
    min(blocks x SM bandwidth x multiplier, peak); the fewest blocks within 2.5 % of the most's time."""
    time = lambda blocks: base_us + softplus(bus_bytes / softmin(blocks * sm_bw * multiplier, peak, sm_bw) - 1)  # noqa: E731
    blocks = next((b for b in range(1, max_blocks) if time(b) <= 1.025 * time(max_blocks)), max_blocks)
    return time(blocks), blocks


def test_a_small_all_reduce_on_nvswitch_is_a_one_shot_in_nccls_model():
    """Llama-2-70B's hidden state at batch 1 (8192 x fp16 = 16 kB) over 8 H100 SXM: NCCL's one-shot
    all-reduce through NVSwitch multicast (AllReduce_AGxLLMC_R), not the ring that cost 15.1 µs."""
    nbytes, n = 16384, 8
    one_shot, blocks = symmetric_us(
        n * nbytes * 9, 4.5, 65 * GBPS, 1.1, 320 * GBPS, 64
    )  # LL: 9x the bytes each GPU reads; Hopper
    plain, plain_blocks = symmetric_us(
        n * nbytes * 9, 4.5, 65 * GBPS, 1.0, 320 * GBPS, 64
    )  # AllReduce_AGxLL_R, without multicast
    assert one_shot * (1 + 0.025 * blocks) < plain * (
        1 + 0.025 * plain_blocks
    )  # NCCL's pick: time x (1 + 2.5 % per block)
    steps = 2 * (n - 1)
    ring_ll = (
        6.6 + steps * 0.6 + nbytes / (1000 * min(141.0, 450 * 0.5) * n / steps)
    )  # tuning.cc: ring, LL over NVLink, Hopper's llMaxBw
    chosen = collective(ALL_REDUCE, nbytes, n, load_hardware("h100").interconnect)
    assert chosen.choice.kernel == "AllReduce_AGxLLMC_R" and chosen.algorithm == "one-shot multicast/LL"
    assert chosen.time_s == pytest.approx(one_shot * 1e-6, rel=1e-6)
    assert ring_ll / one_shot > 2  # 15.2 µs against 7.1 µs


def test_a_large_all_reduce_on_nvswitch_is_a_two_shot_through_multicast():
    nbytes, n = 64 << 20, 8
    two_shot, _ = symmetric_us(
        nbytes // n + nbytes, 7.8, 65 * GBPS, n, 480 * GBPS, math.ceil(16 / n)
    )  # RSxLDMC_AGxSTMC: NVLS blocks 16/N
    nvls = 25 + nbytes / (
        1000 * 450 * 0.85 * 15 / 16 * 2 * n / (2 * (n - 1))
    )  # tuning.cc: NVLS, 25 µs, efficiency 0.85, 16 channels
    ring = 8.4 + 2 * (n - 1) * 3.4 + nbytes / (1000 * 450 * n / (2 * (n - 1)))  # ring, Simple
    chosen = collective(ALL_REDUCE, nbytes, n, load_hardware("h100").interconnect)
    assert chosen.choice.kernel == "AllReduce_RSxLDMC_AGxSTMC" and chosen.time_s == pytest.approx(
        two_shot * 1e-6, rel=1e-6
    )
    assert two_shot < nvls < ring


@pytest.mark.parametrize(("nbytes", "algorithm", "latency_us", "bandwidth_gbps"), [
    (16384, "ring/LL", 6.6 + 14 * 1.0, min(141.0, 64 * 0.5)),  # LL: half the link, below Hopper's llMaxBw; PCI latencies
    (64 << 20, "ring/Simple", 8.4 + 14 * 5.7, 64.0),  # Simple: the whole link
])  # fmt: skip
def test_on_pcie_the_all_reduce_is_nccls_ring(nbytes, algorithm, latency_us, bandwidth_gbps):
    n = 8
    expected = latency_us + nbytes / (
        1000 * bandwidth_gbps * n / (2 * (n - 1))
    )  # algorithm bandwidth: bus x N / 2(N-1)
    chosen = collective(ALL_REDUCE, nbytes, n, load_hardware("h100-pcie").interconnect)
    assert chosen.algorithm == algorithm and chosen.choice.kernel == ""
    assert chosen.time_s == pytest.approx(expected * 1e-6, rel=1e-6)


def test_an_all_gather_on_pcie_takes_half_the_steps():
    nbytes, n = 16384, 4
    expected = 6.6 + (n - 1) * 1.0 + nbytes / (1000 * min(141.0, 64 * 0.5) * n / (n - 1))  # N-1 steps
    chosen = collective(ALL_GATHER, nbytes, n, load_hardware("h100-pcie").interconnect)
    assert chosen.algorithm == "ring/LL" and chosen.time_s == pytest.approx(expected * 1e-6, rel=1e-6)


def test_serve_shows_the_algorithm_per_point(capsys):
    code = main(["serve", str(CORPUS / "genai_qwen2_fp32.onnx"), "--tp", "1,4", "--batch", "1", "--context", "128",
                 "--dim", "kv_cache_dim=32", "--format", "json"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    point = data["degrees"][1]["points"][0]
    assert code == 0 and point["memory_per_device"]["kv_replicas"] == 2
    messages = point["communication"]["messages"]
    assert {m["kind"] for m in messages} == {ALL_REDUCE, ALL_GATHER} and all(
        m["algorithm"] and m["protocol"] for m in messages
    )
    assert sum(m["count"] for m in messages if m["kind"] == ALL_REDUCE) == point["communication"][ALL_REDUCE]

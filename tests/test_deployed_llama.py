"""A Llama-shaped prefill deployed reaches the fused minimum (issue 29) on both torch exporters:
each decomposed RMSNorm, with its fp32 casts, is one kernel; RoPE's rotate-half and its cos/sin
products run in the projection's epilogue; Q, K and V (and the MLP's gate and up) are packed into
one GEMM that reads the activation once; the causal mask is generated in the attention kernel.
The minimum is computed here from the model's dims alone, as tests/test_deployed_prefill.py does
for GPT-2."""

from __future__ import annotations

import pytest

from onnx_roofline import Sizing, analyze
from onnx_roofline.views.deployed import deploy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LAYERS, D, FF, VOCAB, HEADS = (
    2,
    512,
    1376,
    1024,
    8,
)  # Llama-2-7B's proportions scaled by 1/8 (4096, 11008, 32 heads of 128 → 8 of 64)
S, E = 512, 2  # prompt tokens; fp16 bytes per element
BANDWIDTH, PEAK = 3.35e12, 989.4e12  # H100 SXM: HBM3 B/s, dense fp16 tensor-core FLOP/s


def fused_minimum(s: int) -> tuple[float, int]:
    """(seconds, bytes) of the prefill at `s` tokens, batch 1, as the issue lists its kernels: each
    reads its inputs and weights once and writes its outputs once, timed max(FLOPs/peak, bytes/BW)."""
    act = s * D * E  # one [s, D] activation
    norm = (0, 2 * act + D * E)  # x in, y out, the gain
    kernels = [(0, s * 8 + act + act)]  # embedding: the ids (int64), a row per token gathered, written
    for _ in range(LAYERS):
        kernels.append(norm)
        kernels.append((2 * s * D * 3 * D, act + 3 * D * D * E + 3 * act))  # Q, K, V with RoPE: x and W in; Q, K, V out
        kernels.append(
            (4 * s * s * D * (s + 1) // (2 * s), 4 * act)
        )  # flash attention on the causal triangle: Q, K, V in, O out
        kernels.append((2 * s * D * D, act + D * D * E + act + act))  # o_proj + residual: O, W, the residual in; out
        kernels.append(norm)
        kernels.append(
            (2 * s * D * 2 * FF, act + 2 * D * FF * E + s * FF * E)
        )  # gate and up, SiLU(gate)·up: x, W in; [s, FF] out
        kernels.append((2 * s * FF * D, s * FF * E + FF * D * E + act + act))  # down + residual
    kernels.append(norm)  # the final norm
    kernels.append((2 * s * D * VOCAB, act + VOCAB * D * E + s * VOCAB * E))  # lm_head: x, W in; logits out
    return sum(max(flops / PEAK, moved / BANDWIDTH) for flops, moved in kernels), sum(moved for _, moved in kernels)


@pytest.fixture(scope="module", params=["dynamo", "torchscript"])
def prefill(request, tmp_path_factory):
    """The tiny Llama exported by `torch.onnx.export` (dynamo or TorchScript), analyzed at S tokens."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=D,
        intermediate_size=FF,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        num_hidden_layers=LAYERS,
        vocab_size=VOCAB,
        max_position_embeddings=2 * S,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"  # the decomposed attention an exporter writes by default
    model = transformers.LlamaForCausalLM(config).eval().half()

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids):
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
            ).logits

    names = ["input_ids", "attention_mask", "position_ids"]
    args = (torch.ones(1, 16, dtype=torch.long), torch.ones(1, 16, dtype=torch.long), torch.arange(16).unsqueeze(0))
    path = tmp_path_factory.mktemp(request.param) / "llama.onnx"
    if request.param == "dynamo":
        sequence = torch.export.Dim("sequence")
        torch.onnx.export(
            Call(),
            args,
            path,
            dynamo=True,
            input_names=names,
            output_names=["logits"],
            dynamic_shapes={name: {1: sequence} for name in names},
        )
    else:
        torch.onnx.export(
            Call(),
            args,
            path,
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["logits"],
            dynamic_axes={name: {1: "sequence"} for name in names},
        )
    written = analyze(path, sizing=Sizing(dims={"sequence": S}))
    return written, deploy(written)


def test_the_prefill_deployed_is_within_3_percent_of_the_fused_minimum(prefill):
    written, deployed = prefill
    seconds, moved = fused_minimum(S)
    assert written.uncosted.count == 0
    assert deployed.totals.bytes == pytest.approx(moved, rel=0.03)
    assert deployed.totals.time_s == pytest.approx(seconds, rel=0.03)


def test_each_rmsnorm_is_one_kernel_that_reads_x_once_and_writes_y_once(prefill):
    written, deployed = prefill
    norms = [k for k in deployed.nodes if any(written.nodes[i].op_type == "ReduceMean" for i in k.members)]
    assert len(norms) == 2 * LAYERS + 1
    for kernel in norms:
        ops = {written.nodes[i].op_type for i in kernel.members}
        assert {"Pow", "ReduceMean", "Cast"} <= ops and not ops & {"MatMul", "Gemm"}  # casts inside, no projection
        assert [t.nbytes for t in kernel.outputs] == [S * D * E]  # y alone, in fp16: no fp32 copy of x is written


def test_rope_runs_in_the_packed_projection(prefill):
    written, deployed = prefill
    owner = {i: k for k in deployed.nodes for i in k.members}
    negs = [n for n in written.nodes if n.op_type == "Neg"]
    assert len(negs) == 2 * LAYERS  # rotate-half of Q and of K in every layer
    projections = {id(owner[n.index]) for n in negs}
    assert len(projections) == LAYERS  # Q's and K's rotations in the one kernel of the layer's projections
    kernels = {id(owner[n.index]): owner[n.index] for n in negs}.values()
    for kernel in kernels:
        assert sum(written.nodes[i].op_type == "MatMul" for i in kernel.members) == 3  # Q, K and V packed
    # each layer writes Q, K and V once; the first also the cos and sin tables [S, head] that every layer reads
    assert sum(k.cost.bytes_written for k in kernels) == LAYERS * 3 * S * D * E + 2 * S * (D // HEADS) * E

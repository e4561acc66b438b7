"""Acceptance: transformer graphs as onnxruntime's optimizer and quantizer rewrite them are fully
costed, and their matrix-unit FLOPs agree with the unfused graph's.

Models (random weights, no downloads): GPT-2 and BERT with 2 layers, hidden 768, 12 heads (a 1000-word
vocabulary keeps the files small), exported with the TorchScript exporter; a causal
scaled-dot-product-attention block exported by the dynamo exporter at opset 18 (decomposed) and 23
(ai.onnx Attention). Each is analyzed at batch 2, sequence 16.

Like with like: the matrix unit runs the projections and the Q·Kᵀ and P·V products in both graphs.
A fused attention op also holds the scale, mask and softmax the unfused graph runs on the vector
unit (about 6 FLOPs per score), and the GPT-2 optimizer moves Gemm bias adds into SkipLayerNorm and
FastGelu (vector): both shifts are a few hundredths of a percent here, well inside the 1% tolerance.
The quantized graphs add the zero-point subtracts of the integer matmuls (numel(A) per matmul,
1/(2N) of its product)."""

from __future__ import annotations

import functools
import types
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
quantization = pytest.importorskip("onnxruntime.quantization")

import onnx  # noqa: E402

from onnx_roofline import (  # noqa: E402
    Sizing,
    analyze,  # noqa: E402
)

HIDDEN, HEADS, LAYERS, VOCAB, POSITIONS = 768, 12, 2, 1000, 128
BATCH, SEQUENCE = 2, 16
DIMS = {"batch": BATCH, "sequence": SEQUENCE}
MS = "com.microsoft"

pytestmark = pytest.mark.filterwarnings(
    "ignore::torch.jit.TracerWarning", "ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning"
)


# --- building the models ---------------------------------------------------------------------------


def _classic_gpt2_attention(self, hidden_states, *args, **kwargs):
    """GPT-2 attention as transformers < 4.36 wrote it — the graph onnxruntime's GPT-2 attention
    fusion matches (a causal mask sliced from a bool buffer, Where, Div by √dh). transformers 5
    builds its mask differently, which the fusion does not recognize; the math is the same."""
    query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)

    def heads(x):
        return x.view(x.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    query, key, value = heads(query), heads(key), heads(value)
    scores = torch.matmul(query, key.transpose(-1, -2)) / (float(value.size(-1)) ** 0.5)
    nd, ns = scores.size(-2), scores.size(-1)
    causal = self.classic_bias[:, :, ns - nd : ns, :ns]
    scores = torch.where(causal, scores, torch.tensor(-1e4, dtype=scores.dtype))
    out = torch.matmul(torch.softmax(scores, dim=-1), value).permute(0, 2, 1, 3).contiguous()
    return self.c_proj(out.view(out.size()[:-2] + (self.num_heads * self.head_dim,))), None


class _Logits(torch.nn.Module):
    """input_ids, attention_mask -> the model's first output (logits, or BERT's hidden states)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=False)[0]


def _export_torchscript(model: torch.nn.Module, path: Path) -> Path:
    """TorchScript export (dynamo=False) with symbolic batch and sequence. An attention_mask input is
    passed so that transformers builds its mask without aten::diff (no ONNX symbolic for it)."""
    ids = torch.ones(BATCH, SEQUENCE, dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            _Logits(model.eval()),
            (ids, torch.ones_like(ids)),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["output"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "output": axes},
            opset_version=17,
            dynamo=False,
        )
    return path


def _optimize(path: Path, model_type: str, opt_level: int = 1) -> Path:
    fused = optimizer.optimize_model(
        str(path),
        model_type=model_type,
        num_heads=HEADS,
        hidden_size=HIDDEN,
        opt_level=opt_level,
        only_onnxruntime=False,
    )
    out = path.with_name(f"{path.stem}_fused{opt_level}.onnx")
    fused.save_model_to_file(str(out))
    return out


def _quantize(path: Path, suffix: str = "int8", **options) -> Path:
    out = path.with_name(f"{path.stem}_{suffix}.onnx")
    quantization.quantize_dynamic(
        str(path),
        str(out),
        weight_type=quantization.QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # contrib outputs have no inferred type
        **options,
    )
    return out


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB, n_positions=POSITIONS,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config)
    causal = torch.tril(torch.ones(POSITIONS, POSITIONS, dtype=torch.bool)).view(1, 1, POSITIONS, POSITIONS)
    for block in model.transformer.h:
        block.attn.register_buffer("classic_bias", causal, persistent=False)
        block.attn.forward = types.MethodType(_classic_gpt2_attention, block.attn)
    unfused = _export_torchscript(model, tmp_path_factory.mktemp("gpt2") / "gpt2.onnx")
    fused = _optimize(unfused, "gpt2")
    return {
        "unfused": unfused,
        "fused": fused,
        "fused99": _optimize(unfused, "gpt2", opt_level=99),
        "int8": _quantize(unfused),
        "fused_int8": _quantize(fused, op_types_to_quantize=["MatMul"]),
    }


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS, vocab_size=VOCAB,
        max_position_embeddings=POSITIONS, attn_implementation="eager",
    )  # fmt: skip
    unfused = _export_torchscript(transformers.BertModel(config), tmp_path_factory.mktemp("bert") / "bert.onnx")
    fused = _optimize(unfused, "bert")
    return {
        "unfused": unfused,
        "fused": fused,
        "int8": _quantize(unfused),
        "fused_int8": _quantize(fused, op_types_to_quantize=["MatMul"]),
        "fused_int8_all": _quantize(fused, suffix="int8_all"),  # every op type: QAttention, QEmbedLayerNormalization
    }


class _CausalSelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, HEADS, d // HEADS).transpose(1, 2) for y in self.qkv(x).split(d, dim=2))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


@pytest.fixture(scope="module")
def sdpa(tmp_path_factory) -> dict[int, Path]:
    """The same causal attention block at opset 18 (MatMul/Softmax) and 23 (one ai.onnx Attention)."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("sdpa")
    module = _CausalSelfAttention().eval()
    x = torch.randn(BATCH, SEQUENCE, HIDDEN)
    dims = ({0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")},)
    paths = {}
    for opset in (18, 23):
        paths[opset] = folder / f"sdpa{opset}.onnx"
        program = torch.onnx.export(module, (x,), dynamo=True, opset_version=opset, dynamic_shapes=dims, verbose=False)
        program.save(str(paths[opset]))
    return paths


# --- what the tests measure -------------------------------------------------------------------------


@functools.cache
def _analyzed(path: Path):
    report = analyze(path, sizing=Sizing(dims=DIMS))
    assert report.unsupported == {}, [(n.op_type, n.status, n.reason) for n in report.nodes if n.status != "ok"]
    return report


def _matrix_flops(report) -> int:
    return sum(n.cost.flops for n in report.nodes if n.unit == "matrix")


def _ops(report, domain: str | None = None) -> Counter:
    return Counter(n.op_type for n in report.nodes if domain is None or n.domain == domain)


def _close(a: int, b: int, tolerance: float = 0.01) -> bool:
    return abs(a - b) <= tolerance * max(a, b)


def _sdpa(batch, heads, q_len, kv_len, head, masks):
    scores, rows = batch * heads * q_len * kv_len, batch * heads * q_len
    return 4 * scores * head + scores * (1 + masks) + 4 * scores - 2 * rows  # QK, PV; scale, masks; softmax


def _projection(tokens):
    return 2 * tokens * HIDDEN * 3 * HIDDEN + tokens * 3 * HIDDEN  # merged QKV weights, then the bias


# --- GPT-2 ------------------------------------------------------------------------------------------


def test_gpt2_fused_ops_are_all_costed(gpt2):
    fused = _analyzed(gpt2["fused"])
    assert _ops(fused, MS) == {"Attention": LAYERS, "SkipLayerNormalization": 2 * LAYERS, "FastGelu": LAYERS,
                               "EmbedLayerNormalization": 1}  # fmt: skip
    for node in (n for n in fused.nodes if n.op_type == "Attention"):
        assert node.unit == "matrix" and node.dtype == "fp32"
        # GPT-2's fused attention is unidirectional: one causal select per score
        assert node.cost.flops == _projection(BATCH * SEQUENCE) + _sdpa(BATCH, HEADS, SEQUENCE, SEQUENCE, 64, masks=1)


def test_gpt2_fused_matrix_flops_match_unfused(gpt2):
    unfused, fused = _analyzed(gpt2["unfused"]), _analyzed(gpt2["fused"])
    assert _ops(unfused)["Softmax"] == LAYERS and "Attention" not in _ops(unfused)
    assert _close(_matrix_flops(fused), _matrix_flops(unfused))
    assert _close(fused.totals.flops, unfused.totals.flops)


def test_gpt2_opt_level_99_agrees(gpt2):
    level1, level99 = _analyzed(gpt2["fused"]), _analyzed(gpt2["fused99"])
    assert _ops(level99, MS)["Attention"] == LAYERS
    assert _close(_matrix_flops(level99), _matrix_flops(level1))


def test_gpt2_dynamic_int8_matmuls(gpt2):
    unfused, int8 = _analyzed(gpt2["unfused"]), _analyzed(gpt2["int8"])
    ops = _ops(int8)
    assert ops["MatMulInteger"] == 4 * LAYERS + 1  # c_attn, c_proj, c_fc, mlp c_proj per layer; lm_head
    assert ops["DynamicQuantizeLinear"] >= 1
    integer = [n for n in int8.nodes if n.op_type == "MatMulInteger"]
    assert all(n.unit == "matrix" and n.dtype == "int8" for n in integer)
    assert _close(_matrix_flops(int8), _matrix_flops(unfused))


def test_gpt2_fused_and_int8(gpt2):
    unfused, both = _analyzed(gpt2["unfused"]), _analyzed(gpt2["fused_int8"])
    assert _ops(both, MS)["Attention"] == LAYERS and _ops(both)["MatMulInteger"] > 0
    assert _close(_matrix_flops(both), _matrix_flops(unfused))


# --- BERT ---------------------------------------------------------------------------------------------


def test_bert_fused_ops_are_all_costed(bert):
    fused = _analyzed(bert["fused"])
    assert _ops(fused, MS) == {"Attention": LAYERS, "SkipLayerNormalization": 2 * LAYERS, "BiasGelu": LAYERS,
                               "EmbedLayerNormalization": 1}  # fmt: skip
    for node in (n for n in fused.nodes if n.op_type == "Attention"):
        # bidirectional; the padding mask arrives as EmbedLayerNormalization's mask_index
        assert node.cost.flops == _projection(BATCH * SEQUENCE) + _sdpa(BATCH, HEADS, SEQUENCE, SEQUENCE, 64, masks=1)


def test_bert_fused_matrix_flops_match_unfused(bert):
    unfused, fused = _analyzed(bert["unfused"]), _analyzed(bert["fused"])
    assert _close(_matrix_flops(fused), _matrix_flops(unfused))
    assert _close(fused.totals.flops, unfused.totals.flops)


def test_bert_dynamic_int8_matmuls(bert):
    unfused, int8 = _analyzed(bert["unfused"]), _analyzed(bert["int8"])
    assert _ops(int8)["MatMulInteger"] == 6 * LAYERS  # Q, K, V, attention output, intermediate, output
    assert _close(_matrix_flops(int8), _matrix_flops(unfused))


def test_bert_fused_and_int8(bert):
    unfused, both = _analyzed(bert["unfused"]), _analyzed(bert["fused_int8"])
    assert _ops(both, MS)["Attention"] == LAYERS and _ops(both)["MatMulInteger"] == 3 * LAYERS
    assert _close(_matrix_flops(both), _matrix_flops(unfused))


def test_bert_fused_and_int8_over_every_op_type(bert):
    """quantize_dynamic over every op type rewrites the fused Attention as QAttention and
    EmbedLayerNormalization as QEmbedLayerNormalization: ops neither ONNX's nor onnxruntime's shape
    inference types, so the contrib shape functions do, and inference resumes downstream."""
    unfused, both = _analyzed(bert["unfused"]), _analyzed(bert["fused_int8_all"])
    assert _ops(both, MS) == {"QAttention": LAYERS, "QEmbedLayerNormalization": 1, "SkipLayerNormalization": 2 * LAYERS,
                              "BiasGelu": LAYERS}  # fmt: skip
    assert _ops(both)["MatMulInteger"] == 3 * LAYERS  # attention output, intermediate, output
    assert both.model.shape_inference == "onnx+sweep"
    tokens = BATCH * SEQUENCE
    for node in (n for n in both.nodes if n.op_type == "QAttention"):
        assert node.unit == "matrix" and node.dtype == "int8" and node.outputs[0].shape == (BATCH, SEQUENCE, HIDDEN)
        # the float Attention's count, + one dequantize per projected element, + the input's zero
        # point (DynamicQuantizeLinear's, not a constant) subtracted once per input element
        dequantize, zero_point = tokens * 3 * HIDDEN, tokens * HIDDEN
        attention = _projection(tokens) + _sdpa(BATCH, HEADS, SEQUENCE, SEQUENCE, 64, masks=1)
        assert node.cost.flops == attention + dequantize + zero_point
    assert _close(_matrix_flops(both), _matrix_flops(unfused))


# --- ai.onnx Attention ------------------------------------------------------------------------------


def test_onnx_attention_matches_decomposed_sdpa(sdpa):
    decomposed, fused = _analyzed(sdpa[18]), _analyzed(sdpa[23])
    (attention,) = [n for n in fused.nodes if n.op_type == "Attention"]
    assert attention.unit == "matrix"
    assert attention.cost.flops == _sdpa(BATCH, HEADS, SEQUENCE, SEQUENCE, 64, masks=1)  # is_causal=1
    assert _ops(decomposed)["Softmax"] == 1 and "Attention" not in _ops(decomposed)
    scores, rows = BATCH * HEADS * SEQUENCE**2, BATCH * HEADS * SEQUENCE
    # exactly the scale, causal select and softmax the decomposed graph runs on the vector unit
    assert _matrix_flops(fused) - _matrix_flops(decomposed) == scores + scores + 4 * scores - 2 * rows
    assert _close(_matrix_flops(fused), _matrix_flops(decomposed))

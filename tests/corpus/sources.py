"""The torch side of the corpus: tiny random models, their wrappers, both exporters, the FLOP count.

Every model is built from a config written here (2 layers, hidden 128, 4 heads, a 1,000-word
vocabulary), filled by ``exporters.randomize.randomize_`` with a fixed seed, and called the way an
application calls it: with its ``attention_mask`` (and its KV cache, for the ``*_past`` graphs).

The independent FLOP count is ``torch.utils.flop_counter.FlopCounterMode`` over one call of the same
wrapper at the bound dims, with the model switched to eager attention (FlopCounterMode counts CPU
SDPA as 0 FLOPs); the export itself uses the default (SDPA) attention, as a user's export would.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import torch
import transformers
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters.randomize import randomize_
from exporters.resnet import Bottleneck
from exporters.strip import STACK_TRACE, set_io_shapes

SEED = 0
BATCH, SEQUENCE, PAST, ENCODER = 2, 8, 12, 10  # the dims every corpus graph is bound to
TOTAL = PAST + SEQUENCE
HIDDEN, HEADS, KV_HEADS, LAYERS, VOCAB, POSITIONS = 128, 4, 2, 2, 1000, 128
HEAD = HIDDEN // HEADS
IMAGE = 32  # ViT's
RESNET_IMAGE = 64

Shape = list  # ints and dim names


@dataclass
class Source:
    """A torch model exported to ONNX (full weights, in the work folder), with what the corpus needs."""

    name: str
    path: Path
    dims: dict[str, int]
    flops: int
    flop_method: str
    tool: str
    notes: str = ""
    variants: list[dict] = field(default_factory=list)  # more bindings of the graph: {"label", "dims", "flops"}


# --- the models ------------------------------------------------------------------------------------


def _quiet_config(config):
    config.bos_token_id = config.eos_token_id = config.pad_token_id = 0
    return config


def bert_config() -> transformers.BertConfig:
    return _quiet_config(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=4 * HIDDEN, max_position_embeddings=POSITIONS,
    ))  # fmt: skip


def gpt2_config() -> transformers.GPT2Config:
    return _quiet_config(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=POSITIONS,
    ))  # fmt: skip


def llama_config(cls=transformers.LlamaConfig):
    """Llama-like (and, with Qwen2Config, Qwen2-like: q/k/v biases): grouped-query attention, 2 KV heads."""
    return _quiet_config(cls(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=POSITIONS,
        tie_word_embeddings=False,
    ))  # fmt: skip


def bart_config() -> transformers.BartConfig:
    return _quiet_config(transformers.BartConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=2 * HIDDEN,
        decoder_ffn_dim=2 * HIDDEN, max_position_embeddings=POSITIONS, decoder_start_token_id=0,
        forced_eos_token_id=None,
    ))  # fmt: skip


def t5_config() -> transformers.T5Config:
    """T5-like: relative position buckets (a learned bias added to every layer's scores), RMS norm, no biases."""
    return _quiet_config(transformers.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HEAD, d_ff=2 * HIDDEN, num_layers=LAYERS, num_heads=HEADS,
        relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
    ))  # fmt: skip


def vit_config() -> transformers.ViTConfig:
    return transformers.ViTConfig(
        image_size=IMAGE,
        patch_size=4,
        num_channels=3,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
    )


def whisper_config() -> transformers.WhisperConfig:
    """Whisper-tiny-like: 16 mel bins, 64 input frames (max_source_positions 32 after the stride-2 conv)."""
    return _quiet_config(transformers.WhisperConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=2 * HIDDEN,
        decoder_ffn_dim=2 * HIDDEN, num_mel_bins=16, max_source_positions=32, max_target_positions=POSITIONS,
        decoder_start_token_id=0,
    ))  # fmt: skip


def hf_model(cls, config) -> nn.Module:
    torch.manual_seed(SEED)
    return randomize_(cls(config), SEED).eval()


class SmallResNet(nn.Module):
    """A reduced ResNet-50 (torchvision layout and names, the project's Bottleneck): the 7x7 stem with
    BatchNorm and max-pool, one bottleneck of each of the first two stages at ResNet-50's widths (the
    second strided; both with a projection shortcut), global average pool, classifier. Input
    [batch, 3, 64, 64]. ResNet-50's widths keep a convolution's bias (BatchNorm folded by the
    exporters: one FLOP per output, which FlopCounterMode does not count) well under 1 % of its FLOPs."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(Bottleneck(64, 64))
        self.layer2 = nn.Sequential(Bottleneck(256, 128, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, pixel_values):
        x = self.maxpool(self.relu(self.bn1(self.conv1(pixel_values))))
        return self.fc(torch.flatten(self.avgpool(self.layer2(self.layer1(x))), 1))


def small_resnet() -> nn.Module:
    torch.manual_seed(SEED)
    return randomize_(SmallResNet(), SEED).eval()


# --- wrappers: the application's call, flat tensors in and out ---------------------------------------


class EncoderCall(nn.Module):
    """BERT-like encoder: input_ids, attention_mask -> last_hidden_state, pooler_output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return out.last_hidden_state, out.pooler_output


class HiddenCall(nn.Module):
    """An encoder without a pooler (T5's): input_ids, attention_mask -> last_hidden_state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state


class LogitsCall(nn.Module):
    """Causal LM without a cache: input_ids, attention_mask -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=True).logits


class CachedCall(nn.Module):
    """Causal LM step with a KV cache: input_ids, attention_mask [batch, past + sequence],
    past.{i}.key, past.{i}.value ... -> logits, present.{i}.key, present.{i}.value ..."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, *past):
        cache = transformers.DynamicCache(ddp_cache_data=[(past[i], past[i + 1]) for i in range(0, len(past), 2)])
        logits = self.model(
            input_ids=input_ids, attention_mask=attention_mask, cache=cache, use_cache=True, return_dict=True
        ).logits
        return (logits, *[t for layer in cache.layers for t in (layer.keys, layer.values)])


class DecoderStepCall(nn.Module):
    """Encoder-decoder (BART) decoder step with past: decoder_input_ids [batch, sequence],
    encoder_hidden_states, encoder_attention_mask [batch, encoder_sequence], then per layer
    past.{i}.decoder.key/value [.., past_sequence, ..] and past.{i}.encoder.key/value
    [.., encoder_sequence, ..] -> logits, present.{i}.decoder.key/value (the cross-attention cache
    does not change, as in optimum's decoder_with_past)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask, *past):
        own = [(past[i], past[i + 1]) for i in range(0, len(past), 4)]
        cross = [(past[i + 2], past[i + 3]) for i in range(0, len(past), 4)]
        cache = transformers.EncoderDecoderCache(
            transformers.DynamicCache(ddp_cache_data=own), transformers.DynamicCache(ddp_cache_data=cross)
        )
        out = self.model(
            attention_mask=encoder_attention_mask, encoder_outputs=(encoder_hidden_states,),
            decoder_input_ids=decoder_input_ids, cache=cache, use_cache=True, return_dict=True,
        )  # fmt: skip
        own_cache = cache.self_attention_cache
        return (out.logits, *[t for layer in own_cache.layers for t in (layer.keys, layer.values)])


class VisionCall(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        out = self.model(pixel_values=pixel_values, return_dict=True)
        return out.last_hidden_state, out.pooler_output


class AudioEncoderCall(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features):
        return self.model(input_features=input_features, return_dict=True).last_hidden_state


# --- one recipe per architecture: module, example inputs at the bound dims, signature ----------------


@dataclass
class Recipe:
    name: str
    build: Callable[[], nn.Module]  # the wrapper around a fresh, seeded model
    args: Callable[[], tuple]  # example inputs at the bound dims
    inputs: dict[str, Shape]
    outputs: dict[str, Shape]
    dims: dict[str, int]
    notes: str = ""
    decode: Callable[[], tuple] | None = None  # inputs of a decode step (one new token), for *_past graphs


def decode_dims(dims: dict[str, int]) -> dict[str, int]:
    """The same graph bound for decoding: one new token after the past (``sequence`` 1, the total
    one longer than the past). The bound dims exercise a KV-cache step; these, a dim of 1."""
    out = {**dims, "sequence": 1}
    if "total_sequence" in dims:
        out["total_sequence"] = dims["past_sequence"] + 1
    return out


def _ids(batch=BATCH, sequence=SEQUENCE):
    return torch.randint(0, VOCAB, (batch, sequence), generator=torch.Generator().manual_seed(SEED))


def _past(n, heads, length, batch=BATCH, head=HEAD):
    gen = torch.Generator().manual_seed(SEED)
    return tuple(torch.randn(batch, heads, length, head, generator=gen) for _ in range(n))


def _kv_names(prefix, kinds=("key", "value")):
    return [f"{prefix}.{i}.{k}" for i in range(LAYERS) for k in kinds]


def recipes() -> dict[str, Recipe]:
    text = {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
    cached = {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "total_sequence"]}
    seq_dims = {"batch": BATCH, "sequence": SEQUENCE}
    past_dims = {**seq_dims, "past_sequence": PAST, "total_sequence": TOTAL}
    mask = lambda n: torch.ones(BATCH, n, dtype=torch.long)  # noqa: E731

    def kv(heads, length="past_sequence", out=False):
        name = "present" if out else "past"
        total = "past_sequence + sequence" if out else length
        return {n: ["batch", heads, total, HEAD] for n in _kv_names(name)}

    bart_past = {}
    for i in range(LAYERS):
        bart_past.update({f"past.{i}.decoder.{k}": ["batch", HEADS, "past_sequence", HEAD] for k in ("key", "value")})
        bart_past.update(
            {f"past.{i}.encoder.{k}": ["batch", HEADS, "encoder_sequence", HEAD] for k in ("key", "value")}
        )

    def bart_args(sequence=SEQUENCE):
        gen = torch.Generator().manual_seed(SEED)
        past = []
        for _ in range(LAYERS):
            past += [torch.randn(BATCH, HEADS, PAST, HEAD, generator=gen) for _ in range(2)]
            past += [torch.randn(BATCH, HEADS, ENCODER, HEAD, generator=gen) for _ in range(2)]
        return (_ids(sequence=sequence), torch.randn(BATCH, ENCODER, HIDDEN, generator=gen), mask(ENCODER), *past)

    def cached_args(kv_heads, sequence=SEQUENCE):
        return (_ids(sequence=sequence), mask(PAST + sequence), *_past(2 * LAYERS, kv_heads, PAST))

    return {
        "bert": Recipe(
            "bert",
            lambda: EncoderCall(hf_model(transformers.BertModel, bert_config())),
            lambda: (_ids(), mask(SEQUENCE)),
            text,
            {"last_hidden_state": ["batch", "sequence", HIDDEN], "pooler_output": ["batch", HIDDEN]},
            seq_dims,
        ),
        "gpt2": Recipe(
            "gpt2",
            lambda: LogitsCall(hf_model(transformers.GPT2LMHeadModel, gpt2_config())),
            lambda: (_ids(), mask(SEQUENCE)),
            text,
            {"logits": ["batch", "sequence", VOCAB]},
            seq_dims,
        ),
        "gpt2_past": Recipe(
            "gpt2_past",
            lambda: CachedCall(hf_model(transformers.GPT2LMHeadModel, gpt2_config())),
            lambda: cached_args(HEADS),
            {**cached, **kv(HEADS)},
            {"logits": ["batch", "sequence", VOCAB], **kv(HEADS, out=True)},
            past_dims,
            decode=lambda: cached_args(HEADS, sequence=1),
        ),
        "llama_past": Recipe(
            "llama_past",
            lambda: CachedCall(hf_model(transformers.LlamaForCausalLM, llama_config())),
            lambda: cached_args(KV_HEADS),
            {**cached, **kv(KV_HEADS)},
            {"logits": ["batch", "sequence", VOCAB], **kv(KV_HEADS, out=True)},
            past_dims,
            notes="grouped-query attention (4 query heads, 2 KV heads), RoPE, position ids from the cache length",
            decode=lambda: cached_args(KV_HEADS, sequence=1),
        ),
        "mistral_past": Recipe(
            "mistral_past",
            lambda: CachedCall(hf_model(transformers.MistralForCausalLM, llama_config(transformers.MistralConfig))),
            lambda: cached_args(KV_HEADS),
            {**cached, **kv(KV_HEADS)},
            {"logits": ["batch", "sequence", VOCAB], **kv(KV_HEADS, out=True)},
            past_dims,
            notes="Mistral: grouped-query attention with a sliding-window mask",
            decode=lambda: cached_args(KV_HEADS, sequence=1),
        ),
        "t5_encoder": Recipe(
            "t5_encoder",
            lambda: HiddenCall(hf_model(transformers.T5EncoderModel, t5_config())),
            lambda: (_ids(), mask(SEQUENCE)),
            text,
            {"last_hidden_state": ["batch", "sequence", HIDDEN]},
            seq_dims,
            notes="relative position bias computed from the positions (buckets by log distance)",
        ),
        "bart_decoder_past": Recipe(
            "bart_decoder_past",
            lambda: DecoderStepCall(hf_model(transformers.BartForConditionalGeneration, bart_config())),
            bart_args,
            {
                "decoder_input_ids": ["batch", "sequence"],
                "encoder_hidden_states": ["batch", "encoder_sequence", HIDDEN],
                "encoder_attention_mask": ["batch", "encoder_sequence"],
                **bart_past,
            },
            {
                "logits": ["batch", "sequence", VOCAB],
                **{
                    f"present.{i}.decoder.{k}": ["batch", HEADS, "past_sequence + sequence", HEAD]
                    for i in range(LAYERS)
                    for k in ("key", "value")
                },
            },
            {**seq_dims, "past_sequence": PAST, "encoder_sequence": ENCODER},
            notes="decoder step of an encoder-decoder with self- and cross-attention caches",
            decode=lambda: bart_args(sequence=1),
        ),  # fmt: skip
        "vit": Recipe(
            "vit",
            lambda: VisionCall(hf_model(transformers.ViTModel, vit_config())),
            lambda: (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(SEED)),),
            {"pixel_values": ["batch", 3, IMAGE, IMAGE]},
            {"last_hidden_state": ["batch", (IMAGE // 4) ** 2 + 1, HIDDEN], "pooler_output": ["batch", HIDDEN]},
            {"batch": BATCH},
        ),
        "whisper_encoder": Recipe(
            "whisper_encoder",
            lambda: AudioEncoderCall(hf_model(transformers.WhisperModel, whisper_config()).encoder),
            lambda: (torch.randn(BATCH, 16, 64, generator=torch.Generator().manual_seed(SEED)),),
            {"input_features": ["batch", 16, 64]},
            {"last_hidden_state": ["batch", 32, HIDDEN]},
            {"batch": BATCH},
            notes="Conv1d front end (stride 2) and a transformer encoder",
        ),
        "resnet": Recipe(
            "resnet",
            small_resnet,
            lambda: (torch.randn(BATCH, 3, RESNET_IMAGE, RESNET_IMAGE, generator=torch.Generator().manual_seed(SEED)),),
            {"pixel_values": ["batch", 3, RESNET_IMAGE, RESNET_IMAGE]},
            {"logits": ["batch", 10]},
            {"batch": BATCH},
            notes="reduced ResNet-50: 7x7 stem, one bottleneck per stage of the first two, BatchNorm (folded by the exporters)",
        ),
    }


# --- counting and exporting ------------------------------------------------------------------------


def count_flops(module: nn.Module, args: tuple) -> int:
    """FlopCounterMode over one call, with every transformers model inside switched to eager attention."""
    models = [m for m in module.modules() if isinstance(m, transformers.PreTrainedModel)]
    before = [m.config._attn_implementation for m in models]
    for m in models:
        if m.config._attn_implementation != "eager":
            m.set_attn_implementation("eager")
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            module(*args)
        return int(counter.get_total_flops())
    finally:
        for m, impl in zip(models, before, strict=False):
            if impl != "eager":
                m.set_attn_implementation(impl)


FLOP_METHOD = "torch.utils.flop_counter.FlopCounterMode, eager attention, at the bound dims"


@contextlib.contextmanager
def quiet():
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def eager_attention(module: nn.Module) -> nn.Module:
    """Switch every transformers model inside ``module`` to eager attention (for opsets < 14, which
    have no export of SDPA — as graphs from before SDPA were); returns ``module``."""
    for m in module.modules():
        if isinstance(m, transformers.PreTrainedModel) and m.config._attn_implementation != "eager":
            m.set_attn_implementation("eager")
    return module


def export(
    recipe: Recipe,
    exporter: str,
    path: Path,
    opset: int | None = None,
    training: bool = False,
    module: nn.Module | None = None,
) -> onnx.ModelProto:
    """Export ``recipe`` with ``torch.onnx.export`` (``exporter``: "dynamo" or "torchscript");
    returns the model with its weights (also saved at ``path``). Symbolic axes get the recipe's
    names: TorchScript through ``dynamic_axes``; dynamo through ``Dim.DYNAMIC`` on each symbolic
    axis, its ``s0``-style symbols then renamed from the declared input shapes
    (``exporters.strip.set_io_shapes``, which raises if the exporter fixed a declared axis)."""
    module = module if module is not None else recipe.build()
    args = recipe.args()
    names_in, names_out = list(recipe.inputs), list(recipe.outputs)
    with torch.no_grad(), quiet():
        if exporter == "dynamo":
            specs = [
                {i: torch.export.Dim.DYNAMIC for i, d in enumerate(s) if isinstance(d, str)} or None
                for s in recipe.inputs.values()
            ]
            params = list(inspect.signature(module.forward).parameters.values())
            fixed = sum(p.kind != p.VAR_POSITIONAL for p in params)
            if any(p.kind == p.VAR_POSITIONAL for p in params):
                specs = [*specs[:fixed], tuple(specs[fixed:])]
            kwargs = {} if opset is None else {"opset_version": opset}
            program = torch.onnx.export(
                module,
                args,
                dynamo=True,
                input_names=names_in,
                output_names=names_out,
                dynamic_shapes=tuple(specs),
                verbose=False,
                **kwargs,
            )
            model = program.model_proto
            set_io_shapes(model, recipe.inputs)
            for node in model.graph.node:  # machine-specific paths, and most of the file's bytes
                keep = [p for p in node.metadata_props if p.key != STACK_TRACE]
                del node.metadata_props[:]
                node.metadata_props.extend(keep)
        else:
            axes = {
                n: {i: d for i, d in enumerate(s) if isinstance(d, str)}
                for n, s in {**recipe.inputs, **recipe.outputs}.items()
            }
            buf = io.BytesIO()
            kwargs = {} if opset is None else {"opset_version": opset}
            if training:
                kwargs["training"] = torch.onnx.TrainingMode.TRAINING
                kwargs["do_constant_folding"] = False
            torch.onnx.export(
                module,
                args,
                buf,
                dynamo=False,
                input_names=names_in,
                output_names=names_out,
                dynamic_axes={n: a for n, a in axes.items() if a},
                **kwargs,
            )
            model = onnx.load_from_string(buf.getvalue())
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return model


def source(recipe: Recipe, exporter: str, work: Path, opset: int | None = None, eager: bool = False) -> Source:
    """Export ``recipe`` into ``work`` and count its FLOPs: the Source other generators start from.
    ``eager``: export with eager attention (the graph onnxruntime's attention fusions recognize)."""
    module = recipe.build()
    flops = count_flops(module, recipe.args())
    variants = []
    if recipe.decode is not None:
        variants.append(
            {"label": "decode", "dims": decode_dims(recipe.dims), "flops": count_flops(module, recipe.decode())}
        )
    if eager:
        eager_attention(module)
    tag = "ts" if exporter == "torchscript" else "dynamo"
    suffix = ("" if opset is None else f"_opset{opset}") + ("_eager" if eager else "")
    path = work / f"{tag}_{recipe.name}{suffix}.onnx"
    export(recipe, exporter, path, opset=opset, module=module)
    tool = (
        f"torch.onnx.export(dynamo={exporter == 'dynamo'}" + ("" if opset is None else f", opset_version={opset}") + ")"
    )
    notes = "; ".join(filter(None, [recipe.notes, "exported with eager attention" if eager else ""]))
    return Source(f"{tag}_{recipe.name}{suffix}", path, dict(recipe.dims), flops, FLOP_METHOD, tool, notes, variants)

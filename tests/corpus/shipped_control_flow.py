"""Models whose work sits inside control flow, as real tools ship them (issue 27).

``python -m tests.corpus.shipped_control_flow --out tests/corpus/shipped`` (or ``build_all(out_dir)``)
writes, for each model, ``<name>.onnx`` (weights over 1 KiB, in every graph and body, moved to the
git-ignored ``<name>.onnx.data``; ``--keep-data`` keeps that file) and ``<name>.json``, its manifest:
which generator and tool made it, the dims to bind, the graph-input values to give, the un-merged
counterpart (for merged decoders), the output shapes onnxruntime gave at those dims, and notes.

Three families, each built the way its tool builds it:

1. **Merged decoders** (``*_decoder_model_merged``), as Hugging Face optimum writes
   ``decoder_model_merged.onnx``: one ``If`` on a boolean ``use_cache_branch`` input, the with-past
   decoder in the then-branch, the without-past decoder in the else-branch. ``merge_decoders`` below
   is a port of optimum's ``optimum.onnx.merge_decoders`` (optimum/onnx/graph_transformations.py and
   transformations_utils.py as of optimum 1.25, April 2025, the layout of the merged files on the
   model hubs; optimum-onnx, where the code moved in August 2025, no longer renames the
   ``attention_mask`` axis, and otherwise merges alike); the two source graphs are TorchScript
   exports of tiny random GPT-2, Llama (GQA) and Whisper decoders with optimum's input/output names
   and dynamic-axis names. Both source graphs are written too (the counterparts), and a second
   layout (``*_merged_dup``) with each branch holding its own copy of the weights.
2. **A VAD** (``vad_sr_if``), as silero-vad ships ``silero_vad.onnx``: a scripted module branching
   on its int64 ``sr`` input, exported by TorchScript into nested ``If``s, with an STFT-as-Conv1d
   front end, a Conv1d encoder and an LSTM cell with its ``state`` input and ``stateN`` output.
3. **A scripted Loop** (``loop_scripted_gemm``: torch.jit.script, a ``for`` over a runtime count
   input, a Gemm in the body) and **a Scan** (``scan_jax_rnn``: an RNN cell over the leading axis,
   written with onnx.helper in the layout jax2onnx 0.7 gave ``lax.scan``).

Every model is run in onnxruntime with its real (random, seeded) weights before they are stripped;
a merged decoder is also checked against its counterparts, branch by branch. Needs torch,
transformers, onnx, onnxruntime (the ``dev`` extra); about 15 s on 2 cores; byte-identical run to run.
This module does not import ``onnx_roofline``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import json
import logging
import os
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from importlib import metadata
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

os.environ.setdefault(
    "ORT_DISABLE_TELEMETRY", "1"
)  # before onnxruntime loads, in run_ort (DESIGN: nothing leaves the machine)

SEED = 0
SIZE_THRESHOLD = 1024  # bytes: larger initializers go to <name>.onnx.data (exporters.strip's rule)
MAX_BYTES = 300_000  # a committed graph file should stay under ~300 kB
GENERATOR = "tests/corpus/shipped_control_flow.py"

# the decoders: the corpus's tiny configs (tests/corpus/sources.py: 2 layers, hidden 128, 4 heads)
BATCH, PROMPT, PAST, ENCODER = 2, 8, 12, 10  # prompt length (no-cache pass), cached length, encoder frames


# --- writing ---------------------------------------------------------------------------------------


def graphs(graph: onnx.GraphProto):
    """``graph`` and every body inside it (If branches, Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from graphs(g)


def save_stripped(model: onnx.ModelProto, path: Path, constants: bool = False) -> Path:
    """``exporters.strip.save_stripped`` for a model with bodies: every initializer over 1 KiB, in the
    main graph *and every body*, goes to ``<file>.data`` (that one marks the main graph's only);
    `constants`: every Constant node's tensor over 1 KiB too (an exporter that writes its weights
    as Constants). Shape constants and scalars stay inline, so shapes infer without the data file."""
    model = copy.deepcopy(model)
    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)  # onnx.save appends to an existing file
    for graph in graphs(model.graph):
        tensors = list(graph.initializer)
        if constants:
            tensors += [a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
        for tensor in tensors:
            if tensor.data_type == TensorProto.STRING or _nbytes(tensor) <= SIZE_THRESHOLD:
                continue
            if not tensor.HasField("raw_data"):
                tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name))
            external_data_helper.set_external_data(tensor, data.name)
    onnx.save(model, path)
    return path


def _nbytes(tensor: onnx.TensorProto) -> int:
    return (
        int(np.prod(tensor.dims, dtype=np.int64)) * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    )


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``model`` (weights in memory) on the CPU provider; the outputs by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=False))


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class Built:
    """One model to write: the graph with its weights, its manifest fields, and the feeds (one set per
    binding: the main one, then one per variant) that onnxruntime runs to record the output shapes."""

    def __init__(self, model, *, tool, dims, feeds, values=None, counterpart=None, notes="", variants=(), inputs=None):
        self.model, self.tool, self.dims, self.feeds = model, tool, dims, feeds
        self.values, self.counterpart, self.notes = values or {}, counterpart, notes
        self.inputs = inputs or {}  # whole input shapes to give (`--input NAME=AxB`) where the dims cannot say them
        self.variants = list(variants)  # {"label", "dims", "values", "counterpart", "feeds"[, "inputs"]}


def emit(
    name: str,
    built: Built,
    out: Path,
    keep_data: bool = False,
    generator: str = GENERATOR,
    strip_constants: bool = False,
) -> dict:
    """Run ``built`` in onnxruntime at each binding, write ``<name>.onnx`` (weight-stripped) and
    ``<name>.json``; return the manifest entry."""
    onnx.checker.check_model(built.model)
    shapes = _output_shapes(built.model, built.feeds)
    path = save_stripped(built.model, out / f"{name}.onnx", strip_constants)
    if not keep_data:
        path.with_name(path.name + ".data").unlink(missing_ok=True)
    every = [n for g in graphs(built.model.graph) for n in g.node]
    entry = {
        "name": name,
        "generator": generator,
        "tool": built.tool,
        "dims": built.dims,
        "values": built.values,
        **({"inputs": built.inputs} if built.inputs else {}),
        "counterpart": built.counterpart,
        "output_shapes": shapes,
        "variants": [
            {
                "label": v["label"],
                "dims": v["dims"],
                "values": v.get("values", {}),
                "counterpart": v.get("counterpart"),
                **({"inputs": v["inputs"]} if v.get("inputs") else {}),
                "output_shapes": _output_shapes(built.model, v["feeds"]),
            }
            for v in built.variants
        ],
        "nodes": len(built.model.graph.node),
        "nodes_with_bodies": len(every),
        "ops": dict(sorted(Counter(f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in every).items())),
        "opsets": {o.domain or "ai.onnx": o.version for o in built.model.opset_import},
        "bytes": path.stat().st_size,
        "versions": {d: version(d) for d in ("torch", "transformers", "onnx", "onnxruntime")},
        "notes": built.notes,
    }
    (out / f"{name}.json").write_text(_dumps(entry) + "\n")
    return entry


def _dumps(entry: dict) -> str:
    """JSON, one key a line (as tests/corpus/models), a shape on one line."""
    text = json.dumps(entry, indent=1)
    return re.sub(
        r"\[\s*((?:-?\d+,\s*)*-?\d+)\s*\]", lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text
    )


def _output_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in run_ort(model, feeds).items()}


# --- 1. merged decoders: a port of optimum's merge_decoders ------------------------------------------
# optimum/onnx/graph_transformations.py (merge_decoders) and transformations_utils.py, optimum 1.25
# (github.com/huggingface/optimum, commit abd7da34, April 2025).
# Kept as optimum writes it: the same dedup rule, renaming, branch contents, If node and model header.
# One change, for determinism: optimum picks each shared initializer's name with set.pop() (any of
# the duplicates, varying with the hash seed); here the smallest (name, model index).


def _find_duplicate_initializers(models):
    """(dtype, sha512 of the data, dims) -> {(initializer name, model index)}, for every initializer
    but scalars and 1-D int32/int64 ones (shape constants, which stay in the branches)."""
    duplicates = defaultdict(set)
    for i, model in enumerate(models):
        for init in model.graph.initializer:
            dims = tuple(init.dims)
            if len(dims) > 1 or (len(dims) == 1 and init.data_type not in (TensorProto.INT32, TensorProto.INT64)):
                digest = hashlib.sha512(numpy_helper.to_array(init).tobytes()).hexdigest()
                duplicates[(init.data_type, digest, dims)].add((init.name, i))
    return duplicates


def _create_name_sharing_dict(duplicates, suffix: str):
    """(old name, model index) -> ``{common_name}_{suffix}_{k}``: one name per distinct tensor, ``k``
    counting the groups that picked the same common name."""
    sharing, used = {}, {}
    for group in duplicates.values():
        common, _ = min(group)
        used[common] = used[common] + 1 if common in used else 0
        for key in group:
            sharing[key] = f"{common}_{suffix}_{used[common]}"
    return sharing


def _deduplicated_cross_model_initializers(models, suffix: str):
    """optimum's ``_deduplicated_cross_model_initializers``: rename every large initializer of both
    models to its shared name (node inputs too) and return one copy of each, for the outer graph."""
    sharing = _create_name_sharing_dict(_find_duplicate_initializers(models), suffix)
    for i, model in enumerate(models):
        for node in model.graph.node:
            for j, name in enumerate(node.input):
                if (name, i) in sharing:
                    node.input[j] = sharing[(name, i)]
    out, seen = [], set()
    for i, model in enumerate(models):
        for init in model.graph.initializer:
            new = sharing.get((init.name, i))
            if new is not None and new not in seen:
                seen.add(new)
                init.name = new
                out.append(init)
    return out


def _dims(value: onnx.ValueInfoProto) -> list:
    out = []
    for d in value.type.tensor_type.shape.dim:
        if d.dim_param:
            out.append(d.dim_param)
        elif d.dim_value:
            out.append(d.dim_value)
        else:
            raise ValueError(f"{value.name}: a dim with neither dim_param nor dim_value")
    return out


def _unify_onnx_outputs(model1: onnx.ModelProto, model2: onnx.ModelProto, strict: bool) -> None:
    """optimum's ``_unify_onnx_outputs``: model2's (with past) outputs take model1's (no past)
    declarations. With ``strict=False`` an output model2 lacks (Whisper's cross-attention cache,
    which the with-past decoder does not re-emit) becomes a Constant of an empty tensor in model2:
    its first dynamic axis 0, its other dynamic axes 1 (``[0, heads, 1, head]``)."""
    names1, names2 = {o.name for o in model1.graph.output}, {o.name for o in model2.graph.output}
    if names1 != names2 and strict:
        raise ValueError(f"outputs differ: {names1 - names2} only in model1, {names2 - names1} only in model2")
    if not names2 <= names1:
        raise ValueError("The second ModelProto should not have more outputs than the first.")
    for idx in range(len(model1.graph.output)):
        out1 = model1.graph.output[idx]
        out2 = model2.graph.output[idx] if idx < len(model2.graph.output) else None
        if out2 is not None and out1 == out2:
            continue
        if out2 is None or not (
            out1.name == out2.name and out1.type.tensor_type.elem_type == out2.type.tensor_type.elem_type
        ):
            if strict or out1.name in names2:
                raise ValueError(f"cannot match {out1.name} with {out2.name if out2 is not None else None}")
            dims = _dims(out1)
            empty, dummy_axis = [], None
            for d in dims:
                if isinstance(d, str) and dummy_axis is None:
                    empty.append(0)
                    dummy_axis = True
                elif isinstance(d, str):
                    empty.append(1)
                else:
                    empty.append(d)
            value = helper.make_tensor("const_tensor", out1.type.tensor_type.elem_type, empty, vals=[])
            model2.graph.node.append(
                helper.make_node(
                    "Constant", [], [out1.name], name=f"Constant_{len(model2.graph.node) + 1}", value=value
                )
            )
            model2.graph.output.insert(
                idx, helper.make_tensor_value_info(out1.name, out1.type.tensor_type.elem_type, dims)
            )
        else:
            model2.graph.output.remove(out2)
            model2.graph.output.insert(
                idx, helper.make_tensor_value_info(out1.name, out1.type.tensor_type.elem_type, _dims(out1))
            )


def merge_decoders(
    decoder: onnx.ModelProto,
    decoder_with_past: onnx.ModelProto,
    *,
    strict: bool = True,
    shared: bool = True,
    graph_name: str = "merged",
) -> onnx.ModelProto:
    """optimum's ``merge_decoders(decoder, decoder_with_past, strict=...)``.

    - inputs: every input of the decoder, then those only the with-past decoder has (the
      ``past_key_values.*``), then ``use_cache_branch`` (BOOL ``[1]``); the decoder's
      ``attention_mask`` axis 1 is renamed ``attention_mask_sequence_length`` (it is not
      ``sequence_length`` once a past is given);
    - outputs: the decoder's declarations (``_unify_onnx_outputs``);
    - one node, ``If`` named ``optimum::if``: then-branch ``with_past``, else-branch ``no_past``; each
      branch is the source graph's nodes, with no inputs (everything comes from the outer scope) and no
      value_info, keeping only its scalar and 1-D int initializers;
    - every other initializer of both graphs in the outer graph, one copy per distinct tensor, named
      ``<name>_merged_<k>`` (``shared``, optimum's layout); with ``shared=False`` each branch keeps its
      own copy of every initializer under its own names (the weights duplicated, none outer);
    - opsets of both graphs, IR version 9, producer ``optimum-onnx``.

    The no-cache branch reads none of the ``past_key_values.*`` inputs: optimum's runtime feeds them
    empty (decoder-only: ``[batch, heads, 0, head]``; seq2seq: a dummy ``[batch, heads, 1, head]``)
    together with ``use_cache_branch=False``.
    """
    decoder, decoder_with_past = copy.deepcopy(decoder), copy.deepcopy(decoder_with_past)
    opsets = {o.version for m in (decoder, decoder_with_past) for o in m.opset_import if o.domain in ("", "ai.onnx")}
    if len(opsets) != 1:
        raise ValueError(f"the decoders' opsets differ: {sorted(opsets)}")
    _unify_onnx_outputs(decoder, decoder_with_past, strict=strict)
    inputs, seen = [], set()
    for model in (decoder, decoder_with_past):
        for value in model.graph.input:
            if value.name not in seen:
                seen.add(value.name)
                inputs.append(value)
    for value in inputs:
        if value.name == "attention_mask":
            dim = value.type.tensor_type.shape.dim[1]
            if dim.dim_param != "sequence_length":
                raise ValueError("Expected attention_mask second axis to be dynamic and named `sequence_length`.")
            dim.dim_param = "attention_mask_sequence_length"

    def small(model):  # what optimum leaves in a branch: scalars, 1-D int32/int64
        return [
            t
            for t in model.graph.initializer
            if len(t.dims) == 0 or (len(t.dims) == 1 and t.data_type in (TensorProto.INT32, TensorProto.INT64))
        ]

    if shared:
        outer = _deduplicated_cross_model_initializers([decoder, decoder_with_past], suffix=graph_name)
        no_past_inits, with_past_inits = small(decoder), small(decoder_with_past)
    else:
        outer = []
        no_past_inits, with_past_inits = list(decoder.graph.initializer), list(decoder_with_past.graph.initializer)
    no_past = helper.make_graph(decoder.graph.node, "no_past", [], decoder.graph.output, initializer=no_past_inits)
    with_past = helper.make_graph(
        decoder_with_past.graph.node, "with_past", [], decoder_with_past.graph.output, initializer=with_past_inits
    )
    use_cache_branch = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])
    if_node = helper.make_node(
        "If",
        ["use_cache_branch"],
        [o.name for o in no_past.output],
        name="optimum::if",
        then_branch=with_past,
        else_branch=no_past,
    )
    graph = helper.make_graph([if_node], graph_name, inputs + [use_cache_branch], no_past.output, initializer=outer)
    imports, domains = [], set()
    for imp in list(decoder.opset_import) + list(decoder_with_past.opset_import):
        if imp.domain not in domains:
            domains.add(imp.domain)
            imports.append(imp)
    return helper.make_model_gen_version(graph, producer_name="optimum-onnx", opset_imports=imports, ir_version=9)


# --- the decoder sources: TorchScript exports with optimum's names -----------------------------------

OPSET_DECODERS = 14  # optimum's DEFAULT_ONNX_OPSET for GPT-2, Llama and Whisper


@contextlib.contextmanager
def quiet():
    """The exporters' and transformers' warnings are noise here (they say what we chose)."""
    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _torchscript(module, args, names_in, names_out, axes, opset, outputs=None) -> onnx.ModelProto:
    """``torch.onnx.export(dynamo=False)`` as optimum calls it: named inputs and outputs, dynamic axes
    named as optimum names them, constant folding on. ``outputs``: the outputs' full shapes, for the
    static dims the exporter could not infer and named itself (``Concatpresent.0.key_dim_3``, where
    the files on the hubs say 32): ``exporters.strip.set_io_shapes`` puts them back."""
    import torch

    from exporters.strip import set_io_shapes

    buf = io.BytesIO()
    with torch.no_grad(), quiet():
        torch.onnx.export(
            module,
            args,
            buf,
            dynamo=False,
            input_names=names_in,
            output_names=names_out,
            dynamic_axes={k: v for k, v in axes.items() if k in names_in + names_out},
            opset_version=opset,
        )
    model = onnx.load_from_string(buf.getvalue())
    if outputs:
        set_io_shapes(model, outputs)
    return model


def _causal_lm_wrappers():
    import transformers
    from torch import nn

    class DecoderCall(nn.Module):
        """optimum's decoder_model / decoder_with_past_model call: input_ids, attention_mask,
        position_ids[, past_key_values.{i}.key/value ...] -> logits, present.{i}.key/value ..."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            pairs = [(past[i], past[i + 1]) for i in range(0, len(past), 2)]
            cache = transformers.DynamicCache(ddp_cache_data=pairs) if pairs else transformers.DynamicCache()
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=True,
                return_dict=True,
            )
            return (out.logits, *[t for layer in cache.layers for t in (layer.keys, layer.values)])

    return DecoderCall


def causal_lm_sources(arch: str):
    """The decoder (no past) and decoder-with-past graphs of a tiny random causal LM (``gpt2`` or
    ``llama``), as optimum's TextDecoderWithPositionIdsOnnxConfig exports them: inputs input_ids
    [batch_size, sequence_length], attention_mask [batch_size, sequence_length] (with past:
    ``past_sequence_length + 1``), position_ids, past_key_values.{i}.key/value [batch_size, kv_heads,
    past_sequence_length, head]; outputs logits and present.{i}.key/value [.., ``past_sequence_length + 1``, ..].
    The with-past graph is traced at one new token, as optimum traces it. Returns the two models
    and the feeds they were checked on."""
    import torch
    import transformers

    from tests.corpus import sources as S

    if arch == "gpt2":
        model, kv_heads = S.hf_model(transformers.GPT2LMHeadModel, S.gpt2_config()), S.HEADS
    else:
        model, kv_heads = S.hf_model(transformers.LlamaForCausalLM, S.llama_config()), S.KV_HEADS
    call = _causal_lm_wrappers()(model).eval()
    kv_in = [f"past_key_values.{i}.{k}" for i in range(S.LAYERS) for k in ("key", "value")]
    kv_out = [f"present.{i}.{k}" for i in range(S.LAYERS) for k in ("key", "value")]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
        **{n: {0: "batch_size", 2: "past_sequence_length"} for n in kv_in},
        **{n: {0: "batch_size", 2: "past_sequence_length + 1"} for n in kv_out},
    }
    gen = torch.Generator().manual_seed(SEED)

    def args(seq, past):
        ids = torch.randint(0, S.VOCAB, (BATCH, seq), generator=gen)
        mask = torch.ones(BATCH, past + seq, dtype=torch.int64)
        pos = torch.arange(past, past + seq, dtype=torch.int64).expand(BATCH, seq).contiguous()
        kv = [torch.randn(BATCH, kv_heads, past, S.HEAD, generator=gen) for _ in kv_in] if past else []
        return (ids, mask, pos, *kv)

    no_past_args, with_past_args = args(PROMPT, 0), args(1, PAST)
    names = ["input_ids", "attention_mask", "position_ids"]
    shapes = {
        "logits": ["batch_size", "sequence_length", S.VOCAB],
        **{n: ["batch_size", kv_heads, "past_sequence_length + 1", S.HEAD] for n in kv_out},
    }
    decoder = _torchscript(
        call,
        no_past_args,
        names,
        ["logits", *kv_out],
        {**axes, "attention_mask": {0: "batch_size", 1: "sequence_length"}},
        OPSET_DECODERS,
        shapes,
    )
    with_past = _torchscript(
        call,
        with_past_args,
        names + kv_in,
        ["logits", *kv_out],
        {**axes, "attention_mask": {0: "batch_size", 1: "past_sequence_length + 1"}},
        OPSET_DECODERS,
        shapes,
    )
    feeds_no_past = dict(zip(names, (a.numpy() for a in no_past_args), strict=False))
    feeds_with_past = dict(zip(names + kv_in, (a.numpy() for a in with_past_args), strict=False))
    empty_past = {
        n: np.zeros((BATCH, kv_heads, 0, S.HEAD), np.float32) for n in kv_in
    }  # what optimum feeds the no-cache pass
    return decoder, with_past, feeds_no_past, feeds_with_past, empty_past


def whisper_sources():
    """Whisper's decoder_model and decoder_with_past_model as optimum's WhisperOnnxConfig exports them.

    - no past: input_ids [batch_size, decoder_sequence_length], encoder_hidden_states [batch_size,
      ``encoder_sequence_length / 2``, d_model] -> logits, then per layer present.{i}.decoder.key/value
      [.., ``past_decoder_sequence_length + 1``, ..] and present.{i}.encoder.key/value [..,
      encoder_sequence_length_out, ..] (the cross-attention cache, computed here once);
    - with past: input_ids [batch_size, 1] (axis 1 not dynamic), past_key_values.{i}.decoder/encoder.key/value
      -> logits [batch_size, ``1``, vocab] and present.{i}.decoder.* only: the cross-attention cache is
      read, not re-emitted, and encoder_hidden_states is not an input (nothing reads it).
    """
    import torch
    import transformers
    from torch import nn

    from tests.corpus import sources as S

    model = S.hf_model(transformers.WhisperForConditionalGeneration, S.whisper_config())
    layers = range(S.LAYERS)

    class DecoderCall(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, *rest):
            if len(rest) == 1:  # no past: the encoder's output
                (encoder_hidden_states,) = rest
                cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
            else:  # past: per layer decoder key, value, encoder key, value; the encoder output is not read
                own = [(rest[i], rest[i + 1]) for i in range(0, len(rest), 4)]
                cross = [(rest[i + 2], rest[i + 3]) for i in range(0, len(rest), 4)]
                cache = transformers.EncoderDecoderCache(
                    transformers.DynamicCache(ddp_cache_data=own), transformers.DynamicCache(ddp_cache_data=cross)
                )
                encoder_hidden_states = rest[2].new_zeros(input_ids.shape[0], 1, S.HIDDEN)
            out = self.model(
                encoder_outputs=(encoder_hidden_states,),
                decoder_input_ids=input_ids,
                cache=cache,
                use_cache=True,
                return_dict=True,
            )
            own_layers = cache.self_attention_cache.layers
            if len(rest) != 1:
                return (out.logits, *[t for layer in own_layers for t in (layer.keys, layer.values)])
            cross_layers = cache.cross_attention_cache.layers
            return (
                out.logits,
                *[
                    t
                    for a, b in zip(own_layers, cross_layers, strict=False)
                    for t in (a.keys, a.values, b.keys, b.values)
                ],
            )

    call = DecoderCall(model).eval()
    past_in = [f"past_key_values.{i}.{p}.{k}" for i in layers for p in ("decoder", "encoder") for k in ("key", "value")]
    all_out = [f"present.{i}.{p}.{k}" for i in layers for p in ("decoder", "encoder") for k in ("key", "value")]
    own_out = [n for n in all_out if ".decoder." in n]
    axes = {
        "input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
        "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length / 2"},
        "logits": {0: "batch_size", 1: "decoder_sequence_length"},
        **{
            n: {
                0: "batch_size",
                2: "past_decoder_sequence_length" if ".decoder." in n else "encoder_sequence_length_out",
            }
            for n in past_in
        },
        **{
            n: {
                0: "batch_size",
                2: "past_decoder_sequence_length + 1" if ".decoder." in n else "encoder_sequence_length_out",
            }
            for n in all_out
        },
    }
    gen = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, S.VOCAB, (BATCH, PROMPT), generator=gen)
    enc = torch.randn(BATCH, ENCODER, S.HIDDEN, generator=gen)
    shapes = {n: ["batch_size", S.HEADS, axes[n][2], S.HEAD] for n in all_out}
    decoder = _torchscript(
        call,
        (ids, enc),
        ["input_ids", "encoder_hidden_states"],
        ["logits", *all_out],
        axes,
        OPSET_DECODERS,
        {"logits": ["batch_size", "decoder_sequence_length", S.VOCAB], **shapes},
    )
    step = torch.randint(0, S.VOCAB, (BATCH, 1), generator=gen)
    past = [torch.randn(BATCH, S.HEADS, PAST if ".decoder." in n else ENCODER, S.HEAD, generator=gen) for n in past_in]
    with_past_axes = {**axes, "input_ids": {0: "batch_size"}, "logits": {0: "batch_size", 1: "1"}}
    with_past = _torchscript(
        call,
        (step, *past),
        ["input_ids", *past_in],
        ["logits", *own_out],
        with_past_axes,
        OPSET_DECODERS,
        {"logits": ["batch_size", "1", S.VOCAB], **{n: shapes[n] for n in own_out}},
    )
    feeds_no_past = {"input_ids": ids.numpy(), "encoder_hidden_states": enc.numpy()}
    feeds_with_past = {"input_ids": step.numpy(), **{n: t.numpy() for n, t in zip(past_in, past, strict=False)}}
    dummy_past = {
        n: np.zeros((BATCH, S.HEADS, 1, S.HEAD), np.float32) for n in past_in
    }  # ORTModelForSpeechSeq2Seq's first pass
    return decoder, with_past, feeds_no_past, feeds_with_past, dummy_past


def _check_close(got: dict, want: dict, what: str) -> None:
    for name, value in want.items():
        if got[name].shape != value.shape or not np.allclose(got[name], value, atol=1e-4, rtol=1e-4):
            raise AssertionError(f"{what}: output {name} differs ({got[name].shape} vs {value.shape})")


def decoder_family(arch: str) -> dict[str, Built]:
    """The four files of one architecture: ``<arch>_decoder_model``, ``<arch>_decoder_with_past_model``
    (the counterparts), ``<arch>_decoder_model_merged`` (optimum's layout, weights outer and shared)
    and ``<arch>_decoder_model_merged_dup`` (each branch with its own copy of the weights). Each
    merged graph is checked against the counterparts in onnxruntime, branch by branch."""
    from tests.corpus import sources as S

    whisper = arch == "whisper"
    if whisper:
        decoder, with_past, feeds0, feeds1, no_cache_past = whisper_sources()
        seq, past_dim = "decoder_sequence_length", "past_decoder_sequence_length"
    else:
        decoder, with_past, feeds0, feeds1, no_cache_past = causal_lm_sources(arch)
        seq, past_dim = "sequence_length", "past_sequence_length"
    names = {k: f"{arch}_decoder_{k}" for k in ("model", "with_past_model", "model_merged", "model_merged_dup")}
    base0, base1 = run_ort(decoder, feeds0), run_ort(with_past, feeds1)
    flops_note = {
        "gpt2": "GPT-2-like",
        "llama": "Llama-like (4 query heads, 2 KV heads: GQA; RoPE; SwiGLU)",
        "whisper": "Whisper-like decoder (self- and cross-attention; the cross K/V computed from encoder_hidden_states without a past)",
    }[arch]
    config = f"{flops_note}: tiny random config of tests/corpus/sources.py ({S.LAYERS} layers, hidden {S.HIDDEN}, {S.HEADS} heads, vocab {S.VOCAB}), seed {SEED}"
    tool_src = f"torch.onnx.export(dynamo=False, opset_version={OPSET_DECODERS}) with optimum's input/output and dynamic-axis names"

    # dims of each binding
    if whisper:
        dims0 = {"batch_size": BATCH, seq: PROMPT, "encoder_sequence_length / 2": ENCODER}
        dims1 = {"batch_size": BATCH, past_dim: PAST, "encoder_sequence_length_out": ENCODER}
        merged1 = {
            "batch_size": BATCH,
            seq: 1,
            past_dim: PAST,
            "encoder_sequence_length_out": ENCODER,
            "encoder_sequence_length / 2": ENCODER,
        }
        merged0 = {
            "batch_size": BATCH,
            seq: PROMPT,
            past_dim: 1,
            "encoder_sequence_length_out": 1,
            "encoder_sequence_length / 2": ENCODER,
        }
        extra1 = {
            "encoder_hidden_states": feeds0["encoder_hidden_states"]
        }  # a merged input the cache branch does not read
    else:
        dims0 = {"batch_size": BATCH, seq: PROMPT}
        dims1 = {"batch_size": BATCH, seq: 1, past_dim: PAST, "past_sequence_length + 1": PAST + 1}
        merged1 = {"batch_size": BATCH, seq: 1, "attention_mask_sequence_length": PAST + 1, past_dim: PAST}
        merged0 = {"batch_size": BATCH, seq: PROMPT, "attention_mask_sequence_length": PROMPT, past_dim: 0}
        extra1 = {}
    true, false = np.array([True]), np.array([False])
    m_feeds1 = {**feeds1, **extra1, "use_cache_branch": true}
    m_feeds0 = {**feeds0, **no_cache_past, "use_cache_branch": false}

    out = {
        names["model"]: Built(
            decoder,
            tool=tool_src,
            dims=dims0,
            feeds=feeds0,
            notes=f"{config}. optimum's decoder_model.onnx (no past): the else-branch of {names['model_merged']}.",
        ),
        names["with_past_model"]: Built(
            with_past,
            tool=tool_src,
            dims=dims1,
            feeds=feeds1,
            notes=f"{config}. optimum's decoder_with_past_model.onnx, traced at one new token as optimum traces it: the then-branch of {names['model_merged']}.",
        ),
    }
    no_cache_note = (
        "the no-cache pass is fed a dummy past of length 1 (ORTModelForSpeechSeq2Seq's first pass), "
        "so the past length does not say which branch runs: only use_cache_branch does"
        if whisper
        else "the no-cache pass is fed an empty past (length 0), as ORTModelForCausalLM feeds it"
    )
    for key, shared in (("model_merged", True), ("model_merged_dup", False)):
        merged = merge_decoders(decoder, with_past, strict=not whisper, shared=shared)
        _check_close(run_ort(merged, m_feeds1), base1, f"{names[key]} use_cache_branch=1 vs {names['with_past_model']}")
        got0 = run_ort(merged, m_feeds0)
        _check_close(got0, base0, f"{names[key]} use_cache_branch=0 vs {names['model']}")
        layout = (
            "weights as outer initializers (<name>_merged_<k>) shared by both branches, optimum's layout"
            if shared
            else "each branch holds its own copy of every initializer (weights duplicated, none outer): not optimum's output, "
            "the layout of a merge that keeps each graph's initializers in its branch"
        )
        tool = (
            f"optimum.onnx.merge_decoders(decoder, decoder_with_past{', strict=False' if whisper else ''}) as ported in {GENERATOR}"
            + ("" if shared else ", without the initializer dedup")
        )
        notes = (
            f"{config}. optimum's decoder_model_merged.onnx: If(use_cache_branch) then with_past else no_past; {layout}. "
            f"Main binding: one decode step after a {PAST}-token cache (use_cache_branch=1); variant no_cache: the "
            f"{PROMPT}-token prompt (use_cache_branch=0); {no_cache_note}."
        )
        if whisper:
            notes += " The then-branch emits present.{i}.encoder.* as Constants of an empty [0, heads, 1, head] tensor (merge with strict=False)."
        out[names[key]] = Built(
            merged,
            tool=tool,
            dims=merged1,
            feeds=m_feeds1,
            values={"use_cache_branch": 1},
            counterpart=names["with_past_model"],
            notes=notes,
            variants=[
                {
                    "label": "no_cache",
                    "dims": merged0,
                    "values": {"use_cache_branch": 0},
                    "counterpart": names["model"],
                    "feeds": m_feeds0,
                }
            ],
        )
    return out


# --- 2. the VAD: nested Ifs on the sample rate ------------------------------------------------------

VAD_SAMPLES = {16000: 256, 8000: 128}  # one window per call (silero-vad: 512 / 256 samples)
VAD_HIDDEN = 64  # silero-vad: 128


def vad_module():
    """A silero-vad-like module (silero-vad v5's layout, smaller): per sample rate one network
    ``_model`` (16 kHz) / ``_model_8k`` (8 kHz), each an STFT written as a Conv1d with a fixed
    (Hann-windowed cos/sin) basis after a reflect pad, the magnitude, a 3-layer Conv1d+ReLU encoder,
    an LSTM cell on the time-averaged features whose (h, c) is the ``state`` [2, batch, 64] input,
    and a 1x1 Conv1d + Sigmoid speech probability. ``forward(input, state, sr)`` branches on ``sr``
    in TorchScript (if 16000 / elif 8000 / else zeros), so the export writes nested Ifs."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class STFT(nn.Module):
        def __init__(self, filter_length: int, hop: int):
            super().__init__()
            self.hop, self.cutoff = hop, filter_length // 2 + 1
            t = torch.arange(filter_length, dtype=torch.float64)
            k = torch.arange(self.cutoff, dtype=torch.float64)[:, None]
            angle = 2 * torch.pi * k * t / filter_length
            basis = torch.cat([torch.cos(angle), -torch.sin(angle)]) * torch.hann_window(
                filter_length, periodic=True, dtype=torch.float64
            )
            self.register_buffer("forward_basis_buffer", basis[:, None, :].float())

        def forward(self, x):
            x = F.pad(x.unsqueeze(1), (self.hop, self.hop), mode="reflect")
            spec = F.conv1d(x, self.forward_basis_buffer, stride=self.hop)
            real, imag = spec[:, : self.cutoff], spec[:, self.cutoff :]
            return torch.sqrt(real * real + imag * imag)

    class Net(nn.Module):
        def __init__(self, filter_length: int, hop: int, hidden: int = VAD_HIDDEN):
            super().__init__()
            self.stft = STFT(filter_length, hop)
            bins = filter_length // 2 + 1
            self.encoder = nn.Sequential(
                nn.Conv1d(bins, hidden, 3, padding=1), nn.ReLU(),
                nn.Conv1d(hidden, hidden, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv1d(hidden, hidden, 3, padding=1), nn.ReLU(),
            )  # fmt: skip
            self.rnn = nn.LSTMCell(hidden, hidden)
            self.decoder = nn.Conv1d(hidden, 1, 1)

        def forward(self, x, state):
            features = self.encoder(self.stft(x)).mean(-1)
            h, c = self.rnn(features, (state[0], state[1]))
            out = torch.sigmoid(self.decoder(F.relu(h).unsqueeze(-1))).squeeze(-1)
            return out, torch.stack([h, c])

    class VAD(nn.Module):
        def __init__(self):
            super().__init__()
            self._model = Net(64, 32)
            self._model_8k = Net(32, 16)

        def forward(self, x, state, sr):
            if bool(sr == 16000):
                out, new_state = self._model(x, state)
            elif bool(sr == 8000):
                out, new_state = self._model_8k(x, state)
            else:  # silero-vad raises on another rate; a script branch that raises does not export
                out, new_state = torch.zeros_like(x[:, :1]), state
            return out, new_state

    from exporters.randomize import randomize_

    torch.manual_seed(SEED)
    return torch.jit.script(randomize_(VAD(), SEED).eval())


def vad() -> Built:
    """``vad_sr_if``: If(sr == 16000) { 16 kHz net } else { If(sr == 8000) { 8 kHz net } else { zeros } }.
    The weights are outer initializers read only inside the branches (the LSTM's W/R/B are sliced and
    concatenated from them inside the branch, as TorchScript writes an LSTMCell)."""
    import torch

    module = vad_module()
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(BATCH, VAD_SAMPLES[16000], generator=gen)
    state = torch.zeros(2, BATCH, VAD_HIDDEN)
    model = _torchscript(
        module,
        (x, state, torch.tensor(16000)),
        ["input", "state", "sr"],
        ["output", "stateN"],
        {
            "input": {0: "batch_size", 1: "samples"},
            "state": {1: "batch_size"},
            "output": {0: "batch_size"},
            "stateN": {1: "batch_size"},
        },
        16,
    )

    def feeds(sr):
        x = torch.randn(BATCH, VAD_SAMPLES[sr], generator=gen)
        want = module(x, state, torch.tensor(sr))
        f = {"input": x.numpy(), "state": state.numpy(), "sr": np.array(sr, np.int64)}
        got = run_ort(model, f)
        if not np.allclose(got["output"], want[0].detach().numpy(), atol=1e-5):
            raise AssertionError(f"vad_sr_if: onnxruntime and torch differ at sr={sr}")
        return f

    return Built(
        model,
        tool="torch.jit.script + torch.onnx.export(dynamo=False, opset_version=16), as silero-vad v5 is exported (opset 16)",
        dims={"batch_size": BATCH, "samples": VAD_SAMPLES[16000]},
        values={"sr": 16000},
        feeds=feeds(16000),
        variants=[
            {
                "label": "8k",
                "dims": {"batch_size": BATCH, "samples": VAD_SAMPLES[8000]},
                "values": {"sr": 8000},
                "feeds": feeds(8000),
            }
        ],
        notes=(
            "silero-vad-like: inputs input [batch_size, samples], state [2, batch_size, 64], sr (int64 scalar); outputs output "
            "[batch_size, 1], stateN. Emitted by torch (not onnx.helper): nested Ifs on Equal(sr, 16000) and Equal(sr, 8000), "
            "the third branch zeros. Every weight is an outer initializer read only inside a branch. Window: 256 samples at "
            "16 kHz, 128 at 8 kHz."
        ),
    )


# --- 3. a scripted Loop and a JAX-style Scan ----------------------------------------------------------

LOOP_FEATURES, LOOP_STEPS = 64, 4


def loop_scripted() -> Built:
    """``loop_scripted_gemm``: ``for _ in range(int(steps)): h = tanh(proj(h)) + x`` then a classifier,
    scripted; TorchScript writes a Loop whose trip count M is the graph input ``steps`` and whose body
    holds the Gemm (its weight an outer-scope initializer)."""
    import torch
    from torch import nn

    from exporters.randomize import randomize_

    class Refine(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(LOOP_FEATURES, LOOP_FEATURES)
            self.out = nn.Linear(LOOP_FEATURES, 10)

        def forward(self, x, steps):
            h = x
            for _ in range(int(steps)):
                h = torch.tanh(self.proj(h)) + x
            return self.out(h)

    torch.manual_seed(SEED)
    module = torch.jit.script(randomize_(Refine(), SEED).eval())
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(BATCH, LOOP_FEATURES, generator=gen)
    model = _torchscript(
        module,
        (x, torch.tensor(LOOP_STEPS)),
        ["x", "steps"],
        ["logits"],
        {"x": {0: "batch"}, "logits": {0: "batch"}},
        17,
    )
    feeds = {"x": x.numpy(), "steps": np.array(LOOP_STEPS, np.int64)}
    if not np.allclose(
        run_ort(model, feeds)["logits"], module(x, torch.tensor(LOOP_STEPS)).detach().numpy(), atol=1e-5
    ):
        raise AssertionError("loop_scripted_gemm: onnxruntime and torch differ")
    return Built(
        model,
        tool="torch.jit.script + torch.onnx.export(dynamo=False, opset_version=17)",
        dims={"batch": BATCH},
        values={"steps": LOOP_STEPS},
        feeds=feeds,
        notes=(
            f"Loop(M=steps, cond=true, h=x): body Gemm [batch, {LOOP_FEATURES}]x[{LOOP_FEATURES}, {LOOP_FEATURES}]^T + bias, Tanh, Add; "
            f"then a Gemm to 10 classes outside. The trip count is a graph input: without --value steps=N it is unknown. "
            f"Body matrix FLOPs per trip: 2*batch*{LOOP_FEATURES}*{LOOP_FEATURES}."
        ),
    )


SCAN_IN, SCAN_HIDDEN, SCAN_STEPS = 16, 32, 6


def scan_jax() -> Built:
    """``scan_jax_rnn``: ``lax.scan(cell, h0, xs)`` with ``cell(h, x) = (h', h')``, ``h' = tanh(x @ Wx + h @ Wh + b)``,
    in the layout jax2onnx 0.7 (enpasos/jax2onnx, jax2onnx/plugins/jax/lax/scan.py, Aug 2025; since 0.9
    it lowers scan to a Loop) gives it, built with onnx.helper:

    - the weights the body closes over are the scan's *consts*: outer initializers ``const_0..2`` fed
      to the Scan as loop-carried state and passed through the body by Identity nodes (their outer
      outputs unused);
    - state inputs [consts..., carry], then the scanned input through an Identity proxy
      (``ScanXSProxy``); ``num_scan_inputs=1``, ``scan_input_axes=[0]``, ``scan_output_axes=[0]``;
    - body inputs ``scan_body_in_<i>`` and outputs with rank-only shapes (no dims); the y output, the
      same value as the new carry, goes through an Identity (``Identity_dup_scan0``);
    - the Scan's outputs renamed to the graph outputs by Identity nodes (``ScanOut``);
    - opset 21, IR version 10 (jax2onnx's defaults then).
    """
    rng = np.random.default_rng(SEED)
    wx = (rng.standard_normal((SCAN_IN, SCAN_HIDDEN)) / np.sqrt(SCAN_IN)).astype(np.float32)
    wh = (rng.standard_normal((SCAN_HIDDEN, SCAN_HIDDEN)) / np.sqrt(SCAN_HIDDEN)).astype(np.float32)
    b = (0.05 * rng.standard_normal(SCAN_HIDDEN)).astype(np.float32)
    f32 = TensorProto.FLOAT

    def rank_only(name, rank):
        return helper.make_tensor_value_info(name, f32, [None] * rank)

    body_in = [
        rank_only("scan_body_in_0", 2),
        rank_only("scan_body_in_1", 2),
        rank_only("scan_body_in_2", 1),
        rank_only("scan_body_in_3", 2),
        rank_only("scan_body_in_4", 2),
    ]  # Wx, Wh, b, h, x_t
    body_nodes = [
        helper.make_node("MatMul", ["scan_body_in_4", "scan_body_in_0"], ["dot_general_out_0"], name="dot_general_0"),
        helper.make_node("MatMul", ["scan_body_in_3", "scan_body_in_1"], ["dot_general_out_1"], name="dot_general_1"),
        helper.make_node("Add", ["dot_general_out_0", "dot_general_out_1"], ["add_out_0"], name="add_0"),
        helper.make_node("Add", ["add_out_0", "scan_body_in_2"], ["add_out_1"], name="add_1"),
        helper.make_node("Tanh", ["add_out_1"], ["tanh_out_0"], name="tanh_0"),
        *[
            helper.make_node(
                "Identity", [f"scan_body_in_{i}"], [f"const_out_{i}"], name=f"Identity_const_passthrough_{i}"
            )
            for i in range(3)
        ],
        helper.make_node("Identity", ["tanh_out_0"], ["tanh_out_0_dup"], name="Identity_dup_scan0"),
    ]
    body_out = [
        rank_only("const_out_0", 2),
        rank_only("const_out_1", 2),
        rank_only("const_out_2", 1),
        rank_only("tanh_out_0", 2),
        rank_only("tanh_out_0_dup", 2),
    ]
    body = helper.make_graph(body_nodes, "scan_body_0", body_in, body_out)
    nodes = [
        helper.make_node("Identity", ["xs"], ["xs_dyn"], name="ScanXSProxy_0"),
        helper.make_node(
            "Scan",
            ["const_0", "const_1", "const_2", "h0", "xs_dyn"],
            ["scan_const_raw_0", "scan_const_raw_1", "scan_const_raw_2", "scan_carry_raw_0", "scan_y_raw_0"],
            name="scan_0",
            body=body,
            num_scan_inputs=1,
            scan_input_axes=[0],
            scan_output_axes=[0],
        ),
        helper.make_node("Identity", ["scan_carry_raw_0"], ["h"], name="ScanOut_0"),
        helper.make_node("Identity", ["scan_y_raw_0"], ["ys"], name="ScanOut_1"),
    ]
    graph = helper.make_graph(
        nodes, "scan_rnn",
        [helper.make_tensor_value_info("h0", f32, ["B", SCAN_HIDDEN]), helper.make_tensor_value_info("xs", f32, ["T", "B", SCAN_IN])],
        [helper.make_tensor_value_info("h", f32, ["B", SCAN_HIDDEN]), helper.make_tensor_value_info("ys", f32, ["T", "B", SCAN_HIDDEN])],
        initializer=[numpy_helper.from_array(wx, "const_0"), numpy_helper.from_array(wh, "const_1"), numpy_helper.from_array(b, "const_2")],
        value_info=[rank_only("xs_dyn", 3), rank_only("scan_const_raw_0", 2), rank_only("scan_const_raw_1", 2), rank_only("scan_const_raw_2", 1),
                    rank_only("scan_carry_raw_0", 2), rank_only("scan_y_raw_0", 3)],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="jax2onnx", ir_version=10
    )
    h0 = rng.standard_normal((BATCH, SCAN_HIDDEN)).astype(np.float32)
    xs = rng.standard_normal((SCAN_STEPS, BATCH, SCAN_IN)).astype(np.float32)
    h, ys = h0, []
    for x in xs:  # the reference: the same cell in numpy
        h = np.tanh(x @ wx + h @ wh + b)
        ys.append(h)
    got = run_ort(model, {"h0": h0, "xs": xs})
    if not (np.allclose(got["h"], h, atol=1e-5) and np.allclose(got["ys"], np.stack(ys), atol=1e-5)):
        raise AssertionError("scan_jax_rnn: onnxruntime and the numpy cell differ")
    return Built(
        model,
        tool="onnx.helper, in the layout of jax2onnx 0.7.5's lax.scan plugin (to_onnx, opset 21)",
        dims={"B": BATCH, "T": SCAN_STEPS},
        feeds={"h0": h0, "xs": xs},
        notes=(
            f"RNN cell over the leading axis of xs [T, B, {SCAN_IN}]: h' = tanh(x_t Wx + h Wh + b), hidden {SCAN_HIDDEN}; "
            f"trip count T from xs's shape. Weights enter the body as loop-carried state (the scan's consts), not as "
            f"outer-scope names or body initializers. Body matrix FLOPs per trip: 2*B*{SCAN_IN}*{SCAN_HIDDEN} + 2*B*{SCAN_HIDDEN}*{SCAN_HIDDEN}."
        ),
    )


# --- all of them ------------------------------------------------------------------------------------


def jobs():
    """name -> a function returning Built, in writing order (a decoder family builds its four at once)."""
    out = {}
    for arch in ("gpt2", "llama", "whisper"):
        family = {}

        def get(arch=arch, family=family):
            if not family:
                family.update(decoder_family(arch))
            return family

        for key in ("model", "with_past_model", "model_merged", "model_merged_dup"):
            out[f"{arch}_decoder_{key}"] = lambda get=get, key=f"{arch}_decoder_{key}": get()[key]
    out["vad_sr_if"] = vad
    out["loop_scripted_gemm"] = loop_scripted
    out["scan_jax_rnn"] = scan_jax
    return out


def build_all(out_dir: str | Path, keep_data: bool = False, only: list[str] | None = None) -> list[dict]:
    """Write every model (or those named in ``only``) to ``out_dir``; return their manifest entries.
    Raises on the first failure: every model here is built by this file alone."""
    entries = []
    for name, make in jobs().items():
        if only and name not in only:
            continue
        began = time.perf_counter()
        with quiet():
            built = make()
        entries += build_entries({name: built}, out_dir, keep_data=keep_data, began=began)
    return entries


def build_entries(built: dict[str, Built], out_dir: str | Path, generator: str = GENERATOR, *, keep_data: bool = False,
                  strip_constants: bool = False, began: float | None = None) -> list[dict]:  # fmt: skip
    """Write each built model to ``out_dir`` (emit), saying its size and time; their manifest entries."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter() if began is None else began
    entries = []
    for name, one in built.items():
        entry = emit(name, one, out, keep_data, generator, strip_constants)
        warn = "  (over 300 kB)" if entry["bytes"] > MAX_BYTES else ""
        print(
            f"{name:36s} {entry['nodes']:4d} nodes ({entry['nodes_with_bodies']:4d} with bodies) {entry['bytes']:>8,} B "
            f"{time.perf_counter() - began:5.1f} s{warn}",
            flush=True,
        )
        entries.append(entry)
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.corpus.shipped_control_flow", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "shipped",
        help="output folder (tests/corpus/shipped)",
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the weights files (<name>.onnx.data)")
    parser.add_argument("--only", action="append", default=[], help="a model name (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(jobs()))
        return 0
    start = time.perf_counter()
    entries = build_all(args.out, args.keep_data, args.only or None)
    print(f"{len(entries)} written in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The onnxruntime and onnx tools of the corpus, applied to the torch exports of ``sources``.

Each function takes a source ONNX file (full weights) and returns the tool's output as a
ModelProto with its weights, exactly as the tool wrote it: session optimization
(``SessionOptions.optimized_model_filepath``), ``onnxruntime.transformers.optimizer``, the
quantizers, ``onnx.version_converter``. The graphs compute what their source computes, so their
independent FLOP count is the source's.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def session_optimized(path: Path, level: str, out: Path) -> onnx.ModelProto:
    """What onnxruntime writes to ``optimized_model_filepath`` at ``level`` on the CPU provider
    (``all`` adds the layout passes: NCHWc convolutions on x86)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = LEVELS[level]
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return onnx.load(out)


def transformers_optimized(path: Path, model_type: str, out: Path, fp16: bool = False, **options) -> onnx.ModelProto:
    """``onnxruntime.transformers.optimizer.optimize_model`` with its defaults for ``model_type``
    (``num_heads``/``hidden_size`` given), then, for ``fp16``, ``convert_float_to_float16(keep_io_types=True)``."""
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    model = optimize_model(str(path), model_type=model_type, **options)
    if fp16:
        model.convert_float_to_float16(keep_io_types=True)
    model.save_model_to_file(str(out))
    return onnx.load(out)


def quantized_dynamic(path: Path, out: Path) -> onnx.ModelProto:
    """``quantize_dynamic`` with int8 weights: MatMul -> DynamicQuantizeLinear + MatMulInteger, Conv -> ConvInteger."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(path), str(out), weight_type=QuantType.QInt8)
    return onnx.load(out)


WEIGHT_ONLY = {  # the matmul_nbits_quantizer configurations of the corpus: (config class, options)
    "nb4": ("DefaultWeightOnlyQuantConfig", {"block_size": 32, "is_symmetric": True, "accuracy_level": 4}),
    "nb8": ("DefaultWeightOnlyQuantConfig", {"block_size": 32, "is_symmetric": True, "bits": 8}),
    "hqq": ("HQQWeightOnlyQuantConfig", {"block_size": 64, "bits": 4}),
}


def quantized_weight_only(path: Path, out: Path, kind: str) -> onnx.ModelProto:
    """onnxruntime's MatMulNBits quantizer (``matmul_nbits_quantizer``) with a WEIGHT_ONLY config:
    every MatMul on a constant weight becomes a com.microsoft MatMulNBits."""
    from onnxruntime.quantization import matmul_nbits_quantizer as nbits

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(
        logging.WARNING
    )  # an INFO line per MatMul
    config, options = WEIGHT_ONLY[kind]
    quantizer = nbits.MatMulNBitsQuantizer(onnx.load(path), algo_config=getattr(nbits, config)(**options))
    quantizer.process()
    quantizer.model.save_model_to_file(str(out), False)
    return onnx.load(out)


class RandomReader:
    """A calibration data reader: ``count`` random feeds at the given shapes (token ids below ``vocab``,
    masks all ones, floats standard normal), seeded."""

    def __init__(
        self, inputs: dict[str, tuple[str, tuple[int, ...]]], count: int = 4, vocab: int = 1000, seed: int = 0
    ):
        rng = np.random.default_rng(seed)
        self.feeds = []
        for _ in range(count):
            feed = {}
            for name, (kind, shape) in inputs.items():
                if "mask" in name:
                    feed[name] = np.ones(shape, dtype=np.int64)
                elif kind == "int64":
                    feed[name] = rng.integers(0, vocab, shape, dtype=np.int64)
                else:
                    feed[name] = rng.standard_normal(shape).astype(np.float32)
            self.feeds.append(feed)
        self._next = iter(self.feeds)

    def get_next(self):
        return next(self._next, None)

    def rewind(self):
        self._next = iter(self.feeds)


def quantized_static_qdq(path: Path, out: Path, reader: RandomReader) -> onnx.ModelProto:
    """``quantize_static`` in QDQ format (QuantizeLinear/DequantizeLinear around float ops), calibrated
    with ``reader``, int8 weights and activations."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    quantize_static(
        str(path),
        str(out),
        reader,
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
    )
    return onnx.load(out)


def version_converted(path: Path, target: int) -> onnx.ModelProto:
    """``onnx.version_converter.convert_version`` of the file at ``path`` to opset ``target``."""
    from onnx import version_converter

    return version_converter.convert_version(onnx.load(path), target)

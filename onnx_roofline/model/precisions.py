"""The precisions `--dtype` offers, by name, and the element type each costs tensors in: a
module of its own, without onnx, so that building the command line imports nothing heavy."""

PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8e4m3fn", "int8": "int8"}

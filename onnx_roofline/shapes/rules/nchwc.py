"""Output shapes for onnxruntime's NCHWc ops (domain com.microsoft.nchwc), which its CPU graph
optimizer writes at ORT_ENABLE_ALL (NchwcTransformer) and ONNX's inference has no schema for.

An NCHWc tensor keeps its logical shape [N, C, spatial…], C padded up to a multiple of MLAS's
channel block (its memory is [N, C/block, spatial…, block]). Shapes follow the inference
functions of onnxruntime/core/graph/contrib_ops/nchwc_schema_defs.cc; Y is in X's dtype (float).

The block is the one onnxruntime uses on this machine (MlasNchwcGetBlockSize: 8 on x86-64, 16 with
AVX-512F, NEON's on arm64): such a graph is machine-specific, as onnxruntime warns when it writes
it. It matters only where a ReorderInput pads (C not a multiple of every block); then it is read
once, from the CPU's flags on Linux x86-64 (as MLAS picks it)."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

from onnx_roofline.model.op_node import KnownNode
from onnx_roofline.shapes.rules.arithmetic import conv, window
from onnx_roofline.shapes.rules.registry import Output, shape_function

NCHWC = "com.microsoft.nchwc"
LARGEST_BLOCK = 16  # the widest MLAS block: channels it divides are padded by none


@functools.cache
def block_size() -> int:
    """MLAS's NCHWc channel block on this machine: 16 where the CPU has AVX-512F, else 8, on Linux
    x86-64 (/proc/cpuinfo's flags, as the kernel enables them). Elsewhere it is not known without
    running onnxruntime, which the analysis does not: a ValueError, and the node is the root cause."""
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        try:
            return 16 if "avx512f" in Path("/proc/cpuinfo").read_text().split() else 8
        except OSError:
            pass
    raise ValueError(
        "the NCHWc channel block of this machine is unknown: a ReorderInput that pads is typed on Linux x86-64 only"
    )


def padded(channels: int) -> int:
    """C rounded up to the block: ⌈C / block⌉·block (C itself when every block divides it)."""
    if channels % LARGEST_BLOCK == 0:
        return channels
    block = block_size()
    return -(-channels // block) * block


@shape_function("ReorderInput", domain=NCHWC)
def reorder_input(node: KnownNode) -> list[Output]:
    """NCHW (or, channels_last, NHWC) → NCHWc: [N, padded(C), spatial…]."""
    x = node.operand(0)
    if x.rank < 2:
        raise ValueError("ReorderInput needs N and C")
    last = bool(node.attrs.get("channels_last", 0))
    channels, spatial = (x.shape[-1], x.shape[1:-1]) if last else (x.shape[1], x.shape[2:])
    return [((x.shape[0], padded(channels), *spatial), x.dtype)]


@shape_function("ReorderOutput", domain=NCHWC)
def reorder_output(node: KnownNode) -> list[Output]:
    """NCHWc → NCHW [N, channels, spatial…] (or, channels_last, NHWC [N, spatial…, channels]),
    dropping the padding: `channels` is the real count."""
    x, channels = node.operand(0), node.attrs.get("channels", 0)
    if x.rank < 2 or channels <= 0:
        raise ValueError(f"ReorderOutput needs N, C and a positive `channels`, got {x.shape} and {channels}")
    if node.attrs.get("channels_last", 0):
        return [((x.shape[0], *x.shape[2:], channels), x.dtype)]
    return [((x.shape[0], channels, *x.shape[2:]), x.dtype)]


@shape_function("Conv", domain=NCHWC)
def nchwc_conv(node: KnownNode) -> list[Output]:
    """Conv's [N, M, spatial…] from X [N, C, spatial…] and the reordered filter W [M, C/group,
    k…] (M and C padded); the fused activation and the Sum input keep it."""
    x, w = node.operand(0), node.operand(1)
    return [(conv(node, x.shape, w.shape, channels_last=False), x.dtype)]


@shape_function("MaxPool", "AveragePool", domain=NCHWC)
def nchwc_pool(node: KnownNode) -> list[Output]:
    """[N, C, out…]: the window arithmetic of kernel_shape, strides, dilations, pads / auto_pad and
    ceil_mode over the spatial dims."""
    x = node.operand(0)
    return [((*x.shape[:2], *window(node, x.shape[2:], node.attrs["kernel_shape"], dilation=True)), x.dtype)]


@shape_function("GlobalMaxPool", "GlobalAveragePool", domain=NCHWC)
def nchwc_global_pool(node: KnownNode) -> list[Output]:
    """[N, C, 1, …]: every spatial dim pooled to 1."""
    x = node.operand(0)
    return [((*x.shape[:2], *(1,) * (x.rank - 2)), x.dtype)]


@shape_function("Upsample", domain=NCHWC)
def nchwc_upsample(node: KnownNode) -> list[Output]:
    """Each dim times its integer scale: [d·s for d, s in zip(X, scales)]."""
    x, scales = node.operand(0), node.attrs.get("scales")
    if not scales or len(scales) != x.rank or min(scales) <= 0:
        raise ValueError(f"Upsample needs one positive integer scale per dim of {x.shape}, got {scales}")
    return [(tuple(d * s for d, s in zip(x.shape, scales, strict=False)), x.dtype)]

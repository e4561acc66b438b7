"""Measure this machine's attainable peak and memory bandwidth in onnxruntime, the way verify's
timing measures nodes (profiler kernel time, warm-up runs dropped), and write a spec file `--hw`
accepts. The best run is kept, not the median: a roofline bound must stay below every time the
machine can achieve, so the peak is the highest rate observed (the median is recorded too).

Peak: square MatMuls of several sizes (256 up to `matmul_size`: small ones stay in cache, large ones
amortize the packing; which wins depends on the machine) per dtype onnxruntime's CPU provider
computes natively (a dtype for which it inserts casts to float32 is skipped). Bandwidth: an Add of arrays much larger than the last-level
cache, counted as the cost rules count an Add (two inputs read, one output written)."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnx_roofline.commands.verify.errors import VerifyError
from onnx_roofline.commands.verify.run import open_session, session_options

MATMUL_DTYPES = {"fp32": TensorProto.FLOAT, "fp64": TensorProto.DOUBLE, "fp16": TensorProto.FLOAT16}
DEFAULT_MATMUL_SIZE = 2048
DEFAULT_STREAM_BYTES = 512 * 2**20  # per array; the spec notes say how this compares with the LLC


@dataclass(frozen=True)
class Measurement:
    what: str  # human description of the kernel
    rate: float  # best: FLOP/s or B/s
    median: float
    runs: int
    warmup: int


@dataclass(frozen=True)
class Calibration:
    peaks: dict[str, Measurement]  # dtype class → matmul rate (vector unit: a CPU has no matrix engine)
    bandwidth: Measurement
    skipped: dict[str, str]  # dtype class → why it was not measured
    threads: int | None

    def spec_toml(self, name: str) -> str:
        import onnxruntime as ort

        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        method = (
            f"onnxruntime {ort.__version__} CPUExecutionProvider, "
            f"{self.threads or 'default'} intra-op threads, profiler kernel time"
        )
        notes = (
            f"Measured on {platform.node()} ({_cpu_name()}, {os.cpu_count()} logical CPUs, "
            f"last-level cache {_llc_text()}) at {when}. Peaks are attainable MatMul rates, not "
            "datasheet figures; they sit under `vector` because a CPU has no matrix engine. "
            + "; ".join(
                f"{k}: best {_si(m.rate)}, median {_si(m.median)} over {m.runs} runs"
                for k, m in [*self.peaks.items(), ("bandwidth", self.bandwidth)]
            )
            + (". Not measured: " + "; ".join(f"{k} ({v})" for k, v in self.skipped.items()) if self.skipped else "")
        )
        lines = [
            "# Written by `onnx-roofline calibrate`: measured, not taken from a datasheet.",
            f"name = {_quote(name)}",
            f"memory_bandwidth = {self.bandwidth.rate:.6e}  # B/s",
            f"source = {_quote('measured by onnx-roofline calibrate: ' + method + ', best of runs after warm-up')}",
            f"notes = {_quote(notes)}",
            "",
            "[peaks.vector]  # FLOP/s",
            *(f"{dtype} = {m.rate:.6e}" for dtype, m in self.peaks.items()),
            "",
            "[sources]",
            f"memory_bandwidth = {_quote(_describe(self.bandwidth))}",
            *(f'"vector.{dtype}" = {_quote(_describe(m))}' for dtype, m in self.peaks.items()),
            "",
        ]
        return "\n".join(lines)


def calibrate(
    runs: int = 5,
    warmup: int = 2,
    matmul_size: int = DEFAULT_MATMUL_SIZE,
    stream_bytes: int = DEFAULT_STREAM_BYTES,
    threads: int | None = None,
) -> Calibration:
    peaks, skipped = {}, {}
    for dtype, elem in MATMUL_DTYPES.items():
        try:
            peaks[dtype] = max(
                (_matmul(elem, n, runs, warmup, threads) for n in matmul_sizes(matmul_size)), key=lambda m: m.rate
            )
        except _NotNative as exc:
            skipped[dtype] = str(exc)
    if "fp32" not in peaks:
        raise VerifyError(f"onnxruntime did not run a float32 MatMul: {skipped.get('fp32')}")
    return Calibration(peaks, _stream(stream_bytes, runs, warmup, threads), skipped, threads)


def matmul_sizes(largest: int) -> list[int]:
    """256, 512, ... up to `largest` (and `largest` itself)."""
    sizes, n = [], 256
    while n < largest:
        sizes.append(n)
        n *= 2
    return [*sizes, largest]


class _NotNative(Exception):
    pass


def _matmul(elem: int, n: int, runs: int, warmup: int, threads: int | None) -> Measurement:
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    x = helper.make_tensor_value_info("a", elem, [n, n])
    y = helper.make_tensor_value_info("b", elem, [n, n])
    z = helper.make_tensor_value_info("c", elem, [n, n])
    model = _model([helper.make_node("MatMul", ["a", "b"], ["c"], name="kernel")], [x, y], [z])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((n, n)).astype(dtype), "b": rng.standard_normal((n, n)).astype(dtype)}
    try:
        times = _kernel_seconds(model, feeds, runs, warmup, threads)
    except _NotNative:
        raise
    except Exception as exc:  # onnxruntime has no kernel for this dtype
        raise _NotNative(f"no CPU MatMul kernel: {str(exc).splitlines()[0][:120]}") from None
    flops = 2 * n**3
    return Measurement(
        f"MatMul [{n}x{n}]x[{n}x{n}] {np.dtype(dtype).name}, 2·n³ = {flops:.4g} FLOP",
        flops / min(times),
        flops / statistics.median(times),
        runs,
        warmup,
    )


def _stream(nbytes: int, runs: int, warmup: int, threads: int | None) -> Measurement:
    n = max(nbytes // 4, 1)
    values = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [n]) for name in "abc"]
    model = _model([helper.make_node("Add", ["a", "b"], ["c"], name="kernel")], values[:2], values[2:])
    feeds = {"a": np.ones(n, dtype=np.float32), "b": np.ones(n, dtype=np.float32)}
    times = _kernel_seconds(model, feeds, runs, warmup, threads)
    moved = 3 * 4 * n
    return Measurement(
        f"Add of float32 [{n}] arrays ({4 * n / 2**20:.0f} MiB each), 2 reads + 1 write = {moved:.4g} B",
        moved / min(times),
        moved / statistics.median(times),
        runs,
        warmup,
    )


CACHE_PROBE_BYTES = (256 * 2**10, 2**20, 4 * 2**20, 16 * 2**20)  # per array: inside L2 up to inside a large L3


def cache_bandwidth(runs: int = 10, warmup: int = 3, threads: int | None = None) -> Measurement:
    """The fastest Add rate with arrays that stay in cache: how fast a node whose working set fits
    the cache can move its bytes, the floor verify's timing check allows it."""
    llc = last_level_cache_bytes()
    sizes = [size for size in CACHE_PROBE_BYTES if llc is None or 3 * size <= llc // 2] or [CACHE_PROBE_BYTES[0]]
    return max((_stream(size, runs, warmup, threads) for size in sizes), key=lambda m: m.rate)


def _model(nodes, inputs, outputs) -> onnx.ModelProto:
    return helper.make_model(
        helper.make_graph(nodes, "calibrate", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )


def _kernel_seconds(model: onnx.ModelProto, feeds, runs: int, warmup: int, threads: int | None) -> list[float]:
    """The kernel's profiled time in each measured run; a dtype that needs inserted casts is not native."""
    import json

    from onnx_roofline.commands.verify.timing import _kernel_times

    with tempfile.TemporaryDirectory(prefix="onnx-roofline-calibrate-") as folder:
        options = session_options(optimize=False, threads=threads)
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "profile")
        session = open_session(model, options)
        for _ in range(warmup + runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as stream:
            per_run = _kernel_times(json.load(stream))[warmup:]
    if any(name != "kernel" for run in per_run for name in run):
        raise _NotNative("onnxruntime inserts casts to float32 (no native kernel)")
    return [max(run["kernel"], 1e-6) for run in per_run]


def _describe(m: Measurement) -> str:
    return f"{m.what}: best of {m.runs} runs after {m.warmup} warm-up (median {_si(m.median)})"


def _si(value: float) -> str:
    from onnx_roofline.report.units import si

    return si(value, "/s")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def last_level_cache_bytes() -> int | None:
    """Size of the largest cache Linux reports for cpu0 (None elsewhere)."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def _llc_text() -> str:
    size = last_level_cache_bytes()
    return "unknown" if size is None else f"{size / 2**20:.0f} MiB"

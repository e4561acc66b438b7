"""Hardware specs: per-unit, per-dtype dense peaks and memory bandwidth, each figure with its source.

The built-in entries live in `specs.toml` beside this module; a user can pass a TOML or JSON file of
the same shape instead (see docs/hardware.md). Units are decimal: FLOP/s (OP/s for integers), B/s.

Two compute units: `matrix` (tensor cores, AMX: MatMul, Gemm, Conv, attention) and `vector` (CUDA
cores, SIMD: everything else). Peaks are dense, never the 2:4-sparsity figure.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeGuard

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from onnx_roofline.costs.capacity import DEFAULT_MEMORY_UTILIZATION, MemoryBudget, checked_utilization
from onnx_roofline.costs.hardware.achievable import Achievable, parse_achievable
from onnx_roofline.costs.hardware.interconnect import Interconnect, parse_interconnect
from onnx_roofline.errors import HardwareSpecError
from onnx_roofline.model import files

__all__ = [
    "DTYPE_CLASSES",
    "MATRIX",
    "UNITS",
    "VECTOR",
    "Hardware",
    "dtype_class",
    "list_hardware",
    "load_hardware",
]

MATRIX = "matrix"
VECTOR = "vector"
UNITS = (MATRIX, VECTOR)

DTYPE_CLASSES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")
"""The peak classes a spec may list. `tf32` has no ONNX dtype: fp32 matmuls run at it under
`--fp32-matmul tf32` (Hardware.with_fp32_matmul); by default they run in IEEE fp32 at `matrix.fp32`,
which NVIDIA entries set to the FP32 CUDA-core rate."""

FALLBACK_DTYPE = "fp32"
"""Integer, bool and unknown-dtype work, and any dtype a unit lacks, is costed at the vector fp32 rate."""

_ENTRY_FIELDS = ("name", "source", "memory_bandwidth", "memory_capacity", "special_function_rate", "launch_overhead",
                 "peaks", "sources", "notes", "aliases", "interconnect", "achievable")  # fmt: skip
_SCALAR_FIGURES = ("memory_bandwidth", "memory_capacity", "special_function_rate", "launch_overhead")
FP32_MATMUL = ("ieee", "tf32")
"""How fp32 matmuls run: `ieee` (the default: full fp32, cuBLAS's and PyTorch's default, at the
`matrix.fp32` rate) or `tf32` (TF32 tensor cores, opted into: the `matrix.tf32` rate)."""

# Our dtype names (onnx_roofline.model.tensors: lower-cased TensorProto names) -> peak class.
_DTYPE_TO_CLASS: dict[str, str] = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8e4m3fn": "fp8",
    "float8e4m3fnuz": "fp8",
    "float8e5m2": "fp8",
    "float8e5m2fnuz": "fp8",
    "float8e8m0": "fp8",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int4",
    "uint4": "int4",
    "float4e2m1": "fp4",
}


def dtype_class(onnx_dtype: str | None) -> str | None:
    """The peak class a tensor dtype computes in, or None when no peak class fits.

    `float32`→fp32, `float16`→fp16, `bfloat16`→bf16, `float64`→fp64, every float8 variant
    (`float8e4m3fn`, `float8e4m3fnuz`, `float8e5m2`, `float8e5m2fnuz`, `float8e8m0`)→fp8,
    `int8`/`uint8`→int8, `int4`/`uint4`→int4, `float4e2m1`→fp4. Everything else (int16/32/64, bool,
    string, complex, int2…) is None, which `Hardware.peak` costs at the vector fp32 rate.
    Case-insensitive; a `TensorProto.` prefix and a class name itself (`"bf16"`) are accepted.
    """
    if onnx_dtype is None:
        return None
    name = str(onnx_dtype).strip().lower()
    if name.startswith("tensorproto."):
        name = name[len("tensorproto.") :]
    name = name.replace("_", "")
    if name in DTYPE_CLASSES:
        return name
    return _DTYPE_TO_CLASS.get(name)


def _freeze_peaks(peaks: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
    return MappingProxyType({unit: MappingProxyType(dict(table)) for unit, table in peaks.items()})


@dataclass(frozen=True)
class Hardware:
    """One accelerator: memory bandwidth (B/s) and dense peaks (FLOP/s) per unit and dtype class."""

    key: str
    name: str
    memory_bandwidth: float
    peaks: Mapping[str, Mapping[str, float]] = field(hash=False)
    source: str
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    """Per-figure sources where they differ from `source`: keys `memory_bandwidth`, `<unit>`,
    `<unit>.<dtype>`."""
    notes: str = field(default="", compare=False)
    aliases: tuple[str, ...] = field(default=(), compare=False)
    memory_capacity: float | None = None
    """Bytes of device memory (decimal, as the datasheet prints it: 80 GB = 80e9); None where a
    spec file does not say, and then whether a model fits is not judged."""
    special_function_rate: float | None = None
    """Transcendentals per second on the special-function units (exp, log, rsqrt, sin, …: NVIDIA's
    SFU, 16 results per clock per SM); None: transcendentals do not enter the time."""
    launch_overhead: float | None = None
    """Seconds per kernel launch: the floor an eagerly launched stream of kernels cannot go below
    per kernel; None: no floor is reported."""
    fp32_matmul: str = "ieee"  # FP32_MATMUL: how this instance costs fp32 matmuls (with_fp32_matmul)
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    """The fraction of `memory_capacity` a model may hold, the rest the runtime's workspace
    (costs/capacity.py; with_memory_utilization, `--memory-utilization`)."""
    interconnect: Interconnect | None = field(default=None, compare=False)
    """The link between devices of one node (NVLink, PCIe): what tensor-parallel collectives cost;
    None: no tensor parallelism is costed on it."""
    achievable: Achievable | None = field(default=None, compare=False)
    """What real kernels reach (fractions of peak, SMs and GEMM tile, kernel floor, graph launch):
    what the predicted time rests on; None: predicted = bound (costs/prediction.py)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "peaks", _freeze_peaks(self.peaks))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "aliases", tuple(self.aliases))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its fields, the read-only mappings as dicts (a mappingproxy does not pickle):
        a report crosses a process boundary, and `__post_init__` freezes them again."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(peaks={unit: dict(table) for unit, table in self.peaks.items()}, sources=dict(self.sources))
        return _hardware, (fields,)

    def peak(self, unit: str, dtype_class: str | None) -> tuple[float, str, str]:
        """(FLOP/s, unit actually used, dtype class actually used) for work of `dtype_class` on `unit`.

        Fallback, in order:
          1. the exact (unit, dtype) peak;
          2. on the matrix unit, a dtype the matrix unit lacks runs on the vector unit with that
             dtype (e.g. fp64 matmul on L4, or any matmul on a CPU without a matrix engine);
          3. the vector fp32 peak. Integer, bool and unknown-dtype work (`dtype_class` None, or
             a class the hardware lists on neither unit) is costed at the vector fp32 rate.
        `dtype_class` may also be one of our dtype names (`"float16"`); it is mapped by `dtype_class()`.
        """
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r}: expected one of {', '.join(UNITS)}")
        cls = _as_class(dtype_class)
        if cls is not None:
            table = self.peaks.get(unit, {})
            if cls in table:
                return table[cls], unit, cls
            if unit == MATRIX and cls in self.peaks.get(VECTOR, {}):
                return self.peaks[VECTOR][cls], VECTOR, cls
        return self.peaks[VECTOR][FALLBACK_DTYPE], VECTOR, FALLBACK_DTYPE

    def with_fp32_matmul(self, mode: str) -> Hardware:
        """This hardware with fp32 matmuls costed as `mode` says: `tf32` puts the `matrix.tf32`
        peak under `matrix.fp32` (where the hardware has one); `ieee` is the spec as written."""
        if mode not in FP32_MATMUL:
            raise ValueError(f"fp32_matmul must be one of {', '.join(FP32_MATMUL)}, got {mode!r}")
        if mode == self.fp32_matmul:
            return self
        matrix = dict(self.peaks.get(MATRIX, {}))
        if mode == "tf32" and "tf32" in matrix:
            matrix["fp32"] = matrix["tf32"]
        peaks = {**{unit: dict(table) for unit, table in self.peaks.items()}, MATRIX: matrix}
        sources = dict(self.sources)
        if mode == "tf32" and "tf32" in matrix:
            sources["matrix.fp32"] = (
                f"--fp32-matmul tf32: the TF32 tensor-core peak ({self.figure_source(MATRIX, 'tf32')})"
            )
        return dataclasses.replace(self, peaks=peaks, sources=sources, fp32_matmul=mode)

    def with_memory_utilization(self, fraction: float) -> Hardware:
        """This hardware with `fraction` of its memory usable by the model (a ValueError outside (0, 1])."""
        return dataclasses.replace(self, memory_utilization=checked_utilization(fraction))

    @property
    def memory_budget(self) -> MemoryBudget:
        """What "fits" is judged against: the capacity × the memory utilization (costs/capacity.py)."""
        return MemoryBudget(self.memory_capacity, self.memory_utilization)

    def ridge(self, unit: str, dtype_class: str | None) -> float:
        """FLOP/byte where the compute ceiling meets the memory diagonal: peak / memory_bandwidth,
        with the same fallback as `peak`."""
        return self.peak(unit, dtype_class)[0] / self.memory_bandwidth

    def figure_source(self, unit: str | None = None, dtype_class: str | None = None) -> str:
        """The source of one figure: `figure_source()` or `figure_source("memory_bandwidth")` for the
        bandwidth, `figure_source(unit, dtype)` for a peak; the most specific entry of `sources`,
        else `source`."""
        if unit is None or unit == "memory_bandwidth":
            return self.sources.get("memory_bandwidth", self.source)
        if unit in _SCALAR_FIGURES:
            return self.sources.get(unit, self.source)
        if dtype_class is not None and f"{unit}.{dtype_class}" in self.sources:
            return self.sources[f"{unit}.{dtype_class}"]
        return self.sources.get(unit, self.source)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-report form: {"name", "key", "memory_bandwidth", "peaks", "source"}."""
        return {
            "name": self.name,
            "key": self.key,
            "memory_bandwidth": self.memory_bandwidth,
            "peaks": {unit: dict(table) for unit, table in self.peaks.items()},
            "source": self.source,
            "memory_capacity": self.memory_capacity,
            "memory_utilization": self.memory_utilization,
            "special_function_rate": self.special_function_rate,
            "launch_overhead": self.launch_overhead,
            "fp32_matmul": self.fp32_matmul,
            "interconnect": None if self.interconnect is None else self.interconnect.to_dict(),
            "achievable": None if self.achievable is None else self.achievable.to_dict(),
        }


def _hardware(fields: dict[str, Any]) -> Hardware:
    """A pickled Hardware, rebuilt from its fields (Hardware.__reduce__)."""
    return Hardware(**fields)


def _as_class(dtype: str | None) -> str | None:
    if dtype is None:
        return None
    return dtype if dtype in DTYPE_CLASSES else dtype_class(dtype)


# --- loading and validation -------------------------------------------------------------------


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


MIN_RATE, MAX_RATE = 1e3, 1e21
"""Peaks and bandwidths outside these (a microcontroller's kFLOP/s, a thousand times the largest
accelerator) are unit slips or hostile (5e-324 makes every time infinite): refused."""


def _positive(value: object, where: str, origin: str, what: str) -> float:
    if not _is_number(value) or not math.isfinite(value) or not MIN_RATE <= value <= MAX_RATE:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise HardwareSpecError(
            f"hardware spec {origin}: `{where}` must be a positive number ({what}) between 1e3 and 1e21, got {shown}"
        )
    return float(value)


def _seconds(value: object, where: str, origin: str) -> float:
    """A duration in seconds: positive, at most one second (a launch overhead is microseconds)."""
    if not _is_number(value) or not math.isfinite(value) or not 0 < value <= 1:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise HardwareSpecError(
            f"hardware spec {origin}: `{where}` must be a positive number of seconds (at most 1), got {shown}"
        )
    return float(value)


def _entry_from_mapping(data: object, key: str, origin: str, default_source: str | None) -> Hardware:
    """Validate one spec entry (a table) and build its Hardware; every problem is a one-line
    HardwareSpecError naming the key path."""
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"hardware spec {origin}: an entry must be a table, got {type(data).__name__}")
    unknown = [name for name in data if name not in _ENTRY_FIELDS]
    if unknown:
        raise HardwareSpecError(
            f"hardware spec {origin}: unknown field `{unknown[0]}` (expected: {', '.join(_ENTRY_FIELDS)})"
        )
    if "memory_bandwidth" not in data:
        raise HardwareSpecError(f"hardware spec {origin}: missing key `memory_bandwidth` (B/s)")
    bandwidth = _positive(data["memory_bandwidth"], "memory_bandwidth", origin, "B/s")
    capacity = (
        _positive(data["memory_capacity"], "memory_capacity", origin, "bytes") if "memory_capacity" in data else None
    )
    sfu = (
        _positive(data["special_function_rate"], "special_function_rate", origin, "transcendentals/s")
        if "special_function_rate" in data
        else None
    )
    launch = _seconds(data["launch_overhead"], "launch_overhead", origin) if "launch_overhead" in data else None

    name = data.get("name", key)
    if not isinstance(name, str) or not name.strip():
        raise HardwareSpecError(f"hardware spec {origin}: `name` must be a non-empty string")
    source = data.get("source", default_source)
    if source is None:
        raise HardwareSpecError(f"hardware spec {origin}: missing key `source` (cite the datasheet)")
    if not isinstance(source, str) or not source.strip():
        raise HardwareSpecError(f"hardware spec {origin}: `source` must be a non-empty string")
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        raise HardwareSpecError(f"hardware spec {origin}: `notes` must be a string")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise HardwareSpecError(f"hardware spec {origin}: `aliases` must be a list of strings")

    raw_peaks = data.get("peaks")
    if raw_peaks is None:
        raise HardwareSpecError(
            f"hardware spec {origin}: no peaks: add a `peaks.vector` table with at least `fp32` (FLOP/s)"
        )
    if not isinstance(raw_peaks, Mapping):
        raise HardwareSpecError(f"hardware spec {origin}: `peaks` must be a table of units")
    peaks: dict[str, dict[str, float]] = {}
    for unit, table in raw_peaks.items():
        if unit not in UNITS:
            raise HardwareSpecError(
                f"hardware spec {origin}: unknown unit `peaks.{unit}` (expected {' or '.join(UNITS)})"
            )
        if not isinstance(table, Mapping):
            raise HardwareSpecError(f"hardware spec {origin}: `peaks.{unit}` must be a table of dtype = FLOP/s")
        peaks[unit] = {}
        for cls, value in table.items():
            if cls not in DTYPE_CLASSES:
                raise HardwareSpecError(
                    f"hardware spec {origin}: unknown dtype class `peaks.{unit}.{cls}` "
                    f"(expected one of {', '.join(DTYPE_CLASSES)})"
                )
            peaks[unit][cls] = _positive(value, f"peaks.{unit}.{cls}", origin, "FLOP/s")
    if not any(peaks.values()):
        raise HardwareSpecError(
            f"hardware spec {origin}: no peaks: add a `peaks.vector` table with at least `fp32` (FLOP/s)"
        )
    if FALLBACK_DTYPE not in peaks.get(VECTOR, {}):
        raise HardwareSpecError(
            f"hardware spec {origin}: missing `peaks.vector.fp32`: the vector fp32 peak is required "
            "(it is the fallback rate for dtypes a unit lacks)"
        )

    raw_sources = data.get("sources", {})
    if not isinstance(raw_sources, Mapping):
        raise HardwareSpecError(f"hardware spec {origin}: `sources` must be a table of figure = source")
    sources: dict[str, str] = {}
    for figure, text in raw_sources.items():
        unit, _, cls = figure.partition(".")
        known = figure in _SCALAR_FIGURES or (unit in peaks and (not cls or cls in peaks[unit]))
        if not known:
            raise HardwareSpecError(
                f"hardware spec {origin}: `sources.{figure}` names no figure of this entry "
                "(use memory_bandwidth, memory_capacity, special_function_rate, launch_overhead, <unit> or <unit>.<dtype>)"
            )
        if not isinstance(text, str) or not text.strip():
            raise HardwareSpecError(f"hardware spec {origin}: `sources.{figure}` must be a non-empty string")
        sources[figure] = text

    return Hardware(
        key=key,
        name=name,
        memory_bandwidth=bandwidth,
        peaks=peaks,
        source=source,
        sources=sources,
        notes=notes,
        aliases=tuple(aliases),
        memory_capacity=capacity,
        special_function_rate=sfu,
        launch_overhead=launch,
        interconnect=parse_interconnect(data["interconnect"], origin) if "interconnect" in data else None,
        achievable=parse_achievable(data["achievable"], origin) if "achievable" in data else None,
    )


@lru_cache(maxsize=1)
def _builtins() -> tuple[Hardware, ...]:
    text = resources.files(__name__).joinpath("specs.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    return tuple(
        _entry_from_mapping(entry, key, f"built-in `{key}`", default_source=None) for key, entry in data.items()
    )


def _builtin_index() -> dict[str, Hardware]:
    index: dict[str, Hardware] = {}
    for hw in _builtins():
        index[hw.key.lower()] = hw
        for alias in hw.aliases:
            index.setdefault(alias.lower(), hw)
    return index


def list_hardware() -> list[Hardware]:
    """The built-in entries, in the order of specs.toml."""
    return list(_builtins())


def _parse_file(path: Path) -> Mapping[str, Any]:
    """A spec file (TOML, or JSON by its suffix or its first character), read through `files`:
    a regular file, size-capped, nested a few levels at most."""
    raw = files.read_bytes(path, "hardware spec file", files.MAX_TEXT_BYTES, HardwareSpecError)
    suffix = path.suffix.lower()
    as_json = suffix == ".json" or (suffix != ".toml" and raw.lstrip()[:1] == b"{")
    data = files.parse_text(raw, path, "hardware spec file", HardwareSpecError, "JSON" if as_json else "TOML")
    if not isinstance(data, dict):
        raise HardwareSpecError(f"hardware spec file {path}: the top level must be an object/table")
    return data


def _load_file(path: Path, key: str | None) -> Hardware:
    data = _parse_file(path)
    if not data:
        raise HardwareSpecError(f"hardware spec file {path}: empty, no hardware spec in it")
    default_source = f"user spec file {path}"
    # One entry at the top level (has the entry's own fields), or one table per entry.
    if any(name in data for name in ("memory_bandwidth", "peaks", "name", "source")):
        if (
            key is not None and key.lower() != path.stem.lower()
        ):  # one entry, keyed by the file's stem: no other NAME is in it
            raise HardwareSpecError(f"hardware spec file {path}: no entry `{key}` (it holds one spec, `{path.stem}`)")
        return _entry_from_mapping(data, path.stem, f"{path}", default_source)
    tables = {name: value for name, value in data.items() if isinstance(value, Mapping)}
    if len(tables) != len(data):
        stray = next(name for name in data if name not in tables)
        raise HardwareSpecError(
            f"hardware spec file {path}: unknown field `{stray}` (expected memory_bandwidth, peaks, ... "
            "or one table per hardware entry)"
        )
    if key is None:
        if len(tables) > 1:
            raise HardwareSpecError(
                f"hardware spec file {path}: holds several specs ({', '.join(tables)}); pick one with {path}:KEY"
            )
        key = next(iter(tables))
    else:
        matches = [name for name in tables if name.lower() == key.lower()]
        if not matches:
            raise HardwareSpecError(f"hardware spec file {path}: no entry `{key}` (entries: {', '.join(tables)})")
        key = matches[0]
    return _entry_from_mapping(tables[key], key, f"{path}:{key}", default_source)


def load_hardware(name_or_path: str | os.PathLike[str]) -> Hardware:
    """A built-in entry by key or alias (case-insensitive), or a user spec file.

    A file is TOML or JSON holding one entry (fields at the top level; its key is the file's stem)
    or several tables, one per entry: pick one with `path.toml:key` (needed when there are several).
    Raises HardwareSpecError with a one-line message for an unknown name (listing the known keys),
    a missing or unparseable file, and any malformed entry (naming the offending key path).
    """
    if isinstance(name_or_path, os.PathLike):
        return _load_file(Path(name_or_path), None)
    text = str(name_or_path).strip()
    if not text:
        raise HardwareSpecError(f"hardware name is empty; known: {', '.join(hw.key for hw in _builtins())}")
    builtin = _builtin_index().get(text.lower())
    if builtin is not None:
        return builtin

    if "\0" in text:
        raise HardwareSpecError(f"hardware spec path contains a null byte: {text!r}")
    path, key = Path(text), None
    if not path.exists() and ":" in text:
        head, _, tail = text.rpartition(":")
        if head and tail and (Path(head).exists() or Path(head).suffix.lower() in (".toml", ".json")):
            path, key = Path(head), tail
    if path.exists():
        if path.is_dir():
            raise HardwareSpecError(f"hardware spec file {path}: is a directory, not a TOML/JSON file")
        return _load_file(path, key)  # a FIFO or device is refused there, by name, before it is opened
    looks_like_path = path.suffix.lower() in (".toml", ".json") or any(sep in text for sep in ("/", "\\"))
    if looks_like_path:
        raise HardwareSpecError(f"hardware spec file not found: {path}")
    keys = [hw.key for hw in _builtins()]
    import difflib

    close = difflib.get_close_matches(text.lower(), keys, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`? " if close else ""
    raise HardwareSpecError(
        f"unknown hardware `{text}`; {hint}known: {', '.join(keys)} (or pass a path to a TOML/JSON spec file)"
    )

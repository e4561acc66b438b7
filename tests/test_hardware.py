"""Hardware specs: the built-in figures, the peak fallback rules, and user spec files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from onnx_roofline.costs.hardware import (
    DTYPE_CLASSES,
    Hardware,
    dtype_class,
    list_hardware,
    load_hardware,
)
from onnx_roofline.errors import HardwareSpecError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "hardware.md"


# --- the lesson's numbers -----------------------------------------------------------------------


def test_h100_ridge_bf16_fp16_matrix():
    h100 = load_hardware("h100")
    for dtype in ("bf16", "fp16"):
        ridge = h100.ridge("matrix", dtype)
        assert ridge == 989.4e12 / 3.35e12  # dense tensor-core peak / HBM3 bandwidth
        assert ridge == pytest.approx(295, abs=1)
        assert ridge == pytest.approx(295.34, abs=0.01)


def test_h100_figures():
    h100 = load_hardware("h100")
    assert h100.memory_bandwidth == 3.35e12
    assert h100.peak("matrix", "bf16") == (989.4e12, "matrix", "bf16")
    assert h100.peak("matrix", "tf32") == (494.7e12, "matrix", "tf32")
    # fp32 matmuls run in IEEE fp32 on the FP32 CUDA cores (cuBLAS's default); TF32 only when asked
    assert h100.peak("matrix", "fp32") == (66.9e12, "matrix", "fp32")
    assert h100.with_fp32_matmul("tf32").peak("matrix", "fp32") == (494.7e12, "matrix", "fp32")
    assert h100.peak("matrix", "fp8") == (1978.9e12, "matrix", "fp8")
    assert h100.peak("matrix", "int8") == (1978.9e12, "matrix", "int8")
    assert h100.peak("vector", "fp32") == (66.9e12, "vector", "fp32")
    assert h100.peak("vector", "fp16") == (133.8e12, "vector", "fp16")
    assert h100.peak("vector", "bf16") == (133.8e12, "vector", "bf16")


def test_dense_never_sparse():
    # NVIDIA's datasheets print 1,979 TFLOPS BF16 "with sparsity"; the dense figure is half that.
    for key in ("h100", "h200"):
        hw = load_hardware(key)
        assert hw.peaks["matrix"]["bf16"] < 1000e12
        assert hw.peaks["matrix"]["fp8"] < 2000e12
    assert load_hardware("a100").peaks["matrix"]["bf16"] == 312e12  # not 624 (sparse)
    assert load_hardware("l4").peaks["matrix"]["fp16"] == 121e12  # 242* / 2


def test_other_builtin_bandwidths():
    assert load_hardware("a100").memory_bandwidth == 2.039e12
    assert load_hardware("h200").memory_bandwidth == 4.8e12
    assert load_hardware("h100-pcie").memory_bandwidth == 2.0e12
    assert load_hardware("l4").memory_bandwidth == 300e9
    assert load_hardware("epyc-9654").memory_bandwidth == 12 * 8 * 4.8e9  # 12 channels DDR5-4800


def test_epyc_peaks_are_the_documented_derivation():
    epyc = load_hardware("epyc-9654")
    cores, clock = 96, 3.55e9  # all-core boost
    assert epyc.peaks["vector"]["fp32"] == pytest.approx(cores * clock * 32)  # 2 FMA pipes x 8 lanes x 2
    assert epyc.peaks["vector"]["fp64"] == pytest.approx(cores * clock * 16)
    assert epyc.peaks["vector"]["bf16"] == pytest.approx(cores * clock * 64)
    assert "matrix" not in epyc.peaks  # no matrix engine: matmuls run on AVX-512
    assert epyc.peak("matrix", "fp32") == (epyc.peaks["vector"]["fp32"], "vector", "fp32")
    assert epyc.peak("matrix", "bf16") == (epyc.peaks["vector"]["bf16"], "vector", "bf16")


# --- every built-in entry -----------------------------------------------------------------------


def test_builtins_in_file_order_and_required_entries():
    keys = [hw.key for hw in list_hardware()]
    assert keys[:5] == ["h100", "h100-pcie", "h200", "a100", "l4"]
    assert "epyc-9654" in keys
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("hw", list_hardware(), ids=lambda hw: hw.key)
def test_builtin_entry_is_well_formed(hw: Hardware):
    assert hw.name and hw.source.strip()
    assert "http" in hw.source  # every entry cites a document with its address
    assert hw.peaks["vector"]["fp32"] > 0  # the fallback rate is always there
    assert hw.memory_bandwidth > 0
    for unit, table in hw.peaks.items():
        assert unit in ("matrix", "vector")
        for cls, value in table.items():
            assert cls in DTYPE_CLASSES
            assert value > 0 and math.isfinite(value)
    for figure in hw.sources:
        assert "http" in hw.sources[figure]
    assert load_hardware(hw.key) is hw
    assert load_hardware(hw.key.upper()) is hw  # case-insensitive


@pytest.mark.parametrize("hw", [hw for hw in list_hardware() if hw.key != "epyc-9654"], ids=lambda hw: hw.key)
def test_nvidia_fp32_matrix_is_ieee_and_tf32_is_opt_in(hw: Hardware):
    assert hw.peaks["matrix"]["fp32"] == hw.peaks["vector"]["fp32"]  # full fp32: the CUDA-core rate
    assert hw.with_fp32_matmul("tf32").peaks["matrix"]["fp32"] == hw.peaks["matrix"]["tf32"]
    assert hw.with_fp32_matmul("tf32").fp32_matmul == "tf32" and hw.fp32_matmul == "ieee"


def test_aliases():
    assert load_hardware("H100-SXM") is load_hardware("h100")
    assert load_hardware("genoa") is load_hardware("epyc-9654")


def test_docs_list_every_builtin():
    text = DOCS.read_text(encoding="utf-8")
    for hw in list_hardware():
        assert f"`{hw.key}`" in text


# --- fallback rules -----------------------------------------------------------------------------


def test_fallback_integer_and_unknown_dtypes_use_vector_fp32():
    h100 = load_hardware("h100")
    fp32 = (66.9e12, "vector", "fp32")
    assert h100.peak("vector", dtype_class("int64")) == fp32  # int64 has no peak class
    assert h100.peak("vector", None) == fp32
    assert h100.peak("matrix", None) == fp32
    assert h100.peak("vector", "int64") == fp32  # our dtype names are accepted too
    assert h100.peak("vector", "bool") == fp32
    assert h100.peak("vector", "int8") == fp32  # no vector int8 peak listed
    assert h100.ridge("vector", None) == 66.9e12 / 3.35e12


def test_fallback_matrix_dtype_missing_runs_on_vector_with_that_dtype():
    l4 = load_hardware("l4")
    assert "fp64" not in l4.peaks["matrix"]
    assert l4.peak("matrix", "fp64") == (l4.peaks["vector"]["fp64"], "vector", "fp64")


def test_fallback_dtype_missing_on_both_units_is_vector_fp32():
    a100 = load_hardware("a100")  # Ampere has no FP8
    assert a100.peak("matrix", "fp8") == (19.5e12, "vector", "fp32")
    epyc = load_hardware("epyc-9654")  # no fp16 arithmetic on Zen 4, no matrix unit
    assert epyc.peak("matrix", "fp16") == (epyc.peaks["vector"]["fp32"], "vector", "fp32")
    assert epyc.peak("vector", "fp16") == (epyc.peaks["vector"]["fp32"], "vector", "fp32")


def test_fallback_fp16_on_unit_lacking_it_user_hardware():
    hw = Hardware(
        key="toy",
        name="toy",
        memory_bandwidth=1e12,
        peaks={"matrix": {"bf16": 100e12}, "vector": {"fp32": 10e12, "fp16": 20e12}},
        source="test",
    )
    assert hw.peak("matrix", "fp16") == (20e12, "vector", "fp16")  # matrix lacks fp16: vector fp16
    assert hw.peak("matrix", "bf16") == (100e12, "matrix", "bf16")
    assert hw.peak("vector", "bf16") == (10e12, "vector", "fp32")  # vector lacks bf16: vector fp32
    assert hw.ridge("matrix", "fp16") == 20e12 / 1e12


def test_peak_rejects_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit"):
        load_hardware("h100").peak("tensor", "fp16")


def test_hardware_is_immutable_and_serializable():
    h100 = load_hardware("h100")
    with pytest.raises(TypeError):
        h100.peaks["matrix"]["bf16"] = 1.0  # type: ignore[index]
    d = h100.to_dict()
    assert {"name", "key", "memory_bandwidth", "peaks", "source"} <= set(d)  # schema_version 1's keys; more may come
    assert d["memory_capacity"] == 80e9
    assert json.loads(json.dumps(d)) == d
    assert d["peaks"]["matrix"]["bf16"] == 989.4e12


def test_figure_source():
    h100 = load_hardware("h100")
    assert "datasheet" in h100.figure_source("memory_bandwidth")
    assert h100.figure_source("matrix", "bf16") == h100.source
    a100 = load_hardware("a100")
    assert "whitepaper" in a100.figure_source("vector", "bf16")


# --- dtype classes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("float32", "fp32"),
        ("float16", "fp16"),
        ("bfloat16", "bf16"),
        ("float64", "fp64"),
        ("float8e4m3fn", "fp8"),
        ("float8e4m3fnuz", "fp8"),
        ("float8e5m2", "fp8"),
        ("float8e5m2fnuz", "fp8"),
        ("float8e8m0", "fp8"),
        ("int8", "int8"),
        ("uint8", "int8"),
        ("int4", "int4"),
        ("uint4", "int4"),
        ("float4e2m1", "fp4"),
        ("FLOAT16", "fp16"),
        ("int64", None),
        ("int32", None),
        ("int16", None),
        ("bool", None),
        ("string", None),
        ("complex64", None),
        (None, None),
    ],
)
def test_dtype_class(dtype, expected):
    assert dtype_class(dtype) == expected


# --- user spec files ----------------------------------------------------------------------------

GOOD_TOML = """
name = "My NPU"
memory_bandwidth = 1.0e12
source = "vendor datasheet rev 3, https://example.com/npu.pdf"

[peaks.matrix]
int8 = 400e12
fp16 = 200e12

[peaks.vector]
fp32 = 10e12
"""


def test_user_toml_single_entry(tmp_path):
    path = tmp_path / "my-npu.toml"
    path.write_text(GOOD_TOML)
    hw = load_hardware(str(path))
    assert hw.key == "my-npu"  # the file's stem
    assert hw.name == "My NPU"
    assert hw.ridge("matrix", "fp16") == 200e12 / 1e12
    assert hw.peak("matrix", "fp32") == (10e12, "vector", "fp32")
    assert load_hardware(path) == hw  # a Path works too


def test_user_json_single_entry(tmp_path):
    path = tmp_path / "chip.json"
    path.write_text(json.dumps({"memory_bandwidth": 5e11, "peaks": {"vector": {"fp32": 1e12}}}))
    hw = load_hardware(str(path))
    assert hw.key == "chip" and hw.name == "chip"
    assert hw.source.startswith("user spec file")  # defaulted, pointing at the file
    assert hw.ridge("vector", "fp32") == 2.0


def test_user_file_with_several_tables(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(
        """
[small]
memory_bandwidth = 1e11
peaks.vector.fp32 = 1e12
[big]
name = "Big"
memory_bandwidth = 1e12
peaks = { vector = { fp32 = 4e12 }, matrix = { bf16 = 64e12 } }
"""
    )
    big = load_hardware(f"{path}:big")
    assert big.key == "big" and big.peak("matrix", "bf16")[0] == 64e12
    with pytest.raises(HardwareSpecError, match="several specs .*small, big"):
        load_hardware(str(path))
    with pytest.raises(HardwareSpecError, match="no entry `medium`"):
        load_hardware(f"{path}:medium")


def test_user_file_with_one_table_needs_no_key(tmp_path):
    path = tmp_path / "one.toml"
    path.write_text("[npu]\nmemory_bandwidth = 2e12\n[npu.peaks.vector]\nfp32 = 1e13\n")
    assert load_hardware(str(path)).key == "npu"


BAD_SPECS = [
    # (file body, pattern that must appear in the one-line message)
    ("[peaks.vector]\nfp32 = 1e12\n", "missing key `memory_bandwidth`"),
    ("memory_bandwidth = -1\n[peaks.vector]\nfp32 = 1e12\n", "`memory_bandwidth` must be a positive number"),
    ('memory_bandwidth = "3.35 TB/s"\n[peaks.vector]\nfp32 = 1e12\n', "`memory_bandwidth` must be a positive"),
    ("memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\n[peaks.matrix]\nfp16 = 0\n", "`peaks.matrix.fp16`"),
    ("memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\n[peaks.matrix]\nfp16 = -5e12\n", "`peaks.matrix.fp16`"),
    ('memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = "fast"\n', "`peaks.vector.fp32` must be a positive number"),
    ("memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = true\n", "`peaks.vector.fp32` must be a positive number"),
    ("memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = nan\n", "`peaks.vector.fp32` must be a positive number"),
    (
        "memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\n[peaks.tensor]\nfp16 = 1e12\n",
        "unknown unit `peaks.tensor`",
    ),
    (
        "memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\nfloat16 = 1e12\n",
        "unknown dtype class `peaks.vector.float16`",
    ),
    ("memory_bandwidth = 1e12\n", "no peaks"),
    ("memory_bandwidth = 1e12\n[peaks]\n", "no peaks"),
    ("memory_bandwidth = 1e12\n[peaks.matrix]\nfp16 = 1e12\n", "missing `peaks.vector.fp32`"),
    ("memory_bandwidth = 1e12\npeaks = 5\n", "`peaks` must be a table"),
    (
        "memory_bandwidth = 1e12\nmemory_bandwith = 1e12\n[peaks.vector]\nfp32 = 1e12\n",
        "unknown field `memory_bandwith`",
    ),
    ('memory_bandwidth = 1e12\n[peaks.vector]\nfp32 = 1e12\n[sources]\n"matrix.fp16" = "x"\n', "`sources.matrix.fp16`"),
    ("memory_bandwidth = = 1e12\n", "not valid TOML"),
    ("", "empty"),
]


@pytest.mark.parametrize("body, message", BAD_SPECS)
def test_bad_spec_raises_naming_the_key(tmp_path, body, message):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(HardwareSpecError) as info:
        load_hardware(str(path))
    text = str(info.value)
    assert message in text
    assert "\n" not in text  # one line
    assert str(path) in text  # names the file


def test_bad_spec_inside_a_named_table_names_file_and_table(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(
        "[a]\nmemory_bandwidth = 1e12\n[a.peaks.vector]\nfp32 = 1e12\nfp16 = -1\n[b]\nmemory_bandwidth = 1\n"
    )
    with pytest.raises(HardwareSpecError, match=r"fleet\.toml:a: `peaks\.vector\.fp16`"):
        load_hardware(f"{path}:a")


def test_bad_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"memory_bandwidth": 1e12, ')
    with pytest.raises(HardwareSpecError, match="not valid JSON"):
        load_hardware(str(path))
    path.write_text("[1, 2]")
    with pytest.raises(HardwareSpecError, match="top level"):
        load_hardware(str(path))


def test_unknown_name_lists_known_keys():
    with pytest.raises(HardwareSpecError) as info:
        load_hardware("tpu-v9")
    text = str(info.value)
    assert "unknown hardware `tpu-v9`" in text
    for hw in list_hardware():
        assert hw.key in text


def test_missing_file(tmp_path):
    with pytest.raises(HardwareSpecError, match="not found"):
        load_hardware(str(tmp_path / "nope.toml"))
    with pytest.raises(HardwareSpecError, match="not found"):
        load_hardware(str(tmp_path / "nope.toml") + ":npu")


def test_hardware_spec_error_is_a_usage_error():
    from onnx_roofline.errors import EXIT_USAGE

    with pytest.raises(HardwareSpecError) as info:
        load_hardware("nope")
    assert info.value.exit_code == EXIT_USAGE


def _docs_peak_rows() -> dict[tuple[str, str], list[str]]:
    """The built-in peak table of docs/hardware.md: (key, unit) -> cells in DTYPE column order."""
    rows: dict[tuple[str, str], list[str]] = {}
    key = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[1] in ("matrix", "vector"):
            key = cells[0].strip("`") or key
            rows[(key, cells[1])] = cells[2:]
    return rows


def test_docs_peak_table_matches_specs():
    columns = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4")
    rows = _docs_peak_rows()
    for hw in list_hardware():
        for unit in ("matrix", "vector"):
            cells = rows[(hw.key, unit)]
            table = hw.peaks.get(unit, {})
            for cls, cell in zip(columns, cells, strict=False):
                if cls not in table:
                    assert cell == "—", (hw.key, unit, cls)
                else:
                    assert float(cell.split()[0]) == pytest.approx(table[cls] / 1e12, rel=1e-3), (hw.key, unit, cls)

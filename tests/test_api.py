"""The Python API a newcomer discovers: a one-line repr, rows as plain dicts (a DataFrame where
pandas is installed), the breakdowns importable from the package, docstrings on every public
name, type hints shipped (py.typed); the JSON Schema shipped with the package validates every
fixture's report; CSV and JSON carry module, time_share and attainable FLOP/s."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import types

import pytest

import onnx_roofline as r
from onnx_roofline import Sizing
from onnx_roofline.report.rows import ROW_KEYS
from onnx_roofline.report.serialize import render_csv, render_json
from tests.conftest import FIXTURES, REPO

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
DECODE_DIMS = {"batch": 1, "past_sequence": 1023}
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))


@pytest.fixture(scope="module")
def decode():
    return r.analyze(DECODE, hw="h100", sizing=Sizing(dims=DECODE_DIMS))


def test_repr_is_one_short_line(decode):
    text = repr(decode)
    assert "\n" not in text and len(text) < 200 and str(decode) == text
    assert text.startswith("<Report gpt2_decode_fp16.onnx on h100, written: 648 nodes, ")
    assert "memory-bound>" in text


def test_node_and_breakdown_reprs_are_short(decode):
    """A node or a breakdown at the REPL is a line each, not the tensors and graph nodes they hold."""
    matmul = next(n for n in decode.nodes if n.op_type == "MatMul")
    assert repr(matmul).startswith(f"<NodeResult {matmul.index} {matmul.name} (MatMul): ") and len(repr(matmul)) < 200
    groups = decode.breakdown()
    assert len(repr(groups)) < 120 * len(groups)
    assert repr(groups[0]).startswith(f"<Group {groups[0].key}: {len(groups[0].nodes)} nodes, ")


@pytest.mark.parametrize(
    "dims, shapes",
    [
        ({"batch": "1"}, None),
        ({"batch": 1.5}, None),
        ({"batch": True}, None),
        ({"batch": -1}, None),
        ({1: 1}, None),
        ({}, {"input_ids": "1x4"}),
        ({}, {"input_ids": [1, "4"]}),
    ],
)
def test_a_size_that_is_not_a_whole_number_is_a_roofline_error(dims, shapes):
    with pytest.raises(r.RooflineError, match="whole number|out of range|not a string|not a sequence"):
        r.analyze(DECODE, sizing=Sizing(dims=dims, input_shapes=shapes))


def test_rows_are_plain_dicts_that_add_up(decode):
    rows = decode.rows()
    assert len(rows) == len(decode.nodes) == 648
    assert all(tuple(row) == ROW_KEYS for row in rows)
    assert all(type(v) in (int, float, str, bool, type(None)) for row in rows for v in row.values())
    assert sum(row["flops"] for row in rows) == decode.totals.flops
    assert sum(row["bytes"] for row in rows) == decode.totals.bytes
    assert math.isclose(sum(row["time_share"] for row in rows), 1.0, rel_tol=1e-9)
    bandwidth = 3.35e12  # H100 SXM HBM3, the datasheet's figure
    for row in rows:
        if row["intensity"] is not None:  # min(peak, intensity × bandwidth), written out here
            assert math.isclose(row["attainable_flops"], min(row["peak"], row["intensity"] * bandwidth), rel_tol=1e-12)
    head = next(row for row in rows if row["name"] == "/model/lm_head/MatMul")
    assert head["output_shape"] == "1x1x50257" and head["module"] == "model.lm_head"
    # 2·K·N FLOPs for the 768 × 50257 projection of one token, at 3.35 TB/s: memory-bound, far below the peak
    assert head["flops"] == 2 * 768 * 50257 and head["bound"] == "memory"
    assert head["attainable_flops"] < head["peak"] / 100


def test_to_dataframe_without_pandas_says_what_to_do(decode, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas → ImportError
    with pytest.raises(ImportError, match=r"needs pandas .*Report\.rows\(\)"):
        decode.to_dataframe()


def test_to_dataframe_hands_pandas_the_rows(decode, monkeypatch):
    seen = {}

    class DataFrame:
        @staticmethod
        def from_records(records, columns, index):
            seen.update(records=records, columns=columns, index=index)
            return "frame"

    monkeypatch.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=DataFrame))
    assert decode.to_dataframe() == "frame"
    assert seen["columns"] == list(ROW_KEYS) and seen["index"] == "index" and seen["records"] == decode.rows()


def test_to_dataframe_with_real_pandas(decode):
    pandas = pytest.importorskip("pandas")
    frame = decode.to_dataframe()
    assert (
        isinstance(frame, pandas.DataFrame) and len(frame) == 648 and int(frame["flops"].sum()) == decode.totals.flops
    )


def test_breakdowns_importable_from_the_package(decode):
    layers = r.by_module(decode, 3)
    assert sum(g.totals.flops for g in layers) == decode.totals.flops
    assert [g.key for g in decode.breakdown("module", 3)] == [g.key for g in layers]
    assert {g.key for g in r.by_op_type(decode)} >= {"MatMul", "Gemm", "Softmax"}
    assert r.top_nodes(decode, 1)[0].name == "/model/lm_head/Transpose"
    assert isinstance(layers[0], r.Group) and r.breakdown(decode, "op_type")[0].key == r.by_op_type(decode)[0].key


def test_every_public_name_resolves_and_has_a_docstring():
    assert r.__all__ and set(r.__all__) <= set(dir(r))
    undocumented = [name for name in r.__all__ if not (getattr(r, name).__doc__ or "").strip()]
    assert undocumented == []
    for method in ("rows", "to_dataframe", "breakdown", "to_dict", "__repr__"):
        assert getattr(r.Report, method).__doc__, method
    with pytest.raises(AttributeError):
        r.no_such_name  # noqa: B018


def test_each_public_name_imports_first_in_a_fresh_interpreter():
    """`r.Report` before anything else loads (no import cycle behind the lazy names)."""
    import subprocess

    script = "import sys, onnx_roofline as r\nfor name in r.__all__:\n    getattr(r, name)\nprint('ok')"
    for name in ("Report", "NodeResult", "Group", "by_module"):  # each first, alone
        result = subprocess.run(
            [sys.executable, "-c", f"import onnx_roofline as r; r.{name}"], capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stderr
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "ok", result.stderr


def test_type_hints_ship():
    from pathlib import Path

    from onnx_roofline.model.files import tomllib

    assert (Path(r.__file__).parent / "py.typed").is_file()
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "onnx_roofline"
    ]
    assert "py.typed" in package_data and "report/schema.json" in package_data


# --- the JSON Schema, CSV -----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_every_fixture_report_validates_against_the_shipped_schema(fixture):
    jsonschema = pytest.importorskip("jsonschema")
    from onnx_roofline.views.deployed import deploy

    schema = r.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    written = r.analyze(FIXTURES / fixture, sizing=Sizing(default_dims=True))
    deployed = deploy(written, "copy")
    for report, other in (
        (written, deployed),
        (deployed, written),
        (written, None),
    ):  # the views block with both, and alone
        document = json.loads(render_json(report, other))
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, f"{fixture} ({report.view}): {errors[0].message} at {list(errors[0].path)}"


def test_schema_rejects_what_the_contract_forbids():
    jsonschema = pytest.importorskip("jsonschema")
    report = json.loads(render_json(r.analyze(FIXTURES / "resnet50_fp16.onnx", sizing=Sizing(dims={"batch": 1}))))
    validator = jsonschema.Draft202012Validator(r.json_schema())
    for mutate in (
        lambda d: d.pop("totals"),
        lambda d: d["nodes"][0].update(bound="fast"),
        lambda d: d["nodes"][0].update(flops=-1),
        lambda d: d["nodes"][0].pop("module"),
        lambda d: d.update(schema_version=2),
    ):
        broken = json.loads(json.dumps(report))
        mutate(broken)
        assert not validator.is_valid(broken)


def test_csv_and_json_carry_module_time_share_and_attainable(decode):
    rows = list(csv.DictReader(io.StringIO(render_csv(decode))))
    by_name = {row["name"]: row for row in rows}
    attn = by_name["/model/transformer/h.0/attn/MatMul"]
    assert attn["module"] == "model.transformer.h.0.attn"
    node = next(n for n in decode.nodes if n.name == "/model/transformer/h.0/attn/MatMul")
    assert math.isclose(float(attn["time_share"]), node.time_s / decode.totals.time_s)
    nodes = {n["name"]: n for n in json.loads(render_json(decode))["nodes"]}
    assert nodes["/model/transformer/h.0/attn/MatMul"]["module"] == "model.transformer.h.0.attn"
    assert nodes["/model/lm_head/Transpose"]["attainable_flops"] == 0.0  # 0 FLOPs: intensity 0

"""The JSON Schema of the report (schema.json, shipped with the package): what `--format json`
prints and `Report.to_dict()` returns, checked by the tests against every fixture's report."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def json_schema() -> dict[str, Any]:
    """The report's JSON Schema (draft 2020-12) as a dict: validate a saved report with
    `jsonschema.validate(report, json_schema())`."""
    return json.loads(resources.files("onnx_roofline.report").joinpath("schema.json").read_text(encoding="utf-8"))

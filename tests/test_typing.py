"""The public API as a user's type checker reads it: mypy, with the project's own configuration
([tool.mypy] in pyproject.toml), checks a small script that analyzes a model and reads the report's
nodes, rows and dict. What may be unknown is typed as such (a node's cost, a tensor's shape: a use
without a check is an error), and what the API guarantees needs no check (a top node's cost)."""

from __future__ import annotations

import re

import pytest

SCRIPT = """
import onnx_roofline as r

report = r.analyze("model.onnx", hw="h100", dims={"batch": 1})
node = report.nodes[0]
reveal_type(report.totals.flops)  # line 6
reveal_type(node.cost)  # line 7
reveal_type(report.rows())  # line 8
reveal_type(report.to_dict())  # line 9
reveal_type(r.top_nodes(report, 3)[0].cost.flops)  # line 10: a top node is costed
flops: int = node.cost.flops if node.cost is not None else 0
output = node.outputs[0]
dims = [d for d in output.shape or () if isinstance(d, int)] if output is not None else []
name: str = node.name
node.cost.flops  # line 15: a node may be uncosted
report.nodes[0].outputs[0].shape  # line 16: a slot may be absent
count: str = report.totals.flops  # line 17: an int is no str
"""

REVEALED = {
    6: "int",
    7: "onnx_roofline.costs.cost.Cost | None",
    8: "list[dict[str, Any]]",
    9: "dict[str, Any]",
    10: "int",
}
ERRORS = {15: "union-attr", 16: "union-attr", 17: "assignment"}


def test_a_user_script_reads_the_reports_types(tmp_path):
    api = pytest.importorskip("mypy.api")
    from tests.conftest import REPO

    (tmp_path / "script.py").write_text(SCRIPT)
    out, err, _ = api.run(["--config-file", str(REPO / "pyproject.toml"), "--follow-imports", "silent", "--show-error-codes",
                           "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "script.py")])  # fmt: skip
    revealed = {
        int(line): text.replace("builtins.", "")  # older mypy releases name the builtins' module
        for line, text in re.findall(r'script\.py:(\d+): note: Revealed type is "(.*)"', out)
    }
    errors = {int(line): code for line, code in re.findall(r"script\.py:(\d+): error: .*\[([\w-]+)\]$", out, re.M)}
    assert revealed == REVEALED, out + err
    assert errors == ERRORS, out + err

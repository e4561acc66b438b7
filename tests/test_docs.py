"""Documentation that is generated or promised stays true."""

from __future__ import annotations

from onnx_roofline.commands.docs import operator_table
from onnx_roofline.costs.rules import all_rules
from tests.conftest import REPO


def test_every_rule_documents_its_formula():
    undocumented = [f"{r.domain}::{r.op_type}" for r in all_rules() if not r.doc]
    assert undocumented == []


def test_operator_table_is_current():
    """Regenerate with: python -m onnx_roofline.commands.docs > docs/operators.md"""
    assert (REPO / "docs" / "operators.md").read_text() == operator_table()


def test_readme_holds_the_two_setup_commands():
    readme = (REPO / "README.md").read_text()
    assert 'pip install -c constraints.txt -e ".[dev]"' in readme
    assert "python -m pytest" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install --quiet -c constraints.txt -e ".[dev]"' in ci and "python -m pytest" in ci

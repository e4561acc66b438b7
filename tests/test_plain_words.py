"""Plain words in the terminal (issue 41): a node whose name carries no module (a dynamo export's
`node_Where_134`) is printed with its module, the one its exporter recorded; the breakdowns count
compute- and memory-bound nodes under a header that says so; serve says "never" as a sentence."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import re
from collections import Counter

import onnx
import pytest

from onnx_roofline.commands.cli import main
from tests.conftest import FIXTURES, REPO

DYNAMO = (
    REPO / "tests" / "corpus" / "models" / "dynamo_gpt2.onnx"
)  # torch.onnx.export(dynamo=True): names like node_Add_131
DECODE = FIXTURES / "gpt2_decode_fp16.onnx"


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*args, "-q"]) == 0
    return out.getvalue()


def test_a_dynamo_node_is_printed_with_the_module_its_exporter_recorded():
    if not DYNAMO.exists():
        pytest.skip("corpus file not generated")
    scopes = {n.name: ast.literal_eval(p.value) for n in onnx.load(DYNAMO, load_external_data=False).graph.node
              for p in n.metadata_props if p.key == "pkg.torch.onnx.name_scopes"}  # fmt: skip
    rows = [line for line in run(str(DYNAMO), "--top", "5").splitlines() if line.startswith("node_")]
    assert len(rows) == 5
    for row in rows:
        name, module = re.match(r"(node_\w+) \(([\w.]+)\)  ", row).groups()
        assert module in scopes[name], row  # one of the module scopes torch recorded for it


def test_the_breakdown_header_names_both_bounds():
    if not DECODE.exists():
        pytest.skip("fixture not generated")
    dims = ["--dim", "batch=1", "--dim", "past_sequence=1023"]
    nodes = json.loads(run(str(DECODE), *dims, "--format", "json"))["nodes"]
    gemm = Counter(n["bound"] for n in nodes if n["op_type"] == "Gemm")
    text = run(str(DECODE), *dims, "--top", "0")
    header = next(line for line in text.splitlines() if line.startswith("op type"))
    assert "compute-/memory-bound" in header and "compute/memory" not in text
    row = next(line for line in text.splitlines() if line.startswith("Gemm "))
    assert f" {gemm['compute']}/{gemm['memory']} " in row  # GPT-2 decode's 48 Gemms: all memory-bound at batch 1


def test_serve_says_never_as_a_sentence():
    if not DECODE.exists():
        pytest.skip("fixture not generated")
    text = run("serve", str(DECODE), "--tp", "1", "--batch", "1,8", "--context", "1024")
    data = json.loads(run("serve", str(DECODE), "--tp", "1", "--batch", "1,8", "--context", "1024", "--format", "json"))
    (limit,) = [line for line in text.splitlines() if line.startswith("TP 1:")]
    assert "from batch never" not in limit
    crossing = data["degrees"][0]["compute_bound_crossing"]
    if crossing is None:
        assert limit.endswith("compute-bound kernels never take half the step, at any batch")
    else:
        assert f"take half the step from batch {math.ceil(crossing)} " in limit

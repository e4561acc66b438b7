"""The CI gate (`onnx-roofline check`): thresholds, policy files, baselines, outputs and exit codes.

Exit codes: 0 every check passed, 1 a check failed, 2 bad input. Small models built with onnx.helper
cover every kind of check; the GPT-2 scenarios run on the committed fixtures when they are present.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.gate import PolicyError, evaluate, load_policy, parse_policy
from onnx_roofline.commands.gate.baseline import NodeFigures, compare
from onnx_roofline.commands.gate.policy import Budget, Policy
from onnx_roofline.commands.gate.quantities import parse_amount, parse_count, parse_duration, parse_fraction
from onnx_roofline.report.breakdown import in_module, module_of
from tests.conftest import FIXTURES, REPO

# --- models --------------------------------------------------------------------------------


def block_model(hidden: int = 768, mlp: int = 3072) -> onnx.ModelProto:
    """A one-layer block with TorchScript-style names, `batch` symbolic, fp16, GPT-2-sized matrices:
    attn MatMul [batch,64,h]x[h,h] -> Softmax -> mlp MatMul [.,h]x[h,mlp] -> Relu -> lm_head MatMul [.,mlp]x[mlp,h].
    The weights are graph inputs (no bytes to store); at batch 16 (1024 rows) the MLP and lm_head
    MatMuls are compute-bound on h100 (intensity ≈ 384 > 295) and everything else memory-bound."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 64, hidden])]
    for name, shape in (("wq", [hidden, hidden]), ("wfc", [hidden, mlp]), ("whead", [mlp, hidden])):
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT16, shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="/transformer/h.0/attn/MatMul"),
        helper.make_node("Softmax", ["q"], ["p"], name="/transformer/h.0/attn/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "wfc"], ["f"], name="/transformer/h.0/mlp/c_fc/MatMul"),
        helper.make_node("Relu", ["f"], ["a"], name="/transformer/h.0/mlp/act/Relu"),
        helper.make_node("MatMul", ["a", "whead"], ["y"], name="/lm_head/MatMul"),
    ]
    graph = helper.make_graph(nodes, "block", inputs, [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def uncostable_model() -> onnx.ModelProto:
    """A custom op (no rule: unsupported) whose output shape is unknown, feeding a Relu (unknown-shape)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/pre/Relu"),
        helper.make_node("Mystery", ["r"], ["m"], name="/odd/Mystery", domain="example.custom"),
        helper.make_node("Relu", ["m"], ["y"], name="/post/Relu"),
    ]
    graph = helper.make_graph(nodes, "odd", [x], [y])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.fixture
def block_path(tmp_path):
    path = tmp_path / "block.onnx"
    onnx.save(block_model(), path)
    return path


@pytest.fixture
def block_report():
    return analyze(block_model(), hw="h100", sizing=Sizing(dims={"batch": 16}))


def run_check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "onnx_roofline", "check", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


# --- quantities: the spellings a flag and a policy key accept ---------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2ms", 2e-3),
        ("500us", 500e-6),
        ("500µs", 500e-6),
        ("500μs", 500e-6),
        ("0.002s", 2e-3),
        ("1.5e-3", 1.5e-3),
        (" 2 ms ", 2e-3),
        ("250ns", 250e-9),
        (0.5, 0.5),
        (2, 2.0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["2parsec", "", "ms", "-1ms", "0", "2 m s", "nan", "1e999", True, [1]])
def test_malformed_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "over_one", "value"),
    [
        ("60%", False, 0.6),
        (0.6, False, 0.6),
        ("0.6", False, 0.6),
        ("100%", False, 1.0),
        (1, False, 1.0),
        ("5%", True, 0.05),
        (0.05, True, 0.05),
        ("150%", True, 1.5),
        ("0%", True, 0.0),
    ],
)
def test_fractions(text, over_one, value):
    assert parse_fraction(text, over_one=over_one) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "over_one", "message"),
    [
        ("150%", False, "above 100%"),  # a share cannot exceed the whole
        ("5", True, "ambiguous"),  # 5 meant 5%? say so
        (1.2, False, "ambiguous"),
        ("-1%", True, "negative"),
        ("sixty", False, "malformed"),
    ],
)
def test_malformed_fractions(text, over_one, message):
    with pytest.raises(ValueError, match=message):
        parse_fraction(text, over_one=over_one)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("1.5 GB", 1_500_000_000),
        ("2GiB", 2 * 2**30),
        ("300 GFLOP", 300 * 10**9),
        ("300GFLOPs", 300 * 10**9),
        (1.5e9, 1_500_000_000),
        ("1.5e9", 1_500_000_000),
        (12345, 12345),
        ("64k", 64_000),
        ("4 KiB", 4096),
    ],
)
def test_amounts(text, amount):
    assert parse_amount(text) == amount


@pytest.mark.parametrize("text", ["1.5 GX", "lots", -1, "-2GB", True])
def test_malformed_amounts(text):
    with pytest.raises(ValueError):
        parse_amount(text)


def test_counts():
    assert parse_count("0") == 0 and parse_count(3) == 3
    for bad in ("-1", "1.5", 1.5, True, "x"):
        with pytest.raises(ValueError, match="whole number"):
            parse_count(bad)


# --- modules from node names ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("/transformer/h.0/attn/MatMul", "transformer.h.0.attn"),
        ("/transformer/h.11/mlp/c_fc/MatMul_1", "transformer.h.11.mlp.c_fc"),
        ("/layer2/layer2.0/conv2/Conv", "layer2.0.conv2"),  # a Sequential child repeats its parent's name
        ("/lm_head/MatMul", "lm_head"),
        ("/MatMul", ""),
        ("node_MatMul_12", ""),  # a dynamo name without scopes: no module
    ],
)
def test_module_of(name, module):
    assert module_of(name) == module


def test_in_module_is_the_subtree_not_a_prefix():
    assert in_module(module_of("/transformer/h.0/attn/MatMul"), "transformer.h.0")
    assert in_module(module_of("/transformer/h.0/attn/MatMul"), "transformer.h.0.attn")
    assert not in_module(module_of("/transformer/h.10/attn/MatMul"), "transformer.h.1")


# --- policy files --------------------------------------------------------------------------

FULL_POLICY = """
hw = "h100"
max_memory_bound_share = "60%"
max_bytes = "1.5 GB"
max_flops = 3e11
max_unsupported = 0
max_unknown_shape = 0
baseline = "baselines/model.json"
max_regression = { latency = "5%", bytes = 0.1 }

[dims]
batch = 1
sequence = 1024

[max_latency]
h100 = "1ms"
H100-SXM = "1ms"
default = "3ms"

[op_type.MatMul]
max_latency = "500us"
max_time_share = 0.7

[module."transformer.h.0.attn"]
max_bytes = "100MB"
"""


def test_full_policy_parses(tmp_path):
    policy = load_policy(write(tmp_path / "roofline.toml", FULL_POLICY))
    assert policy.hw == "h100" and policy.dims == {"batch": 1, "sequence": 1024}
    assert policy.max_latency == {"default": 3e-3, "h100": 1e-3}  # the alias H100-SXM names h100 too
    assert policy.max_memory_bound_share == 0.6
    assert (policy.max_bytes, policy.max_flops) == (1_500_000_000, 300_000_000_000)
    assert (policy.max_unsupported, policy.max_unknown_shape) == (0, 0)
    assert policy.op_type == {"MatMul": Budget(max_latency=500e-6, max_time_share=0.7)}
    assert policy.module == {"transformer.h.0.attn": Budget(max_bytes=100_000_000)}
    assert policy.max_regression == {"latency": 0.05, "bytes": 0.1}
    assert policy.baseline == str(tmp_path / "baselines" / "model.json")  # relative to the policy file


def test_policy_from_pyproject(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.onnx-roofline]\nmax_latency = "2ms"\n')
    assert load_policy(tmp_path / "pyproject.toml").max_latency == {"default": 2e-3}
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(PolicyError, match=r"no \[tool.onnx-roofline\] table"):
        load_policy(tmp_path / "sub" / "pyproject.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('max_latncy = "2ms"', "unknown key `max_latncy` (did you mean `max_latency`?)"),
        ('max_latency = "2 parsecs"', "`max_latency`: malformed duration"),
        ('max_memory_bound_share = "160%"', "`max_memory_bound_share`: share '160%' is above 100%"),
        ('max_regression = "5"', "`max_regression`: ambiguous fraction"),
        ('max_regression = { latncy = "5%" }', "unknown key `max_regression.latncy`"),
        ("max_unsupported = -1", "`max_unsupported`: malformed count"),
        ('[max_latency]\nh10 = "1ms"', "`max_latency.h10`: not a built-in hardware name"),
        ('[op_type.MatMul]\nmax_latncy = "1ms"', "unknown key `op_type.MatMul.max_latncy`"),
        ('[module."transformer.h.0"]\nmax_time_share = 2', '`module."transformer.h.0".max_time_share`: ambiguous'),
        ("[dims]\nbatch = 0", "`dims.batch`: expected a positive whole number"),
        ("nonzero_fraction = 2", "`nonzero_fraction`: the fraction of elements selected must be in [0, 1]"),
        ('nonzero_fraction = "a/b"', "`nonzero_fraction`: malformed fraction 'a/b'"),
        ("max_bytes = [1, 2]", "`max_bytes` must be a single value, not a list"),
        ("op_type = 3", "`op_type` must be a table"),
        ("max_latency = = 2", "not valid TOML"),
    ],
)
def test_bad_policy_names_the_key(tmp_path, text, message):
    path = write(tmp_path / "roofline.toml", text + "\n")
    with pytest.raises(PolicyError) as error:
        load_policy(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_policy_independent_of_key_order():
    a = parse_policy({"op_type": {"Softmax": {"max_latency": 1}, "MatMul": {"max_latency": 2}}, "max_bytes": 5}, "a")
    b = parse_policy({"max_bytes": 5, "op_type": {"MatMul": {"max_latency": 2}, "Softmax": {"max_latency": 1}}}, "b")
    assert a == b and list(a.op_type) == ["MatMul", "Softmax"]


# --- evaluate: one kind of check at a time (pure: report + policy → checks) --------------------


def statuses(result) -> dict[str, str]:
    return {check.id: check.status for check in result.checks}


def test_every_limit_met_passes(block_report):
    total = block_report.totals
    policy = Policy(
        max_latency={"default": total.time_s * 1.01},
        max_memory_bound_share=1.0,
        max_bytes=total.bytes,
        max_flops=total.flops,
        max_unsupported=0,
        max_unknown_shape=0,
    )
    result = evaluate(block_report, policy)
    assert result.passed
    assert statuses(result) == dict.fromkeys(
        ["latency", "memory_bound_share", "bytes", "flops", "unsupported", "unknown_shape"], "pass"
    )


def test_latency_over_budget_names_the_slowest_nodes(block_report):
    total = block_report.totals.time_s
    (check,) = evaluate(block_report, Policy(max_latency={"default": total / 2}), top=2).checks
    assert check.status == "fail" and check.measured == total and check.limit == total / 2
    assert "exceeds" in check.message and "+100.0%" in check.message
    slowest = sorted(block_report.nodes, key=lambda n: -n.time_s)[:2]
    assert [c.node.name for c in check.contributors] == [n.name for n in slowest]
    assert check.contributors[0].share == pytest.approx(slowest[0].time_s / total)


def test_latency_budget_per_hardware(block_report):
    total = block_report.totals.time_s
    own = evaluate(block_report, Policy(max_latency={"h100": total / 2, "default": total * 2}))
    assert statuses(own) == {"latency": "fail"}  # the h100 entry wins over the default
    other = evaluate(block_report, Policy(max_latency={"a100": total / 2}))
    assert statuses(other) == {"latency": "skip"} and other.passed
    assert "no latency budget for h100" in other.checks[0].message


def test_memory_bound_share(block_report):
    share = block_report.totals.memory_bound_time_share
    assert {n.name: n.bound for n in block_report.nodes} == {
        "/transformer/h.0/attn/MatMul": "memory",  # 768x768: intensity ≈ 279, just under the ridge
        "/transformer/h.0/attn/Softmax": "memory",
        "/transformer/h.0/mlp/c_fc/MatMul": "compute",
        "/transformer/h.0/mlp/act/Relu": "memory",
        "/lm_head/MatMul": "compute",
    }
    assert 0 < share < 1
    (check,) = evaluate(block_report, Policy(max_memory_bound_share=share / 2)).checks
    assert check.status == "fail" and check.measured == share
    assert all(c.node.bound == "memory" for c in check.contributors)
    assert evaluate(block_report, Policy(max_memory_bound_share=share)).passed


@pytest.mark.parametrize("metric", ["bytes", "flops"])
def test_bytes_and_flops_budgets(block_report, metric):
    total = getattr(block_report.totals, metric)
    (check,) = evaluate(block_report, Policy(**{f"max_{metric}": total - 1})).checks
    assert check.status == "fail" and check.measured == total
    heaviest = max(block_report.nodes, key=lambda n: getattr(n.cost, metric))
    assert check.contributors[0].node.name == heaviest.name
    assert evaluate(block_report, Policy(**{f"max_{metric}": total})).passed


def test_uncostable_nodes_are_counted_and_named():
    report = analyze(uncostable_model(), hw="h100")
    result = evaluate(report, Policy(max_unsupported=0, max_unknown_shape=0, max_latency={"default": 1.0}))
    assert statuses(result) == {"latency": "pass", "unsupported": "fail", "unknown_shape": "fail"}
    latency, unsupported, unknown = result.checks
    assert "2 nodes could not be costed and are not counted" in latency.message  # unknown is never zero
    assert [c.node.name for c in unsupported.contributors] == ["/odd/Mystery"]
    assert "no cost rule for example.custom::Mystery" in unsupported.contributors[0].note
    assert [c.node.name for c in unknown.contributors] == ["/post/Relu"]
    assert evaluate(report, Policy(max_unsupported=1, max_unknown_shape=1)).passed


def test_op_type_budgets(block_report):
    matmuls = [n for n in block_report.nodes if n.op_type == "MatMul"]
    matmul_time = sum(n.time_s for n in matmuls)
    share = matmul_time / block_report.totals.time_s
    policy = Policy(
        op_type={
            "MatMul": Budget(max_latency=matmul_time / 2, max_time_share=share, max_flops=0),
            "Conv": Budget(max_latency=1e-9),  # no Conv in the model: skipped, visibly
        }
    )
    result = evaluate(block_report, policy)
    assert statuses(result) == {
        "op_type[Conv].latency": "skip",
        "op_type[MatMul].latency": "fail",
        "op_type[MatMul].flops": "fail",
        "op_type[MatMul].time_share": "pass",
    }
    latency = result.checks[1]
    assert latency.measured == pytest.approx(matmul_time)
    assert {c.node.op_type for c in latency.contributors} == {"MatMul"}
    assert "no node matches op_type 'Conv'" in result.checks[0].message


def test_module_budgets_cover_the_subtree(block_report):
    attn_mlp = [n for n in block_report.nodes if n.name.startswith("/transformer/h.0/")]
    block_bytes = sum(n.cost.bytes for n in attn_mlp)
    policy = Policy(
        module={
            "transformer.h.0": Budget(max_bytes=block_bytes - 1),
            "transformer.h.0.attn": Budget(max_time_share=1.0),
            "transformer.h.1": Budget(max_bytes=1),
        }
    )
    result = evaluate(block_report, policy)
    assert statuses(result) == {
        "module[transformer.h.0].bytes": "fail",
        "module[transformer.h.0.attn].time_share": "pass",
        "module[transformer.h.1].bytes": "skip",
    }
    failed = result.checks[0]
    assert failed.measured == block_bytes
    assert {c.node.name for c in failed.contributors} == {n.name for n in attn_mlp}  # never /lm_head


# --- baselines --------------------------------------------------------------------------------


def figures(index, name, op_type="Add", bound="memory", latency=1.0):
    return NodeFigures(index, name, op_type, bound, latency, 10, 10)


def test_nodes_pair_by_name_then_by_index_and_op_type():
    before = [figures(0, "a"), figures(1, "b"), figures(2, "renamed_old", "MatMul"), figures(3, "gone")]
    after = [
        figures(0, "b", bound="compute"),
        figures(1, "a"),
        figures(2, "renamed_new", "MatMul"),
        figures(3, "new", "Relu"),
    ]
    comparison = compare(before, after)
    assert [(b.name, a.name) for b, a in comparison.pairs] == [("b", "b"), ("a", "a"), ("renamed_old", "renamed_new")]
    assert [n.name for n in comparison.added] == ["new"]  # index 3 is taken, but by another op type
    assert [n.name for n in comparison.removed] == ["gone"]
    assert [(b.bound, a.bound) for b, a in comparison.bound_changed] == [("memory", "compute")]


def make_baseline(tmp_path, model: onnx.ModelProto, *flags: str):
    model_path = tmp_path / "before.onnx"
    onnx.save(model, model_path)
    out = tmp_path / "baseline.json"
    assert main(["analyze", str(model_path), "--format", "json", "-o", str(out), *flags]) == 0
    return out


def test_check_without_dims_takes_the_baseline_dims_and_says_so(tmp_path):
    """GPT-2 decode's baseline made at past 1023: `check` with no --dim analyzes at the baseline's
    own dims (not the defaults, which would make the comparison refuse) and names them on stderr."""
    model = FIXTURES / "gpt2_decode_fp16.onnx"
    out = tmp_path / "baseline.json"
    assert (
        main(
            [
                "analyze",
                str(model),
                "--dim",
                "batch=1",
                "--dim",
                "past_sequence=1023",
                "--format",
                "json",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    result = run_check(str(model), "--baseline", str(out), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"dims from the baseline {out}: batch=1, past_sequence=1023" in result.stderr
    assert all(check["status"] == "pass" for check in json.loads(result.stdout)["checks"])
    given = run_check(str(model), "--baseline", str(out), "--dim", "past_sequence=511")
    assert given.returncode == 2 and "past_sequence=511" in given.stderr  # a dim given still wins, and is refused


def test_unchanged_model_passes_against_its_baseline(tmp_path, block_path):
    baseline = make_baseline(tmp_path, block_model(), "--dim", "batch=1")
    result = run_check(str(block_path), "--dim", "batch=1", "--baseline", str(baseline), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert [c["status"] for c in data["checks"]] == ["pass"] * 4  # the 3 regressions and "every node costed"
    assert data["baseline"] == {"path": str(baseline), "added": [], "removed": [], "bound_changed": []}


def test_regression_beyond_tolerance_fails_and_names_the_nodes(tmp_path):
    baseline = make_baseline(tmp_path, block_model(mlp=3072), "--dim", "batch=1")
    grown = tmp_path / "grown.onnx"
    onnx.save(block_model(mlp=6144), grown)  # the MLP doubles: its MatMuls and Relu grow
    result = run_check(
        str(grown), "--dim", "batch=1", "--baseline", str(baseline), "--max-regression", "5%", "--format", "json"
    )
    assert result.returncode == 1, result.stderr
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert {k: c["status"] for k, c in checks.items()} == {
        **dict.fromkeys(["regression.latency", "regression.bytes", "regression.flops"], "fail"),
        "uncosted": "pass",
    }
    flops = checks["regression.flops"]
    before, after = (analyze(block_model(mlp=m), sizing=Sizing(dims={"batch": 1})).totals.flops for m in (3072, 6144))
    assert flops["measured"] == (after - before) / before and flops["limit"] == 0.05
    grew = {c["name"] for c in flops["contributors"]}
    assert grew == {"/transformer/h.0/mlp/c_fc/MatMul", "/transformer/h.0/mlp/act/Relu", "/lm_head/MatMul"}
    text = run_check(str(grown), "--dim", "batch=1", "--baseline", str(baseline), "--max-regression", "5%").stdout
    # c_fc grows by 2·64·768·3072 = 301,989,888 FLOP, as lm_head does; with the Relu's 64·3072 more, each is ~50.0 %
    assert "+301.99 MFLOP grown (50.0% of the growth)  /transformer/h.0/mlp/c_fc/MatMul (MatMul)" in text
    loose = run_check(str(grown), "--dim", "batch=1", "--baseline", str(baseline), "--max-regression", "150%")
    assert loose.returncode == 0, loose.stdout


def test_added_removed_and_bound_changes_are_listed(tmp_path):
    baseline = make_baseline(tmp_path, block_model(), "--dim", "batch=1")
    model = block_model()
    relu = model.graph.node[3]
    model.graph.node.remove(relu)  # drop the Relu; the lm_head reads the MLP output directly
    model.graph.node[3].input[0] = "f"
    model.graph.node.append(helper.make_node("Relu", ["y"], ["y2"], name="/final/Relu"))
    model.graph.output[0].name = "y2"
    path = tmp_path / "after.onnx"
    onnx.save(model, path)
    result = run_check(str(path), "--dim", "batch=1", "--baseline", str(baseline), "--max-regression", "100%")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 node(s) added, 1 removed, 0 changed bound" in result.stdout
    assert "  + [4] /final/Relu (Relu)" in result.stdout
    assert "  - [3] /transformer/h.0/mlp/act/Relu (Relu)" in result.stdout


def test_a_bound_change_is_listed(tmp_path):
    """At batch 1 the MLP MatMul is memory-bound; a baseline that had it compute-bound lists the change."""
    baseline = make_baseline(tmp_path, block_model(), "--dim", "batch=1")
    data = json.loads(baseline.read_text())
    mlp = next(n for n in data["nodes"] if n["name"] == "/transformer/h.0/mlp/c_fc/MatMul")
    assert mlp["bound"] == "memory"
    mlp["bound"] = "compute"  # as if the baseline had it compute-bound
    baseline.write_text(json.dumps(data))
    result = run_check(
        str(tmp_path / "before.onnx"), "--dim", "batch=1", "--baseline", str(baseline), "--format", "json"
    )
    changed = json.loads(result.stdout)["baseline"]["bound_changed"]
    assert changed == [
        {
            "index": 2,
            "name": "/transformer/h.0/mlp/c_fc/MatMul",
            "op_type": "MatMul",
            "before": "compute",
            "after": "memory",
        }
    ]


# --- the command line: exit codes ---------------------------------------------------------------


def test_check_without_limits_asks_whether_every_node_is_costed(tmp_path, block_path):
    complete = run_check(str(block_path), "--dim", "batch=1")
    assert complete.returncode == 0, complete.stderr
    partial = tmp_path / "mystery.onnx"
    graph = helper.make_graph(
        [helper.make_node("Mystery", ["x"], ["y"], domain="acme")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)]), partial
    )
    result = run_check(str(partial))
    assert result.returncode == 1 and "Mystery" in result.stdout + result.stderr


def test_exit_0_when_every_check_passes(block_path):
    result = run_check(str(block_path), "--dim", "batch=1", "--max-latency", "1s", "--no-unsupported")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("onnx-roofline check: PASS (0 of 3 checks failed)")


def test_exit_1_with_a_summary_of_what_failed(block_path):
    result = run_check(str(block_path), "--dim", "batch=1", "--max-latency", "1ns", "--max-memory-bound-share", "0%")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "onnx-roofline check: FAIL (2 of 3 checks failed)"  # and "every node costed" passed
    assert (
        lines[1]
        == f"model {block_path} on h100, dims batch=1; times: every node its own kernel, as written (the floor a runtime cannot beat: --view deployed)"
    )
    assert lines[2].startswith("latency: floor ")  # the deployed bound first (issue 40)
    assert lines[4].startswith("FAIL  predicted latency ") and "exceeds 1.0 ns" in lines[4]
    assert "/lm_head/MatMul (MatMul)" in result.stdout  # a named contributor
    assert result.stderr == ""


def test_policy_file_and_flags_together(tmp_path, block_path):
    policy = write(tmp_path / "roofline.toml", 'max_latency = "1ns"\n\n[dims]\nbatch = 1\n')
    assert run_check(str(block_path), "--policy", str(policy)).returncode == 1
    assert run_check(str(block_path), "--policy", str(policy), "--max-latency", "1s").returncode == 0  # the flag wins
    big = run_check(
        str(block_path), "--policy", str(policy), "--dim", "batch=4096", "--max-latency", "1ns", "--format", "json"
    )
    assert json.loads(big.stdout)["model"]["dims"] == {"batch": 4096}  # --dim wins over the policy's dims


def test_policy_hw_applies_unless_hw_is_given(tmp_path, block_path):
    policy = write(tmp_path / "roofline.toml", 'hw = "a100"\nmax_latency = "1s"\n[dims]\nbatch = 1\n')
    on_policy = run_check(str(block_path), "--policy", str(policy), "--format", "json")
    assert json.loads(on_policy.stdout)["hardware"] == "a100"
    on_flag = run_check(str(block_path), "--policy", str(policy), "--hw", "h100", "--format", "json")
    assert json.loads(on_flag.stdout)["hardware"] == "h100"


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda d, m: [m, "--dim", "batch=1", "--policy", d / "bad.toml"], "unknown key `max_latncy`"),
        (lambda d, m: [m, "--dim", "batch=1", "--policy", d / "absent.toml"], "policy file not found"),
        (lambda d, m: [m, "--dim", "batch=1", "--baseline", d / "absent.json"], "baseline file not found"),
        (lambda d, m: [m, "--dim", "batch=1", "--baseline", d / "text.json"], "not valid JSON"),
        (lambda d, m: [m, "--dim", "batch=1", "--baseline", d / "other.json"], "not an onnx-roofline report"),
        (lambda d, m: [m, "--dim", "batch=1", "--baseline", d / "v2.json"], "schema_version 2 is not 1"),
        (lambda d, m: [d / "absent.onnx", "--max-latency", "1ms"], "model file not found"),
        (lambda d, m: [d / "text.onnx", "--max-latency", "1ms"], "not a valid ONNX model"),
        (
            lambda d, m: [m, "--dim", "batch=1", "--max-latency", "2 parsecs"],
            "argument --max-latency: malformed duration",
        ),
        (lambda d, m: [m, "--dim", "batch=1", "--max-regression", "5"], "ambiguous fraction '5': write 5%"),
        (lambda d, m: [m, "--dim", "batch=1", "--max-memory-bound-share", "120%"], "above 100%"),
        (lambda d, m: [m, "--dim", "batch=1", "--max-bytes", "much"], "malformed amount"),
        (lambda d, m: [m, "--dim", "batch=1", "--max-regression", "5%"], "a regression limit needs a baseline"),
        (lambda d, m: [m, "--max-latency", "1ms"], "dimension 'batch' is unbound"),
        (lambda d, m: [m, "--dim", "batch=1", "--max-latency", "1ms", "-o", m], "refusing to overwrite the input"),
        (
            lambda d, m: [m, "--dim", "batch=1", "--max-latency", "1ms", "--junit", d / "no" / "j.xml"],
            "output folder does not exist",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, block_path, make_args, message):
    write(tmp_path / "bad.toml", 'max_latncy = "2ms"\n')
    write(tmp_path / "text.json", "{not json")
    write(tmp_path / "other.json", '{"checks": []}')
    write(tmp_path / "v2.json", '{"schema_version": 2}')
    write(tmp_path / "text.onnx", "not a model")
    result = run_check(*map(str, make_args(tmp_path, block_path)))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--hw", "a100"], "was made for NVIDIA H100 SXM5 80GB, this check runs on NVIDIA A100"),
        (["--dim", "batch=2"], "was made with dims batch=1, this check binds batch=2"),
    ],
)
def test_baseline_from_other_conditions_is_refused(tmp_path, block_path, flags, message):
    baseline = make_baseline(tmp_path, block_model(), "--dim", "batch=1")
    args = ["--dim", "batch=1", *flags] if "--hw" in flags else flags
    result = run_check(str(block_path), *args, "--baseline", str(baseline))
    assert result.returncode == 2 and message in result.stderr, result.stderr


# --- outputs ----------------------------------------------------------------------------------


def test_json_is_byte_identical_across_runs_seeds_locales_and_key_order(tmp_path, block_path):
    policy_a = write(
        tmp_path / "a.toml",
        '[op_type.Softmax]\nmax_latency = "1ns"\n[op_type.MatMul]\nmax_latency = "1ns"\n[dims]\nbatch = 1\n',
    )
    policy_b = write(
        tmp_path / "b.toml",
        '[dims]\nbatch = 1\n[op_type.MatMul]\nmax_latency = "1ns"\n[op_type.Softmax]\nmax_latency = "1ns"\n',
    )
    runs = [
        run_check(
            str(block_path), "--policy", str(policy_a), "--format", "json", env={"PYTHONHASHSEED": "0", "LC_ALL": "C"}
        ),
        run_check(str(block_path), "--policy", str(policy_a), "--format", "json", env={"PYTHONHASHSEED": "1"}),
        run_check(
            str(block_path),
            "--policy",
            str(policy_b),
            "--format",
            "json",
            env={"PYTHONHASHSEED": "2", "LC_ALL": "de_DE.UTF-8", "LANG": "de_DE.UTF-8"},
        ),
    ]
    assert [r.returncode for r in runs] == [1, 1, 1]
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout
    assert "time" not in json.loads(runs[0].stdout)["model"]  # no timestamps


def test_check_twice_writes_identical_json_files(tmp_path, block_path):
    outputs = []
    for name in ("one.json", "two.json"):
        out = tmp_path / name
        assert (
            main(
                [
                    "check",
                    str(block_path),
                    "--dim",
                    "batch=1",
                    "--max-latency",
                    "1ns",
                    "--format",
                    "json",
                    "-o",
                    str(out),
                ]
            )
            == 1
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    data = json.loads(outputs[0])
    assert data["schema_version"] == 1 and data["kind"] == "check" and data["passed"] is False
    assert data["summary"] == {"checks": 2, "failed": 1, "skipped": 0}  # the budget and "every node costed"
    check, complete = data["checks"]
    assert (complete["id"], complete["status"]) == ("uncosted", "pass")
    assert {"id", "title", "status", "kind", "measured", "limit", "message", "contributors"} <= check.keys()
    assert check["limit"] == 1e-9


def test_a_foldable_culprit_is_marked(tmp_path):
    """GPT-2 decode's top culprit is lm_head's Transpose of a weight, which a runtime folds at load."""
    args = (
        str(FIXTURES / "gpt2_decode_fp16.onnx"),
        "--dim",
        "batch=1",
        "--dim",
        "past_sequence=1023",
        "--max-latency",
        "1us",
    )
    assert "/model/lm_head/Transpose (Transpose, foldable)" in run_check(*args).stdout
    (latency,) = [c for c in json.loads(run_check(*args, "--format", "json").stdout)["checks"] if c["id"] == "latency"]
    marks = {c["name"]: c["constant_foldable"] for c in latency["contributors"]}
    assert marks["/model/lm_head/Transpose"] is True and marks["/model/lm_head/MatMul"] is False


def test_junit_has_a_testcase_per_check(tmp_path, block_path):
    junit = tmp_path / "roofline.xml"
    result = run_check(
        str(block_path),
        "--dim",
        "batch=1",
        "--max-latency",
        "1ns",
        "--max-bytes",
        "1TB",
        "--max-memory-bound-share",
        "100%",
        "--junit",
        str(junit),
    )
    assert result.returncode == 1
    suites = ET.parse(junit).getroot()
    assert suites.tag == "testsuites" and suites.get("tests") == "4" and suites.get("failures") == "1"
    cases = {case.get("name"): case for case in suites.iter("testcase")}
    assert list(cases) == ["latency", "memory_bound_share", "bytes", "uncosted"]
    failure = cases["latency"].find("failure")
    assert "exceeds 1.0 ns" in failure.get("message") and "/lm_head/MatMul" in failure.text
    assert cases["bytes"].find("failure") is None
    # each model has its own classname, so two models' testcases in one CI report do not collide
    assert {case.get("classname") for case in cases.values()} == {f"onnx-roofline[h100] {block_path}"}


def test_github_annotations(tmp_path, block_path):
    result = run_check(
        str(block_path), "--dim", "batch=1", "--max-latency", "1ns", "--max-flops", "1TFLOP", "--format", "github"
    )
    assert result.returncode == 1
    (error,) = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert error.startswith(f"::error file={block_path},title=onnx-roofline%3A predicted latency::predicted latency ")
    assert "%0A" in error and "/lm_head/MatMul (MatMul)" in error  # contributors on their own lines
    assert "onnx-roofline check: FAIL" in result.stdout  # the summary follows, for the log


def test_skipped_checks_are_warnings_in_github_format(tmp_path, block_path):
    policy = write(tmp_path / "p.toml", '[dims]\nbatch = 1\n[module."transformer.h.7"]\nmax_latency = "1ms"\n')
    result = run_check(str(block_path), "--policy", str(policy), "--format", "github")
    assert result.returncode == 0
    assert "::warning file=" in result.stdout and "no node matches module 'transformer.h.7'" in result.stdout


# --- the GPT-2 scenarios (FP16 fixtures, h100) --------------------------------------------------

PREFILL = FIXTURES / "gpt2_prefill_fp16.onnx"
DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
DECODE_DIMS = ("--dim", "batch=1", "--dim", "past_sequence=1023")
PREFILL_DIMS = ("--dim", "batch=1", "--dim", "sequence=1024")
needs = {
    path: pytest.mark.skipif(not path.exists(), reason=f"fixture {path.name} not present") for path in (PREFILL, DECODE)
}


@needs[DECODE]
def test_gpt2_decode_meets_a_1ms_budget():
    result = run_check(str(DECODE), "--hw", "h100", *DECODE_DIMS, "--max-latency", "1ms", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr


@needs[PREFILL]
def test_gpt2_prefill_breaks_a_100us_budget():
    """The budget judges the predicted time, never below the floor: GPT-2's 85M non-embedding
    weights × 1,024 tokens × 2 FLOPs = 174 GFLOP, 176 µs at 989 TFLOP/s, so 100 µs cannot be met."""
    result = run_check(str(PREFILL), "--hw", "h100", *PREFILL_DIMS, "--max-latency", "100us", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    check, complete = json.loads(result.stdout)["checks"]
    assert check["measured"] > 2 * 85e6 * 1024 / 989.4e12 and check["contributors"]
    assert (complete["id"], complete["measured"]) == ("uncosted", 0)


@needs[DECODE]
def test_gpt2_decode_is_over_95_percent_memory_bound():
    result = run_check(str(DECODE), "--hw", "h100", *DECODE_DIMS, "--max-memory-bound-share", "95%", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    check, _complete = json.loads(result.stdout)["checks"]
    assert check["measured"] > 0.95
    assert all(c["op_type"] for c in check["contributors"])


# --- docs and the pre-commit hook stay true ----------------------------------------------------


def test_the_documented_policy_parses_and_every_flag_is_documented(tmp_path):
    from onnx_roofline.commands.gate.command import LIMITS
    from tests.conftest import REPO

    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    policy = load_policy(write(tmp_path / "roofline.toml", example))
    assert policy.max_latency == {"a100": 2e-3, "default": 5e-3, "h100": 1e-3}
    assert policy.module == {"model.transformer.h.0.attn": Budget(max_latency=20e-6)}
    for key, *_ in LIMITS:
        assert f"`--{key.replace('_', '-')} " in text


def test_pre_commit_hook_runs_the_check_command():
    from onnx_roofline.model.files import tomllib
    from tests.conftest import REPO

    yaml = pytest.importorskip("yaml")  # PyYAML: not a dependency, present wherever pre-commit is

    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "onnx-roofline-check" and hook["pass_filenames"] is False
    script, command = hook["entry"].split()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert script in scripts and command == "check"


def test_the_gate_states_what_its_figures_rest_on():
    """An MoE's figures rest on the routing assumed (uniform: tokens·k/E rows per expert, here
    8·2/4): the gate says so beside its verdict, in text and JSON, as the table does."""
    model = REPO / "tests" / "corpus" / "moe" / "optimum_qwen3_moe_decoder_with_past_model.onnx"
    args = (
        str(model),
        "--dim",
        "batch_size=1",
        "--dim",
        "sequence_length=8",
        "--dim",
        "past_sequence_length=24",
        "--max-latency",
        "1s",
    )
    text = run_check(*args).stdout.splitlines()
    assert text[3].startswith("experts: 2 MoE layers (4 experts, top-2")  # under the latency line (issue 40)
    assert text[4].startswith("assumed: uniform routing: each expert takes tokens·2/4 rows")
    labels = [line["label"] for line in json.loads(run_check(*args, "--format", "json").stdout)["qualifiers"]]
    assert labels == ["experts", "ASSUMED"]


def test_a_policy_sets_the_expert_load(tmp_path):
    """`expert_load` in a policy file is --expert-load's (a capacity bound, here), said beside the
    verdict; a flag overrides it; a malformed one is refused by name."""
    model = REPO / "tests" / "corpus" / "moe" / "optimum_qwen3_moe_decoder_with_past_model.onnx"
    policy = write(
        tmp_path / "policy.toml",
        'expert_load = "capacity=1.25"\n[dims]\nbatch_size = 1\nsequence_length = 8\npast_sequence_length = 24\n',
    )
    said = run_check(str(model), "--policy", str(policy)).stdout
    assert "assumed: capacity 1.25: every expert runs ceil(1.25·tokens·2/4) rows" in said and "uniform" not in said
    flagged = run_check(str(model), "--policy", str(policy), "--expert-load", "uniform").stdout
    assert "uniform routing" in flagged
    assert (
        "malformed expert load"
        in run_check(str(model), "--policy", str(write(tmp_path / "bad.toml", 'expert_load = "skew=0.5"\n'))).stderr
    )

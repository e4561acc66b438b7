"""The report people look at: alike nodes of different layers as one row (`--group`), modules
totalled across layers, transcendentals shown where they are not 0, one spelling per idea
across commands, `hw show` naming each source once."""

from __future__ import annotations

import json
import re

import pytest

import onnx_roofline as r
from onnx_roofline import Sizing
from onnx_roofline.commands.cli import main
from onnx_roofline.report.grouping import alike_groups, by_module_across_layers, layerless
from tests.conftest import FIXTURES

PREFILL = FIXTURES / "gpt2_prefill_fp16.onnx"
PREFILL_DIMS = {"batch": 1, "sequence": 1024}


@pytest.fixture(scope="module")
def prefill():
    return r.analyze(PREFILL, sizing=Sizing(dims=PREFILL_DIMS))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/model/transformer/h.11/mlp/c_fc/Gemm", "/model/transformer/h.*/mlp/c_fc/Gemm"),
        ("model.transformer.h.3.attn", "model.transformer.h.*.attn"),
        ("/layer1/layer1.2/conv1/Conv", "/layer1/layer1.*/conv1/Conv"),
        ("/model/transformer/h.0/attn/MatMul_1", "/model/transformer/h.*/attn/MatMul_1"),  # an op's own suffix stays
        ("Relu_12", "Relu_12"),
    ],
)
def test_layerless_names(name, expected):
    assert layerless(name) == expected


def test_twelve_c_fc_gemms_are_one_group(prefill):
    groups = {g.label: g for g in alike_groups(prefill)}
    c_fc = groups["/model/transformer/h.*/mlp/c_fc/Gemm"]
    assert c_fc.count == 12
    # [1024, 768] × [768, 3072] per layer: 2·M·K·N FLOPs (+ M·N for the bias), twelve layers
    assert c_fc.totals.flops == 12 * (2 * 1024 * 768 * 3072 + 1024 * 3072)
    assert sum(g.totals.flops for g in alike_groups(prefill)) == prefill.totals.flops  # a partition
    assert sum(g.count for g in alike_groups(prefill)) == prefill.totals.costed_nodes


def test_modules_across_layers_total_every_layers_attn_and_mlp(prefill):
    groups = {g.key: g for g in by_module_across_layers(prefill, 4)}
    per_layer = {g.key: g for g in r.by_module(prefill, 4)}
    for block in ("attn", "mlp"):
        layers = [per_layer[f"model.transformer.h.{i}.{block}"] for i in range(12)]
        assert groups[f"model.transformer.h.*.{block}"].totals.flops == sum(g.totals.flops for g in layers)
        assert len(groups[f"model.transformer.h.*.{block}"].nodes) == sum(len(g.nodes) for g in layers)


def test_group_flag_in_the_table(capsys):
    assert (
        main(
            [
                str(PREFILL),
                "--dim",
                "batch=1",
                "--dim",
                "sequence=1024",
                "--group",
                "--by",
                "module",
                "--depth",
                "4",
                "--top",
                "40",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"^/model/transformer/h\.\*/mlp/c_fc/Gemm ×12 ", out, re.M)
    assert "across layers (* = every layer)" in out and re.search(r"^model\.transformer\.h\.\*\.attn ", out, re.M)
    assert "h.7/mlp/c_fc/Gemm" not in out  # no layer's copy listed on its own


def test_transcendentals_are_shown_in_the_table(capsys):
    """Softmax over [1, 12, 1024, 1024]: one exp per element, in a column of its own, shown."""
    assert main([str(PREFILL), "--dim", "batch=1", "--dim", "sequence=1024", "--top", "60"]) == 0
    out = capsys.readouterr().out
    softmax = next(line for line in out.splitlines() if "/attn/Softmax " in line)
    assert f"+ {12 * 1024 * 1024 / 1e6:.2f} M transc." in softmax
    matmul = next(line for line in out.splitlines() if line.startswith("/model/lm_head/MatMul"))
    assert "transc." not in matmul  # shown where not 0 only


def test_hw_show_names_each_source_once(capsys):
    assert main(["hw", "show", "h100"]) == 0
    out = capsys.readouterr().out
    body, sources = out.split("\nsources:\n")
    cited = set(re.findall(r"\[(\d+)\]$", body, re.M))
    listed = re.findall(r"^  \[(\d+)\] (.+)$", sources, re.M)
    assert cited == {n for n, _ in listed}
    assert len({text for _, text in listed}) == len(listed)  # no source twice
    assert sum(out.count(text) for _, text in listed) == len(listed)


def test_one_spelling_per_idea(tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main([str(FIXTURES / "resnet50_fp16.onnx"), "--dim", "batch=1", "--format", "json", "-o", str(report)]) == 0
    for spelling in ("op-type", "op_type"):  # as --by spells it; the old spelling still works
        assert main(["plot", str(report), "-o", str(tmp_path / f"{spelling}.png"), "--color-by", spelling]) == 0
    model = str(FIXTURES / "resnet50_fp16.onnx")
    outputs = {}
    for fmt in ("table", "text"):  # every command's default text output is `table`; `text` is its former name
        assert main(["check", model, "--dim", "batch=1", "--max-latency", "1s", "--format", fmt]) == 0
        outputs[fmt] = capsys.readouterr().out
    assert outputs["table"] == outputs["text"] and "PASS" in outputs["table"]
    assert main(["check", model, "--dim", "batch=1", "--max-latency", "1s"]) == 0
    assert capsys.readouterr().out == outputs["table"]
    assert json.loads(report.read_text())["schema_version"] == 1

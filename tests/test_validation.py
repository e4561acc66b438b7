"""The validation table (issue 40, docs/validation.md): on every published run the deployed bound is
at most the measured time, and the predicted time is within ±25 % where the table says so, every
miss kept with its reason. Checked on the table's stored data (benchmarks/validation.json, which
`python -m benchmarks.validate_published` regenerates); the way the script scales a 2-layer export
to 32 layers is checked on small Llamas exported here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROWS = json.loads((REPO / "benchmarks" / "validation.json").read_text(encoding="utf-8"))
TABLE = (REPO / "docs" / "validation.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_no_published_run_beats_the_bound(row):
    assert 0 < row["bound_s"] <= row["measured_s"]
    assert row["predicted_s"] >= row["bound_s"]  # the prediction is never below the floor


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_the_prediction_holds_where_the_table_claims_it_and_a_miss_says_why(row):
    error = row["predicted_s"] / row["measured_s"] - 1
    assert row["error"] == pytest.approx(error)
    if row["within_tolerance"]:
        assert abs(error) <= 0.25
    else:
        assert abs(error) > 0.25 and row["reason"], "a miss is kept with its reason"
        assert row["reason"][:40] in TABLE


def test_a_miss_the_engine_explains_is_within_tolerance_counted_as_the_engine_ran():
    """Llama-2-70B's long generations on TensorRT-LLM v0.6.1 miss because its masked-MHA kernel reads
    each KV head once per query head (8 times at 64:8): counted so, each is within ±25 %."""
    explained = [row for row in ROWS if row.get("as_run_s") is not None]
    assert explained, "the 70B rows the engine's kernel explains"
    for row in explained:
        assert row["as_run_s"] > row["predicted_s"] and abs(row["as_run_s"] / row["measured_s"] - 1) <= 0.25, row[
            "name"
        ]


def test_the_per_query_head_reads_are_the_arithmetic_of_the_cache():
    """64 sequences, 2,048 + 2,047 steps on TP 2: step p reads 2,048 + p tokens per sequence of K and V over 80
    layers × 4 KV heads × 128 × 1 byte (FP8) on device 0, 7 more times, at 0.9 × 3.35 TB/s."""
    pytest.importorskip("onnx")
    from benchmarks.validate_published import per_query_head_reads_s

    tokens = 64 * sum(2048 + p for p in range(2047))
    assert per_query_head_reads_s(64, 2048, 2048, 2) == pytest.approx(7 * tokens * 80 * 2 * 4 * 128 / (0.9 * 3.35e12))


def test_the_runs_the_issue_names_are_in_the_table():
    names = [row["name"] for row in ROWS]
    assert names[0].startswith("ResNet-50 int8") and "mlcommons/inference_results_v4.0" in ROWS[0]["source"]
    for wanted in ("128/128 at batch 768", "2048/2048 at batch 48", "2048/128 at batch 80", "first token at 2048"):
        (row,) = [row for row in ROWS if row["name"].startswith("Llama-2-7B FP8, ") and wanted in row["name"]]
        assert row["within_tolerance"], f"{wanted}: the issue's rows hold the prediction's ±25 % ({row['error']:+.0%})"
    # the measured times from the published figures: 768·128 tokens at 19,694 tok/s; one image at 88,714.3 images/s
    assert next(r for r in ROWS if "batch 768" in r["name"])["measured_s"] == pytest.approx(768 * 128 / 19694)
    assert ROWS[0]["measured_s"] == pytest.approx(1 / 88714.3)
    for row in ROWS:
        assert row["name"] in TABLE


@pytest.mark.slow
def test_a_figure_at_n_layers_is_the_one_layer_figure_plus_n_minus_one_layers(tmp_path):
    """The script's scaling, T(n) = T(1) + (n − 1)·(T(2) − T(1)), against a 3-layer export."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from benchmarks.validate_published import export_llama, scaled, times

    shape = {"hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
             "max_position_embeddings": 512, "rms_norm_eps": 1e-5}  # fmt: skip
    dims = {"batch": 4, "past_sequence": 100}
    one, two, three = (times(export_llama(layers, True, tmp_path, shape), dims, "fp16") for layers in (1, 2, 3))
    assert scaled(one, two, 3) == pytest.approx(three, rel=1e-9)

"""The deployed view made faster (issue 44) gives the reports it gave before.

The reference is the code itself as it was before the change: the files the change touched, taken
from REFERENCE_COMMIT with git, laid over a copy of the current package, run in a subprocess on
the same models. Every figure of each deployed report (its JSON: kernels, members, bytes, FLOPs,
floor and predicted time, notes, memory) must come out equal, so nothing here is a number the
tool printed. Skipped where the checkout has no git history holding that commit. When the deployed
view is meant to change its figures, this test has served its purpose: move REFERENCE_COMMIT on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO

REFERENCE_COMMIT = "84acca218227e7f710020ac759d0a357ff71d05d"  # the deployed view before issue 44's speed-up
CHANGED = ("onnx_roofline/views/deployed.py", "onnx_roofline/views/fusion.py", "onnx_roofline/views/dead.py",
           "onnx_roofline/views/digraph.py", "onnx_roofline/views/mask.py")  # fmt: skip
"""The files whose workings the speed-up changed (graph.py only gained Dataflow.order, which the old
ones do not read, and stays current: other modules import what was added to it since; mask.py's
window constants, read where asked since stop 51, are the old table's)."""
CORPUS = REPO / "tests" / "corpus"
MODELS = (
    *sorted(FIXTURES.glob("*.onnx")),
    *(CORPUS / "models" / name for name in ("ts_gpt2_past.onnx", "dynamo_llama_past.onnx", "genai_qwen2_int4.onnx", "ortopt_bert.onnx",
                                            "qdq_resnet.onnx", "qdq_bert.onnx", "hqq_llama_past.onnx", "nb4_llama_past.onnx",
                                            "ortopt_gpt2_past.onnx", "opset11_loop_rnn.onnx", "ts_whisper_encoder.onnx")),
    CORPUS / "moe" / "optimum_qwen3_moe_decoder_with_past_model.onnx",
    CORPUS / "moe" / "optimum_gpt_oss_decoder_with_past_model.onnx",
    CORPUS / "shipped" / "gpt2_decoder_model_merged.onnx",
)  # fmt: skip

DIGEST = """
import json, sys
from onnx_roofline.analysis import analyze
from onnx_roofline.views.deployed import COPY, INPLACE, deploy
out = {}
for path in sys.argv[1:]:
    report = analyze(path, default_dims=True)
    for mode in (INPLACE, COPY):
        out[f"{path} {mode}"] = deploy(report, mode).to_dict()
print(json.dumps(out, sort_keys=True, default=repr))
"""


def _digest(cwd) -> dict:
    done = subprocess.run([sys.executable, "-c", DIGEST, *map(str, MODELS)], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _reference_package(tmp_path):
    """A copy of the current package with the CHANGED files as they were at REFERENCE_COMMIT."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git checkout to take the reference from")
    known = subprocess.run(["git", "cat-file", "-e", f"{REFERENCE_COMMIT}^{{commit}}"], cwd=REPO, capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"the reference commit {REFERENCE_COMMIT[:7]} is not in this checkout's history")
    shutil.copytree(REPO / "onnx_roofline", tmp_path / "onnx_roofline", ignore=shutil.ignore_patterns("__pycache__"))
    for path in CHANGED:
        old = subprocess.run(
            ["git", "show", f"{REFERENCE_COMMIT}:{path}"], cwd=REPO, capture_output=True, check=True
        ).stdout
        (tmp_path / path).write_bytes(old)
    return tmp_path


def test_the_deployed_reports_are_those_of_the_code_before_the_speed_up(tmp_path):
    reference = _digest(_reference_package(tmp_path))
    current = _digest(REPO)
    assert current.keys() == reference.keys()
    for key in reference:
        assert current[key] == reference[key], key

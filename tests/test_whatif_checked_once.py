"""A what-if study reads one file at many points: it is validated and checked for conformance once
(the session's first analysis), and every study says what that check found, as analyze does: a
warning on stderr (exit 0) and `invalid` in its JSON. Before, each point validated and checked a
copy of the model held in memory, where external locations cannot be placed: a file whose weights
lie outside its folder passed every study silently."""

from __future__ import annotations

import json

import onnx
import pytest

import onnx_roofline.analysis as analysis
import onnx_roofline.model.loader as loader
from onnx_roofline.commands.cli import main
from onnx_roofline.commands.whatif import critical, sweep
from onnx_roofline.commands.whatif.session import Session
from onnx_roofline.model.conformance import EXTERNAL_DATA
from tests.conftest import FIXTURES, REPO

DECODE = FIXTURES / "gpt2_decode_fp32.onnx"
PREFILL = FIXTURES / "gpt2_prefill_fp32.onnx"


def _escaping(model: onnx.ModelProto, folder) -> str:
    """The model saved in `folder`/sub with its first external weight's location leaving the folder."""
    tensor = next(t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    next(entry for entry in tensor.external_data if entry.key == "location").value = "../outside.bin"
    (folder / "sub").mkdir(exist_ok=True)
    path = folder / "sub" / "model.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def escaping_decode(tmp_path_factory):
    return _escaping(onnx.load(DECODE, load_external_data=False), tmp_path_factory.mktemp("decode"))


def test_a_session_validates_and_checks_its_file_once(monkeypatch):
    validations, checks = [], []
    validate, check = loader.check_model, analysis.conformance
    monkeypatch.setattr(loader, "check_model", lambda *a: validations.append(a) or validate(*a))
    monkeypatch.setattr(analysis, "conformance", lambda *a, **k: checks.append(a) or check(*a, **k))
    session = Session(DECODE, dims={"past_sequence": 127})
    result = sweep(session, {"batch": (1, 2, 4, 8)})
    assert len(result.points) == 4
    assert len(validations) == 1  # as the session loaded the file; each point's copy is not validated again
    assert len(checks) == 1  # the first point's conformance check (the file's own, without inference)
    assert session.invalid == () and result.to_dict()["invalid"] == []


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "--dim", "batch=1,2", "--dim", "past_sequence=31"],
        ["critical", "--dim", "past_sequence=31"],
        ["compare", "--hw", "h100,a100", "--dim", "batch=1", "--dim", "past_sequence=31"],
        ["context", "--dim", "batch=1", "--context", "16,32"],
        ["serve", "--batch", "1,2"],
        ["fuse", "--dim", "batch=1", "--dim", "past_sequence=31"],
    ],
    ids=lambda command: command[0],
)
def test_every_study_says_a_file_a_runtime_would_refuse(command, escaping_decode, capsys):
    study, *options = command
    assert main([study, escaping_decode, *options, "--format", "json"]) == 0  # as analyze: said, not refused
    out, err = capsys.readouterr()
    invalid = json.loads(out)["invalid"]
    assert [flag["source"] for flag in invalid] == [EXTERNAL_DATA]
    assert "'../outside.bin' leaves the model's folder" in invalid[0]["message"]
    assert err.count("onnx-roofline: warning: INVALID: external data:") == 1
    assert main(["analyze", escaping_decode, "--dim", "batch=1", "--dim", "past_sequence=31", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["invalid"] == invalid  # the same finding analyze makes


def test_serve_says_an_invalid_prefill_file_by_its_name(tmp_path, capsys):
    prefill = _escaping(onnx.load(PREFILL, load_external_data=False), tmp_path)
    assert main(["serve", str(DECODE), "--prefill", prefill, "--prompt", "16", "--batch", "1", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["invalid"] == []  # the decode graph's own file is fine
    assert [flag["source"] for flag in result["prefill_invalid"]] == [EXTERNAL_DATA]
    assert f"onnx-roofline: warning: INVALID: {prefill}: external data:" in err


def test_serve_refuses_a_prefill_graph_with_no_sequence_to_bind(capsys):
    """A decode graph given as --prefill (its token input [batch, 1]): one line, exit 2, not a traceback."""
    assert main(["serve", str(DECODE), "--prefill", str(DECODE), "--prompt", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnx-roofline: error: --prefill") and "no symbolic sequence" in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def unbindable_past(tmp_path_factory):
    """GPT-2 decode with its past length named `zzz`: no role gives it a size, so under --partial
    every node downstream of the past (the attention's) is left uncosted."""
    model = onnx.load(DECODE, load_external_data=False)
    for value in [*model.graph.input, *model.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param == "past_sequence":
                dim.dim_param = "zzz"
    path = tmp_path_factory.mktemp("zzz") / "decode.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize(
    "command",
    [["sweep", "--dim", "batch=1,2"], ["critical"], ["critical", "--view", "deployed"],
     ["compare", "--hw", "h100,a100", "--dim", "batch=1"], ["fuse", "--dim", "batch=1"]],
    ids=lambda command: "-".join(command[:1] + command[2:3]),
)  # fmt: skip
def test_a_partial_study_says_what_it_left_uncosted(command, unbindable_past, capsys):
    """As analyze --partial does: on stderr (not with --quiet) and in the JSON, the point with the
    most nodes uncosted, with analyze's own count and root cause at those dims. (critical's
    deployed view raised AttributeError there: a dropped kernel's members, uncosted, were read
    for a compute time it does not have.)"""
    study, *options = command
    assert main([study, unbindable_past, *options, "--partial", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    uncosted = json.loads(out)["uncosted"]
    assert main(["analyze", unbindable_past, "--partial", "--format", "json",
                 *(f"--dim={name}={size}" for name, size in uncosted["dims"].items())]) == 0  # fmt: skip
    expected = json.loads(capsys.readouterr().out)["uncosted"]
    assert expected["count"] > 0 and {k: uncosted[k] for k in expected} == expected
    assert err.count("onnx-roofline: warning: ") == 1 and expected["message"] in err
    assert "the study's figures leave them out" in err
    assert main([study, unbindable_past, *options, "--partial", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_complete_study_says_nothing_uncosted(capsys):
    assert main(["critical", str(DECODE), "--dim", "past_sequence=127", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["uncosted"] is None and err == ""


def test_critical_gives_no_compute_time_to_a_kernel_that_launches_nothing():
    """The deployed view's kernels folded at load or dropped launch nothing and do no work per run
    (their cost is nothing); critical's compute-bound share is the deployed kernels' own. On a
    small fp16 GPT-2 (hidden 128: every matmul memory-bound at any batch) no deployed kernel is
    compute-bound even at batch 2^20, so the share's limit is 0 — where the folded and dropped
    kernels' members (a mask's comparisons, casts of constants) gave it 5e-5 before."""
    corpus = REPO / "tests" / "corpus" / "models"
    dims = {"sequence": 8, "past_sequence": 12, "total_sequence": 20}
    session = Session(corpus / "ortopt_gpt2_past_fp16.onnx", dims=dims)
    study = critical(session, "batch", "deployed")
    kernels = session.view(session.report({"batch": 1 << 20}), "deployed").nodes
    assert any(k.launches == 0 and k.cost is not None and k.members for k in kernels)  # there are such kernels
    assert not any(k.placement is not None and k.placement.bound == "compute" and k.time_s for k in kernels)
    assert study.share_limit == 0.0

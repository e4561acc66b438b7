"""A runnable size for a traced graph (issue 42, shapes/traced.py): a PaddleOCR-style text
recognizer whose neck folds the height its backbone leaves into a Reshape traced at export runs
only at the input height that pools to that many rows. The plain command solves for it, binds it
and says so; a height given that cannot run is refused with the one that can (a hint the test
follows). The expected height comes from the backbone's arithmetic, and onnxruntime runs there. A
traced Mamba (transformers, TorchScript) runs only at the sequence it was traced at, which a
broadcast fixes: the same."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onnx_roofline.commands.cli import main
from onnx_roofline.errors import EXIT_OK

POOLS = (2, 2, 2, 2)  # the backbone halves the height four times (floor division, as MaxPool's)
TRACED_ROWS = 3  # the rows the neck's Reshape was traced at: a 48-pixel line, PaddleOCR's input height
CHANNELS, HIDDEN, CLASSES, WIDTH = 32, 48, 37, 320


def _recognizer(path) -> str:
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)

    def block(inputs, outputs, pool):
        return nn.Sequential(
            nn.Conv2d(inputs, outputs, 3, padding=1), nn.BatchNorm2d(outputs), nn.ReLU(), nn.MaxPool2d(pool, pool)
        )

    class Recognizer(nn.Module):
        """A CRNN as PaddleOCR's recognizers are shaped: height ÷16, width ÷4, then the height's
        rows folded into the channels with the size traced at export, a BiLSTM and a classifier."""

        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(block(3, 16, (2, 2)), block(16, CHANNELS, (2, 2)),
                                          block(CHANNELS, CHANNELS, (2, 1)),
                                          block(CHANNELS, CHANNELS, (2, 1)))  # fmt: skip
            self.rnn = nn.LSTM(CHANNELS * TRACED_ROWS, HIDDEN, bidirectional=True, batch_first=True)
            self.head = nn.Linear(2 * HIDDEN, CLASSES)

        def forward(self, x):
            features = self.backbone(x)
            batch, channels, _, width = features.shape
            sequence = features.reshape(batch, channels * TRACED_ROWS, width).permute(0, 2, 1)
            return self.head(self.rnn(sequence)[0])

    torch.onnx.export(Recognizer().eval(), (torch.randn(1, 3, 48, WIDTH),), str(path), input_names=["x"],
                      output_names=["logits"],
                      dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"}}, dynamo=False)  # fmt: skip
    return str(path)


def _rows(height: int) -> int:
    for pool in POOLS:
        height //= pool
    return height


def _runs(path: str, height: int) -> bool:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    try:
        session.run(None, {"x": np.zeros((1, 3, height, WIDTH), np.float32)})
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def recognizer(tmp_path_factory):
    return _recognizer(tmp_path_factory.mktemp("ocr") / "recognizer.onnx")


def test_the_plain_command_binds_the_height_the_reshape_was_traced_at(recognizer, capsys):
    solved = min(h for h in range(1, 1024) if _rows(h) == TRACED_ROWS)  # the least height that pools to 3 rows
    assert (
        solved == 48 and _runs(recognizer, solved) and not _runs(recognizer, solved - 1) and not _runs(recognizer, 224)
    )
    assert main([recognizer, "--format", "json"]) == EXIT_OK
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["dims"]["height"] == solved
    assert model["dim_roles"]["height"]["source"] == "solved"
    assert model["solved_dims"]["height"] == "the size Reshape '/Reshape' was traced at"
    assert main([recognizer]) == EXIT_OK
    captured = capsys.readouterr()
    assert "height=48 (the size Reshape '/Reshape' was traced at" in captured.out  # said on stdout, beside the dims


def test_a_height_given_that_cannot_run_names_the_one_that_does(recognizer, capsys):
    assert main([recognizer, "--dim", "height=64"]) == 2
    err = capsys.readouterr().err
    assert "a size the graph fixed when it was exported (traced) disagrees with these dims" in err
    hint = err.strip().rsplit(": ", 1)[1].split()
    assert hint == ["--dim", "height=48"]
    assert main([recognizer, *hint]) == EXIT_OK  # the hint, followed
    assert "height=48" in capsys.readouterr().out


def test_the_solved_height_is_what_verify_runs(recognizer, capsys):
    assert main(["verify", recognizer, "--dim", "batch=1", "--dim", "height=48", "--dim", f"width={WIDTH}"]) == EXIT_OK
    assert "verdict: PASS" in capsys.readouterr().out


# --- a traced Mamba: the sequence its export saw, broadcast against ---------------------------------

TRACED_SEQUENCE = 16


@pytest.fixture(scope="module")
def mamba(tmp_path_factory) -> str:
    """transformers' Mamba (random weights, a small config) traced by TorchScript at 16 tokens: its
    mixer cuts the causal conv's output to the sequence it saw, a constant the gate is multiplied by."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.MambaConfig(vocab_size=256, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                                      conv_kernel=4, use_cache=False)  # fmt: skip
    model = transformers.MambaForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).logits

    path = tmp_path_factory.mktemp("mamba") / "mamba.onnx"
    torch.onnx.export(Logits(), (torch.randint(0, 256, (1, TRACED_SEQUENCE)),), str(path), input_names=["input_ids"],
                      output_names=["logits"], dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}}, dynamo=False)  # fmt: skip
    return str(path)


def test_a_traced_mamba_analyzes_at_the_sequence_it_was_traced_at(mamba, capsys):
    import onnxruntime as ort

    session = ort.InferenceSession(mamba, providers=["CPUExecutionProvider"])
    ids = lambda length: {"input_ids": np.zeros((1, length), np.int64)}  # noqa: E731
    assert session.run(None, ids(TRACED_SEQUENCE))[0].shape == (1, TRACED_SEQUENCE, 256)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type: the graph runs at its traced length only
        session.run(None, ids(TRACED_SEQUENCE + 1))
    assert main([mamba, "--format", "json"]) == EXIT_OK
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["dims"]["sequence"] == TRACED_SEQUENCE and model["dim_roles"]["sequence"]["source"] == "solved"
    assert main([mamba, "--dim", "sequence=512"]) == 2
    hint = capsys.readouterr().err.strip().rsplit(": ", 1)[1].split()
    assert hint == ["--dim", f"sequence={TRACED_SEQUENCE}"]
    assert main([mamba, *hint]) == EXIT_OK  # the hint, followed

"""verify on fragile graphs (issue 42): a run onnxruntime fails on verify's synthesized values (an MoE
expert that gets no token) is tried again at other seeds, and where every seed fails, the error
names the flag that runs it (a test follows it); bf16 weights are fed as floating point, and the
size limits name the limit that binds."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline.commands.cli import main
from onnx_roofline.commands.verify import verify
from onnx_roofline.commands.verify.inputs import make_feeds
from onnx_roofline.errors import EXIT_OK
from tests import hostile

E, K, HIDDEN, WIDTH = 8, 2, 32, 64  # experts, top-k, hidden, expert width


def _external(name: str, data_type: int, dims: tuple[int, ...]) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=data_type, dims=list(dims), data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value="absent.bin")
    return tensor


def _bf16_matmul(k: int, n: int) -> onnx.ModelProto:
    """x · float(w), w a bf16 weight whose data file is absent (onnxruntime's CPU has no bf16 MatMul)."""
    nodes = [
        helper.make_node("Cast", ["w"], ["w32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "w32"], ["y"], name="mm"),
    ]
    return hostile.model(nodes, [("x", TensorProto.FLOAT, [2, k])], [("y", TensorProto.FLOAT, [2, n])],
                         [_external("w", TensorProto.BFLOAT16, (k, n))])  # fmt: skip


def test_a_bf16_model_whose_weights_are_absent_is_verified(tmp_path, capsys):
    path = hostile.save(_bf16_matmul(64, 32), tmp_path / "bf16.onnx")
    assert main(["verify", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "weights: 0 loaded, 1 synthesized" in out and "verdict: PASS" in out


def test_a_bf16_model_too_large_names_its_weights_not_dims(tmp_path, capsys):
    path = hostile.save(_bf16_matmul(100_000, 100_000), tmp_path / "big.onnx")
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not floating-point" not in err and "bind smaller dims" not in err
    assert "its weights alone take 20.00 GB, which no dim changes" in err  # 10^10 bf16 values of 2 bytes, fed once


def test_integer_weights_over_protobufs_limit_name_that_limit(tmp_path, capsys):
    lookup = hostile.model([helper.make_node("Gather", ["table", "i"], ["y"])], [("i", TensorProto.INT64, [2])],
                           [("y", TensorProto.INT64, [2, 50_000])],
                           [_external("table", TensorProto.INT64, (50_000, 50_000))])  # fmt: skip
    assert main(["verify", str(hostile.save(lookup, tmp_path / "lookup.onnx"))]) == 2
    err = capsys.readouterr().err
    assert "integer, quantized and packed weights inline (20.00 GB)" in err  # 2.5·10^9 int64 of 8 bytes
    assert (
        "protobuf's 2 GB limit on one model" in err
        and "verify a smaller model" in err
        and "bind smaller dims" not in err
    )


# --- an MoE whose expert fails without a token ------------------------------------------------------


def _fragile_moe(path) -> str:
    """A Mixtral-style MoE (TorchScript export) whose experts read their first token's row: an
    expert that gets no token fails in onnxruntime (a Gather of row 0 of an empty tensor)."""
    torch = pytest.importorskip("torch")
    nn, functional = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(HIDDEN, WIDTH, bias=False), nn.Linear(WIDTH, HIDDEN, bias=False)

        def forward(self, x):
            return self.down(functional.silu(self.up(x - x[0])))  # relative to the expert's first token

    class Moe(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(HIDDEN, E, bias=False)
            self.experts = nn.ModuleList(Expert() for _ in range(E))

        def forward(self, x):
            flat = x.reshape(-1, HIDDEN)
            weights, chosen = torch.topk(functional.softmax(self.gate(flat), dim=1), K, dim=-1)
            out = torch.zeros_like(flat)
            mask = functional.one_hot(chosen, num_classes=E).permute(2, 1, 0)
            for index, expert in enumerate(self.experts):
                slot, token = torch.where(mask[index])
                out.index_add_(0, token, expert(flat[token]) * weights[token, slot, None])
            return out.reshape(x.shape)

    torch.onnx.export(Moe().eval(), (torch.randn(1, 32, HIDDEN),), str(path), input_names=["x"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}}, dynamo=False)  # fmt: skip
    return str(path)


def _runs(model: onnx.ModelProto, dims: dict[str, int], seed: int) -> bool:
    """Whether onnxruntime runs the model on the inputs verify makes at this seed."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        session.run(None, make_feeds(model, dims, None, seed))
    except Exception:
        return False
    return True


def test_too_few_tokens_for_the_experts_names_the_dim_that_runs_and_it_does(tmp_path, capsys):
    path = _fragile_moe(tmp_path / "moe.onnx")
    # under uniform routing some expert of 8 gets none of n tokens (2 of 8 each) with chance ≤ 8·(6/8)^n;
    # the fewest n for which that is at most 1 %:
    needed = next(n for n in range(1, 100) if E * (1 - K / E) ** n <= 0.01)
    assert needed == 24  # 8·0.75^24 = 0.0080; 8·0.75^23 = 0.0107
    model = onnx.load(path)
    assert not any(
        _runs(model, {"batch": 1, "seq": 4}, seed) for seed in range(4)
    )  # 8 choices cannot reach 8 experts twice
    assert main(["verify", path, "--dim", "batch=1", "--dim", "seq=4"]) == 2
    err = capsys.readouterr().err
    assert "at seeds 0 to 3 alike" in err and "an MoE of 8 experts, top-2, routes 4 tokens" in err
    hint = err.rsplit(": ", 1)[1].split()
    assert hint == ["--dim", f"seq={needed}"]
    assert main(["verify", path, "--dim", "batch=1", *hint]) == EXIT_OK  # the hint, followed
    assert "verdict: PASS" in capsys.readouterr().out


def test_a_seed_onnxruntime_fails_on_is_followed_by_the_next(tmp_path):
    model = onnx.load(_fragile_moe(tmp_path / "moe.onnx"))
    dims = {"batch": 1, "seq": 6}  # 12 choices over 8 experts: some seeds leave one empty, some not
    outcomes = [_runs(model, dims, seed) for seed in range(12)]
    seed = next((s for s in range(11) if not outcomes[s] and outcomes[s + 1]), None)
    assert seed is not None, outcomes
    result = verify(model, dims=dims, seed=seed)
    assert result.verdict == "pass"
    assert result.attempts.seed == seed + 1 and [s for s, _ in result.attempts.failed] == [seed]
    assert "indices element out of data bounds" in result.attempts.failed[0][1]
    assert result.attempts.note.startswith(f"ran at seed {seed + 1}: onnxruntime failed at seed {seed} ")

"""Many models at once: `onnx-roofline a.onnx b.onnx …` or a folder gives one row per model,
analyzed as the single command would, in parallel with -j; a broken model is its row's error."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_roofline.commands.cli import main


def _matmul(path, n):
    """x [64, 256] · W [256, n]: 2·64·256·n FLOPs."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.zeros((256, n), np.float32), "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _rows(capsys, *args):
    code = main([*args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)["models"]


def test_one_row_per_model_in_the_order_given(tmp_path, capsys):
    a, b = _matmul(tmp_path / "a.onnx", 128), _matmul(tmp_path / "b.onnx", 512)
    code, rows = _rows(capsys, b, a)
    assert code == 0
    assert [(r["model"], r["flops"], r["uncosted"]) for r in rows] == [
        (b, 2 * 64 * 256 * 512, 0),
        (a, 2 * 64 * 256 * 128, 0),
    ]
    assert rows[1]["bytes"] == 4 * (64 * 256 + 256 * 128 + 64 * 128)  # x and W read, y written, float32


def test_a_folder_and_parallel_jobs_give_the_same_rows(tmp_path, capsys):
    for n in (64, 128, 256):
        _matmul(tmp_path / f"m{n}.onnx", n)
    _, serial = _rows(capsys, str(tmp_path))
    _, parallel = _rows(capsys, str(tmp_path), "-j", "2")
    assert serial == parallel
    assert [r["model"].rsplit("/", 1)[-1] for r in serial] == ["m128.onnx", "m256.onnx", "m64.onnx"]  # sorted names


def test_a_model_that_fails_is_its_rows_error_and_exit_2(tmp_path, capsys):
    good = _matmul(tmp_path / "good.onnx", 64)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    code, rows = _rows(capsys, good, str(bad))
    assert code == 2
    assert rows[0]["error"] is None and "not a valid ONNX model" in rows[1]["error"]


def test_one_model_formats_are_refused_for_several(tmp_path, capsys):
    a = _matmul(tmp_path / "a.onnx", 64)
    assert main([a, a, "--format", "html"]) == 2
    assert "is for one model" in capsys.readouterr().err

"""A crash in a C++ pass does not take the tool down (model/isolation.py, docs/hostile-inputs.md
"C++ crashes"): ONNX's shape inference segfaults on skl2onnx's decision-path tree (a
TreeEnsembleRegressor feeding a LabelEncoder), which onnxruntime runs. Every command says one line
or costs the rest; none dies of a signal. A pass killed by a signal is a shape warning, and the
sweep types the graph instead; onnxruntime killed in `verify` is exit 2 with one line.

Every test that simulates a crash kills only a forked child: where the call ran in this process
instead, the stand-in raises rather than take pytest down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_roofline import Sizing, analyze
from onnx_roofline.commands.cli import main
from onnx_roofline.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE, RooflineError
from onnx_roofline.model import inferred, isolation
from onnx_roofline.model.isolation import ENV, PassCrashed, beside, crash_prone, isolated, pool_worker
from onnx_roofline.shapes import engine

ML = "ai.onnx.ml"
PARENT = os.getpid()

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation forks; without fork passes run in-process")


def decision_path_tree() -> onnx.ModelProto:
    """The smallest graph ONNX's inference crashes on (onnx 1.23): a one-leaf TreeEnsembleRegressor
    whose output a LabelEncoder maps to strings, as skl2onnx writes a tree's decision path."""
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["path"], domain=ML, n_targets=1, post_transform="NONE",
        nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_modes=["LEAF"], nodes_values=[0.0],
        nodes_truenodeids=[0], nodes_falsenodeids=[0], nodes_hitrates=[1.0], nodes_missing_value_tracks_true=[0],
        target_treeids=[0], target_nodeids=[0], target_ids=[0], target_weights=[0.0],
    )  # fmt: skip
    label = helper.make_node(
        "LabelEncoder", ["path"], ["text"], domain=ML, keys_floats=[0.0], values_strings=["0"], default_string="?"
    )
    graph = helper.make_graph([tree, label], "tree_path", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("text", TensorProto.STRING, ["N", 1])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 2)])
    model.ir_version = 8
    return model


def skl2onnx_tree() -> onnx.ModelProto:
    """A DecisionTreeClassifier converted with decision_path=True: TreeEnsembleClassifier,
    TreeEnsembleRegressor → LabelEncoder → Reshape."""
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.datasets import load_iris
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_iris(return_X_y=True)
    clf = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    return skl2onnx.to_onnx(clf, X[:1].astype(np.float32), options={id(clf): {"decision_path": True, "zipmap": False}})


def _segfault(*_args):
    """What a crashing pass does: a SIGSEGV to its own process (only in a forked child)."""
    if os.getpid() == PARENT:
        raise AssertionError("the pass ran in the test's own process, not a child")
    os.kill(os.getpid(), signal.SIGSEGV)


def relu_chain() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Tanh", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# --- the helper ----------------------------------------------------------------------------------------


def test_a_result_and_an_exception_come_back_from_the_child():
    assert isolated("a pass", lambda a, b: (os.getpid(), a + b), 2, 3)[1] == 5
    assert isolated("a pass", lambda: os.getpid()) != PARENT  # risky by default: forked
    with pytest.raises(ValueError, match="no such value"):
        isolated("a pass", lambda: (_ for _ in ()).throw(ValueError("no such value")))
    with pytest.raises(onnx.shape_inference.InferenceError):  # onnx's own types pickle across
        isolated("a pass", lambda: onnx.shape_inference.infer_shapes(_mismatched_add(), strict_mode=True))


def _mismatched_add() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_child_killed_by_a_signal_or_gone_without_a_result_is_pass_crashed():
    with pytest.raises(PassCrashed, match=r"^a pass crashed \(killed by SIGSEGV\) in a child process$") as crashed:
        isolated("a pass", _segfault)
    assert crashed.value.how == "killed by SIGSEGV" and isinstance(
        crashed.value, RooflineError
    )  # exit 2 where uncaught
    with pytest.raises(PassCrashed, match=r"exited with status 3 without a result"):
        isolated("a pass", lambda: os._exit(3))


def test_the_policy_forks_the_risky_calls_all_or_none(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert isolated("a pass", os.getpid, risky=False) == PARENT  # the default: only risky calls fork
    assert isolated("a pass", os.getpid, risky=True) != PARENT
    monkeypatch.setenv(ENV, "all")
    assert isolated("a pass", os.getpid, risky=False) != PARENT
    monkeypatch.setenv(ENV, "0")
    assert isolated("a pass", os.getpid, risky=True) == PARENT


def test_beside_runs_the_call_in_a_child_on_the_memory_as_it_was_at_the_fork(monkeypatch):
    """isolation.beside: the call runs in a child while the block goes on; the child sees memory as
    it was when it began (the block's later changes are its own), and its exception comes back."""
    monkeypatch.setattr(isolation, "spare_core", lambda: True)
    seen = [1]
    with beside("a pass", lambda: (os.getpid(), list(seen))) as result:
        seen.append(2)  # after the fork: the child's copy still holds [1]
        assert result() == result() and result()[1] == [1] and result()[0] != PARENT  # asked twice, one child
    with (
        beside("a pass", lambda: (_ for _ in ()).throw(ValueError("no such value"))) as result,
        pytest.raises(ValueError, match="no such value"),
    ):
        result()
    with beside("a pass", _segfault) as result, pytest.raises(PassCrashed, match="killed by SIGSEGV"):
        result()


def test_a_child_beside_a_block_that_raises_is_ended_and_reaped(monkeypatch):
    """A block that fails before asking for the result leaves no child behind: killed, reaped,
    its pipe closed (a library caller analyzing many graphs would otherwise gather them)."""
    monkeypatch.setattr(isolation, "spare_core", lambda: True)
    forked = []
    real = isolation._fork
    monkeypatch.setattr(isolation, "_fork", lambda fn, args: forked.append(real(fn, args)) or forked[-1])
    with pytest.raises(KeyError), beside("a pass", time.sleep, 60):
        raise KeyError("the block failed")
    ((pid, read),) = forked
    with pytest.raises(ChildProcessError):  # reaped already
        os.waitpid(pid, os.WNOHANG)
    with pytest.raises(OSError):  # the pipe closed
        os.fstat(read)


def test_beside_runs_the_call_here_first_where_no_child_would_help(monkeypatch):
    """With isolation off (ENV "0"), one core, or another thread running (a fork would copy this
    one alone, and any lock the other holds), the call runs in this process before the block, as
    it did before beside existed."""
    for setup in (
        lambda: monkeypatch.setenv(ENV, "0"),
        lambda: monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}),
        lambda: monkeypatch.setattr(threading, "active_count", lambda: 2),
    ):
        setup()
        order: list[str] = []
        with beside("a pass", lambda order=order: order.append("call") or os.getpid()) as result:
            order.append("block")
            assert result() == PARENT and order == ["call", "block"]
        monkeypatch.undo()


def test_a_pool_worker_runs_no_child_beside_itself(monkeypatch):
    """A `-j` worker (pool_worker, the summary's initializer) has siblings on the other cores: a
    child beside it would add only its memory, so it has none (checked in a child of this test,
    which the worker's start would otherwise mark)."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1})  # two cores, whatever this machine has
    started = isolated("a worker", lambda: (isolation.spare_core(), pool_worker(PARENT), isolation.spare_core()))
    assert started == (True, None, False)


def test_a_model_is_crash_prone_where_it_imports_ai_onnx_ml():
    assert crash_prone(decision_path_tree())
    assert not crash_prone(relu_chain())
    function = helper.make_function("local", "F", ["x"], ["y"], [], [helper.make_opsetid(ML, 2)])
    calling = relu_chain()
    calling.functions.append(function)
    assert crash_prone(calling)  # a function's own imports count


# --- the shape engine carries on ---------------------------------------------------------------------


def test_a_crash_of_onnx_inference_is_a_warning_and_the_sweep_types_the_graph(monkeypatch):
    monkeypatch.setenv(ENV, "all")
    monkeypatch.setattr(inferred, "_declared_after_inference", _segfault)
    report = analyze(relu_chain(), hw="h100")
    assert report.model.shape_warnings == (
        "ONNX shape inference of the whole graph crashed in a child process (killed by SIGSEGV); typed node by node instead",
    )
    assert report.model.shape_inference == "onnx+sweep"
    assert [node.status for node in report.nodes] == ["ok", "ok"]
    assert report.nodes[1].outputs[0].shape == (2, 8)


def test_a_crash_of_one_nodes_inference_is_a_warning_and_its_root_cause(monkeypatch):
    """ONNX's pass crashed on the graph, so the sweep isolates each node's inference; the one that
    crashes too is named, the others typed."""
    monkeypatch.setenv(ENV, "all")
    monkeypatch.setattr(inferred, "_declared_after_inference", _segfault)
    infer_node = onnx.shape_inference.infer_node_outputs

    def crash_on_tanh(schema, node, *args, **kwargs):
        return _segfault() if node.op_type == "Tanh" else infer_node(schema, node, *args, **kwargs)

    monkeypatch.setattr(engine.onnx.shape_inference, "infer_node_outputs", crash_on_tanh)
    report = analyze(relu_chain(), hw="h100", partial=True)
    assert (
        report.model.shape_warnings[1]
        == "ONNX shape inference of node 'Tanh' (Tanh) crashed in a child process (killed by SIGSEGV)"
    )
    assert report.nodes[0].status == "ok" and report.nodes[1].status != "ok"
    cause = report.model.shape_root_cause
    assert (
        cause.op_type == "Tanh"
        and cause.reason == "ONNX shape inference of Tanh crashed in a child process (killed by SIGSEGV)"
    )


def test_the_decision_path_tree_is_costed_with_a_warning(monkeypatch):
    """ONNX's unchecked pass segfaults on skl2onnx's decision-path tree; its checked pass, the
    shape engine's first try, types it (onnx 1.23.2). Either way the tree is costed: the crash,
    with the checked pass off, is isolated and said."""
    report = analyze(decision_path_tree(), hw="h100", partial=True, sizing=Sizing(dims={"N": 1}))
    assert report.model.shape_warnings == () and report.model.invalid == ()
    assert report.nodes[0].op_type == "TreeEnsembleRegressor" and report.nodes[0].status == "ok"
    monkeypatch.setattr(engine, "_checked_inference", lambda model, nodes: (None, inferred.CHECKED_PROPAGATED))
    report = analyze(decision_path_tree(), hw="h100", partial=True, sizing=Sizing(dims={"N": 1}))
    assert report.model.shape_warnings[0].startswith(
        "ONNX shape inference of the whole graph crashed in a child process (killed by SIG"
    )
    assert report.nodes[0].op_type == "TreeEnsembleRegressor" and report.nodes[0].status == "ok"


# --- every command, as a user runs it ------------------------------------------------------------------

COMMANDS = {"analyze": [], "inspect": ["inspect"], "check": ["check", "--max-latency", "1s"]}


TREES = {"helper": decision_path_tree, "skl2onnx": skl2onnx_tree}  # the second where skl2onnx is installed


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", TREES)
def test_every_command_on_the_tree_exits_0_or_2_never_a_signal(tmp_path, command, source):
    model = TREES[source]()
    path = tmp_path / "tree.onnx"
    onnx.save(model, path)
    done = subprocess.run(
        [sys.executable, "-m", "onnx_roofline", *COMMANDS[command], str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr and "Fatal Python error" not in done.stderr
    allowed = (
        (EXIT_OK, EXIT_FAIL, EXIT_USAGE) if command == "check" else (EXIT_OK, EXIT_USAGE)
    )  # check: 1 is a gate's verdict
    assert done.returncode in allowed, done.stderr
    if done.returncode == EXIT_USAGE:
        assert [line for line in done.stderr.splitlines() if "error:" in line] == [done.stderr.splitlines()[-1]]
    if command == "analyze":  # ONNX's checked pass, the engine's first, types the tree without the crash
        assert done.returncode == EXIT_OK and "crashed" not in done.stderr


def test_the_tree_in_a_file_still_crashes_onnx_itself(tmp_path):
    """The reason for all this: the tree is a crash of onnx (in a child here), not one of ours. When
    an onnx release fixes it, this says so, and CRASH_PRONE_DOMAINS may be revisited."""
    with pytest.raises(PassCrashed):
        isolated("onnx", lambda: onnx.shape_inference.infer_shapes(decision_path_tree()))


# --- onnxruntime in verify ----------------------------------------------------------------------------


def test_onnxruntime_crashing_in_verify_is_exit_2_and_one_line(tmp_path, monkeypatch, capsys):
    from onnx_roofline.commands.verify import run

    monkeypatch.delenv(ENV, raising=False)
    path = tmp_path / "chain.onnx"
    onnx.save(relu_chain(), path)
    monkeypatch.setattr(run, "open_session", _segfault)
    assert main(["verify", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err.splitlines()[-1]
        == "onnx-roofline: error: onnxruntime crashed running the model (killed by SIGSEGV); nothing of it could be checked"
    )
    assert "Traceback" not in err


def test_verify_runs_onnxruntime_in_a_child_and_checks_as_before(tmp_path, monkeypatch):
    from onnx_roofline.commands.verify import run, verify

    monkeypatch.delenv(ENV, raising=False)
    pids = []
    opened = run.open_session
    monkeypatch.setattr(
        run, "open_session", lambda model, options: opened(model, options) if os.getpid() != PARENT else pids.append(1)
    )
    result = verify(relu_chain(), hw="h100")
    assert pids == [] and result.passed

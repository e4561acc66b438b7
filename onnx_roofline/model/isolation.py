"""A C++ pass run where a crash cannot take the process down.

ONNX's C++ shape inference segfaults on some valid models (skl2onnx's decision-path tree: a
TreeEnsembleRegressor feeding a LabelEncoder), and onnxruntime can crash on what it is fed. A
signal in one of them would end the tool with exit 139 and no word. `isolated(name, fn, *args)`
runs `fn(*args)` in a child forked for the call: the child sends its result (or the exception it
raised) back pickled through a pipe and exits; the parent reads it and reaps the child. A child
killed by a signal, or gone without a result, is `PassCrashed` here: a RooflineError (exit 2 with
one line where nothing catches it), which the shape engine catches like any failed pass, says in
the report's shape warnings, and carries on without.

The fork is copy-on-write, the child sharing the parent's memory (the model, its weights) until
it writes; results come back as pickles (the inference sends back the declared types, not the
model). Still, a call costs 5–10 ms more than in-process (the fork, the pages the child
writes, and the parent's own first write to each page afterwards), which doubles the analysis of
a ResNet-50 (docs/hostile-inputs.md, "C++ crashes", has the figures). So which calls fork is a
policy, `ONNX_ROOFLINE_ISOLATION`:
- unset (the default): the calls their caller marks `risky` — ONNX's inference of a model that
  imports a CRASH_PRONE domain (`crash_prone`: a look at its opset imports, which every node of
  such a domain needs), a one-node inference of a node of one, everything after a crash on the
  same graph, and onnxruntime's runs in `verify` (whose own cost dwarfs a fork's);
- `all`: every call (a gate over models from strangers, at the cost above);
- `0`: none (to debug a pass in-process).
Where the platform has no fork (Windows) or the system refuses one (no memory to commit a copy
of the process), the call runs in-process.

The same fork serves speed where a graph is large: `beside(name, fn, *args)` begins the call in a
child and lets this process go on (a million-node graph's conformance check on the second core,
while the shape engine runs), on the memory as it was at the fork; the caller asks for the
result when it needs it, and a child whose result is never asked is ended.

A child never outlives its parent (`die_with_parent`, which the `-j` workers call too: `pool_worker`): whatever
ends the parent, a SIGKILL included, which no handler of its own sees, ends the child with it —
onnxruntime running a stranger's model for minutes in a process nobody waits for any more."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import onnx

from onnx_roofline.errors import RooflineError

T = TypeVar("T")

ENV = "ONNX_ROOFLINE_ISOLATION"  # unset: the risky calls; "all": every call; "0": none
CRASH_PRONE_DOMAINS = frozenset({"ai.onnx.ml"})
"""Operator domains whose ONNX inference functions have crashed on valid models (the tree ensembles
and LabelEncoder, onnx 1.23). The standard domain's run on every model there is; besides these,
onnx has schemas only for five preview ops (ai.onnx.preview.training's four, ai.onnx.preview's
one); com.microsoft's are onnxruntime's, which ONNX's pass skips."""


class PassCrashed(RooflineError):
    """A C++ pass run by `isolated` crashed: its child was killed by a signal, or exited without a
    result. `name` is the pass, `how` what ended it (`killed by SIGSEGV`)."""

    def __init__(self, name: str, how: str) -> None:
        super().__init__(f"{name} crashed ({how}) in a child process")
        self.name = name
        self.how = how

    def __reduce__(self):
        return (type(self), (self.name, self.how))


def crash_prone(model: onnx.ModelProto) -> bool:
    """Whether the model imports a CRASH_PRONE domain, in its graph's opset imports or a
    function's: ONNX's inference runs no node of a domain the model does not import."""
    imports = [*model.opset_import, *(entry for function in model.functions for entry in function.opset_import)]
    return any(entry.domain in CRASH_PRONE_DOMAINS for entry in imports)


def forks(risky: bool) -> bool:
    """Whether `isolated` forks for a call: the platform can, and the policy (ENV) says so."""
    mode = os.environ.get(ENV, "")
    return hasattr(os, "fork") and mode != "0" and (risky or mode == "all")


_pooled = False  # this process is a `-j` worker (pool_worker)


def pool_worker(parent: int) -> None:
    """A `-j` worker's start: it dies with its parent (`die_with_parent`), and runs no child
    beside itself (`spare_core`)."""
    global _pooled
    _pooled = True
    die_with_parent(parent)


PR_SET_PDEATHSIG = 1  # linux/prctl.h: the signal this process gets when the thread that made it ends
_WATCH_INTERVAL_S = 0.5  # elsewhere, how often a child looks at its parent


def die_with_parent(parent: int) -> None:
    """End this process (a child: a -j worker, an isolated pass) when its parent, pid `parent`,
    ends, however it ends. Linux: the kernel sends SIGKILL (prctl PR_SET_PDEATHSIG); other POSIX
    systems: a daemon thread that watches for the parent to change. A parent already gone ends the
    child at once. (Windows has neither fork nor these; its workers are left to the executor.)"""
    if not hasattr(os, "fork"):
        return
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        import threading

        threading.Thread(target=_watch, args=(os.getppid(),), daemon=True, name="die-with-parent").start()
    if os.getppid() != parent:  # gone before the death signal was set (a killed parent is reparented away at once, even
        os._exit(1)  # while it waits, a zombie, to be reaped): nobody would send it


def _watch(parent: int) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)


def isolated(name: str, fn: Callable[..., T], *args: Any, risky: bool = True) -> T:
    """`fn(*args)`, run in a forked child where `forks(risky)`: its result, or the exception it
    raised, raised here. Raises PassCrashed (naming the pass `name`) where the child dies without
    a result. `fn`'s result and exceptions must pickle; `fn` itself need not (a lambda will do)."""
    child = _fork(fn, args) if forks(risky) else None
    return fn(*args) if child is None else _join(name, *child)


@contextlib.contextmanager
def beside(name: str, fn: Callable[..., T], *args: Any) -> Iterator[Callable[[], T]]:
    """`fn(*args)` begun in a forked child while the `with` block goes on, on a core this
    process does not use (a large graph's conformance check beside its shape inference): the
    block gets a call that waits for the child and returns what `isolated` would. The child
    works on the memory as it was at the fork: what the block changes after, it does not see.
    A child whose result the block never asked for (the block raised) is ended as the block
    ends. Where no child can help (one core, no fork, ENV "0", the system refuses one), `fn`
    runs here before the block, as it would have without this."""
    child = _fork(fn, args) if spare_core() else None
    if child is None:
        result = fn(*args)
        yield lambda: result
        return
    asked = []

    @functools.cache  # the result, once come back, asked again
    def joined() -> T:
        asked.append(True)
        return _join(name, *child)

    try:
        yield joined
    finally:
        if not asked:
            _kill(child[0])
            os.close(child[1])


def spare_core() -> bool:
    """Whether a child would run beside this process: fork is there, the policy allows one, the
    process may run on more than one core and is not a `-j` worker (whose siblings keep the
    other cores busy: a child would only add its memory), and it runs no other thread (a
    library caller's: a fork copies only the thread that forks, so a lock another thread holds
    stays held in the child, and the check could hang on it there)."""
    if not hasattr(os, "fork") or os.environ.get(ENV, "") == "0" or _pooled or threading.active_count() > 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores > 1


def _fork(fn: Callable, args: tuple) -> tuple[int, int] | None:
    """A child forked to run `fn(*args)` and send back what came of it: its pid and the read end
    of its pipe; None where the system refuses a fork (no memory to commit a copy of this
    process, no process slot): the caller runs `fn` itself."""
    read, write = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: never returns
        os.close(read)
        _child(write, parent, fn, args)
    os.close(write)
    return pid, read


def _join(name: str, pid: int, read: int) -> Any:
    """What came of the child's call, once it has sent it and is reaped: `_outcome`. A child
    still running when the wait is cut short (Ctrl-C) goes too."""
    reaped = False
    try:
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        if not reaped:
            _kill(pid)
    return _outcome(name, data, status)


def _child(write: int, parent: int, fn: Callable, args: tuple) -> None:
    """Run `fn` and send what came of it; exit without running the parent's exit handlers or
    flushing its buffers (they are the parent's, and it flushes them itself)."""
    try:
        die_with_parent(parent)
        _quiet_crash()
        try:
            payload = pickle.dumps((True, fn(*args)), pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - all of it goes to the parent, which raises it
            payload = _pickled_error(exc)
        view = memoryview(payload)
        while view:
            view = view[os.write(write, view) :]
    finally:
        os._exit(0)


def _quiet_crash() -> None:
    """A crash of the child writes nothing: no core file (nothing is written that the user did
    not name) and no faulthandler dump (pytest's) over the parent's one line."""
    import faulthandler
    import resource

    if faulthandler.is_enabled():
        faulthandler.disable()
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _pickled_error(exc: BaseException) -> bytes:
    try:
        payload = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
        pickle.loads(payload)  # an exception whose pickle does not load back goes as its text
        return payload
    except Exception:  # noqa: BLE001
        return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")), pickle.HIGHEST_PROTOCOL)


def _outcome(name: str, data: bytes, status: int) -> Any:
    """The child's result, its exception raised, or PassCrashed."""
    if data:
        try:
            ok, value = pickle.loads(data)
        except Exception:  # noqa: BLE001 - cut short by the crash: said below
            pass
        else:
            if ok:
                return value
            raise value
    if os.WIFSIGNALED(status):
        import signal  # a crash's name: its import (0.5 ms) paid only then

        number = os.WTERMSIG(status)
        try:
            how = f"killed by {signal.Signals(number).name}"
        except ValueError:
            how = f"killed by signal {number}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)} without a result"
    raise PassCrashed(name, how)


def _kill(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass

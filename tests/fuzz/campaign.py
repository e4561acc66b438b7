"""A fuzz campaign against the command line (issue 32).

Each mutant (tests/fuzz/mutate.py) of each seed model is written into a folder of its own and run
through `analyze`, `inspect` and `check --max-latency 1s` as a user runs them: `python -m
onnx_roofline` in a subprocess, with a wall-clock limit, an address-space limit, a private empty
$HOME and $TMPDIR, and under `strace` to see every file the process opens. Nothing here imports
onnx_roofline, so the campaign outlives any reorganisation of the package, and a crash in the tool
(a segfault in ONNX's C++ inference, a 2^62-element allocation) is an outcome, not the end.

    python -m tests.fuzz.campaign --seeds 0-199 --repo /work/baseline --out /tmp/fuzz-out

Outcomes, per run (first that applies):
  hang          the wall-clock limit passed (the process group is killed)
  memory        MemoryError / "Unable to allocate" / std::bad_alloc, or killed by SIGKILL we did not send
  signal        the process died of a signal (negative exit status): a segfault, an abort
  traceback     "Traceback" on stderr
  outside-open  a file outside the allowlist (below) was opened or tried, whatever the exit code
  bad-exit      an exit code other than 0, 1, 2
  messy-stderr  a stderr line not prefixed `onnx-roofline: `, or exit 2 without exactly one error line
  silent-pass   exit 0 on a mutant that both onnx's full checker and onnxruntime reject, while both
                accept the unmutated seed (otherwise the oracle says nothing; `said` records whether
                stderr carried a warning)
  ok            anything else: exit 0, 1 or 2 with well-formed stderr

The open-file allowlist. A path counts as opened where the process asked for it (resolved against
the directory fd strace prints) and, for an open that succeeded, also where it landed (strace -y
prints the real path: a symlink planted in the mutant's folder that leads to /etc/passwd shows up
as /etc/passwd). Allowed:
  - the Python installation: the interpreter's prefix, base prefix and exec prefixes (the venv and
    the interpreter it was made from: stdlib, site-packages, compiled extensions);
  - the tool's own code: the repository root as a directory (Python's import scan of the cwd) and
    everything under REPO/onnx_roofline (modules and their data files); not the rest of the repo;
  - the dynamic loader and C runtime: /etc/ld.so.cache, /lib*, /usr/lib*, /usr/local/lib*,
    locale data, gconv, /etc/localtime and zoneinfo;
  - a fixed list of pseudo-files libraries read about the machine (CPU counts, cgroup limits,
    /proc/self/{maps,status,...}, /proc/cpuinfo, /proc/meminfo), /dev/null and /dev/urandom. Not
    /proc or /sys or /dev as a whole: `/proc/self/environ` and `/dev/zero` are mutation targets;
  - the mutant's own folder (where both the asked and the landed path lie) and the run's private
    TMPDIR (Python's own temp use).
Not allowed: the private $HOME (empty: anything opened there is a cache or telemetry), the rest of
/tmp (the mutant's `../x` lands there), /etc beyond the loader's files, the repository's other
files (fixtures, tests), the campaign's output folder.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import functools
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from tests.fuzz.mutate import (
    HOSTILE_LOCATIONS,
    NotApplicable,
    graphs,
    mutant_for,
    write,
)

HERE_REPO = Path(__file__).resolve().parents[2]
GiB = 2**30
COMMANDS = {
    "analyze": ["analyze"],
    "inspect": ["inspect"],
    "check": ["check", "--max-latency", "1s"],
    "check-partial": ["check", "--max-latency", "1s", "--partial"],  # reaches the gate past unbound dims
    # `check` with the --dim bindings its own "dimension is unbound" error suggests: the gate's pass/fail
    # on the mutant, where plain `check` stops at the unbound dims of nearly every seed (exit 2).
    "check-bound": ["check", "--max-latency", "1s"],
}
SUGGESTED_DIM = re.compile(r"--dim ([^\s=`']+=\d+)")
DEFAULT_COMMANDS = ("analyze", "inspect", "check")
OUTCOMES = ("hang", "memory", "signal", "traceback", "outside-open", "bad-exit", "messy-stderr", "silent-pass", "ok")
FAILURES = OUTCOMES[:-1]
MEMORY_SIGNS = ("MemoryError", "Unable to allocate", "std::bad_alloc", "out of memory", "Cannot allocate memory")
SYSTEM_PREFIXES = (
    "/lib/",
    "/lib64/",
    "/usr/lib/",
    "/usr/lib64/",
    "/usr/local/lib/",
    "/usr/share/locale/",
    "/usr/share/zoneinfo/",
    "/usr/lib/locale/",
)
SYSTEM_FILES = {
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/locale.alias",
    "/dev/null",
    "/dev/urandom",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/self/maps",
    "/proc/self/status",
    "/proc/self/stat",
    "/proc/self/cgroup",
    "/proc/self/mountinfo",
    "/proc/self/auxv",
    "/proc/self/exe",
    "/proc/self/fd",
    "/proc/self/task",
    "/proc/self/statm",
    "/sys/fs/cgroup/cpu.max",
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
    "/sys/fs/cgroup/cpu.weight",
}
SYSTEM_PATTERNS = [
    re.compile(p)
    for p in (
        r"^/sys/devices/system/cpu/(possible|online|present|cpu\d+/.*|cpufreq/.*)$",
        r"^/sys/devices/system/node/.*$",
        r"^/proc/self/task/\d+/(stat|comm)$",
    )
]


# --- configuration --------------------------------------------------------------------------------


@dataclass
class Config:
    repo: Path
    out: Path
    python: str
    commands: tuple[str, ...]
    timeout: float
    memory: int
    strace: str | None
    oracle: bool
    keep_ok: bool = False


def seed_models(repo: Path) -> list[Path]:
    """The models mutants grow from: the committed fixtures and both corpora (converter and
    optimizer outputs; the shipped control-flow and size models)."""
    return [
        path
        for pattern in ("fixtures/*.onnx", "tests/corpus/models/*.onnx", "tests/corpus/shipped/*.onnx")
        for path in sorted(repo.glob(pattern))
    ]


def parse_seeds(text: str) -> list[int]:
    """`0-199,300,400-409` -> [0, ..., 199, 300, 400, ..., 409]."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


@functools.cache
def python_prefixes(python: str) -> tuple[str, ...]:
    """Where the interpreter's own files live (the venv and the Python it was made from)."""
    code = "import sys,json;print(json.dumps([sys.prefix,sys.base_prefix,sys.exec_prefix,sys.base_exec_prefix]))"
    found = json.loads(subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True).stdout)
    return tuple(sorted({p for x in found for p in (os.path.normpath(x), os.path.realpath(x))}))


# --- running the tool -----------------------------------------------------------------------------


@dataclass
class Run:
    command: str
    rc: int | None
    timed_out: bool
    wall_s: float
    maxrss_mib: float
    stderr: str
    stdout_bytes: int
    opens: list[dict] = field(default_factory=list)  # outside the allowlist
    home_written: list[str] = field(default_factory=list)


def limits(memory: int):
    """preexec_fn: cap the address space (a 2^62-element allocation fails instead of swapping the
    machine), no core files, and a session of its own so a timeout kills the whole group."""

    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def tool_env(home: Path, tmp: Path) -> dict[str, str]:
    """A clean environment: no telemetry, no user site, no bytecode written into the repository,
    one thread per pool (two runs share two cores), a private empty HOME and TMPDIR."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "ORT_DISABLE_TELEMETRY": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
    }


def spawn(
    argv: list[str], cwd: Path, env: dict, timeout: float, memory: int, stdout, stderr
) -> tuple[int | None, bool, float, float]:
    """Run argv in its own session; kill the group at the deadline. (rc, timed_out, wall_s, maxrss MiB)
    — rc is negative for a signal, as subprocess reports it; the RSS covers reaped descendants."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        preexec_fn=limits(memory),
        start_new_session=True,
    )  # noqa: PLW1509 (workers are single-threaded)
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return proc.returncode, timed_out, time.monotonic() - start, usage.ru_maxrss / 1024


def run_tool(cfg: Config, command: str, model: Path, scratch: Path, extra: tuple[str, ...] = ()) -> Run:
    """One CLI run on `model`, traced; files opened outside the allowlist are returned in `opens`."""
    run_dir = scratch / f"run-{command}{'-probe' if command == 'check' and (scratch / 'run-check').exists() else ''}"
    home, tmp = run_dir / "home", run_dir / "tmp"
    home.mkdir(parents=True)
    tmp.mkdir()
    argv = [cfg.python, "-m", "onnx_roofline", *COMMANDS[command], str(model), *extra]
    trace_prefix = run_dir / "trace"
    if cfg.strace:
        argv = [
            cfg.strace,
            "-ff",
            "-qq",
            "-y",
            "-s",
            "4096",
            "--seccomp-bpf",
            "-e",
            "trace=open,openat,openat2,creat",
            "-o",
            str(trace_prefix),
            *argv,
        ]
    with open(run_dir / "stdout", "wb") as out, open(run_dir / "stderr", "wb") as err:
        rc, timed_out, wall, rss = spawn(argv, cfg.repo, tool_env(home, tmp), cfg.timeout, cfg.memory, out, err)
    stderr = (run_dir / "stderr").read_bytes()[-65536:].decode("utf-8", "replace")
    opens = []
    if cfg.strace:
        allow = Allowlist(cfg, model.parent, tmp)
        for trace in sorted(run_dir.glob("trace.*")):
            opens += [o for o in parse_trace(trace, cfg.repo) if not allow.ok(o)]
    for o in opens:  # the same escape from two mutants' folders reads the same
        for key in ("asked", "landed"):
            if o[key]:
                o[key] = re.sub(r"^/proc/\d+/", "/proc/self/", o[key].replace(str(scratch), "<mutant-scratch>"))
    home_written = [str(p.relative_to(home)) for p in home.rglob("*")]
    return Run(command, rc, timed_out, wall, rss, stderr, (run_dir / "stdout").stat().st_size, opens, home_written)


# --- which files a run opened ---------------------------------------------------------------------

LINE = re.compile(
    r"^(?P<call>open|openat|openat2|creat)\((?P<args>.*)\) = (?P<ret>-?\d+)(?:<(?P<real>.*)>)?(?P<rest>.*)$"
)
ARG_AT = re.compile(r'^(?P<dirfd>AT_FDCWD|-?\d+)(?:<(?P<dir>.*?)>)?, "(?P<path>(?:[^"\\]|\\.)*)"(?P<rest>.*)$')
ARG_PLAIN = re.compile(r'^"(?P<path>(?:[^"\\]|\\.)*)"(?P<rest>.*)$')


def unescape(text: str) -> str:
    """strace prints paths C-escaped (\\n, \\x1b, \\"); give back the path's own bytes as a str."""
    raw = text.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1", "replace")
    return raw.decode("utf-8", "surrogateescape")


def parse_trace(path: Path, cwd: Path) -> list[dict]:
    """Every open in one strace -ff file: the path asked for (made absolute and normalized), where it
    landed when it succeeded, and whether it could write."""
    found = []
    for line in path.read_text("latin-1").splitlines():
        m = LINE.match(line)
        if not m:
            continue
        args = ARG_AT.match(m["args"]) if m["call"] in ("openat", "openat2") else ARG_PLAIN.match(m["args"])
        if not args:
            continue
        asked = unescape(args["path"])
        base = unescape(args.groupdict().get("dir") or "") or str(cwd)
        asked = os.path.normpath(os.path.join(base, asked))
        landed = os.path.normpath(unescape(m["real"])) if m["real"] and int(m["ret"]) >= 0 else None
        writes = any(flag in args["rest"] for flag in ("O_WRONLY", "O_RDWR", "O_CREAT")) or m["call"] == "creat"
        found.append(
            {
                "asked": asked,
                "landed": landed,
                "ok": int(m["ret"]) >= 0,
                "write": writes,
                "pid": path.suffix.lstrip("."),
            }
        )
    return found


class Allowlist:
    """What a run may open (see the module docstring for why each entry is there)."""

    def __init__(self, cfg: Config, folder: Path, tmp: Path):
        self.prefixes = (
            tuple(p.rstrip("/") + "/" for p in python_prefixes(cfg.python))
            + SYSTEM_PREFIXES
            + (str(cfg.repo / "onnx_roofline") + "/",)
        )
        self.exact = SYSTEM_FILES | {str(cfg.repo), str(cfg.repo / "onnx_roofline")}
        self.private = (str(folder) + "/", str(tmp) + "/")
        self.private_exact = {str(folder), str(tmp)}

    def allowed(self, path: str) -> bool:
        path = re.sub(r"^/proc/\d+/", "/proc/self/", path)
        return (
            path in self.exact
            or path in self.private_exact
            or path.startswith(self.prefixes + self.private)
            or any(p.match(path) for p in SYSTEM_PATTERNS)
        )

    def ok(self, opened: dict) -> bool:
        return self.allowed(opened["asked"]) and (opened["landed"] is None or self.allowed(opened["landed"]))


# --- the oracle: would onnx or onnxruntime load this? ---------------------------------------------

ORACLE_CODE = {
    "checker": "import onnx,sys; onnx.checker.check_model(sys.argv[1], full_check=True)",
    "ort": (
        "import onnxruntime as ort,sys; o=ort.SessionOptions(); o.log_severity_level=3; o.intra_op_num_threads=1;"
        "o.graph_optimization_level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL;"
        "ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])"
    ),
}


def materialize(data: bytes, symlinks: dict[str, str], folder: Path, cap: int = GiB) -> Path:
    """The model in `folder` with zero-filled (sparse, costless) files wherever its external data
    says its weights are, inside the folder: the seeds ship without weights, and the oracle must
    judge the mutation, not the missing weights. Hostile locations get no file, planted symlinks
    are planted again."""
    folder.mkdir(parents=True)
    path = folder / "mutant.onnx"
    path.write_bytes(data)
    for link, target in symlinks.items():
        (folder / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, folder / link)
    try:
        model = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 (a mutant's bytes may fail to parse in any way: then there are no weights to place)
        return path
    sizes: dict[str, int] = defaultdict(int)
    for _, graph in graphs(model):
        for t in graph.initializer:
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            entry = {e.key: e.value for e in t.external_data}
            location = entry.get("location", "")
            parts = Path(location).parts
            if (
                not location
                or location.startswith(("/", "~"))
                or ".." in parts
                or "\x00" in location
                or "\\" in location
                or location in HOSTILE_LOCATIONS
                or parts[0] in symlinks
                or location in symlinks
            ):
                continue
            try:
                count = 1
                for d in t.dims:
                    count *= d
                width = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                need = int(entry.get("offset", "0") or 0) + int(entry.get("length", "0") or count * width)
            except (KeyError, ValueError, TypeError):  # an unknown dtype, a non-numeric offset: no file
                continue
            if 0 <= need <= cap:
                sizes[location] = max(sizes[location], need)
    for location, size in sizes.items():
        target = folder / location
        with contextlib.suppress(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as stream:
                stream.truncate(max(size, target.stat().st_size))
    return path


def oracle(cfg: Config, data: bytes, symlinks: dict[str, str], scratch: Path) -> dict[str, str]:
    """onnx's full checker and an onnxruntime session on the model, each in a process of its own
    (either can crash on a mutant): 'accept', 'reject: ...', 'crash: signal N' (a rejection too),
    or 'unknown: ...' (a timeout says nothing)."""
    folder = scratch / f"oracle-{hashlib.sha1(data).hexdigest()[:8]}"
    path = materialize(data, symlinks, folder)
    verdict = {}
    for name, code in ORACLE_CODE.items():
        home = folder / f".home-{name}"
        home.mkdir()
        with open(folder / f".err-{name}", "wb") as err:
            rc, timed_out, _, _ = spawn(
                [cfg.python, "-c", code, str(path)],
                folder,
                tool_env(home, home),
                cfg.timeout,
                cfg.memory,
                subprocess.DEVNULL,
                err,
            )
        tail = (folder / f".err-{name}").read_bytes()[-2000:].decode("utf-8", "replace").strip().splitlines()
        if timed_out:
            verdict[name] = "unknown: timeout"
        elif rc == 0:
            verdict[name] = "accept"
        elif rc < 0:
            verdict[name] = f"crash: signal {-rc}"
        else:
            verdict[name] = "reject: " + (tail[-1][:300] if tail else f"exit {rc}")
    shutil.rmtree(folder, ignore_errors=True)
    return verdict


def rejects(verdict: dict[str, str]) -> bool:
    return all(v.startswith(("reject", "crash")) for v in verdict.values())


def accepts(verdict: dict[str, str]) -> bool:
    return all(v == "accept" for v in verdict.values())


# --- classification -------------------------------------------------------------------------------

FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


def classify(run: Run, command: str) -> str:
    err = run.stderr
    if run.timed_out:
        return "hang"
    if any(sign in err for sign in MEMORY_SIGNS) or run.rc == -signal.SIGKILL:
        return "memory"
    if run.rc is not None and run.rc < 0:
        return "signal"
    if "Traceback" in err:
        return "traceback"
    if run.opens or run.home_written:
        return "outside-open"
    if run.rc not in (0, 1, 2):
        return "bad-exit"
    lines = [line for line in err.splitlines() if line.strip()]
    if any(not line.startswith("onnx-roofline: ") for line in lines):
        return "messy-stderr"
    if run.rc == 2 and sum(line.startswith("onnx-roofline: error: ") for line in lines) != 1:
        return "messy-stderr"
    return "ok"


def failure_place(run: Run, outcome: str, repo: Path, label: str) -> str:
    """What makes two failures the same bug: a traceback's last frame (and its exception type), a
    crash's last Python frame (faulthandler prints one), an escaping open's path; else the mutation."""
    frames, exception = [], ""
    for line in run.stderr.splitlines():
        m = FRAME.match(line)
        if m:
            frames.append(f"{_short(m['file'], repo)}:{m['line']} {m['func'].strip()}")
        elif line and not line.startswith((" ", "Traceback", "onnx-roofline:")) and frames:
            exception = line.split(":", 1)[0].strip()
    if outcome == "outside-open" and run.opens:
        return "open " + ", ".join(sorted({o["landed"] or o["asked"] for o in run.opens}))[:200]
    if outcome == "outside-open":
        return "wrote in HOME " + ", ".join(run.home_written[:3])
    if outcome in ("traceback", "memory", "signal", "hang") and frames:
        own = [f for f in frames if f.startswith("onnx_roofline/")]
        via = f" via {own[-1]}" if own and own[-1] != frames[-1] else ""  # numpy_helper called from where
        return f"{outcome}: {frames[-1]}{via} [{exception}]"
    if outcome == "silent-pass":  # the gate passing an unloadable model is its own finding
        return f"silent-pass: {label}" + (" (check passes it)" if run.command.startswith("check") else "")
    return f"{outcome}: {label}"


def _short(file: str, repo: Path) -> str:
    for base in (str(repo) + "/", "/site-packages/", "/lib/python3"):
        if base in file:
            return file.split(base, 1)[1]
    return file


# --- one mutant -----------------------------------------------------------------------------------


class Campaign:
    """The per-worker state. Workers are processes, each single-threaded: preexec_fn (the rlimits)
    is not safe to run from a process with threads."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.seed_verdicts: dict[str, dict] = {}
        self.work = cfg.out / "work"
        self.kept = cfg.out / "mutants"

    def seed_verdict(self, model: Path) -> dict:
        """Does the unmutated seed pass the oracle? Computed once per seed and worker, on demand."""
        if str(model) not in self.seed_verdicts:
            scratch = Path(tempfile.mkdtemp(dir=self.work, prefix="seed-"))
            self.seed_verdicts[str(model)] = oracle(self.cfg, model.read_bytes(), {}, scratch)
            shutil.rmtree(scratch, ignore_errors=True)
        return self.seed_verdicts[str(model)]

    def run_mutant(self, seed: int, model: Path) -> list[dict]:
        mid = f"{seed:05d}-{model.stem}"
        try:
            mutant = mutant_for(seed, model)
        except NotApplicable as exc:
            return [
                {
                    "mutant": mid,
                    "seed": seed,
                    "model": model.name,
                    "label": "none",
                    "outcome": "skipped",
                    "detail": str(exc),
                }
            ]
        scratch = self.work / mid
        shutil.rmtree(scratch, ignore_errors=True)
        path = write(mutant, scratch / "model")
        records, verdict, seed_ok, stderr_of = [], None, None, {}
        for command in self.cfg.commands:
            extra = ()
            if command == "check-bound":
                if "check" not in stderr_of:  # learn the suggested bindings from a plain check (not recorded)
                    stderr_of["check"] = run_tool(self.cfg, "check", path, scratch).stderr
                extra = tuple(a for d in SUGGESTED_DIM.findall(stderr_of["check"]) for a in ("--dim", d))
            run = run_tool(self.cfg, command, path, scratch, extra)
            stderr_of[command] = run.stderr
            outcome = classify(run, command)
            said = any(" warning: " in line or " error: " in line for line in run.stderr.splitlines())
            if outcome == "ok" and run.rc == 0 and self.cfg.oracle:
                if seed_ok is None:
                    seed_ok = accepts(self.seed_verdict(model))
                if seed_ok:
                    verdict = verdict or oracle(self.cfg, mutant.data(), mutant.symlinks, scratch)
                    if rejects(verdict):
                        outcome = "silent-pass"
            seed_verdict = self.seed_verdicts.get(str(model))
            record = {
                "mutant": mid,
                "seed": seed,
                "model": model.name,
                "model_path": str(model),
                "label": mutant.label,
                "detail": mutant.detail,
                "symlinks": mutant.symlinks,
                "size": len(mutant.data()),
                "command": command,
                "extra_args": list(extra),
                "outcome": outcome,
                "rc": run.rc,
                "wall_s": round(run.wall_s, 2),
                "maxrss_mib": round(run.maxrss_mib),
                "said": said,
                "stderr_tail": run.stderr[-3000:],
                "opens": run.opens[:20],
                "home_written": run.home_written[:20],
                "oracle": verdict,
                "seed_oracle": seed_verdict,
            }
            record["place"] = failure_place(run, outcome, self.cfg.repo, mutant.label)
            records.append(record)
        if any(r["outcome"] != "ok" for r in records) or self.cfg.keep_ok:
            write(mutant, self.kept / mid)
        shutil.rmtree(scratch, ignore_errors=True)
        return records


_WORKER: Campaign | None = None


def _start_worker(cfg: Config) -> None:
    global _WORKER
    _WORKER = Campaign(cfg)


def _run_in_worker(seed: int, model: Path) -> list[dict]:
    return _WORKER.run_mutant(seed, model)


def run_jobs(
    cfg: Config,
    jobs: list[tuple[int, Path]],
    workers: int,
    progress: Callable[[int, int, list[dict]], None] | None = None,
) -> list[dict]:
    """Every (seed, model) mutant run through the commands by `workers` processes: their records,
    in the order they finish. `progress(done, total, records)` after each mutant."""
    (cfg.out / "work").mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    with concurrent.futures.ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(cfg,)) as pool:
        futures = [pool.submit(_run_in_worker, seed, model) for seed, model in jobs]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            batch = future.result()
            records += batch
            if progress is not None:
                progress(done, len(futures), batch)
    shutil.rmtree(cfg.out / "work", ignore_errors=True)
    return records


# --- reports --------------------------------------------------------------------------------------


def summarize(records: list[dict], cfg: Config, seeds: list[int], wall: float) -> dict:
    runs = [r for r in records if r["outcome"] != "skipped"]
    places: dict[str, dict] = {}
    for r in runs:
        if r["outcome"] == "ok":
            continue
        entry = places.setdefault(
            r["place"],
            {
                "place": r["place"],
                "outcome": r["outcome"],
                "count": 0,
                "commands": Counter(),
                "labels": Counter(),
                "models": Counter(),
                "example": None,
            },
        )
        entry["count"] += 1
        entry["commands"][r["command"]] += 1
        entry["labels"][r["label"]] += 1
        entry["models"][r["model"]] += 1
        if entry["example"] is None or r["size"] < entry["example"]["size"]:  # the smallest mutant reproduces it
            entry["example"] = {
                k: r.get(k)
                for k in (
                    "mutant",
                    "seed",
                    "model",
                    "model_path",
                    "label",
                    "detail",
                    "command",
                    "extra_args",
                    "rc",
                    "size",
                    "stderr_tail",
                    "opens",
                    "oracle",
                    "symlinks",
                    "said",
                )
            }
    by_class: dict[str, Counter] = defaultdict(Counter)
    for r in runs:
        by_class[r["label"].split("/")[0]][r["outcome"]] += 1
    return {
        "config": {
            "repo": str(cfg.repo),
            "commands": list(cfg.commands),
            "timeout_s": cfg.timeout,
            "memory_bytes": cfg.memory,
            "strace": cfg.strace,
            "oracle": cfg.oracle,
            "seeds": f"{seeds[0]}-{seeds[-1]}" if seeds else "",
            "mutants": len(seeds),
            "models": [m.name for m in seed_models(cfg.repo)],
            "wall_s": round(wall, 1),
            "finished": datetime.datetime.now().isoformat(timespec="seconds"),
        },
        "counts": {o: sum(r["outcome"] == o for r in runs) for o in OUTCOMES},
        "counts_by_command": {c: dict(Counter(r["outcome"] for r in runs if r["command"] == c)) for c in cfg.commands},
        "counts_by_mutation_class": {k: dict(v) for k, v in sorted(by_class.items())},
        "silent_pass_said_something": sum(r["outcome"] == "silent-pass" and r["said"] for r in runs),
        "failures": sorted(
            (
                {**p, "commands": dict(p["commands"]), "labels": dict(p["labels"]), "models": dict(p["models"])}
                for p in places.values()
            ),
            key=lambda p: (FAILURES.index(p["outcome"]), -p["count"]),
        ),
    }


def table(summary: dict) -> str:
    """The summary for people: counts, then one line per distinct failure place."""
    config = summary["config"]
    lines = [
        f"# fuzz campaign on {config['repo']}: {config['mutants']} mutants, {', '.join(config['commands'])}; {config['wall_s']} s",
        "",
        "| outcome | runs |",
        "|---|---|",
    ]
    lines += [f"| {o} | {n} |" for o, n in summary["counts"].items()]
    lines += ["", "| mutation class | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    for name, counts in summary["counts_by_mutation_class"].items():
        lines.append(f"| {name} | " + " | ".join(str(counts.get(o, 0)) for o in OUTCOMES) + " |")
    lines += ["", "| # | outcome | runs | place | example (mutant, command) |", "|---|---|---|---|---|"]
    for i, f in enumerate(summary["failures"], 1):
        ex = f["example"]
        lines.append(
            f"| {i} | {f['outcome']} | {f['count']} | `{f['place'][:140]}` | {ex['mutant']} {ex['label']}, {ex['command']} |"
        )
    return "\n".join(lines) + "\n"


def export_repro(summary: dict, cfg: Config, kept: Path, target: Path, top: int) -> None:
    """The smallest mutant of each of the first `top` failure places, with what to run and what it
    said, plus index.json: outside the repository, for whoever fixes them."""
    target.mkdir(parents=True, exist_ok=True)
    index = []
    for i, f in enumerate(summary["failures"][:top], 1):
        ex = f["example"]
        folder = target / f"{i:02d}-{f['outcome']}-{ex['mutant']}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(kept / ex["mutant"], folder, symlinks=True)
        argv = [
            "python",
            "-m",
            "onnx_roofline",
            *COMMANDS[ex["command"]],
            str(folder / "mutant.onnx"),
            *(ex.get("extra_args") or []),
        ]
        (folder / "stderr.txt").write_text(ex["stderr_tail"])
        index.append(
            {
                "rank": i,
                "outcome": f["outcome"],
                "place": f["place"],
                "runs": f["count"],
                "path": str(folder / "mutant.onnx"),
                "command": " ".join(argv),
                "command_as_run": f"prlimit --as={cfg.memory} -- {' '.join(argv)}",
                "mutation": ex["label"],
                "detail": ex["detail"],
                "seed_model": ex["model"],
                "seed": ex["seed"],
                "regenerate": f"python -m tests.fuzz.mutate {ex['model_path']} --seed {ex['seed']} --out DIR",
                "rc": ex["rc"],
                "oracle": ex["oracle"],
                "stderr_last_lines": ex["stderr_tail"].strip().splitlines()[-4:],
            }
        )
    (target / "index.json").write_text(json.dumps(index, indent=1))


def resummarize(cfg: Config, args) -> int:
    """Summary, table and reproducers from a finished (or interrupted) campaign's runs.jsonl."""
    records = [json.loads(line) for line in (cfg.out / "runs.jsonl").read_text().splitlines()]
    for r in records:
        if r["outcome"] in FAILURES:
            run = Run(
                r["command"],
                r["rc"],
                r["outcome"] == "hang",
                r["wall_s"],
                r["maxrss_mib"],
                r["stderr_tail"],
                0,
                r["opens"],
                r["home_written"],
            )
            r["place"] = failure_place(run, r["outcome"], cfg.repo, r["label"])
    return report(records, cfg, sorted({r["seed"] for r in records}), 0.0, args)


def report(records: list[dict], cfg: Config, seeds: list[int], wall: float, args) -> int:
    """summary.json, table.md and the reproducers (--repro) of a campaign's records; 1 where any failed."""
    summary = summarize(records, cfg, seeds, wall)
    summary["seed_oracle"] = {r["model"]: r["seed_oracle"] for r in records if r.get("seed_oracle")}
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=1))
    (cfg.out / "table.md").write_text(table(summary))
    if args.repro:
        export_repro(summary, cfg, cfg.out / "mutants", args.repro, args.repro_top)
    print(table(summary))
    return 1 if any(summary["counts"][o] for o in FAILURES) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seeds", default="0-199", help="mutant seeds, e.g. 0-199,500 (mutant N grows from seed model N mod count)"
    )
    parser.add_argument(
        "--per-model", action="store_true", help="every seed on every seed model (seeds x models mutants)"
    )
    parser.add_argument(
        "--repo", type=Path, default=HERE_REPO, help="the repository whose CLI and seed models are used"
    )
    parser.add_argument("--models", help="a glob of seed models instead of the repo's fixtures and corpus")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--commands", default=",".join(DEFAULT_COMMANDS), help=f"from {sorted(COMMANDS)}")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--memory-gib", type=float, default=6)
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--no-oracle", action="store_true")
    parser.add_argument("--repro", type=Path, help="also export the smallest mutant of each failure place here")
    parser.add_argument("--repro-top", type=int, default=30)
    parser.add_argument(
        "--from-runs",
        action="store_true",
        help="run nothing: summarize OUT/runs.jsonl again (failure places recomputed), export --repro",
    )
    args = parser.parse_args(argv)

    repo = args.repo.resolve()
    strace = None if args.no_strace else shutil.which("strace")
    if not args.no_strace and not strace:
        print(
            "campaign: strace not found; opens outside the folder are not checked (apt-get install -y strace)",
            file=sys.stderr,
        )
    cfg = Config(
        repo,
        args.out.resolve(),
        args.python,
        tuple(args.commands.split(",")),
        args.timeout,
        int(args.memory_gib * GiB),
        strace,
        not args.no_oracle,
    )
    models = sorted(Path().glob(args.models)) if args.models else seed_models(repo)
    models = [m.resolve() for m in models]
    seeds = parse_seeds(args.seeds)
    jobs = [(s, m) for s in seeds for m in models] if args.per_model else [(s, models[s % len(models)]) for s in seeds]
    if args.from_runs:
        return resummarize(cfg, args)
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    counts: Counter = Counter()
    with open(cfg.out / "runs.jsonl", "w") as log:

        def progress(done: int, total: int, batch: list[dict]) -> None:
            log.writelines(json.dumps(record) + "\n" for record in batch)
            log.flush()
            counts.update(r["outcome"] for r in batch)
            if done % 10 == 0 or done == total:
                print(
                    f"campaign: {done}/{total} mutants, {time.monotonic() - started:.0f} s: {dict(counts)}",
                    file=sys.stderr,
                )

        records = run_jobs(cfg, jobs, args.jobs, progress)
    return report(records, cfg, seeds, time.monotonic() - started, args)


if __name__ == "__main__":
    raise SystemExit(main())

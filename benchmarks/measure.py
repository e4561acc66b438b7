"""Measuring a command as a whole: wall time, CPU time and peak RSS of one child process.

`os.wait4` returns the resource usage of the one child waited for (ru_maxrss: its peak resident
set in KiB on Linux), so each run is measured on its own, whatever ran before it; the benchmarks
take the minimum over interleaved rounds, which holds best against a shared machine's noise."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float  # user + system time of the child (and of its own children, reaped)
    peak_rss: int  # bytes
    returncode: int


def run(command: Sequence[str], env: dict[str, str] | None = None, timeout: float = 1800) -> Run:
    """Run `command` with its output discarded; its wall time, CPU time and peak RSS."""
    start = time.perf_counter()
    process = subprocess.Popen(list(command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.002)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        print(
            f"  ! {' '.join(command)[:160]} exited {process.returncode}: {error.strip().splitlines()[-1:] if error.strip() else ''}"
        )
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, process.returncode)


def compile_package(folder: str | os.PathLike) -> None:
    """Byte-compile the onnx_roofline package in `folder`, as installing it would: an editable
    install under PYTHONDONTWRITEBYTECODE=1 (as here) otherwise compiles ~90 modules from source
    in every process, a quarter of a second of every run."""
    package = os.path.join(os.fspath(folder), "onnx_roofline")
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=False, stdout=subprocess.DEVNULL)


def prepare(before: str | os.PathLike | None) -> None:
    """Before a benchmark: both trees byte-compiled, and the machine's state printed (its load
    says how far to trust the figures)."""
    compile_package(Path(__file__).resolve().parent.parent)
    if before:
        compile_package(before)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; python {sys.version.split()[0]}")


def summary(runs: Sequence[Run]) -> dict[str, float]:
    ok = [r for r in runs if r.returncode == 0] or list(runs)
    return {
        "wall_min": min(r.wall_s for r in ok),
        "wall_median": statistics.median(r.wall_s for r in ok),
        "cpu_min": min(r.cpu_s for r in ok),
        "rss_max": max(r.peak_rss for r in ok),
        "rss_min": min(r.peak_rss for r in ok),
        "ok": all(r.returncode == 0 for r in runs),
    }


def mib(size: float) -> str:
    return f"{size / 2**20:,.0f} MiB"

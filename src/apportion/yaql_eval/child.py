"""The child route: the batch's expressions evaluated in one forked, killable process.

Why a forked child. yaql's own limits do not bound time: ``range(0, 100000000).len()``
iterates in Python for seconds, and C-level work (``pow(10, pow(10, 8))``, a regex
with catastrophic backtracking) holds the GIL and cannot be interrupted by any
in-process means (signals, ``sys.settrace``, threads): the handler only runs when the
C call returns. The one bound that always works is a separate process the parent can
SIGKILL. So parsing and the length check run in-process (cheap, deterministic, and a
syntax error needs no child), and all of a batch's expressions are then evaluated in
**one** ``os.fork()``-ed child that inherits the already-built yaql engine, context
and parsed expressions (no import or pickling cost), runs under ``RLIMIT_AS`` and
``RLIMIT_CPU`` (a backstop if the parent itself dies; ``PR_SET_PDEATHSIG`` as well),
and streams one JSON line per expression through a pipe. The parent waits on the pipe
with ``select`` until the deadline and then SIGKILLs the child; the last expression the
child announced and did not finish is the one blamed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import resource
import select
import signal
import threading
import time
import warnings
from functools import lru_cache
from typing import Any

from apportion.limits import Limits
from apportion.yaql_eval.parse import ERROR, MEMORY, TIMEOUT, YaqlFailure
from apportion.yaql_eval.records import (
    data_context,
    read_records,
    result_line,
    within_budget,
)


@lru_cache(maxsize=1)
def load_prctl() -> Any:
    # Looked up in the parent (~1 ms) so that every child inherits it.
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _child_limits(limits: Limits, timeout: float) -> None:
    prctl = load_prctl()
    if prctl is not None:
        # Die with the parent (Linux): a killed worker leaves no evaluator behind.
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    with contextlib.suppress(OSError, ValueError):
        cpu = math.ceil(timeout) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/statm", "rb") as statm:
            current = int(statm.read().split()[0]) * resource.getpagesize()
        allowed = current + limits.yaql_max_memory_mib * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            allowed = min(allowed, hard)
        resource.setrlimit(resource.RLIMIT_AS, (allowed, hard))


def _child_main(
    write_fd: int,
    parsed: list[tuple[str, Any]],
    data: Any,
    limits: Limits,
    budget: int,
    timeout: float,
) -> None:
    """Evaluate every expression, writing one JSON line per event."""

    def emit(line: str) -> None:
        view = memoryview((line + "\n").encode())
        while view:
            view = view[os.write(write_fd, view) :]

    _child_limits(limits, timeout)
    context = data_context(data)
    for index, (_name, expression) in enumerate(parsed):
        emit(json.dumps({"start": index}))
        line = result_line(index, expression, context, limits, (BaseException,))
        line, budget = within_budget(index, line, budget)
        emit(line)
    emit(json.dumps({"done": True}))


def _run_child(
    write_fd: int,
    parsed: list[tuple[str, Any]],
    data: Any,
    limits: Limits,
    budget: int,
    timeout: float,
) -> None:
    code = 0
    try:
        _child_main(write_fd, parsed, data, limits, budget, timeout)
    except BaseException:  # MemoryError while converting the data, a broken pipe, …
        code = 70
    finally:
        os._exit(code)  # never run the parent's atexit handlers or flush its buffers


def fork() -> int:
    with warnings.catch_warnings():
        # Python ≥ 3.12 warns about fork() in a process with threads (numpy's BLAS pool);
        # the child only runs pure-Python yaql and takes none of their locks.
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


# Children that reported everything and are exiting on their own. Tearing down a
# forked copy of a worker with scipy loaded takes ~4 ms; instead of waiting for it, the
# next batch reaps them (a finished child is only a zombie until then).
_exiting: set[int] = set()
_exiting_lock = threading.Lock()


def _reap_exited() -> None:
    with _exiting_lock:
        for pid in list(_exiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped by someone else
                done = pid
            if done:
                _exiting.discard(pid)


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _collect(read_fd: int, pid: int, deadline: float, cap: int) -> tuple[bytes, bool]:
    """Read the child's output until its done line, EOF or the deadline.

    Returns (bytes, timed_out). A child that finished is left to exit by itself;
    any other is SIGKILLed and reaped here.
    """
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    finished = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            timed_out = True
            break
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        size += len(chunk)
        if size > cap:  # cannot happen with a well-behaved child (it budgets its output)
            break
        chunks.append(chunk)
        if b"".join(chunks[-2:]).endswith(_DONE):  # the line may span two reads
            finished = True
            break
    if finished:
        with _exiting_lock:
            _exiting.add(pid)
    else:
        _kill_and_reap(pid)
    return b"".join(chunks), timed_out


_DONE = b'{"done": true}\n'


def evaluate_in_child(
    parsed: list[tuple[str, Any]], data: Any, limits: Limits, timeout: float
) -> tuple[dict[str, Any], list[YaqlFailure]]:
    cap = limits.max_payload_bytes
    _reap_exited()
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        pid = fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        _run_child(write_fd, parsed, data, limits, cap, timeout)
    os.close(write_fd)
    try:
        raw, timed_out = _collect(read_fd, pid, started + timeout, cap)
    except BaseException:  # e.g. the task's soft time limit fired while we waited
        _kill_and_reap(pid)
        raise
    finally:
        os.close(read_fd)
    values, failures, running = read_records(raw.split(b"\n"), parsed)
    if running is not None:
        name = parsed[running][0]
        if timed_out:
            message = f"yaql evaluation exceeded the time limit of {timeout:g} s"
            failures.append(YaqlFailure(name, TIMEOUT, message))
        else:
            message = "yaql evaluation exceeded its CPU or memory limit and was stopped"
            failures.append(YaqlFailure(name, MEMORY, message))
    elif len(values) + len(failures) < len(parsed):
        # The child died (or was stopped) between expressions: blame the next one. At the
        # deadline that is the time limit, which the caller names (a loaded machine can
        # reach it just as one expression ends and before the next starts).
        name = parsed[len(values) + len(failures)][0]
        if timed_out:
            message = f"yaql evaluation exceeded the time limit of {timeout:g} s"
            failures.append(YaqlFailure(name, TIMEOUT, message))
        else:
            failures.append(YaqlFailure(name, ERROR, "yaql evaluation was stopped"))
    return values, failures

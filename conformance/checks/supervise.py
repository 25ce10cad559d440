"""Run tasks in forked children under one supervisor process: a crash, a hang or a memory
blow-up ends one task, never the run (:func:`run_supervised`).

The processes::

    caller (P)            runs ``meanwhile`` (the gate's static checks), draws progress; forks once
      supervisor (S)      its own process group; one thread: forks, polices and reaps the children
        task child 0      at most ``workers`` at once, each in its own process group (whatever a
        task child 1 ...  library spawns dies with it)

S, not a thread of P, forks the task children: P keeps working while tasks start, and a fork
from a process with other threads running copies the locks they hold. S runs no task itself:
only, before a task, ``preload(task)`` (importing libraries once, so the children inherit them;
no input is read) and ``before(task)`` (the caller's shared work, e.g. the reference's ids for a
part). How S ends each task, and what it watches (a stall, memory), is
``conformance.checks.supervisor``; the plumbing is ``conformance.checks.plumbing``.

Ending early: any exception in P (Ctrl-C, SIGTERM turned into an exception, an error in
``meanwhile``) sends SIGTERM to S, which SIGKILLs every child's process group, reaps them and
exits; P reaps S (SIGKILL to S's group after :data:`GRACE` s). S and the children also die with
their parent (``PR_SET_PDEATHSIG``), so a SIGKILLed caller leaves nothing running; the children
ignore SIGINT and are not in the terminal's process group: a Ctrl-C prints nothing of theirs.
If S itself dies, the tasks it had not ended run again under a new S without ``preload`` (a
library that crashes on import takes only that attempt).

Out of scope: what a task does and what its messages mean (``conformance.checks.forked``,
``conformance.checks.watch``); platforms without ``fork`` (the caller runs the tasks in-process).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from conformance.checks.plumbing import Channel, FrameReader, fork, kill_group, signal_name
from conformance.checks.supervisor import Ended, Job, Limits, supervisor_main

#: seconds P gives S to kill and reap its children before it SIGKILLs S's whole group
GRACE = 3.0


class TaskFailed(RuntimeError):
    """A Python exception escaped a task child or the supervisor: a bug. The message is one line
    (the exception); the other process's traceback is the cause (``--debug`` shows it)."""


class RemoteTraceback(Exception):
    """A traceback from another process, as the cause of the :class:`TaskFailed` it led to."""


def _failed(what: str, trace: str) -> TaskFailed:
    last = trace.strip().splitlines()[-1] if trace.strip() else "no traceback"
    error = TaskFailed(f"{what}: {last}")
    error.__cause__ = RemoteTraceback(trace)
    return error


class _Handle:
    """P's view of one S: its pid, what it sent, the relay thread reading it."""

    def __init__(self, job: Job, tasks: Sequence[int], on_message: Callable[[int, Any], None]) -> None:
        self.job, self.tasks, self.on_message = job, tasks, on_message
        self.ended: dict[int, Ended] = {}
        self.running: dict[int, int] = {}  # task -> pid, until it ends
        self.fault, self.finished, self.last, self.status = "", False, False, 0
        self.pid, self.fd = 0, -1
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        for stream in (sys.stdout, sys.stderr):  # the forks would flush inherited buffers
            with contextlib.suppress(Exception):
                stream.flush()
        r, w = os.pipe()
        self.fd, parent = r, os.getpid()

        def keep(pid: int) -> None:
            self.pid = pid

        def child() -> None:
            os.close(r)
            supervisor_main(self.job, self.tasks, w, parent)

        try:
            fork(child, keep)
        finally:
            os.close(w)
        self.thread = threading.Thread(target=self._relay, name="stacktok-supervisor-relay", daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        reader = FrameReader()
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                return
            for msg in reader.feed(data):
                try:
                    self._take(msg)
                except Exception:  # noqa: BLE001 -- a bug in on_message: raised by run_supervised
                    self.fault = self.fault or traceback.format_exc()
            if self.last:  # S's last word: do not wait for EOF (a process it forked may hold the pipe)
                return

    def _take(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "progress":
            self.on_message(msg[1], msg[2])
        elif kind == "started":
            self.running[msg[1]] = msg[2]
        elif kind == "ended":
            self.ended[msg[1].task] = msg[1]
            self.running.pop(msg[1].task, None)
            self.on_message(msg[1].task, None)  # None: the task is over (its bar may close)
        elif kind == "fault":
            self.fault, self.last = msg[1], True
        elif kind == "end":
            self.finished = self.last = True

    def wait(self) -> None:
        """The normal end: every message read, S reaped."""
        if self.thread is not None:
            self.thread.join()
        _, self.status = os.waitpid(self.pid, 0)
        self.pid = 0
        self._close()

    def stop(self) -> None:
        """The early end: S kills and reaps its children and exits; after GRACE s, SIGKILL."""
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + GRACE
            while not os.waitpid(self.pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    kill_group(self.pid)
                    os.waitpid(self.pid, 0)
                    for pid in self.running.values():  # S could not reap them: their groups go
                        kill_group(pid)
                    break
                time.sleep(0.005)
            self.pid = 0
        if self.thread is not None:
            self.thread.join(GRACE)
        self._close()

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def run_supervised(
    count: int,
    work: Callable[[int, Channel], None],
    *,
    workers: int,
    describe: Callable[[int, tuple[int, ...]], str],
    on_message: Callable[[int, Any], None] = lambda task, msg: None,
    limits: Limits | None = None,
    before: Callable[[int], None] | None = None,
    preload: Callable[[int], None] | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> list[Ended]:
    """Run tasks ``0..count-1`` as ``work(task, channel)`` in forked children, ``workers`` at a
    time; one :class:`~conformance.checks.supervisor.Ended` per task, in task order.

    ``describe(task, (a, b))`` says where a dead task was from the last two numbers of its slot;
    ``on_message(task, msg)`` gets each ``progress`` message in P (from a relay thread), then
    ``None`` once the task has ended; ``meanwhile`` runs in P's main thread while the tasks run.
    An exception in P ends every child before it propagates; a Python exception in a task or in
    S is :class:`TaskFailed`, raised once every task has ended."""
    job = Job(count, work, max(1, workers), limits or Limits(), describe, before, preload)
    ended: dict[int, Ended] = {}
    while len(ended) < count:
        handle = _Handle(job, [t for t in range(count) if t not in ended], on_message)
        try:
            handle.start()
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            handle.wait()
        except BaseException:
            handle.stop()
            raise
        if handle.fault:
            raise _failed("the task supervisor failed", handle.fault)
        ended.update(handle.ended)
        if not handle.finished:
            if job.preload is None:
                raise TaskFailed(f"the task supervisor died ({_status(handle.status)}) and cannot go on")
            job.preload = None  # maybe a library crashed on import: the rest runs without
    failed = [e for e in ended.values() if e.raised]
    if failed:
        raise _failed(f"task {failed[0].task} of {count} raised", failed[0].raised)
    return [ended[t] for t in range(count)]


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal_name(os.WTERMSIG(status))
    return f"exit {os.waitstatus_to_exitcode(status)}"


__all__ = ["GRACE", "Ended", "Limits", "RemoteTraceback", "TaskFailed", "run_supervised"]

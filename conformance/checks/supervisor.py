"""The supervisor process: forks the task children, passes their messages on, polices and reaps them.

:func:`supervisor_main` is the whole life of the supervisor (S) that
:func:`conformance.checks.supervise.run_supervised` forks: it starts up to ``workers`` task
children at a time (each forked from S's one thread, in its own process group), reads their
messages, and ends each task with an :class:`Ended` sent to the caller:

- the child sent ``result`` and exited: ``done``, the payload;
- the child sent ``raised`` (a Python exception of ours escaped the task): ``raised``;
- otherwise it died: ``reason`` says how -- ``died with SIGSEGV``, ``ended its process
  (SystemExit: 3)`` or ``(exit 3)``, or S killed it because its slot's tick did not move for
  ``Limits.stall_seconds`` (``stalled for 120 s``) or its ``VmRSS`` passed
  ``Limits.memory_bytes`` (``went over the 4 GiB memory budget (4.2 GiB)``; polled every
  :data:`POLL` s) -- then where, from the slot (``Job.describe``).

While children work, S prepares the next task (``Job.preload``, ``Job.before``), so no slot
waits for it. SIGTERM (from the caller, ending early) or a lost caller makes S SIGKILL every
child's group, reap them and exit; S ignores SIGINT.

Out of scope: starting S and ending it (``conformance.checks.supervise``), what a task does.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import selectors
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.plumbing import (
    GIB,
    Channel,
    FrameReader,
    die_with_parent,
    fork,
    kill_group,
    rss_bytes,
    signal_name,
    size,
    write_frame,
)

#: seconds between two looks at every child's progress slot and memory
POLL = 0.1
#: numbers in a child's progress slot: a tick, then two the task defines
SLOT = 3


@dataclass(frozen=True)
class Limits:
    """What a task child may take before S kills it: seconds without progress, resident bytes."""

    stall_seconds: float = 120.0
    memory_bytes: int = 4 * GIB


@dataclass
class Ended:
    """How task ``task`` ended: ``payload`` (its result, ``done``), else ``raised`` (a Python
    traceback), else ``reason`` (how and where it died). ``hello`` is what it sent once loaded."""

    task: int
    payload: Any = None
    reason: str = ""
    raised: str = ""
    hello: Any = None
    done: bool = False


@dataclass
class Job:
    """What S runs (inherited through the fork): ``count`` tasks as ``work(task, channel)``."""

    count: int
    work: Callable[[int, Channel], None]
    workers: int
    limits: Limits
    describe: Callable[[int, tuple[int, ...]], str]
    before: Callable[[int], None] | None
    preload: Callable[[int], None] | None


@dataclass
class _Child:
    task: int
    pid: int
    fd: int
    slot: memoryview
    reader: FrameReader = field(default_factory=FrameReader)
    tick: int = -1
    moved: float = 0.0
    killed: str = ""  # why S killed it (a template with {where})
    ended: Ended | None = None


class _Stop(BaseException):
    """S was told to stop (SIGTERM from the caller): kill the children, reap, exit."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def supervisor_main(job: Job, tasks: Sequence[int], out: int, parent: int) -> None:
    """S from its fork to its end: run ``tasks``, every message to fd ``out``; then ``("end",)``,
    or ``("fault", traceback)`` if S itself failed. Never returns into the caller's code."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the select (wakeup fd)
    sup = None
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        sup = _Supervisor(job, tasks, out)
        sup.serve()
    except (_Stop, BrokenPipeError):  # told to stop, or the caller is gone
        pass
    except Exception:  # noqa: BLE001 -- a bug (here, in ``before``/``describe``): the caller raises it
        with contextlib.suppress(OSError):
            write_frame(out, ("fault", traceback.format_exc()))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if sup is not None:
            sup.kill_all()


class _Supervisor:
    """S's state: the tasks to start, the children running, their pipes and slots."""

    def __init__(self, job: Job, tasks: Sequence[int], out: int) -> None:
        self.job, self.todo, self.out = job, list(tasks), out
        self.children: dict[int, _Child] = {}
        self.prepared: set[int] = set()
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        self.sel.register(self.wake_r, selectors.EVENT_READ)
        self.slots = mmap.mmap(-1, max(1, job.count) * SLOT * 8)  # shared with every child
        self.next_police = 0.0

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        while self.todo or self.children:
            while self.todo and len(self.children) < self.job.workers:
                self._start(self.todo.pop(0))
            ahead = next((t for t in self.todo if t not in self.prepared), None)
            if ahead is not None:  # while the children work, so no slot waits for it
                self._prepare(ahead)
            for key, _ in self.sel.select(timeout=0 if ahead is not None else POLL):
                if key.fd == self.wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self.wake_r, 4096)
                else:
                    self._read(key.data)
            self._reap()
            self._police()
        write_frame(self.out, ("end",))

    # ----------------------------------------------------------- starting
    def _prepare(self, task: int) -> None:
        if self.job.preload is not None:
            self.job.preload(task)
        if self.job.before is not None:
            self.job.before(task)
        self.prepared.add(task)

    def _start(self, task: int) -> None:
        if task not in self.prepared:
            self._prepare(task)
        gc.freeze()  # the child's collections leave what it inherits alone (no copy-on-write)
        r, w = os.pipe()
        slot = memoryview(self.slots)[task * SLOT * 8 : (task + 1) * SLOT * 8].cast("q")
        slot[0] = slot[1] = slot[2] = 0
        me, made = os.getpid(), []

        def keep(pid: int) -> None:
            made.append(_Child(task, pid, r, slot, moved=time.monotonic()))
            self.children[pid] = made[0]

        fork(lambda: self._child_main(task, w, r, slot, me), keep)
        os.close(w)
        os.set_blocking(r, False)
        self.sel.register(r, selectors.EVENT_READ, made[0])
        write_frame(self.out, ("started", task, made[0].pid))

    def _child_main(self, task: int, w: int, r: int, slot: memoryview, parent: int) -> None:
        die_with_parent(parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; no traceback of ours
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for fd in (r, self.out, self.wake_r, self.wake_w, *(c.fd for c in self.children.values())):
            os.close(fd)
        self.sel.close()
        channel = Channel(w, slot)
        try:
            self.job.work(task, channel)
        except Exception:  # noqa: BLE001 -- our bug: the caller raises it with this trace
            channel.send("raised", traceback.format_exc())
            raise
        except BaseException as exc:  # a library's sys.exit, a pyo3 panic: the task died
            channel.send("quit", f"{type(exc).__name__}: {exc}"[:300])
            raise

    # ----------------------------------------------------------- messages
    def _read(self, child: _Child) -> None:
        try:
            data = os.read(child.fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:  # EOF: the child is exiting (its SIGCHLD wakes the loop to reap it)
            self.sel.unregister(child.fd)
            return
        for kind, payload in child.reader.feed(data):
            self._message(child, kind, payload)

    def _message(self, child: _Child, kind: str, payload: Any) -> None:
        ended = child.ended = child.ended or Ended(child.task)
        if kind == "progress":
            write_frame(self.out, ("progress", child.task, payload))
        elif kind == "hello":
            ended.hello = payload
        elif kind == "result":
            ended.payload, ended.done = payload, True
        elif kind == "raised":
            ended.raised = payload
        elif kind == "quit":
            ended.reason = payload

    # ----------------------------------------------------------- ending
    def _reap(self) -> None:
        for child in list(self.children.values()):
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid:
                self._drain(child)
                kill_group(child.pid)  # anything it left in its group
                del self.children[child.pid]
                write_frame(self.out, ("ended", self._outcome(child, status)))

    def _drain(self, child: _Child) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(child.fd)
        while True:
            try:
                data = os.read(child.fd, 1 << 16)
            except BlockingIOError:  # a grandchild holds the pipe open: what came is all
                break
            if not data:
                break
            for kind, payload in child.reader.feed(data):
                self._message(child, kind, payload)
        os.close(child.fd)

    def _outcome(self, child: _Child, status: int) -> Ended:
        ended = child.ended or Ended(child.task)
        if ended.done or ended.raised:
            return ended
        where = self.job.describe(child.task, tuple(child.slot[1:]))
        if child.killed:
            ended.reason = child.killed.format(where=where)
        elif os.WIFSIGNALED(status):
            ended.reason = f"died with {signal_name(os.WTERMSIG(status))} {where}"
            if os.WTERMSIG(status) == signal.SIGKILL:
                ended.reason += " (killed from outside this run: the system's out-of-memory killer?)"
        else:  # what it raised (a library's sys.exit, a pyo3 panic), else its own exit code
            how = ended.reason or f"exit {os.waitstatus_to_exitcode(status)}"
            ended.reason = f"ended its process ({how}) {where}"
        return ended

    def _police(self) -> None:
        now = time.monotonic()
        if now < self.next_police:
            return
        self.next_police = now + POLL
        limits = self.job.limits
        for child in self.children.values():
            if child.killed or (child.ended is not None and child.ended.done):
                continue
            tick = child.slot[0]
            if tick != child.tick:
                child.tick, child.moved = tick, now
            elif now - child.moved >= limits.stall_seconds:
                self._kill(child, f"stalled for {limits.stall_seconds:g} s {{where}} (no progress: killed)")
                continue
            rss = rss_bytes(child.pid)
            if rss > limits.memory_bytes:
                budget = size(limits.memory_bytes)
                self._kill(child, f"went over the {budget} memory budget ({size(rss)}) {{where}} (killed)")

    def _kill(self, child: _Child, why: str) -> None:
        child.killed = why
        kill_group(child.pid)

    def kill_all(self) -> None:
        """The early end: every child's group SIGKILLed, every child reaped."""
        for child in self.children.values():
            kill_group(child.pid)
        for child in list(self.children.values()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)
        self.children.clear()


__all__ = ["POLL", "Ended", "Job", "Limits", "supervisor_main"]

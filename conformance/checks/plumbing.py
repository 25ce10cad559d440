"""Process plumbing for the supervised backends: frames over pipes, forks, kills, memory.

The pieces ``conformance.checks.supervise`` (the caller's side) and
``conformance.checks.supervisor`` (the supervisor process) share:

- :func:`write_frame` / :class:`FrameReader`: pickled messages over a pipe, length first;
- :class:`Channel`: a task child's line to its supervisor -- messages, and its progress slot
  (three int64 in shared memory: a tick bumped at every step, then two numbers the task defines);
- :func:`fork`: a fork with SIGINT/SIGTERM/SIGCHLD held back until the parent has recorded the
  child, the child never returning into the caller's code; :func:`own_group`,
  :func:`die_with_parent`, :func:`kill_group`;
- :func:`rss_bytes` (``VmRSS`` of ``/proc/PID/status``) and :func:`signal_name`.

Out of scope: what the messages mean; platforms without ``fork``. ``PR_SET_PDEATHSIG`` and
``/proc`` are Linux's: elsewhere a child does not die with its parent and its memory reads 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import pickle
import signal
import struct
from collections.abc import Callable
from typing import Any

GIB, MIB = 1 << 30, 1 << 20
_HEADER = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}


def write_frame(fd: int, obj: object) -> None:
    """``obj`` pickled, length first, written whole (blocking)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Bytes in, whole frames out (a pipe delivers them in pieces)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        out = []
        while len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + size:
                break
            out.append(pickle.loads(self.buf[_HEADER.size : _HEADER.size + size]))
            del self.buf[: _HEADER.size + size]
        return out


class Channel:
    """A task child's line to its supervisor: :meth:`send` messages, write ``slot`` as it works."""

    def __init__(self, fd: int, slot: memoryview) -> None:
        self.fd, self.slot = fd, slot

    def send(self, kind: str, payload: object = None) -> None:
        """``progress`` (passed on to the caller), ``hello`` (once loaded) or ``result`` (last)."""
        write_frame(self.fd, (kind, payload))


def fork(child: Callable[[], None], keep: Callable[[int], None]) -> None:
    """Fork; the parent calls ``keep(pid)`` with SIGINT/SIGTERM/SIGCHLD still held back, so no
    handler can raise before the child is recorded. The child, in its own process group, runs
    ``child()`` with those signals still held (it sets its handlers, then lets them in) and
    exits: 0, or 70 if ``child`` raised; it never returns into the caller's code."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                own_group(0)
                signal.set_wakeup_fd(-1)  # the parent's: its signal watcher must not read ours
                if faulthandler.is_enabled():  # a crash is an outcome, not a dump on the caller's stderr
                    faulthandler.disable()
                child()
                code = 0
            finally:
                os._exit(code)
        own_group(pid)  # both sides: whichever runs first, the group exists before any kill
        keep(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def own_group(pid: int) -> None:
    """Put ``pid`` (0: this process) at the head of its own process group."""
    with contextlib.suppress(OSError):
        os.setpgid(pid, 0)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux); exit now if ``parent`` is already gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``, and ``pid`` itself (if it never got its group)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (``VmRSS``), 0 if it is gone or there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def size(n: int) -> str:
    """``n`` bytes for a reader: ``"4 GiB"``, ``"9.2 GiB"``, ``"64 MiB"``."""
    if n >= GIB:
        return f"{n / GIB:.1f}".removesuffix(".0") + " GiB"
    return f"{round(n / MIB):,} MiB"


__all__ = [
    "GIB",
    "MIB",
    "Channel",
    "FrameReader",
    "die_with_parent",
    "fork",
    "kill_group",
    "own_group",
    "rss_bytes",
    "signal_name",
    "size",
    "write_frame",
]

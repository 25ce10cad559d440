"""Run untrusted work in a forked child under a time and memory budget: :func:`run_bounded`.

Rendering a chat template or parsing a file from the internet can hang (``range`` inside
``range``), allocate without end (``'a' * 10**10``) or crash the interpreter. Here the work runs
in a child forked from the caller, whose address space is capped (``RLIMIT_AS``: what the child
already maps plus ``budget.memory``) and which is killed when ``budget.seconds`` pass. What comes
back is an :class:`Outcome`: the function's value, the exception it raised (type name and
message), or how it was stopped -- ``"timeout"``, ``"memory"`` (a ``MemoryError`` or a result too
large to send back), ``"crashed"`` (killed by a signal, named). Nothing of the child reaches
stdout or stderr: the child's own file descriptors 1 and 2 point to ``/dev/null``.

A signal to the caller (Ctrl-C, ``kill``) ends the child first: ``KeyboardInterrupt`` and
``SystemExit`` propagate after the child is killed and reaped; the child itself ignores SIGINT
(the terminal sends it to the whole process group) and dies silently on SIGTERM.

Why by hand: ``multiprocessing`` neither limits a child's memory nor returns its death as a
value, and a pool reuses the process a bomb has poisoned. ``fork`` keeps the caller's loaded
modules (no re-import per call: a call costs ~2-20 ms, most of it copying page tables).

Out of scope: platforms without ``fork`` and ``RLIMIT_AS`` (the work then runs in-process with the
time limit unenforced: :func:`available` says which); CPU-time accounting; threads in the child.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

try:
    import resource
except ImportError:  # pragma: no cover -- not POSIX
    resource = None  # type: ignore[assignment]

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Budget:
    """How long and how much memory one piece of untrusted work may take."""

    seconds: float = 10.0
    #: bytes the child may map beyond what it inherits
    memory: int = 1 * GiB

    def describe(self) -> str:
        mem = f"{self.memory / GiB:g} GiB" if self.memory >= GiB else f"{self.memory // MiB} MiB"
        return f"{self.seconds:g} s / {mem}"


@dataclass(frozen=True)
class Outcome:
    """What became of the work: ``kind`` and the value or the reason."""

    kind: Literal["ok", "raised", "timeout", "memory", "crashed"]
    value: Any = None
    #: for "raised": the exception's type name; for "crashed": the signal's name
    error_type: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def describe(self, budget: Budget) -> str:
        """A few words: ``exceeded 10 s / 1 GiB``, ``raised ValueError: ...``, ``died with SIGSEGV``."""
        if self.kind == "timeout":
            return f"exceeded {budget.describe()} (still running after {budget.seconds:g} s)"
        if self.kind == "memory":
            return f"exceeded {budget.describe()} (out of memory)"
        if self.kind == "crashed":
            return f"died with {self.error_type}"
        if self.kind == "raised":
            return f"raised {self.error_type}: {self.message}"
        return "ok"


def available() -> bool:
    """Whether work can be bounded here (``fork`` and ``RLIMIT_AS``)."""
    return hasattr(os, "fork") and resource is not None and hasattr(resource, "RLIMIT_AS")


def run_bounded(
    fn: Callable[..., Any], /, *args: Any, budget: Budget, max_result: int = 256 * MiB
) -> Outcome:
    """``fn(*args)`` in a forked child under ``budget`` (module docstring); never raises for what
    ``fn`` does. ``max_result`` bounds the pickled value sent back (over it: ``"memory"``)."""
    if not available():  # pragma: no cover
        return _in_process(fn, args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(fn, args, write_end, budget, max_result)
    os.close(write_end)
    status = 0
    try:
        data, late = _collect(read_end, deadline=time.monotonic() + budget.seconds, cap=max_result)
    finally:
        os.close(read_end)
        _kill(pid)
        status = _reap(pid)
    if late:
        return Outcome("timeout")
    if data:
        try:
            kind, value, etype, message = pickle.loads(data)
            return Outcome(kind, value, etype, message)
        except Exception:  # noqa: BLE001 -- a truncated pipe: the child died while writing
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGKILL:  # the kernel's OOM killer, or our own kill after the deadline
            return Outcome("memory")
        return Outcome("crashed", error_type=_signal_name(sig))
    return Outcome("crashed", error_type=f"exit status {os.WEXITSTATUS(status)}")


def _in_process(fn: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:  # pragma: no cover
    try:
        return Outcome("ok", fn(*args))
    except MemoryError:
        return Outcome("memory")
    except Exception as exc:  # noqa: BLE001
        return Outcome("raised", error_type=type(exc).__name__, message=str(exc)[:500])


def _child(fn: Callable[..., Any], args: tuple[Any, ...], out: int, budget: Budget, cap: int) -> None:
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        mapped = _mapped_bytes()
        if mapped is not None:
            limit = mapped + budget.memory
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        _cap_cpu(budget.seconds)
        try:
            reply: tuple[Any, ...] = ("ok", fn(*args), "", "")
        except MemoryError:
            reply = ("memory", None, "", "")
        except RecursionError as exc:
            reply = ("raised", None, "RecursionError", str(exc)[:500])
        except Exception as exc:  # noqa: BLE001 -- every failure of untrusted work is a value
            reply = ("raised", None, type(exc).__name__, str(exc)[:500])
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            data = pickle.dumps(("memory", None, "", ""))
        except Exception as exc:  # noqa: BLE001 -- an unpicklable value
            data = pickle.dumps(("raised", None, type(exc).__name__, str(exc)[:500]))
        if len(data) > cap:
            data = pickle.dumps(("memory", None, "", "the result is larger than the budget allows"))
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
    except BaseException:  # noqa: BLE001 -- the child never unwinds into the caller's code
        code = 70
    finally:
        os._exit(code)


def _cap_cpu(seconds: float) -> None:
    """The kernel's backstop: SIGKILL once the child's CPU time passes the budget by 2 s, so a
    spinning child cannot outlive a caller that died without killing it (SIGKILL, OOM killer)."""
    cap = int(seconds) + 2
    try:
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (cap, cap))  # soft == hard: SIGKILL, no SIGXCPU core
    except (OSError, ValueError):  # pragma: no cover -- a platform without it: the caller's deadline only
        pass


def _mapped_bytes() -> int | None:
    """The child's virtual size now (``VmSize``), so the cap is what it maps plus the budget."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _collect(fd: int, *, deadline: float, cap: int) -> tuple[bytes, bool]:
    """What the child writes until it closes the pipe; ``late`` when the deadline passed first."""
    chunks, total = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", True
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        total += len(chunk)
        if total > cap + 4096:
            return b"", False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0
        except InterruptedError:  # pragma: no cover -- PEP 475 retries; kept for clarity
            continue


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"

"""vLLM's OpenAI server on 127.0.0.1 around a model directory: start, wait for health, stop.

:func:`serve` runs ``python -m vllm.entrypoints.openai.api_server`` on
127.0.0.1 in its own session / process group and polls ``/health`` within a
bound; on exit it sends SIGTERM to the group, SIGKILL after a bound, and scans
``/proc`` to prove no process of the server is left (:attr:`Server.stray`). If
the caller dies first: SIGTERM to it (main thread, default handler) raises
SystemExit so the stop still runs, and on Linux the server gets SIGTERM
through ``PR_SET_PDEATHSIG`` even when the caller is SIGKILLed.

Out of scope: building the model (:mod:`conformance.served.model`), the HTTP
calls themselves (:mod:`conformance.served.client`), GPUs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.served.client import REQUEST_TIMEOUT, healthy, request_json
from conformance.served.processes import alive, exit_on_sigterm, proc_table, process_tree

SERVED_NAME = "stacktok-tiny"
MAX_MODEL_LEN = 2048
#: Environment for the server; values already in os.environ win.
SERVER_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the default (4+) is far more than a 17 MB model needs
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: Runs as ``python -c _LAUNCHER PARENT_PID ARGS...``: parent-death signal, then exec the server.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('stacktok: the parent exited before the vLLM server started')\n"
    f"os.execv(sys.executable, [sys.executable, '-m', '{SERVER_MODULE}', *sys.argv[2:]])\n"
)

#: A callback for one progress line (``say("served: ...")``), or None for silence.
ProgressCallback = Callable[[str], None] | None


class ServerError(RuntimeError):
    """The server did not start (exited, or no /health within the bound); carries the log tail.

    ``server`` is the stopped :class:`Server` (its ``stray`` list is final).
    """

    server: Server | None = None


@dataclass
class Server:
    """A running server: where it is and, after exit, how it stopped."""

    url: str
    port: int
    pid: int
    model: str
    log_path: Path
    startup_seconds: float = 0.0
    version: str = ""
    stop_seconds: float | None = None
    killed: bool = False  # SIGKILL was needed
    stray: list[int] = field(default_factory=list)  # pids left after stop (must stay empty)
    tree: set[tuple[int, int]] = field(default_factory=set)

    def request(self, path: str, body: Any = None, *, timeout: float = REQUEST_TIMEOUT) -> Any:
        return request_json(self.url, path, body, timeout=timeout)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def await_health(
    proc: subprocess.Popen,
    server: Any,
    *,
    t0: float,
    timeout: float,
    what: str,
    failed: Callable[[Any, str], Exception],
    poll: float = 0.5,
) -> None:
    """Poll ``server.url``'s ``/health`` until it answers, recording ``server.tree`` (the process
    tree, for the stop's scan) and ``server.startup_seconds``; raise ``failed(server, why)`` when
    ``proc`` exits first or ``timeout`` seconds from ``t0`` pass."""
    deadline = t0 + timeout
    while True:
        if proc.poll() is not None:
            raise failed(server, f"{what} exited with code {proc.returncode} before answering /health")
        if time.monotonic() > deadline:
            raise failed(server, f"{what} gave no /health within {timeout:.0f}s")
        if healthy(server.url, timeout=2):
            break
        server.tree |= process_tree(proc.pid, proc_table())
        time.sleep(poll)
    server.startup_seconds = time.monotonic() - t0
    server.tree |= process_tree(proc.pid, proc_table())


def _stop(proc: subprocess.Popen, server: Server, term_timeout: float, kill_timeout: float) -> None:
    """SIGTERM the group, SIGKILL after ``term_timeout``, then record anything left in ``server.stray``."""
    root = proc.pid
    t0 = time.monotonic()
    with contextlib.suppress(OSError):
        server.tree |= process_tree(root, proc_table())
    for sig, bound in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
        if sig == signal.SIGKILL:
            server.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, sig)  # the API server shuts its engine down on SIGTERM
        table = proc_table()
        for pid in alive(server.tree, root):  # any child that left the group
            if pid in table and table[pid][2] != root:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
            if proc.returncode is not None and not alive(server.tree, root):
                server.stop_seconds = time.monotonic() - t0
                server.stray = []
                return
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
    server.stop_seconds = time.monotonic() - t0
    server.stray = alive(server.tree, root)


def _failed_start(server: Server, message: str) -> ServerError:
    err = ServerError(f"{message}:\n{server.log_tail()}")
    err.server = server
    return err


@contextlib.contextmanager
def serve(
    model_dir: Path,
    *,
    port: int = 0,
    timeout: float = 300.0,
    python: str | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    term_timeout: float = 30.0,
    kill_timeout: float = 10.0,
    log_dir: Path | None = None,
    progress: ProgressCallback = None,
) -> Iterator[Server]:
    """Run vLLM's OpenAI server on 127.0.0.1 over ``model_dir``; yield a :class:`Server`.

    ``port=0`` picks a free port. Waits at most ``timeout`` seconds for
    ``/health``; raises :class:`ServerError` (with the log tail) if the server
    exits or does not answer in time. On exit the whole process group gets
    SIGTERM, then SIGKILL after ``term_timeout``; ``Server.stray`` lists any
    pid still running afterwards (empty when the shutdown is clean).
    """
    say = progress or (lambda _m: None)
    port = port or _free_port()
    own_log = log_dir is None
    log_root = Path(tempfile.mkdtemp(prefix="stacktok-served-log-")) if own_log else Path(log_dir)
    log_path = log_root / f"vllm-server-{port}.log"
    args = ["--model", str(model_dir), "--served-model-name", SERVED_NAME, "--host", "127.0.0.1"]
    args += ["--port", str(port), "--dtype", "float32", "--max-model-len", str(MAX_MODEL_LEN)]
    args += ["--enforce-eager", *extra_args]
    # Linux: a launcher sets PR_SET_PDEATHSIG (SIGTERM when this process dies, even by SIGKILL)
    # and execs the server, so a killed gate cannot orphan it (it runs in its own session).
    launch = ["-c", _LAUNCHER, str(os.getpid())] if sys.platform == "linux" else ["-m", SERVER_MODULE]
    cmd = [python or sys.executable, *launch, *args]
    full_env = dict(os.environ)
    for k, v in SERVER_ENV.items():
        full_env.setdefault(k, v)
    full_env.update(env or {})
    server = Server(f"http://127.0.0.1:{port}", port, -1, SERVED_NAME, log_path)
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,  # own session and process group: the group is what we stop
        )
    server.pid = proc.pid
    restore = exit_on_sigterm()
    try:
        say(f"served: vLLM server pid {proc.pid} starting on 127.0.0.1:{port}")
        await_health(proc, server, t0=t0, timeout=timeout, what="vLLM server", failed=_failed_start)
        with contextlib.suppress(Exception):
            server.version = str(server.request("/version", timeout=10).get("version", ""))
        say(f"served: vLLM {server.version} ready in {server.startup_seconds:.1f}s")
        yield server
    finally:
        _stop(proc, server, term_timeout, kill_timeout)
        restore()
        if own_log and not server.stray:
            shutil.rmtree(log_root, ignore_errors=True)

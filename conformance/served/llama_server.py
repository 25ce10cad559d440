"""llama.cpp's own ``llama-server`` on 127.0.0.1 around a model GGUF: start, ask, stop.

:func:`llama_server` runs the binary (:mod:`conformance.served.llama_build` finds or builds it)
on a model GGUF (:mod:`conformance.served.tiny_gguf` writes one around a tokenizer GGUF)::

    llama-server -m MODEL --host 127.0.0.1 --port FREE --jinja -c 2048 -t 1 -np 1 --no-warmup
                 --no-ui --offline --no-prefill-assistant -fit off

in its own session / process group, through a launcher that sets ``PR_SET_PDEATHSIG`` (the
server gets SIGTERM even when the caller is SIGKILLed) and execs the binary, with every
``LLAMA_ARG_*`` / ``LLAMA_API_KEY`` variable removed from its environment (llama.cpp reads its
flags from those) and ``/health`` polled within a bound. On exit: SIGTERM to the group, SIGKILL
after a bound, and a ``/proc`` scan proving no process is left (:attr:`LlamaServer.stray`) --
the stop and the scan are :mod:`conformance.served.server`'s and
:mod:`conformance.served.processes`', the HTTP is :mod:`conformance.served.client`'s.

:class:`LlamaServer` asks the endpoints the gate compares:

- :meth:`~LlamaServer.apply_template`: ``POST /apply-template`` -- the server's own jinja engine
  (``--jinja``) through the path a chat completion takes (``oaicompat_chat_params_parse``), the
  ``prompt`` it answers. Unlike transformers, that path passes today's ``date_string`` /
  ``datetime``, ``enable_thinking`` (its default detected per template) and
  ``preserve_reasoning`` (default true: ``drop_thinking``/``clear_thinking`` false) to every
  template, leaves ``add_generation_prompt`` *undefined* when it is false, and strips a leading
  BOS string from the result when the vocabulary adds BOS itself, and it rewrites some
  conversations first (a system message folded into the first user turn when the template has
  no system role, StepFun contents trimmed); request keyword arguments
  (``chat_template_kwargs``) override the context values. ``--no-prefill-assistant``: a trailing
  assistant message is rendered as a finished turn, as transformers does, not continued;
- :meth:`~LlamaServer.tokenize`: ``POST /tokenize {"content", "add_special", "parse_special"}``;
- :meth:`~LlamaServer.detokenize`: ``POST /detokenize {"tokens"}``;
- :meth:`~LlamaServer.props`: ``GET /props`` (``chat_template``, ``bos_token``, ``eos_token``,
  ``build_info``) plus ``bos_id`` / ``eos_id``, each the one id ``/tokenize`` gives its string
  with ``parse_special`` (``None`` when it is not one id). The server reports no EOT id.

An error status raises :class:`LlamaRequestError` carrying the server's own message (a template
that raises on a conversation shape is an error for that shape; the server stays up).

Out of scope: generation (the weights are random), the OpenAI chat endpoints' parsing of model
output, tool-call grammars, router mode (``--models-dir``), GPUs, platforms other than Linux.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.served.client import REQUEST_TIMEOUT, HttpError, request_json
from conformance.served.llama_build import HOW
from conformance.served.processes import exit_on_sigterm
from conformance.served.server import Server, _free_port, _stop, await_health

CONTEXT = 2048
SERVER_FLAGS = (
    "--jinja",  # the server's jinja engine, not its built-in template list
    "-c", str(CONTEXT), "-t", "1", "-np", "1",
    "--no-warmup",  # no generation at start: the weights are noise
    "--no-ui",
    "--offline",  # never a download
    "--no-prefill-assistant",  # a trailing assistant turn is closed, as transformers renders it
    "-fit", "off",  # no probing of device memory
)  # fmt: skip
#: Variables llama.cpp reads flags from (``LLAMA_ARG_*``, the API key): never passed to the server.
ENV_DROPPED = ("LLAMA_ARG_", "LLAMA_API_KEY")
#: Runs as ``python -c _LAUNCHER PARENT_PID BINARY ARGS...``: parent-death signal, then exec.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('stacktok: the parent exited before llama-server started')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class LlamaServerError(RuntimeError):
    """``llama-server`` is missing or did not start; the message has the log tail and the fix.

    ``server`` is the stopped :class:`LlamaServer` when one was started (its ``stray`` is final).
    """

    server: LlamaServer | None = None


class LlamaRequestError(HttpError):
    """The server answered an error status; ``message`` is its own error text."""

    def __init__(self, path: str, code: int, body: str) -> None:
        super().__init__(code, body)
        self.path = path
        self.message = _error_message(body)
        self.args = (f"llama-server {path}: HTTP {code}: {self.message}",)


def _error_message(body: str) -> str:
    try:
        err = json.loads(body).get("error", {})
        return str(err.get("message", body) if isinstance(err, dict) else err)
    except (ValueError, AttributeError):
        return body[:500]


@dataclass
class LlamaServer(Server):
    """A running ``llama-server`` (:class:`conformance.served.server.Server`: where it is and, after
    exit, how it stopped), the ``binary`` it runs, and what it answers."""

    binary: Path | None = None

    def request(self, path: str, body: Any = None, *, timeout: float = REQUEST_TIMEOUT) -> Any:
        """GET (``body`` None) or POST JSON; the answer. :class:`LlamaRequestError` on an error status."""
        try:
            return request_json(self.url, path, body, timeout=timeout)
        except HttpError as exc:
            raise LlamaRequestError(path, exc.code, exc.body) from None

    def apply_template(
        self,
        messages: Sequence[dict],
        *,
        add_generation_prompt: bool,
        tools: Sequence[dict] | None = None,
        timeout: float = REQUEST_TIMEOUT,
        **kwargs: Any,
    ) -> str:
        """The prompt ``/apply-template`` renders; ``kwargs`` go as ``chat_template_kwargs``."""
        body: dict[str, Any] = {"messages": list(messages), "add_generation_prompt": add_generation_prompt}
        if tools is not None:
            body["tools"] = list(tools)
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        return self.request("/apply-template", body, timeout=timeout)["prompt"]

    def tokenize(
        self, text: str, *, add_special: bool, parse_special: bool, timeout: float = REQUEST_TIMEOUT
    ) -> list[int]:
        """Ids of ``text``: ``add_special`` adds BOS/EOS as the vocabulary says; ``parse_special``
        turns special-token strings in ``text`` into their ids."""
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        return [int(i) for i in self.request("/tokenize", body, timeout=timeout)["tokens"]]

    def detokenize(self, ids: Sequence[int], *, timeout: float = REQUEST_TIMEOUT) -> str:
        """The text of ``ids`` as the server decodes them."""
        return self.request("/detokenize", {"tokens": [int(i) for i in ids]}, timeout=timeout)["content"]

    def props(self, *, timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
        """``GET /props`` plus ``bos_id`` / ``eos_id`` (the one id of each token's string, else None)."""
        props = dict(self.request("/props", timeout=timeout))
        for name in ("bos", "eos"):
            text = props.get(f"{name}_token") or ""
            ids = self.tokenize(text, add_special=False, parse_special=True, timeout=timeout) if text else []
            props[f"{name}_id"] = ids[0] if len(ids) == 1 else None
        return props


def _failed(server: LlamaServer, message: str) -> LlamaServerError:
    err = LlamaServerError(f"{message}; log {server.log_path}:\n{server.log_tail()}")
    err.server = server
    return err


def _server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_DROPPED)}
    env["HF_HUB_OFFLINE"] = "1"
    return env


@contextlib.contextmanager
def llama_server(
    binary: Path,
    model_gguf: Path,
    *,
    say: Callable[[str], None] | None = None,
    start_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    term_timeout: float = 15.0,
    kill_timeout: float = 5.0,
    log_dir: Path | None = None,
) -> Iterator[LlamaServer]:
    """Run ``binary`` on ``model_gguf`` on 127.0.0.1; yield a :class:`LlamaServer`.

    Waits at most ``start_timeout`` seconds for ``/health``; raises :class:`LlamaServerError`
    (with the log tail) when the binary is missing, exits, or does not answer in time. On exit
    the process group gets SIGTERM, then SIGKILL after ``term_timeout``; ``stray`` lists any pid
    still running afterwards (empty when the stop is clean). The log goes to ``log_dir`` (default:
    a temporary directory, removed after a clean stop).
    """
    tell = say or (lambda _m: None)
    binary, model_gguf = Path(binary), Path(model_gguf)
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise LlamaServerError(f"no llama-server binary at {binary}: {HOW}")
    if not model_gguf.is_file():
        raise LlamaServerError(f"no model GGUF at {model_gguf}: write one with conformance.served.tiny_gguf")
    port = _free_port()
    own_log = log_dir is None
    log_root = Path(tempfile.mkdtemp(prefix="stacktok-llama-server-")) if own_log else Path(log_dir)
    log_path = log_root / f"llama-server-{port}.log"
    args = [str(binary), "-m", str(model_gguf), "--host", "127.0.0.1", "--port", str(port)]
    args += [*SERVER_FLAGS, *extra_args]
    cmd = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args] if sys.platform == "linux" else args
    server = LlamaServer(f"http://127.0.0.1:{port}", port, -1, str(model_gguf), log_path, binary=binary)
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_server_env(),
            start_new_session=True,  # own session and process group: the group is what we stop
        )
    server.pid = proc.pid
    restore = exit_on_sigterm()
    started = False
    try:
        tell(f"llama-server: pid {proc.pid} starting on 127.0.0.1:{port}")
        await_health(
            proc, server, t0=t0, timeout=start_timeout, what="llama-server", failed=_failed, poll=0.2
        )
        with contextlib.suppress(Exception):  # the version is informative: never fatal
            server.version = str(server.request("/props", timeout=10).get("build_info", ""))
        tell(f"llama-server: {server.version} ready in {server.startup_seconds:.1f}s")
        started = True
        yield server
    finally:
        _stop(proc, server, term_timeout, kill_timeout)
        restore()
        tell(
            f"llama-server: stopped in {server.stop_seconds or 0:.1f}s, {len(server.stray)} process(es) left"
        )
        if own_log and started and not server.stray:  # a failed start keeps its log
            shutil.rmtree(log_root, ignore_errors=True)

"""The served path: a real vLLM OpenAI server over the directory's tokenizer, on 127.0.0.1.

The in-process vLLM adapter (``backends/vllm_backend.py``) calls the code the
server would call. This module runs the server itself and talks HTTP to it:

1. :func:`build_tiny_model` -- a random-weight ``LlamaForCausalLM`` (hidden 64,
   2 layers, 4 heads of 32, intermediate 128, vocab 32,768, 8,192 positions,
   ``torch.manual_seed(0)``, ~17 MB of safetensors) around copies of the
   directory's tokenizer files, plus a ``generation_config.json`` (the
   directory's own if it has one, else eos ``[<|eos|>, <|end|>]``).
   ``head_dim`` is 32, not 64 / 4 = 16: vLLM's CPU attention kernel supports
   head sizes 32..512 only, and a 16 model starts but kills the engine on its
   first forward pass (``Unsupported CPU attention configuration: head_dim=16``).
2. :func:`serve` -- ``python -m vllm.entrypoints.openai.api_server`` on
   127.0.0.1 in its own session / process group, ``/health`` polled within a
   bound; on exit SIGTERM to the group, SIGKILL after a bound, and a ``/proc``
   scan proving no process of the server is left (:attr:`Server.stray`). If
   the caller dies first: SIGTERM to it (main thread, default handler) raises
   SystemExit so the stop still runs, and on Linux the server gets SIGTERM
   through ``PR_SET_PDEATHSIG`` even when the caller is SIGKILLed.
3. :func:`check_served` -- :class:`~conformance.core.rows.Row` rows, backend
   ``vllm-server``:

   - ``served.start``: the server answered ``/health`` (version, seconds).
   - ``served.tokenize_prompt``: ``POST /tokenize {"prompt", "add_special_tokens":
     false}`` equals the reference's *trusted* ids (``allowed_special="all"``):
     vLLM parses special strings in request text, so trusted ids are what it
     must match.
   - ``served.injection`` (*warn*, never *pass*, when it happens): the same
     text as a client sends it by default (``{"prompt"}`` only) turns typed
     special strings into control tokens where the untrusted reference has
     none; chats with special strings in content likewise (string template).
     vLLM has no per-request safe path; the fix says what to do instead.
   - ``served.tokenize_messages``: ``POST /tokenize {"messages",
     "add_generation_prompt"}`` equals ``render_conversation`` ids, for chats
     without special strings in content.
   - ``served.detokenize``: ``POST /detokenize {"tokens": reference ids}``
     returns the original text (trusted and untrusted ids).
   - ``served.eos``: generation (``/v1/completions``, ``temperature=0``,
     ``logit_bias`` +100 on one id, ``max_tokens=3``) stops after one token
     for ``<|eos|>`` and ``<|end|>`` and does not stop for ``<|pad|>`` /
     ``<|assistant|>`` -- the served generation config really ends turns
     (vllm#4180).
   - ``served.shutdown``: the whole process group exited; nothing left.

HTTP is the standard library only (``urllib.request``, proxies bypassed),
every request has a timeout and every loop a deadline. Nothing is written into
the tokenizer directory. Install (CPU, no GPU): ``conformance/INSTALL-served.md``.

Out of scope: sampling quality (the weights are random), chat completions
text, streaming over HTTP, GPUs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export.chat import ChatFormatError, render_conversation

from conformance.core.declared import Declarations
from conformance.core.fixtures import Probe
from conformance.core.rows import Row as Check
from conformance.checks.runner import first_difference

BACKEND = "vllm-server"
SERVED_NAME = "stacktok-tiny"
INSTALL_HINT = "install a CPU vLLM: conformance/INSTALL-served.md"
#: Files copied from the tokenizer directory into the model directory (when present).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
)
#: The tiny model (see the module docstring for head_dim).
MODEL_SHAPE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "intermediate_size": 128,
    "max_position_embeddings": 8192,
}
VOCAB = 32768
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
REQUEST_TIMEOUT = 60.0  # one HTTP request (a 1 MB probe tokenizes in well under a second)

Progress = Callable[[str], None] | None


class ServerError(RuntimeError):
    """The server did not start (exited, or no /health within the bound); carries the log tail.

    ``server`` is the stopped :class:`Server` (its ``stray`` list is final).
    """

    server: Server | None = None


# ---------------------------------------------------------------------------- the model
def _special_ids(tokenizer_dir: Path) -> dict[str, int]:
    """``{content: id}`` of the added tokens: tokenizer.json's, then tokenizer_config.json's on top."""
    ids: dict[str, int] = {}
    tj = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    for tok in tj.get("added_tokens", []):
        ids[tok["content"]] = int(tok["id"])
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    for k, v in cfg.get("added_tokens_decoder", {}).items():
        ids[v["content"]] = int(k)
    return ids


def _token_id(cfg: Mapping[str, Any], key: str, ids: Mapping[str, int], default: str) -> int | None:
    tok = cfg.get(key, default)
    if isinstance(tok, Mapping):
        tok = tok.get("content")
    return ids.get(tok) if isinstance(tok, str) else None


def build_tiny_model(tokenizer_dir: Path, out: Path) -> Path:
    """Save a random-weight tiny Llama around copies of ``tokenizer_dir``'s files into ``out``.

    bos/eos/pad ids come from the tokenizer (``tokenizer_config.json``'s
    ``bos_token`` / ``eos_token`` / ``pad_token``). ``generation_config.json`` is
    the directory's own when it has one (so the served eos set is what would
    ship), else eos ``[<|eos|>, <|end|>]``. Never writes into ``tokenizer_dir``.
    Returns ``out``.
    """
    tokenizer_dir, out = Path(tokenizer_dir), Path(out)
    src, dst = tokenizer_dir.resolve(), out.resolve()
    if dst == src or src in dst.parents:
        raise ValueError(f"{out} is inside {tokenizer_dir}: the tokenizer directory is never written")
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{tokenizer_dir} has no tokenizer.json")
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    ids = _special_ids(tokenizer_dir)
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    tcfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    bos = _token_id(tcfg, "bos_token", ids, "<|bos|>")
    eos = _token_id(tcfg, "eos_token", ids, "<|eos|>")
    pad = _token_id(tcfg, "pad_token", ids, "<|pad|>")
    end = ids.get("<|end|>")
    vocab = max([VOCAB, *(i + 1 for i in ids.values())])  # an id past 32,767 still gets an embedding row

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = LlamaConfig(
        **MODEL_SHAPE,
        vocab_size=vocab,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=bos, eos_token_id=[i for i in (eos, end) if i is not None], pad_token_id=pad
    )
    model.save_pretrained(out)
    if not (out / "model.safetensors").is_file():
        raise RuntimeError(f"transformers did not write {out / 'model.safetensors'}")
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, out / name)
    if (tokenizer_dir / "generation_config.json").is_file():
        shutil.copyfile(tokenizer_dir / "generation_config.json", out / "generation_config.json")
    return out


# ---------------------------------------------------------------------------- processes
def _proc_table() -> dict[int, tuple[str, int, int, int, int]]:
    """``{pid: (state, ppid, pgid, sid, starttime)}`` from /proc (Linux)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))
    return table


def _tree(root: int, table: Mapping[int, tuple[str, int, int, int, int]]) -> set[tuple[int, int]]:
    """``(pid, starttime)`` of ``root``, its descendants and everything in its session or group."""
    found = {pid for pid, (_, _, pgid, sid, _) in table.items() if pid == root or root in (pgid, sid)}
    grew = True
    while grew:
        grew = False
        for pid, (_, ppid, *_x) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return {(pid, table[pid][4]) for pid in found}


def _alive(known: set[tuple[int, int]], root: int) -> list[int]:
    """Pids still running (zombies excluded) from ``known``, or in ``root``'s session/group."""
    table = _proc_table()
    left = {p for p, start in known if p in table and table[p][4] == start and table[p][0] != "Z"}
    left |= {p for p, (state, _, pgid, sid, _) in table.items() if root in (pgid, sid) and state != "Z"}
    return sorted(left)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for 127.0.0.1


class HttpError(Exception):
    """The server answered with an error status (``code``, ``body``)."""

    def __init__(self, code: int, body: str) -> None:
        super().__init__(f"HTTP {code}: {body[:300]}")
        self.code, self.body = code, body


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
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method="GET" if data is None else "POST")
        req.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise HttpError(exc.code, exc.read().decode("utf-8", "replace")) from None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _stop(proc: subprocess.Popen, server: Server, term_timeout: float, kill_timeout: float) -> None:
    """SIGTERM the group, SIGKILL after ``term_timeout``, then record anything left in ``server.stray``."""
    root = proc.pid
    t0 = time.monotonic()
    with contextlib.suppress(OSError):
        server.tree |= _tree(root, _proc_table())
    for sig, bound in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
        if sig == signal.SIGKILL:
            server.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, sig)  # the API server shuts its engine down on SIGTERM
        table = _proc_table()
        for pid in _alive(server.tree, root):  # any child that left the group
            if pid in table and table[pid][2] != root:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
            if proc.returncode is not None and not _alive(server.tree, root):
                server.stop_seconds = time.monotonic() - t0
                server.stray = []
                return
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
    server.stop_seconds = time.monotonic() - t0
    server.stray = _alive(server.tree, root)


def _exit_on_sigterm() -> Callable[[], None]:
    """While serving, SIGTERM raises SystemExit (so ``finally`` stops the server); returns the undo.

    Only in the main thread and only over the default handler; a handler the
    caller installed is left alone.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def _raise(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
    progress: Progress = None,
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
    restore = _exit_on_sigterm()
    try:
        say(f"served: vLLM server pid {proc.pid} starting on 127.0.0.1:{port}")
        deadline = t0 + timeout
        while True:
            if proc.poll() is not None:
                err = ServerError(
                    f"vLLM server exited with code {proc.returncode} before answering /health:\n"
                    f"{server.log_tail()}"
                )
                err.server = server
                raise err
            if time.monotonic() > deadline:
                err = ServerError(f"vLLM server gave no /health within {timeout:.0f}s:\n{server.log_tail()}")
                err.server = server
                raise err
            try:
                with _OPENER.open(server.url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            server.tree |= _tree(proc.pid, _proc_table())
            time.sleep(0.5)
        server.startup_seconds = time.monotonic() - t0
        server.tree |= _tree(proc.pid, _proc_table())
        with contextlib.suppress(Exception):
            server.version = str(server.request("/version", timeout=10).get("version", ""))
        say(f"served: vLLM {server.version} ready in {server.startup_seconds:.1f}s")
        yield server
    finally:
        _stop(proc, server, term_timeout, kill_timeout)
        restore()
        if own_log and not server.stray:
            shutil.rmtree(log_root, ignore_errors=True)


# ---------------------------------------------------------------------------- the checks
def _excerpt(text: str, n: int = 40) -> str:
    return repr(text if len(text) <= n else text[:n] + "…")


def _drift_proxy(tokenizer_json: Path, server: Server) -> Any:
    """What declarations match the served rows against: the ``tokenizers`` adapter over the
    tokenizer.json the server loaded, named ``vllm`` at the server's version (vLLM splits text
    with that same HF tokenizer). None without tokenizers: only id/category declarations apply."""
    from conformance.backends.tokenizers_backend import TokenizersBackend

    try:
        proxy = TokenizersBackend(tokenizer_json, server.version)
    except Exception:  # noqa: BLE001
        return None
    proxy.name = "vllm"
    return proxy


def _window(ids: Sequence[int], pos: int) -> list[int]:
    return list(ids[max(0, pos - 3) : pos + 4])


@dataclass(frozen=True)
class _Item:
    """One probe or chat render; ``id`` / ``category`` let a declared divergence match it."""

    id: str
    category: str
    text: str = ""
    messages: tuple = ()
    add_generation_prompt: bool = False


def _probe_items(probes: Sequence[Any]) -> list[_Item]:
    """Strings get id ``#i``; Probe-like objects and dicts keep their ``id`` and ``category``."""
    out = []
    for i, p in enumerate(probes):
        if isinstance(p, str):
            out.append(_Item(f"#{i}", "", p))
        elif isinstance(p, Mapping):
            out.append(_Item(str(p.get("id", f"#{i}")), str(p.get("category", "")), p["text"]))
        else:
            out.append(_Item(str(getattr(p, "id", f"#{i}")), str(getattr(p, "category", "")), p.text))
    return out


def _chat_items(chats: Sequence[Any]) -> list[_Item]:
    """A bare message list is rendered both with and without the generation prompt."""
    out = []
    for i, c in enumerate(chats):
        if isinstance(c, Mapping):
            label, msgs, gens = (
                str(c.get("id", f"#{i}")),
                c["messages"],
                [bool(c.get("add_generation_prompt"))],
            )
        elif hasattr(c, "messages"):
            label, msgs, gens = str(getattr(c, "id", f"#{i}")), c.messages, [bool(c.add_generation_prompt)]
        else:
            label, msgs, gens = f"#{i}", c, [False, True]
        for gen in gens:
            messages = tuple(dict(m) for m in msgs)
            out.append(_Item(f"{label}{'+gen' if gen else ''}", "", "", messages, gen))
    return out


#: Declarations for these backends cover the served rows: the server tokenizes with the
#: same HF tokenizer the in-process ``vllm`` adapter loads.
SERVED_AS = (BACKEND, "vllm")
#: Which declared check covers which served row.
DECLARED_AS = {
    "served.tokenize_prompt": ("encode", "trusted"),
    "served.tokenize_messages": ("chat",),
    "served.detokenize": ("decode",),
}


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def over(self) -> bool:
        return time.monotonic() > self.end


class _Tally:
    """Counts for one row, the first undeclared difference, and why a loop stopped early."""

    def __init__(self, check: str, fix: str, declarations: Declarations | None, proxy: Any) -> None:
        self.check, self.fix = check, fix
        self.declarations, self.proxy = declarations, proxy
        self.n = self.bad = self.skipped = 0
        self.declared: dict[str, int] = {}
        self.first = ""
        self.aborted = ""

    def _covering(self, item: _Item) -> str | None:
        """The shared rule (``conformance.core.declared``), for backend ``vllm`` (the same HF tokenizer)."""
        if self.declarations is None or self.proxy is None:
            return None
        probe = Probe(item.id, item.category, item.text)
        for check in DECLARED_AS.get(self.check, ()):
            d = self.declarations.declared(self.proxy, check, probe)
            if d is not None:
                return d.id
        return None

    def fail(self, item: _Item, detail: str, *, declarable: bool = True) -> None:
        decl = self._covering(item) if declarable else None
        if decl:
            self.declared[decl] = self.declared.get(decl, 0) + 1
            return
        self.bad += 1
        if not self.first:
            self.first = detail

    def row(self, what: str = "probes") -> Check:
        n_decl = sum(self.declared.values())
        decl = f"{n_decl} declared ({', '.join(sorted(self.declared))})" if n_decl else ""
        if self.aborted:
            msg = f"stopped after {self.n} {what}: {self.aborted}"
            if self.bad:
                msg += f"; {self.bad} differed before that, first: {self.first}"
            return Check(self.check, BACKEND, "fail", msg, self.fix)
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        if self.bad:
            extra = f", {decl}" if decl else ""
            msg = f"{self.bad} of {self.n} {what} differ{extra}{skipped}, first: {self.first}"
            return Check(self.check, BACKEND, "fail", msg, self.fix)
        if n_decl:
            msg = f"{decl}, {self.n - n_decl} of {self.n} {what} identical{skipped}"
            return Check(self.check, BACKEND, "pass", msg, "", declared=n_decl)
        return Check(self.check, BACKEND, "pass", f"{self.n} {what} identical{skipped}", "")


def _loop(tally: _Tally, budget: _Budget, items: Sequence[_Item], body: Callable[[_Item], None]) -> None:
    """Run ``body(item)`` per item within the budget; a dead server or timeout ends the loop."""
    for item in items:
        if budget.over():
            tally.aborted = f"the {budget.seconds:.0f}s budget ran out"
            return
        try:
            body(item)
        except HttpError as exc:  # the body counted the item before its request
            tally.fail(item, f"{item.id}: the server answered {exc}", declarable=False)
        except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out
            tally.aborted = f"the server stopped answering ({exc})"
            return


FIX_PROMPT = (
    "the tokenizer.json vLLM loads splits text differently from the frozen artifact: "
    "serve the tokenizer.json written by `stacktok export`, or declare a cited divergence"
)
FIX_INJECTION = (
    "vLLM parses special strings in request text and has no per-request safe path: never send "
    "untrusted text as a prompt string -- tokenize it with stacktok (encode without allowed_special) "
    "or the HF tokenizer with split_special_tokens=True and send token ids, and render chats with "
    "render_conversation (ids) instead of the string template"
)
FIX_MESSAGES = (
    "vLLM's chat ids differ from render_conversation: if served.tokenize_prompt fails too, fix the "
    "tokenizer first; else serve the exported chat_template.jinja (no --chat-template override) "
    "and check add_bos_token and the template's BOS"
)
FIX_DETOKENIZE = (
    "decoding reference ids does not give the original text: check tokenizer.json's decoder, "
    "clean_up_tokenization_spaces=false and the added tokens' flags"
)
FIX_EOS = (
    "set generation_config.json eos_token_id to [<|eos|>, <|end|>] = [32760, 32765] "
    "(and nothing else that may be generated mid-turn), vllm#4180"
)


def _served_rows(
    server: Server,
    ref: StackTokenizer,
    probes: Sequence[Any],
    chats: Sequence[Any],
    *,
    budget: _Budget,
    divergences: Sequence[Any] = (),
    progress: Progress = None,
    tokenizer_json: Path | None = None,
) -> list[Check]:
    say = progress or (lambda _m: None)
    specials = sorted(ref.special_to_id, key=len, reverse=True)
    first_special = min(ref.special_to_id.values())
    items = _probe_items(probes)
    model = server.model

    declarations = Declarations(divergences, ref) if divergences else None
    proxy = _drift_proxy(tokenizer_json, server) if divergences and tokenizer_json else None

    def tally(check: str, fix: str) -> _Tally:
        return _Tally(check, fix, declarations, proxy)

    def control(ids: Sequence[int]) -> list[int]:
        return [i for i in ids if i >= first_special]

    # -- /tokenize prompt (trusted ids) and the injection finding
    say(f"served: /tokenize over {len(items)} probes")
    tok = tally("served.tokenize_prompt", FIX_PROMPT)
    inj_prompt = {"n": 0, "hit": 0, "first": ""}

    def one_prompt(item: _Item) -> None:
        text = item.text
        try:
            want = ref.encode(text, allowed_special="all")
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: not sendable as UTF-8 JSON either
            tok.skipped += 1
            return
        tok.n += 1
        body = {"model": model, "prompt": text, "add_special_tokens": False}
        got = server.request("/tokenize", body)["tokens"]
        if got != want:
            pos = first_difference(got, want)
            tok.fail(
                item,
                f"probe {item.id} ({_excerpt(text)}) at id {pos}: server {_window(got, pos)} "
                f"vs reference {_window(want, pos)}",
            )
        if any(sp in text for sp in specials):
            inj_prompt["n"] += 1
            default = server.request("/tokenize", {"model": model, "prompt": text})["tokens"]
            injected = control(default)
            if injected and not control(ref.encode(text)):
                inj_prompt["hit"] += 1
                if not inj_prompt["first"]:
                    inj_prompt["first"] = f"probe {item.id} ({_excerpt(text)}) -> control ids {injected[:6]}"

    _loop(tok, budget, items, one_prompt)
    rows = [tok.row()]

    # -- /tokenize messages
    chat_items = _chat_items(chats)
    say(f"served: /tokenize over {len(chat_items)} chat renders")
    msg = tally("served.tokenize_messages", FIX_MESSAGES)
    inj_chat = {"n": 0, "hit": 0, "first": ""}

    def one_chat(item: _Item) -> None:
        messages, gen = [dict(m) for m in item.messages], item.add_generation_prompt
        try:
            want, _mask = render_conversation(messages, ref, add_generation_prompt=gen)
        except ChatFormatError:
            msg.skipped += 1  # not a conversation the chat format can represent
            return
        has_special = any(sp in str(m.get("content", "")) for m in messages for sp in specials)
        if not has_special:
            msg.n += 1
        body = {"model": model, "messages": messages, "add_generation_prompt": gen}
        got = server.request("/tokenize", body)["tokens"]
        if has_special:
            inj_chat["n"] += 1
            if got != want:
                inj_chat["hit"] += 1
                if not inj_chat["first"]:
                    inj_chat["first"] = (
                        f"chat {item.id}: {len(control(got))} control ids vs {len(control(want))} intended"
                    )
            return
        if got != want:
            pos = first_difference(got, want)
            msg.fail(
                item,
                f"chat {item.id} at id {pos}: server {_window(got, pos)} "
                f"vs render_conversation {_window(want, pos)}",
            )

    _loop(msg, budget, chat_items, one_chat)
    rows.append(msg.row("chat renders"))

    # -- the injection finding (prompt and messages)
    hits = inj_prompt["hit"] + inj_chat["hit"]
    where = (
        f"{inj_prompt['hit']} of {inj_prompt['n']} probes with special strings (default /tokenize "
        f"prompt) and {inj_chat['hit']} of {inj_chat['n']} chats with special strings in content "
        f"became control tokens"
    )
    if hits:
        first = inj_prompt["first"] or inj_chat["first"]
        rows.append(Check("served.injection", BACKEND, "warn", f"{where}; first: {first}", FIX_INJECTION))
    elif inj_prompt["n"] + inj_chat["n"]:
        rows.append(Check("served.injection", BACKEND, "pass", where, ""))
    else:
        rows.append(Check("served.injection", BACKEND, "skip", "no probe or chat holds a special string", ""))

    # -- /detokenize of the reference's trusted and untrusted ids
    say(f"served: /detokenize over {len(items)} probes")
    det = tally("served.detokenize", FIX_DETOKENIZE)

    def one_detok(item: _Item) -> None:
        text = item.text
        try:
            text.encode("utf-8")
            variants = {
                "trusted": ref.encode(text, allowed_special="all"),
                "untrusted": ref.encode(text),
            }
        except UnicodeEncodeError:
            det.skipped += 1
            return
        det.n += 1
        seen: list[list[int]] = []
        for kind, ids in variants.items():
            if not ids or ids in seen:
                continue
            seen.append(ids)
            got = server.request("/detokenize", {"model": model, "tokens": ids})["prompt"]
            if got != text:
                pos = first_difference(got, text)
                det.fail(
                    item,
                    f"probe {item.id} ({kind} ids) at char {pos}: "
                    f"server {_excerpt(got[max(0, pos - 5) : pos + 10])} "
                    f"vs {_excerpt(text[max(0, pos - 5) : pos + 10])}",
                )
                return

    _loop(det, budget, items, one_detok)
    rows.append(det.row())

    # -- eos: does generation stop at <|eos|> / <|end|> and only there? (last: it runs the model)
    say("served: eos through /v1/completions")
    rows.append(_eos_row(server, ref))
    return rows


def _eos_row(server: Server, ref: StackTokenizer) -> Check:
    """Force one token with logit_bias and see whether the served generation config stops on it."""
    ids = ref.special_to_id
    stop = [t for t in ("<|eos|>", "<|end|>") if t in ids]
    go = [t for t in ("<|pad|>", "<|assistant|>") if t in ids]
    prompt, _ = render_conversation([{"role": "user", "content": "Hi"}], ref, add_generation_prompt=True)
    wrong = []
    for name in stop + go:
        body = {
            "model": server.model,
            "prompt": prompt,
            "max_tokens": 3,
            "temperature": 0,
            "logit_bias": {str(ids[name]): 100},
            "skip_special_tokens": False,
        }
        try:
            out = server.request("/v1/completions", body, timeout=120)
        except (HttpError, urllib.error.URLError, OSError) as exc:
            return Check(
                "served.eos", BACKEND, "fail", f"generation failed while forcing {name}: {exc}", FIX_EOS
            )
        choice = out["choices"][0]
        stopped = choice.get("finish_reason") == "stop" and out["usage"]["completion_tokens"] == 1
        if stopped != (name in stop):
            wrong.append(
                f"{name} ({ids[name]}) {'stops' if stopped else 'does not stop'} generation "
                f"(finish_reason={choice.get('finish_reason')}, {out['usage']['completion_tokens']} tokens)"
            )
    if wrong:
        return Check("served.eos", BACKEND, "fail", "; ".join(wrong), FIX_EOS)
    return Check(
        "served.eos",
        BACKEND,
        "pass",
        f"generation stops at {' and '.join(stop)}, not at {' or '.join(go)}",
        "",
    )


def vllm_missing(python: str | None = None) -> str | None:
    """Why the served path cannot run here (``None`` when vllm, torch and transformers are importable)."""
    if python and Path(python).resolve() != Path(sys.executable).resolve():
        return None  # another interpreter: the server start decides
    for mod in ("vllm", "torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed in {sys.executable}"
    return None


def check_served(
    tokenizer_dir: Path,
    ref: StackTokenizer,
    probes: Sequence[Any],
    chats: Sequence[Any],
    *,
    progress: Progress = None,
    timeout: float = 300.0,
    budget: float = 900.0,
    workdir: Path | None = None,
    python: str | None = None,
    divergences: Sequence[Any] = (),
) -> list[Check]:
    """Build the tiny model, start the server, compare it with ``ref``, stop it; return the rows.

    ``probes``: strings (or Probe-like objects / dicts with ``id`` and
    ``text``); ``chats``: message lists (each rendered with and without the
    generation prompt) or Chat-like objects / dicts with ``messages`` and
    ``add_generation_prompt``. ``timeout`` bounds the server start, ``budget``
    the requests. ``divergences`` (``FixtureSet.divergences``): a difference
    covered by a declaration for backend ``vllm-server`` or ``vllm`` (same HF
    tokenizer) -- ``encode``/``trusted`` for prompts, ``chat``, ``decode`` --
    counts as *declared*; plain-string probes match only unfiltered ones.
    ``workdir`` (default: a temporary directory, removed after) receives the
    model and the server log; never ``tokenizer_dir``. A missing vLLM gives one
    *missing* row; a server that does not start gives a *fail* row with the log.
    """
    say = progress or (lambda _m: None)
    reason = vllm_missing(python)
    if reason:
        return [Check("served", BACKEND, "missing", reason, INSTALL_HINT)]
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="stacktok-served-")
        workdir = Path(tmp.name)
    try:
        t0 = time.monotonic()
        try:
            model_dir = build_tiny_model(Path(tokenizer_dir), Path(workdir) / "model")
        except Exception as exc:  # noqa: BLE001 -- any failure to build is reported, not raised
            return [
                Check(
                    "served.start",
                    BACKEND,
                    "fail",
                    f"cannot build the tiny model: {type(exc).__name__}: {exc}",
                    "check tokenizer.json / tokenizer_config.json load in transformers",
                )
            ]
        say(f"served: tiny model built in {time.monotonic() - t0:.1f}s")
        rows: list[Check] = []
        server = None
        try:
            with serve(
                model_dir, timeout=timeout, python=python, log_dir=Path(workdir), progress=say
            ) as server:
                rows.append(
                    Check(
                        "served.start",
                        BACKEND,
                        "pass",
                        f"vLLM {server.version} OpenAI server ready on 127.0.0.1:{server.port} "
                        f"in {server.startup_seconds:.1f}s",
                        "",
                    )
                )
                t1 = time.monotonic()
                rows += _served_rows(
                    server,
                    ref,
                    probes,
                    chats,
                    budget=_Budget(budget),
                    divergences=divergences,
                    progress=say,
                    tokenizer_json=Path(tokenizer_dir) / "tokenizer.json",
                )
                say(f"served: checks took {time.monotonic() - t1:.1f}s")
        except ServerError as exc:
            server = exc.server
            rows.append(
                Check("served.start", BACKEND, "fail", str(exc), "read the server log above; " + INSTALL_HINT)
            )
        if server is not None:
            rows.append(_shutdown_row(server))
        return rows
    finally:
        if tmp is not None:
            tmp.cleanup()


def _shutdown_row(server: Server) -> Check:
    n = len(server.tree)
    how = "SIGKILL was needed" if server.killed else "SIGTERM"
    if server.stray:
        return Check(
            "served.shutdown",
            BACKEND,
            "fail",
            f"{len(server.stray)} process(es) still running after stop: pids {server.stray}",
            f"kill them (kill -9 {' '.join(map(str, server.stray))}); report the vLLM version",
        )
    return Check(
        "served.shutdown",
        BACKEND,
        "pass",
        f"{n} server process(es) gone {server.stop_seconds or 0:.1f}s after {how}; none left",
        "",
    )

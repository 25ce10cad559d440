"""The served path: a real vLLM OpenAI server over the directory's tokenizer, on 127.0.0.1.

The in-process vLLM adapter (``backends/vllm_backend.py``) calls the code the
server would call. This package runs the server itself and talks HTTP to it:

1. :func:`build_tiny_model` (:mod:`~conformance.served.model`) -- a
   random-weight ``LlamaForCausalLM`` (hidden 64, 2 layers, 4 heads of 32,
   intermediate 128, vocab 32,768, 8,192 positions, ``torch.manual_seed(0)``,
   ~17 MB of safetensors) around copies of the directory's tokenizer files,
   plus a ``generation_config.json`` (the directory's own if it has one, else
   eos ``[<|eos|>, <|end|>]``).
2. :func:`serve` (:mod:`~conformance.served.server`) -- ``python -m
   vllm.entrypoints.openai.api_server`` on 127.0.0.1 in its own session /
   process group, ``/health`` polled within a bound; on exit SIGTERM to the
   group, SIGKILL after a bound, and a ``/proc`` scan
   (:mod:`~conformance.served.processes`) proving no process of the server is
   left (:attr:`Server.stray`).
3. :func:`check_served` -- :class:`~conformance.core.rows.Row` rows, backend
   ``vllm-server``: ``served.start`` (the server answered ``/health``: version,
   seconds), then the rows of :mod:`~conformance.served.checks`
   (``served.tokenize_prompt``, ``served.tokenize_messages``,
   ``served.injection``, ``served.detokenize``, ``served.eos``), then
   ``served.shutdown`` (the whole process group exited; nothing left). With
   declarations but no ``tokenizers`` adapter to match them
   (:mod:`~conformance.served.declarations`), a ``served.declarations`` row
   says no declaration applied.

The other files: :mod:`~conformance.served.client` (HTTP, the standard library
only, proxies bypassed, every request with a timeout),
:mod:`~conformance.served.items` (probes and chats as items),
:mod:`~conformance.served.tally` (counting one row within the time budget),
:mod:`~conformance.served.fixes` (the rows' fix texts). Every loop has a
deadline. Nothing is written into the tokenizer directory. Install (CPU, no
GPU): ``conformance/INSTALL-served.md``.

Out of scope: sampling quality (the weights are random), chat completions
text, streaming over HTTP, GPUs.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.core.rows import Row
from conformance.served.checks import served_rows, shutdown_row
from conformance.served.client import REQUEST_TIMEOUT, HttpError
from conformance.served.declarations import DECLARED_AS, SERVED_AS
from conformance.served.fixes import (
    BACKEND,
    FIX_DECLARATIONS,
    FIX_DETOKENIZE,
    FIX_EOS,
    FIX_INJECTION,
    FIX_MESSAGES,
    FIX_PROMPT,
    INSTALL_HINT,
)
from conformance.served.model import MODEL_SHAPE, TOKENIZER_FILES, VOCAB, build_tiny_model
from conformance.served.server import (
    MAX_MODEL_LEN,
    SERVED_NAME,
    SERVER_ENV,
    SERVER_MODULE,
    ProgressCallback,
    Server,
    ServerError,
    serve,
)
from conformance.served.tally import Budget
from stacktok_export import StackTokenizer

__all__ = [
    "BACKEND",
    "DECLARED_AS",
    "FIX_DECLARATIONS",
    "FIX_DETOKENIZE",
    "FIX_EOS",
    "FIX_INJECTION",
    "FIX_MESSAGES",
    "FIX_PROMPT",
    "INSTALL_HINT",
    "MAX_MODEL_LEN",
    "MODEL_SHAPE",
    "REQUEST_TIMEOUT",
    "SERVED_AS",
    "SERVED_NAME",
    "SERVER_ENV",
    "SERVER_MODULE",
    "TOKENIZER_FILES",
    "VOCAB",
    "HttpError",
    "ProgressCallback",
    "Server",
    "ServerError",
    "build_tiny_model",
    "check_served",
    "serve",
    "vllm_missing",
]


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
    progress: ProgressCallback = None,
    timeout: float = 300.0,
    budget: float = 900.0,
    workdir: Path | None = None,
    python: str | None = None,
    divergences: Sequence[Any] = (),
) -> list[Row]:
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
        return [Row("served", BACKEND, "missing", reason, INSTALL_HINT)]
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
                Row(
                    "served.start",
                    BACKEND,
                    "fail",
                    f"cannot build the tiny model: {type(exc).__name__}: {exc}",
                    "check tokenizer.json / tokenizer_config.json load in transformers",
                )
            ]
        say(f"served: tiny model built in {time.monotonic() - t0:.1f}s")
        rows: list[Row] = []
        server = None
        try:
            with serve(
                model_dir, timeout=timeout, python=python, log_dir=Path(workdir), progress=say
            ) as server:
                rows.append(
                    Row(
                        "served.start",
                        BACKEND,
                        "pass",
                        f"vLLM {server.version} OpenAI server ready on 127.0.0.1:{server.port} "
                        f"in {server.startup_seconds:.1f}s",
                        "",
                    )
                )
                t1 = time.monotonic()
                rows += served_rows(
                    server,
                    ref,
                    probes,
                    chats,
                    budget=Budget(budget),
                    divergences=divergences,
                    progress=say,
                    tokenizer_json=Path(tokenizer_dir) / "tokenizer.json",
                )
                say(f"served: checks took {time.monotonic() - t1:.1f}s")
        except ServerError as exc:
            server = exc.server
            rows.append(
                Row("served.start", BACKEND, "fail", str(exc), "read the server log above; " + INSTALL_HINT)
            )
        if server is not None:
            rows.append(shutdown_row(server))
        return rows
    finally:
        if tmp is not None:
            tmp.cleanup()

"""``llama-server``, llama.cpp's own server, as a backend behind the adapter protocol.

The backend reads DIR's GGUF: :func:`load` writes a tiny random-weight model around its
tokenizer keys (:mod:`conformance.served.tiny_gguf`, in a temporary directory, never in DIR),
starts the binary :mod:`conformance.served.llama_build` finds on it
(:mod:`conformance.served.llama_server`, 127.0.0.1, its own process group, the parent-death
signal) and stops it when the backend is closed or its process ends. Every call is HTTP:

- encode: ``/tokenize`` with ``add_special=false``; ``parse_special`` is the trusted flag;
- default: ``/tokenize`` with no flags at all (the server's defaults, recorded);
- decode: ``/detokenize`` (text: ``decode_exact`` is false);
- chat (``CHAT`` where the GGUF has a template and the reference is an imported artifact):
  ``/apply-template`` -- the server's native Jinja engine on the path a chat completion takes,
  ``tools`` and ``chat_template_kwargs`` as a client sends them -- then the prompt tokenized as
  the completion path tokenizes it (``add_special=true, parse_special=true``: the server strips
  a leading BOS string the template wrote when the vocabulary adds BOS, and adds BOS back);
  no assistant mask (the server has none).

The server hands a template another input than transformers does, by design: typed text parts
joined into one string, tool-call arguments parsed from JSON text, today's ``date_string``
(also ``enable_thinking``/``preserve_reasoning`` defaults and ``add_generation_prompt`` undefined
when false, not modelled): :meth:`LlamaServerBackend.template_input` rewrites a conversation so,
and a chat whose difference from the reference is exactly that -- the reference rendered from
the rewritten input equals what the server fed -- counts as the declared divergence
``llama-server-chat-input``, not a failure; any other difference fails.

Out of scope: generation and sampling (random weights), the OpenAI endpoints' parsing of
model output, streaming, the single-token and stream checks (128k HTTP calls), GPUs.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.backends import READS, require, shared_reference
from conformance.backends._base import BaseBackend
from conformance.core.expect import is_ours
from conformance.core.layout import Exports
from conformance.core.protocol import BackendMissing, Capability, ExportAbsent

NAME = "llama-server"
#: the declaration a chat difference gets when the server's own context explains it
CONTEXT_DECLARATION = "llama-server-chat-input"
_CAPS = frozenset({Capability.ENCODE, Capability.TRUSTED, Capability.DECODE, Capability.DEFAULT})


class LlamaServerBackend(BaseBackend):
    name = NAME
    reads = READS.get(NAME, ".gguf")
    decode_exact = False
    encodes_in_batch = False
    capabilities = _CAPS
    template_input_declaration = CONTEXT_DECLARATION

    def __init__(self, server: Any, stack: contextlib.ExitStack, template: str | None) -> None:
        self.server = server
        self.version = server.version or "unknown"
        self.template = template
        self._close = weakref.finalize(self, stack.close)
        if template is not None:
            self.capabilities = _CAPS | {Capability.CHAT}

    def close(self) -> None:
        self._close()

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        return self.server.tokenize(text, add_special=False, parse_special=allow_special)

    def default_encode(self, text: str) -> list[int]:
        return [int(i) for i in self.server.request("/tokenize", {"content": text})["tokens"]]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.decode_text(ids).encode("utf-8")

    def decode_text(self, ids: Sequence[int]) -> str:
        return self.server.detokenize(ids)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        prompt = self.server.apply_template(
            [dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            tools=None if tools is None else [dict(t) for t in tools],
            **dict(template_kwargs or {}),
        )
        return self.server.tokenize(prompt, add_special=True, parse_special=True), []

    @staticmethod
    def template_input(
        messages: list[dict[str, Any]], now: datetime.datetime
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The conversation as the server's chat path hands it to the template (tools/server and
        common/chat.cpp): typed text parts joined with newlines into one string, tool-call
        arguments sent as JSON text parsed into objects, and today's ``date_string`` in the
        context (the caller's ``chat_template_kwargs`` override it)."""
        out = []
        for message in messages:
            m = dict(message)
            if isinstance(m.get("content"), list):
                m["content"] = "\n".join(part.get("text", "") for part in m["content"])
            if isinstance(m.get("tool_calls"), list):
                m["tool_calls"] = [_parsed_arguments(call) for call in m["tool_calls"]]
            out.append(m)
        return out, {"date_string": now.strftime("%d %b %Y")}


def _parsed_arguments(call: Any) -> Any:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return call
    try:
        arguments = json.loads(fn["arguments"])
    except ValueError:
        return call
    return {**call, "function": {**fn, "arguments": arguments}}


def load(exports: Exports) -> LlamaServerBackend:
    """Start ``llama-server`` on a tiny model around DIR's GGUF (module docstring)."""
    from conformance.served.llama_build import HOW, find_llama_server

    if exports.gguf is None:
        raise ExportAbsent("no .gguf file in the directory; run `stacktok export`")
    for module in ("gguf", "numpy"):  # the tiny model is written with gguf-py: missing, not an error
        require(module, "gguf")
    binary = find_llama_server()
    if binary is None:
        raise BackendMissing(f"no llama-server binary: {HOW}")
    from conformance.served.llama_server import llama_server
    from conformance.served.tiny_gguf import write_model_gguf

    stack = contextlib.ExitStack()
    try:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stacktok-llama-server-")))
        model = write_model_gguf(exports.gguf, work / "model.gguf")
        server = stack.enter_context(llama_server(binary, model))
        template = None  # the GGUF's own (the server falls back to a built-in one without it)
        if exports.artifact is not None and not is_ours(shared_reference(exports.artifact)):
            from stacktok_export.gguf.kv import read_kv

            found = read_kv(exports.gguf).get("tokenizer.chat_template")
            template = found.decode("utf-8", "replace") if isinstance(found, bytes) else None
    except BaseException:
        stack.close()
        raise
    return LlamaServerBackend(server, stack, template)

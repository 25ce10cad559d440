"""The backend adapter protocol: what every backend must offer the suite.

An adapter wraps one real library loading one export. It only translates
flags; it never adds BOS/EOS and never "fixes" output.

- ``name``: stable backend name (``reference``, ``tiktoken``, ``tokenizers``,
  ``transformers``, ``transformers-reload``, ``llama.cpp``, ``vllm``, ``trl``).
- ``version``: the library's version string (recorded in every report).
- ``capabilities``: a frozenset of :class:`Capability` values -- which checks
  apply. A check a backend does not declare is *not applicable*, never passed.
- ``encode(text, *, allow_special)``: ``allow_special=False`` is the backend's
  *safe* path for untrusted text (specials as bytes); ``True`` parses every
  special string (trusted text).
- ``encode_batch(texts, *, allow_special)``: ``encode`` of each text; one library call where
  the library encodes a single text as a batch of one (trait ``encodes_in_batch``).
- ``decode_bytes(ids)``: the exact bytes of ``ids``; specials as their text.
- ``default_encode(text)``: the backend's behaviour with no flags at all --
  recorded (safe or unsafe) so a release that changes a default shows up.
- ``chat(messages, *, add_generation_prompt, tools=None, template_kwargs=None)``:
  ``(ids, assistant_mask)`` through the backend's own chat path (``CHAT`` capability):
  messages in the OpenAI wire format, function definitions, the template's own keyword
  arguments (``enable_thinking``); the mask is ``[]`` where the template marks no generation.
  A shape the library's path cannot take at all raises :class:`ChatShapeUnsupported` (counted
  as not applicable, never a failure).
- ``stream(ids)``: the text pieces the backend's incremental detokenizer emits,
  one call per token (``STREAM`` capability).

Traits (data, never probed with ``getattr``):

- ``decode_exact``: ``decode_bytes`` returns exact bytes (False when the
  library decodes to text, so a partial character comes back as U+FFFD).
- ``encodes_in_batch``: ``encode_batch`` is one call of the library's own batch path (the
  path its single-text encode takes too): the runner encodes a part's probes with it, and asks
  text by text only if it raises. False: the runner asks text by text.
- ``chat_requires_assistant``: the chat path refuses a conversation with no
  assistant turn (TRL under ``assistant_only_loss``): such chats are *not
  applicable*, counted and named, never failures.
- ``chat_injection_safe_path``: how the backend's own chat path keeps typed
  special strings as text, or None when the library offers no such path
  (string templates, transformers#29279): then an unsafe chat is a warning
  with the safe alternative, else a failure.
- ``template_input`` / ``template_input_declaration``: how the backend's chat path rewrites a
  conversation before the template sees it, beyond what transformers does (``(messages, now) ->
  (messages, extra context)``, e.g. llama-server joins typed text parts, parses tool-call
  arguments and passes today's ``date_string``), and the declared divergence a chat difference
  counts as when the reference rendered from that input gives exactly the backend's ids;
  None / "" otherwise.
- ``reads``: the export file the backend loads, one of :data:`EXPORT_FILES` --
  ``"artifact"`` (built in memory from the frozen artifact), ``"tokenizer.json"``
  (the HF export directory), ``".gguf"`` or ``".tiktoken"``. The gate judges an
  edit to a file by the rows of the backends that read it. Each adapter takes it
  from its registry entry (``conformance.backends.BACKENDS``).

Loading is done by a factory ``load(exports) -> Backend`` in each adapter
module, which raises :class:`BackendMissing` when the library is not installed
(reported *missing*, never *passed*) and :class:`ExportAbsent` when the
directory has no file that backend reads (reported *skip*, named in the
verdict). Anything else a library raises while loading is the library
refusing the directory: an *error* row with the library's own message.

Out of scope: batching, offsets, and anything about model weights.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

#: the export files a backend can read (its ``reads`` trait)
EXPORT_FILES = ("artifact", "tokenizer.json", ".gguf", ".tiktoken")


class Capability(str, enum.Enum):
    ENCODE = "encode"  # untrusted encode must equal the reference
    TRUSTED = "trusted"  # trusted encode gives special ids where the reference does
    DECODE = "decode"  # decode_bytes(reference ids) == original bytes
    SINGLE_TOKENS = "single_tokens"  # every id decodes to its own bytes
    DEFAULT = "default"  # default_encode is recorded (safe/unsafe)
    CHAT = "chat"  # chat ids and loss mask equal render_conversation
    STREAM = "stream"  # incremental detokenization concatenates to the full decode


class ChatShapeUnsupported(NotImplementedError):
    """The backend's chat path has no way to pass this conversation's shape (e.g. tools)."""


class BackendMissing(RuntimeError):
    """The backend's library is not installed (or cannot load); says how to install it."""


class ExportAbsent(BackendMissing):
    """The directory has no file this backend reads (e.g. no ``.gguf`` for llama.cpp)."""


@runtime_checkable
class Backend(Protocol):
    name: str
    version: str
    capabilities: frozenset[Capability]
    decode_exact: bool
    encodes_in_batch: bool
    chat_requires_assistant: bool
    chat_injection_safe_path: str | None
    template_input: Any
    template_input_declaration: str
    reads: str  # one of EXPORT_FILES

    def encode(self, text: str, *, allow_special: bool) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str], *, allow_special: bool) -> list[list[int]]: ...

    def decode_bytes(self, ids: Sequence[int]) -> bytes: ...

    def default_encode(self, text: str) -> list[int]: ...

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]: ...

    def stream(self, ids: Sequence[int]) -> list[str]: ...

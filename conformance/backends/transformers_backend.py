"""transformers: the tokenizer built in memory from the artifact, and ``AutoTokenizer`` reloaded.

Safe path: ``tok(text, add_special_tokens=False, split_special_tokens=True)`` (the runner passes
a part's probes as one list: transformers encodes a single text as a batch of one, the same path).
Trusted: ``tok(text, add_special_tokens=False)``. Default: ``tok(text)`` --
parses special strings and adds whatever the config adds (recorded). Chat:
``apply_chat_template(messages, tools=..., **template_kwargs, tokenize=True, return_dict=True)``,
with ``return_assistant_tokens_mask=True`` where the template marks generation.
``split_special_tokens`` flips a shared backend flag per call, so calls are
serialized.

Streams: the stream row decodes one or two short windows per token (~300,000 calls on the
shipped probes), and stock ``decode`` spends most of each call in ``to_py_obj`` -- a type
conversion that is the identity on a list of ints -- before handing the ids to ``_decode``. Where
the tokenizer's class keeps the stock ``PreTrainedTokenizerBase.decode`` (checked per object), the
stream windows go to that same ``_decode`` with the same arguments (the same answer by
construction: ``tests/test_backend_transformers_stream.py``); a class that overrides ``decode``
is streamed through its own ``decode``. The decode row always calls the public ``decode``.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conformance.backends import READS, require, shared_reference
from conformance.backends._base import BaseBackend, text_stream
from conformance.core.layout import Exports
from conformance.core.protocol import Capability, ExportAbsent


class TransformersBackend(BaseBackend):
    decode_exact = False
    encodes_in_batch = True
    capabilities = frozenset(Capability)

    def __init__(self, tok, *, name: str, version: str) -> None:
        self.tok = tok
        # probes longer than model_max_length are deliberate: the gate checks model_max_length itself
        getattr(tok, "deprecation_warnings", {})["sequence-length-is-longer-than-the-specified-maximum"] = (
            True
        )
        self.name = name
        self.reads = READS[name]
        self.version = version
        self._lock = threading.Lock()
        self._window_decode = stock_window_decode(tok)

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        with self._lock:
            out = self.tok(text, add_special_tokens=False, split_special_tokens=not allow_special)
        return list(out["input_ids"])

    def encode_batch(self, texts: Sequence[str], *, allow_special: bool) -> list[list[int]]:
        # tok(text) is tok([text]) inside (``_encode_plus``: one ``encode_batch`` of the backend)
        if not texts:
            return []
        with self._lock:
            out = self.tok(list(texts), add_special_tokens=False, split_special_tokens=not allow_special)
        return [list(ids) for ids in out["input_ids"]]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.decode_text(ids).encode("utf-8")

    def decode_text(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _template_for(self, tools) -> object:
        return _chosen_template(self.tok, None if tools is None else list(tools))

    def stream(self, ids: Sequence[int]) -> list[str]:
        decode = self._window_decode or self.decode_text
        return text_stream(decode, tuple(ids), memo=self._memo("text"))

    def default_encode(self, text: str) -> list[int]:
        with self._lock:
            return list(self.tok(text)["input_ids"])

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        marked = _marks_generation(self._template_for(tools))
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = self.tok.apply_chat_template(
                [dict(m) for m in messages],
                tools=None if tools is None else [dict(t) for t in tools],
                tokenize=True,
                add_generation_prompt=add_generation_prompt,
                return_dict=True,
                return_assistant_tokens_mask=marked,
                **dict(template_kwargs or {}),
            )
        return list(out["input_ids"]), list(out["assistant_masks"]) if marked else []


def _chosen_template(tok, tools) -> object:
    """The template ``apply_chat_template`` will render (``get_chat_template``: with several named
    ones, ``tool_use`` when tools are passed), or None when the tokenizer has none."""
    try:
        return tok.get_chat_template(None, tools)
    except ValueError:
        return None


def _marks_generation(template: object) -> bool:
    """Whether the template has ``{% generation %}`` blocks (else transformers' mask is all zeros
    and, in 5.x, a warning: the chat row compares masks only where the template marks them)."""
    return isinstance(template, str) and "generation" in template


def stock_window_decode(tok) -> Callable[[list[int]], str] | None:
    """``decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)`` without its
    ``to_py_obj`` pass, where ``tok``'s class keeps the stock ``decode`` (else ``None``)."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    inner = getattr(tok, "_decode", None)
    if getattr(type(tok), "decode", None) is not PreTrainedTokenizerBase.decode or not callable(inner):
        return None
    return functools.partial(inner, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def load(exports: Exports) -> TransformersBackend:
    """The in-memory object stacktok builds from the artifact (no files involved)."""
    transformers = require("transformers", "hf")
    from stacktok_export.export.hf import to_transformers

    tok = to_transformers(shared_reference(exports.artifact))
    return TransformersBackend(tok, name="transformers", version=transformers.__version__)


def load_reload(exports: Exports) -> TransformersBackend:
    """``AutoTokenizer.from_pretrained(DIR)``: what serving and training code load."""
    transformers = require("transformers", "hf")
    if exports.hf_dir is None:
        raise ExportAbsent("no tokenizer.json in the directory")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # never run code from the checkpoint, and never prompt for it
        # (conformance.static.hf_files flags auto_map)
        tok = transformers.AutoTokenizer.from_pretrained(str(exports.hf_dir), trust_remote_code=False)
    return TransformersBackend(tok, name="transformers-reload", version=transformers.__version__)

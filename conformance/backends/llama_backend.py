"""llama.cpp (llama-cpp-python) over the GGUF: its encode path and both of its decode paths.

:class:`LlamaCppTokenizer` is llama.cpp's tokenizer over the GGUF, through
llama-cpp-python's C API. Two backends adapt it to the gate, one per decode path
llama.cpp offers, so each is its own row:

- ``llama.cpp`` (:class:`LlamaCppBackend`): encode, and decode by joining
  ``llama_token_to_piece(special=True)`` pieces -- what llama-server streams and
  what its ``/detokenize`` endpoint returns (``tokens_to_str``).
- ``llama.cpp-detokenize`` (:class:`LlamaCppDetokenizeBackend`): decode only, through
  the C ``llama_detokenize`` with ``common_detokenize``'s defaults
  (``remove_special=False, unparse_special=True``) -- what ``common_detokenize`` users
  get: llama-server's echoed ``prompt`` field, ``mtmd-cli``, the DRY sampler's and
  llguidance's token strings. It applies ``clean_spaces``
  (:mod:`conformance.core.clean_spaces`); the declaration ``llama.cpp-detokenize-clean-spaces``
  covers exactly that.

Safe path: ``llama_tokenize(..., add_special=False, parse_special=False)``;
trusted: ``parse_special=True``. ``encode`` never adds BOS/EOS and calls
``llama_tokenize`` once with a buffer sized from the input
(``Llama.tokenize`` sizes it from ``n_ctx_train``, 0 when vocab-only, and so
tokenizes twice). Default: what ``Llama.tokenize(text)`` returns -- adds BOS when the
GGUF says so and does not parse specials (recorded) -- by the same ``llama_tokenize``
call (``add_special=True, parse_special=False``).

Loading never touches the process's file descriptors (issue #20): ``Llama(verbose=False)``
dup2's /dev/null over fds 1 and 2 while it loads, and two loads in two threads can leave
them there for good. A vocab-only GGUF (what the gate, fuzz and audit open) is loaded by
the C API directly (``llama_model_load_from_file`` with ``vocab_only``), never through
``Llama``; a model GGUF with ``weights=True`` is built by ``Llama(verbose=True)`` under one
process-wide lock, which never redirects fds. llama.cpp's own C log goes to our callback in
both cases; what ``verbose=True`` still prints is Python-level, to ``sys.stderr``, once per
weights load: ``llama_print_system_info()``, ``Model metadata: {...}`` and the chat-format
lines (``Guessed chat format``, ``Using gguf chat template``, ``Using fallback chat format`` ...).
``verbose`` is turned off right after, so generation prints nothing.

Piece decoding is byte-exact: ``decode_bytes`` joins
``llama_token_to_piece(special=True)`` pieces itself, because
``Llama.detokenize`` drops pieces over 32 bytes (llama-cpp-python#2362) and a
leading space after BOS (that third, Python-only path is not a row).

``llama_cpp`` is imported only when a tokenizer is opened, so importing this
module never needs llama-cpp-python.
"""

from __future__ import annotations

import collections
import ctypes
import operator
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.backends import READS, require, shared_reference
from conformance.backends._base import TOKENIZER_CAPS, BaseBackend
from conformance.core.expect import is_ours
from conformance.core.layout import Exports
from conformance.core.protocol import Capability, ExportAbsent

_PIECE_BUFFER = 64  # bytes; longer pieces are retried with the size llama.cpp asks for
_INT32_MAX = 2**31 - 1  # llama_tokenize's text_len is int32_t


#: llama.cpp's own log lines (it prints context-size notes on every vocab-only load); kept, not
#: printed, and quoted when a load fails, so the gate's output has no library noise (issue #12).
_LLAMA_LOG: collections.deque[str] = collections.deque(maxlen=30)
_LOG_CALLBACK: list[Any] = []  # keeps the ctypes callback alive
#: llama.cpp's process-wide state (log callback, backend init) and every ``Llama`` construction
_LOAD_LOCK = threading.Lock()
_BACKEND_READY: list[bool] = []


def _capture_llama_log(lib: Any) -> None:
    if _LOG_CALLBACK:
        return

    @lib.llama_log_callback
    def keep(level: int, text: bytes, user_data: Any) -> None:
        _LLAMA_LOG.append(text.decode("utf-8", "replace") if text else "")

    _LOG_CALLBACK.append(keep)
    lib.llama_log_set(keep, ctypes.c_void_p(0))


def _prepare(lib: Any) -> None:
    """Our log callback, then ``llama_backend_init`` once per process; call under ``_LOAD_LOCK``."""
    _capture_llama_log(lib)
    if not _BACKEND_READY:
        lib.llama_backend_init()
        _BACKEND_READY.append(True)


def _refused(message: str) -> ValueError:
    why = " | ".join(line.strip() for line in _LLAMA_LOG if line.strip())[-400:]
    return ValueError(f"{message}; llama.cpp said: {why or 'nothing'}")


def _load_vocab_only(lib: Any, path: Path) -> Any:
    """The GGUF's vocabulary as a ``llama_model *``, by the C API: no fd is redirected."""
    if not path.exists():
        raise _refused(f"Model path does not exist: {path}")
    params = lib.llama_model_default_params()
    params.vocab_only = True
    params.n_gpu_layers = 0  # as ``Llama``'s default
    model = lib.llama_model_load_from_file(os.fsencode(path), params)
    if not model:
        raise _refused(f"Failed to load model from file: {path}")
    return model


def _load_weights(lib: Any, path: Path) -> Any:
    """A generating ``Llama``; ``verbose=True`` so it never dup2's /dev/null over fds 1 and 2."""
    try:
        llama = lib.Llama(model_path=str(path), verbose=True, n_ctx=256, n_threads=1)
    except ValueError as exc:  # "Failed to load model from file": llama.cpp logged why
        raise _refused(str(exc)) from None
    llama.verbose = False  # generation then prints no timings and no cache notes
    return llama


class LlamaCppTokenizer:
    """llama.cpp's tokenizer over a GGUF, through llama-cpp-python's C API.

    Raises BackendMissing if llama-cpp-python is not installed.
    """

    def __init__(self, gguf_path: str | os.PathLike[str], *, weights: bool = False) -> None:
        self._lib: Any = require("llama_cpp", "llama")
        self.path = Path(gguf_path)
        #: with ``weights`` the model GGUF's tensors are loaded too (``llama`` then generates)
        self._llama: Any = None
        with _LOAD_LOCK:
            _prepare(self._lib)
            if weights:
                self._llama = _load_weights(self._lib, self.path)
                model = self._llama.model
                self._free = weakref.finalize(self, self._llama.close)
            else:
                model = _load_vocab_only(self._lib, self.path)
                self._free = weakref.finalize(self, self._lib.llama_model_free, model)
        self._model = model
        self._vocab = self._lib.llama_model_get_vocab(model)
        self.n_vocab: int = self._lib.llama_vocab_n_tokens(self._vocab)
        #: each id's ``llama_token_to_piece`` bytes, asked of llama.cpp once per id (the call is a
        #: pure function of the id -- llama.cpp answers it from its own per-token piece cache --
        #: and a ctypes call per token was most of the decode check's time)
        self._pieces: dict[int, bytes] = {}

    @property
    def llama(self) -> Any:
        """The ``llama_cpp.Llama`` underneath; only a ``weights=True`` tokenizer has one."""
        if self._llama is None:
            raise AttributeError("a vocab-only LlamaCppTokenizer has no Llama: open it with weights=True")
        return self._llama

    @property
    def version(self) -> str:
        """The llama-cpp-python version (it pins the llama.cpp it vendors)."""
        return str(self._lib.__version__)

    # ---- what llama.cpp itself read from the file (None = not set)
    def _id(self, fn_name: str) -> int | None:
        token_id = getattr(self._lib, fn_name)(self._vocab)
        return None if token_id < 0 else int(token_id)

    def _flag(self, fn_name: str) -> bool:
        return bool(getattr(self._lib, fn_name)(self._vocab))

    bos_id = property(lambda self: self._id("llama_vocab_bos"), doc="BOS id, None when the GGUF sets none")
    eos_id = property(lambda self: self._id("llama_vocab_eos"), doc="EOS id, None when the GGUF sets none")
    eot_id = property(lambda self: self._id("llama_vocab_eot"), doc="EOT id, None when the GGUF sets none")
    pad_id = property(lambda self: self._id("llama_vocab_pad"), doc="PAD id, None when the GGUF sets none")
    adds_bos = property(lambda self: self._flag("llama_vocab_get_add_bos"), doc="tokenize() prepends BOS")
    adds_eos = property(lambda self: self._flag("llama_vocab_get_add_eos"), doc="tokenize() appends EOS")

    def chat_template(self) -> str | None:
        """The GGUF's ``tokenizer.chat_template`` as llama.cpp read it (None without one)."""
        raw = self._lib.llama_model_chat_template(self._model, None)
        return None if not raw else raw.decode("utf-8", errors="replace")

    def token_text(self, token_id: int | None) -> str:
        """A token's text as the vocabulary stores it (``token_get_text``); "" for None."""
        if token_id is None:
            return ""
        return self._lib.llama_vocab_get_text(self._vocab, self._check_id(token_id)).decode(
            "utf-8", "replace"
        )

    def is_eog(self, token_id: int) -> bool:
        """Whether llama.cpp stops generation at ``token_id``."""
        return bool(self._lib.llama_vocab_is_eog(self._vocab, self._check_id(token_id)))

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        """Token ids of ``text``; special strings become control ids only if ``allow_special``."""
        return self._tokenize(text, add_special=False, parse_special=allow_special)

    def default_tokenize(self, text: str) -> list[int]:
        """What ``Llama.tokenize(text.encode())`` returns with llama-cpp-python's defaults
        (``add_bos=True, special=False``): what a user gets."""
        return self._tokenize(text, add_special=True, parse_special=False)

    def _tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        if len(data) >= _INT32_MAX:
            raise ValueError(f"llama_tokenize takes under 2 GiB; got {len(data)} bytes")
        # every token covers >= 1 input byte, plus BOS and EOS: one call suffices
        capacity = len(data) + 1 + 2 * add_special
        for _ in range(2):  # a negative result is the size llama.cpp needs
            out = (self._lib.llama_token * capacity)()
            n = self._lib.llama_tokenize(
                self._vocab, data, len(data), out, capacity, add_special, parse_special
            )
            if n >= 0:
                return out[:n]
            capacity = -n
        raise RuntimeError(f"llama_tokenize returned {n} for {len(data)} bytes")

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of ``ids`` (specials as their text), piece by piece."""
        known = self._pieces
        get = known.get
        pieces: list[bytes] = []
        for token_id in ids:
            piece = get(token_id) if type(token_id) is int else None  # others: checked, then asked
            if piece is None:
                token_id = self._check_id(token_id)
                piece = known[token_id] = self._piece(token_id)
            pieces.append(piece)
        return b"".join(pieces)

    def _piece(self, token_id: int) -> bytes:
        """``llama_token_to_piece(lstrip=0, special=True)`` of one valid id."""
        buf = ctypes.create_string_buffer(_PIECE_BUFFER)
        n = self._lib.llama_token_to_piece(self._vocab, token_id, buf, len(buf), 0, True)
        if n < 0:  # buffer too small: -n is the size llama.cpp needs
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self._vocab, token_id, buf, len(buf), 0, True)
        return ctypes.string_at(buf, n)

    def detokenize(
        self, ids: Sequence[int], *, remove_special: bool = False, unparse_special: bool = True
    ) -> bytes:
        """``llama_detokenize`` with ``common_detokenize``'s defaults: ``clean_spaces`` applies."""
        ids = [self._check_id(i) for i in ids]
        tokens = (self._lib.llama_token * max(len(ids), 1))(*ids)
        size = 8 * len(ids) + 16
        for _ in range(2):  # a negative result is the size llama.cpp needs
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_detokenize(
                self._vocab, tokens, len(ids), buf, size, remove_special, unparse_special
            )
            if n >= 0:
                return ctypes.string_at(buf, n)
            size = -n
        raise RuntimeError(f"llama_detokenize asked for {size} bytes twice for {len(ids)} tokens")

    def _check_id(self, token_id: int) -> int:
        # Out-of-range ids throw a C++ exception inside llama.cpp, which kills the process.
        try:
            index = operator.index(token_id)
        except TypeError:
            raise TypeError(f"token ids must be int, got {token_id!r}") from None
        if not 0 <= index < self.n_vocab:
            raise ValueError(f"token id {index} is out of range: valid ids are 0..{self.n_vocab - 1}")
        return index

    def close(self) -> None:
        """Free the model now (otherwise when this object is collected); idempotent."""
        self._free()

    def __repr__(self) -> str:
        return f"LlamaCppTokenizer({str(self.path)!r}, n_vocab={self.n_vocab}, llama_cpp={self.version})"


class LlamaCppBackend(BaseBackend):
    name = "llama.cpp"
    reads = READS[name]
    capabilities = TOKENIZER_CAPS
    #: the GGUF's chat template where this backend renders chats (set by :func:`load`)
    template: str | None = None

    def __init__(self, tok: LlamaCppTokenizer) -> None:
        self.tok = tok
        self.version = tok.version

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        return self.tok.encode(text, allow_special=allow_special)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.tok.decode_bytes(ids)

    def default_encode(self, text: str) -> list[int]:
        return self.tok.default_tokenize(text)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        """llama-cpp-python's chat handler for the GGUF's template (``Jinja2ChatFormatter``, as
        ``Llama`` builds it: the eos/bos texts of the vocabulary) and its tokenization of the
        prompt (``add_bos=not added_special, special=True``); no mask (the handler has none)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        tok = self.tok
        formatter = Jinja2ChatFormatter(
            template=self.template or "",
            eos_token=tok.token_text(tok.eos_id),
            bos_token=tok.token_text(tok.bos_id),
            add_generation_prompt=add_generation_prompt,
        )
        result = formatter(
            messages=[dict(m) for m in messages],
            tools=None if tools is None else [dict(t) for t in tools],
            **dict(template_kwargs or {}),
        )
        ids = tok._tokenize(result.prompt, add_special=not result.added_special, parse_special=True)
        return ids, []


class LlamaCppDetokenizeBackend(LlamaCppBackend):
    """llama.cpp's second decode path (``llama_detokenize``); encoding is the ``llama.cpp`` row's."""

    name = "llama.cpp-detokenize"
    reads = READS[name]
    capabilities = frozenset({Capability.DECODE, Capability.SINGLE_TOKENS})

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.tok.detokenize(ids)


def _open(exports: Exports) -> LlamaCppTokenizer:
    """The GGUF's tokenizer. The export is checked before the library: a directory without a
    ``.gguf`` is *skip* (ExportAbsent) whether or not llama-cpp-python is installed; only then
    does opening it raise BackendMissing (*missing*) when the library is absent."""
    if exports.gguf is None:
        raise ExportAbsent("no .gguf file in the directory; run `stacktok export`")
    return LlamaCppTokenizer(exports.gguf)


def load_detokenize(exports: Exports) -> LlamaCppDetokenizeBackend:
    return LlamaCppDetokenizeBackend(_open(exports))


def load(exports: Exports) -> LlamaCppBackend:
    """llama.cpp over the GGUF; with a chat path (``CHAT``) where the GGUF has a template and the
    reference is an imported artifact (whose chats are DIR's template rendered by each engine:
    ``conformance.checks.template_chats``; our own layout's chats are built from pieces, and the
    GGUF's copy of that template is compared as text by ``gguf.chat_template``)."""
    backend = LlamaCppBackend(_open(exports))
    template = backend.tok.chat_template()
    if template is not None and exports.artifact is not None:
        if not is_ours(shared_reference(exports.artifact)):
            backend.template = template
            backend.capabilities = TOKENIZER_CAPS | {Capability.CHAT}
    return backend

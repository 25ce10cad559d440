"""Hugging Face ``tokenizers`` over ``tokenizer.json``.

Safe path: ``encode_special_tokens = True`` (an object property that is *not*
saved in tokenizer.json). Trusted: ``encode_special_tokens = False``.
Default: a freshly loaded object, ``encode(text)`` -- parses special strings
(unsafe), recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from conformance.backends import READS, dist_version, require
from conformance.backends._base import TOKENIZER_CAPS, BaseBackend
from conformance.core.layout import Exports
from conformance.core.protocol import ExportAbsent


class TokenizersBackend(BaseBackend):
    name = "tokenizers"
    reads = READS[name]
    decode_exact = False
    encodes_in_batch = True
    capabilities = TOKENIZER_CAPS

    def __init__(self, path, version: str) -> None:
        from tokenizers import Tokenizer

        self._path = str(path)
        self.tok = Tokenizer.from_file(self._path)
        self.default = Tokenizer.from_file(self._path)
        self.version = version
        self._lock = threading.Lock()  # encode_special_tokens is shared state

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        with self._lock:
            self.tok.encode_special_tokens = not allow_special
            return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str], *, allow_special: bool) -> list[list[int]]:
        # encode_batch runs encode's own pipeline on each text (one call, no per-text overhead)
        with self._lock:
            self.tok.encode_special_tokens = not allow_special
            return [e.ids for e in self.tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.decode_text(ids).encode("utf-8")

    def decode_text(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def default_encode(self, text: str) -> list[int]:
        return self.default.encode(text).ids


def load(exports: Exports) -> TokenizersBackend:
    require("tokenizers", "hf")
    if exports.hf_dir is None:
        raise ExportAbsent("no tokenizer.json in the directory")
    return TokenizersBackend(exports.hf_dir / "tokenizer.json", dist_version("tokenizers"))

"""llama.cpp (llama-cpp-python) over the vocab-only GGUF.

Safe path: ``llama_tokenize(..., add_special=False, parse_special=False)``;
trusted: ``parse_special=True``. Default: ``Llama.tokenize(text)`` -- adds
BOS when the GGUF says so and does not parse specials (recorded). Decode
joins ``token_to_piece(special=True)`` pieces, which is byte-exact
(``Llama.detokenize`` drops tokens over 32 bytes, llama-cpp-python#2362).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..layout import Exports
from ..protocol import BackendMissing
from . import require
from ._base import TOKENIZER_CAPS, BaseBackend


class LlamaCppBackend(BaseBackend):
    name = "llama.cpp"
    capabilities = TOKENIZER_CAPS

    def __init__(self, tok) -> None:
        self.tok = tok
        self.version = tok.version

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        return self.tok.encode(text, allow_special=allow_special)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.tok.decode_bytes(ids)

    def default_encode(self, text: str) -> list[int]:
        return list(self.tok._llama.tokenize(text.encode("utf-8")))


def load(exports: Exports) -> LlamaCppBackend:
    require("llama_cpp", "llama")
    if exports.gguf is None:
        raise BackendMissing("no .gguf file in the directory; run `stacktok export`")
    from stacktok_export.export.gguf_fmt import LlamaCppTokenizer

    return LlamaCppBackend(LlamaCppTokenizer(exports.gguf))

"""tiktoken over the ``.tiktoken`` rank file (read fresh; tiktoken's path cache is bypassed).

Safe path: ``encode_ordinary``. Trusted: ``encode(allowed_special="all")``.
Default: ``encode(text)``, which *raises* on special strings -- recorded as
"raises" (safe).
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.backends import READS, dist_version, require, shared_reference
from conformance.backends._base import TOKENIZER_CAPS, BaseBackend
from conformance.core.layout import Exports
from conformance.core.protocol import ExportAbsent
from stacktok_export.export.tiktoken_fmt import load_tiktoken_file


class TiktokenBackend(BaseBackend):
    name = "tiktoken"
    reads = READS[name]
    capabilities = TOKENIZER_CAPS

    def __init__(self, enc, version: str) -> None:
        self.enc = enc
        self.version = version

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        if allow_special:
            return self.enc.encode(text, allowed_special="all")
        return self.enc.encode_ordinary(text)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.enc.decode_bytes(list(ids))

    def default_encode(self, text: str) -> list[int]:
        return self.enc.encode(text)


def load(exports: Exports) -> TiktokenBackend:
    require("tiktoken", "tiktoken")
    if exports.tiktoken is None:
        raise ExportAbsent("no .tiktoken file in the directory; run `stacktok export`")
    ref = shared_reference(exports.artifact)
    return TiktokenBackend(load_tiktoken_file(ref, exports.tiktoken), dist_version("tiktoken"))

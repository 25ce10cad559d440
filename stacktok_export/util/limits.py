"""How large an untrusted input may be: one table, one flag to raise it (``--max-file-mb``).

The limits sit far above every real checkpoint (figures from the files themselves) and far below
what exhausts a CI runner; a real file over a limit is refused with the flag that raises it.

=====================  ==========  =====================================================
kind                   default     largest real file seen
=====================  ==========  =====================================================
``tokenizer.json``     64 MiB      ~33 MB (Gemma 3, 262k pieces); Llama 3 9 MB, Qwen2 7 MB
other JSON configs     16 MiB      ``tokenizer_config.json`` with inline templates < 1 MB
chat templates         1 MiB       the 69 templates in llama.cpp's ``models/templates``: < 30 KB
``.tiktoken``          64 MiB      o200k_base 3.6 MB, cl100k_base 1.7 MB
SentencePiece model    64 MiB      Gemma 3 ``tokenizer.model`` 4.7 MB
``--text``/``--probes``/``--chats``  256 MiB   (user data)
a vocabulary           2,097,152 entries       XLM-V 901,629; Gemma 3 262,144
one line of a corpus   64 MiB      (``stacktok pack``: a longer JSONL line or document is refused)
=====================  ==========  =====================================================

A GGUF is not read whole (its tensors are mapped, never loaded); its header is checked against
the file's size instead (``stacktok_export.export.gguf_fmt``).

Out of scope: time budgets (``stacktok_export.util.bounded``); how a file is read
(``stacktok_export.util.untrusted``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    tokenizer_json: int = 64 * MiB
    config_json: int = 16 * MiB
    template: int = 1 * MiB
    tiktoken: int = 64 * MiB
    sentencepiece: int = 64 * MiB
    user_file: int = 256 * MiB
    vocab_entries: int = 1 << 21
    corpus_line: int = 64 * MiB

    def raised_to(self, mb: float) -> Limits:
        """Every byte limit at least ``mb`` MiB (the ``--max-file-mb`` flag); counts scale too."""
        size = int(mb * MiB)
        fields = {k: max(v, size) for k, v in vars(self).items() if k != "vocab_entries"}
        scale = max(1.0, size / self.tokenizer_json)
        return replace(self, **fields, vocab_entries=int(self.vocab_entries * scale))


_CURRENT = [Limits()]


def current() -> Limits:
    """The limits in force (the defaults unless :func:`raised` is active)."""
    return _CURRENT[-1]


@contextlib.contextmanager
def raised(mb: float | None) -> Iterator[Limits]:
    """Within the block every limit is at least ``mb`` MiB (``None``: the defaults)."""
    _CURRENT.append(current() if mb is None else current().raised_to(mb))
    try:
        yield current()
    finally:
        _CURRENT.pop()

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
the file's size instead (``stacktok_export.gguf.header``).

Out of scope: time budgets (``stacktok_export.util.bounded``); how a file is read
(``stacktok_export.util.untrusted``).
"""

from __future__ import annotations

import argparse
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


def add_flag(p: argparse.ArgumentParser, *, what: str = "every input size limit") -> None:
    """The one ``--max-file-mb MB`` flag (gate, import, pack, train); read it with :func:`from_flag`."""
    d = Limits()
    p.add_argument(
        "--max-file-mb",
        type=float,
        default=None,
        metavar="MB",
        help=f"raise {what} to at least MB MiB (defaults: tokenizer.json {d.tokenizer_json >> 20}, other "
        f"JSON {d.config_json >> 20}, a chat template {d.template >> 20}, .tiktoken {d.tiktoken >> 20}, "
        f"--text/--probes {d.user_file >> 20}, a corpus document {d.corpus_line >> 20}; a vocabulary "
        f"{d.vocab_entries:,} entries, scaled with it; docs/security.md)",
    )


def from_flag(mb: float | None) -> contextlib.AbstractContextManager[Limits]:
    """:func:`raised` for the flag's value; a size that is not positive is a ``ValueError`` whose
    message names the flag (the command line turns it into exit 2)."""
    if mb is not None and not 0 < mb < 1 << 30:
        raise FlagError(f"--max-file-mb takes a positive size in MiB, got {mb:g}")
    return raised(mb)


class FlagError(ValueError):
    """``--max-file-mb`` out of range."""

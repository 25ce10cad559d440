"""stacktok: a frozen byte-level BPE, its exporters, and proof that every backend agrees.

Public surface: :class:`StackTokenizer`, :func:`load_tokenizer`, the id-layout
constants and :class:`ArtifactError`. Exporters live in ``stacktok_export.export``
and the chat renderer in ``stacktok_export.chat``.
"""

from .artifact import ArtifactError
from .bpe import (
    NUM_BYTES,
    NUM_MERGES,
    SPECIAL_TOKENS,
    SPLIT_PATTERN,
    VOCAB_SIZE,
    StackTokenizer,
    load_tokenizer,
    shipped_artifact_path,
)

__all__ = [
    "ArtifactError",
    "NUM_BYTES",
    "NUM_MERGES",
    "SPECIAL_TOKENS",
    "SPLIT_PATTERN",
    "VOCAB_SIZE",
    "StackTokenizer",
    "load_tokenizer",
    "shipped_artifact_path",
]
__version__ = "0.1.0"

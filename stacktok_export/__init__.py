"""stacktok: a frozen byte-level BPE, its exporters, and proof that every backend agrees.

Public surface: :class:`StackTokenizer`, :func:`load_tokenizer`, the id-layout
constants, :class:`ArtifactError` and where the artifact lives
(:func:`shipped_artifact_path`, :func:`default_artifact_path`). Exporters live in
``stacktok_export.export`` and the chat renderer in ``stacktok_export.chat``.

Out of scope: the command line (``stacktok_cli``) and the suite (``conformance``); this
package imports neither.
"""

from .artifact import ArtifactError, default_artifact_path, shipped_artifact_path
from .bpe import (
    NUM_BYTES,
    NUM_MERGES,
    SPECIAL_TOKENS,
    SPLIT_PATTERN,
    VOCAB_SIZE,
    StackTokenizer,
    load_tokenizer,
)

__all__ = [
    "ArtifactError",
    "NUM_BYTES",
    "NUM_MERGES",
    "SPECIAL_TOKENS",
    "SPLIT_PATTERN",
    "VOCAB_SIZE",
    "StackTokenizer",
    "default_artifact_path",
    "load_tokenizer",
    "shipped_artifact_path",
]
__version__ = "0.1.0"

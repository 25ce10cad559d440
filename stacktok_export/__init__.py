"""stacktok: a frozen byte-level BPE, its exporters, and proof that every backend agrees.

This file is the public API, all of it: :class:`StackTokenizer` and :func:`load_tokenizer` (no
argument: the shipped ``stack100m-32768``), :class:`ArtifactError` (any unreadable or
inconsistent artifact, the fix in its message), where the artifact lives
(:func:`shipped_artifact_path`, :func:`default_artifact_path`) and our v1 id layout's constants.

The package is the tokenizer pipeline, a folder a stage: ``split/`` (pre-tokenizers),
``models/`` (one subpackage per model type; ``models/bpe/`` is the tokenizer), ``trainer/``,
``artifact/`` (the file formats: data in, data out), ``chat/``; then the tools on top of them,
``gguf/``, ``export/``, ``importers/``, ``pack/``, ``corpus/``; ``util/`` under everything.
``pyproject.toml``'s import-linter contracts keep those layers.

Out of scope: the command line (``stacktok_cli``) and the suite (``conformance``); this
package imports neither.
"""

from .artifact.artifact import ArtifactError, default_artifact_path, shipped_artifact_path
from .models.bpe.bpe import (
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

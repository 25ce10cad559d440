"""The gate's static checks in order: provenance, checkpoint config and Hugging Face files,
chat template, GGUF metadata, then llama.cpp's end-of-generation set.

Each check reads files in the directory (never writes, never imports code from it) and
returns :class:`~conformance.core.rows.Row` values with a one-line fix; every check yields a
row on every run (``skip`` with the reason when its file is absent). Files were
schema-checked by ``conformance.validate`` before this runs. The row order is the gate's
report order.

Out of scope: the vocabulary id by id (``conformance.static.surface``); judging warnings by
behaviour (``conformance.gate.behaviour``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conformance.core.layout import Exports
from conformance.core.rows import Row
from conformance.static.chat import check_chat_files
from conformance.static.config import check_config
from conformance.static.context import StaticContext
from conformance.static.gguf import check_gguf
from conformance.static.gguf_eog import check_gguf_eog
from conformance.static.provenance import check_provenance
from stacktok_export import StackTokenizer

STATIC_CHECKS: tuple[Callable[[StaticContext], list[Row]], ...] = (
    check_provenance,
    check_config,
    check_chat_files,
    check_gguf,
)


def run_static(
    exports: Exports, ref: StackTokenizer, *, files: Any = None, probes: Sequence[Any] = ()
) -> list[Row]:
    """Every static row, in the gate's order; ``files`` is what validation read (each file is then
    taken from it, not read again); ``probes`` are the run's probes (a setting judged by what it
    does to them)."""
    ctx = StaticContext(exports, ref, files=files, probes=probes)
    out: list[Row] = []
    for fn in STATIC_CHECKS:
        out += fn(ctx)
    out += check_gguf_eog(exports, ref)
    return out

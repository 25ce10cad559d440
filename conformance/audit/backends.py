"""The backends the Unicode-table scan compares: exports for them, loading, declarations, one scan.

The exports come from the one export orchestration (``stacktok_export.export.render_format``),
only in the formats the chosen backends read, written to a scratch directory; a format that
cannot be written becomes that backend's ``error``. :func:`load_scanned_backend` is the audit's
one call into the backend registry. The ``unicode_tables`` declarations of
``fixtures/divergences.jsonl`` are read once; if they cannot be read, a ``declared_divergences``
row says what was not checked and why (never a silent "none declared").

Out of scope: the scan itself (``unicode_scan``), the finding (``unicode_tables``), whether a
directory's own exports match the artifact (``stacktok gate``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from conformance.audit.findings import Found, found
from conformance.audit.unicode_scan import Encode, Scan, scan_blocks, sentinel_classes
from conformance.core.declared import UNICODE_TABLES, applies
from conformance.core.fixtures import FIXTURES, Divergence, FixtureError, load_divergences
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, BackendMissing
from stacktok_export import StackTokenizer
from stacktok_export.export import FORMATS, export_paths, render_format
from stacktok_export.split.drift import Shape

SCANNABLE = ("tiktoken", "tokenizers", "transformers", "llama.cpp")
DEFAULT_BACKENDS = ("tiktoken", "tokenizers", "llama.cpp")
FORMAT_OF = {"tiktoken": "tiktoken", "tokenizers": "hf", "transformers": "hf", "llama.cpp": "gguf"}
SANITY_TEXT = "Hello world, it's 2026!\n\tdef f(x):\n        return x ** 2  # ok\r\n"
EXPORT_NAME = "audit"  # file stem of the scratch exports


def write_exports(
    tok: StackTokenizer, artifact: Path, dest: Path, names: Sequence[str]
) -> tuple[Exports, dict[str, str]]:
    """Write the exports ``names`` need into ``dest``; return them and the formats that failed."""
    failed: dict[str, str] = {}
    needed = {FORMAT_OF[n] for n in names}
    for fmt in (f for f in FORMATS if f in needed):
        try:
            files = render_format(tok, fmt, name=EXPORT_NAME)
        except (ImportError, ValueError) as exc:
            failed[fmt] = str(exc)
            continue
        for rel, data in files.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
    paths = {fmt: dest / rel for fmt, rel in export_paths(EXPORT_NAME).items()}
    exports = Exports(
        artifact=artifact,
        hf_dir=paths["hf"] if paths["hf"].is_dir() else None,
        tiktoken=paths["tiktoken"] if paths["tiktoken"].is_file() else None,
        gguf=paths["gguf"] if paths["gguf"].is_file() else None,
    )
    return exports, failed


def load_scanned_backend(name: str, exports: Exports) -> Backend:
    """The audit's backend load, through the one loader (``conformance.checks.loading``): a library
    that is absent, or a directory without the file it reads, raises ``BackendMissing``; a library
    that refuses the export raises what it raised."""
    from conformance.checks.loading import load_named

    loaded = load_named(name, exports)
    if loaded.status in ("missing", "skip"):
        raise BackendMissing(loaded.reason)
    if loaded.status == "error":
        raise loaded.error
    return loaded.backend


# ------------------------------------------------------------------ declarations
def unicode_declarations() -> tuple[list[Divergence], list[Found]]:
    """The ``unicode_tables`` declarations, and (if they cannot be read) a row saying so."""
    try:
        divs = load_divergences(FIXTURES / "divergences.jsonl")
    except (FixtureError, OSError) as exc:
        why = f"not checked: which differences are declared ({exc}); every difference is listed as undeclared"
        return [], [found("declared_divergences", "backends", "skip", why)]
    return [d for d in divs if d.cause == UNICODE_TABLES], []


def declared_ids(declarations: Sequence[Divergence], name: str, version: str) -> list[str]:
    """Ids of the ``unicode_tables`` declarations for backend ``name`` at ``version``
    (the matching rule itself is ``conformance.core.declared``)."""
    return sorted(
        d.id for d in declarations if d.cause == UNICODE_TABLES and applies(d, backend=name, version=version)
    )


# ------------------------------------------------------------------ one backend
def scan_backend(
    name: str,
    exports: Exports,
    tok: StackTokenizer,
    shape: Shape,
    blocks: Sequence[Sequence[int]],
    texts: Sequence[str],
    ref_ids: Sequence[list[int]],
    *,
    declarations: Sequence[Divergence],
) -> Scan:
    """Load backend ``name`` over ``exports`` and scan every block against the reference."""
    start = time.perf_counter()
    try:
        backend = load_scanned_backend(name, exports)
    except BackendMissing as exc:
        return Scan(name, "missing", reason=str(exc))
    be: Encode = lambda t: list(backend.encode(t, allow_special=False))  # noqa: E731
    version = str(backend.version)
    scan = Scan(name, "agrees", version=version, declared=declared_ids(declarations, name, version))
    if be(SANITY_TEXT) != tok.encode(SANITY_TEXT):
        scan.status, scan.reason = (
            "error",
            (
                "differs from the reference on plain ASCII text: the export or "
                "vocabulary differs (not a Unicode-table issue); run `stacktok gate`"
            ),
        )
        return scan
    scan.leaves = scan_blocks(blocks, texts, ref_ids, shape, tok.encode, be)
    scan.sentinels = sentinel_classes(tok, shape, be)
    scan.status = "disagrees" if scan.leaves else "agrees"
    scan.seconds = time.perf_counter() - start
    return scan

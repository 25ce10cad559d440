"""Provenance: the fingerprint labels, and whether each export file is byte-identical to `stacktok export`.

A stored fingerprint is a label: a mismatch *warns* and the content checks decide. The
files check re-exports the artifact in memory (Hugging Face files, ``.tiktoken``, a
vocab-only GGUF) and names every file present whose bytes differ; that is a warning too,
since behaviour decides.

Out of scope: what a difference means (``conformance.static.config``, ``.hf_files``,
``.chat``, ``.gguf`` and the surface rows); a model GGUF's bytes (it holds weights: its
tokenizer rows decide).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from conformance.core.layout import file_bytes, gguf_digest
from conformance.core.rows import Row, row, skip
from conformance.static.context import StaticContext
from stacktok_export.export.hf import FINGERPRINT_KEY, hf_files
from stacktok_export.export.tiktoken_fmt import tiktoken_text


def check_provenance(ctx: StaticContext) -> list[Row]:
    """Labels and bytes: a stored fingerprint is a label, so a mismatch warns; content decides."""
    out = []
    fp = ctx.obj("tokenizer_config.json").get(FINGERPRINT_KEY)
    if ctx.dir is None:
        out.append(skip("provenance.fingerprint", "no Hugging Face files (tokenizer.json) in the directory"))
    elif fp is None:
        out.append(
            row(
                "provenance.fingerprint",
                False,
                "tokenizer_config.json has no stacktok_fingerprint label (save_pretrained drops it); "
                "the content checks below decide",
                "keep the exported tokenizer_config.json to keep the label",
                warn=True,
            )
        )
    else:
        out.append(
            row(
                "provenance.fingerprint",
                fp == ctx.ref.fingerprint,
                f"label stacktok_fingerprint {str(fp)[:12]}... is not the artifact's "
                f"{ctx.ref.fingerprint[:12]}...; "
                "a label proves nothing either way -- the content checks below decide",
                "re-export from the frozen artifact so the label tells the truth",
                warn=True,
            )
        )
    if ctx.gguf_ok():
        gfp = ctx.gguf_value("stacktok.fingerprint")
        out.append(
            row(
                "provenance.gguf_fingerprint",
                gfp == ctx.ref.fingerprint,
                f"GGUF stacktok.fingerprint label is {str(gfp)[:16]!r}, not the artifact's; content decides",
                ctx.gguf_fix,
                warn=True,
            )
        )
    else:
        out.append(skip("provenance.gguf_fingerprint", ctx.no_gguf()))
    out.append(_files_identical(ctx))
    return out


def _expected_files(ctx: StaticContext) -> dict[Path, bytes | None]:
    """What `stacktok export` writes for each export file present in the directory (``None``:
    the export refuses this artifact in that format, so no file can be byte-identical)."""
    from stacktok_export.export import ExportRefused

    expected: dict[Path, bytes | None] = {}
    if ctx.dir is not None:
        for name, data in hf_files(ctx.ref).items():
            expected[ctx.dir / name] = data
    if ctx.x.tiktoken:
        try:
            expected[ctx.x.tiktoken] = tiktoken_text(ctx.ref).encode("ascii")
        except ExportRefused:
            expected[ctx.x.tiktoken] = None
    if ctx.x.gguf and not ctx.gguf_tensors:  # a model GGUF holds weights: its tokenizer rows decide
        try:
            from stacktok_export.export.gguf_fmt import gguf_bytes

            expected[ctx.x.gguf] = gguf_bytes(ctx.ref)
        except ImportError:  # gguf not installed: the GGUF checks report it
            pass
        except ExportRefused:
            expected[ctx.x.gguf] = None
    return expected


def _same_bytes(ctx: StaticContext, path: Path, data: bytes) -> bool:
    """Whether ``path`` holds exactly ``data``; the GGUF by its digest from the one read gguf-py made."""
    if path == ctx.x.gguf:
        return gguf_digest(path) == hashlib.sha256(data).hexdigest()
    return file_bytes(path, ctx.read) == data


def _files_identical(ctx: StaticContext) -> Row:
    expected = _expected_files(ctx)
    differ = sorted(
        p.name
        for p, data in expected.items()
        if p.is_file() and (data is None or not _same_bytes(ctx, p, data))
    )
    return row(
        "provenance.files",
        not differ,
        f"not byte-identical to `stacktok export`: {', '.join(differ)} "
        "(behaviour decides: see the rows below)",
        "re-export, or keep the edit if every behavioural row passes",
        warn=True,
    )

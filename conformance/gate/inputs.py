"""What a gate run read, for its JSON report: the sha256 and size of every file.

:func:`files_read` hashes the bytes validation already holds (``conformance.validate.Validated``:
each checkpoint JSON/Jinja file and the ``.tiktoken``, read once), takes a vocab-only GGUF's
digest from the one gguf-py read (``conformance.core.layout.gguf_digest``) and reads the frozen
artifact's bytes (the reference loads it by path). A model GGUF is not hashed (gigabytes of
weights; the gate reads its metadata only): its ``sha256`` is null and ``note`` says why.

Out of scope: the probe, chat and divergence files (the report's ``fixtures`` holds their
hashes, ``conformance.core.fixtures``); files a backend library reads on its own beyond these.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from conformance.core.layout import gguf_digest
from conformance.validate import Validated

MODEL_GGUF = "model GGUF: metadata read only, bytes not hashed"


def files_read(files: Validated | None, *, artifact: Path) -> list[dict[str, Any]]:
    """One entry per file, sorted by path: ``{"path", "role", "sha256", "size", "note"}``."""
    out = [_entry(Path(artifact), "artifact", Path(artifact).read_bytes())]
    if files is not None:
        out += [_entry(f.path, "checkpoint", f.raw) for f in files.hf.values() if f.raw is not None]
        if files.tiktoken is not None and files.tiktoken.raw is not None:
            out.append(_entry(files.tiktoken.path, "tiktoken", files.tiktoken.raw))
        if files.gguf is not None:
            out.append(_gguf_entry(Path(files.gguf.path)))
    return sorted(out, key=lambda e: (e["path"], e["role"]))


def _entry(path: Path, role: str, raw: bytes) -> dict[str, Any]:
    return {
        "path": str(path),
        "role": role,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "note": None,
    }


def _gguf_entry(path: Path) -> dict[str, Any]:
    digest = gguf_digest(path)
    note = None if digest is not None else MODEL_GGUF
    return {"path": str(path), "role": "gguf", "sha256": digest, "size": path.stat().st_size, "note": note}

"""What ``stacktok audit ARTIFACT_OR_DIR [--artifact A]`` audits (:class:`Target`).

An artifact JSON alone, or a tokenizer directory -- then its ``tokenizer.json`` *and* the
artifact given by ``--artifact`` (default: the shipped one). Every other combination is a usage
error that names the fix.

Out of scope: reading either file (``vocab``, ``tokenizer_json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_export.bpe import shipped_artifact_path


@dataclass(frozen=True)
class Target:
    artifact: Path
    directory: Path | None


def resolve_target(path: Path | None, artifact: Path | None) -> Target:
    """ARTIFACT_OR_DIR (+ ``--artifact``) -> what to audit; usage errors name the fix."""
    if path is None:
        return Target(artifact or shipped_artifact_path(), None)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise UsageError(f"{path} has no tokenizer.json; pass a tokenizer directory or an artifact JSON")
        return Target(artifact or shipped_artifact_path(), path)
    if path.is_file():
        if artifact is not None:
            raise UsageError("--artifact is for directory input; pass the artifact JSON once")
        return Target(path, None)
    raise UsageError(f"{path}: no such file or directory")


def subject_label(subject: str, target: Target) -> str:
    """How a finding's subject is named in human output ("" for ``backends``)."""
    if subject == "artifact":
        return target.artifact.name
    if subject == "tokenizer.json" and target.directory is not None:
        return f"{target.directory.name}/tokenizer.json"
    return ""

"""``stacktok export [--check]``: write (or verify) the tiktoken / HF / GGUF exports of an artifact.

Defaults resolve against the stacktok checkout, never the working directory: the artifact is
:func:`stacktok_export.artifact.default_artifact_path` and the output folder the checkout's
``tokenizer/`` (``./tokenizer`` for an installed package). The first line printed,
``using artifact X, exports in Y``, says which. ``--check`` writes nothing and exits 1 when a
file on disk is not exactly what the artifact produces. A ``kill`` mid-export still removes
its temporary files (:mod:`stacktok_cli.sigterm`).

Out of scope: the exporters (``stacktok_export.export``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_cli.sigterm import sigterm_as_exit
from stacktok_export import artifact

HELP = "write tiktoken / HF / GGUF exports of an artifact"


def add_arguments(x: argparse.ArgumentParser) -> None:
    x.add_argument(
        "--artifact",
        default=None,
        help=f"artifact to export (default: {artifact.EXPORT_DIR}/{artifact.ARTIFACT_NAME} of the "
        "stacktok checkout, else the shipped artifact)",
    )
    x.add_argument(
        "--out",
        default=None,
        help=f"output directory (default: {artifact.EXPORT_DIR}/ of the stacktok checkout, "
        f"else ./{artifact.EXPORT_DIR}/)",
    )
    x.add_argument(
        "--check", action="store_true", help="verify the exports on disk; write nothing (default: off)"
    )


def main(args: argparse.Namespace) -> int:
    from stacktok_export.export import check_exports, export_all

    source, out = _export_paths(args.artifact, args.out, check=args.check)
    if args.check:
        print(f"using artifact {source}, exports in {out}")
        problems = check_exports(source, out)
        for p in problems:
            print(f"stale: {p}")
        if problems:
            print(f"run `stacktok export --artifact {source} --out {out}` and commit the result")
            return 1
        print(f"exports in {out} are exactly what {source} produces")
        return 0
    with sigterm_as_exit():  # so a `kill` runs the temp-file clean-up too
        print(f"using artifact {source}, exports in {out}")
        written = export_all(source, out)
    for path in written:
        print(f"wrote {path}")
    return 0


def _default_out(*, check: bool) -> Path:
    """The checkout's ``tokenizer/``; else ``./tokenizer`` (which ``--check`` needs to exist)."""
    root = artifact.project_root()
    if root is not None:
        return root / artifact.EXPORT_DIR
    here = Path(artifact.EXPORT_DIR)
    if check and not here.is_dir():
        raise UsageError(
            f"no export directory: not in a stacktok checkout and no ./{artifact.EXPORT_DIR}/ here; "
            "pass --out DIR (the directory holding the exports)"
        )
    return here


def _export_paths(source: str | None, out: str | None, *, check: bool) -> tuple[Path, Path]:
    """``--artifact`` / ``--out``, defaults resolved against the checkout, not the working directory."""
    artifact_path = Path(source) if source else artifact.default_artifact_path()
    if not artifact_path.is_file():
        raise UsageError(f"--artifact {artifact_path}: no such file")
    out_path = Path(out) if out else _default_out(check=check)
    if check and not out_path.is_dir():
        raise UsageError(f"--out {out_path}: no such directory; run `stacktok export --out {out_path}` first")
    return artifact_path, out_path

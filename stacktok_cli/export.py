"""``stacktok export [--check]``: write (or verify) the tiktoken / HF / GGUF exports of an artifact.

Defaults resolve against the stacktok checkout, never the working directory: the artifact is
the one ``--artifact`` default (``conformance.core.arguments.artifact_path``: the checkout's
``tokenizer/stack100m-32768.json``, else the shipped one) and the output folder the checkout's
``tokenizer/`` (``./tokenizer`` for an installed package). The first line printed,
``using artifact X, exports in Y``, says which. ``--check`` writes nothing and exits 1 when a
file on disk is not exactly what the artifact produces. ``--format F`` (repeatable) limits
both to some formats; a format that cannot express the artifact (an imported one, issue 21)
refuses with exit 2 and one line saying what and why, and nothing is written. A ``kill``
mid-export still removes its temporary files (:mod:`stacktok_cli.sigterm`).

Out of scope: the exporters (``stacktok_export.export``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_cli.args import add_artifact_flag, artifact_path
from stacktok_cli.sigterm import sigterm_as_exit
from stacktok_export.artifact import artifact
from stacktok_export.export import FORMATS, ExportRefused, check_exports, export_all

HELP = "write tiktoken / HF / GGUF exports of an artifact"


def add_arguments(x: argparse.ArgumentParser) -> None:
    add_artifact_flag(x)
    x.add_argument(
        "--out",
        default=None,
        help=f"output directory (default: {artifact.EXPORT_DIR}/ of the stacktok checkout, "
        f"else ./{artifact.EXPORT_DIR}/)",
    )
    x.add_argument(
        "--check", action="store_true", help="verify the exports on disk; write nothing (default: off)"
    )
    x.add_argument(
        "--format",
        dest="formats",
        action="append",
        choices=FORMATS,
        default=None,
        help="export only this format (repeatable; default: all of " + ", ".join(FORMATS) + ")",
    )


def main(args: argparse.Namespace) -> int:
    source, out = _export_paths(args.artifact, args.out, check=args.check)
    formats = tuple(dict.fromkeys(args.formats or FORMATS))
    try:
        return _run(source, out, formats=formats, check=args.check)
    except ExportRefused as exc:
        others = [f for f in formats if f != exc.fmt]
        hint = f"; export the others with {' '.join('--format ' + f for f in others)}" if others else ""
        raise UsageError(f"{exc}; nothing was written{hint}") from None


def _run(source: Path, out: Path, *, formats: tuple[str, ...], check: bool) -> int:
    if check:
        print(f"using artifact {source}, exports in {out}")
        problems = check_exports(source, out, formats=formats)
        for p in problems:
            print(f"stale: {p}")
        if problems:
            print(f"run `stacktok export --artifact {source} --out {out}` and commit the result")
            return 1
        print(f"exports in {out} are exactly what {source} produces")
        return 0
    with sigterm_as_exit():  # so a `kill` runs the temp-file clean-up too
        print(f"using artifact {source}, exports in {out}")
        notes: list[str] = []
        written = export_all(source, out, formats=formats, notes=notes)
    for path in written:
        print(f"wrote {path}")
    for note in notes:  # what is left to the gate, which judges behaviour
        print(f"note: {note}; `stacktok gate {out} --artifact {source}` judges it", file=sys.stderr)
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


def _export_paths(source: Path | None, out: str | None, *, check: bool) -> tuple[Path, Path]:
    """``--artifact`` / ``--out``, defaults resolved against the checkout, not the working directory."""
    chosen = artifact_path(source)
    if not chosen.is_file():
        raise UsageError(f"--artifact {chosen}: no such file")
    out_path = Path(out) if out else _default_out(check=check)
    if check and not out_path.is_dir():
        raise UsageError(f"--out {out_path}: no such directory; run `stacktok export --out {out_path}` first")
    return chosen, out_path

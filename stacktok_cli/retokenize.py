"""``stacktok retokenize MODEL.gguf --out OUT.gguf``: put the frozen tokenizer into a model GGUF.

A thin wrapper over :func:`stacktok_export.export.gguf_model.retokenize` (issue 15): every
``tokenizer.*`` key comes from the artifact, the tensors are copied unchanged, the output is
written atomically and is never the input.

Out of scope: the logic (``gguf_model``) and converting weights (docs/exports.md, "Shipping a GGUF").
"""

from __future__ import annotations

import argparse

from conformance.core.errors import UsageError
from stacktok_cli.args import add_artifact_flag, artifact_path
from stacktok_export.models.bpe.bpe import load_tokenizer

HELP = "copy a model GGUF with every tokenizer.* key from the artifact (tensors unchanged)"


def add_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("model", help="a model GGUF with weights (from any converter); required")
    r.add_argument("--out", required=True, help="the GGUF to write (atomically); required, not the input")
    add_artifact_flag(r)


def main(args: argparse.Namespace) -> int:
    from stacktok_export.export.gguf_model import ModelGGUFError, retokenize

    tok = load_tokenizer(artifact_path(args.artifact))
    try:
        done = retokenize(args.model, args.out, tok)
    except (ModelGGUFError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    replaced = f"replaced {len(done.dropped)} tokenizer keys" if done.dropped else "added the tokenizer keys"
    print(
        f"wrote {done.out}: {done.architecture}, {done.tensors} tensors ({done.tensor_bytes:,} bytes) "
        f"unchanged, {done.rows:,} token rows, {replaced} (artifact {tok.name} {tok.fingerprint[:12]})"
    )
    return 0

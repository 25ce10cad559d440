"""``stacktok retokenize MODEL.gguf --out OUT.gguf``: put the frozen tokenizer into a model GGUF.

A thin wrapper over :func:`stacktok_export.export.gguf_model.retokenize` (kept out of
``cli.py`` so that module's command list stays one registration line per command).

Out of scope: the logic (``gguf_model``) and converting weights (README "Shipping a GGUF").
"""

from __future__ import annotations

import argparse


def add_retokenize(sub: argparse._SubParsersAction) -> None:
    text = "copy a model GGUF with every tokenizer.* key from the artifact (tensors unchanged)"
    r = sub.add_parser("retokenize", help=text, description=text)
    r.add_argument("model", help="a model GGUF with weights (from any converter); required")
    r.add_argument("--out", required=True, help="the GGUF to write (atomically); required, not the input")
    r.add_argument("--artifact", default=None, help="artifact JSON (default: the shipped artifact)")
    r.set_defaults(func=cmd_retokenize)


def cmd_retokenize(args: argparse.Namespace) -> int:
    from .cli import UsageError, _load
    from .export.gguf_model import ModelGGUFError, retokenize

    tok = _load(args.artifact)
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

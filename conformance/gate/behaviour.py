"""Behaviour over syntax: static warnings judged by what the backends that read the file do.

A ``tokenizer.json`` section that differs from the export is a *warning* from the static
checks (``conformance.static``); :func:`behaviour_proof` keeps it a warning when every
conformance row of the backends that read ``tokenizer.json`` passes, turns it into a failure
naming the rows when any of them fails, and into a failure when none of them ran.

Out of scope: producing the static rows (``conformance.static``) or the conformance rows
(``conformance.checks``); rows of checks not listed in :data:`BEHAVIOUR_JUDGED` pass through.
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.backends import readers_of
from conformance.core.rows import Row

#: syntax rows judged by behaviour: check -> the conformance checks that prove it on the readers
#: of tokenizer.json (``conformance.backends.readers_of``)
BEHAVIOUR_JUDGED: dict[str, tuple[str, ...]] = {
    "config.pre_tokenizer": ("encode", "trusted"),
    "config.normalizer": ("encode", "trusted"),
    "config.bpe_model": ("encode", "trusted"),
    "config.decoder": ("decode", "single_tokens", "stream"),
    "config.special_flags": ("trusted", "injection"),
    "config.post_processor": ("encode", "default"),
}


def behaviour_proof(static: Sequence[Row], suite: Sequence[Row]) -> list[Row]:
    """Syntax warnings (:data:`BEHAVIOUR_JUDGED`) judged by the conformance rows of the backends
    that read the file: all pass -> stays a warning; any fails -> fail naming it; none ran -> fail."""
    out = []
    for r in static:
        judged = BEHAVIOUR_JUDGED.get(r.check)
        if r.status != "warn" or judged is None:
            out.append(r)
            continue
        readers, checks = readers_of("tokenizer.json"), judged
        proof = [s for s in suite if s.backend in readers and s.check in {f"conformance.{c}" for c in checks}]
        bad = [f"{s.check}[{s.backend}]" for s in proof if s.status in ("fail", "error")]
        ran = [s for s in proof if s.status == "pass"]
        if bad:
            out.append(
                Row(r.check, r.backend, "fail", f"{r.message}; behaviour differs: {', '.join(bad)}", r.fix)
            )
        elif not ran:
            out.append(
                Row(
                    r.check,
                    r.backend,
                    "fail",
                    f"{r.message}; no backend that reads it ({', '.join(readers)}) ran to show "
                    "it behaves the same",
                    "install tokenizers/transformers (pip install 'stacktok[hf]') and rerun, "
                    "or restore the section",
                )
            )
        else:
            who = sorted({s.backend for s in ran})
            out.append(
                Row(
                    r.check, r.backend, "warn", f"{r.message}; identical behaviour on {', '.join(who)}", r.fix
                )
            )
    return out

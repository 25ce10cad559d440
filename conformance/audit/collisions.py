"""Ids that collide: ``duplicate_bytes`` and ``specials_unreachable``.

``duplicate_bytes``: no two ids (specials included) have the same bytes -- llama.cpp aborts on
duplicate token strings. ``specials_unreachable``: untrusted encoding of each special string in
a few shapes (:func:`special_shapes`) gives no special id, and no ordinary token spells or
contains a special.

Out of scope: trusted encoding of specials (``stacktok gate`` checks each backend's flags).
"""

from __future__ import annotations

from conformance.audit.findings import Found, cap, found, hex_bytes
from conformance.audit.vocab import Vocab


def check_duplicate_bytes(v: Vocab) -> Found:
    """No two ids, specials included, may have the same bytes."""
    ids: dict[bytes, list[int]] = {}
    everything = v.all_tokens()
    for i, b in everything:
        ids.setdefault(b, []).append(i)
    dups = sorted((sorted(set(i)), b) for b, i in ids.items() if len(set(i)) > 1)
    details = {"checked": len(everything), "duplicates": [{"bytes": b.hex(), "ids": i} for i, b in dups]}
    if not dups:
        summary = f"all {details['checked']:,} ids have distinct bytes"
        return found("duplicate_bytes", v.subject, "pass", summary, details)
    lines = [f"ids {i} are all {hex_bytes(b)}" for i, b in dups]
    summary = f"{len(dups):,} byte strings belong to several ids (llama.cpp aborts on load)"
    return found("duplicate_bytes", v.subject, "fail", summary, details, cap(lines))


def special_shapes(s: str) -> tuple[str, ...]:
    """The untrusted texts tried for special ``s``: alone, after a letter, twice, after a space."""
    return (s, "x" + s, s + s, " " + s)


def check_specials_unreachable(v: Vocab) -> Found:
    """Untrusted encoding never yields a special id; no ordinary token spells or contains a special."""
    special_ids = set(v.specials.values())
    leaks = [(t, sorted(set(v.encode(t)) & special_ids)) for s in v.specials for t in special_shapes(s)]
    leaks = [(t, ids) for t, ids in leaks if ids]
    spelled = [(i, s) for i, b in sorted(v.tokens.items()) for s in v.specials if s.encode("utf-8") in b]
    lines = [f"untrusted {t!r} encodes to special id(s) {ids}" for t, ids in leaks]
    lines += [
        f"ordinary id {i} {hex_bytes(v.tokens[i])} {'is' if v.tokens[i] == s.encode() else 'contains'} {s!r}"
        for i, s in spelled
    ]
    details = {
        "specials": len(v.specials),
        "shapes": len(v.specials) * 4,
        "leaks": [{"text": t, "ids": ids} for t, ids in leaks],
        "ordinary_tokens_with_special_text": [{"id": i, "special": s} for i, s in spelled],
    }
    if not lines:
        summary = f"{len(v.specials)} specials x 4 shapes give no special id; no token spells one"
        return found("specials_unreachable", v.subject, "pass", summary, details)
    summary = f"{len(leaks)} untrusted shapes give special ids, {len(spelled)} tokens spell a special"
    return found("specials_unreachable", v.subject, "fail", summary, details, cap(lines))

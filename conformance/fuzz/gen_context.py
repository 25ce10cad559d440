"""What the fuzz generators draw from: :class:`GenContext`, built once per run.

The context holds the reference tokenizer's vocabulary (as text and as bytes) and
special strings, the shipped probes short enough to mutate, and the code points
that the ``unicode_new`` probes label with the Unicode version that assigned them
(:func:`code_point_ages`). Everything in it is a sorted tuple, so a generator's
output depends only on its ``rng`` and this context.

Out of scope: the generators themselves (``conformance.fuzz.generators`` lists them)
and code-point pools from the ``unicodedata`` tables (``conformance.fuzz.gen_unicode``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance.core.expect import ordinary_bytes
from conformance.core.fixtures import Probe
from stacktok_export import StackTokenizer

#: probes longer than this are not mutated (they are cut to a window anyway)
PROBE_MAX_CHARS = 4000


@dataclass(frozen=True)
class GenContext:
    """What generators draw from; build it once with :meth:`build`."""

    tok: StackTokenizer
    vocab_texts: tuple[str, ...]  # ordinary tokens whose bytes are valid UTF-8 alone
    vocab_bytes: tuple[bytes, ...]  # every ordinary token's bytes
    specials: tuple[str, ...]
    probes: tuple[Probe, ...]  # shipped probes short enough to mutate
    new_code_points: tuple[tuple[str, int], ...]  # (Unicode version, code point), sorted

    @classmethod
    def build(cls, tok: StackTokenizer, probes: Sequence[Probe]) -> GenContext:
        token_bytes = tuple(ordinary_bytes(tok).values())
        # every ordinary token but the 32 C0 control bytes (v1: ids 0..31), as text where it is UTF-8
        texts = tuple(t for b in token_bytes if not _c0(b) and (t := _utf8(b)) is not None)
        return cls(
            tok=tok,
            vocab_texts=texts,
            vocab_bytes=token_bytes,
            specials=tuple(sorted(tok.special_to_id, key=tok.special_to_id.__getitem__)),
            probes=tuple(p for p in probes if len(p.text) <= PROBE_MAX_CHARS),
            new_code_points=tuple(sorted((v, cp) for cp, v in code_point_ages(probes).items())),
        )


def _c0(data: bytes) -> bool:
    return len(data) == 1 and data[0] < 0x20


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def code_point_ages(probes: Sequence[Probe]) -> dict[int, str]:
    """Code point -> the Unicode version that assigned it, from the ``unicode_new`` probes.

    Probe ids are ``unicode_new-v{VERSION}-...``; a non-ASCII character that
    occurs in the probes of exactly one version is that version's new code
    point (context characters occur under every version).
    """
    seen: dict[int, set[str]] = {}
    for p in probes:
        if p.category != "unicode_new" or not p.id.startswith("unicode_new-v"):
            continue
        version = p.id.split("-")[1][1:]
        for ch in p.text:
            if ord(ch) > 0x7F:
                seen.setdefault(ord(ch), set()).add(version)
    return {cp: next(iter(vs)) for cp, vs in seen.items() if len(vs) == 1}

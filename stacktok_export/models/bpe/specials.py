"""Special-token strings in the text ``encode`` takes: which ones a call splits out, which it refuses.

The options are tiktoken's ``Encoding.encode`` keywords, with one deliberate difference::

    >>> tok.encode("hi <|eos|>")                       # doctest: +SKIP
    [...]   # the special string is ordinary bytes: untrusted text never yields a special id
    >>> tok.encode("hi <|eos|>", allowed_special={"<|eos|>"})[-1] == tok.eot_token  # doctest: +SKIP
    True

tiktoken's ``encode`` *raises* on a special string by default (``disallowed_special="all"``);
ours encodes it as bytes (the artifact's contract). ``disallowed_special=`` keeps tiktoken's
meaning as an opt-in: ``"all"`` or a set, and a listed special string in the text raises
``ValueError`` naming the token, its position and the fix (:func:`refuse_banned`).
``parse_special=True`` parses every special (the same as ``allowed_special="all"``); it replaces
``add_special_tokens=``, which meant "parse specials" here and "add BOS/EOS" everywhere else, and
now raises ``TypeError`` naming the new keyword (:data:`REMOVED_KEYWORDS`). Specials in
``in_text`` (HF added tokens with ``special=False``, GGUF user-defined tokens) are split out
always, as their source does, so they are never "disallowed".

:func:`plan` turns a call's options into the two sets; :func:`splitter` is the one regex that
cuts a text at any of a set (cached per tokenizer).

Out of scope: encoding the text between the specials (``bpe.py``), adding BOS/EOS (nothing adds
them).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

import regex

SpecialSet = Literal["all"] | Collection[str]
NONE: frozenset[str] = frozenset()  # the defaults, compared by identity on the fast path
NO_CHECK: tuple[str, ...] = ()

#: keywords ``encode`` no longer takes -> the message that names what replaced them
REMOVED_KEYWORDS = {
    "add_special_tokens": (
        "encode() no longer takes add_special_tokens= (here it meant 'parse special-token strings', "
        "elsewhere 'add BOS/EOS'); use parse_special=True to parse every special, or "
        "allowed_special={...} for some (encode never adds BOS/EOS)"
    ),
}


def plan(
    special_to_id: Mapping[str, int],
    in_text: frozenset[str],
    allowed_special: SpecialSet,
    disallowed_special: SpecialSet,
    parse_special: bool,
) -> tuple[frozenset[str], frozenset[str]]:
    """The specials to split out of the text, and those whose presence raises."""
    if allowed_special is NONE and disallowed_special is NO_CHECK and not parse_special:
        return in_text, NONE  # the default call: nothing to check
    allowed = _allowed(special_to_id, allowed_special, parse_special=parse_special)
    split = allowed | in_text
    if disallowed_special == "all":
        return split, frozenset(special_to_id) - split
    return split, _special_set(special_to_id, disallowed_special, option="disallowed_special")


def _allowed(
    special_to_id: Mapping[str, int], allowed_special: SpecialSet, *, parse_special: bool
) -> frozenset[str]:
    if parse_special:
        if allowed_special != "all" and (isinstance(allowed_special, str) or len(allowed_special)):
            raise ValueError(
                "parse_special=True already parses every special; drop "
                f"allowed_special={allowed_special!r} or pass parse_special=False"
            )
        return frozenset(special_to_id)
    if allowed_special == "all":
        return frozenset(special_to_id)
    return _special_set(special_to_id, allowed_special, option="allowed_special")


def _special_set(special_to_id: Mapping[str, int], value: SpecialSet, *, option: str) -> frozenset[str]:
    """``value`` as a set of this tokenizer's specials; errors name the option and the fix."""
    if isinstance(value, str):
        raise TypeError(
            f"{option} must be 'all' or a set of special tokens, got {value!r}; "
            f"wrap a single token in a set, e.g. {option}={{{value!r}}}"
        )
    chosen = frozenset(value)
    unknown = chosen - special_to_id.keys()
    if unknown:
        raise ValueError(
            f"{option} contains {sorted(unknown)}, which are not special tokens; "
            f"choose from {list(special_to_id)}"
        )
    return chosen


def splitter(cache: dict[frozenset[str], regex.Pattern[str]], specials: frozenset[str]) -> regex.Pattern[str]:
    """One regex matching any of ``specials`` (longest first), as a capture group; kept in ``cache``."""
    found = cache.get(specials)
    if found is None:
        alts = "|".join(regex.escape(s) for s in sorted(specials, key=lambda s: (-len(s), s)))
        found = cache[specials] = regex.compile(f"({alts})")
    return found


def refuse_banned(cache: dict[frozenset[str], regex.Pattern[str]], text: str, banned: frozenset[str]) -> None:
    """``ValueError`` naming the first of ``banned`` in ``text`` (``disallowed_special``)."""
    if banned:
        hit = splitter(cache, banned).search(text)
        if hit is not None:
            special, at = hit.group(), hit.start()
            raise ValueError(
                f"encode(): the text holds special token {special!r} at character {at}, which "
                f"disallowed_special forbids; pass allowed_special={{{special!r}}} to parse it, or "
                "leave it out of disallowed_special to encode it as plain bytes (the default, "
                "disallowed_special=())"
            )


def reject(removed: dict[str, object]) -> None:
    """``TypeError`` for a keyword ``encode`` does not take (naming its replacement if it had one)."""
    name = sorted(removed)[0]
    if name in REMOVED_KEYWORDS:
        raise TypeError(REMOVED_KEYWORDS[name])
    raise TypeError(f"encode() got an unexpected keyword argument {name!r}")


def check_threads(num_threads: int) -> None:
    """``num_threads`` (tiktoken's ``encode_batch`` keyword) must be a positive int."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")

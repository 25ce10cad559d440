"""The public encode surface of ``StackTokenizer``, shaped like tiktoken's ``Encoding``.

:class:`EncodingAPI` is a mixin: ``StackTokenizer`` inherits it and supplies the private
primitives (``_encode_ordinary``, ``_special_res``, ``decode_bytes``, ``special_to_id``,
``in_text``, ``roles``, ``vocab_size``). The names and keywords are tiktoken's, so code
written for ``tiktoken.Encoding`` runs unchanged, with one deliberate difference::

    >>> tok.encode("hi <|eos|>")                       # doctest: +SKIP
    [...]   # the special string is ordinary bytes: untrusted text never yields a special id
    >>> tok.encode("hi <|eos|>", allowed_special={"<|eos|>"})[-1] == tok.eot_token  # doctest: +SKIP
    True

tiktoken's ``encode`` *raises* on a special string by default (``disallowed_special="all"``);
ours encodes it as bytes (the artifact's contract). ``disallowed_special=`` keeps tiktoken's
meaning as an opt-in: ``"all"`` or a set, and a listed special string in the text raises
``ValueError`` naming the token, its position and the fix. ``parse_special=True`` parses every
special (the same as ``allowed_special="all"``); it replaces ``add_special_tokens=``, which
meant "parse specials" here and "add BOS/EOS" everywhere else, and now raises ``TypeError``
naming the new keyword. Specials in ``in_text`` (HF added tokens with ``special=False``, GGUF
user-defined tokens) are split out always, as their source does, so they are never "disallowed".

Out of scope: the BPE itself (``bpe.py``), tiktoken's ``decode_with_offsets`` /
``encode_with_unstable`` / ``encode_to_numpy``, and adding BOS/EOS (nothing here adds them).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import regex

SpecialSet = Literal["all"] | Collection[str]
_NONE: frozenset[str] = frozenset()  # the defaults, compared by identity on the fast path
_NO_CHECK: tuple[str, ...] = ()

#: keywords ``encode`` no longer takes -> the message that names what replaced them
REMOVED_KEYWORDS = {
    "add_special_tokens": (
        "encode() no longer takes add_special_tokens= (here it meant 'parse special-token strings', "
        "elsewhere 'add BOS/EOS'); use parse_special=True to parse every special, or "
        "allowed_special={...} for some (encode never adds BOS/EOS)"
    ),
}


class EncodingAPI:
    """tiktoken's ``Encoding`` methods over a tokenizer's primitives; see the module docstring."""

    if TYPE_CHECKING:
        name: str
        special_to_id: dict[str, int]
        in_text: frozenset[str]
        roles: dict[str, int]
        _special_res: dict[frozenset[str], regex.Pattern[str]]

        @property
        def vocab_size(self) -> int: ...

        def _encode_ordinary(self, text: str, out: list[int]) -> None: ...

        def _encode_ordinary_many(self, texts: Sequence[str]) -> list[list[int]]: ...

        def decode_bytes(self, ids: Iterable[int]) -> bytes: ...

    # ---------------------------------------------------------------- encoding
    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = _NONE,
        disallowed_special: SpecialSet = _NO_CHECK,
        parse_special: bool = False,
        **removed: object,
    ) -> list[int]:
        """Encode ``text``; special-token strings are ordinary bytes unless allowed.

        Opt in only at trusted call sites: ``allowed_special={"<|bos|>"}``,
        ``allowed_special="all"`` or ``parse_special=True`` (all). ``disallowed_special=`` (a set,
        or ``"all"``: every special not allowed) raises ``ValueError`` when the text holds a
        listed special string, as tiktoken does -- a check for text that should carry none.
        Never adds BOS/EOS.
        """
        if removed:
            _reject(removed)
        if not isinstance(text, str):
            raise TypeError(f"encode() takes str, got {type(text).__name__}; decode bytes first")
        split, banned = self._plan(allowed_special, disallowed_special, parse_special)
        return self._encode_checked(text, split, banned)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode untrusted text: every special string is plain bytes (``in_text`` ones excepted)."""
        return self.encode(text)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: SpecialSet = _NONE,
        disallowed_special: SpecialSet = _NO_CHECK,
        parse_special: bool = False,
    ) -> list[list[int]]:
        """``[encode(t, ...) for t in texts]``, the options checked once.

        ``num_threads`` is accepted for tiktoken's signature and must be a positive int, but
        the texts are encoded in this thread, in order: the encoder is pure Python (threads
        would share one GIL) and its caches belong to the instance, not to a thread.
        """
        _check_threads(num_threads)
        split, banned = self._plan(allowed_special, disallowed_special, parse_special)
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"encode_batch() takes str items, got {type(text).__name__} at index {i}")
        return self._encode_checked_many(texts, split, banned)

    def encode_ordinary_batch(self, texts: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """``[encode_ordinary(t) for t in texts]`` (``num_threads`` as in :meth:`encode_batch`)."""
        return self.encode_batch(texts, num_threads=num_threads)

    # ---------------------------------------------------------------- decoding
    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id (a special: its UTF-8 string); ``ValueError`` when out of range.

        tiktoken raises ``KeyError`` for an unknown id; every id below ``n_vocab`` is a token here.
        """
        return self.decode_bytes([token])

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each id, one item per id."""
        return [self.decode_single_token_bytes(t) for t in tokens]

    # -------------------------------------------------------------- properties
    @property
    def n_vocab(self) -> int:
        """Number of ids (every id ``0 .. n_vocab - 1`` is a token)."""
        return self.vocab_size

    @property
    def max_token_value(self) -> int:
        return self.vocab_size - 1

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self.special_to_id)

    @property
    def eot_token(self) -> int:
        """The end-of-text special's id (the ``eos`` role: ``<|eos|>`` in the shipped artifact).

        ``AttributeError`` (so ``hasattr`` is False) when the artifact names none.
        """
        try:
            return self.roles["eos"]
        except KeyError:
            raise AttributeError(
                f"{self.name}: the artifact names no end-of-text special (no 'eos' role; roles: "
                f"{sorted(self.roles)}); use special_token_id(...) with the special that ends documents"
            ) from None

    # ----------------------------------------------------------------- private
    def _plan(
        self, allowed_special: SpecialSet, disallowed_special: SpecialSet, parse_special: bool
    ) -> tuple[frozenset[str], frozenset[str]]:
        """The specials to split out of the text, and those whose presence raises."""
        if allowed_special is _NONE and disallowed_special is _NO_CHECK and not parse_special:
            return self.in_text, _NONE  # the default call: nothing to check
        allowed = self._allowed(allowed_special, parse_special=parse_special)
        split = allowed | self.in_text
        if disallowed_special == "all":
            return split, frozenset(self.special_to_id) - split
        return split, self._special_set(disallowed_special, option="disallowed_special")

    def _allowed(self, allowed_special: SpecialSet, *, parse_special: bool = False) -> frozenset[str]:
        if parse_special:
            if allowed_special != "all" and (isinstance(allowed_special, str) or len(allowed_special)):
                raise ValueError(
                    "parse_special=True already parses every special; drop "
                    f"allowed_special={allowed_special!r} or pass parse_special=False"
                )
            return frozenset(self.special_to_id)
        if allowed_special == "all":
            return frozenset(self.special_to_id)
        return self._special_set(allowed_special, option="allowed_special")

    def _special_set(self, value: SpecialSet, *, option: str) -> frozenset[str]:
        """``value`` as a set of this tokenizer's specials; errors name the option and the fix."""
        if isinstance(value, str):
            raise TypeError(
                f"{option} must be 'all' or a set of special tokens, got {value!r}; "
                f"wrap a single token in a set, e.g. {option}={{{value!r}}}"
            )
        chosen = frozenset(value)
        unknown = chosen - self.special_to_id.keys()
        if unknown:
            raise ValueError(
                f"{option} contains {sorted(unknown)}, which are not special tokens; "
                f"choose from {list(self.special_to_id)}"
            )
        return chosen

    def _splitter(self, specials: frozenset[str]) -> regex.Pattern[str]:
        """One cached regex matching any of ``specials`` (longest first), as a capture group."""
        found = self._special_res.get(specials)
        if found is None:
            alts = "|".join(regex.escape(s) for s in sorted(specials, key=lambda s: (-len(s), s)))
            found = self._special_res[specials] = regex.compile(f"({alts})")
        return found

    def _encode_checked_many(
        self, texts: list[str], split: frozenset[str], banned: frozenset[str]
    ) -> list[list[int]]:
        """``_encode_checked`` of each text, the texts' ordinary segments encoded as one batch
        (``_encode_ordinary_many``): the same ids, their new pre-tokens merged together."""
        for text in texts:
            self._refuse_banned(text, banned)
        segments = [self._splitter(split).split(t) if split else [t] for t in texts]
        ordinary = [seg for segs in segments for seg in segs[::2] if seg]
        encoded = iter(self._encode_ordinary_many(ordinary))
        outs = []
        for segs in segments:
            out: list[int] = []
            for i, seg in enumerate(segs):
                if i % 2:
                    out.append(self.special_to_id[seg])
                elif seg:
                    out += next(encoded)
            outs.append(out)
        return outs

    def _refuse_banned(self, text: str, banned: frozenset[str]) -> None:
        """``ValueError`` naming the first of ``banned`` in ``text`` (``disallowed_special``)."""
        if banned:
            hit = self._splitter(banned).search(text)
            if hit is not None:
                raise _disallowed(hit.group(), at=hit.start())

    def _encode_checked(self, text: str, split: frozenset[str], banned: frozenset[str]) -> list[int]:
        self._refuse_banned(text, banned)
        out: list[int] = []
        if not split:
            self._encode_ordinary(text, out)
            return out
        for i, seg in enumerate(self._splitter(split).split(text)):
            if i % 2:
                out.append(self.special_to_id[seg])
            elif seg:
                self._encode_ordinary(seg, out)
        return out


def _disallowed(special: str, *, at: int) -> ValueError:
    return ValueError(
        f"encode(): the text holds special token {special!r} at character {at}, which disallowed_special "
        f"forbids; pass allowed_special={{{special!r}}} to parse it, or leave it out of disallowed_special "
        "to encode it as plain bytes (the default, disallowed_special=())"
    )


def _reject(removed: dict[str, object]) -> None:
    name = sorted(removed)[0]
    if name in REMOVED_KEYWORDS:
        raise TypeError(REMOVED_KEYWORDS[name])
    raise TypeError(f"encode() got an unexpected keyword argument {name!r}")


def _check_threads(num_threads: int) -> None:
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")

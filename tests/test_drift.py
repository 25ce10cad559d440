"""Drift: a Unicode-table difference is told apart from any other difference, per code point.

A declaration ``cause: unicode_tables`` may only cover the first kind; before this, any
backend that encoded one non-ASCII character differently (a real bug) counted as drifting
on it, so the difference was "declared".
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.core.declared import UNICODE_TABLES, Declarations
from conformance.core.fixtures import Divergence
from stacktok_export import load_tokenizer
from stacktok_export.export.tiktoken_fmt import to_tiktoken
from stacktok_export.split.drift import OTHER, SAME, TABLES, DriftCache

REF = load_tokenizer()
U17 = "\U000323b0"  # a Unicode 17 letter; tiktoken 0.14's tables call it punctuation


def _e_as_plain_e(text: str) -> list[int]:
    """A broken encoder: ``é`` comes out as ``e`` (not a classification change)."""
    return REF.encode(text.replace("\u00e9", "e"))


def test_tiktoken_differs_by_tables_only() -> None:
    cache = DriftCache(REF, to_tiktoken(REF).encode_ordinary)
    assert cache.status(U17) == TABLES and cache.drifts(U17)
    assert cache.status("\u00e9") == SAME and not cache.drifts("\u00e9")
    assert cache.scan(f"caf\u00e9 {U17}") == (True, None)


def test_a_difference_no_class_explains_is_other() -> None:
    cache = DriftCache(REF, _e_as_plain_e)
    assert cache.status("\u00e9") == OTHER and not cache.drifts("\u00e9")
    assert cache.scan("caf\u00e9") == (False, "\u00e9")


@dataclass
class Broken:
    name: str = "tiktoken"
    version: str = "0.14.0"

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        return _e_as_plain_e(text)


def test_a_declared_unicode_tables_backend_still_fails_on_a_real_bug() -> None:
    decl = Divergence("t", "tiktoken", "encode", "*", "test", "https://example.invalid", cause=UNICODE_TABLES)
    rules = Declarations([decl], REF)
    assert not rules.explained_by_tables(Broken(), "un caf\u00e9", trusted=False)
    # while a table difference next to it is still declared
    real = Broken(version="0.14.1")  # drift caches are per backend name and version
    real.encode = lambda text, *, allow_special: to_tiktoken(REF).encode_ordinary(text)  # type: ignore[method-assign]
    assert rules.explained_by_tables(real, f"un {U17}'s", trusted=False)

"""The Llama-3 and Qwen2 splits with ASCII stretches by ``re`` give exactly ``regex``'s findall."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from stacktok_export.split.ascii_split import (
    ASCII_FORMS,
    ASCII_PATTERN,
    LINE_CUT,
    QWEN2_ASCII_PATTERN,
    WINDOW_CUT,
    fast_split,
    windows,
)
from stacktok_export.split.pretokenize import GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN

ROOT = Path(__file__).resolve().parents[1]
FULL = regex.compile(LLAMA3_PATTERN)
SPLIT = fast_split(LLAMA3_PATTERN, FULL)
QWEN2 = regex.compile(QWEN2_PATTERN)
#: every proven pattern: (its regex findall, the fast split)
SPLITS = {
    "llama3": (FULL.findall, SPLIT),
    "qwen2": (QWEN2.findall, fast_split(QWEN2_PATTERN, QWEN2)),
}
both = pytest.mark.parametrize("name", sorted(SPLITS))

# every character class the pattern distinguishes, the cut's own characters, and non-ASCII
# letters, digits and white space (U+017F folds to "s": the contractions are case-insensitive)
NON_ASCII = ["é", "中", "\xa0", "\u2028", "\u3000", "\u017f", "١", "\U0001f600"]
ALPHABET = list("aZs0 \t\n\r\x0b\x0c\x1c'.!~") + NON_ASCII


@pytest.mark.parametrize("cls", [r"\p{L}", r"\p{N}", r"\s"])
def test_ascii_classes_match_regex_character_by_character(cls: str) -> None:
    ours = {r"\p{L}": "[A-Za-z]", r"\p{N}": "[0-9]", r"\s": r"[\t\n\x0b\x0c\r ]"}[cls]
    for c in map(chr, range(128)):
        assert bool(regex.fullmatch(cls, c)) == bool(regex.fullmatch(ours, c)), (cls, repr(c))
    assert r"\t\n\x0b\x0c\r " in ASCII_PATTERN


@both
def test_every_short_text_over_the_alphabet(name: str) -> None:
    full, split = SPLITS[name]
    small = list("a0 \t\n\r'.") + ["é", "\xa0"]
    for n in range(1, 5):
        for chars in itertools.product(small, repeat=n):
            text = "".join(chars)
            assert split(text) == full(text), repr(text)


@both
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET + ["\n", "\n ", "\n\t", "'re", "'LL", "123456"]), max_size=60))
def test_generated_texts(name: str, parts: list[str]) -> None:
    full, split = SPLITS[name]
    text = "".join(parts)
    assert split(text) == full(text)


@both
@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_any_unicode_text(name: str, text: str) -> None:
    full, split = SPLITS[name]
    assert split(text) == full(text)


@both
def test_heldout_documents_and_probes(name: str) -> None:
    full, split = SPLITS[name]
    text = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")
    docs = [text[i : i + 50_000] for i in range(0, len(text), 50_000)]
    assert sum(d.isascii() for d in docs) < len(docs)  # mixed documents take the cut path
    for doc in docs:
        assert split(doc) == full(doc)
    with open(ROOT / "fixtures" / "probes.jsonl", encoding="utf-8") as f:
        for line in f:
            probe = json.loads(line)
            assert split(probe["text"]) == full(probe["text"]), probe["id"]


@both
def test_cuts_are_boundaries_on_both_sides(name: str) -> None:
    """The rule the split rests on: text cut at LINE_CUT splits like the whole."""
    full, _ = SPLITS[name]
    text = "x = 1  \n\n  \tdef é():\n\t'S\n中文\n \n.\n\r\n  ~"
    whole = full(text)
    at = [m.start() + 1 for m in LINE_CUT.finditer(text)]
    assert at  # the text has cuts
    pieces = [full(text[a:b]) for a, b in zip([0, *at], [*at, len(text)])]
    assert [p for ps in pieces for p in ps] == whole


class _Counted:
    """A compiled pattern that records the spans its ``findall`` is called on."""

    def __init__(self, compiled: regex.Pattern[str]) -> None:
        self.compiled, self.spans = compiled, []

    def findall(self, text: str, pos: int = 0, endpos: int | None = None) -> list[str]:
        end = len(text) if endpos is None else endpos
        self.spans.append(text[pos:end])
        return self.compiled.findall(text, pos, end)


def test_regex_gets_whole_runs_of_non_ascii_stretches_and_nothing_ascii() -> None:
    # cut to cut: "a\n" | "x é\n" | "y é\n  \n" (no cut before a blank line) | "z\nü\n" (none
    # before "ü") | "q": the three non-ASCII stretches in a row are one regex call
    text = "a\nx é\ny é\n  \nz\nü\nq"
    counted = _Counted(FULL)
    split = fast_split(LLAMA3_PATTERN, counted)
    assert split(text) == FULL.findall(text)
    assert counted.spans == ["x é\ny é\n  \nz\nü\n"]


def test_the_qwen2_ascii_form_differs_only_in_its_digits() -> None:
    assert set(ASCII_FORMS) == {LLAMA3_PATTERN, QWEN2_PATTERN}
    assert QWEN2_ASCII_PATTERN != ASCII_PATTERN
    assert QWEN2_ASCII_PATTERN.replace("|[0-9]|", "|[0-9]{1,3}|") == ASCII_PATTERN
    assert SPLITS["qwen2"][1]("x 2024 y") == ["x", " ", "2", "0", "2", "4", " y"]


def test_other_patterns_keep_regex() -> None:
    # GPT-2's look-ahead rule comes before its newline rule: "a\n\n" alone splits differently
    gpt2 = regex.compile(GPT2_PATTERN)
    assert gpt2.findall("a\n\nb")[:-1] != gpt2.findall("a\n\n")
    assert fast_split(GPT2_PATTERN, gpt2) is None


def _split_by_windows(text: str, size: int, full=FULL.findall) -> list[str]:  # noqa: ANN001
    return [piece for window in windows(text, size) for piece in full(window)]


@both
def test_every_window_cut_is_a_boundary_on_both_sides(name: str) -> None:
    """Every WINDOW_CUT position, alone: the text cut there splits like the whole."""
    full, _ = SPLITS[name]
    small = list("aZ0 \t\n'.~") + ["é", "\xa0", "١"]
    cuts = 0
    for n in range(2, 6):
        for chars in itertools.product(small, repeat=n):
            text = "".join(chars)
            whole = full(text)
            for m in WINDOW_CUT.finditer(text):
                at = m.end() if m.group() == "\n" else m.start()
                assert 0 < at < len(text)
                assert full(text[:at]) + full(text[at:]) == whole, (text, at)
                cuts += 1
    assert cuts > 10_000  # the cut is not vacuous over this alphabet


@both
@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.sampled_from(ALPHABET + ["\n", "\n ", "'re", "123456", "+/=", "QmFzZTY0"]), max_size=80),
    st.integers(min_value=1, max_value=12),
)
def test_windows_split_like_the_whole_text(name: str, parts: list[str], size: int) -> None:
    full, _ = SPLITS[name]
    text = "".join(parts)
    assert "".join(windows(text, size)) == text
    assert _split_by_windows(text, size, full) == full(text)


def test_a_base64_line_is_cut_into_windows_and_a_letter_run_is_not() -> None:
    import base64
    import random

    rng = random.Random(5)
    blob = base64.b64encode(rng.randbytes(30_000)).decode()
    parts = list(windows(blob, 1_000))
    assert len(parts) >= 30 and all(len(p) >= 1_000 for p in parts[:-1])
    assert _split_by_windows(blob, 1_000) == FULL.findall(blob)
    letters = "".join(rng.choices("abcXYZ", k=5_000))
    assert list(windows(letters, 1_000)) == [letters]

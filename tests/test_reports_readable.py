"""A failure you can act on, in every report (issue 20, item 3).

Failures first with counts per status; each failing conformance row's probe, text (escaped,
shortened) and id window with both sides' bytes in the terminal, Markdown and HTML; a cause
drawn from the other rows (a surface row, a backend below the support-matrix floor); the
stream check saying where the joined text differs; status words that need no emoji font;
declared divergences marked apart from clean passes; JUnit's ``missing`` as an error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

import pytest

from conformance.backends.reference import ReferenceBackend
from conformance.checks.causes import FLOORS, explain, load_floors
from conformance.checks.compare import Runner
from conformance.checks.results import BackendResult, result_rows
from conformance.core.fixtures import FixtureSet, Probe
from conformance.core.protocol import Capability
from conformance.core.rows import Row
from conformance.report import render_results
from conformance.report.html import to_html
from conformance.report.junit import to_junit
from conformance.report.markdown import to_markdown
from conformance.report.text import render_table

TEXT = "hello\tworld, the quick brown fox jumps over the lazy dog. " * 4 + "tail\u200b end"
SURFACE = Row(
    "surface.tokenizer_json",
    "files",
    "fail",
    "tokenizer.json: 2 difference(s) from the artifact: model.vocab id 300: file has 'x', artifact has 'y'",
    "re-export with `stacktok export`: model.vocab must map ids to the artifact's bytes",
)
OTHERS = [
    Row("config.no_double_bos", "files", "pass", "ok"),
    Row("conformance.decode", "reference", "pass", "12 pass, 2 declared (x)", declared=2),
    Row("surface.gguf_tokens", "files", "warn", "form differs", "re-export"),
    Row("conformance", "llama.cpp", "missing", "llama_cpp not installed", "pip install llama-cpp-python"),
    Row("conformance", "vllm", "skip", "not checked: no vllm"),
]


class Swapping(ReferenceBackend):
    """The reference with two ids swapped on encode and 'o' -> '0' in every streamed piece."""

    name = "tokenizers"  # reads tokenizer.json
    version = "0.20.1"
    capabilities = frozenset({Capability.ENCODE, Capability.STREAM})

    def __init__(self, tok, *, swap: tuple[int, int]) -> None:
        super().__init__(tok)
        self.a, self.b = swap

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        ids = super().encode(text, allow_special=allow_special)
        return [self.b if i == self.a else self.a if i == self.b else i for i in ids]

    def stream(self, ids: Sequence[int]) -> list[str]:
        return [p.replace("o", "0") for p in super().stream(ids)]


@pytest.fixture(scope="module")
def failing(small_tok) -> tuple[list[Row], BackendResult, list[int]]:
    ids = small_tok.encode(TEXT)
    swap = (ids[9], 300 if ids[9] != 300 else 301)
    runner = Runner(small_tok, FixtureSet(probes=[Probe("seed-probe", "user", TEXT)]))
    result = runner.run(Swapping(small_tok, swap=swap))
    return result_rows([result]), result, ids


def by_check(rows: Sequence[Row]) -> dict[str, Row]:
    return {r.check: r for r in rows}


def all_rows(failing) -> list[Row]:
    rows, _, _ = failing
    return [*OTHERS[:3], SURFACE, *rows, *OTHERS[3:]]


# ------------------------------------------------------------------ the window the runner records
def test_the_window_names_the_probe_and_its_text_around_the_difference(failing) -> None:
    rows, _, ids = failing
    w = by_check(rows)["conformance.encode"].window
    assert w["probe"] == "seed-probe" and w["position"] == 9 and w["start"] == 6
    assert w["offset"] > 0 and w["text"].startswith("'") or w["text"].startswith("...'")
    assert "\\t" in w["text"] and "\t" not in w["text"]  # repr-style escapes
    assert len(w["text"]) < 100 and w["text"].endswith("...")  # shortened, not the whole probe


def test_stream_says_where_the_joined_text_differs(failing) -> None:
    rows, _, _ = failing
    msg = by_check(rows)["conformance.stream"].message
    n = len(TEXT)
    assert f"pieces join to {n} chars, want {n}; first difference at char {TEXT.index('o')}" in msg
    assert "want 'hello\\tworld" in msg and "got 'hell0\\tw0rld" in msg


# ------------------------------------------------------------------ failures first, everywhere
def test_terminal_summary_then_failures_first_with_probe_text_and_window(failing) -> None:
    out = render_table(all_rows(failing)).splitlines()
    assert out[0] == "summary: 3 FAIL, 1 MISSING, 1 WARN, 1 DECLARED, 2 PASS, 7 SKIP"
    results = [line.split()[2] for line in out[2:] if not line.startswith(" ")]
    assert results[:4] == ["FAIL", "FAIL", "FAIL", "MISSING"]
    encode = next(i for i, line in enumerate(out) if line.startswith("conformance.encode"))
    below = "\n".join(out[encode + 1 : encode + 5])
    assert "probe seed-probe, text (from char" in below and "\\t" in below
    assert "first difference at id position 9" in below
    assert "reference: " in below and "backend:   " in below and "[" in below.split("reference: ")[1]
    assert "DECLARED" in next(line for line in out if line.startswith("conformance.decode"))


def test_render_results_shows_each_window_once(failing) -> None:
    _, result, _ = failing
    assert render_results([result]).count("first difference at id position") == 1


def test_markdown_summary_failures_section_then_grid_and_rows(failing) -> None:
    md = to_markdown(all_rows(failing), verdict="FAIL", versions={"tokenizers": "0.20.1"})
    assert "**3 FAIL, 1 MISSING, 1 WARN, 1 DECLARED, 2 PASS, 7 SKIP**" in md
    failures = md.split("#### Failures (4)")[1].split("| check |")[0]
    assert "probe seed-probe, text" in failures and "reference: " in failures and "backend:   " in failures
    assert failures.index("surface.tokenizer_json") < failures.index("conformance.encode")
    assert "llama.cpp" in failures and "surface.gguf_tokens" not in failures
    table = md.split("| check | backend | result | detail |")[1].splitlines()[2:]
    assert [line.split(" | ")[2] for line in table[:4]] == ["FAIL"] * 3 + ["MISSING"]
    assert "| conformance.decode | reference | DECLARED |" in md


def test_html_summary_findings_first_and_bytes_in_view(failing) -> None:
    page = to_html(all_rows(failing), verdict="FAIL", versions={}, directory="d")
    summary = '<p id="summary"><span class="s-fail">3 FAIL</span><span class="s-missing">1 MISSING</span>'
    assert summary in page
    findings = page.split('<section id="findings">')[1]
    assert findings.index("MISSING") < findings.index("WARN")
    assert '<p class="probe">probe <code>seed-probe</code>, text (from char' in findings
    assert '<td class="differs bytes">b&#x27;' in findings  # the bytes are text, not a tooltip
    assert "<th>reference bytes</th>" in findings and "<th>backend bytes</th>" in findings
    assert 'data-declared="2"' in page and ">DECLARED</td>" in page


def test_html_heading_says_incomplete() -> None:
    verdict = "INCOMPLETE — not checked: llama.cpp (not installed)"
    page = to_html(OTHERS, verdict=verdict, versions={}, directory="d")
    assert '<h1 class="incomplete">' in page


def test_no_report_needs_an_emoji_font(failing) -> None:
    rows = all_rows(failing)
    outputs = [
        render_table(rows),
        to_markdown(rows, verdict="FAIL — x", versions={}),
        to_html(rows, verdict="FAIL — x", versions={}, directory="d"),
        to_junit(rows, seconds=1.0),
    ]
    for out in outputs:
        odd = sorted({c for c in out if ord(c) > 0x2000 and c not in "—"})
        assert not odd, odd


# ------------------------------------------------------------------ causes
def test_a_surface_row_over_the_file_the_backend_reads_is_the_cause(failing) -> None:
    rows = all_rows(failing)
    explained = explain(rows, versions={"tokenizers": "0.20.1"})
    assert [(r.check, r.status) for r in explained] == [(r.check, r.status) for r in rows]
    encode = by_check(explained)["conformance.encode"]
    assert encode.fix == f"cause: {SURFACE.message}; fix: {SURFACE.fix}"
    assert "declare" not in encode.fix
    untouched = [r for r, e in zip(rows, explained) if r.backend != "tokenizers"]
    assert untouched == [e for e in explained if e.backend != "tokenizers"]
    # a .gguf surface row explains nothing about tokenizer.json's readers
    gguf = Row("surface.gguf_tokens", "files", "fail", "gguf differs", "rebuild")
    plain = explain([gguf, *failing[0]], versions={"tokenizers": "0.20.1"})
    assert by_check(plain)["conformance.encode"].fix == by_check(failing[0])["conformance.encode"].fix


def test_a_backend_below_the_support_matrix_floor_is_told_to_upgrade() -> None:
    floor = load_floors(FLOORS)["tiktoken"]["floor"]
    assert floor == "0.13.0"  # conformance/floors.json, bisected by `nox -s floor`
    crash = Row(
        "conformance.encode",
        "tiktoken",
        "fail",
        "1 failing, first: long-a-1m: PanicException: stack overflow",
        "the export tokenizes differently: re-export with `stacktok export`, or declare ...",
    )
    old = explain([crash], versions={"tiktoken": "0.12.0"})[0]
    assert "cause: tiktoken 0.12.0 is below the support matrix's floor 0.13.0" in old.fix
    assert "fix: upgrade tiktoken to >= 0.13.0" in old.fix and "re-export" not in old.fix
    assert explain([crash], versions={"tiktoken": "0.13.0"}) == [crash]
    assert explain([crash], versions={"tiktoken": "unknown"}) == [crash]
    assert "upgrade tiktoken" in render_table([old]) and "upgrade tiktoken" in to_markdown(
        [old], verdict="FAIL", versions={}
    )


# ------------------------------------------------------------------ JUnit
def test_junit_missing_is_an_incomplete_error_skip_stays_skipped_declared_is_a_property() -> None:
    suite = ET.fromstring(to_junit(OTHERS, seconds=1.0)).find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    missing = cases["conformance[llama.cpp]"]
    assert missing.find("skipped") is None
    assert missing.find("error").get("type") == "incomplete"
    assert missing.find("error").get("message").startswith("INCOMPLETE")
    assert cases["conformance[vllm]"].find("skipped") is not None
    prop = cases["conformance.decode[reference]"].find("properties/property")
    assert (prop.get("name"), prop.get("value")) == ("declared", "2")
    assert cases["config.no_double_bos[files]"].find("properties") is None
    assert (suite.get("errors"), suite.get("skipped"), suite.get("failures")) == ("1", "1", "0")

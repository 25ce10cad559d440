"""The gate's picture: ``conformance.report.html`` on hand-built rows, and rendered in a real Chromium.

The browser tests (marker ``browser``) need Debian's Chromium (``apt-get install -y chromium``);
without it they FAIL with that command, never skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.core.rows import Row
from conformance.report.html import grid_markdown, to_html

ROWS = [
    Row("config.no_double_bos", "files", "pass", "ok"),
    Row("surface.added_tokens", "files", "warn", "form differs", "re-export"),
    Row("conformance", "reference", "pass", "ok"),
    Row("conformance", "tiktoken", "fail", "id 7 differs <script>alert(1)</script>", "fix & re-export"),
    Row("conformance", "llama.cpp", "missing", "llama_cpp not installed", "pip install llama-cpp-python"),
    Row("conformance", "vllm", "skip", "not checked: no vllm"),
    Row("conformance.encode", "tiktoken", "error", 'cannot load "x"', ""),
    Row("conformance.encode", "reference", "pass", "ok", declared=2),
]
EXPECTED = {
    ("config.no_double_bos", "files"): "pass",
    ("surface.added_tokens", "files"): "warn",
    ("conformance", "reference"): "pass",
    ("conformance", "tiktoken"): "fail",
    ("conformance", "llama.cpp"): "missing",
    ("conformance", "vllm"): "skip",
    ("conformance.encode", "tiktoken"): "error",
    ("conformance.encode", "reference"): "pass",
}
CHECKS = ["config.no_double_bos", "surface.added_tokens", "conformance", "conformance.encode"]
BACKENDS = ["files", "reference", "tiktoken", "llama.cpp", "vllm"]  # the registry's order
VERSIONS = {"tiktoken": "0.12.0", "llama.cpp": ""}
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class _Cells(HTMLParser):
    """(check, backend) -> class of every ``<td>`` inside ``<table id="grid">``."""

    def __init__(self) -> None:
        super().__init__()
        self.in_grid = False
        self.cells: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "grid":
            self.in_grid = True
        elif tag == "td" and self.in_grid:
            self.cells.append((a["data-check"] or "", a["data-backend"] or "", a["class"] or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_grid = False


def cells_of(page: str) -> list[tuple[str, str, str]]:
    parser = _Cells()
    parser.feed(page)
    return parser.cells


def render(rows: list[Row] = ROWS, verdict: str = "FAIL — not checked: llama.cpp (not installed)") -> str:
    return to_html(rows, verdict=verdict, versions=VERSIONS, directory="/ckpt/<run&1>")


# ------------------------------------------------------------------ unit
def test_one_cell_per_check_and_backend_with_its_status() -> None:
    cells = cells_of(render())
    assert [(c, b) for c, b, _ in cells] == [(c, b) for c in CHECKS for b in BACKENDS]
    got = {(c, b): cls for c, b, cls in cells}
    assert {k: v for k, v in got.items() if v != "none"} == EXPECTED
    assert got["config.no_double_bos", "tiktoken"] == "none"


def test_every_text_is_escaped() -> None:
    page = render()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "fix &amp; re-export" in page
    assert "/ckpt/&lt;run&amp;1&gt;" in page
    assert "cannot load &quot;x&quot;" in page  # inside a title attribute too


def test_deterministic_and_self_contained() -> None:
    page = render()
    assert page == render()
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert not re.search(r"<script|<link|@import|url\(|https?://", page)


def test_heading_versions_and_findings() -> None:
    page = render()
    assert '<h1 class="fail">Tokenizer release gate: FAIL — not checked: llama.cpp' in page
    assert "Backends: tiktoken 0.12.0</p>" in page  # empty versions left out
    findings = page.split('<section id="findings">')[1]
    assert findings.count("<li") == sum(r.status != "pass" for r in ROWS)
    assert "fix: pip install llama-cpp-python" in findings
    assert "(2 declared)" in page
    passing = render([Row("conformance", "reference", "pass", "ok")], verdict="PASS")
    assert '<h1 class="pass">' in passing and "none: every row passed" in passing


def test_columns_files_then_registry_order_then_others() -> None:
    rows = [
        Row("served", "vllm-server", "skip", "opt-in"),
        Row("conformance", "llama.cpp", "pass", "ok"),
        Row("conformance", "reference", "pass", "ok"),
        Row("config.bos_id", "files", "pass", "ok"),
    ]
    header = grid_markdown(rows, legend=False).splitlines()[0]
    assert header == "| check | files | reference | llama.cpp | vllm-server |"


def test_a_cell_shows_its_worst_row() -> None:
    rows = [Row("c", "files", "pass", "ok"), Row("c", "files", "fail", "bad"), Row("c", "files", "warn", "w")]
    assert cells_of(render(rows)) == [("c", "files", "fail")]
    assert "| c | FAIL |" in grid_markdown(rows)


def test_grid_markdown() -> None:
    md = grid_markdown(ROWS, legend=False).splitlines()
    assert md[0] == "| check | files | reference | tiktoken | llama.cpp | vllm |"
    assert md[1] == "|---|:-:|:-:|:-:|:-:|:-:|"
    assert md[2] == "| config.no_double_bos | PASS |  |  |  |  |"
    assert md[4] == "| conformance |  | PASS | FAIL | MISSING | SKIP |"
    assert md[5] == "| conformance.encode |  | DECLARED | ERROR |  |  |"
    assert len(md) == 2 + len(CHECKS)
    assert grid_markdown(ROWS).endswith("blank: not checked\n")
    odd = grid_markdown([Row("a|b<i>", "files", "pass", "ok")], legend=False)
    assert "| a\\|b&lt;i&gt; | PASS |" in odd


# ------------------------------------------------------------------ a real browser
def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail(
            "Debian's Chromium is required by the browser tests; apt-get install -y chromium", pytrace=False
        )
    return exe


@pytest.mark.browser
def test_chromium_renders_the_grid(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text(render(), encoding="utf-8")
    cmd = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom"]
    done = subprocess.run(
        [*cmd, report.as_uri()], capture_output=True, text=True, encoding="utf-8", timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert '<table id="grid"' in dom
    got = {(c, b): cls for c, b, cls in cells_of(dom)}
    assert len(got) == len(CHECKS) * len(BACKENDS)
    assert {k: v for k, v in got.items() if v != "none"} == EXPECTED
    assert "<script>" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_failing_row_shows_the_two_id_sequences_with_the_difference_marked() -> None:
    window = {
        "position": 1,
        "reference": [[10, "b'a'"], [11, "b' t'"], [12, "b'x'"]],
        "backend": [[10, "b'a'"], [99, "b' '"], [98, "b't'"]],
        "reference_len": 3,
        "backend_len": 3,
    }
    row = Row("conformance.encode", "tokenizers", "fail", "1 failing", "re-export", window=window)
    page = to_html([row], verdict="FAIL", versions={}, directory="d")
    assert '<table class="window" data-position="1">' in page
    assert '<td class="same" title="b&#x27;a&#x27;">10</td>' in page
    assert '<td class="differs" title="b&#x27; t&#x27;">11</td>' in page and ">99</td>" in page


def test_support_matrix_has_a_mark_per_result() -> None:
    from conformance.report import support_matrix

    rows = [
        {"backend": "a", "version": "1", "result": "conforms", "identical": "5", "run": "5", "declared": "0"},
        {"backend": "b", "version": "1", "result": "diverges", "identical": "4", "run": "5", "declared": "0"},
        {"backend": "c", "version": "-", "result": "missing", "identical": "0", "run": "0", "declared": "0"},
        {
            "backend": "d",
            "version": "2",
            "result": "conforms (declared divergences)",
            "identical": "4",
            "run": "5",
            "declared": "1",
        },
    ]
    table = support_matrix(rows)
    assert "| ✅ conforms |" in table and "| ❌ diverges |" in table and "| ➖ missing |" in table
    assert "| ☑️ conforms (declared divergences) |" in table

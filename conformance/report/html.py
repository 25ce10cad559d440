"""The gate's rows as a picture: a backend x check grid, in HTML and in Markdown.

:func:`to_html` renders one self-contained page -- inline CSS, no script, no
network, no external fonts -- with the verdict as its heading, the grid as
``<table id="grid">`` (one ``<td>`` per check and backend, ``class`` the
status or ``none`` where no row exists, ``data-check`` / ``data-backend`` for
tools; a pass covered by declared divergences reads ``DECLARED`` and carries
``data-declared``), then every row that did not pass -- error, fail and missing rows
first -- with its message, its fix or cause and, for a failing conformance row, the
probe, its text and the id window with each id's bytes on both sides, in view (not only
on hover). Cells and findings say status *words* (``PASS``, ``FAIL``, ...), coloured by
CSS, so a machine without an emoji font reads them; above the grid, the rows per status.
:func:`grid_markdown` gives the same grid as a compact Markdown table for the
Markdown report and model cards. Same rows in, same bytes out: no timestamps,
orders taken from the rows and the backend registry. Where several rows share a check and backend, the
cell shows the worst of them (:data:`SEVERITY`) and the findings list all.

Out of scope: deciding anything (``conformance.core.rows``), writing files and the
command line (``conformance.gate``), computing windows (``conformance.checks.windows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from conformance.backends import REGISTRY
from conformance.core.rows import FILES, Row
from conformance.report.failures import DECLARED, WORDS, counts, failures_first, fix_text, status_word

#: the word a cell or finding shows per status (a declared pass reads ``DECLARED``)
MARK = WORDS
#: least to most severe; a grid cell shows the most severe status of its rows
SEVERITY = ("info", "pass", "skip", "missing", "warn", "fail", "error")
LEGEND = (
    "PASS conforms · DECLARED conforms, differences covered by a declared divergence · WARN · FAIL · "
    "ERROR cannot load · MISSING not installed (INCOMPLETE) · SKIP not applicable · blank: not checked"
)

Grid = tuple[list[str], list[str], dict[tuple[str, str], list[Row]]]


def grid(rows: Sequence[Row]) -> Grid:
    """Checks in first-seen order; backends ``files``, the registry's, then others; each cell's rows."""
    checks = list(dict.fromkeys(r.check for r in rows))
    seen = dict.fromkeys(r.backend for r in rows)
    known = [b for b in (FILES, *REGISTRY) if b in seen]
    backends = known + [b for b in seen if b not in known]
    cells: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        cells.setdefault((r.check, r.backend), []).append(r)
    return checks, backends, cells


def worst(cell: Sequence[Row]) -> Row:
    return max(cell, key=lambda r: SEVERITY.index(r.status))


def cell_word(cell: Sequence[Row]) -> str:
    """The worst row's word; ``DECLARED`` for a passing cell where any row counted declared ones."""
    top = worst(cell)
    return DECLARED if top.status == "pass" and any(r.declared for r in cell) else status_word(top)


# ------------------------------------------------------------------ Markdown
def _md(text: str) -> str:
    return escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def grid_markdown(rows: Sequence[Row], *, legend: bool = True) -> str:
    """The grid as a Markdown table: one row per check, one column per backend, marks in the cells."""
    checks, backends, cells = grid(rows)
    lines = [
        "| check | " + " | ".join(_md(b) for b in backends) + " |",
        "|---|" + ":-:|" * len(backends),
    ]
    for check in checks:
        marks = [cell_word(cells[check, b]) if (check, b) in cells else "" for b in backends]
        lines.append(f"| {_md(check)} | " + " | ".join(marks) + " |")
    if legend:
        lines += ["", LEGEND]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ HTML
CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1b1f24; }
h1.pass { color: #116329; } h1.fail { color: #a40e26; } h1.incomplete { color: #9a6700; }
table.window { border-collapse: collapse; margin: .4rem 0; font-family: monospace; }
table.window td, table.window th { border: 1px solid #d0d7de; padding: .1rem .35rem; }
table.window td.differs { background: #ffd8d3; font-weight: bold; }
table.window td.bytes { font-size: .85em; white-space: pre; }
.s-pass { color: #116329; } .s-declared { color: #0550ae; } .s-warn { color: #9a6700; }
.s-fail, .s-error { color: #a40e26; } .s-missing { color: #9a6700; } .s-skip, .s-info { color: #57606a; }
#summary span { font-weight: bold; margin-right: .8rem; }
table#grid { border-collapse: collapse; }
#grid th, #grid td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; }
#grid th[scope=col] { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }
#grid th[scope=row] { text-align: left; font-family: monospace; font-weight: normal; }
#grid td { text-align: center; font-size: .8em; font-weight: bold; }
td.pass { background: #dafbe1; } td.warn { background: #fff8c5; }
td.fail { background: #ffebe9; } td.error { background: #ffc1ba; }
td.missing { background: #fff1c2; } td.skip { background: #f6f8fa; }
td.pass[data-declared] { background: #ddf4ff; }
#findings li { margin-bottom: 0.5rem; } .fix { color: #57606a; }
code { font-family: monospace; }
"""


def _attrs(**attrs: str) -> str:
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())


def _cell(check: str, backend: str, cell: Sequence[Row] | None) -> str:
    if not cell:
        return f"<td{_attrs(class_='none', data_check=check, data_backend=backend)}></td>"
    top = worst(cell)
    declared = sum(r.declared for r in cell)
    title = f"{top.status}: {top.message}" + (f" ({declared} declared)" if declared else "")
    extra = {"data_declared": str(declared)} if declared and top.status == "pass" else {}
    attrs = _attrs(class_=top.status, data_check=check, data_backend=backend, title=title, **extra)
    return f"<td{attrs}>{cell_word(cell)}</td>"


def grid_html(rows: Sequence[Row]) -> str:
    checks, backends, cells = grid(rows)
    head = "".join(f'<th scope="col">{escape(b)}</th>' for b in backends)
    lines = ['<table id="grid">', f"<thead><tr><th>check</th>{head}</tr></thead>", "<tbody>"]
    for check in checks:
        tds = "".join(_cell(check, b, cells.get((check, b))) for b in backends)
        lines.append(f'<tr><th scope="row">{escape(check)}</th>{tds}</tr>')
    return "\n".join(lines + ["</tbody>", "</table>"])


def window_html(window: dict | None) -> str:
    """The probe and its text, then the first difference as aligned rows: reference ids, their
    bytes, backend ids, their bytes; differing ids marked (bytes in view, and on hover)."""
    if not window:
        return ""
    parts = []
    if "text" in window:
        probe = f"probe <code>{escape(str(window['probe']))}</code>, " if window.get("probe") else ""
        where = f" (from char {escape(str(window['offset']))})" if "offset" in window else ""
        parts.append(f'<p class="probe">{probe}text{where}: <code>{escape(str(window["text"]))}</code></p>')
    if "position" not in window:
        return "".join(parts)
    ref, got = window.get("reference") or [], window.get("backend") or []

    def cells(side: list, other: list, *, shown: bool) -> str:
        out = []
        for k, (token_id, text) in enumerate(side):
            cls = "same" if k < len(other) and other[k][0] == token_id else "differs"
            if shown:
                out.append(f'<td class="{cls} bytes">{escape(str(text))}</td>')
            else:
                out.append(f'<td class="{cls}" title="{escape(str(text))}">{escape(str(token_id))}</td>')
        return "".join(out)

    lengths = f"lengths: reference {window.get('reference_len')}, backend {window.get('backend_len')}"
    parts.append(
        f'<table class="window" data-position="{escape(str(window.get("position")))}">'
        f"<caption>first difference at id position {escape(str(window.get('position')))} "
        f"({escape(lengths)})</caption>"
        f"<tr><th>reference id</th>{cells(ref, got, shown=False)}</tr>"
        f"<tr><th>reference bytes</th>{cells(ref, got, shown=True)}</tr>"
        f"<tr><th>backend id</th>{cells(got, ref, shown=False)}</tr>"
        f"<tr><th>backend bytes</th>{cells(got, ref, shown=True)}</tr></table>"
    )
    return "".join(parts)


def summary_html(rows: Sequence[Row]) -> str:
    """Rows per status word, worst first, each coloured by its status."""
    spans = "".join(f'<span class="s-{w.lower()}">{n} {w}</span>' for w, n in counts(rows).items())
    return f'<p id="summary">{spans or "no rows"}</p>'


def findings_html(rows: Sequence[Row]) -> str:
    """Every row that did not pass, error, fail and missing first, with its message and fix."""
    items = []
    for r in failures_first(rows):
        if r.status == "pass":
            continue
        fix = f'<div class="fix">{escape(fix_text(r))}</div>' if r.fix else ""
        window = window_html(r.window) if r.status == "fail" else ""
        items.append(
            f'<li class="{r.status}"><strong class="s-{r.status}">{status_word(r)}</strong> '
            f"<code>{escape(r.check)}</code> [{escape(r.backend)}]: {escape(r.message)}{fix}{window}</li>"
        )
    body = "\n".join(items) if items else "<li>none: every row passed</li>"
    return f'<section id="findings">\n<h2>Findings</h2>\n<ol>\n{body}\n</ol>\n</section>'


def to_html(rows: Sequence[Row], *, verdict: str, versions: dict[str, str], directory: str) -> str:
    """One self-contained, deterministic HTML page: verdict, what was checked (``directory``: the
    path, or ``org/name@revision (commit ...)`` for a Hub id), grid, findings."""
    first = verdict.split(" ", 1)[0].lower()
    word = first if first in ("pass", "fail", "incomplete") else "fail"
    shown = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v) or "none reported"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>stacktok gate: {escape(verdict)}</title>",
        f"<style>{CSS}</style></head>",
        "<body>",
        f'<h1 class="{word}">Tokenizer release gate: {escape(verdict)}</h1>',
        f'<p>Checked: <code id="directory">{escape(directory)}</code></p>',
        f'<p id="versions">Backends: {escape(shown)}</p>',
        summary_html(rows),
        grid_html(rows),
        f'<p id="legend">{escape(LEGEND)}</p>',
        findings_html(rows),
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"

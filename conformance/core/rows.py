"""The verdict pipeline's one row model and one exit-code rule.

Every tool that judges a directory -- ``stacktok gate``, ``python -m
conformance``, ``stacktok fuzz`` and the served path -- turns what it found
into :class:`Row` values and decides its exit code with :func:`exit_code`, so a
finding cannot be computed in one place and lost on the way to another.

A row is one check of one subject (``files`` for the directory's files, else a
backend name). Its status is one of :data:`STATUSES`:

- ``pass``: checked and conforms (``declared`` counts differences covered by a
  cited declaration in ``fixtures/divergences.jsonl``);
- ``fail``: checked and does not conform -- the message says where, ``fix`` how;
- ``warn``: conforms in behaviour but differs in form, or the library offers no
  safe path (the message says what to do instead);
- ``skip``: not applicable, with the reason (never a silent pass);
- ``missing``: the backend or library is not installed (the fix installs it);
- ``error``: the backend could not load the directory (the library's own message);
- ``info``: a measurement reported for the reader that never changes the verdict (the audit's
  self-reachability on a source that encodes with ``ignore_merges``, counts).

Exit codes (:func:`exit_code`), the same for every command:

- 0 ``PASS``: every row passes, warns, is informative or not applicable -- and every backend that
  reads a file present in the directory ran (a backend the user excluded by name, ``--skip`` or
  ``--backends``, is named in the report and does not count);
- 1 ``FAIL``: any ``fail`` or ``error`` row (a failure outranks an incomplete run);
- 2 usage error or malformed input (decided before any check runs);
- 3 an internal error of stacktok itself (never 0 or 1, which carry the verdict);
- 4 ``INCOMPLETE``: nothing failed, but something that reads these files did not run -- a
  ``missing`` row (library not installed), or a ``--require``d backend that cannot run (decided
  before any check runs, :func:`required_not_run` after). A release engineer never ships on it.

Out of scope: rendering (``conformance.gate`` / ``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

STATUSES = ("pass", "fail", "warn", "skip", "missing", "error", "info")
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4
#: the verdict word of each exit code that carries a verdict
VERDICTS = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_INCOMPLETE: "INCOMPLETE"}
FILES = "files"


@dataclass(frozen=True)
class Row:
    check: str  # e.g. "config.no_double_bos", "conformance.encode"
    backend: str  # FILES for static checks, else a backend name
    status: str  # one of STATUSES
    message: str
    fix: str = ""
    declared: int = 0  # differences covered by a declared divergence (status stays "pass")
    #: for a failing conformance row: the first difference (``checks.windows.first_window``: the
    #: probe id, its text shortened around the difference, position, three ids either side with
    #: their bytes from the reference and the backend); text-only (probe, text) where no id differs
    window: dict | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"row {self.check}[{self.backend}]: unknown status {self.status!r}")

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def row(check: str, ok: bool, message: str, fix: str, *, backend: str = FILES, warn: bool = False) -> Row:
    """A pass row (message "ok") or a fail/warn row with ``message`` and ``fix``."""
    if ok:
        return Row(check, backend, "pass", "ok")
    return Row(check, backend, "warn" if warn else "fail", message, fix)


def skip(check: str, why: str, *, backend: str = FILES) -> Row:
    """A check that did not run, saying why ("not checked: ..."): never a silent pass."""
    return Row(check, backend, "skip", f"not checked: {why}")


def failed(rows: Iterable[Row]) -> bool:
    return any(r.status in ("fail", "error") for r in rows)


def incomplete(rows: Iterable[Row]) -> bool:
    """Whether a check did not run for want of a library (a ``missing`` row)."""
    return any(r.status == "missing" for r in rows)


def exit_code(rows: Sequence[Row], *, required_missing: Sequence[str] = ()) -> int:
    """1 a failing or error row; else 4 a ``missing`` row or a required backend that did not run; else 0."""
    if failed(rows):
        return EXIT_FAIL
    if required_missing or incomplete(rows):
        return EXIT_INCOMPLETE
    return EXIT_PASS


def required_not_run(rows: Sequence[Row], *, required: Sequence[str], served: bool = False) -> list[str]:
    """The required backends whose ``conformance`` row is missing or skipped (``vllm-server`` too
    when the served path was asked for and did not run): each makes the run INCOMPLETE."""
    absent = {r.backend for r in rows if r.check == "conformance" and r.status in ("missing", "skip")}
    out = [name for name in required if name in absent]
    if served and any(r.check == "served" and r.status in ("missing", "skip") for r in rows):
        out.append("vllm-server")  # --serve-vllm asks for it explicitly
    return out


def excluded_by_name(rows: Sequence[Row], excluded: Iterable[str]) -> list[Row]:
    """Rows of a backend the user excluded by name (``--skip``/``--backends``) that could not run
    for want of its library become ``skip`` rows that say so: an exclusion is a decision, not a gap."""
    names = set(excluded)
    return [
        Row(r.check, r.backend, "skip", f"not checked: {r.backend} excluded by --skip/--backends")
        if r.status == "missing" and r.backend in names
        else r
        for r in rows
    ]


def not_checked(rows: Sequence[Row]) -> list[str]:
    """Backends that should have run and did not (library missing, or it refused the directory),
    with why, for the verdict: what keeps PASS away."""
    out: dict[str, str] = {}
    for r in rows:
        if r.backend == FILES or r.backend in out:
            continue
        if r.status in ("missing", "error"):
            out[r.backend] = "not installed" if r.status == "missing" else "cannot load the directory"
    return [f"{name} ({why})" for name, why in out.items()]


def not_applicable(rows: Sequence[Row]) -> list[str]:
    """Backends with nothing to read here (no ``.gguf`` for llama.cpp) or excluded by name, with why:
    named in the verdict, and no reason to withhold PASS."""
    out: dict[str, str] = {}
    for r in rows:
        if r.status == "skip" and r.check == "conformance" and r.backend not in out:
            out[r.backend] = r.message.removeprefix("not checked: ").split(";")[0]
    return [f"{name} ({why})" for name, why in out.items()]


def verdict_line(rows: Sequence[Row], code: int) -> str:
    """``PASS``, ``FAIL`` or ``INCOMPLETE``, naming what was not checked and what did not apply."""
    parts = []
    if skipped := not_checked(rows):
        parts.append(f"not checked: {', '.join(skipped)}")
    if idle := not_applicable(rows):
        parts.append(f"not applicable: {', '.join(idle)}")
    word = VERDICTS[code]
    return f"{word} — {'; '.join(parts)}" if parts else word

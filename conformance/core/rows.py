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

Exit codes (:func:`exit_code`): 0 every row passes, warns or is not applicable;
1 any ``fail`` or ``error``; 2 usage error, malformed input or a required
backend missing (decided before or beside the rows); 3 an internal error of
stacktok itself (never 0 or 1, which carry the verdict).

Out of scope: rendering (``conformance.gate`` / ``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

STATUSES = ("pass", "fail", "warn", "skip", "missing", "error", "info")
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
FILES = "files"


@dataclass(frozen=True)
class Row:
    check: str  # e.g. "config.no_double_bos", "conformance.encode"
    backend: str  # FILES for static checks, else a backend name
    status: str  # one of STATUSES
    message: str
    fix: str = ""
    declared: int = 0  # differences covered by a declared divergence (status stays "pass")
    #: for a failing conformance row: the first difference (``runner.first_window``: position,
    #: three ids either side with their bytes, from the reference and the backend)
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


def exit_code(rows: Sequence[Row], *, required_missing: Sequence[str] = ()) -> int:
    """0 conforms, 1 a failing or error row, 2 a required backend missing."""
    if required_missing:
        return EXIT_USAGE
    return EXIT_FAIL if failed(rows) else EXIT_PASS


def not_checked(rows: Sequence[Row]) -> list[str]:
    """Backends that never ran (missing, error, no export file for them), with why, for the verdict."""
    out: dict[str, str] = {}
    for r in rows:
        if r.backend == FILES or r.backend in out:
            continue
        if r.status in ("missing", "error"):
            out[r.backend] = "not installed" if r.status == "missing" else "cannot load the directory"
        elif r.status == "skip" and r.check == "conformance":
            out[r.backend] = r.message.removeprefix("not checked: ").split(";")[0]
    return [f"{name} ({why})" for name, why in out.items()]


def verdict_line(rows: Sequence[Row], code: int) -> str:
    """``PASS``, ``FAIL`` or ``FAIL (required backend missing)``, naming what was not checked."""
    word = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_USAGE: "FAIL (required backend missing)"}[code]
    skipped = not_checked(rows)
    return f"{word} — not checked: {', '.join(skipped)}" if skipped else word

"""The one gate runner: ``stacktok gate DIR ...`` through the real entry point, and what failed.

:func:`run_gate` calls ``stacktok_cli.main(["gate", ...])`` in-process (``process=True``: in a
child ``python -m stacktok_cli``, for what only a real process shows, such as import-time noise)
and returns a :class:`GateRun`: the exit code exactly as the command returned it (0, 1, 2, 3,
4 = INCOMPLETE, ...; never mapped), stdout, stderr and, when ``report=`` names a path, the parsed
JSON report -- validated against the report's JSON Schema (``conformance/report/schema.json``,
:func:`check_report`), so every gate report a test produces follows the schema it ships.
:func:`failing` is the one reading of "failed": the rows
``conformance.core.rows.failed`` counts (``fail`` and ``error``), keyed ``check[backend]``.

Out of scope: building the directory (:mod:`tests.helpers.checkpoint`), writing the probe and chat
files (:mod:`tests.helpers.data`); other commands (they have their own tests).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conformance.core.rows import failed
from conformance.report.json import schema

from .data import GateData
from .paths import ROOT


@dataclass(frozen=True)
class GateRun:
    """One ``stacktok gate`` run: its exit code, output, and the JSON report if one was asked for."""

    code: int
    stdout: str
    stderr: str
    report: dict | None


def gate_argv(
    directory: Path,
    *extra: str,
    data: GateData | None = None,
    backends: str | None = None,
    quiet: bool = True,
    report: Path | None = None,
) -> list[str]:
    """The argv after ``stacktok``: ``gate DIR`` with the user data only, if ``data`` is given."""
    argv = ["gate", str(directory)]
    if data is not None:
        argv += ["--only-user-data", "--probes", str(data.probes)]
        argv += ["--chats", str(data.chats)] if data.chats is not None else []
    argv += ["--quiet"] if quiet else []
    argv += ["--backends", backends] if backends is not None else []
    argv += ["--json", str(report)] if report is not None else []
    return [*argv, *extra]


def run_gate(
    directory: Path,
    *extra: str,
    data: GateData | None = None,
    backends: str | None = None,
    quiet: bool = True,
    report: Path | bool | None = None,
    capture: pytest.CaptureFixture[str] | None = None,
    process: bool = False,
) -> GateRun:
    """Run the gate on ``directory``; ``extra`` is appended to the argv as given.

    ``report`` is where the JSON report goes (``True``: a fresh file under ``data.out``). Output is
    read from ``capture`` (a test's ``capsys`` / ``capfd``) when given, else from the redirected
    ``sys.stdout`` / ``sys.stderr``; ``process=True`` runs a child process instead.
    """
    if report is True:
        if data is None:
            raise TypeError("report=True writes under data.out: pass data= or a report path")
        report = Path(tempfile.mkdtemp(prefix="report-", dir=data.out)) / "report.json"
    report = report or None
    argv = gate_argv(directory, *extra, data=data, backends=backends, quiet=quiet, report=report)
    if process:
        cmd = [sys.executable, "-m", "stacktok_cli", *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        code, out, err = _in_process(argv, capture)
    parsed = (
        json.loads(report.read_text(encoding="utf-8")) if report is not None and report.exists() else None
    )
    if parsed is not None:
        check_report(parsed, where=report)
    return GateRun(code, out, err, parsed)


def check_report(doc: Any, *, where: Path | str = "report") -> None:
    """Fail the test when ``doc`` does not follow the shipped report schema (the first error, with
    its JSON path)."""
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top)"
        pytest.fail(f"{where}: {at}: {error.message} (conformance/report/schema.json)", pytrace=False)


def _in_process(argv: list[str], capture: pytest.CaptureFixture[str] | None) -> tuple[int, str, str]:
    import stacktok_cli

    if capture is not None:
        capture.readouterr()  # drop what the test printed before
        code = stacktok_cli.main(argv)
        out, err = capture.readouterr()
        return code, out, err
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        code = stacktok_cli.main(argv)
    return code, out_buf.getvalue(), err_buf.getvalue()


@dataclass(frozen=True)
class _Status:
    status: str


def failing(rows: Mapping[str, Any] | Iterable[Any]) -> dict[str, dict]:
    """The rows that fail the gate (``fail`` and ``error``, as ``rows.failed`` counts), by ``check[backend]``.

    ``rows`` is a JSON report (its ``checks``), or rows as dicts or :class:`~conformance.core.rows.Row`.
    """
    items = rows["checks"] if isinstance(rows, Mapping) else rows
    out: dict[str, dict] = {}
    for r in items:
        r = r if isinstance(r, Mapping) else dataclasses.asdict(r)
        if failed([_Status(r["status"])]):
            out[f"{r['check']}[{r['backend']}]"] = dict(r)
    return out

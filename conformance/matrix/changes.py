"""The change report: new support-matrix rows against the committed ones, as a verdict per backend.

    python -m conformance.matrix.changes ROWS.jsonl... [--baseline conformance/support_matrix.jsonl]
                                         [--update] [--floor RESULT.json]

Each ``ROWS.jsonl`` is what ``python -m conformance --matrix`` wrote for one matrix slot
(the file name's stem, e.g. ``transformers-latest`` or ``transformers-5.25.0``). Each row
is compared with the committed row of the same slot and backend, else the same backend and
version, else the backend's ``-latest`` slot, and the report names per backend: newly
failing checks with the first differing probe, newly passing checks, a changed no-flags
default (``fixtures/defaults.json``), stale declarations, failures that need a declaration
or a fix, and which deciding packages changed version.

Exit 0: every row conforms; 1: a row does not conform (``REGRESSION`` when it conformed in
the committed rows or has none); 2: unreadable input. ``--update`` accepts the new state:
the rows replace their slots in ``conformance/support_matrix.jsonl``, then
``SUPPORT_MATRIX.md`` and the README's matrix are rendered from it (exit 0).

Out of scope: running backends (``python -m conformance``), choosing versions
(``conformance.matrix.versions``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.report.entry import run_main
from conformance.report.matrix import result_conforms, support_matrix

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "conformance" / "support_matrix.jsonl"
FLOORS_NAME = "floors.json"  # beside the baseline: package -> oldest conforming release (nox -s floor)
DEFAULTS = ROOT / "fixtures" / "defaults.json"
REFERENCE = "reference"
PROG = "conformance.matrix.changes"
Row = dict[str, Any]


class RowsError(ValueError):
    """A rows file that cannot be read; the message names the file, line and fix."""


def load_rows(path: Path, *, slot: str | None = None) -> list[Row]:
    """Rows of a JSONL file (the reference's row left out); ``slot`` defaults to the file's stem."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RowsError(f"{path}: cannot read ({exc.strerror}); run `nox -s conformance` first") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RowsError(
                f"{path}:{n}: not JSON ({exc.msg}); rewrite it with python -m conformance"
            ) from None
        if not isinstance(row, dict) or not {"backend", "version", "result"} <= row.keys():
            raise RowsError(f"{path}:{n}: a row needs backend, version and result; rewrite it")
        if row["backend"] != REFERENCE:
            rows.append({**row, "slot": row.get("slot") or slot or path.stem})
    return rows


def conforms(row: Row) -> bool:
    """The row's result conforms and it names no stale declaration."""
    return result_conforms(row["result"]) and not row.get("stale")


def counterpart(row: Row, baseline: Sequence[Row]) -> Row | None:
    """The committed row this one is judged against (same slot, same version, the latest slot)."""
    same = [b for b in baseline if b["backend"] == row["backend"]]
    package = str(row["slot"]).rsplit("-", 1)[0]
    for pick in (
        lambda b: b["slot"] == row["slot"],
        lambda b: b["version"] == row["version"],
        lambda b: b["slot"] == f"{package}-latest",
        lambda b: True,  # any committed row of the backend (e.g. llama.cpp's one pinned slot)
    ):
        found = [b for b in same if pick(b)]
        if found:
            return found[0]
    return None


def _failing(row: Row) -> set[str]:
    return {c for c, counts in row.get("checks", {}).items() if counts.get("fail")}


def describe(row: Row, base: Row | None, *, defaults: dict[str, str]) -> list[str]:
    """The report lines for one row: its verdict, then each change against ``base``."""
    name = f"{row['backend']} {row['version']} [{row['slot']}]"
    against = f"committed {base['version']}" if base else "no committed row"
    if conforms(row):
        verdict = "conforms" if base is None or conforms(base) else "FIXED (did not conform)"
    else:
        verdict = "REGRESSION" if base is None or conforms(base) else "still does not conform (as committed)"
    why = f": {row['reason']}" if row.get("reason") else ""
    out = [f"{name} vs {against}: {verdict} -- {row['result']}{why}"]
    first = row.get("first_failure", {})
    if not conforms(row):
        pins = [f"{k} {v}" for k, v in sorted(row.get("env", {}).items()) if k.endswith(" requires")]
        if pins:
            out.append(f"    on CPU torch {row['env'].get('torch', '?')}: {'; '.join(pins)}")
    before = _failing(base) if base else set()
    new_fail = sorted(_failing(row) - before)
    if new_fail:
        out.append(
            "    newly failing: "
            + ", ".join(f"{c} (first differing probe {first.get(c, '?')})" for c in new_fail)
        )
    if base:
        fixed = sorted(before - _failing(row))
        if fixed:
            out.append(f"    newly passing: {', '.join(fixed)}")
    expected = defaults.get(row["backend"])
    was = base.get("default") if base else None
    now = row.get("default")
    if now and ((was and now != was) or (expected and now != expected)):
        out.append(
            f"    no-flags default changed: {was or expected} -> {now} (fixtures/defaults.json: {expected})"
        )
    stale = sorted(set(row.get("stale", [])) - set(base.get("stale", []) if base else []))
    if stale:
        out.append(
            f"    stale declarations (remove or narrow in fixtures/divergences.jsonl): {', '.join(stale)}"
        )
    if first:
        needed = ", ".join(f"{c}: {p}" for c, p in sorted(first.items()))
        out.append(f"    needs a declaration in fixtures/divergences.jsonl or a fix: {needed}")
    if base:
        old_env, new_env = base.get("env", {}), row.get("env", {})
        keys = sorted(set(old_env) | set(new_env))
        moved = [
            f"{k} {old_env.get(k, '-')} -> {new_env.get(k, '-')}"
            for k in keys
            if old_env.get(k) != new_env.get(k)
        ]
        if moved:
            out.append(f"    versions: {'; '.join(moved)}")
    return out


def report(rows: Sequence[Row], baseline: Sequence[Row], *, defaults: dict[str, str]) -> tuple[str, int]:
    """(the report text, exit code 0 all conform / 1 any row does not)."""
    lines = [f"change report against {len(baseline)} committed rows ({BASELINE.name})"]
    for row in rows:
        lines += describe(row, counterpart(row, baseline), defaults=defaults)
    code = 0 if all(conforms(r) for r in rows) else 1
    return "\n".join(lines) + "\n", code


def merge(baseline: Sequence[Row], rows: Sequence[Row]) -> list[Row]:
    """The committed rows with each new row's slot replaced, sorted (deterministic output)."""
    slots = {r["slot"] for r in rows}
    kept = [b for b in baseline if b["slot"] not in slots]
    return sorted([*kept, *rows], key=lambda r: (r["backend"], _version_key(r["version"]), r["slot"]))


def _version_key(version: str) -> tuple:
    return tuple(
        (0, int(p), "") if p.isdigit() else (1, 0, p) for p in str(version).replace("+", ".").split(".")
    )


def render(rows: Sequence[Row], floors: dict[str, dict[str, Any]]) -> str:
    """The Markdown matrix, then the bisected floors when ``nox -s floor`` has recorded any."""
    table = support_matrix(rows)
    if floors:
        found = ", ".join(
            f"{p} {f['floor'] or 'none found'} ({len(f['tried'])} releases tried since {f['since']})"
            for p, f in sorted(floors.items())
        )
        table += (
            "\nFloors bisected over released versions (`nox -s floor`; the oldest release that conforms, "
            f"assuming every newer one does too): {found}.\n"
        )
    return table


def load_floors(baseline: Path = BASELINE) -> dict[str, dict[str, Any]]:
    path = baseline.with_name(FLOORS_NAME)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_matrix(
    rows: Sequence[Row], *, baseline: Path = BASELINE, readme: Path = ROOT / "README.md"
) -> None:
    """support_matrix.jsonl, SUPPORT_MATRIX.md beside it, and the README's marked block, atomically."""
    from stacktok_export.util.atomic import write_text_atomic

    lines = [json.dumps(r, sort_keys=True, ensure_ascii=True) + "\n" for r in rows]
    write_text_atomic(baseline, "".join(lines))
    table = render(rows, load_floors(baseline))
    write_text_atomic(baseline.with_name("SUPPORT_MATRIX.md"), table)
    start, end = "<!-- support-matrix -->\n", "<!-- /support-matrix -->"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    if start in text and end in text:
        head, rest = text.split(start, 1)
        write_text_atomic(readme, head + start + table + end + rest.split(end, 1)[1])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    p.add_argument("rows", nargs="*", type=Path, help="JSONL rows from python -m conformance --matrix")
    p.add_argument("--baseline", type=Path, default=BASELINE)
    p.add_argument("--update", action="store_true", help="accept the rows into the baseline and the matrix")
    p.add_argument("--floor", type=Path, default=None, help="a bisection result (nox -s floor) to record")
    args = p.parse_args(argv)
    try:
        baseline = load_rows(args.baseline) if args.baseline.exists() else []
        rows = [r for path in args.rows for r in load_rows(path)]
        defaults = json.loads(DEFAULTS.read_text(encoding="utf-8"))
    except (RowsError, json.JSONDecodeError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    readme = args.baseline.parent.parent / "README.md"
    if args.floor:
        return record_floor(args.floor, baseline=args.baseline, rows=baseline, readme=readme)
    text, code = report(rows, baseline, defaults=defaults)
    print(text, end="")
    if args.update:
        write_matrix(merge(baseline, rows), baseline=args.baseline, readme=readme)
        print(f"accepted {len(rows)} row(s) into {args.baseline} and SUPPORT_MATRIX.md")
        return 0
    return code


def record_floor(result: Path, *, baseline: Path, rows: Sequence[Row], readme: Path) -> int:
    """Add one ``{"package", "floor", "since", "tried"}`` result to floors.json and re-render."""
    from stacktok_export.util.atomic import write_text_atomic

    found = json.loads(result.read_text(encoding="utf-8"))
    floors = {**load_floors(baseline), found["package"]: {k: found[k] for k in ("floor", "since", "tried")}}
    write_text_atomic(baseline.with_name(FLOORS_NAME), json.dumps(floors, indent=2, sort_keys=True) + "\n")
    write_matrix(rows, baseline=baseline, readme=readme)
    print(f"{found['package']}: oldest conforming release {found['floor']}; recorded in {FLOORS_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=PROG))

"""The house's shape, checked: the README's layout section is the tree, modules stay small,
and the layering contracts (import-linter, ``pyproject.toml``) hold.

Out of scope: style (ruff, ``nox -s lint``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("stacktok", "stacktok_cli", "stacktok_export", "conformance")
TOP_FOLDERS = ("fixtures", "tokenizer", "tests", "benchmarks", "scripts")
#: modules allowed past 500 lines, each saying why in its docstring
LONG_OK: set[str] = set()
MAX_LINES = 500


def _layout_section() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    return [line.split()[0].rstrip("/") for line in block.strip().splitlines()]


def _folders() -> list[str]:
    found = [d for d in TOP_FOLDERS if (ROOT / d).is_dir()]
    for top in (*PACKAGES, "tests"):
        for init in sorted((ROOT / top).rglob("__init__.py")):
            folder = init.parent.relative_to(ROOT).as_posix()
            if folder not in found and "__pycache__" not in folder:
                found.append(folder)
    if (ROOT / "stacktok_export" / "data").is_dir():
        found.append("stacktok_export/data")
    return found


def test_readme_layout_lists_every_folder_once() -> None:
    listed = _layout_section()
    assert len(listed) == len(set(listed)), "a folder is listed twice in the README's layout section"
    assert sorted(set(listed)) == sorted(set(_folders())), "README ## Layout and the tree differ"


def test_no_module_over_500_lines() -> None:
    long = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES and rel not in LONG_OK:
                long[rel] = n
    assert not long, f"split these modules (one idea per file, at most {MAX_LINES} lines): {long}"
    for rel in LONG_OK:
        doc = (ROOT / rel).read_text(encoding="utf-8").split('"""')[1]
        assert re.search(r"500 lines", doc), f"{rel} must say in its docstring why it runs past 500 lines"


def test_layering_contracts_hold() -> None:
    """``lint-imports`` over pyproject.toml's contracts: the floor imports nothing above it, the core
    nothing above the core, adapters never the tools, no cycles between subpackages."""
    exe = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout

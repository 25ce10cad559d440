"""The house's shape, checked: the README's layout section is the tree, modules stay small,
no import circle (every ``import`` statement counted), and the layering contracts
(import-linter, ``pyproject.toml``) hold.

Out of scope: style (ruff, ``nox -s lint``).
"""

from __future__ import annotations

import ast
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


# ---------------------------------------------------------------- import circles
#: the packages whose import graph must have no circle
ACYCLIC = ("stacktok_export", "conformance", "stacktok_cli")


def _modules(tops: tuple[str, ...]) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) of every module under ``tops``."""
    found = {}
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            is_pkg = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return found


def import_graph(tops: tuple[str, ...] = ACYCLIC) -> dict[str, set[str]]:
    """Module -> the modules it imports, from every ``import`` / ``from ... import`` anywhere in
    the file (module level, functions, ``TYPE_CHECKING``), relative ones resolved. ``from P import
    name`` is an edge to ``P.name`` when that is a module, else to ``P``; a name outside ``tops``
    is no edge."""
    mods = _modules(tops)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_counting_every_import() -> None:
    """No circle among the modules of the floor, the suite and the command line, counting
    ``TYPE_CHECKING`` and function-level imports too: they hide a coupling from import-linter
    (``exclude_type_checking_imports = false`` keeps the contracts as strict), not remove it."""
    found = circles(import_graph())
    assert not found, (
        "import circles (break each with a protocol, data passed down, or a move): "
        + "; ".join(" <-> ".join(c) for c in found)
    )

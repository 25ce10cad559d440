"""pyproject.toml admits only what was measured (issue 22 item 6): lower bounds are the bisected
floors (conformance/floors.json), no release the floors or the support matrix found failing is
admitted, and llama-cpp-python is bounded to the releases the matrix covers.

Out of scope: measuring (``nox -s floor``, ``nox -s conformance``); each extra installed alone
(``nox -s extras`` builds one venv per extra and runs the gate).
"""

from __future__ import annotations

import json

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from conformance.matrix.versions import PACKAGES
from conformance.report.matrix import result_conforms

from .helpers.paths import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
FLOORS = json.loads((ROOT / "conformance" / "floors.json").read_text(encoding="utf-8"))
MATRIX = [
    json.loads(line)
    for line in (ROOT / "conformance" / "support_matrix.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
#: conformance backend -> the distribution whose release a matrix row measured
BACKEND_PACKAGE = {b: p for p, backends in PACKAGES.items() for b in backends.split(",")}


def requirements(package: str) -> list[tuple[str, Requirement]]:
    """Every ``(where, requirement)`` of ``package`` in the core dependencies and the extras."""
    found = [("dependencies", Requirement(r)) for r in PROJECT["dependencies"]]
    for extra, reqs in PROJECT["optional-dependencies"].items():
        found += [(f"[{extra}]", Requirement(r)) for r in reqs]
    return [(where, r) for where, r in found if r.name == package]


def lower_bound(req: Requirement) -> Version | None:
    lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
    return max(lows) if lows else None


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_lower_bounds_are_the_bisected_floors(package: str) -> None:
    floor = FLOORS[package]["floor"]
    reqs = requirements(package)
    assert reqs, f"{package} has a floor in conformance/floors.json but no requirement in pyproject.toml"
    for where, req in reqs:
        assert lower_bound(req) == Version(floor), f"{where} {req}: the lower bound must be the floor {floor}"


def failing_releases() -> list[tuple[str, str, str]]:
    """``(package, version, why)`` for every release the floors or the matrix found not conforming."""
    bad = [
        (p, v, "floors.json: does not conform")
        for p, f in FLOORS.items()
        for v, ok in f["tried"].items()
        if not ok
    ]
    bad += [
        (BACKEND_PACKAGE[r["backend"]], r["version"], f"support_matrix.jsonl: {r['backend']} {r['result']}")
        for r in MATRIX
        if r["backend"] in BACKEND_PACKAGE and not result_conforms(r["result"])
    ]
    return bad


def test_no_failing_release_is_admitted() -> None:
    admitted = [
        f"{where} {req} admits {package} {version} ({why})"
        for package, version, why in failing_releases()
        for where, req in requirements(package)
        if req.specifier.contains(version, prereleases=True)
    ]
    assert not admitted, "; ".join(admitted)
    assert failing_releases(), "floors.json records failing releases; none were read"


def test_llama_cpp_python_is_bounded_to_the_matrix() -> None:
    measured = sorted(
        {Version(r["version"]) for r in MATRIX if BACKEND_PACKAGE.get(r["backend"]) == "llama-cpp-python"}
    )
    assert measured, "support_matrix.jsonl has no llama.cpp row"
    for where, req in requirements("llama-cpp-python"):
        assert lower_bound(req) == measured[0], f"{where} {req}: the lower bound must be {measured[0]}"
        uppers = [Version(s.version) for s in req.specifier if s.operator in ("<", "<=", "==")]
        assert uppers, f"{where} {req}: needs an upper bound (the matrix covers {measured[-1]} at most)"
        top = measured[-1]
        next_patch, next_minor = f"{top.major}.{top.minor}.{top.micro + 1}", f"{top.major}.{top.minor + 1}"
        unmeasured = (Version(next_patch), Version(next_minor))
        for v in unmeasured:  # the next patch release too: llama.cpp's tokenizer changes in patch releases
            assert not req.specifier.contains(v), f"{where} {req} admits {v}, which the matrix never measured"
        for v in measured:
            assert req.specifier.contains(v), f"{where} {req} excludes {v}, which the matrix covers"


def test_completion_works_from_a_plain_install() -> None:
    assert requirements("shtab") and requirements("shtab")[0][0] == "dependencies"

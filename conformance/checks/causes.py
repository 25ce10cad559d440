"""Causes: a failing backend row explained by the other rows, its generic fix replaced by the real one.

A behaviour row fails with a fix that can only guess ("re-export ... or declare"); often another
finding of the same run already knows why. :func:`explain` looks, for each failing or error
``conformance*`` row of a backend, for

- a failing ``surface.*`` row over the file that backend reads (:data:`SURFACE_OF`, by
  ``conformance.backends.READS``): the file itself differs from the artifact (two vocab ids
  swapped, a changed token) -> ``cause: <that row's message>; fix: <its fix>``;
- the backend's library below the support matrix's floor (``conformance/floors.json``, written
  by ``nox -s floor``: the oldest release that conforms) -> ``cause: tiktoken 0.12.0 is below
  ...; fix: upgrade tiktoken to >= 0.13.0 ...``.

Both may apply; each becomes one ``cause: ...; fix: ...`` clause. Rows no finding explains,
and every other row, come back unchanged, in the same order.

    >>> from conformance.core.rows import Row
    >>> rows = [Row("conformance.encode", "tiktoken", "fail", "1 failing", "re-export")]
    >>> floors = {"tiktoken": {"floor": "0.13.0"}}
    >>> explain(rows, versions={"tiktoken": "0.12.0"}, floors=floors)[0].fix.split("; fix: ")[1]
    "upgrade tiktoken to >= 0.13.0 (pip install 'tiktoken>=0.13.0')"

Out of scope: finding the differences (``conformance.static.surface``, ``conformance.checks.compare``),
deciding the verdict (a cause never changes a status), rendering (``conformance.report``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from conformance.backends import BACKENDS, READS
from conformance.core.rows import FILES, Row

#: package -> {"floor": oldest conforming release, ...}, beside the support matrix
FLOORS = Path(__file__).resolve().parents[1] / "floors.json"
#: the export file a backend reads -> the surface rows that compare that file with the artifact
SURFACE_OF = {
    "tokenizer.json": (
        "surface.tokenizer_json",
        "surface.tokenizer_config",
        "surface.special_tokens_map",
        "surface.added_tokens_json",
    ),
    ".gguf": ("surface.gguf_tokens", "surface.gguf_keys"),
    ".tiktoken": ("surface.tiktoken",),
}


def load_floors(path: Path = FLOORS) -> dict[str, dict[str, Any]]:
    """The recorded floors (empty when none are recorded or the file is unreadable)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def explain(
    rows: Sequence[Row],
    *,
    versions: Mapping[str, str],
    floors: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Row]:
    """``rows`` with each explainable failing backend row's fix replaced by its causes (pure:
    new rows, same order; ``versions`` is backend name -> its library's version; ``floors``
    defaults to :data:`FLOORS`)."""
    floors = load_floors() if floors is None else floors
    surface: dict[str, Row] = {}
    for r in rows:
        if r.backend == FILES and r.status == "fail" and r.check.startswith("surface."):
            surface.setdefault(r.check, r)
    out = []
    for r in rows:
        causes = _causes(r, surface, versions, floors) if _explainable(r) else []
        out.append(replace(r, fix="; ".join(f"cause: {c}; fix: {f}" for c, f in causes)) if causes else r)
    return out


def _explainable(r: Row) -> bool:
    return r.backend != FILES and r.status in ("fail", "error") and r.check.split(".")[0] == "conformance"


def _causes(
    r: Row, surface: Mapping[str, Row], versions: Mapping[str, str], floors: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, str]]:
    out = [(s.message, s.fix) for c in SURFACE_OF.get(READS.get(r.backend, ""), ()) if (s := surface.get(c))]
    below = _below_floor(r.backend, versions.get(r.backend, ""), floors)
    return out[:1] + ([below] if below else [])


def _below_floor(
    backend: str, version: str, floors: Mapping[str, Mapping[str, Any]]
) -> tuple[str, str] | None:
    """(cause, fix) when ``backend``'s library is older than its recorded floor, else None."""
    from packaging.version import InvalidVersion, Version

    entry = BACKENDS.get(backend)
    package = entry.needs[0] if entry and entry.needs else ""
    floor = (floors.get(package) or {}).get("floor")
    if not floor or not version:
        return None
    try:
        if Version(version) >= Version(str(floor)):
            return None
    except InvalidVersion:
        return None
    return (
        f"{package} {version} is below the support matrix's floor {floor} (conformance/floors.json: "
        f"the oldest {package} release that conforms)",
        f"upgrade {package} to >= {floor} (pip install '{package}>={floor}')",
    )

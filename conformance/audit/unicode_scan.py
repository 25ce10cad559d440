"""Scanning every code point for pre-tokenizer table differences between a backend and the reference.

Every code point (surrogates skipped, all planes) is put in a probe shape
(``stacktok_export.split.drift.Shape``); blocks of :data:`BLOCK` shapes are encoded by the reference
and the backend, and a block that differs is bisected down to its single code points
(:func:`scan_blocks`). :func:`reference_class` / :func:`backend_class` name the class (letter,
number, space, other) each side gave a code point; :data:`SENTINELS` -- one code point first
assigned as a letter in each Unicode version -- give a backend's apparent Unicode version.

Out of scope: loading backends and exports (``conformance.audit.backends``), turning a scan into
a finding (``conformance.audit.unicode_tables``); regex differences that are not Unicode tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stacktok_export import StackTokenizer
from stacktok_export.split.drift import STAND_INS, Shape, char_class, hypothesis_ids

BLOCK = 512  # code points per scanned block
#: one code point first assigned (as a letter) in each Unicode version, oldest first
SENTINELS: tuple[tuple[str, int], ...] = (
    ("13.0", 0x08BE),
    ("14.0", 0x0870),
    ("15.0", 0x11F04),
    ("15.1", 0x2EBF0),
    ("16.0", 0x1C89),
    ("17.0", 0x323B0),
    ("18.0", 0x3D000),
)

Encode = Callable[[str], list[int]]
Leaf = tuple[int, list[int], list[int]]  # (code point, reference ids, backend ids)


@dataclass
class Scan:
    """One backend's comparison against the reference."""

    name: str
    status: str  # agrees | disagrees | missing | error
    version: str = ""
    reason: str = ""
    seconds: float = 0.0
    leaves: list[Leaf] = field(default_factory=list)
    sentinels: dict[str, str] = field(default_factory=dict)  # version -> backend class of its sentinel
    declared: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ code points
def all_code_points() -> list[int]:
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def u_plus(cp: int) -> str:
    return f"U+{cp:04X}"


def code_point_runs(cps: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted code points as ``(first, last)``."""
    out: list[tuple[int, int]] = []
    for cp in cps:
        if out and cp == out[-1][1] + 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def span(first: int, last: int) -> str:
    return u_plus(first) if first == last else f"{u_plus(first)}..{u_plus(last)}"


# ------------------------------------------------------------------ classes
#: The reference regex's class of a character: L, N, S (white space) or O (its home: drift.py).
reference_class = char_class


def backend_class(tok: StackTokenizer, shape: Shape, ch: str, ids: list[int]) -> str:
    """Which class(es) the backend's ids for ``ch`` are consistent with ("?" if none)."""
    fits = [c for c in STAND_INS if hypothesis_ids(tok, shape, ch, c) == ids]
    return "/".join(fits) or "?"


def sentinel_classes(tok: StackTokenizer, shape: Shape, be: Encode) -> dict[str, str]:
    """Unicode version -> the class the backend gives that version's sentinel."""
    return {v: backend_class(tok, shape, chr(cp), be(shape.text(chr(cp)))) for v, cp in SENTINELS}


def apparent_version(sentinels: dict[str, str]) -> str:
    """The newest Unicode version whose sentinel (and every older one) the backend calls a letter."""
    known = "<" + SENTINELS[0][0]
    for version, _ in SENTINELS:
        cls = sentinels.get(version, "?")
        if "O" in cls or cls == "?":
            return known if cls == "O" else f"{known} (then undetermined)"
        known = version
    return known


def undeclared_versions(scan: Scan) -> list[str]:
    """Sentinel versions the backend does not know and no declared divergence names."""
    if scan.declared:  # a unicode_tables declaration covers every code point the backend splits differently
        return []
    return [v for v, cls in scan.sentinels.items() if cls == "O"]


# ------------------------------------------------------------------ scanning
def bisect_disagreements(cps: Sequence[int], shape: Shape, ref: Encode, be: Encode) -> list[Leaf]:
    """The single code points of a disagreeing run ``cps`` whose shapes encode differently.

    Should neither half differ (shapes interacting across their boundary, which
    :class:`Shape` rules out), the run's first code point stands for it.
    """
    if len(cps) == 1:
        text = shape.block(cps)
        return [(cps[0], ref(text), be(text))]
    out: list[Leaf] = []
    for half in (cps[: len(cps) // 2], cps[len(cps) // 2 :]):
        text = shape.block(half)
        if ref(text) != be(text):
            out += bisect_disagreements(half, shape, ref, be)
    if not out:
        text = shape.block(cps)
        out = [(cps[0], ref(text), be(text))]
    return out


def scan_blocks(
    blocks: Sequence[Sequence[int]],
    texts: Sequence[str],
    ref_ids: Sequence[list[int]],
    shape: Shape,
    ref: Encode,
    be: Encode,
) -> list[Leaf]:
    """Every code point of ``blocks`` (texts ``texts``, reference ids ``ref_ids``) where ``be`` differs."""
    leaves: list[Leaf] = []
    for cps, text, ids in zip(blocks, texts, ref_ids):
        if be(text) != ids:
            leaves += bisect_disagreements(cps, shape, ref, be)
    return leaves


def reference_blocks(tok: StackTokenizer, shape: Shape) -> tuple[list[list[int]], list[str], list[list[int]]]:
    """All code points in blocks of :data:`BLOCK`, each block's text and the reference's ids."""
    cps = all_code_points()
    blocks = [cps[i : i + BLOCK] for i in range(0, len(cps), BLOCK)]
    texts = [shape.block(b) for b in blocks]
    return blocks, texts, [tok.encode(t) for t in texts]

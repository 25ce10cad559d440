"""Loading the suite's data: probes, conversations, declared divergences, expected defaults.

Every file is JSONL (one object per line) except ``defaults.json``. A bad line
is reported with its file and line number and what to fix; nothing is skipped
silently. User files (``--probes``, ``--chats``, ``--text``) go through the
same loaders, so users gate on their own data with the same rules.

Out of scope: generating probes (``scripts/make_probes.py`` does that and
writes its output here, so a run is reproducible).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def _fixtures_dir() -> Path:
    """``fixtures/`` of a checkout, else the copy packaged in the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parent / "fixtures"
    return checkout if (checkout / "probes.jsonl").is_file() else here / "shipped_fixtures"


FIXTURES = _fixtures_dir()


class FixtureError(ValueError):
    """A fixture file is unreadable or malformed; names the file and line."""


@dataclass(frozen=True)
class Probe:
    id: str
    category: str
    text: str
    allow_special: bool = False
    source: str = ""


@dataclass(frozen=True)
class Chat:
    id: str
    messages: tuple[dict[str, str], ...]
    add_generation_prompt: bool = False
    source: str = ""


@dataclass(frozen=True)
class Divergence:
    id: str
    backend: str
    check: str
    versions: str
    reason: str
    link: str
    category: str | None = None
    probe: str | None = None

    def covers(self, *, backend: str, version: str, check: str, probe: Probe) -> bool:
        if self.backend != backend or self.check not in ("*", check):
            return False
        if self.probe is not None and not fnmatch.fnmatchcase(probe.id, self.probe):
            return False
        if self.category is not None and self.category != probe.category:
            return False
        return version_matches(version, self.versions)


def version_matches(version: str, spec: str) -> bool:
    if spec in ("", "*"):
        return True
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidVersion, InvalidSpecifier):
        return False


def _lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{path}: cannot read ({exc})") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FixtureError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise FixtureError(f"{path}:{lineno}: each line must be a JSON object")
        yield lineno, obj


def _need(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise FixtureError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r:.60}")
    return value


def load_probes(path: Path) -> list[Probe]:
    probes: list[Probe] = []
    seen: set[str] = set()
    for lineno, obj in _lines(path):
        where = f"{path}:{lineno}"
        probe = Probe(
            id=_need(obj, "id", str, where),
            category=_need(obj, "category", str, where),
            text=_need(obj, "text", str, where),
            allow_special=bool(obj.get("allow_special", False)),
            source=str(obj.get("source", "")),
        )
        if probe.id in seen:
            raise FixtureError(f"{where}: probe id {probe.id!r} is used twice; ids must be unique")
        seen.add(probe.id)
        probes.append(probe)
    return probes


def load_chats(path: Path) -> list[Chat]:
    chats: list[Chat] = []
    for lineno, obj in _lines(path):
        where = f"{path}:{lineno}"
        messages = _need(obj, "messages", list, where)
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise FixtureError(f"{where}: message {i} needs a 'role' string and 'content'")
        chats.append(
            Chat(
                id=_need(obj, "id", str, where),
                messages=tuple(messages),
                add_generation_prompt=bool(obj.get("add_generation_prompt", False)),
                source=str(obj.get("source", "")),
            )
        )
    return chats


def load_divergences(path: Path) -> list[Divergence]:
    out: list[Divergence] = []
    for lineno, obj in _lines(path):
        where = f"{path}:{lineno}"
        if ("category" in obj) == ("probe" in obj):
            raise FixtureError(f"{where}: give exactly one of 'category' or 'probe'")
        out.append(
            Divergence(
                id=_need(obj, "id", str, where),
                backend=_need(obj, "backend", str, where),
                check=str(obj.get("check", "*")),
                versions=str(obj.get("versions", "*")),
                reason=_need(obj, "reason", str, where),
                link=str(obj.get("link", "")),
                category=obj.get("category"),
                probe=obj.get("probe"),
            )
        )
    return out


def text_probes(path: Path, *, chunk: int = 4000) -> list[Probe]:
    """A user's plain-text file as probes: ~``chunk``-character pieces cut at newlines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{path}: cannot read as UTF-8 text ({exc})") from None
    probes, start, n = [], 0, 0
    while start < len(text):
        end = text.find("\n", start + chunk)
        end = len(text) if end < 0 else end + 1
        probes.append(Probe(f"text:{path.name}:{n:05d}", "user_text", text[start:end], False, str(path)))
        start, n = end, n + 1
    return probes


def load_defaults(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise FixtureError(f"{path}: cannot read expected defaults ({exc})") from None
    return {str(k): str(v) for k, v in data.items()}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class FixtureSet:
    probes: list[Probe] = field(default_factory=list)
    chats: list[Chat] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)

    def generator_seeds(self) -> list[str]:
        """Seeds of generated probes (from their ``source``), for reproducible reports."""
        found = (re.search(r"seed=(\d+)", p.source) for p in self.probes)
        return sorted({m.group(1) for m in found if m})

    @classmethod
    def load(
        cls,
        *,
        probes: Iterable[Path] = (),
        chats: Iterable[Path] = (),
        texts: Iterable[Path] = (),
        shipped: bool = True,
    ) -> FixtureSet:
        fs = cls()
        probe_files = [FIXTURES / "probes.jsonl"] if shipped else []
        chat_files = [FIXTURES / "chats.jsonl"] if shipped else []
        for path in [*probe_files, *map(Path, probes)]:
            fs.probes += load_probes(path)
            fs.hashes[_label(path)] = sha256_file(path)
        for path in map(Path, texts):
            fs.probes += text_probes(path)
            fs.hashes[_label(path)] = sha256_file(path)
        for path in [*chat_files, *map(Path, chats)]:
            fs.chats += load_chats(path)
            fs.hashes[_label(path)] = sha256_file(path)
        div = FIXTURES / "divergences.jsonl"
        if div.is_file():
            fs.divergences = load_divergences(div)
            fs.hashes[_label(div)] = sha256_file(div)
        defaults = FIXTURES / "defaults.json"
        if defaults.is_file():
            fs.defaults = load_defaults(defaults)
        _check_unique(fs.probes)
        return fs


def _label(path: Path) -> str:
    """Shipped fixtures by repo-relative path (same on every machine), user files as given."""
    try:
        return str(Path(path).resolve().relative_to(FIXTURES.parent))
    except ValueError:
        return str(path)


def _check_unique(probes: list[Probe]) -> None:
    seen: set[str] = set()
    for p in probes:
        if p.id in seen:
            raise FixtureError(f"probe id {p.id!r} appears in more than one file; rename one")
        seen.add(p.id)

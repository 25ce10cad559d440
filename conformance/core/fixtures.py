"""Loading the suite's data: probes, conversations, declared divergences, expected defaults.

Every file is JSONL (one object per line) except ``defaults.json``. A bad line
is reported with its file and line number and what to fix; nothing is skipped
silently. User files (``--probes``, ``--chats``, ``--text``) go through the
same loaders, so users gate on their own data with the same rules. Each file is
read once: :meth:`FixtureSet.load` parses and hashes the same bytes.

Out of scope: whether a declaration covers a difference (``conformance.core.declared``);
generating probes (``scripts/make_probes.py`` does that and
writes its output here, so a run is reproducible).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.checkpoint_template import DirTemplate
from conformance.core.conversations import Conversation, load_conversations
from conformance.core.errors import FixtureError
from stacktok_export.chat.chat import ChatFormatError, _check_message
from stacktok_export.util import limits
from stacktok_export.util.untrusted import UntrustedFileError, escape, read_untrusted


def _fixtures_dir() -> Path:
    """``fixtures/`` of a checkout, else the copy packaged in the wheel."""
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent / "fixtures"
    return checkout if (checkout / "probes.jsonl").is_file() else package / "shipped_fixtures"


FIXTURES = _fixtures_dir()


CAUSES = ("unicode_tables", "long_s_contraction", "clean_spaces", "control_text")


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
    """One declared divergence (a line of ``divergences.jsonl``): data only. Whether it covers a
    difference is the one rule of ``conformance.core.declared`` (``applies``, ``covers``)."""

    id: str
    backend: str
    check: str
    versions: str
    reason: str
    link: str
    category: str | None = None
    probe: str | None = None
    cause: str | None = None  # "unicode_tables": matched by content (conformance.core.declared)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _read_bytes(path: Path) -> bytes:
    """A user/fixture file's bytes, read once (:meth:`FixtureSet.load` parses and hashes them)."""
    if not os.path.lexists(path):
        raise FixtureError(f"{escape(str(path))}: no such file")
    try:  # a regular file of bounded size: a FIFO or /dev/zero as --text never hangs the run
        return read_untrusted(path, limit=limits.current().user_file)
    except UntrustedFileError as exc:
        raise FixtureError(str(exc)) from None


def _read_text(path: Path, *, what: str, data: bytes | None = None) -> str:
    """A user/fixture file's bytes (``data`` when already read) as strict UTF-8 (no newline translation)."""
    data = _read_bytes(path) if data is None else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FixtureError(
            f"{path}:{line}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid UTF-8; "
            f"{what} must be UTF-8 (re-save the file as UTF-8)"
        ) from None


def _lone_surrogate(value: Any, field: str) -> str | None:
    """The field path of the first string (key or value) holding a lone surrogate, else None."""
    if isinstance(value, str):
        return field if _SURROGATE.search(value) else None
    if isinstance(value, list):
        items: Iterable[tuple[str, Any]] = ((f"{field}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"{field}.{k}" if field else str(k), v) for k, v in value.items())
        if any(_SURROGATE.search(k) for k in value):
            return field or "a key"
    else:
        return None
    return next((found for name, v in items if (found := _lone_surrogate(v, name))), None)


def _lines(path: Path, data: bytes | None = None) -> Iterable[tuple[int, dict[str, Any]]]:
    """JSON Lines: split on "\\n" only (U+2028, U+0085, ... are legal inside JSON strings)."""
    text = _read_text(path, what="JSON Lines", data=data).removeprefix("\ufeff")
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FixtureError(f"{path}:{lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise FixtureError(f"{path}:{lineno}: each line must be a JSON object")
        bad = _lone_surrogate(obj, "")
        if bad is not None:
            raise FixtureError(
                f"{path}:{lineno}: field {bad!r} holds a lone surrogate (a \\ud800-\\udfff escape without "
                "its pair); JSON Lines text must be valid Unicode: write the character itself or a full pair"
            )
        yield lineno, obj


def _need(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise FixtureError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r:.60}")
    return value


def _need_id(obj: dict[str, Any], where: str) -> str:
    value = _need(obj, "id", str, where)
    if not value.strip():
        raise FixtureError(f"{where}: field 'id' is empty; give every entry a unique non-empty id")
    return value


def _flag(obj: dict[str, Any], key: str, where: str) -> bool:
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise FixtureError(f"{where}: field {key!r} must be true or false, got {value!r:.60}")
    return value


def load_probes(path: Path, *, data: bytes | None = None) -> list[Probe]:
    probes: list[Probe] = []
    seen: set[str] = set()
    for lineno, obj in _lines(path, data):
        where = f"{path}:{lineno}"
        probe = Probe(
            id=_need_id(obj, where),
            category=_need(obj, "category", str, where) if "category" in obj else "user",
            text=_need(obj, "text", str, where),
            allow_special=_flag(obj, "allow_special", where),
            source=str(obj.get("source", "")),
        )
        if probe.id in seen:
            raise FixtureError(f"{where}: probe id {probe.id!r} is used twice; ids must be unique")
        seen.add(probe.id)
        probes.append(probe)
    return probes


def _check_messages(messages: list[Any], where: str) -> None:
    """The rules ``render_conversation`` applies: known roles, string content, role order."""
    if not messages:
        raise FixtureError(f"{where}: field 'messages' is empty; a conversation needs at least one message")
    prev: str | None = None
    for i, message in enumerate(messages):
        try:
            prev, _ = _check_message(i, message, prev)
        except ChatFormatError as exc:
            raise FixtureError(f"{where}: {exc}") from None


def load_chats(path: Path, *, data: bytes | None = None) -> list[Chat]:
    chats: list[Chat] = []
    seen: set[str] = set()
    for lineno, obj in _lines(path, data):
        where = f"{path}:{lineno}"
        chat_id = _need_id(obj, where)
        messages = _need(obj, "messages", list, where)
        _check_messages(messages, where)
        if chat_id in seen:
            raise FixtureError(f"{where}: chat id {chat_id!r} is used twice; ids must be unique")
        seen.add(chat_id)
        chats.append(
            Chat(
                id=chat_id,
                messages=tuple(messages),
                add_generation_prompt=_flag(obj, "add_generation_prompt", where),
                source=str(obj.get("source", "")),
            )
        )
    return chats


def load_divergences(path: Path, *, data: bytes | None = None) -> list[Divergence]:
    out: list[Divergence] = []
    for lineno, obj in _lines(path, data):
        where = f"{path}:{lineno}"
        if sum(key in obj for key in ("category", "probe", "cause")) != 1:
            raise FixtureError(f"{where}: give exactly one of 'category', 'probe' or 'cause'")
        if "cause" in obj and obj["cause"] not in CAUSES:
            raise FixtureError(f"{where}: unknown cause {obj['cause']!r}; known: {', '.join(CAUSES)}")
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
                cause=obj.get("cause"),
            )
        )
    return out


def text_probes(path: Path, *, chunk: int = 4000, data: bytes | None = None) -> list[Probe]:
    """A user's plain-text file as probes: ~``chunk``-character pieces cut after a newline.

    The bytes are decoded as strict UTF-8 with no newline translation ("\\r\\n"
    stays "\\r\\n"); invalid UTF-8 names the byte and its offset.
    """
    text = _read_text(path, what="a --text file", data=data)
    if not text:
        raise FixtureError(f"{path}: the file holds no text; pass a non-empty UTF-8 text file")
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


@dataclass
class FixtureSet:
    probes: list[Probe] = field(default_factory=list)
    chats: list[Chat] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    #: why no engine may render DIR's chat templates ("" renders as usual): the reference's
    #: bounded render ran out of its budget (``conformance.validate.template.template_refusal``)
    refused_template: str = ""
    #: conversations in the shapes clients send (``fixtures/conversations.jsonl``), rendered with
    #: DIR's own template for an imported artifact (``conformance.checks.chats``)
    conversations: list[Conversation] = field(default_factory=list)
    #: DIR's chat template as transformers uses it (``conformance.core.checkpoint_template``), set
    #: by the plan; None without a directory or a template
    template: DirTemplate | None = None
    #: the chats of the user's ``--chats`` files (also in ``chats``)
    user_chats: list[Chat] = field(default_factory=list)

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
            fs.probes += load_probes(path, data=fs._read(path))
        for path in map(Path, texts):
            fs.probes += text_probes(path, data=fs._read(path))
        for path in chat_files:
            fs.chats += load_chats(path, data=fs._read(path))
        for path in map(Path, chats):
            fs.user_chats += load_chats(path, data=fs._read(path))
        fs.chats += fs.user_chats
        conversations = FIXTURES / "conversations.jsonl"
        if shipped and conversations.is_file():
            data = fs._read(conversations)
            fs.conversations = load_conversations(conversations, list(_lines(conversations, data)))
        div = FIXTURES / "divergences.jsonl"
        if div.is_file():
            fs.divergences = load_divergences(div, data=fs._read(div))
        defaults = FIXTURES / "defaults.json"
        if defaults.is_file():
            fs.defaults = load_defaults(defaults)
        _check_unique(fs.probes, kind="probe")
        _check_unique(fs.chats, kind="chat")
        return fs

    def _read(self, path: Path) -> bytes:
        """``path``'s bytes, read once: parsed by the caller, hashed here for the report."""
        data = _read_bytes(path)
        self.hashes[_label(path)] = hashlib.sha256(data).hexdigest()
        return data


def _label(path: Path) -> str:
    """Shipped fixtures by repo-relative path (same on every machine), user files as given."""
    try:
        return str(Path(path).resolve().relative_to(FIXTURES.parent))
    except ValueError:
        return str(path)


def _check_unique(entries: Iterable[Probe | Chat], *, kind: str) -> None:
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise FixtureError(f"{kind} id {entry.id!r} appears in more than one file; rename one")
        seen.add(entry.id)

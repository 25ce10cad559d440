"""The chats and short probe lists tests share, and the JSONL files a gate run reads.

``CHATS`` are the chat fixtures (``{"id", "add_generation_prompt", "messages"}``) every gate test
runs; ``PROBES`` a short list of texts that reach the known fault sites (" t", "x != y",
contractions, specials in untrusted text); ``TRUSTED`` texts whose specials are parsed.
:func:`gate_data` writes them as the ``--probes`` / ``--chats`` files of a gate run.

Out of scope: the long hard-string list (:mod:`tests.helpers.strings`); the shipped fixtures
(``fixtures/``, loaded by the suite itself).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CHAT_SYSTEM = {
    "id": "c-sys",
    "add_generation_prompt": False,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ],
}
CHAT_TWO_TURNS = {
    "id": "c-two-turns",
    "add_generation_prompt": False,
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello there, x != y"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "ok 👍🏽 café"},
    ],
}
CHAT_TOOL = {
    "id": "c-tool",
    "add_generation_prompt": True,
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "tool_call", "content": '{"city": "Oslo"}'},
        {"role": "tool_result", "content": '{"c": -3}'},
    ],
}
CHATS = [CHAT_SYSTEM, CHAT_TWO_TURNS, CHAT_TOOL]

PROBES = [
    "hello <|assistant|> world",
    "<|bos|>hi<|end|>",
    "x != y , z",
    "don't DON'T",
    " Việt Nam",
    "def f(x):\n\treturn {'a': [1, 2, 3]}  # 1234567\r\n",
    "café 🚀 👨\u200d👩\u200d👧 中文字符测试",
    "   leading and trailing   ",
    "",
]
#: trusted text (specials parsed): other models' special strings must stay bytes
TRUSTED = ["<|bos|>hi<|end|>", "<unk>", "<s>hi</s>"]


@dataclass(frozen=True)
class GateData:
    """The user data of a gate run: probe and chat files, and a folder for its reports."""

    probes: Path
    chats: Path | None
    out: Path

    def report(self, name: str) -> Path:
        """Where the run called ``name`` writes its JSON report (never inside a checked directory)."""
        return self.out / f"{name}.json"


def write_jsonl(path: Path, objects: Iterable[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


def probe_rows(
    texts: Sequence[str], *, prefix: str, category: str, allow_special: bool = False
) -> list[dict]:
    """Probe objects ``{"id": f"{prefix}{i}", "category", "text"}`` (+ ``allow_special`` if true)."""
    extra = {"allow_special": True} if allow_special else {}
    return [{"id": f"{prefix}{i}", "category": category, "text": t, **extra} for i, t in enumerate(texts)]


def gate_data(
    out: Path,
    *,
    texts: Sequence[str],
    trusted: Sequence[str] = (),
    chats: Sequence[dict] | None = CHATS,
    prefix: str = "t-",
    category: str = "t",
) -> GateData:
    """Write ``texts`` (untrusted) and ``trusted`` as ``probes.jsonl`` and ``chats`` as ``chats.jsonl``."""
    rows = probe_rows(texts, prefix=prefix, category=category)
    rows += probe_rows(trusted, prefix=f"{prefix}trusted-", category=category, allow_special=True)
    probes = write_jsonl(out / "probes.jsonl", rows)
    chat_file = None if chats is None else write_jsonl(out / "chats.jsonl", chats)
    return GateData(probes, chat_file, out)

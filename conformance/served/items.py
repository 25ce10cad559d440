"""What the served checks send: probes and chat renders as :class:`Item` values.

A caller passes plain strings, Probe-like objects or dicts (``id``, ``text``,
``category``), and message lists, Chat-like objects or dicts (``messages``,
``add_generation_prompt``); each becomes an :class:`Item` whose ``id`` and
``category`` let a declared divergence match it.

Out of scope: loading fixture files (:mod:`conformance.core.fixtures`), sending
the items (:mod:`conformance.served.checks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Item:
    """One probe or chat render; ``id`` / ``category`` let a declared divergence match it."""

    id: str
    category: str
    text: str = ""
    messages: tuple = ()
    add_generation_prompt: bool = False


def probe_items(probes: Sequence[Any]) -> list[Item]:
    """Strings get id ``#i``; Probe-like objects and dicts keep their ``id`` and ``category``."""
    out = []
    for i, p in enumerate(probes):
        if isinstance(p, str):
            out.append(Item(f"#{i}", "", p))
        elif isinstance(p, Mapping):
            out.append(Item(str(p.get("id", f"#{i}")), str(p.get("category", "")), p["text"]))
        else:
            out.append(Item(str(getattr(p, "id", f"#{i}")), str(getattr(p, "category", "")), p.text))
    return out


def chat_items(chats: Sequence[Any]) -> list[Item]:
    """A bare message list is rendered both with and without the generation prompt."""
    out = []
    for i, c in enumerate(chats):
        if isinstance(c, Mapping):
            label, msgs, gens = (
                str(c.get("id", f"#{i}")),
                c["messages"],
                [bool(c.get("add_generation_prompt"))],
            )
        elif hasattr(c, "messages"):
            label, msgs, gens = str(getattr(c, "id", f"#{i}")), c.messages, [bool(c.add_generation_prompt)]
        else:
            label, msgs, gens = f"#{i}", c, [False, True]
        for gen in gens:
            messages = tuple(dict(m) for m in msgs)
            out.append(Item(f"{label}{'+gen' if gen else ''}", "", "", messages, gen))
    return out

"""Where a backend's task child is, as it works: its progress slot, and its bars relayed.

A task child (``conformance.checks.forked``) runs one backend over one part of the probes. Its
supervisor (``conformance.checks.supervisor``) must be able to say, once the child is dead, what
it was doing -- "on probe long-a-1m", "on chat c-inject" -- and whether it still moves. The
child keeps that in three numbers of shared memory (the slot: a tick bumped at every step, a
:data:`PHASES` index and a probe, chat or token number), written by two hooks that need no
change to the checks:

- :class:`Watched`, the backend with every call marking the slot (the batch encode, the
  single-token decodes, the no-flags encode, a chat; any other call only ticks);
- :class:`TaskProgress`, the :class:`~stacktok_export.util.progress.Progress` the runner reports
  to: its bar moves the slot to the next probe at each update (the runner updates after each
  probe), and relays bars or lines to the parent as it asked (``bars``, ``lines`` or ``quiet``).

:func:`where` turns a slot into words for the supervisor.

Out of scope: what the checks do (``conformance.checks.compare``); killing and reaping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conformance.checks.bars import probe_bar
from conformance.checks.results import Part
from conformance.core.fixtures import Chat, Probe
from conformance.core.protocol import Backend, Capability
from stacktok_export.util.progress import Bar, Progress

#: what a task child can be doing, in the order it does them
PHASES = ("load", "start", "batch", "probe", "after", "single", "default", "chat", "stale", "send")
LOAD, START, BATCH, PROBE, AFTER, SINGLE, DEFAULT, CHAT, STALE, SEND = range(len(PHASES))
_RELAY_EVERY = 50  # probe updates a bar sends at once, at most (1% of its total, at least 1)


class Watch:
    """The child's side of its slot (``memoryview`` of three int64: tick, phase, number)."""

    def __init__(self, slot: Any, part: Part) -> None:
        self.slot, self.part = slot, part

    def at(self, phase: int, number: int = 0) -> None:
        self.slot[1], self.slot[2] = phase, number
        self.slot[0] += 1

    def tick(self) -> None:
        self.slot[0] += 1

    @property
    def phase(self) -> int:
        return int(self.slot[1])


def where(phase: int, number: int, *, part: Part, probes: Sequence[Probe], chats: Sequence[Chat]) -> str:
    """The slot in words: "on probe long-a-1m", "on chat c1", "while loading", ...

    >>> where(PROBE, 1, part=Part(0, 2, True), probes=[Probe("a", "c", "x"), Probe("b", "c", "y")], chats=[])
    'on probe b'
    """
    first = _shown(probes[part.start].id) if part.stop > part.start else ""
    if phase == PROBE and part.start <= number < part.stop:
        return f"on probe {_shown(probes[number].id)}"
    if phase == BATCH and first:
        last = _shown(probes[part.stop - 1].id)
        return f"encoding probes {first} to {last} in one batch"
    if phase == CHAT and 0 <= number < len(chats):
        return f"on chat {_shown(chats[number].id)}"
    return {
        LOAD: "while loading",
        START: f"after loading, before probe {first}" if first else "after loading",
        PROBE: "between two probes",
        AFTER: "after its last probe",
        CHAT: "on a conversation rendered with the directory's template",
        SINGLE: f"decoding single tokens (id {number})",
        DEFAULT: "on the no-flags encode (the default check)",
        STALE: "checking the declared divergences",
        SEND: "sending its results",
    }.get(phase, "after loading")


def _shown(text: str, limit: int = 80) -> str:
    """A probe or chat id as printed: as is when printable and short, else escaped (``ascii``)."""
    return text if text.isprintable() and len(text) <= limit else ascii(text)[:limit]


class Watched:
    """``backend`` (the adapter protocol, traits copied) with every call marked on ``watch``."""

    def __init__(self, backend: Backend, watch: Watch, chats: Sequence[Chat]) -> None:
        self._backend, self._watch = backend, watch
        self._chat_number = {id(c.messages): i for i, c in enumerate(chats)}
        self.name, self.version, self.reads = backend.name, backend.version, backend.reads
        self.capabilities: frozenset[Capability] = backend.capabilities
        self.decode_exact, self.encodes_in_batch = backend.decode_exact, backend.encodes_in_batch
        self.chat_requires_assistant = backend.chat_requires_assistant
        self.chat_injection_safe_path = backend.chat_injection_safe_path
        self.template_input = backend.template_input
        self.template_input_declaration = backend.template_input_declaration

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        self._watch.tick()
        return self._backend.encode(text, allow_special=allow_special)

    def encode_batch(self, texts: Sequence[str], *, allow_special: bool) -> list[list[int]]:
        if self._watch.phase in (START, BATCH):
            self._watch.at(BATCH)
        else:
            self._watch.tick()
        return self._backend.encode_batch(texts, allow_special=allow_special)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        if self._watch.phase in (AFTER, SINGLE) and len(ids) == 1:
            self._watch.at(SINGLE, int(ids[0]))
        else:
            self._watch.tick()
        return self._backend.decode_bytes(ids)

    def default_encode(self, text: str) -> list[int]:
        self._watch.at(DEFAULT)
        return self._backend.default_encode(text)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        self._watch.at(CHAT, self._chat_number.get(id(messages), -1))
        return self._backend.chat(
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            template_kwargs=template_kwargs,
        )

    def stream(self, ids: Sequence[int]) -> list[str]:
        self._watch.tick()
        return self._backend.stream(ids)


class _TaskBar:
    """The runner's probe bar in a task child: each update moves the slot to the next probe and
    is relayed (``relay``): a bar's updates in batches of 1% of its total (1 to 50), or a line
    every 200 probes, or nothing."""

    def __init__(
        self, watch: Watch, name: str, total: int, relay: Callable[[tuple[Any, ...]], None], mode: str
    ):
        self.watch, self.name, self.relay, self.mode = watch, name, relay, mode
        part = watch.part
        self.next, self.pending = part.start, 0
        self.every = max(1, min(_RELAY_EVERY, total // 100))
        self.lines = probe_bar(lambda msg: relay(("say", msg)), name, total, done=part.start)
        if mode == "bars":
            relay(("open", name, total, "probes"))
        self._mark()

    def _mark(self) -> None:
        if self.next < self.watch.part.stop:
            self.watch.at(PROBE, self.next)
        else:
            self.watch.at(AFTER)

    def update(self, n: int = 1) -> None:
        self.next += n
        self._mark()
        if self.mode == "lines":
            self.lines.update(n)
        elif self.mode == "bars":
            self.pending += n
            if self.pending >= self.every:
                self.relay(("update", self.name, self.pending))
                self.pending = 0

    def close(self) -> None:
        if self.mode == "bars":
            if self.pending:
                self.relay(("update", self.name, self.pending))
                self.pending = 0
            self.relay(("close", self.name))
            self.mode = "closed"

    def __enter__(self) -> _TaskBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TaskProgress(Progress):
    """The runner's progress in a task child: bars that mark the slot, relayed as ``mode`` says
    (``bars``: open/update/close; ``lines``: "name: probe i/n" every 200 probes; ``quiet``)."""

    def __init__(self, watch: Watch, relay: Callable[[tuple[Any, ...]], None], mode: str) -> None:
        super().__init__(quiet=True)
        self.watch, self.relay, self.mode = watch, relay, mode

    def bar(self, name: str, total: int, unit: str = "items") -> Bar:
        return _TaskBar(self.watch, name, total, self.relay, self.mode)  # type: ignore[return-value] -- same duck interface

    def say(self, message: str) -> None:
        if self.mode != "quiet":
            self.relay(("say", message))

    __call__ = say


__all__ = ["PHASES", "TaskProgress", "Watch", "Watched", "where"]

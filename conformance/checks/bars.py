"""Per-backend progress for the runner: a live bar, or a line every 200 probes.

The runner takes either a :class:`~stacktok_export.util.progress.Progress` (one bar per
running backend) or a plain message callback; :func:`probe_bar` hands it the same
``update`` / context-manager interface either way.

Out of scope: drawing the bars (``stacktok_export.util.progress``).
"""

from __future__ import annotations

from collections.abc import Callable

from stacktok_export.util.progress import Bar, Progress

ProgressArg = Progress | Callable[[str], None] | None


class _MessageBar:
    """The bar interface over a plain message callback: a line every ``every`` probes."""

    def __init__(
        self, say: Callable[[str], None], name: str, total: int, every: int = 200, *, done: int = 0
    ) -> None:
        self.say, self.name, self.total, self.every, self.done = say, name, total, every, done

    def update(self, n: int = 1) -> None:
        for _ in range(n):
            if self.done % self.every == 0:
                self.say(f"{self.name}: probe {self.done}/{self.total}")
            self.done += 1

    def __enter__(self) -> _MessageBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def probe_bar(
    progress: Progress | Callable[[str], None], name: str, total: int, *, done: int = 0
) -> Bar | _MessageBar:
    """A bar for ``total`` probes of backend ``name`` on ``progress``; a part of the probes that
    starts at probe ``done`` numbers its lines from there (a live bar counts what its updates add:
    the parts of a forked run share one bar, ``conformance.checks.forked``)."""
    if isinstance(progress, Progress):
        return progress.bar(name, total, unit="probes")
    return _MessageBar(progress, name, total, done=done)

"""Counting one served row: items checked, differences (declared or not), and why a loop stopped.

:class:`Tally` turns its counts into the row (pass, pass with ``declared``, or
fail with the first undeclared difference); :func:`run_items` runs one check
over its items within the shared :class:`Budget`, so a dead server or a
timeout ends the loop with a reason instead of hanging or raising.

Out of scope: what is sent and compared (:mod:`conformance.served.checks`),
which declaration covers what (:mod:`conformance.served.declarations`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from conformance.checks.windows import first_difference
from conformance.core.declared import Declarations
from conformance.core.rows import Row
from conformance.served.client import UNREACHABLE, HttpError
from conformance.served.declarations import covering
from conformance.served.fixes import BACKEND
from conformance.served.items import Item


def window(ids: Sequence[int], pos: int) -> list[int]:
    return list(ids[max(0, pos - 3) : pos + 4])


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def over(self) -> bool:
        return time.monotonic() > self.end


class Tally:
    """Counts for one row, the first undeclared difference, and why a loop stopped early."""

    def __init__(self, check: str, fix: str, declarations: Declarations | None, proxy: Any) -> None:
        self.check, self.fix = check, fix
        self.declarations, self.proxy = declarations, proxy
        self.n = self.bad = self.skipped = 0
        self.declared: dict[str, int] = {}
        self.first = ""
        self.aborted = ""

    def fail(self, item: Item, detail: str, *, declarable: bool = True) -> None:
        decl = covering(self.declarations, self.proxy, self.check, item) if declarable else None
        if decl:
            self.declared[decl] = self.declared.get(decl, 0) + 1
            return
        self.bad += 1
        if not self.first:
            self.first = detail

    def compare_ids(
        self, item: Item, got: Sequence[int], want: Sequence[int], *, label: str, against: str
    ) -> None:
        """Count a difference between the server's ids and ``against``'s, with a window around it."""
        if got != want:
            pos = first_difference(got, want)
            self.fail(
                item,
                f"{label} at id {pos}: server {window(got, pos)} vs {against} {window(want, pos)}",
            )

    def row(self, what: str = "probes") -> Row:
        n_decl = sum(self.declared.values())
        decl = f"{n_decl} declared ({', '.join(sorted(self.declared))})" if n_decl else ""
        if self.aborted:
            msg = f"stopped after {self.n} {what}: {self.aborted}"
            if self.bad:
                msg += f"; {self.bad} differed before that, first: {self.first}"
            return Row(self.check, BACKEND, "fail", msg, self.fix)
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        if self.bad:
            extra = f", {decl}" if decl else ""
            msg = f"{self.bad} of {self.n} {what} differ{extra}{skipped}, first: {self.first}"
            return Row(self.check, BACKEND, "fail", msg, self.fix)
        if n_decl:
            msg = f"{decl}, {self.n - n_decl} of {self.n} {what} identical{skipped}"
            return Row(self.check, BACKEND, "pass", msg, "", declared=n_decl)
        return Row(self.check, BACKEND, "pass", f"{self.n} {what} identical{skipped}", "")


def run_items(tally: Tally, budget: Budget, items: Sequence[Item], body: Callable[[Item], None]) -> None:
    """Run ``body(item)`` per item within the budget; a dead server or timeout ends the loop."""
    for item in items:
        if budget.over():
            tally.aborted = f"the {budget.seconds:.0f}s budget ran out"
            return
        try:
            body(item)
        except HttpError as exc:  # the body counted the item before its request
            tally.fail(item, f"{item.id}: the server answered {exc}", declarable=False)
        except UNREACHABLE as exc:  # refused, reset, timed out
            tally.aborted = f"the server stopped answering ({exc})"
            return

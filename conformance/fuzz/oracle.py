"""The oracle: one backend against its own copy of the reference, on one text in one mode.

``Oracle.observe`` returns ``None`` when the backend agrees with the reference, else an
:class:`Observation` (different ids, or the exception the backend raised -- a backend
that raises counts as a divergence). Only the modes a backend declares are checked
(``ENCODE`` for untrusted, ``TRUSTED`` for trusted). An oracle is confined to one
thread; ``busy`` counts the CPU seconds of that thread inside the backend's encode.

Out of scope: which examples to check (``conformance.fuzz.engine``), declared or not
(``conformance.fuzz.compare``) and shrinking (``conformance.fuzz.shrink``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from conformance.core.protocol import Backend, Capability
from conformance.fuzz.declarations import UnicodeDeclarations
from conformance.fuzz.examples import TRUSTED, UNTRUSTED, reference_ids
from stacktok_export import StackTokenizer


@dataclass(frozen=True)
class Observation:
    kind: str  # "ids" (different ids) or "raises"
    ids: list[int] | None
    error: str = ""


class Oracle:
    """One backend against its own copy of the reference (thread-confined)."""

    def __init__(self, backend: Backend, ref: StackTokenizer, declarations: UnicodeDeclarations) -> None:
        self.backend = backend
        self.ref = ref
        self.decl = declarations
        caps = backend.capabilities
        self.modes = frozenset(
            m for m, c in ((UNTRUSTED, Capability.ENCODE), (TRUSTED, Capability.TRUSTED)) if c in caps
        )
        self.busy = 0.0  # CPU seconds of this thread inside the backend's encode (no GIL waits)

    def observe(self, text: str, mode: str, want: list[int] | None = None) -> Observation | None:
        """None if the backend agrees with the reference on ``text`` in ``mode``."""
        if want is None:
            want = reference_ids(self.ref, text, mode)
        start = time.thread_time()
        try:
            got = list(self.backend.encode(text, allow_special=mode == TRUSTED))
        except Exception as exc:  # a backend crashing on input is a finding
            return Observation("raises", None, f"{type(exc).__name__}: {exc}"[:300])
        finally:
            self.busy += time.thread_time() - start
        return None if got == want else Observation("ids", got)

    def fails(self, text: str, mode: str, kind: str) -> bool:
        obs = self.observe(text, mode)
        return obs is not None and obs.kind == kind

    def fails_declared(self, text: str, mode: str, kind: str) -> bool:
        stripped = self.decl.strip(text)
        return stripped != text and self.fails(text, mode, kind) and self.observe(stripped, mode) is None

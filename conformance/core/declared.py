"""Is a difference declared? The one rule, used by the runner, the gate, fuzz, audit and the served path.

A declaration (one line of ``fixtures/divergences.jsonl``, a
:class:`~conformance.core.fixtures.Divergence`) names a backend, a check, a version
range, a cited reason, and *what it covers*, one of:

- ``cause: "unicode_tables"`` -- the backend's regex engine classifies some
  code points differently from the reference's ``regex`` (older Unicode
  tables). It covers an ``encode``/``trusted`` difference on a text when the
  text contains such *drifting* code points and the same text with them
  removed no longer differs. So a user's own probes get the same declarations
  as the shipped ones, and an undeclared difference can never hide behind a
  declared one. A code point drifts for a backend when the backend's ids for
  :class:`Shape` around it differ from the reference's (measured, cached).
- ``cause: "long_s_contraction"`` -- llama.cpp spells ``(?i:'s)`` as
  ``'[sS]``, which misses U+017F LONG S (it case-folds to ``s``): covers a
  difference when the text holds ``'ſ`` and the text with those ``ſ`` removed
  agrees. The ids differ only when a merge spans the different split, which
  the shipped vocabulary's probes never show, so this one is never *stale*.
- ``cause: "clean_spaces"`` -- llama.cpp's ``llama_detokenize`` deletes spaces
  before ``?!.,`` and some contractions (:mod:`conformance.core.clean_spaces`): covers
  a ``decode``/``single_tokens`` difference only when the backend's bytes are
  exactly that transform of the original bytes (for ``single_tokens``: for every
  id that decodes differently). Stale when some probe would change under the
  transform and no difference was seen.
- ``cause: "control_text"`` -- llama.cpp makes an ordinary token whose text looks like a
  control token (``</s>``, ``<|im_end|>``, ...; ``llama_vocab::impl::load``) a control token
  on load, so in *trusted* text it parses that text as the one id: covers a ``trusted``
  difference when the text holds such a token's text and the reference, splitting those
  texts out as their ids too, gives the backend's ids. Never stale (our own vocabulary has
  no such ordinary token; an imported one may).
- ``probe`` (an id glob) or ``category`` -- a specific shipped probe, for
  findings that are not about code points (a crash on one huge input, a
  streaming quirk).

A declaration that matched nothing while the data could have shown it is
*stale* (:meth:`Declarations.stale`): it fails the run, so the list cannot rot.

Out of scope: deciding what a difference is (the runner does), and regex
differences that are not Unicode tables (they need a ``probe`` declaration).
"""

from __future__ import annotations

import fnmatch
import functools
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from functools import partial

import regex
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from conformance.core.clean_spaces import clean_spaces
from conformance.core.fixtures import Divergence, Probe
from conformance.core.protocol import Backend
from stacktok_export import StackTokenizer
from stacktok_export.split.drift import DriftCache, choose_shape

UNICODE_TABLES = "unicode_tables"
LONG_S = "long_s_contraction"
CLEAN_SPACES = "clean_spaces"
CONTROL_TEXT = "control_text"
LONG_S_TEXT = "'\u017f"  # what llama.cpp's '[sS] misses and (?i:'s) case-folds
#: checks whose outcome depends on the pre-tokenizer's character classes
SPLIT_CHECKS = ("encode", "trusted")
#: checks a decode-side cause can cover
DECODE_CHECKS = ("decode", "single_tokens")
BLOCK = 256  # code points per drift-scan block


def version_matches(version: str, spec: str) -> bool:
    """``version`` is in the declaration's range ``spec`` (``*`` or empty: every version)."""
    if spec in ("", "*"):
        return True
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidVersion, InvalidSpecifier):
        return False


def applies(d: Divergence, *, backend: str, version: str, check: str | None = None) -> bool:
    """``d`` names ``backend`` at ``version`` and ``check`` (``None``: whatever its check)."""
    names_check = check is None or d.check in ("*", check)
    return d.backend == backend and names_check and version_matches(version, d.versions)


def covers(d: Divergence, *, backend: str, version: str, check: str, probe: Probe) -> bool:
    """The id/category rule: ``d`` names ``probe`` by id glob or category. A ``cause``
    declaration matches by content instead (:meth:`Declarations.declared`)."""
    if d.cause is not None or not applies(d, backend=backend, version=version, check=check):
        return False
    if d.probe is not None and not fnmatch.fnmatchcase(probe.id, d.probe):
        return False
    return d.category is None or d.category == probe.category


class Declarations:
    """The declarations of one fixture set, with per-backend drift caches (thread-safe)."""

    def __init__(self, divergences: Sequence[Divergence], ref: StackTokenizer) -> None:
        self.divergences = list(divergences)
        self.ref = ref
        self.shape = choose_shape(ref)
        self._drift: dict[str, DriftCache] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ code points
    def drifts(self, backend: Backend, ch: str) -> bool:
        """Whether ``backend`` splits text around ``ch`` differently from the reference."""
        return self._cache(backend).drifts(ch)

    def _cache(self, backend: Backend) -> DriftCache:
        key = f"{backend.name}@{backend.version}"
        with self._lock:
            cache = self._drift.get(key)
            if cache is None:
                encode = partial(backend.encode, allow_special=False)
                cache = self._drift[key] = DriftCache(self.ref, encode, self.shape)
            return cache

    def drifting(self, backend: Backend, text: str) -> set[str]:
        return {ch for ch in set(text) if self.drifts(backend, ch)}

    def any_drift(self, backend: Backend, texts: Iterable[str]) -> bool:
        """Whether any code point of ``texts`` drifts (block scan, then exact per code point)."""
        chars = sorted({ch for t in texts for ch in t if not ch.isascii()})
        for i in range(0, len(chars), BLOCK):
            block = chars[i : i + BLOCK]
            text = self.shape.block([ord(c) for c in block])
            try:
                same = list(backend.encode(text, allow_special=False)) == self.ref.encode(text)
            except Exception:  # noqa: BLE001
                same = False
            if not same and any(self.drifts(backend, ch) for ch in block):
                return True
        return False

    def has_cause(
        self, backend: Backend, check: str = "encode", cause: str = UNICODE_TABLES
    ) -> Divergence | None:
        for d in self.divergences:
            if d.cause == cause and applies(d, backend=backend.name, version=backend.version, check=check):
                return d
        return None

    # ------------------------------------------------------------ the rule
    def declared(self, backend: Backend, check: str, probe: Probe) -> Divergence | None:
        """The declaration covering ``backend``'s difference on ``probe`` in ``check``, if any."""
        for d in self.divergences:
            if covers(d, backend=backend.name, version=backend.version, check=check, probe=probe):
                return d
        if check in SPLIT_CHECKS and probe.text:
            d = self.has_cause(backend, "encode")
            if d is not None and self.explained_by_tables(backend, probe.text, trusted=check == "trusted"):
                return d
            d = self.has_cause(backend, "encode", LONG_S)
            if d is not None and self.explained_by_long_s(backend, probe.text, trusted=check == "trusted"):
                return d
        if check == "trusted" and probe.text:
            d = self.has_cause(backend, "trusted", CONTROL_TEXT)
            if d is not None and self.explained_by_control_text(backend, probe.text):
                return d
        if check in DECODE_CHECKS:
            d = self.has_cause(backend, check, CLEAN_SPACES)
            if d is not None and self.explained_by_clean_spaces(backend, check, probe):
                return d
        return None

    def explained_by_clean_spaces(self, backend: Backend, check: str, probe: Probe) -> bool:
        """Every byte ``backend`` decodes differently is llama.cpp's ``clean_spaces`` of the original."""
        if check == "single_tokens":
            pairs = ((self.ref.decode_bytes([i]), [i]) for i in range(self.ref.vocab_size))
        else:
            pairs = iter([(probe.text.encode("utf-8"), self.ref.encode(probe.text))])
        differs = False
        for want, ids in pairs:
            try:
                got = backend.decode_bytes(ids)
            except Exception:  # noqa: BLE001 -- a backend raising is not this cause
                return False
            if got != want:
                if got != clean_spaces(want):
                    return False
                differs = True
        return differs

    def explained_by_long_s(self, backend: Backend, text: str, *, trusted: bool) -> bool:
        """``text`` holds ``'ſ`` and, with those ``ſ`` removed, ``backend`` agrees."""
        if LONG_S_TEXT not in text:
            return False
        return self._agrees(backend, text.replace(LONG_S_TEXT, "'"), trusted=trusted)

    def explained_by_control_text(self, backend: Backend, text: str) -> bool:
        """``text`` holds an ordinary token llama.cpp promotes, and splitting those out explains it."""
        promoted = self._promoted
        found = [s for s in promoted if s in text]
        if not found:
            return False
        want: list[int] = []
        pattern = regex.compile("|".join(regex.escape(s) for s in sorted(found, key=len, reverse=True)))
        at = 0
        for m in pattern.finditer(text):
            want += self.ref.encode(text[at : m.start()], allowed_special="all")
            want.append(promoted[m.group()])
            at = m.end()
        want += self.ref.encode(text[at:], allowed_special="all")
        try:
            return list(backend.encode(text, allow_special=True)) == want
        except Exception:  # noqa: BLE001 -- a backend raising is not this cause
            return False

    @functools.cached_property
    def _promoted(self) -> dict[str, int]:
        """Ordinary tokens whose text llama.cpp promotes to control tokens (text -> id), found once."""
        from stacktok_export.gguf.pre import CONTROL_LOOKING

        ordinary = (i for i in range(self.ref.vocab_size) if i not in self.ref.id_to_special)
        table = self.ref.id_bytes()
        return {s: i for i in ordinary if (s := table[i].decode("utf-8", "replace")) in CONTROL_LOOKING}

    def _agrees(self, backend: Backend, text: str, *, trusted: bool) -> bool:
        want = self.ref.encode(text, allowed_special="all" if trusted else frozenset())
        try:
            return list(backend.encode(text, allow_special=trusted)) == want
        except Exception:  # noqa: BLE001
            return False

    def explained_by_tables(self, backend: Backend, text: str, *, trusted: bool) -> bool:
        """``text`` holds drifting code points and, without them, ``backend`` agrees."""
        drift = self.drifting(backend, text)
        if not drift:
            return False
        return self._agrees(backend, "".join(ch for ch in text if ch not in drift), trusted=trusted)

    def stale(self, ran: dict[str, Backend], used: set[str], probes: Sequence[Probe]) -> list[str]:
        """Declarations of a backend that ran that matched nothing although the data could show it."""
        out = []
        for d in self.divergences:
            backend = ran.get(d.backend)
            if backend is None or d.id in used or not applies(d, backend=d.backend, version=backend.version):
                continue
            if d.cause in (LONG_S, CONTROL_TEXT):
                continue  # needs a merge across the split / an imported vocabulary to show (docstring)
            if d.cause == CLEAN_SPACES:  # stale once no probe that the transform changes differs
                could = any(clean_spaces(b) != b for b in (p.text.encode("utf-8") for p in probes))
            elif d.cause == UNICODE_TABLES:
                # stale when the data holds code points newer than the stdlib's tables and the
                # backend now splits every one of them like the reference (its tables caught up)
                new = [ch for ch in {c for p in probes for c in p.text} if is_newer_than_stdlib(ch)]
                could = bool(new) and not self.any_drift(backend, new)
            else:
                check = d.check if d.check != "*" else "encode"
                could = any(
                    covers(d, backend=d.backend, version=backend.version, check=check, probe=p)
                    for p in probes
                )
            if could:
                out.append(d.id)
        return out


_ASSIGNED = regex.compile(r"\P{Cn}")


def is_newer_than_stdlib(ch: str) -> bool:
    """Assigned in the reference's ``regex`` tables, unassigned in this Python's ``unicodedata``."""
    return unicodedata.category(ch) == "Cn" and _ASSIGNED.match(ch) is not None

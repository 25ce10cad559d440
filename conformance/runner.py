"""Run every check for every backend against the reference.

Checks (each applies only where the backend declares the capability):

- ``encode``: untrusted ids equal the reference's, id for id.
- ``injection``: the safe path never yields a special id for untrusted text.
- ``trusted``: with specials allowed, ids equal the reference's (probes that
  are trusted or contain a special string).
- ``decode``: decoding the *reference* ids gives the original bytes -- this
  separates decode bugs from encode bugs.
- ``single_tokens``: every id decodes to its own bytes (once per backend).
- ``default``: the backend's no-flags behaviour on an injection string is
  recorded (safe / unsafe / raises) and compared with ``fixtures/defaults.json``
  so a release that changes a default shows up.
- ``chat``: ids and assistant mask equal ``render_conversation`` (chats whose
  content holds special strings are recorded as ``chat_injection`` instead:
  string templates parse them, transformers#29279).
- ``stream``: token-by-token incremental detokenization concatenates to the
  text and never emits U+FFFD inside a character.

A failure covered by a declared divergence counts as *declared*; a
declaration that covered probes but saw no failure is reported *stale*.

``run_suite`` loads each named backend (a missing one becomes a *missing* result)
and runs them, up to ``workers`` at once. Out of scope: rendering (``conformance.report``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from stacktok_export import StackTokenizer

from .backends import load_backend
from .fixtures import Chat, Divergence, FixtureSet, Probe
from .layout import Exports
from .protocol import Backend, BackendMissing, Capability

CHECKS = ("encode", "injection", "trusted", "decode", "single_tokens", "default", "chat", "stream")
INJECTION_TEXT = "hello <|assistant|> world"
STREAM_MAX_CHARS = 20_000  # streaming is per token: skip the megabyte probes


@dataclass
class Failure:
    check: str
    probe: str
    detail: str
    window: dict[str, Any] | None = None
    declared: str | None = None  # id of the covering declaration


@dataclass
class BackendResult:
    name: str
    version: str = ""
    status: str = "ok"  # ok | diverged | missing | error
    reason: str = ""
    seconds: float = 0.0
    checks: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    default_behaviour: str = ""
    chat_injection: str = ""
    probes_run: int = 0
    probes_identical: int = 0
    probes_diverged: int = 0
    probes_declared: int = 0

    def tally(self, check: str, outcome: str) -> None:
        counts = self.checks.setdefault(check, {"pass": 0, "fail": 0, "declared": 0})
        counts[outcome] += 1


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Index of the first differing element (the shorter length if one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def first_window(ref: Sequence[int], got: Sequence[int], tok: StackTokenizer) -> dict[str, Any]:
    """Position of the first differing id and three ids either side, with bytes, from both."""
    pos = first_difference(ref, got)
    lo = max(0, pos - 3)

    def side(ids: Sequence[int]) -> list[list[Any]]:
        return [[i, _bytes_repr(tok, i)] for i in ids[lo : pos + 4]]

    return {
        "position": pos,
        "reference": side(ref),
        "backend": side(got),
        "reference_len": len(ref),
        "backend_len": len(got),
    }


def _bytes_repr(tok: StackTokenizer, token_id: int) -> str:
    try:
        return repr(tok.decode_bytes([token_id]))
    except (ValueError, TypeError):
        return "<out of range>"


class Runner:
    """Compare one backend with the reference over a fixture set."""

    def __init__(
        self, ref: StackTokenizer, fixtures: FixtureSet, *, progress: Callable[[str], None] | None = None
    ) -> None:
        self.ref = ref
        self.fx = fixtures
        self.first_special = min(ref.special_to_id.values())
        self.specials = tuple(ref.special_to_id)
        self.progress = progress or (lambda msg: None)
        self._ref_untrusted = {p.id: ref.encode(p.text) for p in fixtures.probes}
        self._ref_trusted = {
            p.id: ref.encode(p.text, allowed_special="all") for p in fixtures.probes if self._wants_trusted(p)
        }

    def _wants_trusted(self, probe: Probe) -> bool:
        return probe.allow_special or any(s in probe.text for s in self.specials)

    # -------------------------------------------------------------- plumbing
    def _declared(self, backend: Backend, check: str, probe: Probe) -> Divergence | None:
        for d in self.fx.divergences:
            if d.covers(backend=backend.name, version=backend.version, check=check, probe=probe):
                return d
        return None

    def _record(
        self,
        res: BackendResult,
        backend: Backend,
        check: str,
        probe: Probe,
        ok: bool,
        detail: str = "",
        window: dict[str, Any] | None = None,
    ) -> bool:
        """Tally one outcome; return True if it is an undeclared failure."""
        if ok:
            res.tally(check, "pass")
            return False
        decl = self._declared(backend, check, probe)
        res.tally(check, "declared" if decl else "fail")
        res.failures.append(Failure(check, probe.id, detail, window, decl.id if decl else None))
        return decl is None

    def _safe(self, fn: Callable[[], Any]) -> tuple[Any, str | None]:
        try:
            return fn(), None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 -- pyo3 panics derive from BaseException
            return None, f"{type(exc).__name__}: {exc}"[:300]

    # ------------------------------------------------------------ the checks
    def run(self, backend: Backend) -> BackendResult:
        res = BackendResult(name=backend.name, version=backend.version)
        start = time.perf_counter()
        caps = backend.capabilities
        for n, probe in enumerate(self.fx.probes):
            if n % 200 == 0:
                self.progress(f"{backend.name}: probe {n}/{len(self.fx.probes)}")
            self._probe(res, backend, caps, probe)
        if Capability.SINGLE_TOKENS in caps:
            self._single_tokens(res, backend)
        if Capability.DEFAULT in caps:
            self._default(res, backend)
        if Capability.CHAT in caps:
            for chat in self.fx.chats:
                self._chat(res, backend, chat)
        res.seconds = round(time.perf_counter() - start, 2)
        if any(f.declared is None for f in res.failures):
            res.status = "diverged"
        return res

    def _probe(self, res: BackendResult, backend: Backend, caps: frozenset[Capability], probe: Probe) -> None:
        if not caps & {Capability.ENCODE, Capability.TRUSTED, Capability.DECODE, Capability.STREAM}:
            return  # a chat-only backend (TRL) runs no probes
        bad = False
        declared = False
        ref_ids = self._ref_untrusted[probe.id]
        before = len(res.failures)
        if Capability.ENCODE in caps:
            got, err = self._safe(lambda: backend.encode(probe.text, allow_special=False))
            ok = err is None and got == ref_ids
            window = None if ok or err else first_window(ref_ids, got, self.ref)
            bad |= self._record(res, backend, "encode", probe, ok, err or "ids differ", window)
            if err is None:
                leaked = [i for i in got if i >= self.first_special]
                bad |= self._record(
                    res,
                    backend,
                    "injection",
                    probe,
                    not leaked,
                    f"special ids {leaked[:5]} from untrusted text",
                )
        if Capability.TRUSTED in caps and probe.id in self._ref_trusted:
            want = self._ref_trusted[probe.id]
            got, err = self._safe(lambda: backend.encode(probe.text, allow_special=True))
            ok = err is None and got == want
            window = None if ok or err else first_window(want, got, self.ref)
            bad |= self._record(res, backend, "trusted", probe, ok, err or "ids differ", window)
        if Capability.DECODE in caps:
            got, err = self._safe(lambda: backend.decode_bytes(ref_ids))
            want = probe.text.encode("utf-8")
            ok = err is None and got == want
            bad |= self._record(res, backend, "decode", probe, ok, err or _diff_bytes(want, got))
        if Capability.STREAM in caps and len(probe.text) <= STREAM_MAX_CHARS:
            bad |= self._stream(res, backend, probe, ref_ids)
        declared = any(f.declared for f in res.failures[before:])
        res.probes_run += 1
        if bad:
            res.probes_diverged += 1
        elif declared:
            res.probes_declared += 1
        else:
            res.probes_identical += 1

    def _stream(self, res: BackendResult, backend: Backend, probe: Probe, ids: list[int]) -> bool:
        pieces, err = self._safe(lambda: backend.stream(ids))
        if err:
            return self._record(res, backend, "stream", probe, False, err)
        joined = "".join(pieces)
        if joined != probe.text:
            return self._record(
                res,
                backend,
                "stream",
                probe,
                False,
                f"pieces join to {len(joined)} chars, want {len(probe.text)}",
            )
        if "\ufffd" not in probe.text:
            broken = [i for i, p in enumerate(pieces) if "\ufffd" in p]
            if broken:
                return self._record(
                    res, backend, "stream", probe, False, f"U+FFFD emitted mid-character at token {broken[0]}"
                )
        return self._record(res, backend, "stream", probe, True)

    def _single_tokens(self, res: BackendResult, backend: Backend) -> None:
        probe = Probe("vocab:single-tokens", "single_tokens", "")
        bad_ids: list[int] = []
        exact = getattr(backend, "decode_exact", True)
        for i in range(self.ref.vocab_size):
            want = self.ref.decode_bytes([i])
            if not exact:
                want = want.decode("utf-8", errors="replace").encode("utf-8")
            got, err = self._safe(lambda i=i: backend.decode_bytes([i]))
            if err or got != want:
                bad_ids.append(i)
        detail = f"{len(bad_ids)} ids decode wrongly, first {bad_ids[:10]}"
        self._record(res, backend, "single_tokens", probe, not bad_ids, detail)

    def _default(self, res: BackendResult, backend: Backend) -> None:
        got, err = self._safe(lambda: backend.default_encode(INJECTION_TEXT))
        if err:
            behaviour = "raises"
        elif any(i >= self.first_special for i in got):
            behaviour = "unsafe"
        else:
            behaviour = "safe"
        res.default_behaviour = behaviour
        expected = self.fx.defaults.get(backend.name)
        probe = Probe("default:injection", "default", INJECTION_TEXT)
        ok = expected is None or expected == behaviour
        why = f" ({err})" if err else ""
        self._record(
            res,
            backend,
            "default",
            probe,
            ok,
            f"default behaviour changed: expected {expected}, now {behaviour}{why}",
        )

    def _chat(self, res: BackendResult, backend: Backend, chat: Chat) -> None:
        probe = Probe(chat.id, "chat", "")
        if getattr(backend, "chat_requires_assistant", False) and not any(
            m.get("role") == "assistant" for m in chat.messages
        ):
            return  # not applicable: e.g. TRL refuses examples with nothing to train on
        want = self.ref_chat(chat)
        got, err = self._safe(
            lambda: backend.chat(chat.messages, add_generation_prompt=chat.add_generation_prompt)
        )
        injected = any(s in m.get("content", "") for m in chat.messages for s in self.specials)
        if injected:
            unsafe = err is None and got[0] != want[0]
            res.chat_injection = "unsafe" if unsafe or res.chat_injection == "unsafe" else "safe"
            res.tally("chat_injection", "pass")
            return
        if err:
            self._record(res, backend, "chat", probe, False, err)
            return
        ids_ok, mask_ok = got[0] == want[0], got[1] == want[1]
        window = None if ids_ok else first_window(want[0], got[0], self.ref)
        detail = "ids differ" if not ids_ok else "assistant mask differs"
        self._record(res, backend, "chat", probe, ids_ok and mask_ok, detail, window)

    def ref_chat(self, chat: Chat) -> tuple[list[int], list[int]]:
        from stacktok_export.chat import render_conversation

        return render_conversation(chat.messages, self.ref, add_generation_prompt=chat.add_generation_prompt)

    def stale_declarations(self, results: Sequence[BackendResult]) -> list[str]:
        """Declarations for backends that ran, covered probes, and matched no failure."""
        used = {f.declared for r in results for f in r.failures if f.declared}
        ran = {r.name: r.version for r in results if r.status in ("ok", "diverged")}
        stale = []
        for d in self.fx.divergences:
            if d.backend not in ran or d.id in used:
                continue
            covered = any(
                d.covers(
                    backend=d.backend,
                    version=ran[d.backend],
                    check=d.check if d.check != "*" else "encode",
                    probe=p,
                )
                for p in self.fx.probes
            )
            if covered:
                stale.append(d.id)
        return stale


def _diff_bytes(want: bytes, got: bytes | None) -> str:
    if got is None:
        return "no output"
    pos = first_difference(want, got)
    return f"bytes differ at offset {pos}: want {want[pos : pos + 12]!r}, got {got[pos : pos + 12]!r}"


def run_suite(
    exports: Exports, fixtures: FixtureSet, names: Sequence[str], *, progress=None, workers: int = 1
) -> tuple[list[BackendResult], list[str], Runner]:
    """Run ``names`` (up to ``workers`` at once) against the reference; keep ``names`` order."""
    ref = StackTokenizer.load(exports.artifact)
    runner = Runner(ref, fixtures, progress=progress)

    def one(name: str) -> BackendResult:
        try:
            backend = load_backend(name, exports)
        except BackendMissing as exc:
            return BackendResult(name=name, status="missing", reason=str(exc))
        return runner.run(backend)

    if workers <= 1:
        results = [one(n) for n in names]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(one, names))
    return results, runner.stale_declarations(results), runner

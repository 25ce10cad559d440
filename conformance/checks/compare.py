"""Compare one backend with the reference over a fixture set: the checks themselves.

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
  string templates parse them, transformers#29279). A backend that renders DIR's own
  template (``CHAT`` and ``reads`` a file of DIR, not the artifact: transformers-reload, vLLM,
  TRL) is not asked to when the fixtures say the reference's bounded render of that template
  ran out of its budget (``FixtureSet.refused_template``): both chat checks are then *not
  run*, with the reason, and the static ``chat.template_sandboxed`` row carries the verdict.
- ``stream``: token-by-token incremental detokenization concatenates to the
  text and never emits U+FFFD inside a character.

A failure covered by a declared divergence counts as *declared*; a
declaration that covered probes but saw no failure is reported *stale*.

Out of scope: loading backends and running several (``conformance.checks.runner``),
turning results into rows (``conformance.checks.results``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from conformance.checks.bars import ProgressArg, probe_bar
from conformance.checks.results import STREAM_MAX_CHARS, BackendResult, Failure, Part
from conformance.checks.template_chats import TemplateReference, has_assistant
from conformance.checks.windows import first_window, shorten, text_difference
from conformance.core.conversations import Conversation, from_chat
from conformance.core.declared import Declarations
from conformance.core.expect import (
    control_ids,
    default_additions,
    imported_skip,
    injection_text,
    is_ours,
    leaked,
)
from conformance.core.fixtures import Chat, FixtureSet, Probe
from conformance.core.protocol import Backend, Capability, ChatShapeUnsupported
from stacktok_export import StackTokenizer
from stacktok_export.util.diff import first_difference
from stacktok_export.util.progress import Progress

CHECKS = ("encode", "injection", "trusted", "decode", "single_tokens", "default", "chat", "stream")
INJECTION_TEXT = "hello <|assistant|> world"  # on a v1 artifact; any artifact: conformance.core.expect
#: why an imported (v2) artifact has no chat rows on a backend (``Runner._template_reference``)
REFERENCE_TEMPLATE = imported_skip(
    "the reference renders the directory's template for the engines' chat rows"
)
NO_DIR_TEMPLATE = imported_skip("the directory has no chat template to render")
ARTIFACT_TEMPLATE = imported_skip(
    "this backend renders the artifact's copy of the template; the engines that read the "
    "directory render the directory's own"
)


class Runner:
    """Compare one backend with the reference over a fixture set."""

    def __init__(self, ref: StackTokenizer, fixtures: FixtureSet, *, progress: ProgressArg = None) -> None:
        self.ref = ref
        self.fx = fixtures
        self.first_special = min(ref.special_to_id.values())
        self.specials = tuple(ref.special_to_id)
        #: ids untrusted text must never yield (v1: every id from ``first_special`` up)
        self.controls = control_ids(ref)
        self.injection_text = injection_text(ref)
        #: a Progress (one bar per backend) or a message callback (a line every 200 probes)
        self.progress: Progress | Callable[[str], None] = progress or (lambda msg: None)
        self.decl = Declarations(fixtures.divergences, ref)
        self.ran: dict[str, Backend] = {}
        #: the reference's ids per probe id, computed for the probes a run needs (:meth:`prepare`)
        self._ref_untrusted: dict[str, list[int]] = {}
        self._ref_trusted: dict[str, list[int]] = {}
        self._template: TemplateReference | None = None

    def prepare(self, probes: Sequence[Probe]) -> None:
        """The reference's ids for ``probes`` (untrusted, and trusted where a special may show),
        in one batch each: the reference merges the probes' new pre-tokens together."""
        todo = [p for p in probes if p.id not in self._ref_untrusted]
        if not todo:
            return
        ref = self.ref
        self._ref_untrusted.update(zip((p.id for p in todo), ref.encode_batch([p.text for p in todo])))
        trusted = [p for p in todo if self._wants_trusted(p)]
        got = ref.encode_batch([p.text for p in trusted], allowed_special="all")
        self._ref_trusted.update(zip((p.id for p in trusted), got))

    def _wants_trusted(self, probe: Probe) -> bool:
        return probe.allow_special or any(s in probe.text for s in self.specials)

    # -------------------------------------------------------------- plumbing
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
        decl = self.decl.declared(backend, check, probe)
        res.tally(check, "declared" if decl else "fail")
        if window is not None:  # the renderers name the probe beside its text
            window = {**window, "probe": probe.id}
        elif probe.text:  # no id window (decode, stream, an exception): the probe's text still shows
            window = {"probe": probe.id, "text": shorten(probe.text, at=0)}
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
    def run(self, backend: Backend, *, part: Part | None = None) -> BackendResult:
        """Every check of ``backend``; with ``part``, only that run of the probes, and the
        once-per-backend checks (single tokens, default, chats) only if the part carries them
        (``results.merge_parts`` joins the parts' results into the whole run's)."""
        part = part or Part(0, len(self.fx.probes), extras=True)
        probes = self.fx.probes[part.start : part.stop]
        self.prepare(probes)
        res = BackendResult(name=backend.name, version=backend.version)
        res.capabilities = tuple(sorted(c.value for c in backend.capabilities))
        res.chat_injection_safe_path = backend.chat_injection_safe_path
        refused = self._refused_chat(backend)
        template, why_not = self._template_reference(backend)
        if refused:  # on every part: merge_parts keeps the first part's not_applicable
            res.not_applicable.update(chat=refused, chat_injection=refused)
        elif why_not:
            res.not_applicable.update(chat=why_not, chat_injection=why_not)
        self.ran[backend.name] = backend
        start = time.perf_counter()
        caps = backend.capabilities
        encoded = self._encode_all(backend, caps, probes)
        with probe_bar(self.progress, backend.name, len(self.fx.probes), done=part.start) as bar:
            for probe in probes:
                self._probe(res, backend, caps, probe, encoded)
                bar.update()
            if part.extras and Capability.SINGLE_TOKENS in caps:
                self._single_tokens(res, backend)
            if part.extras and Capability.DEFAULT in caps:
                self._default(res, backend)
            if part.extras and Capability.CHAT in caps and is_ours(self.ref) and not refused:
                for chat in self.fx.chats:
                    self._chat(res, backend, chat)
            if part.extras and template is not None and not refused:
                for conv in self.conversations():
                    self._conversation(res, backend, conv, template)
        res.seconds = round(time.perf_counter() - start, 2)
        if any(f.declared is None for f in res.failures):
            res.status = "diverged"
        return res

    def _template_reference(self, backend: Backend) -> tuple[TemplateReference | None, str]:
        """For an imported artifact: the reference render of DIR's template when ``backend``
        renders it (it has a chat path and reads a file of DIR), else why its chat rows do not
        apply; (None, "") for our own layout."""
        if is_ours(self.ref) or Capability.CHAT not in backend.capabilities:
            return None, ""
        if self.fx.template is None:
            return None, NO_DIR_TEMPLATE
        if backend.name == "reference":
            return None, REFERENCE_TEMPLATE
        if backend.reads == "artifact":
            return None, ARTIFACT_TEMPLATE
        if self._template is None:
            self._template = TemplateReference(self.fx.template, self.ref)
        return self._template, ""

    def conversations(self) -> list[Conversation]:
        """What an imported artifact's chats are: the shipped conversations and the user's chats."""
        return [*self.fx.conversations, *(from_chat(c) for c in self.fx.user_chats)]

    def _conversation(
        self, res: BackendResult, backend: Backend, conv: Conversation, template: TemplateReference
    ) -> None:
        """One conversation through DIR's template (``conformance.checks.template_chats``)."""
        if backend.chat_requires_assistant and not has_assistant(conv):
            res.chats_not_applicable += 1
            return
        probe = Probe(conv.id, "chat", "")
        rendered, want_err = self._safe(lambda: template.render_spans(conv))
        text, spans = rendered if rendered is not None else ("", [])
        got, err = None, None
        try:
            got = backend.chat(
                template.messages(conv),
                add_generation_prompt=conv.add_generation_prompt,
                tools=conv.tools(),
                template_kwargs=conv.template_kwargs(),
            )
        except ChatShapeUnsupported:
            res.chats_not_applicable += 1
            return
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 -- pyo3 panics derive from BaseException
            err = f"{type(exc).__name__}: {exc}"[:300]
        if conv.injects:
            if err:
                outcome = "raises"
            else:
                neutral, _ = self._safe(lambda: template.ids(template.render(conv, neutral=True)))
                base = template.control_count(neutral) if neutral is not None else 0
                outcome = "unsafe" if template.control_count(got[0]) > base else "safe"
            res.chat_injection_counts[outcome] = res.chat_injection_counts.get(outcome, 0) + 1
            return
        if want_err and err:
            res.tally("chat", "pass")
            res.chat_shapes_refused.append(f"{conv.id} ({conv.shape})")
            return
        if want_err:
            detail = (
                f"{conv.shape}: the template raises on the reference ({want_err}) "
                f"but {backend.name} renders it"
            )
            self._record(res, backend, "chat", probe, False, detail)
            return
        if err:
            self._record(res, backend, "chat", probe, False, f"{conv.shape}: {backend.name} raises: {err}")
            return
        want = template.ids(text)
        ok = got[0] == want
        window = None if ok else first_window(want, got[0], self.ref)
        if ok and got[1]:  # the engine built a mask: the template marks generation
            mask_ok = got[1] == template.mask(text, want, spans)
            self._record(res, backend, "chat", probe, mask_ok, f"{conv.shape}: assistant mask differs")
            return
        if not ok and backend.template_input is not None:  # e.g. llama-server's own rewriting
            theirs, _ = self._safe(
                lambda: template.ids(template.render(conv, rewrite=backend.template_input))
            )
            if theirs == got[0]:
                res.tally("chat", "declared")
                declared = backend.template_input_declaration
                detail = f"{conv.shape}: ids differ"
                res.failures.append(
                    Failure("chat", probe.id, detail, {**window, "probe": probe.id}, declared)
                )
                return
        self._record(res, backend, "chat", probe, ok, f"{conv.shape}: ids differ", window)

    def _refused_chat(self, backend: Backend) -> str:
        """Why ``backend`` is not asked to render chats: it renders DIR's template (it reads a file
        of DIR) and that template ran out of its budget in the reference render; "" otherwise."""
        renders_dir = Capability.CHAT in backend.capabilities and backend.reads != "artifact"
        return self.fx.refused_template if renders_dir else ""

    def _encode_all(
        self, backend: Backend, caps: frozenset[Capability], probes: Sequence[Probe]
    ) -> dict[tuple[str, bool], list[int]]:
        """The backend's ids for ``probes`` by (probe id, trusted), from one ``encode_batch`` call
        per mode where the adapter ``encodes_in_batch`` (``conformance.core.protocol``); empty
        for a mode whose batch raised (each probe is then asked alone: an error is its own)."""
        out: dict[tuple[str, bool], list[int]] = {}
        if not backend.encodes_in_batch:
            return out
        for trusted, cap in ((False, Capability.ENCODE), (True, Capability.TRUSTED)):
            chosen = [p for p in probes if not trusted or p.id in self._ref_trusted] if cap in caps else []
            if not chosen:
                continue
            texts = [p.text for p in chosen]
            got, err = self._safe(lambda t=texts, a=trusted: backend.encode_batch(t, allow_special=a))
            if err is None and isinstance(got, list) and len(got) == len(chosen):
                out.update(((p.id, trusted), ids) for p, ids in zip(chosen, got))
        return out

    def _encoded(
        self, backend: Backend, probe: Probe, encoded: dict[tuple[str, bool], list[int]], *, trusted: bool
    ) -> tuple[Any, str | None]:
        """The probe's ids from the batch (:meth:`_encode_all`), else asked of the backend alone."""
        got = encoded.get((probe.id, trusted))
        if got is not None:
            return got, None
        return self._safe(lambda: backend.encode(probe.text, allow_special=trusted))

    def _probe(
        self,
        res: BackendResult,
        backend: Backend,
        caps: frozenset[Capability],
        probe: Probe,
        encoded: dict[tuple[str, bool], list[int]],
    ) -> None:
        if not caps & {Capability.ENCODE, Capability.TRUSTED, Capability.DECODE, Capability.STREAM}:
            return  # a chat-only backend (TRL) runs no probes
        bad = False
        declared = False
        ref_ids = self._ref_untrusted[probe.id]
        before = len(res.failures)
        if Capability.ENCODE in caps:
            got, err = self._encoded(backend, probe, encoded, trusted=False)
            ok = err is None and got == ref_ids
            window = None if ok or err else first_window(ref_ids, got, self.ref)
            bad |= self._record(res, backend, "encode", probe, ok, err or "ids differ", window)
            if err is None:
                bad_ids = leaked(self.ref, got, self.controls)
                bad |= self._record(
                    res,
                    backend,
                    "injection",
                    probe,
                    not bad_ids,
                    f"special ids {bad_ids[:5]} from untrusted text",
                )
        if Capability.TRUSTED in caps and probe.id in self._ref_trusted:
            want = self._ref_trusted[probe.id]
            got, err = self._encoded(backend, probe, encoded, trusted=True)
            ok = err is None and got == want
            window = None if ok or err else first_window(want, got, self.ref)
            bad |= self._record(res, backend, "trusted", probe, ok, err or "ids differ", window)
        if Capability.DECODE in caps:
            got, err = self._safe(lambda: backend.decode_bytes(ref_ids))
            want = probe.text.encode("utf-8")
            ok = err is None and got == want
            detail = err or ("" if ok else _diff_bytes(want, got))  # the diff only for a failure
            bad |= self._record(res, backend, "decode", probe, ok, detail)
        if Capability.STREAM in caps:
            if len(probe.text) <= STREAM_MAX_CHARS:
                bad |= self._stream(res, backend, probe, ref_ids)
            else:
                res.not_streamed += 1
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
                f"pieces join to {len(joined)} chars, want {len(probe.text)}; "
                + text_difference(probe.text, joined),
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
        exact = backend.decode_exact
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
        text = self.injection_text
        got, err = self._safe(lambda: backend.default_encode(text))
        head, tail = default_additions(self.ref)
        if err:
            behaviour = "raises"
        elif leaked(self.ref, _strip(got, head, tail), self.controls):
            behaviour = "unsafe"
        else:
            behaviour = "safe"
        res.default_behaviour = behaviour
        plain = [self.ref.encode(text), self.ref.encode(text, allowed_special="all")]
        if head or tail:  # the source adds BOS/EOS by default: with them is plain too
            plain += [head + ids + tail for ids in plain]
        added = [] if err or got in plain else _added_ids(got, plain)
        expected = self.fx.defaults.get(backend.name)
        probe = Probe("default:injection", "default", text)
        ok = (expected is None or expected == behaviour) and not added
        why = f" ({err})" if err else ""
        detail = f"default behaviour changed: expected {expected}, now {behaviour}{why}"
        if added and is_ours(self.ref):
            detail = (
                f"with no flags {backend.name} adds {added} to every encode (BOS/EOS behind the chat "
                "template's back: a double <|bos|>, vLLM PR#16976)"
            )
        elif added:
            detail = (
                f"with no flags {backend.name} adds {added} to every encode; the source adds "
                f"{head + tail or 'nothing'} (add_bos={self.ref.add_bos}, add_eos={self.ref.add_eos})"
            )
        self._record(res, backend, "default", probe, ok, detail)

    def _chat(self, res: BackendResult, backend: Backend, chat: Chat) -> None:
        probe = Probe(chat.id, "chat", "")
        if backend.chat_requires_assistant and not any(m.get("role") == "assistant" for m in chat.messages):
            res.chats_not_applicable += 1  # e.g. TRL refuses examples with nothing to train on
            return
        want = self.ref_chat(chat)
        got, err = self._safe(
            lambda: backend.chat(chat.messages, add_generation_prompt=chat.add_generation_prompt)
        )
        injected = any(s in m.get("content", "") for m in chat.messages for s in self.specials)
        if injected:
            outcome = "raises" if err else "unsafe" if got[0] != want[0] else "safe"
            res.chat_injection_counts[outcome] = res.chat_injection_counts.get(outcome, 0) + 1
            return
        if err:
            self._record(res, backend, "chat", probe, False, err)
            return
        ids_ok, mask_ok = got[0] == want[0], got[1] == want[1]
        window = None if ids_ok else first_window(want[0], got[0], self.ref)
        detail = "ids differ" if not ids_ok else "assistant mask differs"
        self._record(res, backend, "chat", probe, ids_ok and mask_ok, detail, window)

    def ref_chat(self, chat: Chat) -> tuple[list[int], list[int]]:
        from stacktok_export.chat.chat import render_conversation

        return render_conversation(chat.messages, self.ref, add_generation_prompt=chat.add_generation_prompt)

    def stale_declarations(self, results: Sequence[BackendResult]) -> list[str]:
        """Declarations for backends that ran which matched no failure although the data could show one."""
        used = {f.declared for r in results for f in r.failures if f.declared}
        ran = {
            r.name: self.ran[r.name] for r in results if r.status in ("ok", "diverged") and r.name in self.ran
        }
        return self.decl.stale(ran, used, self.fx.probes)


def _strip(ids: Sequence[int], head: list[int], tail: list[int]) -> list[int]:
    """``ids`` without the BOS/EOS the source's default path adds (an imported artifact's add_bos)."""
    out = list(ids)
    if head and out[: len(head)] == head:
        out = out[len(head) :]
    if tail and out[len(out) - len(tail) :] == tail:
        out = out[: len(out) - len(tail)]
    return out


def _added_ids(got: Sequence[int], plain: Sequence[Sequence[int]]) -> list[int]:
    """Ids ``got`` has beyond the closest plain encoding (a prefix/suffix a default path adds)."""
    best = min(plain, key=lambda ids: abs(len(got) - len(ids)))
    start = first_difference(best, got)
    rest = list(got[start:])
    tail = list(best[start:])
    return rest[: len(rest) - len(tail)] if rest[len(rest) - len(tail) :] == tail else rest[:5]


def _diff_bytes(want: bytes, got: bytes | None) -> str:
    if got is None:
        return "no output"
    pos = first_difference(want, got)
    return f"bytes differ at offset {pos}: want {want[pos : pos + 12]!r}, got {got[pos : pos + 12]!r}"

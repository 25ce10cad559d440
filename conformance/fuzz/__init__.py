"""``stacktok fuzz DIR``: differential fuzzing of every backend against the reference.

    stacktok fuzz DIR [--artifact PATH] [--backends LIST] [--seconds N | --examples N]
                      [--seed S] [--out FILE.jsonl] [--generators LIST] [--keep K]

Every selected backend loads DIR's exports exactly as the gate does
(``Exports.discover`` + ``conformance.backends.load_backend``). Inputs come
from the named generators in :mod:`conformance.fuzz.generators`; each one is
encoded by the reference (the frozen artifact) and by every backend, in the
untrusted mode (``allow_special=False`` vs ``encode(text)``) and -- when the
input contains ``"<|"`` -- also in the trusted mode (``allow_special=True`` vs
``encode(text, allowed_special="all")``). A backend that raises counts as a
divergence too. Only the modes a backend declares are checked (``ENCODE``
for untrusted, ``TRUSTED`` for trusted); a backend without ``ENCODE`` (TRL is
chat-only, llama.cpp-detokenize decode-only) is reported *skipped*, one whose library is absent *missing*.

Determinism. Example ``i`` of seed ``S`` is drawn with
``random.Random(f"{S}/{i}")`` (generator choice and text), so ``--examples N``
checks exactly examples ``0 .. N-1`` and the same seed writes the same
``--out`` file byte for byte. ``--seconds T`` checks a time-dependent prefix
of the same stream. Backends run in parallel, one thread each, over the same
batches in the same order; each keeps, per (mode, generator), its first
``--keep`` divergent examples by index, so what is kept never depends on
thread timing. Shrinking is deterministic (below) and runs after the loop.

Shrinking. Each kept divergence is reduced by a greedy delta-debugging
shrinker that keeps the divergence (same backend, same mode, same kind:
different ids or an exception): drop whole pre-tokens, then chunks of halving
size down to single characters, then replace characters by simpler ones
(``a``, space, ``0``, newline, ``.``, ``A``, ``'``), repeated to a fixpoint
(at most ``SHRINK_CALLS`` oracle calls per input). The minimal inputs are
printed with the first-divergence window (``runner.first_window``: position,
ids +-3 with bytes from both sides) and written to ``--out`` as probe JSONL
(category ``fuzz``), deduplicated by (backend, mode, minimal text), ready for
``stacktok gate --probes FILE`` and for ``fixtures/``.

Declared divergences -- the rule is :mod:`conformance.core.declared`'s, the same
the gate applies. Fuzz inputs have no probe ids, so only ``unicode_tables``
declarations can apply: a code point is *declared for B* when B has such a
declaration and splits text around it differently from the reference
(measured, cached). A divergent input is *declared* when it contains a
declared code point and the same input with every declared code point
removed no longer diverges (same mode). Otherwise it is undeclared, and the
input with those code points removed is what gets shrunk -- so an undeclared
divergence can never hide behind a declared one. A declared input is shrunk
keeping both properties, only for display (one per backend), and is not
written to ``--out``. The trusted path splits non-special text with the same
regex, so the ``encode`` declarations apply to both modes.

Exit codes: 0 no undeclared divergence; 1 an undeclared divergence, or a
backend that cannot load the export or whose adapter crashed; 2 usage error
(bad directory, no backend to fuzz, bad numbers, ``--out`` inside DIR).

Out of scope: decoding, chat and streaming checks (the gate runs those on the
fixed probes), inputs over a few thousand characters, and fixing anything --
each counterexample says which backend and mode diverge; the engineer
re-exports or declares a cited divergence.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import queue
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export._atomic import write_text_atomic
from stacktok_export.bpe import shipped_artifact_path
from stacktok_export.pretokenize import compile_pattern
from stacktok_export.progress import Progress

from conformance.backends import REFERENCE, REGISTRY, backend_list, load_backend
from conformance.core.declared import LONG_S, LONG_S_TEXT, Declarations
from conformance.core.fixtures import FixtureSet
from conformance.fuzz.generators import GENERATORS, GenContext, pick
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, BackendMissing, Capability
from conformance.core.rows import Row, exit_code
from conformance.checks.runner import first_window
from conformance.validate import input_errors, validate_directory

UNTRUSTED, TRUSTED = "untrusted", "trusted"
MODES = (UNTRUSTED, TRUSTED)
DEFAULT_BACKENDS = tuple(n for n in REGISTRY if n != REFERENCE)
DEFAULT_EXAMPLES = 20_000
BATCH = 64  # examples handed to the backend threads at a time
QUEUE_BATCHES = 8  # batches a slow backend may lag behind the generator
SHRINK_CALLS = 4000  # oracle calls one shrink may make
SIMPLE_CHARS = "a 0\n.A'"  # replacement candidates, simplest first
PROGRESS_EVERY = 10.0  # seconds between progress lines


class FuzzUsageError(Exception):
    """Exit 2 with this one-line reason."""


# ----------------------------------------------------------------- examples
@dataclass(frozen=True)
class Example:
    index: int
    generator: str
    text: str
    modes: tuple[str, ...]


def make_example(seed: int, index: int, names: Sequence[str], ctx: GenContext) -> Example:
    """Example ``index`` of ``seed``: a pure function of its arguments."""
    rng = random.Random(f"{seed}/{index}")
    name = pick(rng, names)
    text = GENERATORS[name][0](rng, ctx)
    modes = MODES if "<|" in text else (UNTRUSTED,)
    return Example(index, name, text, modes)


def reference_ids(ref: StackTokenizer, text: str, mode: str) -> list[int]:
    return ref.encode(text, allowed_special="all" if mode == TRUSTED else frozenset())


# ---------------------------------------------------- declared divergences
@dataclass(frozen=True)
class UnicodeDeclarations:
    """What a backend's cause declarations excuse in generated text -- the shared rule of
    :mod:`conformance.core.declared`: code points the backend splits differently (``unicode_tables``)
    and ``'ſ`` (``long_s_contraction``)."""

    declarations: Declarations
    backend: Backend
    declaration: str | None  # id of the backend's unicode_tables declaration, if any
    long_s: str | None = None  # id of its long_s_contraction declaration, if any

    @classmethod
    def for_backend(cls, declarations: Declarations, backend: Backend) -> UnicodeDeclarations:
        tables = declarations.has_cause(backend, "encode")
        long_s = declarations.has_cause(backend, "encode", LONG_S)
        return cls(declarations, backend, tables.id if tables else None, long_s.id if long_s else None)

    def declared_by(self, ch: str) -> str | None:
        if self.declaration is None:
            return None
        return self.declaration if self.declarations.drifts(self.backend, ch) else None

    def strip(self, text: str) -> str:
        if self.long_s is not None:
            text = text.replace(LONG_S_TEXT, "'")
        if text.isascii() or self.declaration is None:
            return text
        return "".join(ch for ch in text if self.declared_by(ch) is None)

    def first_declaration(self, text: str) -> str | None:
        found = next((d for ch in text if (d := self.declared_by(ch)) is not None), None)
        if found is None and self.long_s is not None and LONG_S_TEXT in text:
            return self.long_s
        return found


# ------------------------------------------------------------------ oracle
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


# ---------------------------------------------------------------- shrinking
@dataclass(frozen=True)
class Shrunk:
    text: str
    calls: int
    seconds: float


def _simplicity(ch: str) -> int:
    i = SIMPLE_CHARS.find(ch)
    return i if i >= 0 else len(SIMPLE_CHARS) + ord(ch)


def _drop_pieces(s: str, test: Callable[[str], bool], split: Callable[[str], list[str]]) -> str:
    pieces = split(s)
    i = 0
    while i < len(pieces) and len(pieces) > 1:
        cand = pieces[:i] + pieces[i + 1 :]
        if test("".join(cand)):
            pieces = cand
        else:
            i += 1
    return "".join(pieces)


def _drop_chunks(s: str, test: Callable[[str], bool]) -> str:
    n = len(s) // 2
    while n >= 1:
        i, removed = 0, False
        while i < len(s):
            cand = s[:i] + s[i + n :]
            if cand and test(cand):
                s, removed = cand, True
            else:
                i += n
        n = min(n, len(s) // 2) if removed else n // 2
    return s


def _simplify_chars(s: str, test: Callable[[str], bool]) -> str:
    for i in range(len(s)):
        for ch in SIMPLE_CHARS:
            if _simplicity(ch) >= _simplicity(s[i]):
                break
            cand = s[:i] + ch + s[i + 1 :]
            if test(cand):
                s = cand
                break
    return s


def shrink(
    text: str, fails: Callable[[str], bool], *, split: Callable[[str], list[str]], budget: int = SHRINK_CALLS
) -> Shrunk:
    """Greedy, deterministic delta debugging: the smallest, simplest input that still fails."""
    start = time.perf_counter()
    memo: dict[str, bool] = {text: True}

    def test(cand: str) -> bool:
        if cand not in memo:
            memo[cand] = len(memo) <= budget and fails(cand)
        return memo[cand]

    s = text
    while True:
        before = s
        s = _drop_pieces(s, test, split)
        s = _drop_chunks(s, test)
        s = _simplify_chars(s, test)
        if s == before or len(memo) > budget:
            break
    return Shrunk(s, len(memo) - 1, time.perf_counter() - start)


# ------------------------------------------------------------ per backend
@dataclass(frozen=True)
class Raw:
    """A divergent example as found, before shrinking."""

    index: int
    generator: str
    mode: str
    kind: str
    text: str  # what gets shrunk (declared code points already removed if undeclared)
    original: str
    declared: str | None


@dataclass
class Counterexample:
    backend: str
    mode: str
    generator: str
    index: int
    kind: str
    original: str
    text: str
    declared: str | None
    window: dict[str, Any] | None
    detail: str
    shrunk: Shrunk

    def probe(self, seed: int) -> dict[str, Any]:
        digest = hashlib.sha256(f"{self.backend}\0{self.mode}\0{self.text}".encode("utf-8", "surrogatepass"))
        return {
            "id": f"fuzz-{self.backend}-{digest.hexdigest()[:12]}",
            "category": "fuzz",
            "text": self.text,
            "allow_special": self.mode == TRUSTED,
            "source": f"stacktok fuzz seed={seed} backend={self.backend} generator={self.generator}",
        }


@dataclass
class BackendRun:
    name: str
    version: str = ""
    status: str = "ok"  # ok | missing | skipped | error
    reason: str = ""
    examples: int = 0
    checks: int = 0
    seconds: float = 0.0
    undeclared: int = 0
    declared: int = 0
    raises: int = 0
    kept: dict[tuple[str, str], list[Raw]] = field(default_factory=dict)
    first_declared: Raw | None = None
    counterexamples: list[Counterexample] = field(default_factory=list)
    declared_examples: list[Counterexample] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0


Batch = list[tuple[Example, dict[str, list[int]]]]


def _classify(oracle: Oracle, ex: Example, mode: str, obs: Observation) -> Raw:
    stripped = oracle.decl.strip(ex.text)
    if stripped != ex.text:
        again = oracle.observe(stripped, mode)
        if again is None:
            return Raw(
                ex.index,
                ex.generator,
                mode,
                obs.kind,
                ex.text,
                ex.text,
                oracle.decl.first_declaration(ex.text),
            )
        return Raw(ex.index, ex.generator, mode, again.kind, stripped, ex.text, None)
    return Raw(ex.index, ex.generator, mode, obs.kind, ex.text, ex.text, None)


def check_batch(oracle: Oracle, run: BackendRun, batch: Batch, keep: int) -> None:
    for ex, wants in batch:
        run.examples += 1
        for mode in ex.modes:
            if mode not in oracle.modes:
                continue
            run.checks += 1
            obs = oracle.observe(ex.text, mode, wants[mode])
            if obs is None:
                continue
            run.raises += obs.kind == "raises"
            raw = _classify(oracle, ex, mode, obs)
            if raw.declared:
                run.declared += 1
                run.first_declared = run.first_declared or raw
                continue
            run.undeclared += 1
            kept = run.kept.setdefault((mode, ex.generator), [])
            if len(kept) < keep:
                kept.append(raw)


def _worker(oracle: Oracle, run: BackendRun, inbox: queue.Queue, keep: int) -> None:
    while (batch := inbox.get()) is not None:
        if run.status == "error":
            continue  # keep draining so the generator never blocks
        try:
            check_batch(oracle, run, batch, keep)
        except Exception as exc:  # an adapter bug, not an input finding
            run.status, run.reason = "error", f"{type(exc).__name__}: {exc}"[:300]
    run.seconds = oracle.busy


def shrink_backend(oracle: Oracle, run: BackendRun) -> None:
    """Shrink the kept raws of one backend (in index order) and dedupe the results."""
    split = compile_pattern(oracle.ref.pattern).findall
    raws = sorted((r for rs in run.kept.values() for r in rs), key=lambda r: (r.index, MODES.index(r.mode)))
    seen: set[tuple[str, str]] = set()
    for raw in raws:
        cx = _shrink_one(oracle, run.name, raw, lambda t, r=raw: oracle.fails(t, r.mode, r.kind), split)
        if (cx.mode, cx.text) not in seen:
            seen.add((cx.mode, cx.text))
            run.counterexamples.append(cx)
    if run.first_declared is not None:
        raw = run.first_declared
        fails = lambda t: oracle.fails_declared(t, raw.mode, raw.kind)  # noqa: E731
        run.declared_examples.append(_shrink_one(oracle, run.name, raw, fails, split))


def _shrink_one(
    oracle: Oracle, name: str, raw: Raw, fails: Callable[[str], bool], split: Callable[[str], list[str]]
) -> Counterexample:
    shrunk = shrink(raw.text, fails, split=split)
    want = reference_ids(oracle.ref, shrunk.text, raw.mode)
    obs = oracle.observe(shrunk.text, raw.mode, want)
    window = first_window(want, obs.ids, oracle.ref) if obs is not None and obs.ids is not None else None
    detail = obs.error if obs is not None and obs.kind == "raises" else ""
    declared = (oracle.decl.first_declaration(shrunk.text) or raw.declared) if raw.declared else None
    return Counterexample(
        name,
        raw.mode,
        raw.generator,
        raw.index,
        raw.kind,
        raw.original,
        shrunk.text,
        declared,
        window,
        detail,
        shrunk,
    )


# ---------------------------------------------------------------- the run
@dataclass
class FuzzConfig:
    directory: Path
    artifact: Path
    backends: Sequence[str]
    seed: int = 0
    examples: int | None = DEFAULT_EXAMPLES
    seconds: float | None = None
    generators: Sequence[str] = tuple(GENERATORS)
    keep: int = 1
    out: Path | None = None


@dataclass
class FuzzReport:
    config: FuzzConfig
    runs: list[BackendRun]
    examples: int
    loop_seconds: float
    shrink_seconds: float
    reference_seconds: float

    @property
    def counterexamples(self) -> list[Counterexample]:
        return [cx for r in self.runs for cx in r.counterexamples]

    def rows(self) -> list[Row]:
        """One ``fuzz.encode`` row per backend (the shared row model)."""
        out = []
        for r in self.runs:
            status = {"missing": "missing", "skipped": "skip", "error": "error"}.get(r.status)
            if status:
                out.append(Row("fuzz.encode", r.name, status, r.reason))
            elif r.counterexamples:
                first = r.counterexamples[0]
                out.append(
                    Row(
                        "fuzz.encode",
                        r.name,
                        "fail",
                        f"{r.undeclared} undeclared divergence(s) in {r.examples} examples, "
                        f"minimal: {first.text!r:.80} ({first.mode})",
                        "feed the counterexamples back with `stacktok gate --probes`, then re-export "
                        "or declare a cited divergence",
                    )
                )
            else:
                out.append(Row("fuzz.encode", r.name, "pass", f"{r.examples} examples", declared=r.declared))
        return out

    @property
    def exit_code(self) -> int:
        return exit_code(self.rows())


Loaded = tuple[StackTokenizer, FixtureSet, list[tuple[Backend, BackendRun]], list[BackendRun]]


def _load(config: FuzzConfig, say: Callable[[str], None]) -> Loaded:
    try:
        ref = StackTokenizer.load(config.artifact)
        exports = Exports.discover(config.directory, artifact=config.artifact)
        if exports.hf_dir is None and exports.gguf is None and exports.tiktoken is None:
            raise FuzzUsageError(f"{config.directory} has no tokenizer.json, *.gguf or *.tiktoken to fuzz")
        validate_directory(exports, directory=config.directory)  # malformed files: exit 2, as in the gate
        fixtures = FixtureSet.load()
    except input_errors() as exc:
        raise FuzzUsageError(str(exc)) from None
    loaded: list[tuple[Backend, BackendRun]] = []
    unloaded: list[BackendRun] = []
    for name in config.backends:
        try:
            backend = load_backend(name, exports)
        except BackendMissing as exc:
            unloaded.append(BackendRun(name, status="missing", reason=str(exc)))
            continue
        except Exception as exc:  # the library refuses the export: a finding, not a usage error
            why = f"cannot load the export: {type(exc).__name__}: {exc}"[:300]
            unloaded.append(BackendRun(name, status="error", reason=why))
            continue
        if Capability.ENCODE not in backend.capabilities:
            why = "declares no encode capability (chat-only or decode-only): nothing to fuzz"
            unloaded.append(BackendRun(name, version=backend.version, status="skipped", reason=why))
            continue
        loaded.append((backend, BackendRun(name, version=backend.version)))
        say(f"loaded {name} {backend.version}")
    if not loaded and all(r.status in ("missing", "skipped") for r in unloaded):
        reasons = "; ".join(f"{r.name}: {r.reason}" for r in unloaded)
        raise FuzzUsageError(f"no backend to fuzz ({reasons}); install one or choose others with --backends")
    return ref, fixtures, loaded, unloaded


def _feed(
    config: FuzzConfig,
    ref: StackTokenizer,
    ctx: GenContext,
    inboxes: Sequence[queue.Queue],
    runs: Sequence[BackendRun],
    say: Callable[[str], None],
) -> tuple[int, float]:
    """Generate examples and their reference ids in batches until the budget is spent.

    Returns (examples generated, CPU seconds spent in the reference)."""
    names = list(config.generators)
    start = time.perf_counter()
    deadline = None if config.seconds is None else start + config.seconds
    next_progress, index, ref_seconds = start + PROGRESS_EVERY, 0, 0.0
    limit = config.examples
    while (limit is None or index < limit) and (deadline is None or time.perf_counter() < deadline):
        n = BATCH if limit is None else min(BATCH, limit - index)
        examples = [make_example(config.seed, i, names, ctx) for i in range(index, index + n)]
        t0 = time.thread_time()
        batch = [(ex, {m: reference_ids(ref, ex.text, m) for m in ex.modes}) for ex in examples]
        ref_seconds += time.thread_time() - t0
        for inbox in inboxes:
            inbox.put(batch)
        index += n
        if time.perf_counter() >= next_progress:
            next_progress += PROGRESS_EVERY
            found = ", ".join(f"{r.name} {r.undeclared}" for r in runs if r.undeclared)
            elapsed = time.perf_counter() - start
            say(f"{index} examples in {elapsed:.0f}s; undeclared so far: {found or 'none'}")
    return index, ref_seconds


def run_fuzz(config: FuzzConfig, say: Callable[[str], None] = lambda m: None) -> FuzzReport:
    ref, fixtures, loaded, unloaded = _load(config, say)
    if not loaded:
        return FuzzReport(config, unloaded, 0, 0.0, 0.0, 0.0)
    ctx = GenContext.build(ref, fixtures.probes)
    declarations = Declarations(fixtures.divergences, ref)
    oracles = [
        Oracle(b, StackTokenizer.load(config.artifact), UnicodeDeclarations.for_backend(declarations, b))
        for b, _ in loaded
    ]
    runs = [run for _, run in loaded]
    inboxes: list[queue.Queue] = [queue.Queue(maxsize=QUEUE_BATCHES) for _ in loaded]
    threads = [
        threading.Thread(target=_worker, args=(o, r, q, config.keep), daemon=True)
        for o, r, q in zip(oracles, runs, inboxes)
    ]
    for t in threads:
        t.start()
    start = time.perf_counter()
    try:
        examples, ref_seconds = _feed(config, ref, ctx, inboxes, runs, say)
    finally:
        for inbox in inboxes:
            inbox.put(None)
        for t in threads:
            t.join()
    loop_seconds = time.perf_counter() - start
    say(f"generated {examples} examples in {loop_seconds:.1f}s; shrinking")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(oracles)) as pool:
        list(pool.map(shrink_backend, oracles, runs))
    order = {name: i for i, name in enumerate(config.backends)}
    all_runs = sorted(runs + unloaded, key=lambda r: order[r.name])
    return FuzzReport(config, all_runs, examples, loop_seconds, time.perf_counter() - t0, ref_seconds)


# ---------------------------------------------------------------- output
def _clip(text: str, limit: int = 100) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 5] + "...'" + f" ({len(text)} chars)"


def describe(cx: Counterexample) -> list[str]:
    head = (
        f"DIVERGENCE {cx.backend} ({cx.mode}): generator={cx.generator} example={cx.index}, "
        f"shrunk {len(cx.original)} -> {len(cx.text)} chars in {cx.shrunk.calls} calls, "
        f"{cx.shrunk.seconds:.2f}s"
    )
    lines = [head, f"  input:   {_clip(cx.original)}", f"  minimal: {cx.text!r}"]
    if cx.kind == "raises":
        lines.append(f"  the backend raises: {cx.detail}")
    elif cx.window is not None:
        w = cx.window
        lines.append(
            f"  first difference at id {w['position']} (reference {w['reference_len']} ids, "
            f"backend {w['backend_len']} ids)"
        )
        lines.append(f"    reference: {json.dumps(w['reference'], ensure_ascii=True)}")
        lines.append(f"    backend:   {json.dumps(w['backend'], ensure_ascii=True)}")
    return lines


def _status(r: BackendRun) -> str:
    if r.status in ("missing", "skipped"):
        reason = r.reason if len(r.reason) <= 110 else r.reason[:105] + " ..."
        return f"{r.status}: {reason}"
    if r.status == "error":
        fix = "fix the export" if r.reason.startswith("cannot load") else "fix its adapter"
        return f"error: {r.reason} -> {fix}, then re-run"
    return "diverged" if r.counterexamples else "ok"


def _row(r: BackendRun) -> str:
    if r.status in ("missing", "skipped") or (r.status == "error" and not r.examples):
        return f"{r.name:20s} {r.version or '-':10s} {'':67s}  {_status(r)}"
    return (
        f"{r.name:20s} {r.version:10s} {r.examples:9d} {r.checks:9d} {r.seconds:9.2f} "
        f"{r.rate:8.0f} {r.undeclared:10d} {r.declared:9d} {r.raises:7d}  {_status(r)}"
    )


def render(report: FuzzReport) -> str:
    lines: list[str] = []
    for cx in report.counterexamples:
        lines += describe(cx) + [""]
    lines.append(
        f"{'backend':20s} {'version':10s} {'examples':>9s} {'checks':>9s} {'cpu s':>9s} "
        f"{'ex/s':>8s} {'undeclared':>10s} {'declared':>9s} {'raises':>7s}  status"
    )
    lines += [_row(r) for r in report.runs]
    lines.append("(ex/s: examples per CPU second inside the backend's encode, this thread only)")
    for r in report.runs:
        for cx in r.declared_examples:
            lines.append(
                f"declared ({cx.declared}): {r.name} {cx.mode} e.g. {cx.text!r} "
                f"(shrunk from {len(cx.original)} chars)"
            )
    ran = [r for r in report.runs if r.status not in ("missing", "skipped")]
    checks = sum(r.checks for r in ran)
    rate = checks / report.loop_seconds if report.loop_seconds > 0 else 0.0
    ref_rate = report.examples / report.reference_seconds if report.reference_seconds > 0 else 0.0
    cxs = report.counterexamples
    lines.append(
        f"fuzz: seed {report.config.seed}, {report.examples} examples x {len(ran)} backends "
        f"= {checks} checks "
        f"in {report.loop_seconds:.1f}s ({rate:.0f} checks/s; reference {ref_rate:.0f} ex/s), "
        f"shrinking {report.shrink_seconds:.1f}s; {len(cxs)} undeclared counterexample(s)"
    )
    if cxs:
        out = report.config.out or "OUT.jsonl"
        lines.append(
            "fix: re-export with `stacktok export`, or declare a cited divergence in "
            f"fixtures/divergences.jsonl; replay with `stacktok gate DIR --probes {out}`"
        )
    lines.append(f"verdict: {'FAIL' if report.exit_code else 'PASS'}")
    return "\n".join(lines)


def probes_jsonl(report: FuzzReport) -> str:
    seed = report.config.seed
    return "".join(
        json.dumps(cx.probe(seed), ensure_ascii=True, sort_keys=True) + "\n" for cx in report.counterexamples
    )


# ------------------------------------------------------------------- CLI
def _backend_names(value: str) -> list[str]:
    names = list(dict.fromkeys(backend_list(value)))
    if not names:
        raise argparse.ArgumentTypeError(f"name at least one backend; choose from {', '.join(REGISTRY)}")
    return names


def _generator_names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in GENERATORS]
    if unknown or not names:
        choose = ", ".join(GENERATORS)
        raise argparse.ArgumentTypeError(f"unknown generator(s) {unknown}; choose from {choose}")
    return list(dict.fromkeys(names))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="the checkpoint or tokenizer directory whose exports to fuzz")
    p.add_argument("--artifact", type=Path, default=None, help="frozen artifact (default: the shipped one)")
    p.add_argument(
        "--backends",
        type=_backend_names,
        default=list(DEFAULT_BACKENDS),
        help="comma list (default: every backend but the reference)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, default=None, help="generate inputs for this long")
    budget.add_argument(
        "--examples",
        type=int,
        default=None,
        help=f"check exactly this many inputs (default {DEFAULT_EXAMPLES}; deterministic)",
    )
    p.add_argument("--seed", type=int, default=0, help="the input stream's seed (default 0)")
    p.add_argument("--out", type=Path, default=None, help="write minimal counterexamples here as probe JSONL")
    p.add_argument(
        "--generators",
        type=_generator_names,
        default=list(GENERATORS),
        help="comma list (default: all): " + ", ".join(GENERATORS),
    )
    p.add_argument(
        "--keep",
        type=int,
        default=1,
        help="divergent inputs shrunk per backend, mode and generator (default 1)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def config_from_args(args: argparse.Namespace) -> FuzzConfig:
    if args.seconds is not None and not args.seconds > 0:
        raise FuzzUsageError(f"--seconds must be positive, got {args.seconds}")
    if args.examples is not None and args.examples <= 0:
        raise FuzzUsageError(f"--examples must be positive, got {args.examples}")
    if args.keep <= 0:
        raise FuzzUsageError(f"--keep must be positive, got {args.keep}")
    if args.out is not None:
        root = Path(args.dir).resolve()
        out = args.out.resolve()
        if out == root or root in out.parents:
            raise FuzzUsageError(
                f"{args.out} is inside {args.dir}: write counterexamples elsewhere "
                "(fuzz never writes into the directory it checks)"
            )
    examples = args.examples if args.examples is not None or args.seconds is not None else DEFAULT_EXAMPLES
    return FuzzConfig(
        directory=args.dir,
        artifact=args.artifact or shipped_artifact_path(),
        backends=args.backends,
        seed=args.seed,
        examples=examples,
        seconds=args.seconds,
        generators=args.generators,
        keep=args.keep,
        out=args.out,
    )


def main(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        with Progress(quiet=args.quiet) as say:  # the one progress view every long command uses
            report = run_fuzz(config, say)
    except FuzzUsageError as exc:
        print(f"stacktok fuzz: error: {exc}", file=sys.stderr)
        return 2
    print(render(report), flush=True)
    if config.out is not None:
        write_text_atomic(config.out, probes_jsonl(report))
    return report.exit_code


def cli(argv: Iterable[str] | None = None) -> int:
    """``python -m conformance.fuzz DIR ...`` (what ``stacktok fuzz`` runs)."""
    p = argparse.ArgumentParser(prog="stacktok fuzz", description=__doc__.splitlines()[0])
    add_arguments(p)
    return main(p.parse_args(None if argv is None else list(argv)))


if __name__ == "__main__":
    sys.exit(cli())

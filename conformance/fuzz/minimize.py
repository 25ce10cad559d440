"""From kept divergences to counterexamples: shrink each, keeping its divergence, and dedupe.

Each kept raw example is shrunk (:func:`conformance.fuzz.shrink.shrink`, pre-tokens of
the reference's split regex as pieces) while it keeps the same divergence: same backend,
same mode, same kind (different ids, or an exception). The minimal input gets its
first-divergence window (``first_window``: position, ids +-3 with bytes from both
sides). Results are deduplicated by (mode, minimal text); a backend whose run keeps one
turns ``fail``. The first declared example is shrunk keeping both properties (diverges,
and no longer does once declared code points are removed), only for display.

Out of scope: finding the divergences (``conformance.fuzz.compare``) and writing them
(``conformance.fuzz.output``).
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.windows import first_window
from conformance.fuzz.examples import MODES, reference_ids
from conformance.fuzz.oracle import Oracle
from conformance.fuzz.results import BackendRun, Counterexample, Raw
from conformance.fuzz.shrink import shrink
from stacktok_export.split.pretokenize import compile_pattern


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
    if run.counterexamples and run.status == "pass":
        run.status = "fail"
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

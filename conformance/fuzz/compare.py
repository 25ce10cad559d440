"""One backend's share of the loop: check a batch of examples, classify each divergence, keep a few.

For every example and every mode the backend declares, the oracle compares it with the
reference ids computed once by the generator thread. A divergent input is *declared*
when the same input with every declared code point removed no longer diverges
(:class:`conformance.fuzz.declarations.UnicodeDeclarations`); otherwise it is
undeclared, and the stripped input is what gets shrunk -- so an undeclared divergence
can never hide behind a declared one. Per (mode, generator) the first ``keep``
undeclared examples by index are kept, so what is kept never depends on thread timing.

Out of scope: threads and batches (``conformance.fuzz.engine``) and shrinking what was
kept (``conformance.fuzz.minimize``).
"""

from __future__ import annotations

from conformance.fuzz.examples import TRUSTED, Example
from conformance.fuzz.oracle import Observation, Oracle
from conformance.fuzz.results import BackendRun, Raw

#: examples with their reference ids per mode, as the generator thread hands them out
Batch = list[tuple[Example, dict[str, list[int]]]]


def _classify(oracle: Oracle, ex: Example, mode: str, obs: Observation) -> Raw:
    if mode == TRUSTED and obs.kind == "ids" and (control := oracle.decl.control_text_for(ex.text)):
        return Raw(ex.index, ex.generator, mode, obs.kind, ex.text, ex.text, control)
    stripped = oracle.decl.strip(ex.text)
    if stripped != ex.text:
        again = oracle.observe(stripped, mode)
        if again is not None and mode == TRUSTED and again.kind == "ids":
            again = None if oracle.decl.control_text_for(stripped) else again
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

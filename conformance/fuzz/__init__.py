"""``stacktok fuzz DIR``: differential fuzzing of every backend against the reference.

    stacktok fuzz DIR [--artifact PATH] [--backends LIST] [--seconds N | --examples N]
                      [--seed S] [--out FILE.jsonl] [--generators LIST] [--keep K]

The inputs are planned as every tool plans them (``conformance.plan``: the
reference loaded once, every file of DIR validated once), and every selected
backend loads DIR's exports exactly as the gate does
(``conformance.checks.loading.load_named``). Inputs come
from the named generators in :mod:`conformance.fuzz.generators`; each one is
encoded by the reference (the frozen artifact) and by every backend, in the
untrusted mode (``allow_special=False`` vs ``encode(text)``) and -- when the
input contains ``"<|"`` -- also in the trusted mode (``allow_special=True`` vs
``encode(text, allowed_special="all")``). A backend that raises counts as a
divergence too. Only the modes a backend declares are checked (``ENCODE``
for untrusted, ``TRUSTED`` for trusted); a backend without ``ENCODE`` (TRL is
chat-only, llama.cpp-detokenize decode-only) is reported *skip*, one whose library is absent *missing*
(the row vocabulary, ``conformance.core.rows.STATUSES``).

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

Layout, one idea per module: ``command`` (arguments, exit code), ``config``,
``load`` (the input plan, then the backends), ``engine`` (generator -> backend threads),
``examples``, ``oracle``, ``declarations``, ``compare`` (classify and keep),
``shrink`` (the shrinker), ``minimize`` (kept -> counterexamples), ``results``
(runs, report, rows), ``output`` (table and probe JSONL); the generators are
``generators`` (the registry), ``gen_*`` by family and ``alphabets``.

Out of scope: decoding, chat and streaming checks (the gate runs those on the
fixed probes), inputs over a few thousand characters, and fixing anything --
each counterexample says which backend and mode diverge; the engineer
re-exports or declares a cited divergence.
"""

from conformance.fuzz.command import add_arguments, cli, config_from_args, main
from conformance.fuzz.compare import Batch, _classify, check_batch
from conformance.fuzz.config import DEFAULT_BACKENDS, DEFAULT_EXAMPLES, FuzzConfig
from conformance.fuzz.declarations import UnicodeDeclarations
from conformance.fuzz.engine import run_fuzz
from conformance.fuzz.examples import MODES, TRUSTED, UNTRUSTED, Example, make_example, reference_ids
from conformance.fuzz.load import load_inputs, load_one
from conformance.fuzz.minimize import shrink_backend
from conformance.fuzz.oracle import Observation, Oracle
from conformance.fuzz.output import describe, probes_jsonl, render
from conformance.fuzz.results import BackendRun, Counterexample, FuzzReport, Raw
from conformance.fuzz.shrink import SHRINK_CALLS, Shrunk, shrink

__all__ = [
    "DEFAULT_BACKENDS",
    "DEFAULT_EXAMPLES",
    "MODES",
    "SHRINK_CALLS",
    "TRUSTED",
    "UNTRUSTED",
    "BackendRun",
    "Batch",
    "Counterexample",
    "Example",
    "FuzzConfig",
    "FuzzReport",
    "Observation",
    "Oracle",
    "Raw",
    "Shrunk",
    "UnicodeDeclarations",
    "_classify",
    "add_arguments",
    "check_batch",
    "cli",
    "config_from_args",
    "describe",
    "load_inputs",
    "load_one",
    "main",
    "make_example",
    "probes_jsonl",
    "reference_ids",
    "render",
    "run_fuzz",
    "shrink",
    "shrink_backend",
]

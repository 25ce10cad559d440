"""run_suite with ``workers > 1``: backends in forked processes give the rows threads give.

Out of scope: speed (``benchmarks/bench_gate.py``).
"""

from __future__ import annotations

import io

import pytest

from conformance.checks import forked
from conformance.checks.runner import result_rows, run_suite
from conformance.core.fixtures import Divergence, FixtureSet, Probe
from conformance.core.layout import Exports
from stacktok_export.progress import Progress

from .conftest import SHIPPED, SHIPPED_HF
from .strings import HARD_STRINGS

pytestmark = [
    pytest.mark.transformers,
    pytest.mark.skipif(not forked.can_fork(), reason="no fork start method on this platform"),
]

NAMES = ["reference", "tiktoken", "tokenizers", "no-such-backend", "llama.cpp"]


@pytest.fixture(scope="module")
def exports() -> Exports:
    return Exports.discover(SHIPPED_HF, artifact=SHIPPED)


def fixtures() -> FixtureSet:
    fs = FixtureSet.load(shipped=False)
    fs.probes = [Probe(f"hard-{i}", "hard", t) for i, t in enumerate(HARD_STRINGS)]
    fs.divergences = [
        Divergence("rotten", "tokenizers", "encode", "*", "no longer true", "-", category="hard"),
        Divergence("rotten-too", "tiktoken", "encode", "*", "no longer true", "-", category="hard"),
    ]
    return fs


def test_forked_workers_give_the_same_results_rows_and_stale_list(exports: Exports) -> None:
    one, stale_one, _ = run_suite(exports, fixtures(), NAMES, workers=1)
    two, stale_two, _ = run_suite(exports, fixtures(), NAMES, workers=2)
    assert [r.name for r in two] == NAMES  # names order, whatever finished first
    assert stale_two == stale_one == ["rotten", "rotten-too"]  # declaration order, from two workers
    for a, b in zip(one, two):
        a.seconds = b.seconds = 0.0
    assert two == one
    assert result_rows(two, stale=stale_two) == result_rows(one, stale=stale_one)
    assert {r.name: r.status for r in two}["no-such-backend"] == "error"


def test_forked_workers_relay_progress_to_the_parent(exports: Exports) -> None:
    stream = io.StringIO()
    with Progress(stream=stream, interval=0.0) as bars:
        run_suite(exports, fixtures(), ["tiktoken", "tokenizers"], workers=2, progress=bars)
    lines = stream.getvalue()
    for name in ("tiktoken", "tokenizers"):
        assert f"{name}: done, {len(HARD_STRINGS):,}/{len(HARD_STRINGS):,} probes" in lines
    said: list[str] = []
    run_suite(exports, fixtures(), ["tiktoken", "tokenizers"], workers=2, progress=said.append)
    n = len(HARD_STRINGS)
    assert sorted(said) == [f"tiktoken: probe {i}/{n}" for i in range(0, n, 200)] + [
        f"tokenizers: probe {i}/{n}" for i in range(0, n, 200)
    ]

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
from stacktok_export.util.progress import Progress

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


@pytest.mark.parametrize("shards", [2, 3])
def test_probes_cut_into_parts_give_the_whole_run(exports: Exports, shards: int) -> None:
    """Each worker runs every backend on its part of the probes (``shards``): the joined results,
    rows and stale list equal one whole run, a declaration matched in one part only is not
    stale, and every part holds probes."""
    fs = fixtures()
    # a declaration that matches in the last part only: llama_detokenize's clean-up of " ,"
    clean = "llama.cpp-detokenize-clean-spaces"
    fs.divergences += [d for d in FixtureSet.load().divergences if d.id == clean]
    fs.probes.append(Probe("late-comma", "hard", "well , then"))
    names = [*NAMES, "llama.cpp-detokenize"]
    one, stale_one, _ = run_suite(exports, fs, names, workers=1)
    cut, stale_cut, _ = run_suite(exports, fs, names, workers=2, shards=shards)
    for a, b in zip(one, cut):
        a.seconds = b.seconds = 0.0
    assert cut == one
    assert stale_cut == stale_one == ["rotten", "rotten-too"]  # the clean-spaces one matched, late
    assert any(f.declared == clean for f in cut[-1].failures)
    assert result_rows(cut, stale=stale_cut) == result_rows(one, stale=stale_one)
    parts = forked.plan_parts(fs.probes, shards)
    assert [p.start for p in parts[1:]] == [p.stop for p in parts[:-1]] and parts[-1].stop == len(fs.probes)
    assert all(p.stop > p.start for p in parts)
    assert [p.extras for p in parts] == [False] * (shards - 1) + [True]


def test_parts_are_balanced_by_cost(exports: Exports) -> None:
    """A megabyte probe weighs like the thousands of short ones: the cut follows cost, not count."""
    probes = [Probe(f"s-{i}", "s", "short text " * 5) for i in range(2000)]
    probes.insert(10, Probe("big", "s", "a" * 1_000_000))
    first, second = forked.plan_parts(probes, 2)
    # half the cost (model: forked._PER_*): the big probe and ~550 short ones, not 1,000 probes
    assert 11 <= first.stop <= 700 and second.extras


def test_forked_workers_relay_progress_to_the_parent(exports: Exports) -> None:
    stream = io.StringIO()
    with Progress(stream=stream, interval=0.0) as bars:
        run_suite(exports, fixtures(), ["tiktoken", "tokenizers"], workers=2, progress=bars)
    lines = stream.getvalue()
    for name in ("tiktoken", "tokenizers"):
        assert f"{name}: done, {len(HARD_STRINGS):,}/{len(HARD_STRINGS):,} probes" in lines
    stream = io.StringIO()
    with Progress(stream=stream, interval=0.0) as bars:  # probes cut in two: one bar per backend still
        run_suite(exports, fixtures(), ["tiktoken", "tokenizers"], workers=2, shards=2, progress=bars)
    for name in ("tiktoken", "tokenizers"):
        done = [line for line in stream.getvalue().splitlines() if f"{name}: done" in line]
        assert len(done) == 1 and f"{len(HARD_STRINGS):,}/{len(HARD_STRINGS):,} probes" in done[0], done
    said: list[str] = []
    run_suite(exports, fixtures(), ["tiktoken", "tokenizers"], workers=2, progress=said.append)
    n = len(HARD_STRINGS)
    assert sorted(said) == [f"tiktoken: probe {i}/{n}" for i in range(0, n, 200)] + [
        f"tokenizers: probe {i}/{n}" for i in range(0, n, 200)
    ]
    many = fixtures()
    many.probes = [Probe(f"p-{i}", "hard", HARD_STRINGS[i % n]) for i in range(450)]
    cut: list[str] = []  # parts number their lines from their first probe: the same lines in all
    run_suite(exports, many, ["tiktoken"], workers=2, shards=2, progress=cut.append)
    assert sorted(cut) == sorted(f"tiktoken: probe {i}/450" for i in (0, 200, 400))

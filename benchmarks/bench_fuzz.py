"""Fuzzer benchmark: examples/s per generator, per backend, and a long run on the shipped export.

    python benchmarks/bench_fuzz.py [DIR] [--examples N] [--seconds T] [--seed S]
                                    [--backends LIST] [--json PATH]

Part 1 (always): N examples (default 20,000) are generated once, then the
reference and each backend encode all of them alone, one at a time, on one
thread -- each backend's own examples/s, without the others competing for the
GIL -- and the generators' own rates are reported.

Part 2 (``--seconds T``): the real ``stacktok fuzz`` loop (all backends in
parallel threads) for T seconds on DIR, then the count of examples and checks
(example x backend) and the number of undeclared counterexamples. The issue's
target is >= 1,000,000 examples across all backends with zero undeclared
divergences; ``--seconds 600`` is the ten-minute run. Exit 1 if an undeclared
divergence is found.

Out of scope: shrinking speed (it runs only on divergences) and multi-process
fuzzing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from conformance.core.fixtures import FixtureSet
from conformance.core.layout import Exports
from conformance.fuzz import (
    DEFAULT_BACKENDS,
    BackendRun,
    FuzzConfig,
    load_one,
    make_example,
    reference_ids,
    render,
    run_fuzz,
)
from conformance.fuzz.generators import GENERATORS, GenContext
from stacktok_export import StackTokenizer
from stacktok_export.artifact.artifact import shipped_artifact_path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "tokenizer" / "stack100m-32768-hf"


def isolated_rates(
    directory: Path, artifact: Path, backends: list[str], n: int, seed: int
) -> dict[str, float]:
    """examples/s of every generator, the reference, and each backend alone."""
    ref = StackTokenizer.load(artifact)
    ctx = GenContext.build(ref, FixtureSet.load().probes)
    names = list(GENERATORS)
    rates: dict[str, float] = {}
    start = time.perf_counter()
    examples = [make_example(seed, i, names, ctx) for i in range(n)]
    rates["generate (all)"] = n / (time.perf_counter() - start)
    for name in names:
        mine = [e.index for e in examples if e.generator == name][:2000]
        t0 = time.perf_counter()
        for i in mine:
            make_example(seed, i, names, ctx)
        rates[f"generate {name}"] = len(mine) / max(time.perf_counter() - t0, 1e-9)
    texts = [e.text for e in examples]
    cold = StackTokenizer.load(artifact)
    t0 = time.perf_counter()
    for t in texts:
        reference_ids(cold, t, "untrusted")
    rates["reference"] = n / (time.perf_counter() - t0)
    exports = Exports.discover(directory, artifact=artifact)
    for name in backends:
        backend = load_one(name, exports)  # the fuzz's own loading: missing, error and skip alike
        if isinstance(backend, BackendRun):
            if backend.status != "skip":
                print(f"  {name}: {backend.status}", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        for t in texts:
            backend.encode(t, allow_special=False)
        rates[name] = n / (time.perf_counter() - t0)
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--artifact", type=Path, default=None)
    ap.add_argument("--examples", type=int, default=20_000, help="examples for the isolated rates")
    ap.add_argument("--seconds", type=float, default=None, help="also run the parallel fuzz loop this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    artifact = args.artifact or shipped_artifact_path()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    rates = isolated_rates(args.dir, artifact, backends, args.examples, args.seed)
    print(f"isolated, one thread, {args.examples} examples (seed {args.seed}):")
    for name, rate in rates.items():
        print(f"  {name:28s} {rate:10.0f} examples/s")
    result: dict[str, object] = {
        "isolated_examples_per_s": {k: round(v) for k, v in rates.items()},
        "examples": args.examples,
        "seed": args.seed,
    }
    code = 0
    if args.seconds:
        config = FuzzConfig(
            directory=args.dir,
            artifact=artifact,
            backends=backends,
            seed=args.seed,
            examples=None,
            seconds=args.seconds,
        )
        report = run_fuzz(config, lambda m: print(f"  .. {m}", file=sys.stderr, flush=True))
        print(render(report))
        ran = [r for r in report.runs if r.status not in ("missing", "skip")]
        checks = sum(r.checks for r in ran)
        undeclared = len(report.counterexamples)
        print(
            f"long run: {report.examples:,} examples x {len(ran)} backends = "
            f"{sum(r.examples for r in ran):,} backend-examples ({checks:,} checks incl. trusted mode) "
            f"in {report.loop_seconds:.0f}s; declared {sum(r.declared for r in ran):,}; "
            f"undeclared {undeclared}"
        )
        result["long_run"] = {
            "seconds": round(report.loop_seconds, 1),
            "examples": report.examples,
            "backend_examples": sum(r.examples for r in ran),
            "checks": checks,
            "undeclared": undeclared,
            "declared": {r.name: r.declared for r in ran},
            "cpu_examples_per_s": {r.name: round(r.rate) for r in ran},
        }
        code = report.exit_code
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

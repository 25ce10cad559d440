"""Encoder benchmark: stacktok MB/s (cold and warm cache) vs tiktoken, same ranks, same run.

tiktoken is built from the shipped artifact's ranks and run single-threaded
(``encode_ordinary``); HF ``tokenizers`` is reported as a second reference.
Also times one 1 MB pre-token (``"a" * 1_000_000``), the case where a
textbook rescan encoder is quadratic. Outputs are asserted identical.

    python benchmarks/bench_encode.py [TEXT_FILE] [--json PATH]

Out of scope: batch/multi-threaded encoding.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from stacktok_export import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(ROOT / "fixtures" / "heldout-2mb.txt"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    text = Path(args.path).read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    tok = load_tokenizer(ROOT / "tokenizer" / "stack100m-32768.json")

    from stacktok_export.export.tiktoken_fmt import to_tiktoken

    enc = to_tiktoken(tok)
    results: dict[str, float] = {}

    start = time.perf_counter()
    ours = tok.encode(text)
    results["stacktok_cold_mb_s"] = mb / (time.perf_counter() - start)
    results["stacktok_warm_mb_s"] = mb / best_of(lambda: tok.encode(text))
    if enc.encode_ordinary(text) != ours:
        print("ERROR: tiktoken ids differ from stacktok", file=sys.stderr)
        return 1
    results["tiktoken_mb_s"] = mb / best_of(lambda: enc.encode_ordinary(text))
    try:
        from stacktok_export.export.hf import to_hf_tokenizer

        hf = to_hf_tokenizer(tok)
        hf.encode_special_tokens = True
        results["hf_tokenizers_mb_s"] = mb / best_of(lambda: hf.encode(text).ids)
    except ImportError:
        pass
    long = "a" * 1_000_000
    tok._cache.clear()
    results["stacktok_1mb_pretoken_s"] = best_of(lambda: tok.encode(long), repeat=1)
    results["tiktoken_1mb_pretoken_s"] = best_of(lambda: enc.encode_ordinary(long), repeat=1)
    results["warm_vs_tiktoken"] = results["stacktok_warm_mb_s"] / results["tiktoken_mb_s"]
    results["cold_vs_tiktoken"] = results["stacktok_cold_mb_s"] / results["tiktoken_mb_s"]
    results = {k: round(v, 3) for k, v in results.items()}
    print(f"text: {args.path} ({mb:.2f} MB)")
    for k, v in results.items():
        print(f"  {k:28s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Encoder benchmark: stacktok MB/s (cold and warm cache) vs tiktoken, same ranks, same run.

tiktoken is built from the shipped artifact's ranks and run single-threaded
(``encode_ordinary``); HF ``tokenizers`` is reported as a second reference.
Every figure is the best of several runs in this process, printed with the
ratio to tiktoken and the load average, so a busy machine shows. "Cold" clears
the reference's caches before each run; ``first_call_s`` is the very first
encode of the process (it also imports numpy for the batch BPE). Also times one
1 MB pre-token (``"a" * 1_000_000``), the case where a textbook rescan encoder
is quadratic. Outputs are asserted identical. Then a profile of one cold
encode: the time of each phase of ``StackTokenizer._encode_ordinary`` and the
top functions by own time (cProfile).

    python benchmarks/bench_encode.py [TEXT_FILE] [--json PATH] [--repeat N]

Out of scope: batch/multi-threaded encoding.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

from stacktok_export import StackTokenizer, load_tokenizer
from stacktok_export.bpe import _LINE_END

ROOT = Path(__file__).resolve().parent.parent


def best_of(fn, repeat: int = 3, setup=None) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def clear_caches(tok: StackTokenizer) -> None:
    tok._clear_caches()


def phase_profile(tok: StackTokenizer, text: str) -> dict[str, float]:
    """Seconds per phase of one cold ``_encode_ordinary`` (the same calls, timed one by one)."""
    clear_caches(tok)
    t = time.perf_counter()
    tok._seen_lines.isdisjoint(_LINE_END.split(text))  # the line cut; a fresh text goes on by pieces
    t0 = time.perf_counter()
    pieces = tok._split_re.findall(text)
    t1 = time.perf_counter()
    new = set(pieces).difference(tok._cache)
    t2 = time.perf_counter()
    tok._bpe_into(new, tok._cache)
    t3 = time.perf_counter()
    out: list[int] = []
    for piece in pieces:
        out += tok._cache[piece]
    t4 = time.perf_counter()
    return {
        "line_cut_s": t0 - t,
        "regex_split_s": t1 - t0,
        "distinct_new_pieces_s": t2 - t1,
        "bpe_new_pieces_s": t3 - t2,
        "concat_ids_s": t4 - t3,
        "pieces": len(pieces),
        "new_pieces": len(new),
    }


def cprofile_top(tok: StackTokenizer, text: str, top: int = 10) -> str:
    clear_caches(tok)
    prof = cProfile.Profile()
    prof.runcall(tok.encode, text)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    return "\n".join(lines[start:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(ROOT / "fixtures" / "heldout-2mb.txt"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure; the best is kept")
    args = ap.parse_args()
    text = Path(args.path).read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    tok = load_tokenizer(ROOT / "tokenizer" / "stack100m-32768.json")

    from stacktok_export.export.tiktoken_fmt import to_tiktoken

    enc = to_tiktoken(tok)
    results: dict[str, float] = {"load_average_1min": os.getloadavg()[0]}
    n = args.repeat

    start = time.perf_counter()
    ours = tok.encode(text)
    results["first_call_s"] = time.perf_counter() - start
    if enc.encode_ordinary(text) != ours or tok.encode(text) != ours:
        print("ERROR: tiktoken ids differ from stacktok", file=sys.stderr)
        return 1
    results["tiktoken_mb_s"] = mb / best_of(lambda: enc.encode_ordinary(text), n)
    results["stacktok_cold_mb_s"] = mb / best_of(lambda: tok.encode(text), n, lambda: clear_caches(tok))
    clear_caches(tok)
    tok.encode(text)  # lines are seen once: the next call caches them
    start = time.perf_counter()
    tok.encode(text)
    results["stacktok_second_call_mb_s"] = mb / (time.perf_counter() - start)
    results["stacktok_warm_mb_s"] = mb / best_of(lambda: tok.encode(text), n)
    try:
        from stacktok_export.export.hf import to_hf_tokenizer

        hf = to_hf_tokenizer(tok)
        hf.encode_special_tokens = True
        results["hf_tokenizers_mb_s"] = mb / best_of(lambda: hf.encode(text).ids, n)
    except ImportError:
        pass
    long = "a" * 1_000_000
    if tok.encode(long) != enc.encode_ordinary(long):
        print("ERROR: tiktoken ids differ from stacktok on the 1 MB pre-token", file=sys.stderr)
        return 1
    results["stacktok_1mb_pretoken_s"] = best_of(lambda: tok.encode(long), n, lambda: clear_caches(tok))
    results["tiktoken_1mb_pretoken_s"] = best_of(lambda: enc.encode_ordinary(long), n)
    results["cold_vs_tiktoken"] = results["stacktok_cold_mb_s"] / results["tiktoken_mb_s"]
    results["second_call_vs_tiktoken"] = results["stacktok_second_call_mb_s"] / results["tiktoken_mb_s"]
    results["warm_vs_tiktoken"] = results["stacktok_warm_mb_s"] / results["tiktoken_mb_s"]
    long_s = results["stacktok_1mb_pretoken_s"]
    results["pretoken_1mb_vs_tiktoken"] = long_s / results["tiktoken_1mb_pretoken_s"]
    results["load_average_1min_end"] = os.getloadavg()[0]
    results = {k: round(v, 3) for k, v in results.items()}
    print(f"text: {args.path} ({mb:.2f} MB), best of {n}")
    for k, v in results.items():
        print(f"  {k:28s} {v}")
    phases = phase_profile(tok, text)
    print("profile of one cold encode (phases of _encode_ordinary):")
    for k, v in phases.items():
        print(f"  {k:28s} {v:.3f}" if k.endswith("_s") else f"  {k:28s} {v}")
    print("cProfile of one cold encode, by own time:")
    print(cprofile_top(tok, text))
    if args.json:
        payload = {**results, "profile": {k: round(v, 4) for k, v in phases.items()}}
        Path(args.json).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

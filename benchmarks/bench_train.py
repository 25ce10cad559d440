"""Trainer benchmark: wall time and peak RSS of stacktok vs HF tokenizers vs rustbpe.

Each trainer runs in its own subprocess on the same documents (the sample cut
into ~8 MiB blocks at pre-token boundaries), with the same regex and the same
number of merges; peak RSS is the child's ``ru_maxrss``. Results print as
ratios against HF ``BpeTrainer`` measured in the same run, and are written
as JSON with ``--json``.

    python benchmarks/bench_train.py data/sample/train.txt [--vocab-size 32768]

Out of scope: comparing merge *quality*; merge *identity* with rustbpe is
reported (HF differs only on count ties, by design of its tie-break).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
from stacktok_export.corpus.corpus import text_blocks
path, vocab, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from stacktok_export import SPECIAL_TOKENS, SPLIT_PATTERN
t0 = time.perf_counter()
docs = text_blocks(path)
if which == "stacktok":
    from stacktok_export import StackTokenizer
    tok = StackTokenizer()
    tok.train_from_iterable(docs, vocab_size=vocab)
    table = [b.hex() for b in tok.token_bytes()]
elif which == "rustbpe":
    import rustbpe
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(docs, vocab - len(SPECIAL_TOKENS), pattern=SPLIT_PATTERN)
    table = [b.hex() for b, _ in sorted(tok.get_mergeable_ranks(), key=lambda kv: kv[1])]
else:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2)
    tok.train_from_iterator(docs, trainer=trainer)
    table = []
print(json.dumps({"seconds": time.perf_counter() - t0, "table": table}))
"""


def run(which: str, path: str, vocab: int) -> dict[str, object]:
    """Run one trainer in a child; ``os.wait4`` gives that child's own peak RSS."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, str(vocab), which], stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            return {"error": err.read().strip().splitlines()[-1:]}
        result = json.loads(out.read().strip().splitlines()[-1])
    return {
        "wall_s": round(wall, 2),
        "train_s": round(result["seconds"], 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "table": result["table"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--vocab-size", type=int, default=32768)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not os.path.isfile(args.path):
        ap.error(f"{args.path} is not a file; pass a UTF-8 text corpus, e.g. data/sample/train.txt")
    results: dict[str, dict[str, object]] = {}
    for which in ("rustbpe", "hf", "stacktok"):
        results[which] = run(which, args.path, args.vocab_size)
        print(which, {k: v for k, v in results[which].items() if k != "table"}, flush=True)
    failed = {name: r["error"] for name, r in results.items() if "error" in r}
    if failed:
        for name, error in failed.items():
            print(
                f"bench_train: {name} failed on {args.path}: {' '.join(error) or 'no message'}",
                file=sys.stderr,
            )
        return 2
    ours, hf, rust = results["stacktok"], results["hf"], results["rustbpe"]
    summary = {
        "stacktok_vs_hf_time": round(ours["wall_s"] / hf["wall_s"], 2),
        "stacktok_vs_hf_rss": round(ours["peak_rss_mb"] / hf["peak_rss_mb"], 2),
        "stacktok_vs_rustbpe_time": round(ours["wall_s"] / rust["wall_s"], 2),
        "merges_identical_to_rustbpe": ours["table"] == rust["table"],
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        for r in results.values():
            r.pop("table", None)
        with open(args.json, "w") as f:
            json.dump({"results": results, "summary": summary}, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Packer benchmark: ``stacktok pack`` MB/s vs tiktoken's own ``encode_ordinary_batch`` (2 threads), one run.

The corpus is JSON Lines of ~4 KB documents cut at line ends from a text file
(default: ``data/sample/heldout.txt`` if built, else ``fixtures/heldout-2mb.txt``).
Measured, best of ``--repeat``:

- tiktoken ``encode_ordinary_batch(docs, num_threads=2)`` on the documents in
  memory (the competitor: no reading, no writing, no verification);
- ``stacktok pack`` local engine, 2 workers, default 1 % verification, shards
  written -- and the same with ``--engine ray`` (a local Ray with 2 CPUs);
- with ``--memory-gb N``: the corpus repeated to N GB, packed once, peak RSS
  of the whole process tree sampled every 0.2 s.

    python benchmarks/bench_pack.py [TEXT_FILE] [--repeat 3] [--memory-gb 1] [--json PATH]

Out of scope: cluster runs (Ray on one machine only shows its overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def documents(text: str, size: int = 4000) -> list[str]:
    docs, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        docs.append(text[start:end])
        start = end
    return docs


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {pid}, [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier += kids
    return sum(rss.get(p, 0) for p in tree)


def run_pack(args: list[str], *, sample_rss: bool = False) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "stacktok_cli", "pack", *args, "--quiet"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    if sample_rss:
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.2)
    out, err = proc.communicate()
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pack failed: {err.strip()}")
    return took, peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ROOT / "data" / "sample" / "heldout.txt"
    ap.add_argument(
        "path", nargs="?", default=str(default if default.exists() else ROOT / "fixtures" / "heldout-2mb.txt")
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-gb", type=float, default=0.0)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import tiktoken

    from stacktok_export import load_tokenizer
    from stacktok_export.export.tiktoken_fmt import to_tiktoken

    text = Path(args.path).read_text(encoding="utf-8")
    docs = documents(text)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    work = Path(tempfile.mkdtemp(prefix="bench-pack-"))
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    print(
        f"corpus: {len(docs):,} documents, {mb:.1f} MB of text ({args.path}); load {os.getloadavg()[0]:.2f}"
    )

    enc = to_tiktoken(load_tokenizer())
    results: dict[str, float] = {}
    best = min(_timed(lambda: enc.encode_ordinary_batch(docs, num_threads=2)) for _ in range(args.repeat))
    results["tiktoken_batch_2threads_mb_s"] = mb / best
    print(f"tiktoken {tiktoken.__version__} encode_ordinary_batch, 2 threads: {mb / best:6.1f} MB/s")

    for engine in ("local",) if args.no_ray else ("local", "ray"):
        times = []
        for i in range(args.repeat if engine == "local" else 1):
            out = work / f"{engine}{i}"
            took, _ = run_pack([str(corpus), "--out", str(out), "--workers", "2", "--engine", engine])
            times.append(took)
        best = min(times)
        results[f"pack_{engine}_mb_s"] = mb / best
        ratio = results[f"pack_{engine}_mb_s"] / results["tiktoken_batch_2threads_mb_s"]
        print(
            f"stacktok pack --engine {engine} --workers 2: {mb / best:6.1f} MB/s = {ratio:.2f}x tiktoken "
            f"(wall {best:.1f}s incl. start-up, reading, 1% verification, writing)"
        )
    if "pack_ray_mb_s" in results:
        slower = results["pack_local_mb_s"] / results["pack_ray_mb_s"]
        print(f"Ray overhead on 2 cores: {slower:.2f}x slower than the local pool")

    if args.memory_gb:
        big = work / "big.jsonl"
        data = corpus.read_bytes()
        with big.open("wb") as f:
            for _ in range(max(1, int(args.memory_gb * 1e9 // len(data)))):
                f.write(data)
        size = big.stat().st_size
        took, peak = run_pack([str(big), "--out", str(work / "big"), "--workers", "2"], sample_rss=True)
        results.update(
            memory_input_gb=size / 1e9, memory_peak_rss_mb=peak / 1e6, memory_mb_s=size / 1e6 / took
        )
        rate = size / 1e6 / took
        print(f"{size / 1e9:.2f} GB input: peak RSS {peak / 1e6:,.0f} MB (process tree), {rate:.1f} MB/s")
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())

"""Packer benchmark: ``stacktok pack`` MB/s vs tiktoken's own ``encode_ordinary_batch`` (2 threads), one run.

The corpus is JSON Lines of ~4 KB documents cut at line ends from a text file
(default: ``data/sample/heldout.txt`` if built, else ``fixtures/heldout-2mb.txt``),
repeated to ``--scale-mb`` (default 100 MB). The repetition flatters neither side's
fast path (tiktoken keeps no cache between calls); it does warm the reference's caches
for the 1 % of documents it re-encodes (at most ~3 % of the pack's time).
Measured, best of ``--repeat``:

- tiktoken ``encode_ordinary_batch(docs, num_threads=2)`` on the documents in
  memory (the competitor: no reading, no writing, no verification);
- ``stacktok pack`` local engine, 2 workers, default 1 % verification, shards
  written -- and the same with ``--engine ray`` (a local Ray with 2 CPUs), the
  corpus cut into 8 parts (``--part-bytes``) so both engines use both cores;
  the packed ids are checked equal to tiktoken's (``ids exact``);
- ``--engine ray --address`` against a Ray cluster already running on this machine (``ray start
  --head --num-cpus 2``, started before and stopped after, its start timed apart): what a data
  team with a cluster runs, where the cluster's own start is not the pack's cost;
- the bytes the driver process writes (``/proc/self/io``, read as it exits):
  with Ray the shards are written by the tasks, so the driver's are the manifest;
- with ``--memory-gb N``: peak RSS of the whole process tree (sampled every
  0.2 s) packing the corpus repeated to 100 MB and to N GB, one file each;
- with ``--artifact A.json`` or ``--llama3`` (llama.cpp's ``ggml-vocab-llama-bpe.gguf`` imported
  from the llama-cpp-python sdist, ``STACKTOK_LLAMA_SDIST``: 128,256 ids, ``uint32`` shards): the
  same against tiktoken on that artifact's ranks (issue 21's 128k pack).

    python benchmarks/bench_pack.py [TEXT_FILE] [--repeat 3] [--memory-gb 1] [--llama3] [--json PATH]

Out of scope: multi-machine runs (Ray on one machine shows its overhead, not its scaling).
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


# the CLI, writing its own /proc/self/io to IO_FILE as it exits (bytes this process wrote itself)
DRIVER = """import atexit, os, runpy, sys
atexit.register(lambda: open(os.environ["IO_FILE"], "w").write(open("/proc/self/io").read()))
sys.argv = ["stacktok", *sys.argv[1:]]
runpy.run_module("stacktok_cli", run_name="__main__")
"""


def _llama3_artifact(tmp: Path) -> Path:
    """``ggml-vocab-llama-bpe.gguf`` from the sdist, imported and saved as an artifact."""
    from bench_import import llama_bpe_gguf

    from stacktok_export.importers import import_tokenizer

    out = tmp / "llama-bpe.json"
    import_tokenizer(llama_bpe_gguf(tmp)).save(out)
    return out


def run_pack(args: list[str], *, sample_rss: bool = False, io_file: Path | None = None) -> tuple[float, int]:
    cmd = [sys.executable, "-c", DRIVER, "pack", *args, "--quiet"]
    env = {**os.environ, "IO_FILE": str(io_file or os.devnull)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
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
    ap.add_argument(
        "--scale-mb",
        type=float,
        default=100.0,
        help="repeat the documents to this many MB (default 100: a pack is a many-GB job, and at 100 MB "
        "the start-up, ~0.8 s, still weighs ~10 %%; 0 = the text once)",
    )
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument(
        "--artifact",
        default=None,
        help="pack with this artifact (e.g. Llama-3's vocabulary from `stacktok import`; the "
        "competitor is tiktoken on its ranks); default: the shipped one",
    )
    ap.add_argument(
        "--llama3",
        action="store_true",
        help="pack with Llama-3's vocabulary imported from the llama-cpp-python sdist's GGUF",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pack-"))  # removed at the end, the artifact too
    if args.llama3:
        args.artifact = str(_llama3_artifact(work))
    import tiktoken

    from stacktok_export import load_tokenizer
    from stacktok_export.export.tiktoken_fmt import to_tiktoken

    text = Path(args.path).read_text(encoding="utf-8")
    docs = documents(text)
    if args.scale_mb:
        docs *= max(1, round(args.scale_mb * 1e6 / len(text.encode())))
    mb = sum(len(d.encode()) for d in docs) / 1e6
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    print(
        f"corpus: {len(docs):,} documents, {mb:.1f} MB of text ({args.path}); load {os.getloadavg()[0]:.2f}"
    )

    tok = load_tokenizer(args.artifact)
    enc = to_tiktoken(tok)
    chosen = ["--artifact", args.artifact] if args.artifact else []
    print(f"artifact: {tok.name}, {tok.vocab_size:,} ids")
    results: dict[str, float] = {}
    best = min(_timed(lambda: enc.encode_ordinary_batch(docs, num_threads=2)) for _ in range(args.repeat))
    want = [
        i for ids in enc.encode_ordinary_batch(docs, num_threads=2) for i in (tok.bos_id, *ids, tok.eos_id)
    ]
    part = str(max(1 << 16, corpus.stat().st_size // 8))
    results["tiktoken_batch_2threads_mb_s"] = mb / best
    print(f"tiktoken {tiktoken.__version__} encode_ordinary_batch, 2 threads: {mb / best:6.1f} MB/s")

    engines = ("local",) if args.no_ray else ("local", "ray", "ray-cluster")
    for engine in engines:
        times = []
        cluster = _RayCluster() if engine == "ray-cluster" else None
        for i in range(args.repeat if engine != "ray" else 1):
            out = work / f"{engine}{i}"
            io_file = work / f"{engine}{i}.io"
            flags = [
                "--workers",
                "2",
                "--engine",
                "ray" if cluster else engine,
                "--part-bytes",
                part,
                *chosen,
            ]
            if cluster is not None:
                flags += ["--address", cluster.address]
            took, _ = run_pack([str(corpus), "--out", str(out), *flags], io_file=io_file)
            times.append(took)
        if cluster is not None:
            cluster.stop()
            print(f"  (a Ray head with 2 CPUs started in {cluster.started_in:.1f} s, not counted below)")
        best = min(times)
        exact = _packed_ids(out) == want
        io = dict(line.split(": ") for line in io_file.read_text().splitlines())
        manifest = (out / "manifest.json").stat().st_size
        results[f"pack_{engine}_driver_write_bytes"] = int(io["write_bytes"])
        results[f"pack_{engine}_driver_wchar"] = int(io["wchar"])
        print(
            f"  ids exact: {exact}; driver wrote {int(io['wchar']):,} bytes (write() calls; "
            f"{int(io['write_bytes']):,} to disk), manifest {manifest:,}, shards "
            f"{sum(p.stat().st_size for p in out.glob('shard-*')):,}"
        )
        if not exact:
            raise SystemExit(f"--engine {engine}: the packed ids are not tiktoken's")
        results[f"pack_{engine}_mb_s"] = mb / best
        ratio = results[f"pack_{engine}_mb_s"] / results["tiktoken_batch_2threads_mb_s"]
        how = "--engine ray --address (running cluster)" if engine == "ray-cluster" else f"--engine {engine}"
        print(
            f"stacktok pack {how} --workers 2: {mb / best:6.1f} MB/s = {ratio:.2f}x tiktoken "
            f"(wall {best:.1f}s incl. start-up, reading, 1% verification, writing)"
        )
    if "pack_ray_mb_s" in results:
        slower = results["pack_local_mb_s"] / results["pack_ray_mb_s"]
        print(f"Ray overhead on 2 cores: {slower:.2f}x slower than the local pool")

    if args.memory_gb:
        for gb in (0.1, args.memory_gb):
            big = work / f"big{gb}.jsonl"
            data = corpus.read_bytes()
            with big.open("wb") as f:
                for _ in range(max(1, int(gb * 1e9 // len(data)))):
                    f.write(data)
            size = big.stat().st_size
            out = work / f"big{gb}"
            took, peak = run_pack([str(big), "--out", str(out), "--workers", "2", *chosen], sample_rss=True)
            shutil.rmtree(out, ignore_errors=True)
            big.unlink()
            results.update(
                {f"memory_{gb}gb_peak_rss_mb": peak / 1e6, f"memory_{gb}gb_mb_s": size / 1e6 / took}
            )
            rate = size / 1e6 / took
            print(f"{size / 1e9:.2f} GB input: peak RSS {peak / 1e6:,.0f} MB (process tree), {rate:.1f} MB/s")
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


class _RayCluster:
    """``ray start --head`` on this machine (2 CPUs), for ``--address``; ``stop()`` ends it. Ray
    binds the machine's own address (it ignores ``--node-ip-address 127.0.0.1`` here, measured on
    Ray 2.60), so the traffic stays on this machine but not on loopback."""

    def __init__(self) -> None:
        ray = [sys.executable, "-m", "ray.scripts.scripts"]
        self._stop = [*ray, "stop", "--force"]
        port = "6391"
        start = time.perf_counter()
        subprocess.run(
            [
                *ray,
                "start",
                "--head",
                "--num-cpus",
                "2",
                "--port",
                port,
                "--include-dashboard",
                "false",
                "--disable-usage-stats",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        self.started_in = time.perf_counter() - start
        self.address = "auto"  # the head started here (its token file is read as any client does)

    def stop(self) -> None:
        subprocess.run(self._stop, check=False, capture_output=True)


def _packed_ids(out: Path) -> list[int]:
    from stacktok_export.pack import PackReader

    return [int(i) for tokens, _ in PackReader(out).shards() for i in tokens.tolist()]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())

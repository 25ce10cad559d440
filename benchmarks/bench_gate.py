"""Gate benchmark: wall time of `stacktok gate` on the shipped directory, per backend.

Runs the real gate (every installed backend, shipped probes and chats) in a
subprocess and prints total wall time, per-backend seconds from its verdict
line, and peak RSS; target (issue 24): the whole gate in <= 10 s on 2 cores with every plain
backend warm. The gate runs backends in forked worker processes (``--workers``, default 2;
``conformance.checks.forked``); ``--workers 1`` in this script's argv compares the sequential run.

    python benchmarks/bench_gate.py [DIR] [--workers N]

"Warm" is a user's second gate run: one run first (untimed) fills the OS page cache and the
bytecode caches an install normally has (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs:
pip compiles bytecode at install time; an environment that forbids it pays ~1.5 s of
compiling per run, which is not the gate's cost).

Out of scope: cold-start costs of installing backends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=str(ROOT / "tokenizer" / "stack100m-32768-hf"))
    ap.add_argument("--workers", type=int, default=None, help="the gate's --workers (default: its own)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "gate.json"
        cmd = [sys.executable, "-m", "stacktok_cli", "gate", args.dir, "--quiet", "--json", str(report)]
        if args.workers is not None:
            cmd.append(f"--workers={args.workers}")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            out.seek(0)
            err.seek(0)
            verdicts = [line for line in out.read().splitlines() if line.startswith("verdict:")]
            if not verdicts or not report.exists():
                tail = " | ".join(err.read().strip().splitlines()[-3:]) or "no output"
                code = os.waitstatus_to_exitcode(status)
                print(
                    f"bench_gate: the gate on {args.dir} gave no verdict (exit {code}): {tail}",
                    file=sys.stderr,
                )
                return 2
        doc = json.loads(report.read_text())
    print(f"gate exit {os.waitstatus_to_exitcode(status)} verdict {doc['verdict']}")
    rss_mb = usage.ru_maxrss / 1024
    load = os.getloadavg()[0]
    budget = f"target <= 10s: {wall / 10:.2f}x of budget"
    print(f"wall {wall:.1f}s ({budget}), peak RSS {rss_mb:.0f} MB, load {load:.2f}")
    print(verdicts[-1])  # per-backend seconds (the JSON report has no wall times, for determinism)
    for name, version in sorted(doc["versions"].items()):
        print(f"  {name:20s} {version or 'missing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

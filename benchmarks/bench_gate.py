"""Gate benchmark: wall time of `stacktok gate` on the shipped directory, per backend.

Runs the real gate (every installed backend, shipped probes and chats) in a
subprocess and prints total wall time, per-backend seconds from its verdict
line, and peak RSS; target (issue 24): the whole gate in <= 10 s on 2 cores with every plain
backend warm. The gate runs backends in forked worker processes (``--workers``, default 2;
``conformance.checks.forked``); ``--workers 1`` in this script's argv compares the sequential run.

    python benchmarks/bench_gate.py [DIR] [--workers=N]

"Warm" is a user's second gate run: one run first (untimed) fills the OS page cache and the
bytecode caches an install normally has (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs:
pip compiles bytecode at install time; an environment that forbids it pays ~1.5 s of
compiling per run, which is not the gate's cost).

Out of scope: cold-start costs of installing backends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--workers")]
    workers = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--workers=")]
    target = args[0] if args else str(ROOT / "tokenizer" / "stack100m-32768-hf")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "gate.json"
        cmd = [sys.executable, "-m", "stacktok_cli", "gate", target, "--quiet", "--json", str(report)]
        cmd += [f"--workers={w}" for w in workers]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            out.seek(0)
            verdict_line = [line for line in out.read().splitlines() if line.startswith("verdict:")][-1]
        doc = json.loads(report.read_text())
    print(f"gate exit {os.waitstatus_to_exitcode(status)} verdict {doc['verdict']}")
    rss_mb = usage.ru_maxrss / 1024
    load = os.getloadavg()[0]
    budget = f"target <= 10s: {wall / 10:.2f}x of budget"
    print(f"wall {wall:.1f}s ({budget}), peak RSS {rss_mb:.0f} MB, load {load:.2f}")
    print(verdict_line)  # per-backend seconds (the JSON report has no wall times, for determinism)
    for name, version in sorted(doc["versions"].items()):
        print(f"  {name:20s} {version or 'missing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

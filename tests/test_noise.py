"""No library noise (issue #12): with ``--quiet`` a passing gate prints nothing on stderr.

Run in a subprocess so import-time banners (transformers' "PyTorch was not found"), per-call
warnings (the long-sequence warning) and C-level logs (llama.cpp's context-size note) are seen
as a user sees them.
"""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import SHIPPED_HF

LONG = "word " * 12_000  # > model_max_length (8192) tokens: transformers would warn


def test_quiet_gate_prints_nothing_on_stderr(tmp_path) -> None:
    probes = tmp_path / "p.jsonl"
    probes.write_text(
        "".join(json.dumps({"id": f"n-{i}", "text": t}) + "\n" for i, t in enumerate(["hi there", LONG]))
    )
    cmd = [
        sys.executable,
        "-m",
        "stacktok_cli",
        "gate",
        str(SHIPPED_HF),
        "--only-user-data",
        "--probes",
        str(probes),
        "--backends",
        "reference,tokenizers,transformers-reload,llama.cpp",
        "--quiet",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert out.stderr == "", out.stderr
    assert "verdict: PASS" in out.stdout

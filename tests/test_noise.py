"""No library noise (issue #12): with ``--quiet`` a passing gate prints nothing on stderr.

Run in a subprocess so import-time banners (transformers' "PyTorch was not found"), per-call
warnings (the long-sequence warning) and C-level logs (llama.cpp's context-size note) are seen
as a user sees them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from .helpers import GGUF, ROOT, SHIPPED_HF, GateData, run_gate, write_jsonl

LONG = "word " * 12_000  # > model_max_length (8192) tokens: transformers would warn


def test_quiet_gate_prints_nothing_on_stderr(tmp_path) -> None:
    probes = write_jsonl(
        tmp_path / "p.jsonl", [{"id": f"n-{i}", "text": t} for i, t in enumerate(["hi there", LONG])]
    )
    backends = "reference,tokenizers,transformers-reload,llama.cpp"
    out = run_gate(SHIPPED_HF, data=GateData(probes, None, tmp_path), backends=backends, process=True)
    assert out.code == 0, out.stdout[-2000:] + out.stderr
    assert out.stderr == "", out.stderr
    assert "verdict: PASS" in out.stdout


def test_quiet_fuzz_prints_nothing_on_stderr_and_progress_is_plain_lines() -> None:
    base = [sys.executable, "-m", "stacktok_cli", "fuzz", str(SHIPPED_HF), "--backends", "tokenizers"]
    quiet = subprocess.run(
        [*base, "--examples", "200", "--quiet"], capture_output=True, text=True, check=False
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    loud = subprocess.run([*base, "--examples", "200"], capture_output=True, text=True, check=False)
    lines = loud.stderr.splitlines()
    assert lines and all(line.startswith("  .. ") for line in lines), loud.stderr  # no \r, whole lines
    assert "\r" not in loud.stderr


def test_gguf_only_directory_names_no_file_it_does_not_have(tmp_path) -> None:
    d = tmp_path / "gguf-only"
    d.mkdir()
    shutil.copy(ROOT / "tokenizer" / GGUF, d)
    probes = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "text": "hello"}])
    out = run_gate(d, data=GateData(probes, None, tmp_path), process=True)
    assert out.code == 0, out.stdout[-1500:] + out.stderr
    assert "tokenizer_config.json" not in out.stdout + out.stderr

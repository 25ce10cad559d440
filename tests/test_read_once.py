"""A gate run reads each checkpoint file once: validation parses it and hands it on (issue 19).

An audit hook counts every ``open`` of a checkpoint file made by the gate's own stages
(validation, static checks, the vocabulary surface, the gate); opens made while a backend
adapter loads the directory are not counted -- those are the libraries' own loading paths,
which must read the files exactly as a user's code does.

Out of scope: the libraries' reads (transformers, tokenizers, llama.cpp read what they read).
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import stacktok_cli

ROOT = Path(__file__).resolve().parent.parent
NAME = "stack100m-32768"
ADAPTERS = str(ROOT / "conformance" / "backends")

_COUNTING: dict[str, Counter] = {}


def _hook(event: str, args: tuple) -> None:
    if event != "open" or not _COUNTING or not isinstance(args[0], (str, Path)):
        return
    path = str(Path(args[0]).resolve()) if not isinstance(args[0], int) else ""
    counts = _COUNTING.get("files")
    if counts is None or path not in counts:
        return
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(ADAPTERS):
            return  # a backend adapter loading the directory through its library
        frame = frame.f_back
    counts[path] += 1


sys.addaudithook(_hook)


def _checkpoint(tmp_path: Path) -> list[Path]:
    hf = tmp_path / f"{NAME}-hf"
    shutil.copytree(ROOT / "tokenizer" / f"{NAME}-hf", hf)
    (hf / "config.json").write_text('{"model_type": "llama", "vocab_size": 32768}\n', encoding="utf-8")
    for suffix in (".gguf", ".tiktoken"):
        shutil.copy(ROOT / "tokenizer" / f"{NAME}{suffix}", tmp_path / f"{NAME}{suffix}")
    return sorted(hf.iterdir()) + [tmp_path / f"{NAME}.gguf", tmp_path / f"{NAME}.tiktoken"]


def test_each_checkpoint_file_is_read_once_per_gate_run(tmp_path: Path, capsys) -> None:
    files = _checkpoint(tmp_path)
    probes = tmp_path / "probes.jsonl"
    probes.write_text('{"id": "p", "text": "hello world"}\n', encoding="utf-8")
    counts: Counter = Counter({str(p.resolve()): 0 for p in files})
    _COUNTING["files"] = counts
    try:
        code = stacktok_cli.main(
            ["gate", str(tmp_path / f"{NAME}-hf"), "--backends", "reference,tokenizers",
             "--only-user-data", "--probes", str(probes), "--quiet"]
        )  # fmt: skip
    finally:
        _COUNTING.clear()
    out = capsys.readouterr()
    assert code == 0, out.out[-2000:] + out.err[-2000:]
    by_name = {Path(p).name: n for p, n in counts.items()}
    assert by_name == dict.fromkeys(by_name, 1), f"reads per file (want 1 each): {by_name}"

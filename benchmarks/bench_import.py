"""Imported-reference benchmark (issue 21): `stacktok import` of Llama-3's vocabulary, and the
reference on it beside tiktoken on the same ranks, same run, ids asserted identical.

The input is llama.cpp's ``models/ggml-vocab-llama-bpe.gguf`` (128,256 ids, 280,147 merges,
``ignore_merges``) read straight from the llama-cpp-python sdist (``STACKTOK_LLAMA_SDIST``, as
the tests find it). The competitor is a ``tiktoken.Encoding`` built from the imported ranks
(ids = ranks, the Llama-3 pattern: what Meta's own tiktoken file holds), single-threaded.

Rows: import wall time (target <= 10 s); the first encode after the import (the held-out text's
first half in 50 KB documents: it also builds the numpy pair table for the 280,147 merges, once per
process); cold, as ``bench_encode.py`` defines it (the same half, caches cleared before each of
three runs, best run; target >= 0.3x tiktoken's speed); warm on a new text (caches cleared, the
first half encoded, the second half timed; best of three).

    python benchmarks/bench_import.py

Out of scope: packing (``bench_pack.py``), the exports (``stacktok export`` is timed by the tests).
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacktok_export.importers import import_tokenizer  # noqa: E402
from tests.helpers import llama_vocab  # noqa: E402

MEMBER = f"{llama_vocab.MODELS}/ggml-vocab-llama-bpe.gguf"


def llama_bpe_gguf(tmp: Path) -> Path:
    sdist = llama_vocab.sdist()
    if sdist is None:
        raise SystemExit(f"no llama-cpp-python sdist: {llama_vocab.HOW}")
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(MEMBER))
        out = tmp / "llama-bpe.gguf"
        out.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    return out


def _docs(text: str, size: int = 50_000) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _timed(fn, docs: list[str]) -> tuple[float, list[list[int]]]:
    start = time.perf_counter()
    out = [fn(d) for d in docs]
    return time.perf_counter() - start, out


def _best(fn, docs: list[str], setup, repeat: int = 3) -> tuple[float, list[list[int]]]:
    """The best of ``repeat`` timed runs, ``setup()`` (untimed) before each."""
    runs = []
    for _ in range(repeat):
        setup()
        runs.append(_timed(fn, docs))
    return min(t for t, _ in runs), runs[-1][1]


def main() -> None:
    import tiktoken

    with tempfile.TemporaryDirectory() as tmp:
        path = llama_bpe_gguf(Path(tmp))
        start = time.perf_counter()
        tok = import_tokenizer(path)
        seconds = time.perf_counter() - start
    ranks = {b: i for i, b in enumerate(tok.id_bytes()) if i not in tok.id_to_special}
    enc = tiktoken.Encoding("llama-bpe", pat_str=tok.pattern, mergeable_ranks=ranks, special_tokens={})
    text = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")
    first, second = _docs(text[: len(text) // 2]), _docs(text[len(text) // 2 :])
    ours_first, a = _timed(tok.encode, first)
    theirs_first, b = _timed(enc.encode_ordinary, first)
    if a != b:
        raise SystemExit("ids differ on the held-out text's first half")
    ours_cold, a = _best(tok.encode, first, tok._clear_caches)
    theirs_cold, b = _best(enc.encode_ordinary, first, lambda: None)
    if a != b:
        raise SystemExit("ids differ on the held-out text's first half")

    def warm() -> None:
        tok._clear_caches()
        _timed(tok.encode, first)

    ours_warm, a = _best(tok.encode, second, warm)
    theirs_warm, b = _best(enc.encode_ordinary, second, lambda: None)
    if a != b:
        raise SystemExit("ids differ on the held-out text's second half")
    load = os.getloadavg()[0]
    print(f"import llama-bpe GGUF ({tok.vocab_size:,} ids, {len(tok.merges):,} merges): {seconds:.2f} s")
    print(f"first encode after import (1st half): {theirs_first / ours_first:.2f}x tiktoken's speed")
    print(f"cold encode, held-out 1st half:       {theirs_cold / ours_cold:.2f}x tiktoken's speed")
    print(f"warm on a new text (2nd half):        {theirs_warm / ours_warm:.2f}x tiktoken's speed")
    print(f"load average {load:.1f}")


if __name__ == "__main__":
    main()

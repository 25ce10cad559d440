"""The gate on a checkpoint whose GGUF is a model (weights), not the vocab-only export.

Checked like the vocab-only one (surface, metadata, llama.cpp rows, EOG); in addition its
embeddings must cover the 32,768 ids. Foreign tokenizer metadata or short embeddings fail,
and the fix names ``stacktok retokenize`` / resizing, not ``stacktok export``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacktok_export import StackTokenizer
from stacktok_export.export.gguf_model import retokenize

from .conftest import need
from .helpers import GGUF, SHIPPED, build_checkpoint, failing, remove, run_gate
from .tiny_llama import write_tiny_llama

BACKENDS = "reference,tokenizers,llama.cpp,llama.cpp-detokenize"


def checkpoint_with_model(dest: Path, build) -> Path:
    """A checkpoint whose .gguf is the model ``build(path)`` writes (the vocab-only one removed)."""
    need("gguf", "gguf")
    ckpt = build_checkpoint(dest, exports="inside", model_config=True, edits=[remove(GGUF)])
    build(ckpt / "model.gguf")
    return ckpt


def ours(rows: int):
    def build(path: Path) -> None:
        foreign = write_tiny_llama(path.with_suffix(".in"), rows=rows)
        retokenize(foreign, path, StackTokenizer.load(SHIPPED))
        foreign.unlink()

    return build


@pytest.mark.parametrize("rows", [32768, 32832])
def test_model_gguf_with_our_tokenizer_passes(tmp_path, gate_files, rows) -> None:
    ckpt = checkpoint_with_model(tmp_path / "ckpt", ours(rows))
    run = run_gate(ckpt, "--require", "llama.cpp", data=gate_files, backends=BACKENDS, report=True)
    code, report = run.code, run.report
    assert code == 0, failing(report)
    by = {(c["check"], c["backend"]): c for c in report["checks"]}
    assert by[("gguf.embedding_rows", "files")]["status"] == "pass"
    assert by[("gguf.eog", "llama.cpp")]["status"] == "pass"
    assert "model.gguf" not in by[("provenance.files", "files")]["message"]  # weights: not compared as bytes
    assert by[("conformance.encode", "llama.cpp")]["status"] == "pass"


def test_model_gguf_with_foreign_tokenizer_fails_with_the_retokenize_fix(tmp_path, gate_files) -> None:
    ckpt = checkpoint_with_model(tmp_path / "ckpt", lambda p: write_tiny_llama(p))
    run = run_gate(ckpt, data=gate_files, backends=BACKENDS, report=True)
    code, report = run.code, run.report
    assert code == 1
    bad = failing(report)
    want = {
        "surface.gguf_tokens[files]",
        "gguf.merges[files]",
        "gguf.eog[llama.cpp]",
        "conformance.encode[llama.cpp]",
    }
    assert want <= set(bad), bad
    fixes = {c["check"]: c["fix"] for c in report["checks"] if c["backend"] == "files"}
    for check in ("surface.gguf_tokens", "gguf.merges", "gguf.special_ids"):
        assert "stacktok retokenize model.gguf --out NEW.gguf" in fixes[check]


def test_model_gguf_whose_embeddings_miss_ids_fails(tmp_path, gate_files) -> None:
    tok = StackTokenizer.load(SHIPPED)
    ckpt = checkpoint_with_model(tmp_path / "ckpt", lambda p: write_tiny_llama(p, rows=32000, ours=tok))
    run = run_gate(ckpt, data=gate_files, backends=BACKENDS, report=True)
    code, report = run.code, run.report
    assert code == 1
    assert set(failing(report)) == {"gguf.embedding_rows[files]"}
    row = next(c for c in report["checks"] if c["check"] == "gguf.embedding_rows")
    assert "32,000 rows, fewer than the 32,768 token ids" in row["message"]
    assert "resize the model's embeddings to at least 32,768 rows" in row["fix"]

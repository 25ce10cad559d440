"""Output that cannot vanish (issue #20): no backend load may leave fd 1 or 2 redirected.

llama-cpp-python's ``Llama(verbose=False)`` dup2's /dev/null over the process's fds 1 and 2
while a model loads; two loads in two threads (``--workers 2`` over llama.cpp and
llama.cpp-detokenize) could leave them there for good, and the gate's table and verdict
vanished with exit 0. Vocab-only GGUFs now load by llama.cpp's C API, and
:func:`conformance.checks.loading.load_named` catches (and undoes) any load that re-points
the standard streams.

Out of scope: the gate's verdicts themselves (tests/test_gate*.py); llama.cpp's decode paths
(tests/test_llama_decode.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import stacktok_cli
from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.checks.loading import load_named
from conformance.core.fixtures import load_probes
from conformance.core.layout import Exports

from .conftest import ROOT, SHIPPED, SHIPPED_HF, need
from .tiny_llama import write_tiny_llama

GGUF = ROOT / "tokenizer" / "stack100m-32768.gguf"
RUNS = 30


def _probe_file(tmp_path: Path) -> Path:
    path = tmp_path / "probes.jsonl"
    texts = ["hello world", "Hi , you !", "caf\u00e9 \U0001f680 <|user|> x"]
    lines = [json.dumps({"id": f"p-{i}", "category": "hand", "text": t}) for i, t in enumerate(texts)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_gate_with_two_workers_over_both_llama_backends_always_prints_table_and_verdict(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    need("llama_cpp", "llama")
    argv = ["gate", str(SHIPPED_HF), "--backends", "llama.cpp,llama.cpp-detokenize", "--workers", "2"]
    argv += ["--only-user-data", "--probes", str(_probe_file(tmp_path)), "--quiet"]
    lost = []
    for run in range(RUNS):
        code = stacktok_cli.main(argv)
        out = capfd.readouterr().out  # fd-level: a lost fd 1 shows as an empty capture
        if code != 0 or "conformance.decode" not in out or "verdict: PASS" not in out:
            lost.append((run, code, out[-300:]))
    assert lost == []


def _silences_stdout(name: str, exports: Exports) -> object:
    """A backend load that does what ``suppress_stdout_stderr`` left behind: /dev/null on fd 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return object()


def test_a_load_that_redirects_fd_1_is_undone_and_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("conformance.checks.loading.load_backend", _silences_stdout)
    before = os.fstat(1)
    loaded = load_named("llama.cpp", Exports.discover(SHIPPED_HF, artifact=SHIPPED))
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    print("still here", flush=True)
    assert capfd.readouterr().out == "still here\n"
    assert (loaded.status, loaded.backend) == ("error", None), loaded
    assert loaded.reason == (
        "the library redirected the process's standard streams while loading (fd 1); restored them"
    )


def test_a_load_that_swaps_sys_stdout_is_undone_and_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    stdout = sys.stdout

    def swap(name: str, exports: Exports) -> object:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- left behind on purpose
        return object()

    monkeypatch.setattr("conformance.checks.loading.load_backend", swap)
    loaded = load_named("llama.cpp", Exports.discover(SHIPPED_HF, artifact=SHIPPED))
    assert sys.stdout is stdout
    assert loaded.status == "error" and "(sys.stdout)" in loaded.reason, loaded


def test_a_clean_load_is_still_loaded() -> None:
    need("llama_cpp", "llama")
    loaded = load_named("llama.cpp", Exports.discover(SHIPPED_HF, artifact=SHIPPED))
    assert loaded.status == "loaded", loaded


@pytest.fixture(scope="module")
def adds_bos_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GGUF whose tokenizer adds BOS (the tiny Llama's foreign llama-bpe keys)."""
    need("gguf", "gguf")
    return write_tiny_llama(tmp_path_factory.mktemp("bos") / "foreign.gguf")


@pytest.mark.parametrize("which", ["shipped", "adds-bos"])
def test_default_encode_is_exactly_llama_tokenize_with_its_defaults(which: str, request) -> None:
    """The direct ``llama_tokenize(add_special=True, parse_special=False)`` equals the old
    ``Llama(vocab_only=True).tokenize(text)`` on every shipped probe (one ``Llama``, one thread),
    over the shipped GGUF and over one that adds BOS (where ``add_special`` shows)."""
    llama_cpp = need("llama_cpp", "llama")
    path = GGUF if which == "shipped" else request.getfixturevalue("adds_bos_gguf")
    tok = LlamaCppTokenizer(path)
    assert tok.adds_bos == (which == "adds-bos")
    old = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=True)
    old.verbose = False
    probes = load_probes(ROOT / "fixtures" / "probes.jsonl")
    assert len(probes) > 5000
    texts = [p.text for p in probes] + ["", " ", "<|bos|>", "<|user|>hi<|end|>"]
    differ = [t[:60] for t in texts if tok.default_tokenize(t) != old.tokenize(t.encode("utf-8"))]
    assert differ == []
    old.close()
    tok.close()


def test_a_vocab_only_tokenizer_has_no_llama_and_closes_twice() -> None:
    need("llama_cpp", "llama")
    tok = LlamaCppTokenizer(GGUF)
    with pytest.raises(AttributeError, match="weights=True"):
        tok.llama  # noqa: B018
    tok.close()
    tok.close()


def test_a_refused_gguf_quotes_llama_cpp(tmp_path: Path) -> None:
    need("llama_cpp", "llama")
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF not really")
    with pytest.raises(ValueError, match=r"^Failed to load model from file: .*x\.gguf; llama\.cpp said: "):
        LlamaCppTokenizer(bad)
    with pytest.raises(ValueError, match=r"^Model path does not exist: "):
        LlamaCppTokenizer(tmp_path / "absent.gguf")

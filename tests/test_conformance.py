"""The conformance suite itself: protocol, missing backends, planted faults, reports."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.__main__ import main as conformance_main
from conformance.backends import BACKENDS, READS, REGISTRY, load_backend
from conformance.backends._base import BaseBackend, byte_stream, text_stream
from conformance.checks.loading import load_named
from conformance.checks.runner import result_rows, run_suite
from conformance.core.fixtures import Divergence, FixtureSet, Probe, load_probes
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, Capability
from conformance.core.rows import exit_code, required_not_run
from conformance.report import render_results

from .conftest import ROOT, SHIPPED, SHIPPED_HF
from .strings import HARD_STRINGS

pytestmark = pytest.mark.transformers  # runs under transformers 4.57.x and 5.x

LOCAL = ["reference", "tiktoken", "tokenizers", "transformers", "transformers-reload", "llama.cpp"]

#: ground truth for the protocol test, independent of every adapter (the reference included): the
#: ids of PROTOCOL_TEXT reviewed by hand against the artifact's merge list, and checked below by
#: rebuilding each id's bytes from the raw merges in the artifact JSON (not through StackTokenizer)
PROTOCOL_TEXT = "Hello <|user|> wörld 👍"
#: b"Hello" b" <" b"|" b"user" b"|" b">" b" w" b"\xc3\xb6r" b"ld" b" ", then the four bytes of 👍
UNTRUSTED_IDS = [8953, 567, 124, 2263, 124, 62, 301, 15611, 1511, 32, 240, 159, 145, 141]
#: the same with specials parsed: "<|user|>" is one id, 32763 (special 4 of 9 at the vocab's end)
TRUSTED_IDS = [8953, 32, 32763, 301, 15611, 1511, 32, 240, 159, 145, 141]


@pytest.fixture(scope="module")
def exports() -> Exports:
    return Exports.discover(SHIPPED_HF, artifact=SHIPPED)


@pytest.fixture(scope="module")
def small_fixtures() -> FixtureSet:
    fs = FixtureSet.load(shipped=False)
    fs.probes = [Probe(f"hard-{i}", "hard", t) for i, t in enumerate(HARD_STRINGS)]
    return fs


def test_discovery_finds_sibling_exports(exports: Exports) -> None:
    assert exports.hf_dir == SHIPPED_HF
    assert exports.tiktoken and exports.tiktoken.name == "stack100m-32768.tiktoken"
    assert exports.gguf and exports.gguf.name == "stack100m-32768.gguf"


@pytest.mark.parametrize("name", LOCAL)
def test_adapters_implement_the_protocol(exports: Exports, name: str) -> None:
    backend = load_backend(name, exports)
    assert isinstance(backend, Backend)
    assert backend.name == name and backend.version
    assert Capability.ENCODE in backend.capabilities
    assert backend.encode(PROTOCOL_TEXT, allow_special=False) == UNTRUSTED_IDS
    assert backend.encode(PROTOCOL_TEXT, allow_special=True) == TRUSTED_IDS
    assert backend.reads == READS[name]


def test_protocol_ground_truth_spells_the_text() -> None:
    """The hand-reviewed ids are the artifact's own: raw merges give their bytes back."""
    artifact = json.loads(SHIPPED.read_text())
    vocab = {i: bytes([i]) for i in range(256)}
    for rank, (a, b) in enumerate(artifact["merges"]):
        vocab[256 + rank] = vocab[a] + vocab[b]
    specials = artifact["special_tokens"]
    for i, name in enumerate(specials):
        vocab[artifact["vocab_size"] - len(specials) + i] = name.encode()
    assert b"".join(vocab[i] for i in UNTRUSTED_IDS) == PROTOCOL_TEXT.encode()
    assert b"".join(vocab[i] for i in TRUSTED_IDS) == PROTOCOL_TEXT.encode()
    assert not any(i >= artifact["vocab_size"] - len(specials) for i in UNTRUSTED_IDS)


def test_every_adapter_reads_what_its_registry_entry_says() -> None:
    declared: dict[str, str] = {}
    for module_name in sorted({e.module for e in BACKENDS.values()}):
        module = importlib.import_module(module_name, "conformance.backends")
        for cls in vars(module).values():
            if isinstance(cls, type) and issubclass(cls, BaseBackend) and "reads" in vars(cls):
                declared[cls.name] = cls.reads
    assert declared == {name: READS[name] for name in declared}
    # adapters that set ``reads`` per instance are loaded and checked in the protocol test
    assert set(declared) | set(LOCAL) == set(BACKENDS)
    assert "reads" not in vars(BaseBackend)  # no default: an adapter that forgets fails the protocol


def test_the_one_loader_classifies_every_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf_only = tmp_path / "only-hf"
    shutil.copytree(SHIPPED_HF, hf_only)
    exports = Exports.discover(hf_only, artifact=SHIPPED)
    loaded = load_named("reference", exports)
    assert loaded.status == "loaded" and loaded.backend is not None and loaded.error is None
    skip = load_named("tiktoken", exports)
    assert (skip.status, skip.backend) == ("skip", None) and "no .tiktoken" in skip.reason
    (hf_only / "tokenizer.json").write_text("{not json")
    error = load_named("tokenizers", exports)
    assert error.status == "error" and error.backend is None and error.reason.startswith("Exception: ")
    assert error.line(20) == error.reason.splitlines()[0][:20]
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # the library absent
    missing = load_named("tokenizers", exports)
    assert missing.status == "missing" and "pip install 'stacktok[hf]'" in missing.reason


def test_floor_and_suite_share_first_difference() -> None:
    from conformance.checks import runner, windows
    from stacktok_export.pack import encode
    from stacktok_export.util import diff

    assert windows.first_difference is diff.first_difference is runner.first_difference
    assert encode.first_difference is diff.first_difference
    assert diff.first_difference([1, 2], [1, 2, 3]) == 2 and diff.first_difference([5], [6]) == 0


def test_unknown_backend_is_a_usage_error(exports: Exports) -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        load_backend("sentencepiece", exports)


def test_missing_backend_is_reported_missing_not_passed(tmp_path: Path, small_fixtures) -> None:
    hf_only = tmp_path / "only-hf"
    shutil.copytree(SHIPPED_HF, hf_only)
    exports = Exports.discover(hf_only, artifact=SHIPPED)
    results, _, _ = run_suite(exports, small_fixtures, ["reference", "llama.cpp", "tiktoken"])
    by_name = {r.name: r for r in results}
    # no .gguf / .tiktoken in the directory: not checked (skip, named in the verdict), never passed
    assert by_name["llama.cpp"].status == "skip" and by_name["llama.cpp"].probes_run == 0
    assert by_name["tiktoken"].status == "skip" and "no .tiktoken" in by_name["tiktoken"].reason
    rows = result_rows(results, stale=[])
    assert required_not_run(rows, required=["llama.cpp"]) == ["llama.cpp"]  # from the rows, not by hand
    assert exit_code(rows, required_missing=required_not_run(rows, required=["llama.cpp"])) == 4
    assert exit_code(rows, required_missing=required_not_run(rows, required=[])) == 0


def _conformance_cli(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    probes = directory.parent / "one-probe.jsonl"
    probes.write_text(json.dumps({"id": "x", "category": "c", "text": "hello world"}) + "\n")
    cmd = [sys.executable, "-m", "conformance", str(directory), "--artifact", str(SHIPPED), "--quiet"]
    cmd += ["--only-user-data", "--probes", str(probes), *args]
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "backend",
    [
        "tiktoken",  # no .tiktoken beside the copied directory: skip
        pytest.param(
            "vllm",  # not installed in tests(latest): missing (the nox conformance session's case)
            marks=pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm installed"),
        ),
    ],
)
def test_python_m_conformance_require_is_incomplete_when_it_cannot_run(tmp_path: Path, backend: str) -> None:
    """The real ``python -m conformance --require`` (noxfile.py's conformance session relies on it):
    a required backend that cannot run stops the run before any check, INCOMPLETE (exit 4); not
    required, a backend without its file is not applicable (0) and one not installed INCOMPLETE (4)."""
    hf_only = tmp_path / "only-hf"
    shutil.copytree(SHIPPED_HF, hf_only)
    required = _conformance_cli(hf_only, "--backends", f"reference,{backend}", "--require", backend)
    assert required.returncode == 4, required.stderr
    assert f"conformance: INCOMPLETE: required backend {backend} cannot run" in required.stderr
    assert "verdict:" not in required.stdout  # decided before anything ran
    optional = _conformance_cli(hf_only, "--backends", f"reference,{backend}")
    want = 0 if backend == "tiktoken" else 4  # no .tiktoken here: skip; vllm absent: missing
    assert optional.returncode == want, optional.stdout + optional.stderr
    assert "required backend" not in optional.stderr


def test_shipped_exports_conform(exports: Exports, small_fixtures) -> None:
    results, stale, _ = run_suite(exports, small_fixtures, LOCAL)
    for r in results:
        assert r.status == "ok", render_results(results)
        assert r.probes_identical + r.probes_declared == len(small_fixtures.probes)
    assert {r.name: r.default_behaviour for r in results}["tiktoken"] == "raises"


def _corrupt_one_merge(src: Path, dst: Path) -> str:
    shutil.copytree(src, dst)
    path = dst / "tokenizer.json"
    data = json.loads(path.read_text())
    merges = data["model"]["merges"]
    victim = merges.index("Ġ t")  # the merge behind " t..." words
    merges.append(merges.pop(victim))  # demote it to the lowest priority
    path.write_text(json.dumps(data))
    return merges[-1]


def test_corrupted_merge_fails_with_a_readable_window(tmp_path: Path, small_fixtures) -> None:
    bad = tmp_path / "bad-hf"
    _corrupt_one_merge(SHIPPED_HF, bad)
    exports = Exports.discover(bad, artifact=SHIPPED)
    results, _, _ = run_suite(exports, small_fixtures, ["reference", "tokenizers", "transformers-reload"])
    by_name = {r.name: r for r in results}
    for name in ("tokenizers", "transformers-reload"):
        r = by_name[name]
        assert r.status == "diverged" and r.probes_diverged > 0
        failure = next(f for f in r.failures if f.check == "encode")
        assert failure.window and failure.window["reference"] != failure.window["backend"]
    text = render_results(results)
    assert "first difference at id position" in text and "reference:" in text and "backend:" in text
    assert exit_code(result_rows(results, stale=[]), required_missing=[]) == 1


def test_declared_divergence_reports_as_expected(tmp_path: Path, small_fixtures) -> None:
    bad = tmp_path / "bad-hf"
    _corrupt_one_merge(SHIPPED_HF, bad)
    exports = Exports.discover(bad, artifact=SHIPPED)
    small_fixtures.divergences = [
        Divergence("planted", "tokenizers", "*", "*", "planted in a test", "-", category="hard")
    ]
    results, stale, _ = run_suite(exports, small_fixtures, ["reference", "tokenizers"])
    tk = {r.name: r for r in results}["tokenizers"]
    assert tk.status == "ok" and tk.probes_declared > 0 and tk.probes_diverged == 0
    assert stale == []


def test_stale_declaration_is_flagged(exports: Exports, small_fixtures) -> None:
    small_fixtures.divergences = [
        Divergence("rotten", "tokenizers", "encode", "*", "no longer true", "-", category="hard")
    ]
    results, stale, _ = run_suite(exports, small_fixtures, ["reference", "tokenizers"])
    assert stale == ["rotten"]
    assert exit_code(result_rows(results, stale=stale), required_missing=[]) == 1


def test_streaming_helpers_hold_back_partial_characters() -> None:
    data = "añ👍中".encode()
    one_byte_tokens = list(data)
    pieces = byte_stream(lambda ids: bytes(ids), one_byte_tokens)
    assert "".join(pieces) == "añ👍中" and not any("\ufffd" in p for p in pieces)
    pieces = text_stream(lambda ids: bytes(ids).decode("utf-8", "replace"), one_byte_tokens)
    assert "".join(pieces) == "añ👍中" and not any("\ufffd" in p for p in pieces)


def test_stream_remembers_short_windows_and_streams_the_same() -> None:
    class Counting(BaseBackend):
        name = "counting"
        reads = "-"

        def __init__(self, exact: bool) -> None:
            self.decode_exact, self.calls = exact, []

        def decode_bytes(self, ids):
            self.calls.append(tuple(ids))  # a text decoder's bytes: the UTF-8 of its text
            return bytes(ids) if self.decode_exact else bytes(ids).decode("utf-8", "replace").encode()

    ids = list("añ👍 the end".encode())
    for exact in (True, False):
        backend = Counting(exact)
        plain = (byte_stream if exact else text_stream)(
            bytes if exact else (lambda w: bytes(w).decode("utf-8", "replace")), ids
        )
        first = backend.stream(ids)
        assert first == plain and "".join(first) == "añ👍 the end"
        made = len(backend.calls)
        assert made < (len(ids) if exact else 2 * len(ids))  # windows recur within one stream
        assert backend.stream(ids) == first
        assert all(len(w) > 3 for w in backend.calls[made:])  # a second stream: only long windows


def test_probe_file_errors_name_the_line(tmp_path: Path) -> None:
    from conformance.core.fixtures import FixtureError

    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "a", "category": "c", "text": "x"}\n{"id": "b", "category": "c"}\n')
    with pytest.raises(FixtureError, match="p.jsonl:2: field 'text' must be str"):
        load_probes(bad)


def test_cli_exit_codes(tmp_path: Path) -> None:
    probes = tmp_path / "p.jsonl"
    probes.write_text(json.dumps({"id": "x", "category": "c", "text": "hello world"}) + "\n")
    assert (
        conformance_main(
            [str(SHIPPED_HF), "--backends", "reference,tokenizers", "--quiet", "--probes", str(probes)]
        )
        == 0
    )
    assert conformance_main([str(tmp_path / "nope"), "--quiet"]) == 2
    bad = tmp_path / "bad-hf"
    _corrupt_one_merge(SHIPPED_HF, bad)
    assert (
        conformance_main(
            [
                str(bad),
                "--artifact",
                str(SHIPPED),
                "--backends",
                "reference,tokenizers",
                "--quiet",
                "--probes",
                str(probes),
            ]
        )
        == 1
    )


def test_registry_names_are_the_documented_ones() -> None:
    assert set(REGISTRY) == set(LOCAL) | {"vllm", "trl", "llama.cpp-detokenize", "llama-server"}


def test_a_batch_encode_that_raises_leaves_each_probe_its_own_error(small_tok) -> None:
    """An adapter that ``encodes_in_batch``: its batch ids are used as encode's; when the batch
    raises, each probe is asked alone, so only the probe that breaks the library fails."""
    from conformance.backends.reference import ReferenceBackend
    from conformance.checks.compare import Runner

    class Batching(ReferenceBackend):
        encodes_in_batch = True
        capabilities = frozenset({Capability.ENCODE})

        def __init__(self, tok, *, batch_breaks: bool) -> None:
            super().__init__(tok)
            self.batch_breaks, self.batches = batch_breaks, 0

        def encode_batch(self, texts, *, allow_special):
            self.batches += 1
            if self.batch_breaks:
                raise RuntimeError("batch broke")
            return [[*self.encode(t, allow_special=allow_special), 0] if t == "odd" else
                    self.encode(t, allow_special=allow_special) for t in texts]  # fmt: skip

        def encode(self, text, *, allow_special):
            if text == "boom":
                raise RuntimeError("the library broke on this text")
            return super().encode(text, allow_special=allow_special)

    probes = [Probe("fine", "c", "hello world"), Probe("boom", "c", "boom"), Probe("odd", "c", "odd")]
    runner = Runner(small_tok, FixtureSet(probes=probes))
    broken = Batching(small_tok, batch_breaks=True)
    res = runner.run(broken)
    assert broken.batches == 1 and [(f.check, f.probe) for f in res.failures] == [("encode", "boom")]
    assert "the library broke on this text" in res.failures[0].detail
    calm = Runner(small_tok, FixtureSet(probes=[probes[0], probes[2]]))
    used = calm.run(Batching(small_tok, batch_breaks=False))  # the batch's ids are the ones judged
    assert [(f.check, f.probe) for f in used.failures] == [("encode", "odd")]

"""The conformance suite itself: protocol, missing backends, planted faults, reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conformance.__main__ import main as conformance_main
from conformance.backends import REGISTRY, load_backend
from conformance.backends._base import byte_stream, text_stream
from conformance.core.fixtures import Divergence, FixtureSet, Probe, load_probes
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, Capability
from conformance.report import render_text
from conformance.core.rows import exit_code
from conformance.checks.runner import result_rows, run_suite

from .conftest import SHIPPED, SHIPPED_HF
from .strings import HARD_STRINGS

pytestmark = pytest.mark.transformers  # runs under transformers 4.57.x and 5.x

LOCAL = ["reference", "tiktoken", "tokenizers", "transformers", "transformers-reload", "llama.cpp"]


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
    text = "Hello <|user|> wörld 👍"
    assert backend.encode(text, allow_special=False) == load_backend("reference", exports).encode(
        text, allow_special=False
    )


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
    assert exit_code(result_rows(results, stale=[]), required_missing=["llama.cpp"]) == 2
    assert exit_code(result_rows(results, stale=[]), required_missing=[]) == 0


def test_shipped_exports_conform(exports: Exports, small_fixtures) -> None:
    results, stale, _ = run_suite(exports, small_fixtures, LOCAL)
    for r in results:
        assert r.status == "ok", render_text(results)
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
    text = render_text(results)
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
    assert set(REGISTRY) == set(LOCAL) | {"vllm", "trl", "llama.cpp-detokenize"}

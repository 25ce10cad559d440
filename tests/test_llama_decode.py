"""llama.cpp's two decode paths, each its own row: token pieces (exact) and ``llama_detokenize``.

``llama_detokenize`` applies ``clean_spaces`` for our pre-tokenizer type (and every type with
the Llama-3 split); the declaration ``llama.cpp-detokenize-clean-spaces`` covers a difference
only when the bytes are exactly :func:`conformance.core.clean_spaces.clean_spaces` of the original.
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace

import pytest

from conformance.backends import load_backend
from conformance.backends.llama_backend import LlamaCppDetokenizeBackend
from conformance.checks.compare import Runner
from conformance.checks.loading import load_named
from conformance.checks.runner import result_rows, run_suite
from conformance.core.clean_spaces import clean_spaces
from conformance.core.declared import Declarations
from conformance.core.fixtures import FixtureSet, Probe
from conformance.core.layout import Exports
from conformance.core.protocol import Capability
from stacktok_export import StackTokenizer

from .conftest import SHIPPED, SHIPPED_HF, need

DETOK = "llama.cpp-detokenize"
CLEANED = {
    "Hello , world !": "Hello, world!",
    "Is it ? Yes .": "Is it? Yes.",
    "it 's he 'm we 're they 've": "it's he'm we're they've",
    "don 't I 'd we 'll": "don 't I 'd we 'll",  # 't, 'd and 'll keep their space
    "a ' b": "a'b",
    "x ' ' y": "x'' y",  # the second quote sees the blanked space, not a space
    " .": ".",
}


@pytest.fixture(scope="module")
def exports() -> Exports:
    need("llama_cpp", "llama")
    return Exports.discover(SHIPPED_HF, artifact=SHIPPED)


@pytest.fixture(scope="module")
def detok(exports: Exports) -> LlamaCppDetokenizeBackend:
    backend = load_backend(DETOK, exports)
    assert isinstance(backend, LlamaCppDetokenizeBackend)
    return backend


@pytest.fixture(scope="module")
def ref() -> StackTokenizer:
    return StackTokenizer.load(SHIPPED)


@pytest.mark.parametrize("text", list(CLEANED))
def test_llama_detokenize_cleans_spaces_as_documented(detok, ref, text: str) -> None:
    got = detok.decode_bytes(ref.encode(text))
    assert got.decode() == CLEANED[text]
    assert clean_spaces(text.encode()) == got


def test_the_port_equals_llama_detokenize_on_random_text(detok, ref) -> None:
    rng = random.Random(15)
    alphabet = " '?!.,smrevtdlx\u00e9\n"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(20_000)]
    wrong = [t for t in texts if detok.decode_bytes(ref.encode(t)) != clean_spaces(t.encode())]
    assert wrong == []
    assert sum(clean_spaces(t.encode()) != t.encode() for t in texts) > 1_000  # it bites (1,657 here)


def test_piece_path_is_exact_where_detokenize_is_not(exports: Exports, detok, ref) -> None:
    pieces = load_backend("llama.cpp", exports)
    text = "Really ? It 's fine , isn 't it ."
    ids = ref.encode(text)
    assert pieces.decode_bytes(ids) == text.encode()
    assert detok.decode_bytes(ids) == b"Really? It's fine, isn 't it."
    assert Capability.ENCODE not in detok.capabilities  # its encode is the llama.cpp row's


def _fixtures(texts: Sequence[str], *, declared: bool) -> FixtureSet:
    fs = FixtureSet.load()
    fs.probes = [Probe(f"p-{i}", "hand", t) for i, t in enumerate(texts)]
    if not declared:
        fs.divergences = [d for d in fs.divergences if d.backend != DETOK]
    return fs


def _rows(exports: Exports, fs: FixtureSet) -> dict[str, object]:
    results, stale, _ = run_suite(exports, fs, ["reference", "llama.cpp", DETOK])
    return {(r.check, r.backend): r for r in result_rows(results, stale=stale)}


def test_each_decode_path_is_its_own_row_and_clean_spaces_is_declared(exports: Exports) -> None:
    rows = _rows(exports, _fixtures(["Hi , you !", "plain words"], declared=True))
    assert rows[("conformance.decode", "llama.cpp")].status == "pass"
    assert rows[("conformance.decode", "llama.cpp")].declared == 0
    decode = rows[("conformance.decode", DETOK)]
    assert decode.status == "pass" and decode.declared == 1, decode
    assert "llama.cpp-detokenize-clean-spaces" in decode.message
    single = rows[("conformance.single_tokens", DETOK)]
    assert single.status == "pass" and single.declared == 1  # " ." and friends
    assert rows[("conformance.encode", DETOK)].status == "skip"  # not applicable, never passed
    assert ("conformance.declarations", "files") not in rows


def test_without_the_declaration_detokenize_fails(exports: Exports) -> None:
    rows = _rows(exports, _fixtures(["Hi , you !"], declared=False))
    assert rows[("conformance.decode", DETOK)].status == "fail"
    assert rows[("conformance.single_tokens", DETOK)].status == "fail"
    assert rows[("conformance.decode", "llama.cpp")].status == "pass"


def test_declaration_is_stale_when_no_probe_could_show_it(exports: Exports) -> None:
    rows = _rows(exports, _fixtures(["plain words"], declared=True))
    assert rows[("conformance.decode", DETOK)].status == "pass"
    assert ("conformance.declarations", "files") not in rows  # nothing the transform changes
    fs = _fixtures(["a , b"], declared=True)
    runner = Runner(StackTokenizer.load(SHIPPED), fs)
    pieces = load_backend("llama.cpp", exports)
    # the declaration is for llama.cpp-detokenize: over a backend that decodes exactly it goes stale
    exact = replace(next(d for d in fs.divergences if d.cause == "clean_spaces"), backend="llama.cpp")
    decl = Declarations([exact], runner.ref)
    assert decl.stale({"llama.cpp": pieces}, set(), fs.probes) == [exact.id]


class _OtherBug(LlamaCppDetokenizeBackend):
    """llama_detokenize plus a different bug: the clean-up declaration must not hide it."""

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return super().decode_bytes(ids).replace(b"you", b"yOu")


def test_a_different_decode_bug_is_not_hidden(exports: Exports, detok) -> None:
    fs = _fixtures(["Hi , you !"], declared=True)
    runner = Runner(StackTokenizer.load(SHIPPED), fs)
    result = runner.run(_OtherBug(detok.tok))
    rows = {r.check: r for r in result_rows([result])}
    assert rows["conformance.decode"].status == "fail"
    assert rows["conformance.single_tokens"].status == "fail"  # " you" decodes wrongly too


@pytest.mark.parametrize("name", ["llama.cpp", DETOK])
def test_without_a_gguf_llama_is_skip_even_when_the_library_is_absent(
    tmp_path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The export is checked before the library: no ``.gguf`` is *skip*, with or without llama-cpp-python."""
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` now raises ImportError
    hf_only = tmp_path / "only-hf"
    shutil.copytree(SHIPPED_HF, hf_only)
    loaded = load_named(name, Exports.discover(hf_only, artifact=SHIPPED))
    assert (loaded.status, loaded.backend) == ("skip", None), loaded
    assert "no .gguf file in the directory" in loaded.reason
    # with the .gguf present, the absent library is what stops it: *missing*, with the install command
    loaded = load_named(name, Exports.discover(SHIPPED_HF, artifact=SHIPPED))
    assert loaded.status == "missing" and "pip install 'stacktok[llama]'" in loaded.reason, loaded

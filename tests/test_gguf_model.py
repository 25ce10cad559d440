"""A model GGUF that carries our tokenizer: ``stacktok retokenize``, then llama.cpp with weights.

End to end on CPU: a tiny random-weight Llama written with gguf-py (foreign tokenizer keys)
-> ``stacktok retokenize`` -> llama-cpp-python loads it *with* weights, tokenizes every probe
exactly as the vocab-only GGUF does, generates greedily, and stops at ``<|eos|>``/``<|end|>``
and nothing else. The converter route (``convert_hf_to_gguf.py``) is
``tests/test_gguf_convert.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.core.fixtures import load_probes
from stacktok_export import StackTokenizer
from stacktok_export.export.gguf_fmt import TOKEN_TYPE_UNUSED
from stacktok_export.export.gguf_model import retokenize
from stacktok_export.gguf.reader import read_gguf_fields

from .conftest import ROOT, SHIPPED, need
from .tiny_llama import write_tiny_llama

VOCAB_GGUF = ROOT / "tokenizer" / "stack100m-32768.gguf"
EOS, END, USER = 32760, 32765, 32763


def stacktok(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stacktok_cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need("gguf", "gguf")
    need("llama_cpp", "llama")
    d = tmp_path_factory.mktemp("model")
    out = {
        "foreign": write_tiny_llama(d / "foreign.gguf"),
        "padded": write_tiny_llama(d / "pad.gguf", rows=32832),
    }
    tok = StackTokenizer.load(SHIPPED)
    for name in ("foreign", "padded"):
        retokenize(out[name], d / f"{name}-ours.gguf", tok)
        out[f"{name}-ours"] = d / f"{name}-ours.gguf"
    return out


def _tensors(path: Path) -> dict[str, bytes]:
    import gguf

    return {t.name: (t.tensor_type, bytes(t.data.tobytes())) for t in gguf.GGUFReader(path).tensors}


def test_every_tokenizer_key_is_the_artifacts_and_tensors_are_unchanged(models) -> None:
    before, after = read_gguf_fields(models["foreign"]), read_gguf_fields(models["foreign-ours"])
    vocab_only = read_gguf_fields(VOCAB_GGUF)
    ours = {k: v for k, v in vocab_only.items() if k.startswith(("tokenizer.", "stacktok."))}
    assert {k: v for k, v in after.items() if k.startswith(("tokenizer.", "stacktok."))} == ours
    assert "tokenizer.ggml.scores" in before and "tokenizer.ggml.scores" not in after  # foreign key gone
    kept = {k: v for k, v in before.items() if not k.startswith(("tokenizer.", "GGUF."))}
    assert {k: v for k, v in after.items() if k in kept} == kept  # general.name, llama.* as they were
    assert _tensors(models["foreign-ours"]) == _tensors(models["foreign"])


def test_retokenize_is_deterministic(models, tmp_path: Path) -> None:
    again = tmp_path / "again.gguf"
    assert stacktok("retokenize", str(models["foreign-ours"]), "--out", str(again)).returncode == 0
    assert again.read_bytes() == models["foreign-ours"].read_bytes()


def test_padded_embeddings_get_unused_pad_tokens(models) -> None:
    fields = read_gguf_fields(models["padded-ours"])
    tokens, types = fields["tokenizer.ggml.tokens"][0], fields["tokenizer.ggml.token_type"][0]
    assert len(tokens) == 32832 and tokens[32768] == "[PAD32768]" and tokens[-1] == "[PAD32831]"
    assert set(types[32768:]) == {TOKEN_TYPE_UNUSED}
    assert tokens[:32768] == read_gguf_fields(VOCAB_GGUF)["tokenizer.ggml.tokens"][0]


def assert_tokenizes_probes_like_the_vocab_only_gguf(path: Path) -> None:
    """Loaded *with weights*, every probe (untrusted and trusted) gets the vocab-only GGUF's ids."""
    model = LlamaCppTokenizer(path, weights=True)
    vocab_only = LlamaCppTokenizer(VOCAB_GGUF)
    probes = load_probes(ROOT / "fixtures" / "probes.jsonl")
    assert len(probes) > 5000
    for trusted in (False, True):
        differ = [
            p.id
            for p in probes
            if model.encode(p.text, allow_special=trusted) != vocab_only.encode(p.text, allow_special=trusted)
        ]
        assert differ == []
    assert not model.adds_bos and not model.adds_eos


def assert_generation_stops_at_eos_and_end_only(path: Path) -> None:
    """llama.cpp's EOG set is exactly {<|eos|>, <|end|>}; greedy generation stops there, not at <|user|>."""
    model = LlamaCppTokenizer(path, weights=True)
    assert {i for i in range(model.n_vocab) if model.is_eog(i)} == {EOS, END}
    llm = model.llama

    def complete(bias: dict[int, float] | None = None) -> dict:
        return llm.create_completion("Hello world", max_tokens=5, temperature=0.0, logit_bias=bias)

    free = complete()
    assert free["usage"]["completion_tokens"] == 5 and free["choices"][0]["finish_reason"] == "length"
    assert complete()["choices"][0]["text"] == free["choices"][0]["text"]  # greedy is deterministic
    for stop in (EOS, END):  # forced to emit an end-of-generation token: stops before emitting text
        done = complete({stop: 100.0})
        assert done["choices"][0]["finish_reason"] == "stop" and done["usage"]["completion_tokens"] == 0
    user = complete({USER: 100.0})  # another control token is not an end of generation
    assert user["choices"][0]["finish_reason"] == "length" and user["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize("name", ["foreign-ours", "padded-ours"])
def test_llama_cpp_loads_weights_and_tokenizes_the_probes_like_the_vocab_only_gguf(models, name) -> None:
    assert_tokenizes_probes_like_the_vocab_only_gguf(models[name])


@pytest.mark.parametrize("name", ["foreign-ours", "padded-ours"])
def test_greedy_generation_stops_at_eos_and_end_and_nothing_else(models, name) -> None:
    assert_generation_stops_at_eos_and_end_only(models[name])


def test_the_foreign_model_is_not_ours_before_retokenize(models) -> None:
    foreign = LlamaCppTokenizer(models["foreign"])
    assert foreign.adds_bos  # llama-bpe forces add-BOS: exactly what retokenize removes
    assert foreign.encode("hello", allow_special=False) != LlamaCppTokenizer(VOCAB_GGUF).encode(
        "hello", allow_special=False
    )


def test_refusals_are_one_line_exit_2_and_leave_out_untouched(models, tmp_path: Path) -> None:
    small = write_tiny_llama(tmp_path / "small.gguf", rows=32000)
    out = tmp_path / "out.gguf"
    out.write_bytes(b"previous")
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_text("hello")
    cases = {
        str(small): "token_embd.weight has 32,000 rows, fewer than the 32,768 token ids",
        str(VOCAB_GGUF): "no token_embd.weight tensor",
        str(not_gguf): "not a GGUF gguf-py can read",
        str(tmp_path / "absent.gguf"): "no such file",
    }
    for model, message in cases.items():
        res = stacktok("retokenize", model, "--out", str(out))
        assert res.returncode == 2 and message in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    same = stacktok("retokenize", str(models["foreign-ours"]), "--out", str(models["foreign-ours"]))
    assert same.returncode == 2 and "is the input" in same.stderr
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf", "small.gguf", "x.gguf"]  # no temp left

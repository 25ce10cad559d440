"""``stacktok gate`` / ``audit`` on an imported (v2) artifact: the original files judged against it.

Synthetic v2 vocabularies (``StackTokenizer.from_vocab``: GPT-2 byte order, specials first and
in the middle, add_bos, two split patterns, a special matched in text) exported with the HF
exporter pass the gate, and a planted drift fails with the right row. With llama.cpp's
vocabulary-only GGUFs from llama-cpp-python's sdist (marked ``llama_vocab``): a directory holding
the *original* GGUF and the exported tokenizer.json passes for llama-bpe, qwen2 and gpt-2, and a
wrong pre type or two swapped token strings in the original GGUF (rewritten with gguf-py's
writer) fail with the rows that name them. The layout rules of ``conformance.core.expect`` are
pinned to the old constants on the shipped v1 artifact.

Out of scope: the importer's own correctness (tests/test_import*.py), the exporters' bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.checks.compare import INJECTION_TEXT
from conformance.core import expect
from stacktok_export import StackTokenizer
from stacktok_export.export.hf import hf_files
from stacktok_export.export.tiktoken_fmt import tiktoken_text
from stacktok_export.split.bytelevel import to_chars

from .helpers import llama_vocab
from .helpers.gate import failing, run_gate
from .helpers.gguf_edit import rewrite_gguf
from .helpers.json_edit import edit_json
from .helpers.paths import SHIPPED

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
DIGITS = r"\p{N}{1,3}"
TEXT = (
    "hello world, hello hell 12345 or 1,000,000 wor\n"
    "the cat and the dog of the house said 'hello' <s> and <|im_end|> [PAD]\n"
    "naïve café – 中文 🚀 tab\there  spaces   end"
)
SYNTH_BACKENDS = "reference,tokenizers,transformers,transformers-reload"


# ------------------------------------------------------------------ synthetic v2
def _gpt2_byte_order() -> list[int]:
    first = [*range(33, 127), *range(161, 173), *range(174, 256)]
    return first + [b for b in range(256) if b not in first]


def synthetic() -> StackTokenizer:
    """Specials first (``<s>``) and between merges (``<|im_end|>``), bytes in GPT-2 order, two
    isolated splits, BOS added by default, ``[PAD]`` matched even in ordinary text."""
    tokens: list[bytes] = [b"<s>"] + [bytes([b]) for b in _gpt2_byte_order()]
    specials = {"<s>": 0}
    merges: list[tuple[int, int]] = []
    for n, (a, b) in enumerate([(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"o", b"r")]):
        if n == 2:
            specials["<|im_end|>"] = len(tokens)
            tokens.append(b"<|im_end|>")
        merges.append((tokens.index(a), tokens.index(b)))
        tokens.append(a + b)
    specials["[PAD]"] = len(tokens)
    tokens.append(b"[PAD]")
    return StackTokenizer.from_vocab(
        tokens=tokens,
        merges=merges,
        specials=specials,
        patterns=[DIGITS, GPT2],
        roles={"bos": 0, "eos": specials["<|im_end|>"]},
        add_bos=True,
        in_text=["[PAD]"],
        name="synthetic",
    )


def write_dir(tok: StackTokenizer, root: Path) -> tuple[Path, Path, Path]:
    """The artifact, a directory with its HF export, and a text file of probes."""
    artifact = root / "synthetic.json"
    tok.save(artifact)
    directory = root / "synthetic-hf"
    directory.mkdir()
    for name, data in hf_files(tok).items():
        (directory / name).write_bytes(data)
    text = root / "probes.txt"
    text.write_text(TEXT, encoding="utf-8")
    return artifact, directory, text


def gate(directory: Path, artifact: Path, text: Path, *, backends: str, out: Path):
    return run_gate(
        directory,
        "--artifact",
        str(artifact),
        "--only-user-data",
        "--text",
        str(text),
        backends=backends,
        report=out / f"report-{len(list(out.glob('report-*')))}.json",
    )


def statuses(report: dict) -> dict[str, str]:
    return {f"{c['check']}[{c['backend']}]": c["status"] for c in report["checks"]}


@pytest.fixture
def synth(tmp_path):
    tok = synthetic()
    return (tok, *write_dir(tok, tmp_path), tmp_path)


def test_synthetic_is_v2_with_its_own_layout() -> None:
    tok = synthetic()
    assert tok.format == "stacktok-bpe-v2"
    assert expect.control_ids(tok) == {0, tok.special_to_id["<|im_end|>"]}  # [PAD] is text
    assert expect.injection_text(tok) == "hello <|im_end|> world"  # the eos, a control special
    assert expect.leaked(tok, [0, 5, tok.vocab_size], expect.control_ids(tok)) == [0, tok.vocab_size]
    assert expect.default_additions(tok) == ([0], [])
    assert 0 not in expect.ordinary_bytes(tok) and expect.ordinary_bytes(tok)[1] == b"!"


def test_synthetic_export_passes_the_gate(synth) -> None:
    tok, artifact, directory, text, out = synth
    run = gate(directory, artifact, text, backends=SYNTH_BACKENDS, out=out)
    assert run.code == 0, failing(run.report)
    rows = statuses(run.report)
    assert rows["config.no_double_bos[files]"] == "pass"  # the post-processor adds <s> as the source does
    assert rows["config.bos_id[files]"] == "pass" and rows["config.eos_id[files]"] == "pass"
    assert rows["surface.tokenizer_json[files]"] == "pass"
    assert rows["conformance.encode[tokenizers]"] == "pass"
    assert rows["conformance.default[transformers-reload]"] != "fail"  # adds BOS, as the source does
    for backend in ("reference", "transformers"):  # our ChatML does not apply: skip, with why
        assert rows[f"conformance.chat[{backend}]"] == "skip"
    chat = next(c for c in run.report["checks"] if c["check"] == "conformance.chat")
    assert "imported (v2) artifact" in chat["message"]
    assert rows["chat.template_present[files]"] == "skip"  # no template, and the source has none


def test_synthetic_drifts_fail_with_their_rows(synth) -> None:
    tok, artifact, directory, text, out = synth
    tj = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    tj["post_processor"] = None  # no BOS any more: the source adds it
    (directory / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    run = gate(directory, artifact, text, backends=SYNTH_BACKENDS, out=out)
    assert run.code == 1
    assert "config.no_double_bos[files]" in failing(run.report)

    vocab = tj["model"]["vocab"]
    a, b = to_chars(b"he"), to_chars(b"ll")
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two token strings swapped
    (directory / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    bad = failing(gate(directory, artifact, text, backends=SYNTH_BACKENDS, out=out).report)
    assert {"surface.tokenizer_json[files]", "conformance.encode[tokenizers]"} <= bad.keys()


def test_v1_rules_are_the_old_constants() -> None:
    tok = StackTokenizer.load(SHIPPED)
    first = min(tok.special_to_id.values())
    ids = [0, first - 1, first, tok.vocab_size - 1, tok.vocab_size]
    assert expect.is_ours(tok)
    assert expect.leaked(tok, ids, expect.control_ids(tok)) == [i for i in ids if i >= first]
    assert expect.injection_text(tok) == INJECTION_TEXT
    assert expect.default_additions(tok) == ([], [])
    assert list(expect.ordinary_bytes(tok).values()) == tok.token_bytes()


def test_audit_self_reachability_is_informative_under_ignore_merges(tmp_path) -> None:
    from conformance.audit.reachability import check_self_reachable
    from conformance.audit.vocab import load_artifact_vocab

    # "ab" is a vocabulary token but no merge makes it: unreachable by merges alone
    tokens = [bytes([b]) for b in range(256)] + [b"bc", b"abc", b"ab"]
    merges = [(98, 99), (97, 256)]
    for ignore, want in ((True, "info"), (False, "fail")):
        tok = StackTokenizer.from_vocab(
            tokens=tokens, merges=merges, specials={}, patterns=[GPT2], ignore_merges=ignore
        )
        path = tmp_path / f"a{ignore}.json"
        tok.save(path)
        vocab, _, problems = load_artifact_vocab(path)
        assert not problems and vocab is not None
        row = check_self_reachable(vocab)[0]
        assert row.status == want, row.message


# ------------------------------------------------------------------ llama.cpp's real vocabularies
NAMES = ("llama-bpe", "qwen2", "gpt-2")
#: generation_config.json eos_token_id as the publisher ships it where the source GGUF's chat template
#: ends a turn with an id the export does not list: the artifact (imported from the GGUF) records
#: only the eos, <|endoftext|>; Qwen2's ChatML ends a turn with <|im_end|> (151645)
PUBLISHED_STOPS = {"qwen2": [151645, 151643]}
#: a pre type each source's GGUF must not carry (a different split)
WRONG_PRE = {"llama-bpe": "gpt-2", "qwen2": "gpt-2", "gpt-2": "qwen2"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    sdist = llama_vocab.sdist()
    if sdist is None:
        pytest.fail(f"no llama-cpp-python sdist: {llama_vocab.HOW}")
    return llama_vocab.extract_models(sdist, tmp_path_factory.mktemp("vocab"))


def original_dir(
    models: Path, name: str, root: Path, *, published: bool = True
) -> tuple[Path, Path, Path, StackTokenizer]:
    """The imported artifact, a directory with the original GGUF + the exported HF files, a text;
    ``published``: generation_config.json's eos ids as the publisher ships them (PUBLISHED_STOPS)."""
    from stacktok_export.importers import import_tokenizer

    gguf_path = models / f"ggml-vocab-{name}.gguf"
    tok = import_tokenizer(gguf_path)
    artifact = root / f"{name}.json"
    tok.save(artifact)
    directory = root / f"{name}-dir"
    directory.mkdir()
    (directory / gguf_path.name).write_bytes(gguf_path.read_bytes())
    for fname, data in hf_files(tok).items():
        (directory / fname).write_bytes(data)
    if published and name in PUBLISHED_STOPS:
        edit_json(directory / "generation_config.json", set={"eos_token_id": PUBLISHED_STOPS[name]})
    # the .tiktoken export too: the gate's tiktoken rows judge it by behaviour, proven or not
    (directory / f"{name}.tiktoken").write_text(tiktoken_text(tok), encoding="ascii")
    text = root / "probes.txt"
    texts = [t for t, _ in llama_vocab.cases(models, name) if t.strip()]
    text.write_text("\n".join([TEXT, *texts]), encoding="utf-8")
    return artifact, directory, text, tok


@pytest.mark.llama_vocab
@pytest.mark.transformers  # under transformers 4.57.x and 5.x
@pytest.mark.parametrize("name", NAMES)
def test_original_gguf_and_exported_tokenizer_json_pass(models, name, tmp_path) -> None:
    artifact, directory, text, _ = original_dir(models, name, tmp_path)
    backends = "reference,tiktoken,tokenizers,transformers,llama.cpp"
    run = gate(directory, artifact, text, backends=backends, out=tmp_path)
    assert run.code == 0, failing(run.report)
    rows = statuses(run.report)
    for backend in ("tiktoken", "tokenizers", "transformers", "llama.cpp"):
        assert rows[f"conformance.encode[{backend}]"] == "pass", backend
    assert rows["gguf.pre[files]"] == "pass" and rows["surface.gguf_tokens[files]"] == "pass"


@pytest.mark.llama_vocab
def test_a_turn_end_missing_from_the_exported_stops_fails(models, tmp_path) -> None:
    """The qwen2 GGUF's ChatML ends a turn with <|im_end|>, which the export's generation_config.json
    (the source's eos only) does not list: the gate names the id to add, keeping the one listed."""
    artifact, directory, text, _ = original_dir(models, "qwen2", tmp_path, published=False)
    run = gate(directory, artifact, text, backends="reference", out=tmp_path)
    bad = failing(run.report)
    assert run.code == 1 and list(bad) == ["config.eos_stops_turns[files]"], sorted(bad)
    row = bad["config.eos_stops_turns[files]"]
    assert "151645 <|im_end|>" in row["message"] and "generation_config.json" in row["message"]
    assert row["fix"].startswith("add 151645 to generation_config.json eos_token_id: [151643, 151645]")


@pytest.mark.llama_vocab
@pytest.mark.parametrize("name", NAMES)
def test_planted_drifts_in_the_original_gguf_fail(models, name, tmp_path) -> None:
    artifact, directory, text, tok = original_dir(models, name, tmp_path)
    gguf_path = directory / f"ggml-vocab-{name}.gguf"
    original = tmp_path / "original.gguf"
    gguf_path.rename(original)

    def wrong_pre(values: dict) -> None:
        values["tokenizer.ggml.pre"] = WRONG_PRE[name]

    rewrite_gguf(original, gguf_path, wrong_pre)
    bad = failing(gate(directory, artifact, text, backends="reference,llama.cpp", out=tmp_path).report)
    assert {"gguf.pre[files]", "conformance.encode[llama.cpp]"} <= bad.keys(), sorted(bad)

    the, and_ = tok.encode(" the")[0], tok.encode(" and")[0]

    def swapped(values: dict) -> None:
        tokens = values["tokenizer.ggml.tokens"]
        tokens[the], tokens[and_] = tokens[and_], tokens[the]

    rewrite_gguf(original, gguf_path, swapped)
    bad = failing(gate(directory, artifact, text, backends="reference,llama.cpp", out=tmp_path).report)
    assert {"surface.gguf_tokens[files]", "conformance.encode[llama.cpp]"} <= bad.keys(), sorted(bad)


@pytest.mark.llama_vocab
def test_qwen2s_ordinary_eos_text_is_declared_where_llama_cpp_promotes_it(models, tmp_path) -> None:
    """Qwen2's ``</s>`` is an ordinary token; llama.cpp makes it a control token on load, so in
    trusted text it parses ``</s>`` as that id: declared (llama.cpp-control-text), not a failure,
    and only for texts the promotion explains."""
    artifact, directory, _, tok = original_dir(models, "qwen2", tmp_path)
    probes = tmp_path / "trusted.jsonl"
    probes.write_text(
        '{"id": "eos-text", "text": "say </s> now", "allow_special": true}\n'
        '{"id": "plain", "text": "say nothing now", "allow_special": true}\n',
        encoding="utf-8",
    )
    run = run_gate(
        directory,
        "--artifact",
        str(artifact),
        "--only-user-data",
        "--probes",
        str(probes),
        backends="reference,llama.cpp",
        report=tmp_path / "report.json",
    )
    assert run.code == 0, failing(run.report)
    [row] = [
        c for c in run.report["checks"] if c["check"] == "conformance.trusted" and c["backend"] == "llama.cpp"
    ]
    assert (row["status"], row["declared"]) == ("pass", 1), row  # the plain probe agrees outright
    assert "</s>" not in tok.special_to_id and len(tok.encode("</s>")) > 1  # text to the reference


@pytest.mark.llama_vocab
def test_fuzz_declares_qwen2s_promoted_eos_text_like_the_gate(models, tmp_path) -> None:
    """Fuzz applies the gate's control_text rule: llama.cpp's trusted '</s>' -> 128247 (the
    ordinary token it promotes) is declared; any other difference on the same text is not."""
    from conformance import fuzz
    from conformance.backends import load_backend
    from conformance.core.declared import Declarations
    from conformance.core.fixtures import FixtureSet
    from conformance.core.layout import Exports

    artifact, directory, _, tok = original_dir(models, "qwen2", tmp_path)
    backend = load_backend("llama.cpp", Exports.discover(directory, artifact=artifact))
    decl = fuzz.UnicodeDeclarations.for_backend(Declarations(FixtureSet.load().divergences, tok), backend)
    oracle = fuzz.Oracle(backend, tok, decl)
    ex = fuzz.Example(0, "specials", "say </s> now", (fuzz.TRUSTED,))
    obs = oracle.observe(ex.text, fuzz.TRUSTED)
    assert obs is not None and 128247 in obs.ids and 128247 not in tok.encode(ex.text, allowed_special="all")
    assert fuzz._classify(oracle, ex, fuzz.TRUSTED, obs).declared == "llama.cpp-control-text"

    class OneMore:  # the promoted id and one id too many: not what the promotion explains
        name, version, capabilities = backend.name, backend.version, backend.capabilities

        def encode(self, text, *, allow_special):
            return [*backend.encode(text, allow_special=allow_special), 0]

    odd = fuzz.Oracle(OneMore(), tok, fuzz.UnicodeDeclarations.for_backend(decl.declarations, OneMore()))
    obs = odd.observe(ex.text, fuzz.TRUSTED)
    assert fuzz._classify(odd, ex, fuzz.TRUSTED, obs).declared is None

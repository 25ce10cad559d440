"""Exports of an imported (v2) artifact, read back by the real libraries (issue 21).

Two small v2 artifacts are built from the 2,048-id ``small_tok`` with ``StackTokenizer.from_vocab``:

- ``mixed``: GPT-2's byte order (printable bytes first), specials first / between merges / last
  (one matched in ordinary text), add_bos, two isolated split patterns, ignore_merges, its own
  chat template. tokenizers, transformers and the files must give the reference's ids; tiktoken
  (one ``pat_str``) refuses it in one line.
- ``closed``: one pattern, every concatenation of two tokens that is a token is a merge, merge
  order = id order -- enough for :mod:`stacktok_export.export.tiktoken_proof` to prove the
  ``.tiktoken`` file equal (tests/test_tiktoken_proof.py tests the proof itself); tiktoken must
  then agree on every text.

The GGUF of ``closed`` is read back with gguf-py (keys, token types, ids) and tokenized with
llama.cpp (pre type ``llama3``: the Llama-3 split with ignore_merges); ``mixed`` has no pre type,
and a token llama.cpp would retype on load (``</s>``) is refused -- and shown to diverge.

Out of scope: importing (tests/test_import*.py) and the shipped v1 exports (test_export_files.py;
here only: v1 renders the same bytes as the files on disk).
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from stacktok_export import StackTokenizer
from stacktok_export.artifact.artifact import shipped_artifact_path
from stacktok_export.export import ExportRefused, check_exports, export_all, render_exports, render_format
from stacktok_export.export.tiktoken_fmt import tiktoken_unproven
from stacktok_export.export.tiktoken_proof import tiktoken_refusal
from stacktok_export.export.vocab import token_chars
from stacktok_export.split.bytelevel import byte_to_char, to_chars
from stacktok_export.split.pretokenize import LLAMA3_PATTERN

from .conftest import need
from .helpers.paths import ROOT, SHIPPED
from .helpers.strings import HARD_STRINGS, heldout_slice

DIGITS = r"\p{N}{1,3}"
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
SPECIAL_SLOTS = {"<|begin|>": 0, "<|im_start|>": 300, "<tool>": 700, "<|pad|>": 1500}  # + "<|im_end|>" last


def _texts() -> list[str]:
    """Thousands of varied texts: the probes, the hard strings, held-out lines, specials in text.

    Left out: text with code points newer than Python's Unicode tables (14.0) -- the declared
    Unicode-table divergences of tiktoken, tokenizers and llama.cpp (fixtures/divergences.jsonl),
    which are the suite's business, not the exporters'.
    """
    with open(ROOT / "fixtures" / "probes.jsonl", encoding="utf-8") as f:
        probes = [json.loads(line)["text"] for line in f if line.strip()][::4]  # every category
    lines = [ln for ln in heldout_slice(60_000).splitlines() if ln.strip()][:250]
    extra = ["12345678 + 9 = 12345687", "price: 3.14159e10", "a<tool>b", "<|im_start|>user\nhi<|im_end|>"]
    texts = probes + list(HARD_STRINGS) + lines + extra
    return [t for t in texts if not any(unicodedata.category(c) == "Cn" for c in t)]


def _gpt2_byte_order() -> list[int]:
    """GPT-2's vocab order of the 256 bytes: printable ones first, the shifted ones after."""
    chars = byte_to_char()
    return sorted(range(256), key=lambda b: ord(chars[b]))


def _layout(ordinary: list[bytes], slots: dict[str, int], last: str) -> tuple[list[bytes], dict[str, int]]:
    """``ordinary`` tokens with each special inserted at its id (``last`` on the top id)."""
    tokens = list(ordinary)
    for s, at in sorted(slots.items(), key=lambda kv: kv[1]):
        tokens.insert(at, s.encode("utf-8"))
    tokens.append(last.encode("utf-8"))
    specials = {s: tokens.index(s.encode("utf-8")) for s in [*slots, last]}
    return tokens, specials


def _ids(tokens: list[bytes], specials: dict[str, int]) -> dict[bytes, int]:
    special_ids = set(specials.values())
    return {t: i for i, t in enumerate(tokens) if i not in special_ids}


def _roles(specials: dict[str, int]) -> dict[str, int]:
    return {
        "bos": specials["<|begin|>"],
        "eos": specials["<|im_end|>"],
        "eot": specials["<|im_end|>"],
        "pad": specials["<|pad|>"],
    }


@pytest.fixture(scope="module")
def mixed(small_tok) -> StackTokenizer:
    table = small_tok.token_bytes()
    ordinary = [bytes([b]) for b in _gpt2_byte_order()] + table[256:]
    tokens, specials = _layout(ordinary, SPECIAL_SLOTS, "<|im_end|>")
    ids = _ids(tokens, specials)
    merges = [(ids[table[a]], ids[table[b]]) for a, b in small_tok.merges]
    return StackTokenizer.from_vocab(
        tokens=tokens,
        merges=merges,
        specials=specials,
        patterns=[DIGITS, LLAMA3_PATTERN],
        ignore_merges=True,
        roles=_roles(specials),
        add_bos=True,
        chat_template=TEMPLATE,
        in_text={"<tool>"},
        name="mixed",
    )


def _closed_vocabulary(source: list[bytes]) -> list[bytes]:
    """Tokens of ``source`` (length order) each splitting into kept tokens, no overlapping ties."""
    kept = {bytes([b]) for b in range(256)}
    out = [bytes([b]) for b in _gpt2_byte_order()]
    for t in sorted((t for t in source if len(t) > 1), key=len):
        cuts = {k for k in range(1, len(t)) if t[:k] in kept and t[k:] in kept}
        tie = any(len(t) - k in cuts and len(t) - k != k and t[k:] == t[: len(t) - k] for k in cuts)
        if cuts and not tie:
            kept.add(t)
            out.append(t)
    return out


@pytest.fixture(scope="module")
def closed(small_tok) -> StackTokenizer:
    ordinary = _closed_vocabulary(small_tok.token_bytes()[256:])
    tokens, specials = _layout(ordinary, SPECIAL_SLOTS, "<|im_end|>")
    ids = _ids(tokens, specials)
    merges = []
    for t in ordinary:  # id order; every cut of t into two tokens is a merge
        merges += [(ids[t[:k]], ids[t[k:]]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
    return StackTokenizer.from_vocab(
        tokens=tokens,
        merges=merges,
        specials=specials,
        patterns=[LLAMA3_PATTERN],
        ignore_merges=True,
        roles=_roles(specials),
        add_bos=True,
        in_text={"<tool>"},
        name="closed",
    )


def _hf_dir(tok: StackTokenizer, tmp_path):
    for rel, data in render_format(tok, "hf").items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return tmp_path / f"{tok.name}-hf"


def _ref(tok: StackTokenizer, text: str) -> list[int]:
    return tok.encode(text, allowed_special="all")


# ------------------------------------------------------------------ the artifacts are v2
def test_artifacts_are_v2_with_the_planted_layout(mixed, closed):
    for tok in (mixed, closed):
        assert tok.format == "stacktok-bpe-v2"
        assert tok.byte_ids[ord("!")] == 0 + 1  # id 0 is <|begin|>, "!" is GPT-2's first byte
        assert (
            tok.special_to_id["<|im_start|>"] == 300 and tok.special_to_id["<|im_end|>"] == tok.vocab_size - 1
        )
    assert mixed.patterns == (DIGITS, LLAMA3_PATTERN) and mixed.ignore_merges and mixed.add_bos


# ------------------------------------------------------------------ tokenizers / transformers
def test_tokenizer_json_gives_the_reference_ids(mixed, tmp_path):
    tokenizers = need("tokenizers", "hf")
    hf = tokenizers.Tokenizer.from_file(str(_hf_dir(mixed, tmp_path) / "tokenizer.json"))
    texts = _texts()
    bos = mixed.roles["bos"]
    for text in texts:
        ids = _ref(mixed, text)
        assert hf.encode(text, add_special_tokens=False).ids == ids, text
        assert hf.encode(text).ids == [bos, *ids], text  # the source adds BOS
        assert hf.decode(ids, skip_special_tokens=False) == mixed.decode(ids)
    assert len(texts) >= 200


def test_tokenizer_json_fields(mixed):
    tj = json.loads(render_format(mixed, "hf")["mixed-hf/tokenizer.json"])
    splits = [p for p in tj["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split"]
    assert [s["pattern"]["Regex"] for s in splits] == [DIGITS, LLAMA3_PATTERN]
    assert all(s["behavior"] == "Isolated" for s in splits)
    assert tj["model"]["ignore_merges"] is True
    assert tj["model"]["vocab"][to_chars(b"!")] == 1
    special = {t["content"]: t["special"] for t in tj["added_tokens"]}
    assert special["<tool>"] is False and special["<|im_start|>"] is True
    assert tj["post_processor"]["type"] == "TemplateProcessing"


def test_transformers_dir_gives_the_reference_ids_and_bos(mixed, tmp_path):
    transformers = need("transformers", "hf")
    hf = transformers.AutoTokenizer.from_pretrained(str(_hf_dir(mixed, tmp_path)))
    bos, eos, pad = (mixed.roles[r] for r in ("bos", "eos", "pad"))
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (bos, eos, pad)
    for text in _texts():
        ids = _ref(mixed, text)
        assert hf(text, add_special_tokens=False)["input_ids"] == ids, text
        assert hf(text)["input_ids"] == [bos, *ids], text
    chat = [{"role": "user", "content": "hi 123"}]
    rendered = hf.apply_chat_template(chat, tokenize=False)
    assert rendered == "<|im_start|>user\nhi 123<|im_end|>\n"


def test_generation_config_and_template_files(mixed):
    files = render_format(mixed, "hf")
    gen = json.loads(files["mixed-hf/generation_config.json"])
    assert gen == {"bos_token_id": 0, "eos_token_id": [mixed.vocab_size - 1], "pad_token_id": 1500}
    config = json.loads(files["mixed-hf/tokenizer_config.json"])
    assert config["add_bos_token"] is True and config["chat_template"] == TEMPLATE
    assert files["mixed-hf/chat_template.jinja"] == TEMPLATE.encode()
    assert "<tool>" not in config["additional_special_tokens"]
    assert config["stacktok_roles"] == mixed.roles  # eot too, which HF has no field for


# ------------------------------------------------------------------ tiktoken
def test_tiktoken_refuses_two_patterns_in_one_line(mixed):
    with pytest.raises(ExportRefused, match=r"^tiktoken export of mixed: .*one pat_str.*2 isolated") as exc:
        render_format(mixed, "tiktoken")
    assert "\n" not in str(exc.value)


def test_tiktoken_file_of_a_proven_artifact_gives_the_reference_ids(closed):
    tiktoken = need("tiktoken", "hf")
    from stacktok_export.export.tiktoken_fmt import parse_tiktoken

    assert tiktoken_refusal(closed) is None
    ranks = parse_tiktoken(render_format(closed, "tiktoken")["closed.tiktoken"])
    assert len(ranks) == closed.vocab_size - len(closed.special_to_id)
    enc = tiktoken.Encoding(
        name="closed",
        pat_str=LLAMA3_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=dict(closed.special_to_id),
    )
    in_text = set(closed.in_text)  # what the reference splits out of any text: tiktoken must be told
    for text in _texts():
        assert enc.encode(text, allowed_special="all") == _ref(closed, text), text
        assert enc.encode(text, allowed_special=in_text, disallowed_special=()) == closed.encode(text), text


def test_tiktoken_refuses_an_unlisted_pair(mixed, closed):
    """GPT-2-style merge lists (``t``+``he`` listed, ``th``+``e`` not) are not tiktoken's rule."""
    tok = StackTokenizer.from_vocab(
        tokens=closed.id_bytes(),
        merges=closed.merges[:-1],
        specials=closed.special_to_id,
        patterns=[LLAMA3_PATTERN],
        ignore_merges=True,
        roles=closed.roles,
        name="gap",
    )
    reason = tiktoken_refusal(tok)
    assert reason is not None and "without being a merge" in reason


def test_an_unproven_tiktoken_file_is_written_with_its_caveat(tmp_path):
    """``the`` listed as ``t``+``he`` while ``th`` merges first (GPT-2's kind of gap): tiktoken
    merges ``th``+``e``, the list never does (tests/test_tiktoken_proof.py shows the texts).

    The file is written (a user's own tiktoken file may still be what they ship) and the caveat
    says why; the gate's tiktoken rows judge it by behaviour."""
    t, h, e = ord("t"), ord("h"), ord("e")
    tok = StackTokenizer.from_vocab(
        tokens=[*(bytes([b]) for b in range(256)), b"th", b"he", b"the", b"<|eos|>"],
        merges=[(t, h), (h, e), (t, 257)],
        specials={"<|eos|>": 259},
        patterns=[LLAMA3_PATTERN],
        ignore_merges=True,
        name="gap",
    )
    reason = tiktoken_refusal(tok)
    assert reason is not None and "without being a merge" in reason
    assert tiktoken_unproven(tok) == reason
    assert render_format(tok, "tiktoken")
    tok.save(tmp_path / "gap.json")
    notes: list[str] = []
    written = export_all(tmp_path / "gap.json", tmp_path / "out", formats=("tiktoken",), notes=notes)
    assert [p.name for p in written] == ["gap.tiktoken"] and notes == [
        f"the .tiktoken file is not proven equal to the artifact ({reason})"
    ]
    shipped: list[str] = []
    export_all(shipped_artifact_path(), tmp_path / "shipped", formats=("tiktoken",), notes=shipped)
    assert shipped == []  # the shipped artifact: every token self-reachable, proven


# ------------------------------------------------------------------ GGUF
@pytest.fixture(scope="module")
def closed_gguf(closed, tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "closed.gguf"
    path.write_bytes(render_format(closed, "gguf")["closed.gguf"])
    return path


def test_gguf_fields_of_an_imported_artifact(closed, closed_gguf):
    from stacktok_export.export import gguf_fmt
    from stacktok_export.gguf import reader as gguf_reader

    meta = gguf_reader.read_gguf_metadata(closed_gguf)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    assert meta["tokenizer.ggml.pre"] == "llama3"  # the Llama-3 split with ignore_merges
    assert tokens[300] == "<|im_start|>" and types[300] == gguf_fmt.TOKEN_TYPE_CONTROL
    assert tokens[700] == "<tool>" and types[700] == gguf_fmt.TOKEN_TYPE_USER_DEFINED
    assert tokens[1] == "!" and types[1] == gguf_fmt.TOKEN_TYPE_NORMAL
    assert meta["tokenizer.ggml.bos_token_id"] == 0 and meta["tokenizer.ggml.add_bos_token"] is True
    assert meta["tokenizer.ggml.eot_token_id"] == closed.vocab_size - 1
    assert "tokenizer.chat_template" not in meta  # the source had none: no ChatML invented
    chars = token_chars(closed)
    assert meta["tokenizer.ggml.merges"][0] == " ".join(chars[i] for i in closed.merges[0])


def test_gguf_pre_type_follows_ignore_merges(closed):
    from stacktok_export.gguf.pre import pre_type

    plain = StackTokenizer.from_vocab(
        tokens=closed.id_bytes(),
        merges=closed.merges,
        specials=closed.special_to_id,
        patterns=list(closed.patterns),
        ignore_merges=False,
        roles=closed.roles,
        name="plain",
    )
    assert (pre_type(closed), pre_type(plain)) == ("llama3", "dbrx")  # dbrx: merges respected


def _with_ordinary_eos_text() -> StackTokenizer:
    """An ordinary token ``</s>`` (Qwen2 has one, id 128247)."""
    lt, sl, s, gt = (ord(c) for c in "</s>")
    return StackTokenizer.from_vocab(
        tokens=[*(bytes([i]) for i in range(256)), b"</", b"</s", b"</s>", b"<|eos|>"],
        merges=[(lt, sl), (256, s), (257, gt)],
        specials={"<|eos|>": 259},
        patterns=[LLAMA3_PATTERN],
        ignore_merges=True,
        roles={"eos": 259},
        chat_template="{{ messages }}",
        name="slash-s",
    )  # the template alone makes it v2 (the rest is v1's layout)


def test_gguf_refuses_a_token_llama_cpp_retypes(tmp_path, monkeypatch):
    """llama.cpp makes a NORMAL ``</s>`` a control token on load; trusted text then splits it out."""
    from conformance.backends.llama_backend import LlamaCppTokenizer
    from stacktok_export.gguf import pre as gguf_pre

    tok = _with_ordinary_eos_text()
    with pytest.raises(ExportRefused, match=r"^gguf export of slash-s: token id 258 '</s>' is not a control"):
        render_format(tok, "gguf")
    monkeypatch.setattr(gguf_pre, "control_looking", lambda *a, **k: None)  # write it anyway: see why
    path = tmp_path / "slash-s.gguf"
    path.write_bytes(render_format(tok, "gguf")["slash-s.gguf"])
    llama = LlamaCppTokenizer(path)
    try:
        assert tok.encode("</s>", allowed_special="all") == [256, ord("s"), ord(">")]
        assert llama.encode("</s>", allow_special=True) == [258]
    finally:
        llama.close()


def test_llama_cpp_gives_the_reference_ids_and_bos(closed, closed_gguf):
    from conformance.backends.llama_backend import LlamaCppTokenizer

    llama = LlamaCppTokenizer(closed_gguf)
    bos = closed.roles["bos"]
    try:
        mismatched = []
        for text in _texts():
            if "\u017f" in text:  # LONG S: llama.cpp's '[sS] contraction (declared divergence)
                continue
            if llama.encode(text, allow_special=True) != _ref(closed, text):
                mismatched.append(text)
            elif llama.default_tokenize(text) != [bos, *closed.encode(text)]:
                mismatched.append(text)
    finally:
        llama.close()
    assert mismatched == []


def test_gguf_refuses_two_patterns_no_pre_type_has(mixed, tmp_path):
    with pytest.raises(ExportRefused, match=r"^gguf export of mixed: "):
        render_format(mixed, "gguf", tmp_dir=tmp_path)


# ------------------------------------------------------------------ v1 unchanged
def test_the_shipped_v1_exports_are_unchanged():
    assert check_exports(SHIPPED, ROOT / "tokenizer") == []


def test_render_exports_of_v1_has_no_post_processor(small_tok):
    files = render_exports(small_tok, formats=("hf",))
    tj = json.loads(files[f"{small_tok.name}-hf/tokenizer.json"])
    assert tj["post_processor"] is None and tj["model"]["ignore_merges"] is False


# ------------------------------------------------------------------ the command
def test_stacktok_export_of_a_v2_artifact(closed, mixed, tmp_path, capsys):
    from stacktok_cli import main

    closed.save(tmp_path / "closed.json")
    mixed.save(tmp_path / "mixed.json")
    out = tmp_path / "out"
    assert main(["export", "--artifact", str(tmp_path / "closed.json"), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["closed-hf", "closed.gguf", "closed.tiktoken"]
    assert main(["export", "--check", "--artifact", str(tmp_path / "closed.json"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["export", "--artifact", str(tmp_path / "mixed.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tiktoken export of mixed: tiktoken has one pat_str" in err[0], err
    assert "nothing was written; export the others with --format hf --format gguf" in err[0]
    assert not (out / "mixed-hf").exists()
    assert (
        main(["export", "--artifact", str(tmp_path / "mixed.json"), "--out", str(out), "--format", "hf"]) == 0
    )
    assert (out / "mixed-hf" / "tokenizer.json").is_file() and not (out / "mixed.gguf").exists()

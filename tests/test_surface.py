"""`conformance.static.surface`: every token any file defines, compared with the artifact id by id.

The shipped export passes every row; each planted variant (an added ``<think>``,
a special renamed in one file, swapped GGUF strings, an extra GGUF key, swapped
``.tiktoken`` ranks, ...) fails exactly its row, and the message names the id or
key. Absent files give ``skip`` rows, odd shapes give ``fail`` rows, never an
exception.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conformance.core.layout import Exports
from conformance.core.rows import Row
from conformance.static.surface import surface_rows
from stacktok_export import StackTokenizer
from stacktok_export.export import gguf_fmt
from stacktok_export.export.hf import added_token

from .helpers import GGUF, SHIPPED, SHIPPED_HF, TIKTOKEN, build_checkpoint, edit_json

CHECKS = (
    "surface.tokenizer_json",
    "surface.tokenizer_config",
    "surface.special_tokens_map",
    "surface.added_tokens_json",
    "surface.gguf_tokens",
    "surface.gguf_keys",
    "surface.tiktoken",
)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    """The shipped HF directory with the GGUF and .tiktoken copied into it."""
    return build_checkpoint(tmp_path / "ckpt", exports="inside", edits=[_slow_save_added_tokens])


def _slow_save_added_tokens(dest: Path) -> None:
    """What a slow-tokenizer save writes: the specials at their ids (legitimate, so every row passes)."""
    specials = json.loads((dest / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    (dest / "added_tokens.json").write_text(json.dumps({v["content"]: int(k) for k, v in specials.items()}))


def surface(directory: Path, tok: StackTokenizer) -> dict[str, Row]:
    rows = surface_rows(Exports.discover(directory, artifact=SHIPPED), tok)
    assert [r.check for r in rows] == list(CHECKS)
    return {r.check: r for r in rows}


def only_failure(rows: dict[str, Row], check: str) -> Row:
    """``check`` fails and every other row passes; returns the failing row."""
    assert {c: r.status for c, r in rows.items()} == {
        c: ("fail" if c == check else "pass") for c in CHECKS
    }, [r.message for r in rows.values() if r.status != "pass"]
    assert rows[check].fix
    return rows[check]


def write_gguf(
    path: Path,
    tok: StackTokenizer,
    monkeypatch: pytest.MonkeyPatch,
    *,
    tokens: Callable[[list[str]], None] | None = None,
    extra: Callable[[object], None] | None = None,
) -> None:
    """The exported GGUF, with the token list edited by ``tokens`` and keys added by ``extra``."""
    import gguf

    if tokens is not None:
        real = gguf_fmt.token_strings

        def edited(t: StackTokenizer) -> list[str]:
            strings = real(t)
            tokens(strings)
            return strings

        monkeypatch.setattr(gguf_fmt, "token_strings", edited)
    writer = gguf.GGUFWriter(path, gguf_fmt.ARCH)
    gguf_fmt._add_metadata(writer, tok)
    if extra is not None:
        extra(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ------------------------------------------------------------------ clean
def test_shipped_export_passes_every_row(ckpt, shipped_tok) -> None:
    rows = surface(ckpt, shipped_tok)
    assert {c: r.status for c, r in rows.items()} == dict.fromkeys(CHECKS, "pass")


def test_shipped_layout_beside_the_hf_directory_passes(shipped_tok) -> None:
    rows = surface(SHIPPED_HF, shipped_tok)  # NAME-hf finds NAME.gguf / NAME.tiktoken beside it
    want = {**dict.fromkeys(CHECKS, "pass"), "surface.added_tokens_json": "skip"}  # the export writes none
    assert {c: r.status for c, r in rows.items()} == want


def test_transformers_5x_resave_shape_passes(ckpt, shipped_tok) -> None:
    def resave(cfg: dict) -> None:
        del cfg["added_tokens_decoder"], cfg["additional_special_tokens"]
        cfg["extra_special_tokens"] = {"end_token": "<|end|>", "user_token": "<|user|>"}

    edit_json(ckpt / "tokenizer_config.json", resave)
    assert {r.status for r in surface(ckpt, shipped_tok).values()} == {"pass"}


def test_reordering_tiktoken_lines_keeps_rank_to_bytes_and_passes(ckpt, shipped_tok) -> None:
    path = ckpt / TIKTOKEN
    lines = path.read_bytes().splitlines()
    lines[300], lines[301] = lines[301], lines[300]  # same rank -> bytes pairs, different order
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert surface(ckpt, shipped_tok)["surface.tiktoken"].status == "pass"


def test_partial_added_tokens_decoder_passes(ckpt, shipped_tok) -> None:
    edit_json(ckpt / "tokenizer_config.json", lambda c: c["added_tokens_decoder"].pop("32767"))
    assert surface(ckpt, shipped_tok)["surface.tokenizer_config"].status == "pass"


# ------------------------------------------------------- HF planted variants
def test_added_think_token_in_tokenizer_json(ckpt, shipped_tok) -> None:
    edit_json(ckpt / "tokenizer.json", lambda tj: tj["added_tokens"].append(added_token("<think>", 32768)))
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_json")
    assert r.message.startswith("tokenizer.json: 1 difference(s)")
    assert "added_tokens id 32768: file has '<think>', artifact has no id 32768" in r.message
    assert "remove the added token '<think>' (added_tokens id 32768) from tokenizer.json" in r.fix
    assert "cannot certify" in r.fix


def test_second_added_token_at_an_existing_id(ckpt, shipped_tok) -> None:
    edit_json(ckpt / "tokenizer.json", lambda tj: tj["added_tokens"].append(added_token("<think>", 32765)))
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_json")
    assert "added_tokens id 32765: file has '<|end|>' and '<think>'" in r.message
    assert "'<think>' (added_tokens id 32765)" in r.fix


def test_renamed_vocab_entry_in_tokenizer_json(ckpt, shipped_tok) -> None:
    def rename(tj: dict) -> None:
        vocab = tj["model"]["vocab"]
        old = next(s for s, i in vocab.items() if i == 300)
        del vocab[old]
        vocab["Ġzzqx"] = 300

    edit_json(ckpt / "tokenizer.json", rename)
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_json")
    assert "model.vocab id 300: file has 'Ġzzqx' = b' zzqx'" in r.message
    assert repr(shipped_tok.token_bytes()[300]) in r.message


def test_renamed_special_in_tokenizer_json_added_tokens(ckpt, shipped_tok) -> None:
    def rename(tj: dict) -> None:
        next(t for t in tj["added_tokens"] if t["id"] == 32765)["content"] = "<|im_end|>"

    edit_json(ckpt / "tokenizer.json", rename)
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_json")
    assert "added_tokens id 32765: file has '<|im_end|>', artifact has special '<|end|>'" in r.message


def test_extra_special_tokens_think_in_tokenizer_config(ckpt, shipped_tok) -> None:
    edit_json(
        ckpt / "tokenizer_config.json", lambda c: c.update(extra_special_tokens={"think_token": "<think>"})
    )
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_config")
    assert "extra_special_tokens.think_token: file has '<think>'" in r.message
    assert "remove extra_special_tokens.think_token = '<think>' from tokenizer_config.json" in r.fix


def test_end_renamed_in_special_tokens_map_only(ckpt, shipped_tok) -> None:
    def rename(m: dict) -> None:
        next(t for t in m["additional_special_tokens"] if t["content"] == "<|end|>")["content"] = "<|im_end|>"

    edit_json(ckpt / "special_tokens_map.json", rename)
    r = only_failure(surface(ckpt, shipped_tok), "surface.special_tokens_map")
    assert "additional_special_tokens[3]: file has '<|im_end|>'" in r.message
    assert r.message.startswith("special_tokens_map.json:")


def test_eos_token_renamed_in_tokenizer_config_only(ckpt, shipped_tok) -> None:
    edit_json(ckpt / "tokenizer_config.json", lambda c: c.update(eos_token="<|im_end|>"))
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_config")
    assert "eos_token: file has '<|im_end|>', artifact has special '<|eos|>' (id 32760)" in r.message
    assert "set it to special '<|eos|>' (id 32760)" in r.fix


def test_added_tokens_decoder_extra_and_moved_ids(ckpt, shipped_tok) -> None:
    def edit(c: dict) -> None:
        dec = c["added_tokens_decoder"]
        dec["32768"] = added_token("<think>")
        dec["32766"], dec["32767"] = dec["32767"], dec["32766"]

    edit_json(ckpt / "tokenizer_config.json", edit)
    r = only_failure(surface(ckpt, shipped_tok), "surface.tokenizer_config")
    assert "3 difference(s)" in r.message
    assert "added_tokens_decoder id 32766: file has '<|tool_result|>'" in r.message
    assert "added_tokens_decoder id 32768: file has '<think>'" in r.message


# ------------------------------------------------------------ GGUF variants
def test_swapped_gguf_token_strings(ckpt, shipped_tok, monkeypatch) -> None:
    def swap(s: list[str]) -> None:
        s[300], s[301] = s[301], s[300]

    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch, tokens=swap)
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_tokens")
    assert r.message.startswith(f"{GGUF}: 2 difference(s)")
    assert "tokenizer.ggml.tokens id 300:" in r.message and "tokenizer.ggml.tokens id 301:" in r.message


def test_renamed_gguf_special(ckpt, shipped_tok, monkeypatch) -> None:
    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch, tokens=lambda s: s.__setitem__(32765, "<|im_end|>"))
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_tokens")
    assert "tokenizer.ggml.tokens id 32765: file has '<|im_end|>', artifact has '<|end|>'" in r.message


def test_user_defined_gguf_specials(ckpt, shipped_tok, monkeypatch) -> None:
    real = gguf_fmt.token_types
    monkeypatch.setattr(gguf_fmt, "token_types", lambda t: [v if v == 1 else 4 for v in real(t)])
    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch)
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_tokens")
    assert "9 difference(s)" in r.message
    assert (
        "tokenizer.ggml.token_type id 32759: file has 4 (USER_DEFINED), artifact has 3 (CONTROL)" in r.message
    )


def test_extra_gguf_eom_token_id(ckpt, shipped_tok, monkeypatch) -> None:
    extra = lambda w: w.add_uint32("tokenizer.ggml.eom_token_id", 32765)  # noqa: E731
    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch, extra=extra)
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_keys")
    assert "tokenizer.ggml.eom_token_id = 32765 (special '<|end|>')" in r.message
    assert "end-of-generation" in r.message
    assert f"remove tokenizer.ggml.eom_token_id from {GGUF}" in r.fix


def test_gguf_add_space_prefix(ckpt, shipped_tok, monkeypatch) -> None:
    extra = lambda w: w.add_bool("tokenizer.ggml.add_space_prefix", True)  # noqa: E731
    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch, extra=extra)
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_keys")
    assert "tokenizer.ggml.add_space_prefix = True: llama.cpp's detokenizer drops" in r.message


def test_gguf_id_key_outside_the_vocabulary(ckpt, shipped_tok, monkeypatch) -> None:
    extra = lambda w: w.add_uint32("tokenizer.ggml.unknown_token_id", 40000)  # noqa: E731
    write_gguf(ckpt / GGUF, shipped_tok, monkeypatch, extra=extra)
    r = only_failure(surface(ckpt, shipped_tok), "surface.gguf_keys")
    assert "2 difference(s)" in r.message
    assert "40000 is not an id the artifact defines (0..32767)" in r.message


# -------------------------------------------------------- tiktoken variants
def test_swapped_tiktoken_ranks(ckpt, shipped_tok) -> None:
    path = ckpt / TIKTOKEN
    lines = path.read_bytes().splitlines()
    a, b = lines[300].split(), lines[301].split()
    lines[300], lines[301] = b[0] + b" " + a[1], a[0] + b" " + b[1]  # rank 300 now holds 301's bytes
    path.write_bytes(b"\n".join(lines) + b"\n")
    r = only_failure(surface(ckpt, shipped_tok), "surface.tiktoken")
    table = shipped_tok.token_bytes()
    assert f"rank 300: file has {table[301]!r}, artifact has" in r.message
    assert f"rank 301: file has {table[300]!r}" in r.message


def test_truncated_tiktoken_counts_every_missing_rank(ckpt, shipped_tok) -> None:
    path = ckpt / TIKTOKEN
    path.write_bytes(b"\n".join(path.read_bytes().splitlines()[:-20]) + b"\n")
    r = only_failure(surface(ckpt, shipped_tok), "surface.tiktoken")
    assert "21 difference(s)" in r.message and "count: file has 32739 ranks" in r.message
    assert "(16 more)" in r.message


# ------------------------------------------------- absent, missing, odd shapes
def test_absent_files_give_skip_rows(tmp_path, shipped_tok) -> None:
    rows = surface_rows(Exports(artifact=SHIPPED, hf_dir=None, tiktoken=None, gguf=None), shipped_tok)
    assert [(r.check, r.status) for r in rows] == [(c, "skip") for c in CHECKS]
    assert all(r.message for r in rows)


def test_absent_special_tokens_map_skips_only_its_row(ckpt, shipped_tok) -> None:
    (ckpt / "special_tokens_map.json").unlink()
    rows = surface(ckpt, shipped_tok)
    assert rows["surface.special_tokens_map"].status == "skip"
    assert "special_tokens_map.json is absent" in rows["surface.special_tokens_map"].message
    assert {r.status for c, r in rows.items() if c != "surface.special_tokens_map"} == {"pass"}


def test_gguf_package_missing_gives_missing_rows(ckpt, shipped_tok, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf -> ImportError
    rows = surface(ckpt, shipped_tok)
    for check in ("surface.gguf_tokens", "surface.gguf_keys"):
        assert rows[check].status == "missing"
        assert rows[check].fix == "pip install 'stacktok[gguf]'"


ODD: dict[str, tuple[str, Callable[[Path], None]]] = {
    "vocab-list": (
        "surface.tokenizer_json",
        lambda d: edit_json(d / "tokenizer.json", lambda tj: tj["model"].update(vocab=["a"])),
    ),
    "added-tokens-junk": (
        "surface.tokenizer_json",
        lambda d: edit_json(d / "tokenizer.json", lambda tj: tj["added_tokens"].extend([7, {"id": "x"}])),
    ),
    "model-null": (
        "surface.tokenizer_json",
        lambda d: edit_json(d / "tokenizer.json", lambda tj: tj.update(model=None)),
    ),
    "decoder-bad-keys": (
        "surface.tokenizer_config",
        lambda d: edit_json(
            d / "tokenizer_config.json", lambda c: c["added_tokens_decoder"].update({"²": {}, "x": 5})
        ),
    ),
    "extra-specials-int": (
        "surface.tokenizer_config",
        lambda d: edit_json(d / "tokenizer_config.json", lambda c: c.update(extra_special_tokens=7)),
    ),
    "named-token-no-content": (
        "surface.tokenizer_config",
        lambda d: edit_json(d / "tokenizer_config.json", lambda c: c.update(bos_token={"id": 1})),
    ),
    "map-top-level-list": (
        "surface.special_tokens_map",
        lambda d: (d / "special_tokens_map.json").write_text("[]"),
    ),
    "map-not-json": ("surface.special_tokens_map", lambda d: (d / "special_tokens_map.json").write_text("{")),
    "tiktoken-junk-line": (
        "surface.tiktoken",
        lambda d: (d / TIKTOKEN).write_bytes((d / TIKTOKEN).read_bytes() + b"!!notbase64 x y\n"),
    ),
}


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_shapes_fail_without_raising(ckpt, shipped_tok, name) -> None:
    check, mutate = ODD[name]
    mutate(ckpt)
    r = only_failure(surface(ckpt, shipped_tok), check)
    assert r.message


def test_unreadable_gguf_fails_both_gguf_rows(ckpt, shipped_tok) -> None:
    (ckpt / GGUF).write_bytes(b"GGUF not really")
    rows = surface(ckpt, shipped_tok)
    for check in ("surface.gguf_tokens", "surface.gguf_keys"):
        assert rows[check].status == "fail"
        assert f"{GGUF} is not a readable GGUF" in rows[check].message

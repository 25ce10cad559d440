"""Validate first: every malformed input becomes one InputError/FixtureError line, fast, before any backend.

Each test copies the shipped directory (``stack100m-32768-hf`` plus the
``.gguf`` / ``.tiktoken`` beside it), damages one file, and calls
``validate_directory`` or a fixture loader directly. The message must name the
file and the field or line; no backend may be loaded (``load_backend`` is
patched to fail) and the call must finish in seconds.
"""

from __future__ import annotations

import base64
import builtins
import importlib.util
import io
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest

from conformance.core.fixtures import FixtureError, FixtureSet, load_chats, load_probes, text_probes
from conformance.core.layout import Exports
from conformance.validate import InputError, _load_with_tokenizers, validate_directory

from .conftest import need
from .helpers import NAME, SHIPPED, SHIPPED_HF, build_checkpoint, edit_json


@pytest.fixture(autouse=True)
def no_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation must never need a backend: loading one fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a backend was loaded during validation")

    monkeypatch.setattr("conformance.backends.load_backend", refuse)


@pytest.fixture
def hf(tmp_path: Path) -> Path:
    """A private copy of the shipped directory and its sibling exports."""
    return build_checkpoint(tmp_path / SHIPPED_HF.name, exports="beside")


def _exports(hf: Path) -> Exports:
    found = Exports.discover(hf, artifact=SHIPPED)
    assert found.gguf is not None and found.tiktoken is not None
    return found


def _fails(hf: Path, *needles: str) -> str:
    """validate_directory raises one InputError line holding every needle (no backend ran: see
    ``no_backends``; speed is measured by benchmarks, not asserted here)."""
    with pytest.raises(InputError) as info:
        validate_directory(_exports(hf))
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def _passes(hf: Path) -> None:
    validate_directory(_exports(hf))


def _edit_tiktoken(hf: Path, change: Callable[[list[str]], None]) -> Path:
    path = hf.parent / f"{NAME}.tiktoken"
    lines = path.read_text(encoding="ascii").split("\n")
    change(lines)
    path.write_text("\n".join(lines), encoding="ascii")
    return path


# ------------------------------------------------------------- clean inputs
def test_shipped_directory_validates_cleanly() -> None:
    exports = Exports.discover(SHIPPED_HF, artifact=SHIPPED)
    assert exports.gguf is not None and exports.tiktoken is not None
    validate_directory(exports)


def test_merges_as_pairs_are_legitimate(hf: Path) -> None:
    edit_json(
        hf / "tokenizer.json",
        lambda d: d["model"].update(merges=[m.split(" ") for m in d["model"]["merges"]]),
    )
    _passes(hf)


def test_named_chat_template_list_is_legitimate(hf: Path) -> None:
    def named(d: dict[str, Any]) -> None:
        d["chat_template"] = [
            {"name": "default", "template": d["chat_template"]},
            {"name": "tool_use", "template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
        ]

    edit_json(hf / "tokenizer_config.json", named)
    _passes(hf)


def test_padded_vocab_size_and_checkpoint_configs_are_legitimate(hf: Path) -> None:
    (hf / "config.json").write_text(
        json.dumps({"vocab_size": 32832, "bos_token_id": 32759, "eos_token_id": 32760, "pad_token_id": None})
    )
    (hf / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [32760, 32765], "bos_token_id": 32759})
    )
    _passes(hf)


def test_directory_without_tokenizer_json_is_still_checked(hf: Path) -> None:
    (hf / "tokenizer.json").unlink()
    (hf / "generation_config.json").write_text("[1]")
    exports = Exports.discover(hf, artifact=SHIPPED)
    assert exports.hf_dir is None
    validate_directory(exports)  # nothing to read without a directory
    with pytest.raises(InputError, match=r"generation_config\.json: top level: must be a JSON object"):
        validate_directory(exports, directory=hf)


# ----------------------------------------------------------- tokenizer.json
def test_tokenizer_json_that_is_not_json(hf: Path) -> None:
    path = hf / "tokenizer.json"
    path.write_bytes(path.read_bytes()[:5000])
    _fails(hf, f"{path}: line ", " column ", "not valid JSON")


def test_tokenizer_json_invalid_utf8_names_the_byte_offset(hf: Path) -> None:
    path = hf / "tokenizer.json"
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" + data[101:])
    _fails(hf, f"{path}: byte offset 100 (line ", "byte 0xff is not valid UTF-8")


def test_merge_with_two_spaces(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"]["merges"].__setitem__(3, d["model"]["merges"][3].replace(" ", "  ")))
    _fails(hf, f"{path}: model.merges[3]:", "exactly one space")


def test_merges_mixing_strings_and_pairs(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"]["merges"].__setitem__(5, d["model"]["merges"][5].split(" ")))
    _fails(hf, f"{path}: model.merges[5]:", "one form")


def test_merge_outside_the_vocab_names_the_merge_index(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"]["merges"].__setitem__(7, "zzq zzr"))
    _fails(hf, f"{path}: model.merges[7]:", "'zzq'", "not in model.vocab")


def test_renamed_vocab_key(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"].__setitem__("vocabulary", d["model"].pop("vocab")))
    _fails(hf, f"{path}: model.vocabulary:", "unknown key 'vocabulary'", "did you mean 'vocab'?")


def test_duplicate_vocab_id(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"]["vocab"].__setitem__("zzz", 5))
    _fails(hf, f"{path}: model.vocab['zzz']:", "id 5 is already the id of")


def test_continuing_subword_prefix_is_caught_before_tokenizers_panics(hf: Path) -> None:
    # tokenizers slices len(prefix) bytes off every merge's right part without checking it:
    # "##" panics ("slice index starts at 1 but ends at 0" / out of range), "a" aborts the interpreter.
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"].__setitem__("continuing_subword_prefix", "##"))
    _fails(hf, f"{path}: model.continuing_subword_prefix:", "'##'", "merge 0", "set it to null")


def test_added_token_flag_must_be_boolean(hf: Path) -> None:
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["added_tokens"][2].__setitem__("special", "yes"))
    _fails(hf, f"{path}: added_tokens[2].special:", "true or false")


def test_tokenizers_own_message_is_quoted_with_its_version(hf: Path) -> None:
    tokenizers = need("tokenizers", "hf")
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["pre_tokenizer"].__setitem__("type", "NoSuchPreTokenizer"))
    _fails(hf, f"{path}: file: tokenizers {tokenizers.__version__} cannot load it", "PreTokenizer")


def test_a_crash_inside_tokenizers_is_one_line(hf: Path) -> None:
    # prefix "a" makes tokenizers 0.23 slice inside a 2-byte character; the panic message is not valid
    # UTF-8 and pyo3 aborts the whole process. The static check stops it first; the child process
    # keeps even an unforeseen abort away from the gate.
    need("tokenizers", "hf")
    path = hf / "tokenizer.json"
    edit_json(path, lambda d: d["model"].__setitem__("continuing_subword_prefix", "a"))
    with pytest.raises(InputError) as info:
        _load_with_tokenizers(path)
    message = str(info.value)
    assert message.startswith(f"{path}: file: tokenizers ") and "\n" not in message
    assert "crashed loading it" in message or "cannot load it" in message


# ------------------------------------------------------ tokenizer_config.json
def test_tokenizer_config_that_is_a_list(hf: Path) -> None:
    path = hf / "tokenizer_config.json"
    path.write_text('["PreTrainedTokenizerFast"]')
    _fails(hf, f"{path}: top level: must be a JSON object, got list")


def test_bad_chat_template_list_item(hf: Path) -> None:
    path = hf / "tokenizer_config.json"
    edit_json(
        path, lambda d: d.__setitem__("chat_template", [{"name": "default", "template": "x"}, {"name": 3}])
    )
    _fails(hf, f"{path}: chat_template[1]:", "'name'")


def test_inline_template_syntax_error_names_the_template_line(hf: Path) -> None:
    path = hf / "tokenizer_config.json"
    edit_json(path, lambda d: d.__setitem__("chat_template", "{{ bos }}\n{% if %}\n"))
    _fails(hf, f"{path}: chat_template line 2:", "Jinja syntax error")


def test_token_key_of_wrong_type(hf: Path) -> None:
    path = hf / "tokenizer_config.json"
    edit_json(path, lambda d: d.__setitem__("eos_token", 32760))
    _fails(hf, f"{path}: eos_token:", "must be a token string")


def test_added_tokens_decoder_key_must_be_an_id(hf: Path) -> None:
    path = hf / "tokenizer_config.json"
    edit_json(path, lambda d: d["added_tokens_decoder"].__setitem__("bos", {"content": "<|bos|>"}))
    _fails(hf, f"{path}: added_tokens_decoder['bos']:", "decimal token id")


def test_duplicate_json_key(hf: Path) -> None:
    path = hf / "special_tokens_map.json"
    path.write_text('{"bos_token": "<|bos|>", "bos_token": "<|eos|>"}')
    _fails(hf, f"{path}: key 'bos_token':", "appears twice")


def test_jinja_file_syntax_error_names_the_line(hf: Path) -> None:
    path = hf / "chat_template.jinja"
    path.write_text("{% for m in messages %}\n{{ m['content'] }}\n{% endfo %}\n")
    _fails(hf, f"{path}: template line 3:", "endfo")


def test_shipped_template_needs_the_generation_tag_extension() -> None:
    from conformance.validate import validate_template
    from stacktok_export.chat.chat import CHAT_TEMPLATE

    assert "{%- generation -%}" in CHAT_TEMPLATE
    validate_template("x", "chat_template", CHAT_TEMPLATE)  # parses: the no-op tag is registered
    with pytest.raises(InputError, match="line 1"):
        validate_template("x", "chat_template", "{% generation %}unclosed")


# ----------------------------------------------------------- checkpoint config
def test_generation_config_that_is_a_list(hf: Path) -> None:
    path = hf / "generation_config.json"
    path.write_text("[32760, 32765]")
    _fails(hf, f"{path}: top level: must be a JSON object, got list")


def test_config_token_id_and_vocab_size_types(hf: Path) -> None:
    path = hf / "config.json"
    path.write_text(json.dumps({"vocab_size": 32768, "eos_token_id": "32760"}))
    _fails(hf, f"{path}: eos_token_id:", "'32760'")
    path.write_text(json.dumps({"text_config": {"vocab_size": 0}}))
    _fails(hf, f"{path}: text_config.vocab_size:", "positive integer")


# ------------------------------------------------------------------ tiktoken
def test_tiktoken_bad_base64_line(hf: Path) -> None:
    path = _edit_tiktoken(hf, lambda lines: lines.__setitem__(4, "BA=! 4"))
    _fails(hf, f"{path}: line 5:", "not valid base64")


def test_tiktoken_duplicate_rank(hf: Path) -> None:
    path = _edit_tiktoken(hf, lambda lines: lines.__setitem__(300, lines[300].split()[0] + " 17"))
    _fails(hf, f"{path}: line 301:", "rank 17 is already used on line 18")


def test_tiktoken_duplicate_token(hf: Path) -> None:
    path = _edit_tiktoken(hf, lambda lines: lines.__setitem__(300, lines[17].split()[0] + " 300"))
    _fails(hf, f"{path}: line 301:", "already appears on line 18")


def test_tiktoken_missing_rank(hf: Path) -> None:
    path = _edit_tiktoken(hf, lambda lines: lines.pop(7))
    _fails(hf, f"{path}: rank 7: is missing")


def test_tiktoken_missing_single_byte(hf: Path) -> None:
    other = base64.b64encode(b"\xff\xfe\xfd\xfc\xfb").decode()
    path = _edit_tiktoken(hf, lambda lines: lines.__setitem__(65, f"{other} 65"))
    _fails(hf, f"{path}: single bytes:", "first 0x41")


# ---------------------------------------------------------------------- GGUF
def test_truncated_gguf(hf: Path) -> None:
    need("gguf", "gguf")
    path = hf.parent / f"{NAME}.gguf"
    path.write_bytes(path.read_bytes()[:600_000])
    _fails(hf, f"{path}: file: gguf ", "cannot read its 600000 bytes", "truncated or corrupt")


def test_not_a_gguf(hf: Path) -> None:
    need("gguf", "gguf")
    path = hf.parent / f"{NAME}.gguf"
    path.write_bytes(b"GGML" + path.read_bytes()[4:])
    _fails(hf, f"{path}: header:", "b'GGML'")


# ------------------------------------------------------ what validation hands on
def test_validation_returns_every_file_it_read_parsed(hf: Path) -> None:
    result = validate_directory(_exports(hf), load=False)
    assert result.directory == hf and result.tokenizers_loaded is False
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "generation_config.json",
    ):
        assert result.raw(name) == (hf / name).read_bytes()
        assert result.value(name) == json.loads((hf / name).read_text(encoding="utf-8"))
    assert result.value("chat_template.jinja") == (hf / "chat_template.jinja").read_text(encoding="utf-8")
    assert result.value("config.json") is None and "config.json" not in result.hf  # absent: no key
    tiktoken = hf.parent / f"{NAME}.tiktoken"
    assert result.tiktoken is not None and result.tiktoken.raw == tiktoken.read_bytes()
    ranks = result.tiktoken.value
    assert len(ranks) == len(tiktoken.read_bytes().split()) // 2 and ranks[b"A"] == 65
    if importlib.util.find_spec("gguf") is not None:
        assert result.gguf is not None and result.gguf.raw is None
        assert result.gguf.value["tokenizer.ggml.tokens"][1] == "ARRAY[STRING]"
    with pytest.raises(FrozenInstanceError):
        result.tiktoken = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.hf["tokenizer.json"] = result.hf["tokenizer.json"]  # type: ignore[index]


def test_each_file_is_read_once(hf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation opens every file it checks exactly once (tokenizers' child gets the text on stdin)."""
    reads: Counter[str] = Counter()
    real_open = io.open
    root = hf.parent.resolve()

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and root in Path(file).resolve().parents:
            reads[Path(file).resolve().relative_to(root).as_posix()] += 1
        return real_open(file, *args, **kwargs)

    real_os_open = os.open

    def counting_os_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and root in Path(file).resolve().parents:
            reads[Path(file).resolve().relative_to(root).as_posix()] += 1
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_os_open)  # the bounded reader (stacktok_export.util.untrusted)
    monkeypatch.setattr(io, "open", counting_open)  # pathlib's read_bytes
    monkeypatch.setattr(builtins, "open", counting_open)  # numpy's memmap under gguf-py
    validate_directory(_exports(hf))
    expected = {f"{hf.name}/{p.name}" for p in hf.iterdir()} | {f"{NAME}.tiktoken"}
    if importlib.util.find_spec("gguf") is not None:
        expected.add(f"{NAME}.gguf")
    assert set(reads) == expected and set(reads.values()) == {1}, reads


def test_not_checked_names_exactly_the_missing_libraries() -> None:
    result = validate_directory(Exports.discover(SHIPPED_HF, artifact=SHIPPED))
    for lib in ("jinja2", "gguf", "tokenizers"):
        missing = importlib.util.find_spec(lib) is None
        assert any(f": {lib} is not installed; pip install" in n for n in result.not_checked) == missing
    assert result.tokenizers_loaded == (importlib.util.find_spec("tokenizers") is not None)
    assert len(result.skip_rows()) == len(result.not_checked)


def test_without_jinja2_the_template_is_a_skip_not_a_silent_pass(
    hf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def no_jinja2(name: str, *args: Any) -> Any:
        return None if name == "jinja2" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_jinja2)
    (hf / "chat_template.jinja").write_text("{% if %}\n", encoding="utf-8")  # not compiled, so not caught
    result = validate_directory(_exports(hf), load=False)
    note = "chat template not compiled: jinja2 is not installed; pip install 'stacktok[hf]'"
    assert note in result.not_checked
    rows = [r for r in result.skip_rows() if r.check == "validate.chat_template"]
    assert [(r.status, r.message) for r in rows] == [("skip", f"not checked: {note}")]


# ------------------------------------------------------------- user fixtures
def _jsonl(path: Path, *objects: dict[str, Any], ensure_ascii: bool = True) -> Path:
    path.write_text(
        "".join(json.dumps(o, ensure_ascii=ensure_ascii) + "\n" for o in objects), encoding="utf-8"
    )
    return path


def test_probe_with_lone_surrogate(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "p.jsonl", {"id": "ok", "category": "c", "text": "fine"})
    with path.open("a", encoding="utf-8") as f:
        f.write('{"id": "bad", "category": "c", "text": "x\\ud800y"}\n')
    with pytest.raises(FixtureError) as info:
        load_probes(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: field 'text'") and "valid Unicode" in message


def test_chat_with_lone_surrogate_names_the_message_field(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "c", "messages": [{"role": "user", "content": "\\udc80"}]}\n', encoding="utf-8")
    with pytest.raises(FixtureError, match=r"c\.jsonl:1: field 'messages\[0\]\.content'.*valid Unicode"):
        load_chats(path)


def test_jsonl_keeps_line_separators_inside_strings(tmp_path: Path) -> None:
    texts = ["a\u2028b", "c\u0085d", "e\u000bf\u2029g\u001c"]
    objects = [{"id": f"p{i}", "category": "c", "text": t} for i, t in enumerate(texts)]
    path = _jsonl(tmp_path / "p.jsonl", *objects, ensure_ascii=False)
    raw = path.read_text(encoding="utf-8")
    assert "\u2028" in raw and "\u0085" in raw  # written raw, not escaped
    assert [p.text for p in load_probes(path)] == texts


def test_jsonl_crlf_line_endings_load(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(
        b'{"id": "a", "category": "c", "text": "x"}\r\n{"id": "b", "category": "c", "text": "y"}\r\n'
    )
    assert [p.text for p in load_probes(path)] == ["x", "y"]


def test_probe_allow_special_and_id_types(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "p.jsonl", {"id": "a", "category": "c", "text": "x", "allow_special": "yes"})
    with pytest.raises(FixtureError, match=r"p\.jsonl:1: field 'allow_special' must be true or false"):
        load_probes(path)
    _jsonl(path, {"id": "", "category": "c", "text": "x"})
    with pytest.raises(FixtureError, match=r"p\.jsonl:1: field 'id' is empty"):
        load_probes(path)


def test_chat_with_two_user_turns_in_a_row(tmp_path: Path) -> None:
    ok = {"id": "ok", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    bad = {"id": "bad", "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]}
    path = _jsonl(tmp_path / "c.jsonl", ok, bad)
    with pytest.raises(FixtureError) as info:
        load_chats(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: message 1:") and "'user' cannot follow role 'user'" in message


def test_chat_with_list_content(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "hi"}]
    path = _jsonl(tmp_path / "c.jsonl", {"id": "c", "messages": [{"role": "user", "content": parts}]})
    with pytest.raises(FixtureError) as info:
        load_chats(path)
    message = str(info.value)
    assert message.startswith(f"{path}:1: message 0") and "must be a string" in message


def test_chat_empty_messages_and_duplicate_ids(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "c.jsonl", {"id": "c", "messages": []})
    with pytest.raises(FixtureError, match=r"c\.jsonl:1: field 'messages' is empty"):
        load_chats(path)
    chat = {"id": "c", "messages": [{"role": "user", "content": "hi"}]}
    _jsonl(path, chat, chat)
    with pytest.raises(FixtureError, match=r"c\.jsonl:2: chat id 'c' is used twice"):
        load_chats(path)


def test_user_chat_id_clashing_with_shipped_chat(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "c.jsonl", {"id": "chat-single-user-gen", "messages": [{"role": "user", "content": "x"}]}
    )
    with pytest.raises(FixtureError, match="chat id 'chat-single-user-gen' appears in more than one file"):
        FixtureSet.load(chats=[path])


def test_text_file_with_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"line one\nline two\xffrest")
    with pytest.raises(FixtureError) as info:
        text_probes(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: byte 0xff at offset 17") and "UTF-8" in message


def test_text_file_keeps_crlf(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"first\r\nsecond\r\n\rthird")
    probes = text_probes(path, chunk=3)
    assert "".join(p.text for p in probes) == "first\r\nsecond\r\n\rthird"
    assert all(not p.text.startswith("\n") for p in probes)  # never cut between \r and \n


def test_empty_text_file(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"")
    with pytest.raises(FixtureError, match=r"t\.txt: the file holds no text"):
        text_probes(path)


def test_shipped_fixtures_still_load() -> None:
    fs = FixtureSet.load()
    assert len(fs.probes) > 5000 and len(fs.chats) > 20 and fs.divergences


def test_a_newer_library_field_with_no_near_match_is_left_to_the_library(hf: Path) -> None:
    """Only a key that looks like a renamed known one is malformed; a new field is not rejected here."""
    edit_json(hf / "tokenizer.json", lambda t: t["model"].update(future_option=None))
    _passes(hf)

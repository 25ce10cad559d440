"""The JSON artifact: determinism, atomic save, and every corrupt case named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stacktok_export import ArtifactError, StackTokenizer, load_tokenizer
from stacktok_export.artifact.artifact import shipped_artifact_path

from .conftest import SHIPPED


@pytest.fixture()
def saved(small_tok: StackTokenizer, tmp_path: Path) -> Path:
    path = tmp_path / "small.json"
    small_tok.save(path)
    return path


def _rewrite(path: Path, edit) -> None:
    payload = json.loads(path.read_text())
    edit(payload)
    payload.pop("fingerprint", None)  # isolate the check under test
    path.write_text(json.dumps(payload))


def test_save_load_round_trip(small_tok: StackTokenizer, saved: Path) -> None:
    again = StackTokenizer.load(saved)
    assert again.merges == small_tok.merges
    assert again.special_to_id == small_tok.special_to_id
    assert again.pattern == small_tok.pattern
    assert again.fingerprint == small_tok.fingerprint
    text = "Round trip: café 🚀 <|bos|>"
    assert again.encode(text) == small_tok.encode(text)


def test_save_is_deterministic(small_tok: StackTokenizer, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    small_tok.save(a)
    StackTokenizer.load(a).save(b)
    assert a.read_bytes() == b.read_bytes()


def test_save_leaves_no_temp_files(small_tok: StackTokenizer, tmp_path: Path) -> None:
    small_tok.save(tmp_path / "x.json")
    small_tok.save(tmp_path / "x.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_artifact_records_engine_and_fingerprint(saved: Path) -> None:
    payload = json.loads(saved.read_text())
    assert payload["format"] == "stacktok-bpe-v1"
    assert set(payload["engine"]) == {"name", "version", "unicode_version", "classes_sha256"}
    assert len(payload["fingerprint"]) == 64


CORRUPTIONS = [
    ("malformed", None, "malformed JSON at line"),
    ("format", lambda p: p.update(format="bpe-v9"), "unknown format 'bpe-v9'"),
    ("missing key", lambda p: p.pop("merges"), "missing key"),
    ("duplicate merge", lambda p: p["merges"].append(p["merges"][0]), "duplicates merge #0"),
    ("forward ref", lambda p: p["merges"].__setitem__(0, [300, 1]), "not below its own id 256"),
    ("negative id", lambda p: p["merges"].__setitem__(3, [-1, 1]), "not below its own id"),
    ("bad pair", lambda p: p["merges"].__setitem__(1, [1, 2, 3]), "not a \\[left, right\\] pair"),
    ("vocab size", lambda p: p.update(vocab_size=p["vocab_size"] + 1), "vocab_size is 2049"),
    ("dup special", lambda p: p["special_tokens"].append("<|bos|>"), "listed twice"),
    ("no specials", lambda p: p.update(special_tokens=[]), "missing or empty"),
    ("bad pattern", lambda p: p.update(pattern="(unclosed"), "does not compile"),
    ("bad engine", lambda p: p.update(engine="regex"), "engine must be an object"),
]


@pytest.mark.parametrize("name,edit,message", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_artifact_is_rejected_with_its_reason(saved: Path, name, edit, message) -> None:
    if edit is None:
        saved.write_text(saved.read_text()[:-20])
    else:
        _rewrite(saved, edit)
    with pytest.raises(ArtifactError, match=message):
        StackTokenizer.load(saved)


def test_hand_edit_breaks_fingerprint(saved: Path) -> None:
    payload = json.loads(saved.read_text())
    payload["merges"][10], payload["merges"][11] = payload["merges"][11], payload["merges"][10]
    saved.write_text(json.dumps(payload))
    with pytest.raises(ArtifactError, match="fingerprint .* does not match"):
        StackTokenizer.load(saved)


def test_engine_with_different_unicode_tables_is_rejected(saved: Path) -> None:
    def edit(p):
        p["engine"].update(version="1999.1.1", classes_sha256="0" * 64, unicode_version="9.0")

    _rewrite(saved, edit)
    with pytest.raises(ArtifactError, match="install regex==1999.1.1"):
        StackTokenizer.load(saved)
    assert StackTokenizer.load(saved, allow_engine_mismatch=True).vocab_size == 2048


def test_other_regex_version_with_same_tables_loads(saved: Path) -> None:
    _rewrite(saved, lambda p: p["engine"].update(version="1999.1.1"))
    assert StackTokenizer.load(saved).vocab_size == 2048


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="no such artifact"):
        StackTokenizer.load(tmp_path / "nope.json")


def test_legacy_seed_format_loads(small_tok: StackTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "legacy.json"
    path.write_text(
        json.dumps(
            {
                "format": "stacklm-bpe-v1",
                "vocab_size": small_tok.vocab_size,
                "pattern": small_tok.pattern,
                "merges": [list(m) for m in small_tok.merges],
                "special_tokens": list(small_tok.special_to_id),
            }
        )
    )
    assert StackTokenizer.load(path).encode("hello world") == small_tok.encode("hello world")


# ------------------------------------------------------------ the shipped one
def test_shipped_layout(shipped_tok: StackTokenizer) -> None:
    assert shipped_tok.vocab_size == 32768
    assert len(shipped_tok.merges) == 32503
    assert list(shipped_tok.special_to_id.values()) == list(range(32759, 32768))
    assert shipped_tok.special_to_id["<|assistant|>"] == 32764


def test_package_copy_is_the_committed_artifact() -> None:
    """``load_tokenizer()`` from an installed package reads the same bytes as tokenizer/."""
    assert shipped_artifact_path().read_bytes() == SHIPPED.read_bytes()
    assert load_tokenizer().fingerprint == load_tokenizer(SHIPPED).fingerprint


def test_vocab_over_16_bits_is_refused(tmp_path) -> None:
    """Ids are 16-bit (pair keys, uint16 packs): a bigger vocabulary would encode wrongly, silently."""
    import json

    import pytest

    from stacktok_cli import main
    from stacktok_export import ArtifactError, StackTokenizer

    with pytest.raises(ValueError, match="over 65536"):
        StackTokenizer().train_from_iterable(["a b"], vocab_size=70_000)
    doc = {
        "format": "stacktok-bpe-v1",
        "vocab_size": 70_000,
        "pattern": "x",
        "merges": [],
        "special_tokens": [],
    }
    (tmp_path / "big.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="over 65,536"):
        StackTokenizer.load(tmp_path / "big.json")
    (tmp_path / "t.txt").write_text("a b")
    assert (
        main(["train", str(tmp_path / "t.txt"), "--vocab-size", "70000", "--out", str(tmp_path / "o.json")])
        == 2
    )

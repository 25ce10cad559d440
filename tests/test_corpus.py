"""The corpus reader shared by ``stacktok train`` and ``stacktok pack``: kinds, splitting, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stacktok_export.corpus import corpus
from stacktok_export.corpus.corpus import (
    CorpusError,
    CorpusOptions,
    ReadStats,
    read_documents,
    training_texts,
)

from .conftest import need

PARAGRAPHS = b"\n\nfirst\r\npara\r\n\r\n \t\r\nsecond\n\n\n  indented\nx\n\n  \n"


def _docs(paths, **opts):
    return [d.text for d in read_documents([str(p) for p in paths], options=CorpusOptions(**opts))]


def test_text_file_is_one_document_with_its_line_endings(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_bytes(PARAGRAPHS)
    assert _docs([p]) == [PARAGRAPHS.decode()]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_paragraphs_do_not_depend_on_block_size(tmp_path: Path, monkeypatch, block: int) -> None:
    p = tmp_path / "a.txt"
    p.write_bytes(PARAGRAPHS)
    monkeypatch.setattr(corpus, "BLOCK", block)
    # a leading separator gives an empty first document (the packer drops it and counts it)
    assert _docs([p], text_docs="paragraph") == ["", "first\r\npara", "second", "  indented\nx"]


def test_jsonl_and_gzip(tmp_path: Path) -> None:
    rows = [{"text": "a\r\nb", "id": 1}, {"text": ""}, {"text": "caf\u00e9 \U0001f680"}]
    lines = "\n".join(json.dumps(r) for r in rows) + "\n\n"
    (tmp_path / "a.jsonl").write_text(lines, encoding="utf-8")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(lines)
    want = [r["text"] for r in rows]
    assert _docs([tmp_path / "a.jsonl"]) == want
    assert _docs([tmp_path / "b.jsonl.gz"]) == want


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"[1, 2]", "a.jsonl:2: a JSON Lines record must be an object"),
        (b'{"body": "x"}', "a.jsonl:2: no field 'text' (fields: body); pick one with --field"),
        (b'{"text": null}', "a.jsonl:2: field 'text' is null, not a string"),
        (b'{"text": 5}', "a.jsonl:2: field 'text' is a number, not a string"),
        (b'{"text": "x"', "a.jsonl:2: not valid JSON"),
        (b'{"text": "\xff"}', "a.jsonl:2: invalid UTF-8 at byte 25 (0xff"),
        (b'{"text": "\\ud800"}', "a.jsonl:2: lone surrogate U+D800"),
        # the only escape in upper-case hex, after non-ASCII and astral text
        (
            b'{"text": "\xc3\xa9 \xf0\x9f\x98\x80 \\uDBFF."}',
            "a.jsonl:2: lone surrogate U+DBFF at character 4",
        ),
    ],
)
def test_jsonl_errors_name_file_line_and_fix(tmp_path: Path, line: bytes, message: str) -> None:
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"text": "ok"}\n' + line + b"\n")
    with pytest.raises(CorpusError) as err:
        _docs([p])
    assert message in str(err.value)


def test_invalid_utf8_replace_and_skip_are_counted(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"text": "a\xffb\xfe"}\n{"text": "\\udc80x"}\n{"text": "fine"}\n')
    stats = ReadStats()
    opts = CorpusOptions(errors="replace")
    texts = [d.text for d in read_documents([str(p)], options=opts, stats=stats)]
    assert texts == ["a\ufffdb\ufffd", "\ufffdx", "fine"]
    assert stats.to_json() == {"invalid_utf8_replaced": 3, "invalid_utf8_skipped": 0}
    stats = ReadStats()
    texts = [d.text for d in read_documents([str(p)], options=CorpusOptions(errors="skip"), stats=stats)]
    assert texts == ["fine"]
    assert stats.to_json() == {"invalid_utf8_replaced": 0, "invalid_utf8_skipped": 2}


def test_text_invalid_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_bytes(b"hello\n" * 1000 + b"\xc3(")
    with pytest.raises(CorpusError, match=r"a\.txt: invalid UTF-8 at byte 6000 \(0xc3"):
        _docs([p])


def test_parquet_string_column_and_errors(tmp_path: Path) -> None:
    pa = need("pyarrow", "pack")
    pq = need("pyarrow.parquet", "pack")
    table = pa.table({"text": ["one", "two\r\n", ""], "n": [1, 2, 3]})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=2)
    assert _docs([tmp_path / "a.parquet"]) == ["one", "two\r\n", ""]
    with pytest.raises(CorpusError, match="column 'n' is int64, not a string"):
        _docs([tmp_path / "a.parquet"], column="n")
    with pytest.raises(CorpusError, match=r"no column 'body' \(columns: text, n\)"):
        _docs([tmp_path / "a.parquet"], column="body")
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "b.parquet")
    with pytest.raises(CorpusError, match="b.parquet: row 2: column 'text' is null"):
        _docs([tmp_path / "b.parquet"])


def test_training_text_keeps_crlf_and_is_cut_at_pre_token_boundaries(tmp_path: Path, monkeypatch) -> None:
    text = "caf\u00e9 line\r\nsecond line\nthird\n" * 50
    p = tmp_path / "a.txt"
    p.write_bytes(text.encode())
    monkeypatch.setattr(corpus, "BLOCK", 7)  # cuts inside multi-byte characters too
    pieces = list(training_texts([str(p)]))
    assert "".join(pieces) == text
    assert len(pieces) > 1 and all(piece[0].isalpha() for piece in pieces[1:])


def test_training_texts_stop_at_the_byte_budget(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text("\n".join(json.dumps({"text": f"word{i} more words"}) for i in range(10)), encoding="utf-8")
    pieces = list(training_texts([str(p)], max_bytes=40))
    assert sum(len(x.encode()) for x in pieces) <= 40
    assert pieces[:2] == ["word0 more words", "word1 more words"] and pieces[2] == "word2"


def test_expand_inputs(tmp_path: Path) -> None:
    for name in ("b.txt", "a.txt"):
        (tmp_path / name).write_text("x")
    want = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert corpus.expand_inputs([str(tmp_path / "*.txt")]) == want
    with pytest.raises(CorpusError, match="matches no readable file"):
        corpus.expand_inputs([str(tmp_path / "missing.txt")])


@pytest.mark.parametrize(
    ("name", "block", "opts"),
    [
        ("a.jsonl", b'{"text": "x"}\n' * 10, {}),
        ("a.txt", b"para\n\n" * 10, {"text_docs": "paragraph"}),
    ],
)
def test_reading_streams_block_by_block(name: str, block: bytes, opts: dict, monkeypatch) -> None:
    """The first document comes after one block is read, not after the whole file (memory)."""
    pulled = []

    def blocks(path):
        for i in range(100):
            pulled.append(i)
            yield block

    monkeypatch.setattr(corpus, "_blocks", blocks)
    first = next(corpus.read_input(name, options=CorpusOptions(**opts)))
    assert first.text in ("x", "para") and len(pulled) == 1


def test_one_document_per_line(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "a.txt"
    p.write_bytes(b"first\r\n\nthird \xc3\xa9\nlast")
    monkeypatch.setattr(corpus, "BLOCK", 3)
    docs = list(corpus.read_input(str(p), options=CorpusOptions(text_docs="line")))
    assert [d.text for d in docs] == ["first", "", "third \u00e9", "last"]
    assert [d.where.rsplit(":", 1)[1] for d in docs] == ["1", "2", "3", "4"]


def test_a_huge_whole_file_document_is_refused(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "big.txt"
    p.write_bytes(b"x" * 5000)
    monkeypatch.setattr(corpus, "MAX_DOCUMENT_BYTES", 4096)
    with pytest.raises(
        CorpusError, match="big.txt: over 4,096 bytes as one document.*--text-docs paragraph\\|line"
    ):
        _docs([p])


def test_train_reads_jsonl_fields_and_keeps_crlf(tmp_path: Path) -> None:
    from stacktok_cli import main
    from stacktok_export import StackTokenizer

    rows = [{"body": "line one\r\nline two\r\n" * 20}, {"body": "more\r\ntext\r\n" * 20}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = tmp_path / "t.json"
    argv = ["train", str(tmp_path / "a.jsonl"), "--field", "body", "--vocab-size", "300", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    tok = StackTokenizer.load(out)
    assert b"\r\n" in tok.token_bytes()  # learned from CRLF the reader kept
    assert (
        main(["train", str(tmp_path / "a.jsonl"), "--vocab-size", "300", "--out", str(out), "--quiet"]) == 2
    )

"""Zstandard inputs (``.jsonl.zst``, ``.txt.zst``) read like plain files, streamed; byte ranges exact."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from stacktok_export.corpus import corpus
from stacktok_export.corpus.corpus import CorpusError, CorpusOptions, read_input
from stacktok_export.pack import plan

from .conftest import need


def _docs(path: Path, **opts) -> list[tuple]:
    return [(d.number, d.where, d.text) for d in read_input(str(path), options=CorpusOptions(**opts))]


def test_jsonl_zst_of_several_frames_reads_like_the_plain_file(tmp_path: Path, monkeypatch) -> None:
    zstandard = need("zstandard", "pack")
    lines = "".join(json.dumps({"text": f"doc {i} caf\u00e9\r\n"}) + "\n" for i in range(3000)).encode()
    (tmp_path / "a.jsonl").write_bytes(lines)
    half = lines.index(b"\n", len(lines) // 2) + 1  # two frames, as pzstd and many corpora write them
    c = zstandard.ZstdCompressor()
    (tmp_path / "a.jsonl.zst").write_bytes(c.compress(lines[:half]) + c.compress(lines[half:]))
    monkeypatch.setattr(corpus, "BLOCK", 1000)  # records cross block boundaries
    plain, zst = _docs(tmp_path / "a.jsonl"), _docs(tmp_path / "a.jsonl.zst")
    assert len(plain) == 3000 and [d[2] for d in zst] == [d[2] for d in plain]
    assert [d[0] for d in zst] == list(range(3000)) and zst[-1][1].endswith("a.jsonl.zst:3000")


def test_txt_zst_paragraphs_and_lines_read_like_the_plain_file(tmp_path: Path) -> None:
    zstandard = need("zstandard", "pack")
    text = b"first para\r\nline two\n\n \t\nsecond\n\n\nthird \xc3\xa9\n"
    (tmp_path / "t.txt").write_bytes(text)
    (tmp_path / "t.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    for mode in ("paragraph", "line", "file"):
        plain = [d[2] for d in _docs(tmp_path / "t.txt", text_docs=mode)]
        assert [d[2] for d in _docs(tmp_path / "t.txt.zst", text_docs=mode)] == plain
    assert [d[2] for d in _docs(tmp_path / "t.txt.zst", text_docs="paragraph")][2] == "third \u00e9"


def test_a_zst_is_streamed_not_read_whole(tmp_path: Path, monkeypatch) -> None:
    zstandard = need("zstandard", "pack")
    line = json.dumps({"text": "x" * 1000}).encode() + b"\n"
    path = tmp_path / "big.jsonl.zst"
    with open(path, "wb") as f, zstandard.ZstdCompressor().stream_writer(f) as w:
        for _ in range(64):
            w.write(line * 1000)  # 64 MB decompressed, a few KB on disk
    monkeypatch.setattr(corpus, "BLOCK", 1 << 20)
    tracemalloc.start()
    n = sum(1 for _ in read_input(str(path)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 64_000 and peak < 8 << 20, peak


def test_a_corrupt_zst_is_one_line(tmp_path: Path) -> None:
    need("zstandard", "pack")
    (tmp_path / "bad.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00garbage" * 10)
    with pytest.raises(CorpusError) as err:
        list(read_input(str(tmp_path / "bad.jsonl.zst")))
    msg = str(err.value)
    assert (
        msg.startswith(f"cannot read {tmp_path / 'bad.jsonl.zst'}: not valid Zstandard data")
        and "\n" not in msg
    )


def test_compressed_inputs_are_one_unit_and_keep_their_kind(tmp_path: Path) -> None:
    assert corpus.input_kind("x/c4.en.jsonl.zst") == "jsonl" and corpus.input_kind("a.txt.zst") == "text"
    for name in ("a.jsonl.zst", "a.jsonl.gz"):
        (tmp_path / name).write_bytes(b"x" * 1000)
        units = plan.cut_units([str(tmp_path / name)], [1000], CorpusOptions(), part_bytes=10)
        assert len(units) == 1 and not units[0].cut


@pytest.mark.parametrize(
    ("name", "mode"),
    [("t.txt", "paragraph"), ("t.txt", "line"), ("j.jsonl", "file"), ("p.parquet", "file")],
)
@pytest.mark.parametrize("part_bytes", [97, 1000, 10**9])
def test_cut_pieces_read_exactly_the_documents_of_one_read(
    tmp_path: Path, name: str, mode: str, part_bytes
) -> None:
    """Cut at every ``part_bytes``, numbered by counts: the pieces give one read's documents and places."""
    import random

    rng = random.Random(7)
    pieces = ["a", "bb", " ", "\n", "\r\n", "\n\n", "\n \n", "\n\t\n\n", "\u00e9", "x\r", "\r\n\r\n"]
    path = tmp_path / name
    if name.endswith(".txt"):
        path.write_bytes(("\n\n" + "".join(rng.choice(pieces) for _ in range(20_000))).encode())
    elif name.endswith(".jsonl"):
        rows = [
            json.dumps({"text": "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))})
            for _ in range(3000)
        ]
        path.write_text("".join(r + ("\n" if i % 7 else "\n  \n") for i, r in enumerate(rows)))
    else:
        pa = need("pyarrow", "pack")
        import pyarrow.parquet as pq

        pq.write_table(
            pa.table({"text": [f"row {i} " * (i % 5) for i in range(2000)]}), path, row_group_size=300
        )
    opts = CorpusOptions(text_docs=mode)
    units = plan.cut_units([str(path)], [path.stat().st_size], opts, part_bytes=part_bytes)
    counts = {i: plan.count_unit(str(path), units[i].span, opts) for i in plan.needs_count(units)}
    units = plan.number_units(units, counts)
    got = [
        (d.number, d.where, d.text) for u in units for d in read_input(str(path), options=opts, span=u.span)
    ]
    assert got == _docs(path, text_docs=mode)
    assert (len(units) > 5) == (part_bytes < 10**9)

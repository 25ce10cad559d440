"""``stacktok pack``: exact ids, identical output whatever runs it, verification, resume, bad input."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from stacktok_export import load_tokenizer
from stacktok_export.pack import PackError, PackMismatch, PackOptions, PackReader, check_pack, pack
from stacktok_export.pack.encode import DocEncoder

from .conftest import ROOT, need

U17 = "\U000323b0"  # a Unicode 17 letter: tiktoken 0.14's tables call it punctuation
TOK = load_tokenizer()


def corpus_docs() -> list[str]:
    lines = (ROOT / "fixtures" / "probes.jsonl").read_text(encoding="utf-8").splitlines()
    probes = [json.loads(line)["text"] for line in lines]
    held = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")[:300_000]
    docs = [held[i : i + 3000] for i in range(0, len(held), 3000)]
    specials = ["user typed <|eos|> and <|user|> here", "<|bos|>", f"new letter {U17}'s"]
    return [*probes, "", *docs, *specials, "", "   "]


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for text in corpus_docs():
            f.write(json.dumps({"text": text}) + "\n")
    return path


def _pack(inputs, out, **kw):
    kw.setdefault("quiet", True)
    kw.setdefault("workers", 1)
    return pack([str(p) for p in inputs], out, options=PackOptions(**kw))


def _want() -> list[list[int]]:
    return [[TOK.bos_id, *TOK.encode(t), TOK.eos_id] for t in corpus_docs() if t]


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def packed(jsonl: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("packs") / "one"
    _pack([jsonl], out, shard_tokens=50_000, fmt="megatron")
    return out


def test_every_document_is_bos_reference_ids_eos(packed: Path) -> None:
    docs = [d.tolist() for d in PackReader(packed, tokenizer=TOK).documents()]
    assert docs == _want()  # every document, not a sample
    manifest = json.loads((packed / "manifest.json").read_text())
    totals = manifest["totals"]
    assert totals["documents"] == len(docs) and totals["empty_dropped"] == corpus_docs().count("")
    # the special strings stayed text, and were verified against the reference
    assert TOK.special_to_id["<|user|>"] not in docs[-3] and manifest["totals"]["verified"] >= 3


def test_a_code_point_tiktoken_splits_differently_is_encoded_by_the_reference(packed: Path) -> None:
    from stacktok_export.export.tiktoken_fmt import to_tiktoken

    text = f"new letter {U17}'s"
    assert to_tiktoken(TOK).encode_ordinary(text) != TOK.encode(text), "precondition: tiktoken differs here"
    manifest = json.loads((packed / "manifest.json").read_text())
    assert manifest["totals"]["reference_encoded"] >= 1
    assert list(PackReader(packed).documents())[-2].tolist() == [TOK.bos_id, *TOK.encode(text), TOK.eos_id]


def test_shards_never_split_documents_and_close_at_the_target(packed: Path) -> None:
    manifest = json.loads((packed / "manifest.json").read_text())
    shards = manifest["shards"]
    assert len(shards) >= 3
    for shard in shards[:-1]:
        tokens = np.memmap(packed / f"{shard['name']}.bin", dtype="<u2", mode="r")
        offsets = np.load(packed / f"{shard['name']}.offsets.npy")
        last = int(offsets[-1] - offsets[-2])
        assert shard["tokens"] >= 50_000 > shard["tokens"] - last  # closed by its last document
        assert tokens[0] == TOK.bos_id and tokens[-1] == TOK.eos_id


def test_output_is_identical_for_any_worker_count_and_shard_size(
    jsonl: Path, packed: Path, tmp_path: Path
) -> None:
    _pack([jsonl], tmp_path / "w2", shard_tokens=50_000, fmt="megatron", workers=2)
    assert _files(tmp_path / "w2") == _files(packed)
    _pack([jsonl], tmp_path / "big", shard_tokens=10**9, workers=3)
    [doc_ids] = [np.concatenate(list(PackReader(tmp_path / "big").shards())[0][:1])]
    assert doc_ids.tolist() == [i for d in _want() for i in d]


def test_forked_and_spawned_workers_write_identical_bytes(
    jsonl: Path, packed: Path, tmp_path: Path, monkeypatch
) -> None:
    """With no other thread running the parent builds the encoder once and forks the workers
    with it; with another thread alive (forking then is unsafe) they are spawned and build their
    own. Same bytes either way."""
    from stacktok_export.pack import encode, engines

    built = []
    monkeypatch.setattr(engines, "share_worker", lambda spec: built.append(encode.share_worker(spec)))
    _pack([jsonl], tmp_path / "forked", shard_tokens=50_000, fmt="megatron", workers=2)
    assert len(built) == 1 and encode.shared_worker() is None  # built once, forgotten after the run
    stop = threading.Event()
    alive = threading.Thread(target=stop.wait)
    alive.start()
    try:
        _pack([jsonl], tmp_path / "spawned", shard_tokens=50_000, fmt="megatron", workers=2)
    finally:
        stop.set()
        alive.join()
    assert len(built) == 1  # not built in this process: the spawned workers built their own
    assert _files(tmp_path / "forked") == _files(packed) == _files(tmp_path / "spawned")


def test_megatron_index_read_from_its_published_layout(packed: Path) -> None:
    """Megatron-LM ``MMapIndexedDataset``: magic, version, dtype, counts, lengths, pointers, documents."""
    name = json.loads((packed / "manifest.json").read_text())["shards"][0]["name"]
    idx = (packed / f"{name}.idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    version, code, n_seq, n_doc = struct.unpack_from("<QBQQ", idx, 9)
    assert (version, code, n_doc) == (1, 8, n_seq + 1)  # 8 = uint16
    at = 9 + 25
    lengths = np.frombuffer(idx, "<i4", n_seq, at)
    pointers = np.frombuffer(idx, "<i8", n_seq, at + 4 * n_seq)
    docs = np.frombuffer(idx, "<i8", n_doc, at + 12 * n_seq)
    assert len(idx) == at + 12 * n_seq + 8 * n_doc
    tokens = np.fromfile(packed / f"{name}.bin", dtype="<u2")
    seqs = [tokens[p // 2 : p // 2 + n].tolist() for p, n in zip(pointers, lengths)]
    assert seqs == _want()[: len(seqs)] and docs.tolist() == list(range(n_seq + 1))


@pytest.mark.heavy
def test_megatron_core_reads_the_megatron_pack(packed: Path) -> None:
    """Megatron-LM's own reader (megatron-core, installed by ``nox -s heavy``) on our ``.bin``/``.idx``."""
    need("torch", "nox -s heavy")
    indexed = need("megatron.core.datasets.indexed_dataset", "nox -s heavy")
    shards = json.loads((packed / "manifest.json").read_text())["shards"]
    docs: list[list[int]] = []
    for shard in shards:
        ds = indexed.IndexedDataset(str(packed / shard["name"]), mmap=True)
        assert len(ds) == shard["documents"]
        docs += [np.asarray(ds[i]).tolist() for i in range(len(ds))]
    assert docs == _want()


def test_a_fast_encoder_that_differs_stops_the_run(jsonl: Path, tmp_path: Path, monkeypatch) -> None:
    real = DocEncoder._fast
    bad_text = "user typed <|eos|> and <|user|> here"  # holds special strings: always verified

    def patched(self, text):
        ids = real(self, text)
        return ids[::-1].copy() if text == bad_text else ids

    monkeypatch.setattr(DocEncoder, "_fast", patched)
    with pytest.raises(PackMismatch) as err:
        _pack([jsonl], tmp_path / "bad", shard_tokens=50_000)
    n = corpus_docs().index(bad_text) + 1  # its line
    assert f"docs.jsonl:{n}: tiktoken" in str(err.value) and "differ at token 0" in str(err.value)
    assert not (tmp_path / "bad" / "manifest.json").exists()


def test_verify_all_checks_every_document(jsonl: Path, tmp_path: Path) -> None:
    m = _pack([jsonl], tmp_path / "all", shard_tokens=10**9, verify=1.0)
    t = m["totals"]
    assert t["verified"] + t["reference_encoded"] == t["documents"]


def test_keep_empty(jsonl: Path, tmp_path: Path) -> None:
    m = _pack([jsonl], tmp_path / "keep", keep_empty=True)
    assert m["totals"]["empty_dropped"] == 0
    assert [TOK.bos_id, TOK.eos_id] in [d.tolist() for d in PackReader(tmp_path / "keep").documents()]


def test_rerun_is_a_no_op_and_other_options_are_refused(jsonl: Path, packed: Path, tmp_path: Path) -> None:
    before = _files(packed)
    _pack([jsonl], packed, shard_tokens=50_000, fmt="megatron")
    assert _files(packed) == before
    with pytest.raises(PackError, match="holds a pack made with a different options"):
        _pack([jsonl], packed, shard_tokens=60_000, fmt="megatron")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(PackError, match="is not empty and holds no pack"):
        _pack([jsonl], tmp_path / "other")


def test_check_finds_a_changed_shard_and_control_tokens(packed: Path, tmp_path: Path) -> None:
    import shutil

    assert check_pack(packed, rate=1.0) == []
    bad = tmp_path / "bad"
    shutil.copytree(packed, bad)
    name = json.loads((bad / "manifest.json").read_text())["shards"][0]["name"]
    data = bytearray((bad / f"{name}.bin").read_bytes())
    data[10:12] = np.uint16(TOK.special_to_id["<|user|>"]).tobytes()
    (bad / f"{name}.bin").write_bytes(bytes(data))
    assert "sha256 differs" in check_pack(bad)[0]
    manifest = json.loads((bad / "manifest.json").read_text())
    import hashlib

    manifest["shards"][0]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    (bad / "manifest.json").write_text(json.dumps(manifest))
    assert "special ids inside documents" in check_pack(bad)[0]


def test_reader_refuses_another_tokenizer_and_cuts_windows(packed: Path, small_tok) -> None:
    with pytest.raises(PackError, match="train with the tokenizer the pack was made with"):
        PackReader(packed, tokenizer=small_tok)
    reader = PackReader(packed, tokenizer=TOK)
    windows = list(reader.windows(1000))
    flat = [i for d in _want() for i in d]
    assert len(windows) == len(flat) // 1000
    assert np.concatenate(windows).tolist() == flat[: len(windows) * 1000]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stacktok_cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"fine\n" * 10 + b"\xff")
    r = _cli("pack", "a.txt", "--out", "out", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "a.txt: invalid UTF-8 at byte 50 (0xff" in r.stderr and "--errors replace|skip" in r.stderr
    pa = need("pyarrow", "pack")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "n.parquet")
    r = _cli("pack", "n.parquet", "--out", "out", cwd=tmp_path)
    assert r.returncode == 2 and "column 'text' is int64, not a string" in r.stderr, r.stderr
    r = _cli("pack", "a.txt", "--out", "out2", "--errors", "replace", "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and "replaced 1" in r.stdout, r.stderr
    (tmp_path / "bad.json").write_text('{"format":')  # fails in the parent (it builds the workers' encoder)
    r = _cli("pack", "a.txt", "--out", "out3", "--errors", "replace", "--artifact", "bad.json", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "bad.json: malformed JSON" in r.stderr
    r = _cli("pack", "--check", "out2", cwd=tmp_path)
    assert r.returncode == 0 and "out2: OK" in r.stdout, r.stdout + r.stderr
    (tmp_path / "out2" / "shard-00000-00000.bin").write_bytes(b"\0\0")  # part 0, shard 0
    r = _cli("pack", "--check", "out2", cwd=tmp_path)
    assert r.returncode == 1 and "sha256 differs" in r.stdout, r.stdout + r.stderr


def test_killed_run_resumes_keeping_finished_shards(jsonl: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    lines = jsonl.read_text(encoding="utf-8")
    big.write_text(lines * 12, encoding="utf-8")
    args = ("pack", str(big), "--out", "out", "--shard-tokens", "5000", "--workers", "1", "--quiet")
    proc = subprocess.Popen([sys.executable, "-m", "stacktok_cli", *args], cwd=tmp_path)
    journal = tmp_path / "out" / "part-00000.json"  # the one part's record: its shards so far
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(json.loads(journal.read_text() or "{}").get("shards", [])) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed; make the corpus bigger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = json.loads(journal.read_text())["shards"]
    first = (tmp_path / "out" / "shard-00000-00000.bin").stat()
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "shard-00000-00000.bin").stat().st_ino == first.st_ino  # kept, not rewritten
    _cli(*args[:3], "fresh", *args[4:], cwd=tmp_path)
    assert _files(tmp_path / "out") == _files(tmp_path / "fresh")
    assert len(kept) >= 3 and not journal.exists()


def test_ray_engine_writes_identical_bytes(jsonl: Path, packed: Path, tmp_path: Path) -> None:
    ray = need("ray", "ray")
    try:
        _pack([jsonl], tmp_path / "ray", shard_tokens=50_000, fmt="megatron", engine="ray", workers=2)
    finally:
        ray.shutdown()
    assert _files(tmp_path / "ray") == _files(packed)


@pytest.mark.parametrize("length", [1, 7, 4096, 60_001])
def test_windows_cross_shard_boundaries(packed: Path, length: int) -> None:
    flat = [i for d in _want() for i in d]
    windows = list(PackReader(packed).windows(length))
    assert len(windows) == len(flat) // length and all(len(w) == length for w in windows)
    if length > 1:
        assert np.concatenate(windows).tolist() == flat[: len(windows) * length]


def _wide_tokenizer():
    """A v2 vocabulary of 65,610 ids (past uint16): the specials first, the 256 bytes, lowercase
    pairs, pairs + a capital, those + another capital (each token made one way only)."""
    import string

    from stacktok_export.models.bpe.bpe import StackTokenizer

    tokens: list[bytes | None] = [b"<|bos|>", b"<|eos|>", *(bytes([i]) for i in range(256))]
    merges: list[tuple[int, int]] = []

    def add(left: int, right: int) -> int:
        merges.append((left, right))
        tokens.append(tokens[left] + tokens[right])
        return len(tokens) - 1

    low, up = [2 + ord(c) for c in string.ascii_lowercase], [2 + ord(c) for c in string.ascii_uppercase]
    triples = [add(p, c) for p in [add(a, b) for a in low for b in low] for c in up]
    for t in triples:
        for c in up:
            if len(tokens) < 65_610:
                add(t, c)
    return StackTokenizer.from_vocab(
        tokens=tokens,
        merges=merges,
        specials={"<|bos|>": 0, "<|eos|>": 1},
        patterns=[TOK.pattern],
        roles={"bos": 0, "eos": 1},
        name="wide",
    )


def test_a_vocabulary_over_65536_ids_packs_uint32(tmp_path: Path) -> None:
    wide = _wide_tokenizer()
    assert wide.vocab_size > 65_536 and wide.format == "stacktok-bpe-v2"
    wide.save(tmp_path / "wide.json")
    high = [t.decode() for t in wide.id_bytes()[65_536:65_600]]  # the bytes of ids past uint16
    texts = [" ".join(high[i : i + 8]) + f" plain text {i}" for i in range(0, len(high), 8)]
    (tmp_path / "w.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    m = _pack([tmp_path / "w.jsonl"], tmp_path / "out", artifact=str(tmp_path / "wide.json"), fmt="megatron")
    assert m["dtype"] == "<u4" and m["tokenizer"]["vocab_size"] == wide.vocab_size
    want = [[wide.bos_id, *wide.encode(t), wide.eos_id] for t in texts]
    reader = PackReader(tmp_path / "out", tokenizer=wide)
    docs = [d.tolist() for d in reader.documents()]
    assert docs == want and max(max(d) for d in docs) >= 65_536
    [shard] = m["shards"]
    assert (tmp_path / "out" / f"{shard['name']}.bin").stat().st_size == 4 * shard["tokens"]
    idx = (tmp_path / "out" / f"{shard['name']}.idx").read_bytes()
    assert struct.unpack_from("<B", idx, 17)[0] == 4  # Megatron DType int32: the same bytes for ids < 2^31
    flat = [i for d in want for i in d]
    assert np.concatenate(list(reader.windows(7))).tolist() == flat[: 7 * (len(flat) // 7)]
    assert check_pack(tmp_path / "out", artifact=str(tmp_path / "wide.json"), rate=1.0) == []


def test_an_unreachable_token_never_takes_the_tiktoken_path(tmp_path: Path) -> None:
    """v1's layout, but ``hel`` (he + l) is not self-reachable: BPE merges ``el`` first. tiktoken
    takes ``hel`` whole, so the packer must not trust it for any document (not only its sample)."""
    from stacktok_export.export.tiktoken_fmt import tiktoken_unproven, to_tiktoken
    from stacktok_export.models.bpe.bpe import SPECIAL_TOKENS, StackTokenizer

    h, e, ll = ord("h"), ord("e"), ord("l")
    tokens = [bytes([i]) for i in range(256)] + [b"el", b"he", b"hel"] + [s.encode() for s in SPECIAL_TOKENS]
    specials = {s: 259 + i for i, s in enumerate(SPECIAL_TOKENS)}
    tok = StackTokenizer.from_vocab(
        tokens=tokens, merges=[(e, ll), (h, e), (257, ll)], specials=specials, patterns=[TOK.pattern]
    )
    assert tok.format == "stacktok-bpe-v1" and tok.encode("hel") == [h, 256]
    assert to_tiktoken(tok).encode_ordinary("hel") == [258]  # the trap
    assert tiktoken_unproven(tok) is not None
    tok.save(tmp_path / "trap.json")
    texts = [f"hel {i} hello" for i in range(300)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    _pack([tmp_path / "t.jsonl"], tmp_path / "out", artifact=str(tmp_path / "trap.json"), verify=0.0)
    docs = [d.tolist() for d in PackReader(tmp_path / "out", tokenizer=tok).documents()]
    assert docs == [[tok.bos_id, *tok.encode(t), tok.eos_id] for t in texts]


def test_each_piece_of_a_cut_input_is_a_part_and_small_inputs_share_one(tmp_path: Path) -> None:
    """Plan version 1 grouped pieces by size, so a piece one line short of --part-bytes (about
    half of them) doubled the next part; pieces now stand alone, small whole inputs still share."""
    import random

    from stacktok_export.corpus.corpus import CorpusOptions
    from stacktok_export.pack.plan import PLAN_VERSION, cut_units, group_parts

    rng = random.Random(7)
    big = tmp_path / "big.jsonl"
    big.write_text(
        "".join(json.dumps({"text": "x" * rng.randrange(20, 900)}) + "\n" for _ in range(600)),
        encoding="utf-8",
    )
    smalls = [tmp_path / f"small{i}.jsonl" for i in range(5)]
    for p in smalls:
        p.write_text(json.dumps({"text": "y" * 3000}) + "\n", encoding="utf-8")
    paths = [big, *smalls]
    units = cut_units(
        [str(p) for p in paths], [p.stat().st_size for p in paths], CorpusOptions(), part_bytes=10_000
    )
    pieces = [u for u in units if u.cut]
    assert len(pieces) > 20 and any(u.size < 10_000 for u in pieces[:-1])  # short pieces exist
    parts = group_parts(units, part_bytes=10_000)
    assert [p.units for p in parts[: len(pieces)]] == [(u,) for u in pieces]
    assert [len(p.units) for p in parts[len(pieces) :]] == [4, 1]  # 4 x ~3 KB reach 10 KB, then 1
    assert [p.index for p in parts] == list(range(len(parts)))
    # the plan version is in the header: a rerun under another plan refuses instead of mixing parts
    out = tmp_path / "out"
    manifest = _pack([big], out, part_bytes=10_000)
    assert manifest["plan"] == PLAN_VERSION == 2
    doc = json.loads((out / "manifest.json").read_text())
    doc["plan"] = 1
    (out / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(PackError, match="made with a different plan"):
        _pack([big], out, part_bytes=10_000)

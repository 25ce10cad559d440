"""Parse bombs for GGUF headers, ``stacktok import`` and ``stacktok pack`` (issue 37, items 2 and 6).

Each bomb is built in ``tmp_path`` in well under a second (a GGUF header of a few hundred bytes
written with ``struct``, a zstd bomb compressed in streamed chunks) and run through the real
command line as a subprocess with a timeout, measuring the peak RSS of the whole process tree
(:func:`run_cli` polls ``/proc``): exit 2 with one line naming the file and what it declared,
within a time and memory bound far below the issue's 60 s / 2 GiB. In-process tests pin what the
subprocess cannot see: gguf-py's reader is never reached, an over-long line is refused before it
is whole, a quadratic decoding stays linear, and every malformed import input is exit 2, never 3.

Out of scope: the gate on hostile checkpoints end to end (tests/test_hostile.py), the readers on
well-formed files (tests/test_import.py, tests/test_gguf_reader.py, tests/test_corpus*.py).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.core.errors import InputError
from conformance.report.entry import run_main
from stacktok_cli import importing
from stacktok_export.corpus import corpus, corpus_io
from stacktok_export.corpus.corpus import CorpusError, CorpusOptions, read_input
from stacktok_export.gguf.header import GGUFHeaderError
from stacktok_export.gguf.kv import read_fields, read_kv
from stacktok_export.importers import ImportRefused, read_source
from stacktok_export.util import limits
from stacktok_export.util.untrusted import UntrustedFileError

from .conftest import need
from .helpers.paths import GGUF, ROOT

MIB = 1 << 20
SHIPPED_GGUF = ROOT / "tokenizer" / GGUF


# ------------------------------------------------------------------ running a bomb
@dataclass
class Run:
    code: int | None  # None: killed at the timeout
    seconds: float
    peak_mib: float
    stdout: str
    stderr: str

    def one_line_error(self, *mentions: str) -> str:
        """The single stderr line of an exit 2 that names every one of ``mentions``."""
        lines = self.stderr.strip().splitlines()
        assert self.code == 2 and len(lines) == 1 and "Traceback" not in self.stderr, self
        for text in mentions:
            assert text in lines[0], (text, lines[0])
        return lines[0]


def _tree_rss(pid: int) -> int:
    """Summed VmRSS of ``pid`` and its descendants (``/proc/PID/task/*/children``)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", "rb") as f:
                total += next((int(x.split()[1]) for x in f if x.startswith(b"VmRSS:")), 0) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def run_cli(*args: str, cwd: Path, timeout: float = 60.0) -> Run:
    """``python -m stacktok_cli ARGS`` in its own session: exit code, wall time, peak tree RSS."""
    out, err = cwd / ".stdout", cwd / ".stderr"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stacktok_cli", *args], cwd=cwd, stdout=o, stderr=e, env=env,
            start_new_session=True,
        )  # fmt: skip
        start, peak = time.monotonic(), 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            if time.monotonic() - start > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.02)
    seconds = time.monotonic() - start
    code = None if seconds > timeout else proc.returncode
    return Run(code, seconds, peak / MIB, out.read_text(errors="replace"), err.read_text(errors="replace"))


# ------------------------------------------------------------------ building bombs
def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv_str(key: str, value: str | bytes) -> bytes:
    return _s(key) + struct.pack("<I", 8) + _s(value)


def kv_array(key: str, itype: int, count: int, body: bytes = b"") -> bytes:
    return _s(key) + struct.pack("<IIQ", 9, itype, count) + body


def gguf(*entries: bytes, n_kv: int | None = None, n_tensors: int = 0, tail: bytes = b"\0" * 64) -> bytes:
    """A GGUF v3 header: ``entries`` as its key/values (counts as declared), then ``tail``."""
    n = len(entries) if n_kv is None else n_kv
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n) + b"".join(entries) + tail


T = "tokenizer.ggml."
GPT2 = (kv_str("general.architecture", "llama"), kv_str(T + "model", "gpt2"))
_NESTED = kv_array("x.nested", 9, 1, struct.pack("<IQ", 9, 1) * 5 + struct.pack("<IQ", 5, 0))
_TEMPLATE_2E60 = _s("tokenizer.chat_template") + struct.pack("<IQ", 8, 2**60)
_DIMS_2E31 = _s("t") + struct.pack("<I", 2**31) + b"\0" * 16
#: id -> (GGUF bytes, the key the refusal names, a word of what it declared)
GGUF_BOMBS = {
    "int32-array-2e40": (gguf(*GPT2, kv_array(T + "token_type", 5, 2**40)), "token_type", "1,099,"),
    "10M-strings": (gguf(*GPT2, kv_array(T + "tokens", 8, 10**7)), "tokens", "10,000,000"),
    "string-2e60": (gguf(*GPT2, _TEMPLATE_2E60), "chat", "1,152,"),
    "kv-count-2e50": (gguf(*GPT2, n_kv=2**50), "GGUF.kv_count", "1,125,899,906,842,624"),
    "tensor-count-2e50": (gguf(*GPT2, n_tensors=2**50), "GGUF.tensor_count", "1,125,899,906,842,624"),
    "nested-arrays": (gguf(*GPT2, _NESTED), "x.nested", "nested more than"),
    "tensor-dims-2e31": (gguf(*GPT2, n_tensors=1, tail=_DIMS_2E31), "tensor 't'", "2,147,"),
}


def zstd_file(path: Path, total: int, chunk: bytes = b"0\n") -> Path:
    """``total`` bytes of ``chunk`` repeated, zstd-compressed as a stream (a few hundred KB per GB)."""
    import zstandard

    block = chunk * (min(4 * MIB, total) // len(chunk))
    with open(path, "wb") as f, zstandard.ZstdCompressor(level=3).stream_writer(f, closefd=False) as z:
        for _ in range(total // len(block)):
            z.write(block)
    return path


def byte_ranks() -> bytes:
    return b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))


# ------------------------------------------------------------------ GGUF headers
@pytest.fixture
def no_library(monkeypatch):
    """gguf-py's reader made unreachable: a bomb must be refused before the library sees it."""
    gguf_py = need("gguf", "gguf")

    def refuse(*a, **k):
        raise AssertionError("GGUFReader was handed a hostile header")

    monkeypatch.setattr(gguf_py, "GGUFReader", refuse)


@pytest.mark.parametrize("bomb", list(GGUF_BOMBS))
def test_a_gguf_header_bomb_is_refused_before_anything_is_built(tmp_path, no_library, bomb) -> None:
    data, key, declared = GGUF_BOMBS[bomb]
    path = tmp_path / "bomb.gguf"
    path.write_bytes(data)
    # read_kv (the importer's) stops at the tensor descriptions: it never walks them
    for read in (read_fields,) if bomb.startswith("tensor") else (read_fields, read_kv):
        start = time.monotonic()
        with pytest.raises(GGUFHeaderError) as err:
            read(path)
        assert time.monotonic() - start < 1.0
        assert str(path) in str(err.value) and key in err.value.where and declared in str(err.value)
        if bomb != "nested-arrays":  # the declared size against what the file holds
            assert f"of the file's {len(data):,} bytes remain" in str(err.value)


def test_the_gate_names_the_key_of_a_gguf_bomb(tmp_path, no_library) -> None:
    from conformance.validate.gguf_file import read_gguf_checked

    path = tmp_path / "bomb.gguf"
    path.write_bytes(GGUF_BOMBS["int32-array-2e40"][0])
    with pytest.raises(InputError) as err:
        read_gguf_checked(path)
    assert "226 bytes (tokenizer.ggml.token_type: declares 1,099,511,627,776 INT32" in err.value.what


@pytest.mark.parametrize("command", ["import", "info"])
def test_gguf_int32_array_of_2e40_exits_2_at_once(tmp_path, command) -> None:
    (tmp_path / "bomb.gguf").write_bytes(GGUF_BOMBS["int32-array-2e40"][0])
    args = ("import", "bomb.gguf", "--out", "a.json") if command == "import" else ("info", "bomb.gguf")
    run = run_cli(*args, cwd=tmp_path, timeout=30)
    run.one_line_error("bomb.gguf", "tokenizer.ggml.token_type", "1,099,511,627,776 INT32", "226 bytes")
    assert run.seconds < 10 and run.peak_mib < 512, run


def test_a_fifo_or_a_link_out_as_the_gguf_is_refused_unopened(tmp_path) -> None:
    os.mkfifo(tmp_path / "fifo.gguf")  # opening it for reading would block forever
    run = run_cli("info", "fifo.gguf", cwd=tmp_path, timeout=20)
    run.one_line_error("fifo.gguf", "FIFO")
    (tmp_path / "zero.tiktoken").symlink_to("/dev/zero")  # read whole, it never ends
    run_cli("info", "zero.tiktoken", cwd=tmp_path, timeout=20).one_line_error("zero.tiktoken", "device")
    ckpt, secret = tmp_path / "ckpt", tmp_path / "secret.gguf"
    ckpt.mkdir()
    secret.write_bytes(SHIPPED_GGUF.read_bytes())
    (ckpt / "x.gguf").symlink_to(secret)
    with pytest.raises(UntrustedFileError, match="symlink to .*secret.gguf, outside"):
        read_fields(ckpt / "x.gguf", roots=(ckpt,))
    assert read_fields(ckpt / "x.gguf")[0]["tokenizer.ggml.model"] == ("gpt2", "STRING")  # named: read


# ------------------------------------------------------------------ .tiktoken
def test_a_100_mb_tiktoken_line_fails_in_seconds(tmp_path) -> None:
    with open(tmp_path / "x.tiktoken", "wb") as f:
        f.write(byte_ranks() + b"A" * (100 * MIB) + b" 256\n")
    argv = ("import", "x.tiktoken", "--out", "a.json", "--pattern", r"\S+|\s+")
    run = run_cli(*argv, cwd=tmp_path, timeout=30)  # over the 64 MiB limit: refused by its size
    run.one_line_error("x.tiktoken", "67,108,864-byte limit", "--max-file-mb")
    assert run.seconds < 10 and run.peak_mib < 512, run
    run = run_cli(*argv, "--max-file-mb", "200", cwd=tmp_path, timeout=30)  # read: the line is refused
    run.one_line_error("x.tiktoken", "line 257", "104,857,604 bytes long, over 1,024")
    assert run.seconds < 10 and run.peak_mib < 1024, run


def test_huge_ranks_are_refused_naming_the_line(tmp_path) -> None:
    from conformance.validate.tiktoken_file import parse_tiktoken

    (tmp_path / "x.tiktoken").write_bytes(byte_ranks() + b"YWI= " + b"9" * 1000 + b"\n")
    run = run_cli("import", "x.tiktoken", "--out", "a.json", "--pattern", ".", cwd=tmp_path, timeout=30)
    run.one_line_error("x.tiktoken", "line 257", "a rank of 1,000 digits")
    for digits, said in ((5000, "5,005 bytes long"), (1000, "rank has 1,000 digits")):  # the gate's parse
        with pytest.raises(InputError, match=said) as err:
            parse_tiktoken(tmp_path / "x.tiktoken", byte_ranks() + b"YWI= " + b"9" * digits + b"\n")
        assert err.value.where == "line 257"


# ------------------------------------------------------------------ stacktok import
def _import(capsys, *argv: str) -> tuple[int, str]:
    p = argparse.ArgumentParser(prog="stacktok import")
    importing.add_arguments(p)
    out = Path(tempfile.mkdtemp(prefix="stacktok-import-")) / "out.json"  # never into the working directory
    code = run_main(lambda: importing.main(p.parse_args([*argv, "--out", str(out)])), prog="stacktok")
    return code, capsys.readouterr().err


def _tokenizer_json(folder: Path, vocab: object, **extra: object) -> Path:
    folder.mkdir(exist_ok=True)
    body = {"model": {"type": "BPE", "vocab": vocab, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}
    (folder / "tokenizer.json").write_text(json.dumps({**body, **extra}))
    return folder


def test_a_special_id_must_be_an_id(tmp_path, capsys) -> None:
    (tmp_path / "x.tiktoken").write_bytes(byte_ranks())
    for number in ("9" * 5000, "\u00b2"):  # int() refuses the first, str.isdigit accepts the second
        code, err = _import(
            capsys, str(tmp_path / "x.tiktoken"), "--pattern", ".", "--special", f"<s>={number}"
        )
        assert code == 2 and "expected TOKEN=ID" in err and "internal error" not in err, err


def test_json_nested_100000_deep_is_exit_2(tmp_path) -> None:
    (tmp_path / "tokenizer.json").write_text("[" * 100_000 + "]" * 100_000)
    run = run_cli("import", ".", "--out", "a.json", cwd=tmp_path, timeout=30)
    run.one_line_error("tokenizer.json", "nested deeper than Python's JSON parser follows")


def test_a_vocabulary_without_its_byte_tokens_is_refused(tmp_path, capsys) -> None:
    from stacktok_export.split.bytelevel import to_chars

    def vocab(tokens: list[bytes]) -> dict[str, int]:
        return {to_chars(t): i for i, t in enumerate(tokens)}

    words = [f"word{i}".encode() for i in range(300)]
    code, err = _import(capsys, str(_tokenizer_json(tmp_path / "hf", vocab(words))))
    assert code == 2 and "no token for 209 of the single bytes text is made of (0x09" in err, err
    some = [bytes([b]) for b in range(256) if b not in range(0x80, 0x90)] + words[:16]
    code, err = _import(capsys, str(_tokenizer_json(tmp_path / "hf", vocab(some))))
    assert code == 2 and "no token for 16 of the single bytes" in err and "(0x80, 0x81" in err, err
    most = [bytes([b]) for b in range(256) if b not in (3, 0xF5)] + words[:2]
    code, err = _import(capsys, str(_tokenizer_json(tmp_path / "hf", vocab(most))))
    assert code == 0, err  # a control byte and one no UTF-8 holds: Falcon and DeepSeek lack such bytes


def test_a_vocabulary_over_the_entry_limit_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(limits, "_CURRENT", [limits.Limits(vocab_entries=1000)])
    with pytest.raises(ImportRefused, match="model.vocab: 32,759 entries, over the 1,000-entry limit"):
        read_source(ROOT / "tokenizer" / "stack100m-32768-hf")
    with pytest.raises(ImportRefused, match="ggml.tokens: declares 32,768 elements, over the 1,000-element"):
        read_source(SHIPPED_GGUF)


def _gguf_with(*entries: bytes) -> bytes:
    tokens = b"".join(_s(bytes([b])) for b in range(256))  # not byte-level strings: fine for a refusal
    return gguf(*GPT2, kv_array("tokenizer.ggml.tokens", 8, 256, tokens), *entries, tail=b"")


_DOUBLING = ["minbpe v1", "", "0", "97 97", *(f"{k} {k}" for k in range(256, 276))]  # to 2 MiB
#: malformed inputs of every reader: (file name, bytes, what the one line must say)
MALFORMED = {
    "gguf-tokens-of-ints": ("x.gguf", gguf(*GPT2, kv_array(T + "tokens", 5, 1, b"\0" * 4)), "tokens"),
    "gguf-bos-a-string": ("x.gguf", _gguf_with(kv_str(T + "bos_token_id", "9" * 5000)), "bos_token_id"),
    "gguf-flag-an-array": ("x.gguf", _gguf_with(kv_array(T + "add_bos_token", 5, 0)), "add_bos_token"),
    "gguf-key-not-utf8": ("x.gguf", gguf(*GPT2, _s(b"\xff\xfe") + struct.pack("<IB", 0, 1)), "key 2"),
    "gguf-value-type-99": ("x.gguf", gguf(*GPT2, _s("k.x") + struct.pack("<I", 99)), "value type 99"),
    "gguf-truncated": ("x.gguf", SHIPPED_GGUF.read_bytes()[:5000], "x.gguf"),
    "hf-id-5000-digits": ("hf", {"a": "9" * 5000}, "model.vocab"),
    "hf-vocab-a-list": ("hf", [1, 2], "model.vocab"),
    "hf-pretokenizers-an-int": ("hf", {}, "malformed (TypeError"),
    "minbpe-superscript-count": ("x.model", b"minbpe v1\n\n\xc2\xb2\n", "line 3"),
    "minbpe-more-specials-than-lines": ("x.model", b"minbpe v1\n\n999999\n", "999,999 special tokens"),
    "minbpe-doubling-merges": ("x.model", "\n".join(_DOUBLING).encode(), "makes a token of 131,072 bytes"),
    "seed004-string-merges": ("s.json", {"special_tokens": ["<s>"], "merges": [["x", "y"]]}, "merges[0]"),
    "seed004-5000-digit-key": ("s.json", {"special_tokens": [], "merges": {"9" * 5000 + ",1": 3}}, "merges"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_malformed_import_is_exit_2_naming_the_file(tmp_path, capsys, case) -> None:
    name, content, said = MALFORMED[case]
    if name == "hf":
        extra = {"pre_tokenizer": {"type": "Sequence", "pretokenizers": 5}} if "pretokenizers" in case else {}
        target = _tokenizer_json(tmp_path / "hf", content, **extra)
    else:
        target = tmp_path / name
        target.write_bytes(json.dumps(content).encode() if isinstance(content, dict) else content)
    code, err = _import(capsys, str(target))
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert str(target) in err and said in err, err


def test_files_beside_tokenizer_json_must_be_the_folders_own(tmp_path, capsys) -> None:
    (tmp_path / "secret").write_text("SECRET-7c2e {{ bos_token }}")
    hf = _tokenizer_json(tmp_path / "hf", {})
    (hf / "chat_template.jinja").symlink_to(tmp_path / "secret")
    code, err = _import(capsys, str(hf))
    assert code == 2 and "chat_template.jinja: file: is a symlink to" in err and "SECRET" not in err, err


# ------------------------------------------------------------------ stacktok pack
def test_a_zstd_bomb_of_3_gb_of_zero_lines_is_refused_at_its_first_document(tmp_path) -> None:
    zstd_file(tmp_path / "bomb.txt.zst", 3 << 30)
    run = run_cli("pack", "bomb.txt.zst", "--out", "pack", "--quiet", cwd=tmp_path, timeout=60)
    run.one_line_error("bomb.txt.zst", "over 67,108,864 bytes as one document", "--max-file-mb")
    assert run.seconds < 20 and run.peak_mib < 1024, run


@pytest.mark.parametrize(("mode", "chunk"), [("paragraph", b"0\n"), ("line", b"0")])
def test_a_zstd_bomb_without_document_breaks_is_refused_streaming(tmp_path, mode, chunk) -> None:
    zstd_file(tmp_path / "bomb.txt.zst", 3 << 30, chunk)
    argv = ("pack", "bomb.txt.zst", "--text-docs", mode, "--out", "pack", "--quiet")
    run = run_cli(*argv, cwd=tmp_path, timeout=60)
    where = "paragraph 1" if mode == "paragraph" else "line 1"
    run.one_line_error("bomb.txt.zst", "over 67,108,864 bytes as one", where)
    assert run.seconds < 10 and run.peak_mib < 1024, run


def test_a_zstd_of_short_lines_is_streamed_with_bounded_memory(tmp_path) -> None:
    # 2**19 one-byte documents: ~60k documents/s on 2 cores, so 3 GB of them (1.6e9) is hours of
    # real work, not a bomb; what must hold whatever the size is that memory does not grow with it
    zstd_file(tmp_path / "lines.txt.zst", 1 << 20)
    argv = ("pack", "lines.txt.zst", "--text-docs", "line", "--out", "pack", "--quiet")
    run = run_cli(*argv, cwd=tmp_path, timeout=60)
    assert run.code == 0 and "packed 524,288 documents, 1,572,864 tokens" in run.stdout, run
    assert run.peak_mib < 1024, run


def test_one_500_mb_jsonl_line_is_refused_fast_with_bounded_memory(tmp_path) -> None:
    with open(tmp_path / "big.jsonl", "wb") as f:
        f.write(b'{"text": "')
        for _ in range(125):
            f.write(b"a" * (4 * MIB))
        f.write(b'"}\n')
    run = run_cli("pack", "big.jsonl", "--out", "pack", "--quiet", cwd=tmp_path, timeout=60)
    run.one_line_error("big.jsonl: line 1", "over 67,108,864 bytes as one line", "--max-file-mb")
    assert run.seconds < 10 and run.peak_mib < 1024, run


def test_a_long_line_is_refused_before_it_is_whole() -> None:
    taken = []

    def blocks():
        for i in range(1000):
            taken.append(i)
            yield b"x" * 100

    with pytest.raises(CorpusError, match="f.txt: line 1: over 1,000 bytes as one line"):
        list(corpus_io.lines(blocks(), path="f.txt", limit=1000))
    assert len(taken) == 11  # refused at the block that passed the limit, not at the end
    assert list(corpus_io.lines([b"ab\nc", b"d\n", b"e"], path="f", limit=3)) == [
        (1, 0, b"ab"), (2, 3, b"cd"), (3, 6, b"e"),
    ]  # fmt: skip


def test_the_limit_follows_max_file_mb_into_the_pack(tmp_path, monkeypatch, capsys) -> None:
    import stacktok_export.pack
    from stacktok_cli import main

    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "ab " * 1000}) + "\n")
    monkeypatch.setattr(limits, "_CURRENT", [limits.Limits(corpus_line=2000)])
    argv = ["pack", str(tmp_path / "a.jsonl"), "--workers", "1", "--quiet", "--out"]
    assert main([*argv, str(tmp_path / "p1")]) == 2
    assert "a.jsonl: line 1: over 2,000 bytes as one line" in capsys.readouterr().err
    assert main([*argv, str(tmp_path / "p2"), "--max-file-mb", "1"]) == 0
    seen = []  # spawned and Ray workers read with the options' limit, not this process's
    monkeypatch.setattr(stacktok_export.pack, "pack", lambda paths, out, options: seen.append(options))
    main([*argv, str(tmp_path / "p3"), "--max-file-mb", "3"])
    assert seen[0].corpus.max_document == 3 * MIB


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'{"text": "a", "n": ' + b"9" * 5000 + b"}", "JSON Python cannot read (Exceeds the limit"),
        (b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "JSON Python cannot read (nested too deep)"),
    ],
)
def test_json_lines_python_cannot_parse_are_corpus_errors(tmp_path, line, said) -> None:
    (tmp_path / "a.jsonl").write_bytes(line + b"\n")
    with pytest.raises(CorpusError, match=re.escape(f"a.jsonl:1: {said}")):
        list(read_input(str(tmp_path / "a.jsonl")))


def test_replacing_invalid_utf8_is_linear() -> None:
    data = b"\xff" * (MIB // 4) + "é\ufffd".encode()  # a retry per error: ~10 s; one pass: ~1 ms
    start = time.monotonic()
    text, replaced = corpus.decode(data, errors="replace", where="w", offset=0)
    assert time.monotonic() - start < 1.0
    assert replaced == MIB // 4 and text.endswith("é\ufffd") and len(text) == MIB // 4 + 2


def test_pack_options_refuse_a_zero_document_limit() -> None:
    with pytest.raises(CorpusError, match="max_document must be at least 1 byte"):
        CorpusOptions(max_document=0)

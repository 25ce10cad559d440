"""The stacktok CLI: exit codes and messages, in a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SHIPPED


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacktok_cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
    )


def test_info_shows_layout() -> None:
    out = run("info", str(SHIPPED))
    assert out.returncode == 0, out.stderr
    assert "32,768" in out.stdout and "32,503" in out.stdout
    assert "32759  <|bos|>" in out.stdout and "32767  <|tool_result|>" in out.stdout


def test_info_json() -> None:
    out = run("info", str(SHIPPED), "--json")
    info = json.loads(out.stdout)
    assert info["vocab_size"] == 32768 and info["merges"] == 32503
    assert info["special_tokens"]["<|end|>"] == 32765


def test_encode_decode_round_trip() -> None:
    text = "hello <|assistant|> wörld"
    enc = run("encode", "--artifact", str(SHIPPED), "--json", text)
    ids = json.loads(enc.stdout)
    assert 32764 not in ids
    trusted = json.loads(run("encode", "--artifact", str(SHIPPED), "--json", "--allow-special", text).stdout)
    assert 32764 in trusted
    dec = run("decode", "--artifact", str(SHIPPED), "--no-newline", *map(str, ids))
    assert dec.stdout == text


def test_train_small(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    out = tmp_path / "toy.json"
    res = run("train", str(corpus), "--vocab-size", "512", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert "shortfall 215" in res.stdout
    info = json.loads(run("info", str(out), "--json").stdout)
    assert info["vocab_size"] == 512 and info["special_tokens"]["<|bos|>"] == 503


def test_train_from_stdin_with_budget(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    res = run(
        "train",
        "-",
        "--vocab-size",
        "300",
        "--max-bytes",
        "1000",
        "--out",
        str(out),
        "--quiet",
        stdin="abc abd " * 10_000,
    )
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["info", "/nonexistent.json"], "no such artifact"),
        (["train", "/nonexistent/*.txt", "--out", "x.json"], "matches no readable file"),
        (["train", "x", "--vocab-size", "10", "--out", "x.json"], "at least 265"),
        (["decode", "1", "two"], "must be integers"),
        (["decode", "99999"], "out of range"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_with_reason(args, message) -> None:
    res = run(*args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_corrupt_artifact_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = run("info", str(bad))
    assert res.returncode == 2 and "malformed JSON" in res.stderr

"""`stacktok export`: committed files are current, deterministic, atomic, and checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stacktok_export.export import check_exports, export_all, render_exports

from .conftest import ROOT, SHIPPED
from .helpers import build_checkpoint

EXPORTED = [
    "stack100m-32768.tiktoken",
    "stack100m-32768.gguf",
    "stack100m-32768-hf/tokenizer.json",
    "stack100m-32768-hf/tokenizer_config.json",
    "stack100m-32768-hf/special_tokens_map.json",
    "stack100m-32768-hf/chat_template.jinja",
    "stack100m-32768-hf/generation_config.json",
]


def test_committed_exports_are_current() -> None:
    assert check_exports(SHIPPED, ROOT / "tokenizer") == []


def test_render_is_deterministic(shipped_tok) -> None:
    assert render_exports(shipped_tok) == render_exports(shipped_tok)


def test_export_writes_every_file(tmp_path: Path) -> None:
    written = export_all(SHIPPED, tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in written) == sorted(EXPORTED)
    for rel in EXPORTED:
        assert (tmp_path / rel).read_bytes() == (ROOT / "tokenizer" / rel).read_bytes()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    return build_checkpoint(tmp_path / "tokenizer", source=ROOT / "tokenizer")


def test_check_catches_a_hand_edit(copy: Path) -> None:
    cfg = copy / "stack100m-32768-hf" / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace('"model_max_length": 8192', '"model_max_length": 4096'))
    problems = check_exports(SHIPPED, copy)
    assert len(problems) == 1 and "tokenizer_config.json differs" in problems[0]


def test_check_catches_a_missing_file(copy: Path) -> None:
    (copy / "stack100m-32768.gguf").unlink()
    assert any("stack100m-32768.gguf is missing" in p for p in check_exports(SHIPPED, copy))


def test_interrupted_export_leaves_previous_output(copy: Path, small_tok, monkeypatch) -> None:
    """Kill an export of a *different* artifact half-way through the HF directory."""
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    other = copy.parent / "stack100m-32768.json"
    small_tok.save(other)
    real_write = Path.write_bytes
    calls = []

    def flaky_write(self: Path, data: bytes) -> int:
        calls.append(self)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky_write)
    with pytest.raises(KeyboardInterrupt):
        export_all(other, copy)
    monkeypatch.undo()
    after = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in copy.iterdir() if p.name.startswith(".")] == []


def test_cli_check_exit_codes(copy: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "stacktok_cli",
        "export",
        "--check",
        "--artifact",
        str(copy / "stack100m-32768.json"),
        "--out",
        str(copy),
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (copy / "stack100m-32768.tiktoken").write_text("YQ== 0\n")
    bad = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "stack100m-32768.tiktoken differs" in bad.stdout
